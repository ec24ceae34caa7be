// Shared-memory addresses and accesses through PTX. A kernel that reaches shared memory only
// through volatile asm (these wrappers, cp.async, ldmatrix) keeps program order around its
// barriers without the compiler's help.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attnprof::kernels {

// The 32-bit shared-window address of a pointer into shared memory (what PTX's .shared takes).
__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void st_shared_b32(uint32_t address, uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(value));
}
__device__ __forceinline__ void st_shared_f32(uint32_t address, float value) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(address), "f"(value));
}
__device__ __forceinline__ float ld_shared_f32(uint32_t address) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(address));
  return v;
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}
__device__ __forceinline__ float4 ld_shared_f4(uint32_t address) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address));
  return v;
}

}  // namespace attnprof::kernels
