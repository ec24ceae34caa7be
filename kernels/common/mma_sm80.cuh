// The sm_80 tensor-core path: ldmatrix / stmatrix between swizzled shared tiles and registers,
// and mma.sync m16n8k16 with fp32 accumulators, in the fragment layouts of the PTX ISA ("Matrix
// Fragments for mma.m16n8k16 with floating point type"). bf16 and fp16 operands.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace attnprof::kernels {

// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j, and register j of
// lane t receives row t/4, columns 2(t%4), 2(t%4)+1 of matrix j.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// As ldmatrix_x4, transposed: register j of lane t receives rows 2(t%4), 2(t%4)+1, column t/4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The inverse of ldmatrix_x4 (sm_90): register j of lane t goes to row t/4, columns 2(t%4),
// 2(t%4)+1 of matrix j, whose row addresses lanes 8j..8j+7 give.
__device__ __forceinline__ void stmatrix_x4(uint32_t address, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3));
}

// d += a * b for one m16n8k16 tile, fp32 accumulation.
template <typename Element>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<Element, __nv_bfloat16> || std::is_same_v<Element, __half>);
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace attnprof::kernels
