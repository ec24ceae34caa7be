// Reductions into global memory that no thread reads back (red, not atom: no return value).
#pragma once

#include <cuda_runtime.h>

namespace attnprof::kernels {

// dst[0] += a, dst[1] += b (dst 8-byte aligned): one vector reduction on sm_90, two atomics before.
__device__ __forceinline__ void red_add_f32x2(float* dst, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(dst), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

}  // namespace attnprof::kernels
