// The Hopper-native backward main kernel (sm_90a), flash:hopper's: the wgmma counterpart of
// flash_bwd_dq_dk_dv_kernel, between the same pre-pass (D = rowsum(dO O), lse in log2 units, the
// fp32 dQ accumulator zeroed) and the same dQ conversion (kernels/flash_bwd).
//
// One block of two warpgroups per (128 keys, K/V head, sequence), in flash_bwd_grid's order. K and
// V arrive once by TMA; the block then walks the 64-row query tiles that see its keys (every query
// head of the K/V head's group), Q and dO in three stages loaded by TMA two steps ahead, the rows'
// lse and D by cp.async beside them. Warpgroup w owns keys 64w .. 64w + 63. Per step:
//   S^T  = K_w Q^T      wgmma m64n64k16, both operands K-major in shared memory
//   dP^T = V_w dO^T     the same
//   P^T  = exp2(S^T scale log2 e - lse), masked where the tile needs it; dS^T = P^T (dP^T - D) scale
//   dV  += P^T dO       wgmma m64n128k16, P^T from registers (the accumulator layout of S^T is the
//   dK  += dS^T Q       A-fragment layout), dO and Q as stored (MN-major, B transposed)
//   dQ   = dS K         dS^T through shared memory (both warpgroups' keys), wgmma m64n64k16 with
//                       both operands MN-major: warpgroup w takes head-dim columns 64w .. 64w + 63;
//                       added to the accumulator with red.global.add.v2.f32
// dK and dV stay in registers for the whole walk (64 + 64 floats a thread) and are stored at the end.
// The one block-wide barrier of a step stands between dS^T's stores and dQ: past it, both warpgroups
// are done with the step before, so its stage takes the loads of the step after next, and dS^T is
// double-buffered; no barrier stands at the step's top, so a warpgroup may start its S^T while the
// other still adds the step before's dQ (measured -3.5% against a barrier there: docs/perf/NOTES.md).
// Shared tiles are the 128-byte-swizzled layout TMA writes (64-element column blocks, rows of 128
// bytes); dS^T is written in that layout by the threads and fenced to the async proxy.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cp_async.cuh"
#include "common/fast_math.cuh"
#include "common/global_atomics.cuh"
#include "common/shared_memory.cuh"
#include "core/mask_bounds.hpp"
#include "flash_bwd/flash_bwd_order.hpp"
#include "flash_hopper/flash_hopper_kernel.cuh"  // HopperProblem
#include "flash_hopper/hopper_ptx.cuh"
#include "flash_hopper/wgmma_ops.cuh"

namespace attnprof::kernels::hopper {

// The kernel's name as CUPTI records it.
inline constexpr const char* kHopperBwdKernelName = "flash_hopper_bwd_kernel";

template <typename ElementT, int kHeadDimT>
struct HopperBwdTraits {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimT;
  static constexpr int kBlockN = kFlashBwdBlockKeys;  // keys per block: 64 per warpgroup
  static constexpr int kBlockM = kFlashBwdBlockRows;  // query rows per step
  static constexpr int kThreads = 256;
  static constexpr int kAtoms = kHeadDim / 64;  // 128-byte column blocks
  static constexpr int kAtomBytesKV = kBlockN * 128;
  static constexpr int kAtomBytesQ = kBlockM * 128;
  static constexpr int kKVBytes = kAtoms * kAtomBytesKV;
  static constexpr int kQBytes = kAtoms * kAtomBytesQ;
  static constexpr int kStages = 3;  // Q, dO, lse, D: loaded two steps ahead
  // Layout (1024-aligned): K | V | Q[3] | dO[3] | dS^T[2] | lse[3][kBlockM] | D[3][kBlockM] | barriers
  static constexpr int kOffK = 0;
  static constexpr int kOffV = kOffK + kKVBytes;
  static constexpr int kOffQ = kOffV + kKVBytes;
  static constexpr int kOffDO = kOffQ + kStages * kQBytes;
  static constexpr int kOffDS = kOffDO + kStages * kQBytes;
  static constexpr int kDSBytes = kBlockN * kBlockM * 2;  // [keys][query rows], one 128-byte block wide
  static constexpr int kOffLse = kOffDS + 2 * kDSBytes;
  static constexpr int kOffDsum = kOffLse + kStages * kBlockM * 4;
  static constexpr int kOffBarriers = kOffDsum + kStages * kBlockM * 4;
  static constexpr int kSmemBytes = kOffBarriers + 8 * (1 + kStages) + 1024;  // + 1024: aligning the base
  static constexpr int kDqCols = kHeadDim / 2;                    // dQ columns per warpgroup
  static_assert(kHeadDim == 128, "head dim 128 (dQ: each warpgroup one 64-column block)");
  static_assert(kBlockM == 64 && kBlockN == 128, "one m64 tile of rows a step, two of keys a block");
};

struct HopperBwdParams {
  CUtensorMap q_map;   // [batch * heads][seq_q][head_dim], boxes of 64 x kBlockM x 1
  CUtensorMap do_map;  // the same for dO
  CUtensorMap k_map;   // [batch * heads_kv][seq_kv][head_dim], boxes of 64 x kBlockN x 1
  CUtensorMap v_map;
  const float* lse_log2 = nullptr;  // [batch, heads, seq_q], from the pre-pass
  const float* d_sum = nullptr;
  float* dq_accum = nullptr;  // [batch, heads, seq_q, head_dim] fp32, zeroed by the pre-pass
  void* dk = nullptr;         // [batch, heads_kv, seq_kv, head_dim]
  void* dv = nullptr;
  HopperProblem problem;
};

// Makes this thread's generic-proxy shared-memory writes visible to the async proxy (wgmma reading
// dS^T through a descriptor).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1) flash_hopper_bwd_kernel(const __grid_constant__ HopperBwdParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = shared_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int warp = (tid % 128) / 32;
  const int lane = tid % 32;
  const int g = lane / 4;  // the accumulator's row within the warp's 16 (and + 8)
  const int t = lane % 4;  // its column pair

  // The block's key block, K/V head and sequence (flash_bwd_grid's order).
  const FlashBwdBlock block = flash_bwd_block(p.problem.mask, p.problem.seq_kv, blockIdx.x, blockIdx.y, blockIdx.z);
  const int key_block = block.key_block;
  const int kv_head = block.kv_head;
  const int b = block.b;
  const int key0 = key_block * kBlockN;
  const int keys_here = min(kBlockN, p.problem.seq_kv - key0);
  const int bh_kv = b * p.problem.heads_kv + kv_head;

  // The query rows whose band reaches these keys, in tiles of kBlockM; every head of the group.
  int first_row = 0, last_row = -1;
  flash_bwd_query_span(p.problem.mask, key0, key0 + keys_here - 1, p.problem.seq_q, &first_row, &last_row);
  const int tile0 = first_row / kBlockM;
  const int tiles_per_head = last_row >= first_row ? last_row / kBlockM + 1 - tile0 : 0;
  const int steps = tiles_per_head * p.problem.group_size;

  const uint32_t bar_kv = base + Traits::kOffBarriers;
  auto bar_full = [&](int stage) { return bar_kv + 8 * (1 + stage); };
  if (tid == 0) {
    mbarrier_init(bar_kv, 1);
    for (int stage = 0; stage < Traits::kStages; ++stage) mbarrier_init(bar_full(stage), 1);
    mbarrier_init_fence();
  }
  __syncthreads();

  // A step's Q and dO tiles by TMA (thread 0) and its rows' lse and D by cp.async (threads 0-127;
  // rows past seq_q get 0 for both, and the element mask zeroes their P).
  auto load_step = [&](int head_in_group, int tile, int stage) {
    const int bh = b * p.problem.heads + kv_head * p.problem.group_size + head_in_group;
    const int row0 = (tile0 + tile) * kBlockM;
    if (tid == 0) {
      mbarrier_arrive_expect_tx(bar_full(stage), 2 * Traits::kQBytes);
#pragma unroll
      for (int a = 0; a < Traits::kAtoms; ++a) {
        tma_load_3d(base + Traits::kOffQ + stage * Traits::kQBytes + a * Traits::kAtomBytesQ, &p.q_map, bar_full(stage),
                    64 * a, row0, bh);
        tma_load_3d(base + Traits::kOffDO + stage * Traits::kQBytes + a * Traits::kAtomBytesQ, &p.do_map,
                    bar_full(stage), 64 * a, row0, bh);
      }
    }
    if (tid < 2 * kBlockM) {
      const int r = tid % kBlockM;
      const bool ok = row0 + r < p.problem.seq_q;
      const float* src =
          (tid < kBlockM ? p.lse_log2 : p.d_sum) + (ok ? static_cast<int64_t>(bh) * p.problem.seq_q + row0 + r : 0);
      const uint32_t dst = base + (tid < kBlockM ? Traits::kOffLse : Traits::kOffDsum) + (stage * kBlockM + r) * 4;
      cp_async_4_zfill(dst, src, ok);
    }
  };

  float dk[kHeadDim / 2], dv[kHeadDim / 2];
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i) dk[i] = dv[i] = 0.f;

  const float* lse_s = reinterpret_cast<const float*>(smem + Traits::kOffLse);
  const float* dsum_s = reinterpret_cast<const float*>(smem + Traits::kOffDsum);
  // This warpgroup's 64 keys: rows 64 wg .. of the K and V tiles (8 KB into each column block).
  const uint64_t desc_k0 = smem_descriptor(base + Traits::kOffK + wg * 64 * 128, 16, 1024);
  const uint64_t desc_v0 = smem_descriptor(base + Traits::kOffV + wg * 64 * 128, 16, 1024);
  // dQ's B: column block wg of K, MN-major (keys are its k dimension).
  const uint64_t desc_kt0 = smem_descriptor(base + Traits::kOffK + wg * Traits::kAtomBytesKV, Traits::kAtomBytesKV, 1024);
  // This thread's two keys (h = 0, 1: + 8) within the block.
  const int key_local = wg * 64 + warp * 16 + g;

  // The walk: step = head_in_group * tiles_per_head + tile, as counters. The loads (load_next) run
  // two steps ahead of the step being computed.
  int load_head = 0, load_tile = 0;
  auto load_next = [&](int step) {  // loads step `step` (the counters' position) into its stage
    load_step(load_head, load_tile, step % Traits::kStages);
    if (++load_tile == tiles_per_head) {
      load_tile = 0;
      ++load_head;
    }
  };
  // S^T and dP^T of the step whose tiles are in `stage`: 64 keys x 64 query rows each, issued.
  float s[32], dp[32];
  auto issue_sdp = [&](int stage) {
    const uint64_t desc_q0 = smem_descriptor(base + Traits::kOffQ + stage * Traits::kQBytes, 16, 1024);
    const uint64_t desc_do0 = smem_descriptor(base + Traits::kOffDO + stage * Traits::kQBytes, 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t kv_step = (kk / 4) * Traits::kAtomBytesKV + (kk % 4) * 32;
      const uint32_t q_step = (kk / 4) * Traits::kAtomBytesQ + (kk % 4) * 32;
      Wgmma<Element>::ss_m64n64k16(s, advance_descriptor(desc_k0, kv_step), advance_descriptor(desc_q0, q_step),
                                   kk > 0 ? 1 : 0);
    }
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t kv_step = (kk / 4) * Traits::kAtomBytesKV + (kk % 4) * 32;
      const uint32_t q_step = (kk / 4) * Traits::kAtomBytesQ + (kk % 4) * 32;
      Wgmma<Element>::ss_m64n64k16(dp, advance_descriptor(desc_v0, kv_step), advance_descriptor(desc_do0, q_step),
                                   kk > 0 ? 1 : 0);
    }
    wgmma_commit();
  };

  if (steps > 0) {
    if (tid == 0) {
      tma_prefetch_descriptor(&p.q_map);
      tma_prefetch_descriptor(&p.do_map);
      mbarrier_arrive_expect_tx(bar_kv, 2 * Traits::kKVBytes);
#pragma unroll
      for (int a = 0; a < Traits::kAtoms; ++a) {
        tma_load_3d(base + Traits::kOffK + a * Traits::kAtomBytesKV, &p.k_map, bar_kv, 64 * a, key0, bh_kv);
        tma_load_3d(base + Traits::kOffV + a * Traits::kAtomBytesKV, &p.v_map, bar_kv, 64 * a, key0, bh_kv);
      }
    }
    load_next(0);
    if (steps > 1) load_next(1);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();  // steps 0 and 1's lse and D for every thread
    mbarrier_wait(bar_kv, 0);
  }

  int head_in_group = 0, tile = 0;
  for (int step = 0; step < steps; ++step) {
    const int stage = step % Traits::kStages;
    const int row0 = (tile0 + tile) * kBlockM;
    const int h = kv_head * p.problem.group_size + head_in_group;
    if (++tile == tiles_per_head) {
      tile = 0;
      ++head_in_group;
    }
    const uint32_t q_tile = base + Traits::kOffQ + stage * Traits::kQBytes;
    const uint32_t do_tile = base + Traits::kOffDO + stage * Traits::kQBytes;
    const uint32_t ds_tile = base + Traits::kOffDS + (step & 1) * Traits::kDSBytes;

    // P^T: element (j, e) of s is key key_local + 8 (e / 2), query row 8 j + 2 t + e % 2.
    const float* lse_t = lse_s + stage * kBlockM;
    const float* dsum_t = dsum_s + stage * kBlockM;
    // This step's tiles were loaded two steps ago; no barrier of the whole block stands before its
    // S^T and dP^T (the other warpgroup may still be adding the step before's dQ).
    mbarrier_wait(bar_full(stage), (step / Traits::kStages) & 1);
    issue_sdp(stage);
    wgmma_wait<1>();
    fence_registers(s);
    const bool whole = row0 + kBlockM <= p.problem.seq_q && key0 + kBlockN <= p.problem.seq_kv &&
                       p.problem.mask.sees(row0 + kBlockM - 1, key0) && p.problem.mask.sees(row0, key0 + kBlockN - 1);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 lse = *reinterpret_cast<const float2*>(lse_t + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float& x = s[4 * j + e];
        x = exp2_approx(fmaf(x, p.problem.scale_log2, -((e & 1) ? lse.y : lse.x)));
        if (!whole) {
          const int key = key0 + key_local + 8 * (e >> 1);
          const int query = row0 + 8 * j + 2 * t + (e & 1);
          if (!(key < p.problem.seq_kv && query < p.problem.seq_q && p.problem.mask.sees(query, key))) x = 0.f;
        }
      }
    }
    // dS^T = P^T (dP^T - D) scale.
    wgmma_wait<0>();
    fence_registers(dp);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float2 d = *reinterpret_cast<const float2*>(dsum_t + 8 * j + 2 * t);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dp[4 * j + e] = s[4 * j + e] * (dp[4 * j + e] - ((e & 1) ? d.y : d.x)) * p.problem.scale;
    }
    // As A fragments (k16 step kk takes accumulator chunks 2 kk and 2 kk + 1), and dS^T to shared
    // memory as [key][query row], 128-byte swizzled: chunk j of row key at chunk j ^ (key % 8).
    uint32_t pa[4][4], dsa[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        pa[kk][r] = pack2<Element>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
        dsa[kk][r] = pack2<Element>(dp[8 * kk + 2 * r], dp[8 * kk + 2 * r + 1]);
      }
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int key = key_local + 8 * hh;
        const uint32_t at = ds_tile + key * 128 + ((j ^ (key & 7)) << 4) + 4 * t;
        // (j, hh) is A fragment register r = hh + 2 (j % 2) of k16 step j / 2.
        st_shared_b32(at, dsa[j / 2][hh + 2 * (j % 2)]);
      }
    fence_proxy_async_shared();

    // dV += P^T dO, dK += dS^T Q (query rows are the k dimension: 16 a step).
    {
      const uint64_t desc_do = smem_descriptor(do_tile, Traits::kAtomBytesQ, 1024);
      const uint64_t desc_q = smem_descriptor(q_tile, Traits::kAtomBytesQ, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk)
        Wgmma<Element>::rs_m64n128k16(dv, pa[kk], advance_descriptor(desc_do, kk * 16 * 128), 1);
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk)
        Wgmma<Element>::rs_m64n128k16(dk, dsa[kk], advance_descriptor(desc_q, kk * 16 * 128), 1);
      wgmma_commit();
    }

    // Both warpgroups' dS^T are in shared memory, both are past the step before (its tiles' stage
    // is free: the step two ahead loads into it), and the next step's lse and D (this thread's
    // copies waited for here) are visible after the barrier.
    cp_async_wait_all();
    named_barrier_sync(1, Traits::kThreads);
    if (step + 2 < steps) load_next(step + 2);
    cp_async_commit();

    // dQ = dS K.
    float dq[32];
    {
      const uint64_t desc_ds0 = smem_descriptor(ds_tile, Traits::kDSBytes, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        Wgmma<Element>::ss_m64n64k16_tt(dq, advance_descriptor(desc_ds0, kk * 16 * 128),
                                        advance_descriptor(desc_kt0, kk * 16 * 128), kk > 0 ? 1 : 0);
      wgmma_commit();
    }
    wgmma_wait<0>();
    fence_registers(dq);
    fence_registers(dk);
    fence_registers(dv);
    fence_registers(pa);
    fence_registers(dsa);

    // dQ rows warp * 16 + g (+ 8), columns 64 wg + 8 j + 2 t: two floats a reduction.
    const int64_t row_base = (static_cast<int64_t>(b) * p.problem.heads + h) * p.problem.seq_q;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int query = row0 + warp * 16 + g + 8 * hh;
      if (query >= p.problem.seq_q) continue;
      float* dst = p.dq_accum + (row_base + query) * kHeadDim + wg * Traits::kDqCols + 2 * t;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        red_add_f32x2(dst + 8 * j, dq[4 * j + 2 * hh], dq[4 * j + 2 * hh + 1]);
    }
  }
  cp_async_wait_all();

  // dK and dV of the block's keys: rows key_local (+ 8), columns 8 j + 2 t.
  const int64_t kv_offset = (static_cast<int64_t>(bh_kv) * p.problem.seq_kv + key0) * kHeadDim;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = key_local + 8 * hh;
    if (key >= keys_here) continue;
    Element* dk_row = static_cast<Element*>(p.dk) + kv_offset + static_cast<int64_t>(key) * kHeadDim + 2 * t;
    Element* dv_row = static_cast<Element*>(p.dv) + kv_offset + static_cast<int64_t>(key) * kHeadDim + 2 * t;
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      *reinterpret_cast<uint32_t*>(dk_row + 8 * j) = pack2<Element>(dk[4 * j + 2 * hh], dk[4 * j + 2 * hh + 1]);
      *reinterpret_cast<uint32_t*>(dv_row + 8 * j) = pack2<Element>(dv[4 * j + 2 * hh], dv[4 * j + 2 * hh + 1]);
    }
  }
#endif
}

}  // namespace attnprof::kernels::hopper
