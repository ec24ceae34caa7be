// The Hopper-native forward kernel (sm_90a), generic over HopperTraits.
//
// One block of three warpgroups per (query tile of 128 rows, head, batch):
//   warpgroup 0, the producer: gives registers back (setmaxnreg.dec); one thread loads the Q
//     tile once and streams K and V tiles of 128 keys with TMA into a kStages-deep ring of
//     128-byte-swizzled shared-memory slots, each slot guarded by a "full" mbarrier (TMA bytes
//     landed) and an "empty" one (every consumer warp is done reading it).
//   warpgroups 1 and 2, the consumers: take registers (setmaxnreg.inc), 64 query rows each.
//     Per key tile:  S = Q K^T     wgmma m64n128k16, Q and K from shared-memory descriptors
//                    mask          only on tiles that hold a tail key or cross a band edge
//                    online softmax in registers (exp2 domain, quad shuffles for the row max)
//                    O += P V      wgmma m64nDk16, P from registers (the accumulator layout of
//                                  S is the A-fragment layout), V as stored (MN-major, B
//                                  transposed by the instruction)
// The score matrix never leaves registers; O is normalised once at the end and written
// straight from registers. Query head h reads K/V head h / group_size; a row that sees no key
// writes zeros and a logsumexp of -inf (as flash:fa2).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mask_bounds.hpp"
#include "flash_hopper/hopper_ptx.cuh"
#include "flash_hopper/register_budget.hpp"
#include "flash_hopper/wgmma_ops.cuh"

namespace attnprof::kernels::hopper {

template <typename ElementT, int kHeadDimT>
struct HopperTraits {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimT;
  static constexpr int kConsumers = kConsumerWarpgroups;
  static constexpr int kWarpgroupRows = 64;     // rows of one wgmma M
  static constexpr int kBlockM = kConsumers * kWarpgroupRows;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 2;
  static constexpr int kThreads = kHopperThreads;
  static constexpr int kProducerRegisters = hopper::kProducerRegisters;
  static constexpr int kConsumerRegisters = hopper::kConsumerRegisters;
  static constexpr int kAtoms = kHeadDim / 64;     // 128-byte (64-element) column blocks
  static constexpr int kAtomBytesQ = kBlockM * 128;
  static constexpr int kAtomBytesKV = kBlockN * 128;
  static constexpr int kQBytes = kAtoms * kAtomBytesQ;
  static constexpr int kTileBytes = kAtoms * kAtomBytesKV;
  static constexpr int kOffK = kQBytes;
  static constexpr int kOffV = kOffK + kStages * kTileBytes;
  static constexpr int kOffBarriers = kOffV + kStages * kTileBytes;
  static constexpr int kBarriers = 1 + 4 * kStages;
  static constexpr int kSmemBytes = kOffBarriers + 8 * kBarriers + 1024;  // + 1024: aligning the base
  static constexpr int kConsumerWarps = 4 * kConsumers;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dims 64 and 128");
};

// What the launch passes (by value, __grid_constant__: TMA reads the descriptors in place).
struct HopperKernelParams {
  CUtensorMap q_map;  // [batch * heads][seq_q][head_dim], boxes of 64 x 128 x 1
  CUtensorMap k_map;  // [batch * heads_kv][seq_kv][head_dim]
  CUtensorMap v_map;
  void* o = nullptr;
  float* lse = nullptr;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;
  int seq_q = 0;
  int seq_kv = 0;
  float scale = 0.f;
  float scale_log2 = 0.f;
  MaskBounds mask;
};

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <typename Element>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <typename Traits>
struct Barriers {
  uint32_t base;
  __device__ uint32_t full_q() const { return base; }
  __device__ uint32_t full_k(int s) const { return base + 8 * (1 + s); }
  __device__ uint32_t full_v(int s) const { return base + 8 * (1 + Traits::kStages + s); }
  __device__ uint32_t empty_k(int s) const { return base + 8 * (1 + 2 * Traits::kStages + s); }
  __device__ uint32_t empty_v(int s) const { return base + 8 * (1 + 3 * Traits::kStages + s); }
};

// The producer: one thread issues every TMA load of the block.
template <typename Traits>
__device__ __forceinline__ void produce(const HopperKernelParams& p, uint32_t base, Barriers<Traits> bars,
                                        const KeyTiles& tiles, int m_block, int head, int batch) {
  const int bh_q = batch * p.heads + head;
  const int bh_kv = batch * p.heads_kv + head / p.group_size;
  tma_prefetch_descriptor(&p.q_map);
  tma_prefetch_descriptor(&p.k_map);
  tma_prefetch_descriptor(&p.v_map);
  mbarrier_arrive_expect_tx(bars.full_q(), Traits::kQBytes);
#pragma unroll
  for (int a = 0; a < Traits::kAtoms; ++a)
    tma_load_3d(base + a * Traits::kAtomBytesQ, &p.q_map, bars.full_q(), 64 * a, m_block * Traits::kBlockM, bh_q);
  for (int n = tiles.begin, i = 0; n < tiles.end; ++n, ++i) {
    const int s = i % Traits::kStages;
    const uint32_t phase = (i / Traits::kStages) & 1;
    mbarrier_wait(bars.empty_k(s), phase ^ 1);
    mbarrier_arrive_expect_tx(bars.full_k(s), Traits::kTileBytes);
#pragma unroll
    for (int a = 0; a < Traits::kAtoms; ++a)
      tma_load_3d(base + Traits::kOffK + s * Traits::kTileBytes + a * Traits::kAtomBytesKV, &p.k_map, bars.full_k(s),
                  64 * a, n * Traits::kBlockN, bh_kv);
    mbarrier_wait(bars.empty_v(s), phase ^ 1);
    mbarrier_arrive_expect_tx(bars.full_v(s), Traits::kTileBytes);
#pragma unroll
    for (int a = 0; a < Traits::kAtoms; ++a)
      tma_load_3d(base + Traits::kOffV + s * Traits::kTileBytes + a * Traits::kAtomBytesKV, &p.v_map, bars.full_v(s),
                  64 * a, n * Traits::kBlockN, bh_kv);
  }
}

// One consumer warpgroup: 64 query rows against every key tile the producer streams.
template <typename Traits>
__device__ __forceinline__ void consume(const HopperKernelParams& p, uint32_t base, Barriers<Traits> bars,
                                        const KeyTiles& tiles, int m_block, int head, int batch, int consumer) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kOAcc = kHeadDim / 2;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // This thread's two rows (h = 0, 1: +8) and its first key column within a tile.
  const int row0 = m_block * Traits::kBlockM + consumer * Traits::kWarpgroupRows + warp * 16 + lane / 4;
  const int col0 = 2 * (lane % 4);

  float o[kOAcc];
#pragma unroll
  for (int i = 0; i < kOAcc; ++i) o[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};

  if (tiles.begin < tiles.end) {
    const uint32_t q_base = base + consumer * Traits::kWarpgroupRows * 128;
    mbarrier_wait(bars.full_q(), 0);
    float s_acc[Traits::kBlockN / 2];
    for (int n = tiles.begin, i = 0; n < tiles.end; ++n, ++i) {
      const int s = i % Traits::kStages;
      const uint32_t phase = (i / Traits::kStages) & 1;
      const uint32_t k_base = base + Traits::kOffK + s * Traits::kTileBytes;
      const uint32_t v_base = base + Traits::kOffV + s * Traits::kTileBytes;

      // S = Q K^T
      mbarrier_wait(bars.full_k(s), phase);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t offset = (kk / 4) * Traits::kAtomBytesQ + (kk % 4) * 32;
        const uint64_t desc_q = smem_descriptor(q_base + offset, 16, 1024);
        const uint64_t desc_k =
            smem_descriptor(k_base + (kk / 4) * Traits::kAtomBytesKV + (kk % 4) * 32, 16, 1024);
        Wgmma<Element>::ss_m64n128k16(s_acc, desc_q, desc_k, kk > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s_acc);
      __syncwarp();
      if (lane == 0) mbarrier_arrive(bars.empty_k(s));

      // Mask the tiles that hold a tail key or cross an edge of the band.
      if (n < tiles.unmasked_begin || n >= tiles.unmasked_end) {
#pragma unroll
        for (int j = 0; j < Traits::kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = n * Traits::kBlockN + 8 * j + col0 + (e & 1);
            const int row = row0 + 8 * (e >> 1);
            if (key >= p.seq_kv || !p.mask.sees(row, key)) s_acc[4 * j + e] = -INFINITY;
          }
      }

      // Online softmax, rescaling O by the change of each row's max.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = row_max[h];
#pragma unroll
        for (int j = 0; j < Traits::kBlockN / 8; ++j) mx = fmaxf(mx, fmaxf(s_acc[4 * j + 2 * h], s_acc[4 * j + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // A row with every key so far masked keeps max -inf; subtracting 0 then gives exp2(-inf) = 0.
        const float max_scaled = mx == -INFINITY ? 0.f : mx * p.scale_log2;
        const float correction = fast_exp2(row_max[h] * p.scale_log2 - max_scaled);
        row_max[h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < Traits::kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s_acc[4 * j + 2 * h + e];
            x = fast_exp2(fmaf(x, p.scale_log2, -max_scaled));
            sum += x;
          }
        row_sum[h] = row_sum[h] * correction + sum;
#pragma unroll
        for (int j = 0; j < kHeadDim / 8; ++j) {
          o[4 * j + 2 * h] *= correction;
          o[4 * j + 2 * h + 1] *= correction;
        }
      }

      // P as A fragments: k16 step kk takes the accumulator chunks 2kk and 2kk+1.
      uint32_t pa[Traits::kBlockN / 16][4];
#pragma unroll
      for (int kk = 0; kk < Traits::kBlockN / 16; ++kk) {
        pa[kk][0] = pack2<Element>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);
        pa[kk][1] = pack2<Element>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);
        pa[kk][2] = pack2<Element>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);
        pa[kk][3] = pack2<Element>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);
      }

      // O += P V
      mbarrier_wait(bars.full_v(s), phase);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Traits::kBlockN / 16; ++kk) {
        const uint64_t desc_v = smem_descriptor(v_base + kk * 16 * 128, Traits::kAtomBytesKV, 1024);
        if constexpr (kHeadDim == 128)
          Wgmma<Element>::rs_m64n128k16(o, pa[kk], desc_v, 1);
        else
          Wgmma<Element>::rs_m64n64k16(o, pa[kk], desc_v, 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o);
      __syncwarp();
      if (lane == 0) mbarrier_arrive(bars.empty_v(s));
    }
  }

  // Epilogue: O / l straight from registers; the logsumexp (natural log) of each row.
  const int64_t bh = static_cast<int64_t>(batch) * p.heads + head;
  Element* out = static_cast<Element*>(p.o) + bh * p.seq_q * kHeadDim;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inverse = sum > 0.f ? 1.f / sum : 0.f;
    const int row = row0 + 8 * h;
    if (row >= p.seq_q) continue;
    if (p.lse != nullptr && lane % 4 == 0)
      p.lse[bh * p.seq_q + row] = sum > 0.f ? row_max[h] * p.scale + logf(sum) : -INFINITY;
    Element* out_row = out + static_cast<int64_t>(row) * kHeadDim + col0;
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j)
      *reinterpret_cast<uint32_t*>(out_row + 8 * j) =
          pack2<Element>(o[4 * j + 2 * h] * inverse, o[4 * j + 2 * h + 1] * inverse);
  }
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) flash_hopper_fwd_kernel(const __grid_constant__ HopperKernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const Barriers<Traits> bars{base + Traits::kOffBarriers};
  // The heaviest query tiles (the last ones, under a causal band) start first.
  const int m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int batch = static_cast<int>(blockIdx.z);
  const KeyTiles tiles =
      key_tiles(p.mask, p.seq_q, p.seq_kv, m_block * Traits::kBlockM, Traits::kBlockM, Traits::kBlockN);

  if (threadIdx.x == 0) {
    mbarrier_init(bars.full_q(), 1);
    for (int s = 0; s < Traits::kStages; ++s) {
      mbarrier_init(bars.full_k(s), 1);
      mbarrier_init(bars.full_v(s), 1);
      mbarrier_init(bars.empty_k(s), Traits::kConsumerWarps);
      mbarrier_init(bars.empty_v(s), Traits::kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x / 128);
  if (warpgroup == 0) {
    release_registers<Traits::kProducerRegisters>();
    if (threadIdx.x == 0 && tiles.begin < tiles.end) produce<Traits>(p, base, bars, tiles, m_block, head, batch);
    return;
  }
  claim_registers<Traits::kConsumerRegisters>();
  consume<Traits>(p, base, bars, tiles, m_block, head, batch, warpgroup - 1);
#endif
}

}  // namespace attnprof::kernels::hopper
