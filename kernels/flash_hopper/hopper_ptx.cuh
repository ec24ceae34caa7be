// PTX wrappers that only the Hopper kernels use (sm_90a): mbarriers, TMA tile loads, wgmma fences
// and shared-memory matrix descriptors, register reallocation, named barriers. The generic ones
// (shared addresses, cp.async, exp2, packing) come from kernels/common. Only compiled where
// __CUDA_ARCH_FEAT_SM90_ALL is defined (the flash_hopper target builds for sm_90a).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace attnprof::kernels::hopper {

// ---------------------------------------------------------------------------------------------
// mbarriers (one 8-byte word each in shared memory)

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA) before anyone uses them.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of TMA traffic the phase must wait for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase of parity `parity` has completed. A barrier starts in phase 0, so
// waiting on parity 1 returns at once: the producer's first pass over empty slots.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// The same, but a thread whose phase has not completed sleeps (up to kSuspendNs, a hint) until it
// does instead of returning at once: for waits that are often long (the producer's empty slots),
// where polling takes issue slots from the consumer warps on the same sub-partition (measured
// 2026-12-06 on an H100 80GB HBM3, CUDA 13.0: level to -0.6%, docs/perf/NOTES.md).
__device__ __forceinline__ void mbarrier_wait_sleep(uint32_t bar, uint32_t parity) {
  constexpr uint32_t kSuspendNs = 20000;
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity), "r"(kSuspendNs)
        : "memory");
  } while (done == 0);
}

// ---------------------------------------------------------------------------------------------
// TMA

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// One 3-D box of `map` at coordinates (c0, c1, c2) into L2 only (no shared memory, no barrier):
// warms data a later tma_load_3d will want.
__device__ __forceinline__ void tma_prefetch_l2_3d(const CUtensorMap* map, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// One 3-D box of `map` at coordinates (c0, c1, c2) into shared memory at `dst`; completes
// its bytes on `bar`. Out-of-bounds elements arrive as zeros and still count.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ---------------------------------------------------------------------------------------------
// wgmma ordering

// Orders this warpgroup's prior register writes (accumulators, A fragments) before the next
// wgmma.mma_async reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across the async wgmma window.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// The same for register A fragments an asynchronous wgmma may still be reading: keeps them
// live (and in place) until after the wait.
template <int M, int N>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// A shared-memory matrix descriptor for a 128-byte-swizzled tile (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B: rows of 128 bytes, 8-row groups of 1024 bytes, 1024-aligned).
// K-major operands (Q, K) step 32 bytes along K per k16 and ignore the leading offset; the
// stride offset is the 1024 bytes between 8-row groups. MN-major V: the leading offset is the
// distance between 64-element column blocks, the stride offset between 8-row groups along K.
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address, uint32_t leading_bytes, uint32_t stride_bytes) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((address & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16;
  desc |= static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32;
  desc |= static_cast<uint64_t>(1) << 62;  // 128-byte swizzle
  return desc;
}

// The descriptor of the tile `bytes` further on in shared memory: only the address field (bits
// 0-13, the address / 16) changes, and a shared address below 256 KB never carries out of it.
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// ---------------------------------------------------------------------------------------------
// Register reallocation between warpgroups (all threads of the warpgroup execute it).

template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// Named barrier over `threads` threads (a multiple of 32), id 1-15 (0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace attnprof::kernels::hopper
