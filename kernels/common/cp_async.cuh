// Asynchronous global -> shared copies (cp.async, sm_80): issue, commit in groups, wait. The
// destination is a shared_address() (common/shared_memory.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attnprof::kernels {

// 16 bytes global -> shared, bypassing L1.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// As cp_async_16, but when !valid no global byte is read (src-size 0) and the 16 shared bytes
// are zero-filled, so the tails of tiles hold zeros, never garbage. `src` must still be a valid
// address.
__device__ __forceinline__ void cp_async_16_zfill(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// An L2 cache policy that marks every line it touches evict-first: for data read exactly once
// (a decode kernel's K/V stream), so it leaves L2 before anything that is read again. Not
// volatile: the policy is a pure value, so the compiler may build it once and keep it.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// As cp_async_16_zfill, with an L2 cache policy from l2_evict_first_policy().
__device__ __forceinline__ void cp_async_16_zfill(uint32_t dst, const void* src, bool valid, uint64_t policy) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes), "l"(policy)
               : "memory");
}

// 4 bytes global -> shared through L1 (a row's lse or D beside its tiles); zero-filled when !valid.
__device__ __forceinline__ void cp_async_4_zfill(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// cp_async_wait<0>() spelled with the count in the instruction text: the same instruction, but
// without the immediate operand NVVM places nearby constant moves differently, and the kernels that
// use it were tuned with this spelling.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

}  // namespace attnprof::kernels
