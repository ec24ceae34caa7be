// flash's backward kernels (see flash_bwd.hpp for the three roles), generic over FlashBwdTraits.
//
// Main kernel, one block of 8 warps per (128 keys, K/V head, sequence). K and V of the block's
// keys are loaded once; the block then walks tiles of kBlockM query rows (64; 128 for flash at head
// dim 64) of every query head of the group, only those whose band reaches the keys, Q and dO
// double-buffered with cp.async (with the rows' lse and D as the pre-pass left them). Each step
// has three phases, each with its own arrangement of the 8 warps over the tile, so that a warp
// reads only the rows and columns of its part (FlashAttention-2's layout):
//   1. S = Q K^T and dP = dO V^T, warps kBlockM / 32 (query rows) x the rest (keys), 32 rows each; then
//      P = exp2(S * scale * log2 e - lse * log2 e) (masked elements 0) and dS = P (dP - D) * scale,
//      both to shared memory as [query][key]; a tile that every row sees whole skips the mask
//   2. dV += P^T dO and dK += dS^T Q, warps 4 (keys) x 2 (halves of the head dim): P^T and dS^T
//      by ldmatrix.trans of P and dS; dK and dV stay in registers for the whole walk
//   3. dQ = dS K, warps kBlockM / 32 (query rows) x the rest (parts of the head dim), added to the fp32
//      accumulator (red.global.add, two floats at a time); the fused kernel and d64 run it between
//      dV and dK instead (FlashAttention-2's order, Traits::kDqBetweenDvAndDk)
// Under a causal mask the blocks start heaviest first (flash_bwd_order.hpp); the fused kernel's
// blocks start their walks at staggered row tiles. Without a mask band, the last partial wave of
// blocks can go to the tail kernel (flash_bwd_tail_plan), whose blocks walk equal runs of their
// steps: parts of the same body (WalkPart), added up by the last part to arrive.
// Shared tiles are rows of 16-byte chunks, chunk c of row r stored at chunk c ^ (r % 8) (no
// ldmatrix bank conflicts). Fused (Traits::kFused, the efficient backend's): D comes from an O
// tile each step, and the block that brings a tile of dQ rows its last addition converts them
// (flash_bwd.hpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/cp_async.cuh"
#include "common/dependent_launch.cuh"
#include "common/fast_math.cuh"
#include "common/global_atomics.cuh"
#include "common/log2e.hpp"
#include "common/mma_sm80.cuh"
#include "common/shared_memory.cuh"
#include "core/mask_bounds.hpp"
#include "flash_bwd/flash_bwd.hpp"

namespace attnprof::kernels::flash_bwd {

// Four floats as four elements of the input's type, for one 8-byte store (dQ out of its fp32
// accumulator).
template <typename Element>
__device__ __forceinline__ uint2 pack4(float4 v) {
  return make_uint2(pack2<Element>(v.x, v.y), pack2<Element>(v.z, v.w));
}

template <typename Element_, int kHeadDim_, bool kFused_>
struct FlashBwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kFused = kFused_;  // D from an O tile, dQ converted by the last block
  // The step's dQ between dV and dK (FlashAttention-2's order) or after both (measured per
  // variant: docs/perf/NOTES.md).
  static constexpr bool kDqBetweenDvAndDk = kFused_ || kHeadDim_ == 64;
  // P and dS to shared memory by stmatrix (sm_90) or four-byte stores: measured per variant
  // (stmatrix -0.7% for flash at d128, +0.5-1.6% for the fused kernel and d64: docs/perf/NOTES.md).
  static constexpr bool kStoreMatrix = !kFused_ && kHeadDim_ == 128;
  static constexpr int kBlockN = kFlashBwdBlockKeys;  // keys per block: 16 per warp
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  // Query rows per step. The fused kernel's dQ tiles (its arrival counters) are kFlashBwdBlockRows;
  // flash at head dim 64 walks 128 rows a step (FlashAttention-2's choice there): half the steps,
  // barriers and lse/D copies, for accumulators that still fit beside dK and dV.
  static constexpr int kBlockM = flash_bwd_step_rows(kHeadDim_, kFused_);
  // Phase 1 (S, dP) and phase 3 (dQ): kWarpsM warps over the rows, 32 rows each; the rest over the
  // keys (phase 1) or the head dim (phase 3).
  static constexpr int kWarpsM = kBlockM / 32;
  static constexpr int kKeysPerWarp = kBlockN / (kWarps / kWarpsM);
  static constexpr int kNT = kKeysPerWarp / 8;  // phase 1: n8 key tiles per warp
  // log2 of the warps beside kWarpsM: shifts and masks, not signed division, keep the d128 code as
  // measured (a division perturbed its register allocation: +3.6% at 4096).
  static constexpr int kWarpsNShift = kWarpsM == 2 ? 2 : 1;
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kKVTileBytes = kBlockN * kRowBytes;
  static constexpr int kQTileBytes = kBlockM * kRowBytes;
  static constexpr int kPRowBytes = kBlockN * static_cast<int>(sizeof(Element));  // P, dS: queries x keys
  // Layout: K | V | Q[2] | dO[2] | O[2] (fused) | P | dS | lse[2][kBlockM] | D[2][kBlockM]
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKVTileBytes;
  static constexpr int kQ = kV + kKVTileBytes;
  static constexpr int kDO = kQ + 2 * kQTileBytes;
  static constexpr int kO = kDO + 2 * kQTileBytes;
  static constexpr int kP = kO + (kFused ? 2 * kQTileBytes : 0);
  static constexpr int kDS = kP + kBlockM * kPRowBytes;
  static constexpr int kLse = kDS + kBlockM * kPRowBytes;
  static constexpr int kDsum = kLse + 2 * kBlockM * 4;
  static constexpr int kSmemBytes = kDsum + 2 * kBlockM * 4;
  static constexpr int kDTiles = kHeadDim / 8;  // n8 tiles over the head dim
  static constexpr int kDqTiles = kDTiles / (kWarps / kWarpsM);  // phase 3: a warp's share of the head dim
  static_assert(2 * kBlockM <= kThreads, "a step's lse and D rows take one thread each");
  static_assert(!kFused || kBlockM == kFlashBwdBlockRows, "the fused kernel's dQ tiles are its steps");
  static_assert(kHeadDim % 64 == 0 && kBlockN == 128 && (kBlockM == 64 || kBlockM == 128) && kWarps == 8 &&
                    kNT % 2 == 0 && kDqTiles % 2 == 0,
                "the phases' warp layouts: kWarpsM x (8 / kWarpsM) over the rows x 128 keys, 4 x 2 over 128 keys x "
                "the head dim, kWarpsM x (8 / kWarpsM) over the rows x the head dim");
};

// Swizzled shared address of 16-byte chunk `chunk` of row `row` in a tile of kRowBytes rows.
template <int kRowBytes>
__device__ __forceinline__ uint32_t swizzled(uint32_t tile, int row, int chunk) {
  return tile + static_cast<uint32_t>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

// kRows rows of a [.., seq, head_dim] tensor from `base` (rows past `valid` zero-filled) into a
// swizzled tile; every thread of the block takes its share of the 16-byte chunks.
template <typename Traits, int kRows>
__device__ __forceinline__ void copy_rows(uint32_t tile, const typename Traits::Element* base, int valid, int tid) {
  static_assert(kRows * Traits::kChunksPerRow % Traits::kThreads == 0, "whole passes of the block");
  // Straight-line, a compile-time count of passes: the runtime loop's trip-count code showed in
  // Nsight Compute's stall samples.
#pragma unroll
  for (int pass = 0; pass < kRows * Traits::kChunksPerRow / Traits::kThreads; ++pass) {
    const int index = pass * Traits::kThreads + tid;
    const int row = index / Traits::kChunksPerRow;
    const int chunk = index % Traits::kChunksPerRow;
    const bool ok = row < valid;
    cp_async_16_zfill(swizzled<Traits::kRowBytes>(tile, row, chunk),
                      base + (ok ? static_cast<int64_t>(row) * Traits::kHeadDim + chunk * 8 : 0), ok);
  }
}


// dK and dV of a block's keys in registers: phase 2's part of them.
template <typename Traits>
using KeyGradients = float[2][Traits::kDTiles / 2][4];

template <typename Traits>
__device__ __forceinline__ void store_dk_dv(const FlashBwdParams& p, int64_t kv_offset, int keys_here,
                                            const KeyGradients<Traits>& dk, const KeyGradients<Traits>& dv, int warp,
                                            int lane);
template <typename Traits>
__device__ __forceinline__ void finish_tail_part(const FlashBwdParams& p, int j, int cta, int64_t kv_offset,
                                                 int keys_here, const KeyGradients<Traits>& dk,
                                                 const KeyGradients<Traits>& dv, int warp, int lane);

// A part of a block's walk, the tail kernel's (flash_bwd_tail_plan): tail block j, steps
// [walk_begin, walk_end) of its row tiles, walked by tail CTA `cta`.
struct WalkPart {
  FlashBwdBlock block;
  int j, walk_begin, walk_end, cta;
};

// The main kernel's body (kPart: the tail kernel's part of one); its kernels below give the
// variants their names in a trace.
template <typename Traits, bool kPart = false>
__device__ __forceinline__ void dq_dk_dv_block(const FlashBwdParams& p, [[maybe_unused]] const WalkPart& part = {}) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kDTiles = Traits::kDTiles;
  constexpr int kRowBytes = Traits::kRowBytes;
  constexpr int kPRowBytes = Traits::kPRowBytes;
  constexpr int kHalfTiles = kDTiles / 2;  // phase 2: a warp's share of the head dim
  constexpr int kNT = Traits::kNT;
  constexpr int kDqTiles = Traits::kDqTiles;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = shared_address(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // The block's key block, K/V head and sequence (the grid's order: flash_bwd_grid).
  const FlashBwdBlock block =
      kPart ? part.block : flash_bwd_block(p.mask, p.seq_kv, blockIdx.x, blockIdx.y, blockIdx.z);
  const int key_block = block.key_block;
  const int kv_head = block.kv_head;
  const int b = block.b;
  const int key0 = key_block * kBlockN;
  const int keys_here = min(kBlockN, p.seq_kv - key0);
  const int64_t kv_offset = ((static_cast<int64_t>(b) * p.heads_kv + kv_head) * p.seq_kv + key0) * kHeadDim;

  // The query rows whose band reaches these keys, in tiles of kBlockM; every head of the group.
  int first_row = 0, last_row = -1;
  flash_bwd_query_span(p.mask, key0, key0 + keys_here - 1, p.seq_q, &first_row, &last_row);
  const int tile0 = first_row / kBlockM;
  const int tiles_per_head = last_row >= first_row ? last_row / kBlockM + 1 - tile0 : 0;
  const int steps = kPart ? part.walk_end - part.walk_begin : tiles_per_head * p.group_size;

  // Phase 2's part: keys 32 (warp % 4) + 16 mt + ..., head-dim tiles (warp / 4) * kHalfTiles + dt.
  float dk[2][kHalfTiles][4], dv[2][kHalfTiles][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int dt = 0; dt < kHalfTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[mt][dt][e] = dv[mt][dt][e] = 0.f;

  // K and V once; then step 0's Q, dO, lse and D.
  copy_rows<Traits, kBlockN>(base + Traits::kK, static_cast<const Element*>(p.k) + kv_offset, keys_here, tid);
  copy_rows<Traits, kBlockN>(base + Traits::kV, static_cast<const Element*>(p.v) + kv_offset, keys_here, tid);
  float* lse_s = reinterpret_cast<float*>(smem + Traits::kLse);
  float* dsum_s = reinterpret_cast<float*>(smem + Traits::kDsum);
  // A step's query head and row tile: step = head_in_group * tiles_per_head + tile (counters
  // stepped along with the walk, not divided out).
  auto load_step = [&](int head_in_group, int tile, int stage) {
    const int h = kv_head * p.group_size + head_in_group;
    const int row0 = (tile0 + tile) * kBlockM;
    const int64_t row_base = (static_cast<int64_t>(b) * p.heads + h) * p.seq_q + row0;
    const int valid = min(kBlockM, p.seq_q - row0);
    copy_rows<Traits, kBlockM>(base + Traits::kQ + stage * Traits::kQTileBytes,
                               static_cast<const Element*>(p.q) + row_base * kHeadDim, valid, tid);
    copy_rows<Traits, kBlockM>(base + Traits::kDO + stage * Traits::kQTileBytes,
                               static_cast<const Element*>(p.d_o) + row_base * kHeadDim, valid, tid);
    if constexpr (Traits::kFused)
      copy_rows<Traits, kBlockM>(base + Traits::kO + stage * Traits::kQTileBytes,
                                 static_cast<const Element*>(p.o) + row_base * kHeadDim, valid, tid);
    if constexpr (Traits::kFused) {
      // lse in log2 units, +inf for rows past seq_q and rows that saw no key (P = exp2(-inf) =
      // 0); D is computed from the O tile.
      if (const int i = tid; i < kBlockM) {
        const float lse = i < valid ? p.lse[row_base + i] : -INFINITY;
        lse_s[stage * kBlockM + i] = lse == -INFINITY ? INFINITY : lse * kLog2e;
      }
    } else {
      // lse (log2 units, +inf for a row without keys) and D as the pre-pass left them, copied
      // with the step's tiles: no thread waits on a global load before the step's barrier. Rows
      // past seq_q get 0 for both; their Q and dO rows are zero, so P is finite and dS 0 there,
      // and the element mask zeroes them anyway.
      if (const int i = tid; i < 2 * kBlockM) {
        const int r = i % kBlockM;
        const bool ok = r < valid;
        const float* src = (i < kBlockM ? p.lse_log2 : p.d_sum) + (ok ? row_base + r : 0);
        const uint32_t dst = base + (i < kBlockM ? Traits::kLse : Traits::kDsum) + (stage * kBlockM + r) * 4;
        cp_async_4_zfill(dst, src, ok);
      }
    }
  };
  // The fused kernel's blocks start their walks at their own row tiles (and wrap around): the key
  // blocks of a head would otherwise all add into the same dQ rows at the same time (measured -4
  // to -8% there; no gain for flash's, whose d64 lost 0.5-3%: docs/perf/NOTES.md).
  const int tile_start = Traits::kFused && tiles_per_head > 0 ? key_block % tiles_per_head : 0;
  // A part of the walk starts at step walk_begin = head * tiles_per_head + tile.
  const int head_begin = kPart ? part.walk_begin / tiles_per_head : 0;
  const int tile_begin = kPart ? part.walk_begin - head_begin * tiles_per_head : tile_start;
  if (steps > 0) load_step(head_begin, tile_begin, 0);
  cp_async_commit();

  const float scale_log2 = p.scale * kLog2e;
  const int g = lane >> 2;  // the C fragment's row within the warp's 16 (and + 8)
  const int t = lane & 3;   // its column pair
  int next_head = head_begin, next_tile = tile_begin, next_walked = tile_begin - tile_start;
  for (int step = 0; step < steps; ++step) {
    const int stage = step & 1;
    // This step's head and tile, and the next step's.
    const int head_in_group = next_head, tile = next_tile;
    if (++next_tile == tiles_per_head) next_tile = 0;
    if (++next_walked == tiles_per_head) {
      next_walked = 0;  // next_tile is back at tile_start
      ++next_head;
    }
    cp_async_wait<0>();
    // This step's tiles (and K, V) are in shared memory for every warp, and every warp is done
    // with the previous step, so its stage can take the next step's tiles: before this barrier a
    // warp could still be reading that stage's Q and dO in the previous step's phase 2.
    __syncthreads();
    if (step + 1 < steps) load_step(next_head, next_tile, stage ^ 1);
    cp_async_commit();

    const uint32_t q_tile = base + Traits::kQ + stage * Traits::kQTileBytes;
    const uint32_t do_tile = base + Traits::kDO + stage * Traits::kQTileBytes;
    if constexpr (Traits::kFused) {
      // D = rowsum(dO * O) of the step's rows: four threads per row, a quarter of its chunks each.
      const uint32_t o_tile = base + Traits::kO + stage * Traits::kQTileBytes;
      const int row = tid >> 2;
      constexpr int kQuarter = Traits::kChunksPerRow / 4;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < kQuarter; ++c) {
        const int chunk = (tid & 3) * kQuarter + c;
        const uint4 a = *reinterpret_cast<const uint4*>(smem + (swizzled<kRowBytes>(do_tile, row, chunk) - base));
        const uint4 o = *reinterpret_cast<const uint4*>(smem + (swizzled<kRowBytes>(o_tile, row, chunk) - base));
        const Element* ae = reinterpret_cast<const Element*>(&a);
        const Element* oe = reinterpret_cast<const Element*>(&o);
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += static_cast<float>(ae[j]) * static_cast<float>(oe[j]);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if ((tid & 3) == 0) dsum_s[stage * kBlockM + row] = sum;
      __syncthreads();
    }
    const uint32_t k_tile = base + Traits::kK;
    const uint32_t v_tile = base + Traits::kV;
    const int row0 = (tile0 + tile) * kBlockM;
    const int h = kv_head * p.group_size + head_in_group;

    const uint32_t p_tile = base + Traits::kP;
    const uint32_t ds_tile = base + Traits::kDS;
    const float* lse_t = lse_s + stage * kBlockM;
    const float* dsum_t = dsum_s + stage * kBlockM;

    // Phase 1: S and dP for query rows 32 wm + 16 mt + ..., keys kKeysPerWarp wn + 8 nt + ...
    {
      const int wm = warp >> Traits::kWarpsNShift, wn = warp & ((1 << Traits::kWarpsNShift) - 1);
      const int key_w = wn * Traits::kKeysPerWarp;
      float sc[2][kNT][4], dp[2][kNT][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[mt][nt][e] = dp[mt][nt][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        uint32_t qa[2][4], doa[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const int row = wm * 32 + mt * 16 + (lane & 15);
          ldmatrix_x4(qa[mt], swizzled<kRowBytes>(q_tile, row, 2 * kk + (lane >> 4)));
          ldmatrix_x4(doa[mt], swizzled<kRowBytes>(do_tile, row, 2 * kk + (lane >> 4)));
        }
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          uint32_t kb[4], vb[4];
          const int key = key_w + np * 16 + ((lane >> 4) << 3) + (lane & 7);
          ldmatrix_x4(kb, swizzled<kRowBytes>(k_tile, key, 2 * kk + ((lane >> 3) & 1)));
          ldmatrix_x4(vb, swizzled<kRowBytes>(v_tile, key, 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma_16816<Element>(sc[mt][2 * np], qa[mt], kb[0], kb[1]);
            mma_16816<Element>(sc[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
            mma_16816<Element>(dp[mt][2 * np], doa[mt], vb[0], vb[1]);
            mma_16816<Element>(dp[mt][2 * np + 1], doa[mt], vb[2], vb[3]);
          }
        }
      }
      // P and dS; element (mt, nt, e): row 32 wm + 16 mt + g + 8 (e / 2), key key_w + 8 nt + 2t + e % 2.
      // A tile every row of which sees every key (inside seq_q, seq_kv and the mask's band) skips
      // the per-element test: in a long non-causal backward that is every tile but the edges.
      auto probabilities = [&](auto masked) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = wm * 32 + mt * 16 + g + 8 * half;
            const int query = row0 + r;
            const float lse = lse_t[r];
            const float d_scaled = dsum_t[r] * p.scale;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            constexpr bool kStoreMatrix = Traits::kStoreMatrix;
#else
            constexpr bool kStoreMatrix = false;
#endif
            [[maybe_unused]] uint32_t p_packed[kNT], ds_packed[kNT];  // for stmatrix
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              float prob[2], grad[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                prob[e] = exp2_approx(sc[mt][nt][2 * half + e] * scale_log2 - lse);
                if constexpr (decltype(masked)::value) {
                  const int key = key0 + key_w + nt * 8 + 2 * t + e;
                  if (!(key < p.seq_kv && query < p.seq_q && p.mask.sees(query, key))) prob[e] = 0.f;
                }
                grad[e] = prob[e] * (dp[mt][nt][2 * half + e] * p.scale - d_scaled);
              }
              if constexpr (kStoreMatrix) {
                p_packed[nt] = pack2<Element>(prob[0], prob[1]);
                ds_packed[nt] = pack2<Element>(grad[0], grad[1]);
              } else {
                const uint32_t at = swizzled<kPRowBytes>(0, r, wn * kNT + nt) + 4 * t;
                st_shared_b32(p_tile + at, pack2<Element>(prob[0], prob[1]));
                st_shared_b32(ds_tile + at, pack2<Element>(grad[0], grad[1]));
              }
            }
            if constexpr (kStoreMatrix) {
              // The fragments of four n8 key tiles are four 8 x 8 matrices: one stmatrix each for
              // P and dS (lane l gives the address of row l % 8 of matrix l / 8).
#pragma unroll
              for (int n4 = 0; n4 < kNT / 4; ++n4) {
                const uint32_t at = swizzled<kPRowBytes>(0, wm * 32 + mt * 16 + 8 * half + (lane & 7),
                                                         wn * kNT + 4 * n4 + (lane >> 3));
                stmatrix_x4(p_tile + at, p_packed[4 * n4], p_packed[4 * n4 + 1], p_packed[4 * n4 + 2],
                            p_packed[4 * n4 + 3]);
                stmatrix_x4(ds_tile + at, ds_packed[4 * n4], ds_packed[4 * n4 + 1], ds_packed[4 * n4 + 2],
                            ds_packed[4 * n4 + 3]);
              }
            }
          }
      };
      const bool whole = row0 + kBlockM <= p.seq_q && key0 + kBlockN <= p.seq_kv &&
                         p.mask.sees(row0 + kBlockM - 1, key0) && p.mask.sees(row0, key0 + kBlockN - 1);
      if (whole) probabilities(std::false_type{});
      else probabilities(std::true_type{});
    }
    __syncthreads();  // P and dS are whole in shared memory

    // Phase 2: dV += P^T dO, dK += dS^T Q for keys 32 wk + 16 mt + ..., head-dim tiles dt0 + ...
    auto phase2 = [&](auto with_dv, auto with_dk) {
      const int wk = warp & 3;
      const int dt0 = (warp >> 2) * kHalfTiles;
      const int j = lane >> 3;
#pragma unroll
      for (int kq = 0; kq < kBlockM / 16; ++kq) {
        uint32_t pa[2][4], dsa[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          // A = P^T: P's rows are the k (query) dimension, its columns the m (key) rows.
          const int row = kq * 16 + ((j >> 1) << 3) + (lane & 7);
          const int chunk = wk * 4 + mt * 2 + (j & 1);
          if constexpr (decltype(with_dv)::value) ldmatrix_x4_trans(pa[mt], swizzled<kPRowBytes>(p_tile, row, chunk));
          if constexpr (decltype(with_dk)::value) ldmatrix_x4_trans(dsa[mt], swizzled<kPRowBytes>(ds_tile, row, chunk));
        }
#pragma unroll
        for (int dp2 = 0; dp2 < kHalfTiles / 2; ++dp2) {
          uint32_t dob[4], qb[4];
          const int row = kq * 16 + (((lane >> 3) & 1) << 3) + (lane & 7);
          if constexpr (decltype(with_dv)::value)
            ldmatrix_x4_trans(dob, swizzled<kRowBytes>(do_tile, row, dt0 + 2 * dp2 + (lane >> 4)));
          if constexpr (decltype(with_dk)::value)
            ldmatrix_x4_trans(qb, swizzled<kRowBytes>(q_tile, row, dt0 + 2 * dp2 + (lane >> 4)));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            if constexpr (decltype(with_dv)::value) {
              mma_16816<Element>(dv[mt][2 * dp2], pa[mt], dob[0], dob[1]);
              mma_16816<Element>(dv[mt][2 * dp2 + 1], pa[mt], dob[2], dob[3]);
            }
            if constexpr (decltype(with_dk)::value) {
              mma_16816<Element>(dk[mt][2 * dp2], dsa[mt], qb[0], qb[1]);
              mma_16816<Element>(dk[mt][2 * dp2 + 1], dsa[mt], qb[2], qb[3]);
            }
          }
        }
      }
    };

    // Phase 3: dQ = dS K for query rows 32 wq + 16 mt + ..., head-dim tiles dq0 + ...
    auto phase3 = [&]() {
      const int wq = warp >> Traits::kWarpsNShift;
      const int dq0 = (warp & ((1 << Traits::kWarpsNShift) - 1)) * kDqTiles;
      float dq[2][kDqTiles][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int dt = 0; dt < kDqTiles; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) dq[mt][dt][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          ldmatrix_x4(a[mt], swizzled<kPRowBytes>(ds_tile, wq * 32 + mt * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
        for (int dp2 = 0; dp2 < kDqTiles / 2; ++dp2) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, swizzled<kRowBytes>(k_tile, kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7),
                                                    dq0 + 2 * dp2 + (lane >> 4)));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma_16816<Element>(dq[mt][2 * dp2], a[mt], kb[0], kb[1]);
            mma_16816<Element>(dq[mt][2 * dp2 + 1], a[mt], kb[2], kb[3]);
          }
        }
      }
      const int64_t row_base = (static_cast<int64_t>(b) * p.heads + h) * p.seq_q;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int query = row0 + wq * 32 + mt * 16 + g + 8 * half;
          if (query >= p.seq_q) continue;
          float* dst = p.dq_accum + (row_base + query) * kHeadDim + dq0 * 8 + 2 * t;
#pragma unroll
          for (int dt = 0; dt < kDqTiles; ++dt) {
            red_add_f32x2(dst + dt * 8, dq[mt][dt][2 * half], dq[mt][dt][2 * half + 1]);
          }
        }
    };
    if constexpr (Traits::kDqBetweenDvAndDk) {
      // FlashAttention-2's order: the dQ reductions drain under the dK products.
      phase2(std::true_type{}, std::false_type{});
      phase3();
      phase2(std::false_type{}, std::true_type{});
    } else {
      phase2(std::true_type{}, std::true_type{});
      phase3();
    }
    if constexpr (Traits::kFused) {
      // Count this block in for the tile's dQ rows; the last of its key blocks converts them.
      __shared__ bool last;
      __threadfence();  // this block's adds are visible device-wide before it counts itself in
      __syncthreads();
      const int tile = row0 / kBlockM;
      const int64_t tile_index = (static_cast<int64_t>(b) * p.heads + h) * ((p.seq_q + kBlockM - 1) / kBlockM) + tile;
      if (tid == 0) last = atomicAdd(p.dq_arrivals + tile_index, 1) == p.dq_tile_arrivals[tile] - 1;
      __syncthreads();
      if (last) {
        __threadfence();
        const int64_t row_base = (static_cast<int64_t>(b) * p.heads + h) * p.seq_q + row0;
        const int rows = min(kBlockM, p.seq_q - row0);
        for (int index = tid; index < rows * kHeadDim / 4; index += Traits::kThreads) {
          const float4 v = __ldcg(reinterpret_cast<const float4*>(p.dq_accum + row_base * kHeadDim) + index);
          reinterpret_cast<uint2*>(static_cast<Element*>(p.dq) + row_base * kHeadDim)[index] = pack4<Element>(v);
        }
      }
    }
    // The next step's loads go to the other stage; this step's Q/dO/dS^T are overwritten only
    // after the barrier at its top, which every warp reaches after finishing here.
  }
  cp_async_wait<0>();

  // dK and dV of the block's keys: stored, or a part of them (the tail's) added up.
  if constexpr (kPart) {
    if (part.walk_begin > 0 || part.walk_end < tiles_per_head * p.group_size) {
      finish_tail_part<Traits>(p, part.j, part.cta, kv_offset, keys_here, dk, dv, warp, lane);
      return;
    }
  }
  store_dk_dv<Traits>(p, kv_offset, keys_here, dk, dv, warp, lane);
}

// dK and dV of the keys of the block at kv_offset (dS was scaled already: dK = scale dS^T Q). The
// caller's warp and lane: the main kernel's code stays as measured (recomputing them here changed
// its shifts' signedness, and ptxas's schedule with it: +2%).
template <typename Traits>
__device__ __forceinline__ void store_dk_dv(const FlashBwdParams& p, int64_t kv_offset, int keys_here,
                                            const KeyGradients<Traits>& dk, const KeyGradients<Traits>& dv, int warp,
                                            int lane) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kHalfTiles = Traits::kDTiles / 2;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int wk = warp & 3;
  const int dt0 = (warp >> 2) * kHalfTiles;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = wk * 32 + mt * 16 + g + 8 * half;
      if (key >= keys_here) continue;
      const int64_t at = kv_offset + static_cast<int64_t>(key) * kHeadDim + dt0 * 8 + 2 * t;
      Element* dk_row = static_cast<Element*>(p.dk) + at;
      Element* dv_row = static_cast<Element*>(p.dv) + at;
#pragma unroll
      for (int dt = 0; dt < kHalfTiles; ++dt) {
        *reinterpret_cast<uint32_t*>(dk_row + dt * 8) = pack2<Element>(dk[mt][dt][2 * half], dk[mt][dt][2 * half + 1]);
        *reinterpret_cast<uint32_t*>(dv_row + dt * 8) = pack2<Element>(dv[mt][dt][2 * half], dv[mt][dt][2 * half + 1]);
      }
    }
}

template <typename Traits>
__device__ __forceinline__ void zero(KeyGradients<Traits>& x) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int dt = 0; dt < Traits::kDTiles / 2; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) x[mt][dt][e] = 0.f;
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads) flash_bwd_dq_dk_dv_kernel(const __grid_constant__ FlashBwdParams p) {
  static_assert(!Traits::kFused);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async, bf16 mma.sync and ldmatrix need sm_80
#else
  // The tail kernel (a programmatic dependent launch) may start once every block of this grid has
  // started: its blocks take the SMs this grid's last blocks leave.
  griddepcontrol_launch_dependents();
  // Blocks from p.tail.first_block on (grid order: key blocks fastest) are the tail kernel's.
  if (p.tail.blocks > 0 &&
      static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) >= p.tail.first_block)
    return;
  dq_dk_dv_block<Traits>(p);
#endif
}

// A part of tail block j (CTA `cta`'s) is done: its dK and dV go to the part's slot; the last
// part to arrive adds every part's, in CTA order (the same sums whatever the arrival order), and
// stores them.
template <typename Traits>
__device__ __forceinline__ void finish_tail_part(const FlashBwdParams& p, int j, int cta, int64_t kv_offset,
                                                 int keys_here, const KeyGradients<Traits>& dk,
                                                 const KeyGradients<Traits>& dv, int warp, int lane) {
  constexpr int kHalfTiles = Traits::kDTiles / 2;
  constexpr int kThreads = Traits::kThreads;
  constexpr int kPartFloat4s = 2 * 2 * kHalfTiles;  // dK then dV, float4s per thread
  static_assert(kThreads * kPartFloat4s * 4 == kFlashBwdThreads * Traits::kHeadDim,
                "flash_bwd_tail_part_floats counts this part");
  const int tid = static_cast<int>(threadIdx.x);
  auto part = [&](int c) {
    return reinterpret_cast<float4*>(p.tail_parts) +
           static_cast<int64_t>(flash_bwd_tail_slot(p.tail, c, j)) * kThreads * kPartFloat4s + tid;
  };
  float4* mine = part(cta);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int dt = 0; dt < kHalfTiles; ++dt) {
      mine[(mt * kHalfTiles + dt) * kThreads] = make_float4(dk[mt][dt][0], dk[mt][dt][1], dk[mt][dt][2], dk[mt][dt][3]);
      mine[((2 + mt) * kHalfTiles + dt) * kThreads] =
          make_float4(dv[mt][dt][0], dv[mt][dt][1], dv[mt][dt][2], dv[mt][dt][3]);
    }
  int first = 0, last = 0;
  flash_bwd_tail_ctas(p.tail, j, &first, &last);
  __shared__ bool is_last;
  __threadfence();  // this part is visible device-wide before it counts itself in
  __syncthreads();
  if (tid == 0) is_last = atomicAdd(p.tail_arrivals + j, 1) == last - first;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // Every part from its slot, this one's too (its registers are dead by now: fewer live at once).
  KeyGradients<Traits> sum_k, sum_v;
  zero<Traits>(sum_k);
  zero<Traits>(sum_v);
  for (int c = first; c <= last; ++c) {
    const float4* from = part(c);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int dt = 0; dt < kHalfTiles; ++dt) {
        const float4 k4 = __ldcg(from + (mt * kHalfTiles + dt) * kThreads);
        const float4 v4 = __ldcg(from + ((2 + mt) * kHalfTiles + dt) * kThreads);
        sum_k[mt][dt][0] += k4.x;
        sum_k[mt][dt][1] += k4.y;
        sum_k[mt][dt][2] += k4.z;
        sum_k[mt][dt][3] += k4.w;
        sum_v[mt][dt][0] += v4.x;
        sum_v[mt][dt][1] += v4.y;
        sum_v[mt][dt][2] += v4.z;
        sum_v[mt][dt][3] += v4.w;
      }
  }
  store_dk_dv<Traits>(p, kv_offset, keys_here, sum_k, sum_v, warp, lane);
}

// flash's tail (flash_bwd_tail_plan): CTA c walks steps [begin(c), begin(c + 1)) of the last
// p.tail.blocks blocks, flattened in block order; a block it walks whole it stores itself.
// Launched as a programmatic dependent of the main kernel; it waits for that grid before it ends,
// so that what follows in the stream (the dQ conversion) sees both grids' additions.
template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads) flash_bwd_dq_dk_dv_tail_kernel(const __grid_constant__ FlashBwdParams p) {
  static_assert(!Traits::kFused);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // launched on sm_90 only (flash_backward)
#else
  const FlashBwdTail& t = p.tail;
  const int cta = static_cast<int>(blockIdx.x);
  const long long run_end = t.begin(cta + 1);
  const int key_blocks = flash_bwd_key_blocks(p.seq_kv);
  for (long long s = t.begin(cta); s < run_end;) {
    WalkPart part;
    part.j = static_cast<int>(s / t.steps);
    const long long block_start = static_cast<long long>(part.j) * t.steps;
    part.walk_begin = static_cast<int>(s - block_start);
    part.walk_end = static_cast<int>(min(static_cast<long long>(t.steps), run_end - block_start));
    part.cta = cta;
    const int linear = t.first_block + part.j;
    part.block = {linear % key_blocks, (linear / key_blocks) % p.heads_kv, linear / key_blocks / p.heads_kv};
    __syncthreads();  // every warp is done with the previous part's shared memory
    dq_dk_dv_block<Traits, true>(p, part);
    s = block_start + part.walk_end;
  }
  griddepcontrol_wait();
#endif
}

// The efficient backend's backward: the whole backward in one kernel (after a memset).
template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads) efficient_bwd_fused_kernel(const __grid_constant__ FlashBwdParams p) {
  static_assert(Traits::kFused);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  dq_dk_dv_block<Traits>(p);
#endif
}

// D = rowsum(dO * O) for each query row (one warp per row), the row's lse in log2 units, and that
// row of the dQ accumulator zeroed (block 0 also zeroes the tail's arrival counters); a row that
// saw no key (lse -inf) gets D = 0 and lse +inf (its P is 0). Each lane moves its kHeadDim / 32
// elements in one load per tensor and its floats in one store (8- and 16-byte accesses at d128).
template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(256) flash_bwd_dot_do_o_kernel(const __grid_constant__ FlashBwdParams p) {
  constexpr int kPerLane = kHeadDim / 32;
  static_assert(kPerLane == 2 || kPerLane == 4, "head dims 64 and 128");
  using Packed = std::conditional_t<kPerLane == 4, uint2, uint32_t>;  // kPerLane elements
  using Zeros = std::conditional_t<kPerLane == 4, float4, float2>;    // kPerLane floats
  if (blockIdx.x == 0)
    for (int i = static_cast<int>(threadIdx.x); i < p.tail.blocks; i += static_cast<int>(blockDim.x))
      p.tail_arrivals[i] = 0;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads * p.seq_q;
  if (row >= rows) return;
  const int64_t at = row * kHeadDim + lane * kPerLane;
  alignas(sizeof(Packed)) Element o[kPerLane];
  alignas(sizeof(Packed)) Element d_o[kPerLane];
  *reinterpret_cast<Packed*>(o) = *reinterpret_cast<const Packed*>(static_cast<const Element*>(p.o) + at);
  *reinterpret_cast<Packed*>(d_o) = *reinterpret_cast<const Packed*>(static_cast<const Element*>(p.d_o) + at);
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) sum += static_cast<float>(o[j]) * static_cast<float>(d_o[j]);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  *reinterpret_cast<Zeros*>(p.dq_accum + at) = Zeros{};
  if (lane == 0) {
    const float lse = p.lse[row];
    p.d_sum[row] = lse == -INFINITY ? 0.f : sum;
    p.lse_log2[row] = lse == -INFINITY ? INFINITY : lse * kLog2e;  // P = exp2(-inf) = 0 in that row
  }
}

// dQ = the accumulator in the input's type, four elements per thread (16-byte loads, 8-byte stores).
// A plain launch, not a programmatic dependent: its blocks would sit resident through the main
// grid's last wave, and the trace would count that wait as conversion time.
template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(256) flash_bwd_convert_dq_kernel(const __grid_constant__ FlashBwdParams p) {
  const int64_t quads = static_cast<int64_t>(p.batch) * p.heads * p.seq_q * kHeadDim / 4;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < quads;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 value = __ldcs(reinterpret_cast<const float4*>(p.dq_accum) + i);  // read once: streamed
    reinterpret_cast<uint2*>(p.dq)[i] = pack4<Element>(value);
  }
}

}  // namespace attnprof::kernels::flash_bwd
