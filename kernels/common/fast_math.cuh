// The softmax's arithmetic primitives: exp2 on the SFU, and probabilities packed two to a
// register in the input's 16-bit type (the A-fragment layout of mma.sync and wgmma).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace attnprof::kernels {

// MUFU.EX2 directly; exp2(-inf) = +0, which masked scores and the online softmax rely on. Not
// volatile: a pure value the compiler may schedule freely.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats -> one register of two 16-bit values, `low` in bits 0..15 (the element with the
// smaller column index in every mma fragment).
template <typename Element>
__device__ __forceinline__ uint32_t pack2(float low, float high) {
  static_assert(std::is_same_v<Element, __nv_bfloat16> || std::is_same_v<Element, __half>);
  uint32_t bits;
  if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    bits = *reinterpret_cast<const uint32_t*>(&pair);
  } else {
    const __half2 pair = __floats2half2_rn(low, high);
    bits = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return bits;
}

}  // namespace attnprof::kernels
