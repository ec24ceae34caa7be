// bf16/fp16 body of the efficient forward kernel: mma.sync m16n8k16 with fp32 accumulation.
// One block per (64-query block, head, batch); the block sweeps the key tiles in order with an
// online softmax in the log2 domain; K/V tiles are double-buffered with cp.async; the output
// accumulator never leaves the chip until the single store at the end. Query head h reads K/V
// head h / group_size (GQA, MQA); key tiles outside the mask band (causal, window, either
// alignment) are never visited and only tiles on its edges are masked. A row that sees no key
// writes zeros and a logsumexp of -inf.
//
// Shared tiles (Q, K, V, O staging) are row-major with 16-byte chunks XOR-swizzled by row:
// chunk c of row r lives at chunk c ^ (r % 8), so every 8x8 ldmatrix and every fragment store
// touches 8 different 16-byte bank groups.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "efficient/efficient.hpp"
#include "efficient/efficient_device.cuh"
#include "efficient/efficient_traits.cuh"

namespace attnprof::kernels::efficient {

template <int kChunks>
__device__ __forceinline__ std::uint32_t swizzled(int row, int chunk) {
  return static_cast<std::uint32_t>((row * kChunks + (chunk ^ (row & 7))) * 16);
}

// Copies rows [0, rows_valid) x chunks [0, chunks_valid) of a row-major global tile (leading
// dimension `ld` elements) into a swizzled shared tile; everything else is zero-filled.
template <int kRows, int kChunks, int kThreads, typename T>
__device__ __forceinline__ void load_tile(std::uint32_t tile, const T* src, int rows_valid, int chunks_valid, int ld,
                                          int tid) {
#pragma unroll
  for (int it = 0; it < kRows * kChunks / kThreads; ++it) {
    const int idx = it * kThreads + tid;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool inside = row < rows_valid && chunk < chunks_valid;
    cp_async_16_zfill(tile + swizzled<kChunks>(row, chunk), inside ? src + row * ld + chunk * 8 : src, inside);
  }
}

// Per-thread constants of the main loop. The *_lane values are byte offsets inside a tile of
// this lane's ldmatrix row with its swizzle already applied for chunk 0; chunk c (c even, the
// lane's own +1 included in the XOR) is then at (lane ^ swizzle_xor(c)) + swizzle_add(c):
// one LOP3 and one add with immediates, so no per-chunk address needs a register.
struct MmaThread {
  int lane, row_warp, col_warp;
  int row0;             // global query row of accumulator rows g (and row0 + 8)
  std::uint32_t q_lane;  // Q (A operand): row 16*row_warp + lane%16, chunk lane/16
  std::uint32_t k_lane;  // K (B operand): row key0 + lane%8 + 8*(lane/16), chunk (lane/8)%2
  std::uint32_t v_lane;  // V (B operand, transposed): row lane%8 + 8*((lane/8)%2), chunk col0 + lane/16
  std::uint32_t p_lane;  // P (A operand, dims split): as q_lane in a 128-byte-row tile
};

// For chunk indices c whose low bit is 0: the swizzle XORs c's low three bits into the lane's,
// the higher bits add whole 128-byte spans.
__device__ __forceinline__ constexpr std::uint32_t swizzle_xor(int chunk) { return (chunk & 7) << 4; }
__device__ __forceinline__ constexpr std::uint32_t swizzle_add(int chunk) { return (chunk & ~7) << 4; }

// Scores one key tile and folds it into the running softmax state and accumulator.
template <class Tr, bool kMask, bool kBias, typename T = typename Tr::Element>
__device__ __forceinline__ void attend_tile(const ForwardParams& p, const MmaThread& t, int tile,
                                            std::uint32_t s_q, std::uint32_t k_tile, std::uint32_t v_tile,
                                            std::uint32_t s_p,
                                            std::uint32_t s_stats, float scale_log2,
                                            const std::uint32_t (&q_frag)[Tr::kHeadDim / 16][4],
                                            float (&o)[Tr::kWarpDims / 8][4], float (&row_max)[2],
                                            float (&row_sum)[2]) {
  constexpr int kNB = Tr::kWarpKeys / 8;
  constexpr int kDB = Tr::kWarpDims / 8;

  // S = Q K^T for this warp's 16 rows x kWarpKeys keys.
  float s[kNB][4];
#pragma unroll
  for (int nb = 0; nb < kNB; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < Tr::kHeadDim / 16; ++kk) {
    std::uint32_t a[4];
    if constexpr (Tr::kQInRegisters) {
      a[0] = q_frag[kk][0], a[1] = q_frag[kk][1], a[2] = q_frag[kk][2], a[3] = q_frag[kk][3];
    } else {
      ldmatrix_x4(a, s_q + (t.q_lane ^ swizzle_xor(2 * kk)) + swizzle_add(2 * kk));
    }
#pragma unroll
    for (int nb2 = 0; nb2 < kNB / 2; ++nb2) {
      std::uint32_t b[4];
      ldmatrix_x4(b, k_tile + (t.k_lane ^ swizzle_xor(2 * kk)) + swizzle_add(2 * kk) + nb2 * 16 * Tr::kRowBytes);
      mma_16816<T>(s[2 * nb2], a, b[0], b[1]);
      mma_16816<T>(s[2 * nb2 + 1], a, b[2], b[3]);
    }
  }

  // Scale into the log2 domain, add the bias, mask (only tiles that cross an edge of the mask
  // band or the end of the keys are compiled with kMask).
  const int col0 = tile * Tr::kBlockN + t.col_warp * Tr::kWarpKeys + 2 * (t.lane & 3);
  const float* bias_row[2] = {};
  if constexpr (kBias) {
    // Rows past seq_q get no bias (their output is never stored); columns are checked only in
    // masked tiles, the others lie inside [0, seq_kv).
    bias_row[0] = t.row0 < p.seq_q ? p.bias + static_cast<std::int64_t>(t.row0) * p.bias_ld + col0 : nullptr;
    bias_row[1] = t.row0 + 8 < p.seq_q ? p.bias + static_cast<std::int64_t>(t.row0 + 8) * p.bias_ld + col0 : nullptr;
  }
#pragma unroll
  for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = t.row0 + (i >= 2 ? 8 : 0);
      const int col = col0 + nb * 8 + (i & 1);
      float x = s[nb][i] * scale_log2;
      if (kBias && bias_row[i >> 1] != nullptr && (!kMask || col < p.seq_kv))
        x = fmaf(__ldg(bias_row[i >> 1] + nb * 8 + (i & 1)), kLog2e, x);
      if (kMask && (col >= p.seq_kv || !p.mask.sees(row, col))) x = -INFINITY;
      s[nb][i] = x;
    }
  }

  // Row max over the tile: 4 lanes share a row; in the dims split the partner warp holds the
  // other half of the tile's keys.
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nb = 0; nb < kNB; ++nb) {
    tile_max[0] = fmaxf(tile_max[0], fmaxf(s[nb][0], s[nb][1]));
    tile_max[1] = fmaxf(tile_max[1], fmaxf(s[nb][2], s[nb][3]));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
  }
  const int local_row = t.row_warp * 16 + (t.lane >> 2);
  if constexpr (Tr::kSplitDims) {
    const std::uint32_t mine = s_stats + (t.col_warp * Tr::kBlockM + local_row) * 4;
    const std::uint32_t theirs = s_stats + ((t.col_warp ^ 1) * Tr::kBlockM + local_row) * 4;
    if ((t.lane & 3) == 0) {
      st_shared_f32(mine, tile_max[0]);
      st_shared_f32(mine + 32, tile_max[1]);
    }
    __syncthreads();
    tile_max[0] = fmaxf(tile_max[0], ld_shared_f32(theirs));
    tile_max[1] = fmaxf(tile_max[1], ld_shared_f32(theirs + 32));
  }

  // Online softmax. A row with no visible key yet keeps max -inf; subtracting 0 instead keeps
  // exp2(-inf - max) = 0 and never NaN.
  float row_base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float new_max = fmaxf(row_max[r], tile_max[r]);
    row_base[r] = new_max == -INFINITY ? 0.f : new_max;
    const float rescale = exp2_approx(row_max[r] - row_base[r]);
    row_max[r] = new_max;
    row_sum[r] *= rescale;
#pragma unroll
    for (int db = 0; db < kDB; ++db) {
      o[db][2 * r] *= rescale;
      o[db][2 * r + 1] *= rescale;
    }
  }
#pragma unroll
  for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[nb][i] = exp2_approx(s[nb][i] - row_base[i >> 1]);
    row_sum[0] += s[nb][0] + s[nb][1];
    row_sum[1] += s[nb][2] + s[nb][3];
  }

  // O += P V.
  if constexpr (!Tr::kSplitDims) {
    // P stays in registers: the accumulator layout of n-blocks 2kk and 2kk+1 is exactly the
    // A-operand layout of k-step kk.
#pragma unroll
    for (int kk = 0; kk < Tr::kPvKeys / 16; ++kk) {
      const std::uint32_t a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                  pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int db2 = 0; db2 < kDB / 2; ++db2) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + (t.v_lane ^ swizzle_xor(2 * db2)) + swizzle_add(2 * db2) +
                                  kk * 16 * Tr::kRowBytes);
        mma_16816<T>(o[2 * db2], a, b[0], b[1]);
        mma_16816<T>(o[2 * db2 + 1], a, b[2], b[3]);
      }
    }
  } else {
    // The pair multiplies all keys of the tile, each by its half of the head dim: P goes
    // through shared memory (rows of 128 B, chunk c of row r at c ^ (r % 8)).
    const int g = t.lane >> 2;
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb) {
      const int chunk = t.col_warp * (Tr::kWarpKeys / 8) + nb;
      const std::uint32_t at = s_p + local_row * Tr::kPRowBytes + ((chunk ^ g) << 4) + 4 * (t.lane & 3);
      st_shared_b32(at, pack2<T>(s[nb][0], s[nb][1]));
      st_shared_b32(at + 8 * Tr::kPRowBytes, pack2<T>(s[nb][2], s[nb][3]));
    }
    __syncthreads();
    std::uint32_t p_frag[Tr::kPvKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < Tr::kPvKeys / 16; ++kk)
      ldmatrix_x4(p_frag[kk], s_p + (t.p_lane ^ swizzle_xor(2 * kk)) + swizzle_add(2 * kk));
    // Output blocks outer: each V fragment is used once, right after its load.
#pragma unroll
    for (int db2 = 0; db2 < kDB / 2; ++db2) {
#pragma unroll
      for (int kk = 0; kk < Tr::kPvKeys / 16; ++kk) {
        const std::uint32_t(&a)[4] = p_frag[kk];
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + (t.v_lane ^ swizzle_xor(2 * db2)) + swizzle_add(2 * db2) +
                                  kk * 16 * Tr::kRowBytes);
        mma_16816<T>(o[2 * db2], a, b[0], b[1]);
        mma_16816<T>(o[2 * db2 + 1], a, b[2], b[3]);
      }
    }
  }
}

// Writes two accumulator values of rows g and g+8 (columns 2*(lane%4), +1 of chunk `chunk`)
// into the swizzled O staging tile.
template <class Tr, typename T = typename Tr::Element>
__device__ __forceinline__ void stage_output(std::uint32_t s_o, int local_row, int chunk, int lane, float v0,
                                             float v1, float v2, float v3) {
  const std::uint32_t at =
      s_o + local_row * Tr::kRowBytes + ((chunk ^ (local_row & 7)) << 4) + 4 * (lane & 3);
  st_shared_b32(at, pack2<T>(v0, v1));
  st_shared_b32(at + 8 * Tr::kRowBytes, pack2<T>(v2, v3));
}

// Key split: the two warps of a row group saw disjoint halves of every key tile. Each merges
// both states for the half of the head dim it owns (kOwn). Region (row group, half h) of the
// merge area (the K/V buffers, free after the loop) is written by the warp that does not own h
// and read by the one that does; element e of a lane sits at float e * 32 + lane: conflict-free.
template <class Tr>
__device__ __forceinline__ std::uint32_t merge_region(std::uint32_t s_q, const MmaThread& t, int half) {
  return s_q + Tr::kKOffset + ((t.row_warp * 2 + half) * Tr::kMergeFloatsPerWarp + t.lane) * 4;
}

// Step 1: hand the partner the half it owns, and this warp's row statistics.
template <class Tr, int kOwn>
__device__ __forceinline__ void publish_key_half(const MmaThread& t, std::uint32_t s_q,
                                                 const float (&o)[Tr::kWarpDims / 8][4], const float (&row_max)[2],
                                                 const float (&row_sum)[2]) {
  constexpr int kHalf = Tr::kWarpDims / 16;  // accumulator n-blocks per half
  const std::uint32_t out = merge_region<Tr>(s_q, t, 1 - kOwn);
#pragma unroll
  for (int i = 0; i < kHalf; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) st_shared_f32(out + (i * 4 + j) * 128, o[(1 - kOwn) * kHalf + i][j]);
  st_shared_f32(out + (kHalf * 4 + 0) * 128, row_max[0]);
  st_shared_f32(out + (kHalf * 4 + 1) * 128, row_max[1]);
  st_shared_f32(out + (kHalf * 4 + 2) * 128, row_sum[0]);
  st_shared_f32(out + (kHalf * 4 + 3) * 128, row_sum[1]);
}

// Step 2 (after a barrier): merge the owned half, normalise, stage it for the store. lse_row0:
// the lse index of query row 0 of this (sequence, head).
template <class Tr, int kOwn>
__device__ __forceinline__ void combine_key_half(const ForwardParams& p, const MmaThread& t, std::int64_t lse_row0,
                                                 std::uint32_t s_q, const float (&o)[Tr::kWarpDims / 8][4],
                                                 const float (&row_max)[2], const float (&row_sum)[2]) {
  constexpr int kHalf = Tr::kWarpDims / 16;
  const std::uint32_t in = merge_region<Tr>(s_q, t, kOwn);
  float mine[2], theirs[2], inv_sum[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float other_max = ld_shared_f32(in + (kHalf * 4 + r) * 128);
    const float other_sum = ld_shared_f32(in + (kHalf * 4 + 2 + r) * 128);
    // A warp whose keys were all masked has max -inf and sum 0, and gets weight exp2(-inf) = 0;
    // when neither saw a key (a window, bottom-right), base 0 keeps both weights 0, not NaN.
    const float max = fmaxf(row_max[r], other_max);
    const float base = max == -INFINITY ? 0.f : max;
    mine[r] = exp2_approx(row_max[r] - base);
    theirs[r] = exp2_approx(other_max - base);
    const float sum = row_sum[r] * mine[r] + other_sum * theirs[r];
    inv_sum[r] = sum > 0.f ? 1.f / sum : 0.f;
    if (kOwn == 0 && p.lse != nullptr && (t.lane & 3) == 0 && t.row0 + 8 * r < p.seq_q)
      p.lse[lse_row0 + t.row0 + 8 * r] = sum > 0.f ? (base + __log2f(sum)) * kLn2 : -INFINITY;
  }
  const int local_row = t.row_warp * 16 + (t.lane >> 2);
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = (o[kOwn * kHalf + i][j] * mine[j >> 1] + ld_shared_f32(in + (i * 4 + j) * 128) * theirs[j >> 1]) *
             inv_sum[j >> 1];
    stage_output<Tr>(s_q, local_row, kOwn * kHalf + i, t.lane, v[0], v[1], v[2], v[3]);
  }
}

// The work of one block: query rows [m0, m0 + 64) of one (sequence, head). p's seq_q, seq_kv
// and mask are that sequence's own; seq says where its rows live.
template <class Tr, bool kBias>
__device__ __forceinline__ void forward_block(const ForwardParams& p, const SequenceView& seq, const int m0) {
  using T = typename Tr::Element;
  constexpr int kDB = Tr::kWarpDims / 8;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x;
  MmaThread t;
  t.lane = tid & 31;
  t.row_warp = (tid >> 5) & 3;
  t.col_warp = tid >> 7;
  t.row0 = m0 + t.row_warp * 16 + (t.lane >> 2);
  const std::int64_t lse_row0 = seq.lse_offset;
  const T* q = static_cast<const T*>(p.q) + seq.q_offset + static_cast<std::int64_t>(m0) * seq.q_ld;
  const T* k = static_cast<const T*>(p.k) + seq.kv_offset;
  const T* v = static_cast<const T*>(p.v) + seq.kv_offset;

  const std::uint32_t s_q = shared_address(smem);
  const std::uint32_t s_k = s_q + Tr::kKOffset, s_v = s_q + Tr::kVOffset, s_p = s_q + Tr::kPOffset;
  const std::uint32_t s_stats = s_q + Tr::kStatsOffset;

  const int lane = t.lane;
  {
    const int x_a = (lane & 7) ^ (lane >> 4), x_k = (lane & 7) ^ ((lane >> 3) & 1);
    t.q_lane = (t.row_warp * 16 + (lane & 15)) * Tr::kRowBytes + (x_a << 4);
    t.p_lane = (t.row_warp * 16 + (lane & 15)) * Tr::kPRowBytes + (x_a << 4);
    t.k_lane = (t.col_warp * Tr::kWarpKeys + (lane & 7) + ((lane >> 4) << 3)) * Tr::kRowBytes + (x_k << 4);
    t.v_lane = ((Tr::kSplitDims ? 0 : t.col_warp * Tr::kWarpKeys) + (lane & 7) + (((lane >> 3) & 1) << 3)) *
                   Tr::kRowBytes +
               (Tr::kSplitDims ? t.col_warp * Tr::kWarpDims * 2 : 0) + (x_a << 4);
  }

  // Key tiles [begin, end) (core/mask_bounds.hpp); [unmasked_begin, unmasked_end) hold only
  // keys every row of the block sees, the others cross an edge of the mask band or the end of
  // the keys. begin == end when no row of the block sees a key: it writes zeros.
  const KeyTiles tiles = key_tiles(p.mask, p.seq_q, p.seq_kv, m0, Tr::kBlockM, Tr::kBlockN);

  const int chunks_valid = p.head_dim / 8;
  load_tile<Tr::kBlockM, Tr::kChunks, Tr::kThreads>(s_q, q, min(Tr::kBlockM, p.seq_q - m0), chunks_valid,
                                                     seq.q_ld, tid);
  if (tiles.begin < tiles.end) {
    const int first = tiles.begin * Tr::kBlockN;
    const std::uint32_t buffer = (tiles.begin & 1) * Tr::kTileBytes;
    const int rows = min(Tr::kBlockN, p.seq_kv - first);
    load_tile<Tr::kBlockN, Tr::kChunks, Tr::kThreads>(s_k + buffer, k + static_cast<std::int64_t>(first) * seq.kv_ld,
                                                       rows, chunks_valid, seq.kv_ld, tid);
    load_tile<Tr::kBlockN, Tr::kChunks, Tr::kThreads>(s_v + buffer, v + static_cast<std::int64_t>(first) * seq.kv_ld,
                                                       rows, chunks_valid, seq.kv_ld, tid);
  }
  cp_async_commit();

  float o[kDB][4];
#pragma unroll
  for (int db = 0; db < kDB; ++db) o[db][0] = o[db][1] = o[db][2] = o[db][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.scale * kLog2e;

  cp_async_wait_all();
  __syncthreads();
  std::uint32_t q_frag[Tr::kHeadDim / 16][4];
  if constexpr (Tr::kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < Tr::kHeadDim / 16; ++kk) ldmatrix_x4(q_frag[kk], s_q + (t.q_lane ^ swizzle_xor(2 * kk)) + swizzle_add(2 * kk));
  }

  // One tile: wait for its K/V, prefetch the next tile into the other buffer, attend.
  auto step = [&](int tile, auto mask_tag) {
    // Tile's K/V landed; every warp is done with the buffer refilled next. For the first tile
    // the prologue already waited: one extra barrier per block, and one loop bound fewer live.
    cp_async_wait_all();
    __syncthreads();
    if (tile + 1 < tiles.end) {
      const int next = (tile + 1) * Tr::kBlockN;
      const std::uint32_t buffer = ((tile + 1) & 1) * Tr::kTileBytes;
      const int rows = min(Tr::kBlockN, p.seq_kv - next);
      load_tile<Tr::kBlockN, Tr::kChunks, Tr::kThreads>(s_k + buffer, k + static_cast<std::int64_t>(next) * seq.kv_ld,
                                                         rows, chunks_valid, seq.kv_ld, tid);
      load_tile<Tr::kBlockN, Tr::kChunks, Tr::kThreads>(s_v + buffer, v + static_cast<std::int64_t>(next) * seq.kv_ld,
                                                         rows, chunks_valid, seq.kv_ld, tid);
      cp_async_commit();
    }
    const std::uint32_t buffer = (tile & 1) * Tr::kTileBytes;
    attend_tile<Tr, decltype(mask_tag)::value, kBias>(p, t, tile, s_q, s_k + buffer, s_v + buffer, s_p, s_stats,
                                                      scale_log2, q_frag, o, row_max, row_sum);
  };
  // Loops rather than a branch per tile keep the control flow simple for the register allocator.
  // Pass 0: a window's left edge (masked; empty without one), then the whole tiles; pass 1: the
  // right edge (diagonal, window, last keys). One copy of each tile body, not three: a third
  // copy made ptxas spill at 128 registers.
  int tile = tiles.begin;
  int masked_end = tiles.unmasked_begin;
#pragma unroll 1
  for (int pass = 0; pass < 2; ++pass) {
    for (; tile < masked_end; ++tile) step(tile, std::true_type{});
    for (; tile < tiles.unmasked_end; ++tile) step(tile, std::false_type{});
    masked_end = tiles.end;
  }

  // Each thread summed its own columns; the 4 lanes of a row complete the sum.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }

  // Normalise and stage this warp's output in the Q tile (only this warp pair reads those rows).
  const int local_row = t.row_warp * 16 + (lane >> 2);
  if constexpr (Tr::kColWarps > 1 && !Tr::kSplitDims) {
    __syncthreads();  // the merge area reuses the K/V buffers
    if (t.col_warp == 0)
      publish_key_half<Tr, 0>(t, s_q, o, row_max, row_sum);
    else
      publish_key_half<Tr, 1>(t, s_q, o, row_max, row_sum);
    __syncthreads();
    if (t.col_warp == 0)
      combine_key_half<Tr, 0>(p, t, lse_row0, s_q, o, row_max, row_sum);
    else
      combine_key_half<Tr, 1>(p, t, lse_row0, s_q, o, row_max, row_sum);
  } else {
    if constexpr (Tr::kSplitDims) {
      const std::uint32_t sums = s_stats + Tr::kColWarps * Tr::kBlockM * 4;
      const std::uint32_t mine = sums + (t.col_warp * Tr::kBlockM + local_row) * 4;
      const std::uint32_t theirs = sums + ((t.col_warp ^ 1) * Tr::kBlockM + local_row) * 4;
      if ((lane & 3) == 0) {
        st_shared_f32(mine, row_sum[0]);
        st_shared_f32(mine + 32, row_sum[1]);
      }
      __syncthreads();
      row_sum[0] += ld_shared_f32(theirs);
      row_sum[1] += ld_shared_f32(theirs + 32);
    }
    float inv_sum[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // A row that saw no key has sum 0: zeros out, -inf logsumexp.
      inv_sum[r] = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
      const float base = row_max[r] == -INFINITY ? 0.f : row_max[r];
      if (t.col_warp == 0 && p.lse != nullptr && (lane & 3) == 0 && t.row0 + 8 * r < p.seq_q)
        p.lse[lse_row0 + t.row0 + 8 * r] = row_sum[r] > 0.f ? (base + __log2f(row_sum[r])) * kLn2 : -INFINITY;
    }
    // The staging overwrites Q rows this warp read with ldmatrix; with a single key tile no
    // barrier has ordered those reads before these writes (racecheck reports it), so order them.
    __syncwarp();
#pragma unroll
    for (int db = 0; db < kDB; ++db)
      stage_output<Tr>(s_q, local_row, t.col_warp * kDB + db, lane, o[db][0] * inv_sum[0], o[db][1] * inv_sum[0],
                       o[db][2] * inv_sum[1], o[db][3] * inv_sum[1]);
  }
  __syncwarp();

  // 16-byte coalesced stores of this warp's 16 rows x kOutChunks chunks.
  T* out = static_cast<T*>(p.o);
  const int chunk0 = t.col_warp * Tr::kOutChunks;
#pragma unroll
  for (int it = 0; it < 16 * Tr::kOutChunks / 32; ++it) {
    const int idx = it * 32 + lane;
    const int r = idx / Tr::kOutChunks, chunk = chunk0 + idx % Tr::kOutChunks;
    const int row = m0 + t.row_warp * 16 + r;
    if (row < p.seq_q && chunk < chunks_valid) {
      const uint4 value = ld_shared_v4(s_q + (t.row_warp * 16 + r) * Tr::kRowBytes + ((chunk ^ (r & 7)) << 4));
      *reinterpret_cast<uint4*>(out + seq.q_offset + static_cast<std::int64_t>(row) * seq.q_ld + chunk * 8) = value;
    }
  }
}

// kBias: compiled separately, so that the bias loads cost the plain kernel no registers.
// kRagged: a ragged batch (per-sequence lengths, packed q/o and/or k/v), compiled separately so
// that the dense kernel keeps its lengths and mask in the constant bank, not in registers. Block
// (x, head, sequence); the grid covers the longest sequence and blocks past a sequence's rows
// leave at once.
template <class Tr, bool kBias, bool kRagged>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocksPerSm)
    efficient_fwd_kernel(const ForwardParams params) {
  // Heavy (late, causal) query blocks first, so the tail of the grid is short.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * Tr::kBlockM;
  if constexpr (kRagged) {
    const SequenceView seq = sequence_view(params, blockIdx.z, blockIdx.y);
    if (m0 >= seq.q_len) return;
    ForwardParams p = params;
    p.seq_q = seq.q_len;
    p.seq_kv = seq.kv_len;
    p.mask = seq.mask;
    forward_block<Tr, kBias>(p, seq, m0);
  } else {
    forward_block<Tr, kBias>(params, dense_view(params, blockIdx.z, blockIdx.y), m0);
  }
}

}  // namespace attnprof::kernels::efficient
