// The flash decode kernels, generic over DecodeTraits.
//
// Decode is bound by reading K and V: each key is used by only group_size * q_len query rows
// (<= 16). One block per (split, K/V head, sequence) holds those rows as the M dimension of an
// m16n8k16 mma.sync tile, so K and V are read once per K/V head whatever the group size. The
// block's warps walk interleaved key tiles of 16 keys, each with its own cp.async pipeline of
// kStages tiles in its own shared memory (no block barrier in the loop), and keep their own
// online softmax; at the end the warps' partial results are merged in shared memory. With one
// split the block writes o and lse; with more, it writes its split's normalised O (fp32) and
// logsumexp to the workspace and flash_decode_combine_kernel merges the splits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cp_async.cuh"
#include "common/dependent_launch.cuh"
#include "common/fast_math.cuh"
#include "common/mma_sm80.cuh"
#include "common/shared_memory.cuh"
#include "core/mask_bounds.hpp"
#include "decode/decode.hpp"

namespace attnprof::kernels::decode {

template <typename Element_, int kHeadDim_, int kStages_>
struct DecodeTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kStages = kStages_;  // key tiles in flight per warp (prefetch distance kStages - 1)
  static constexpr int kWarps = kDecodeWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBlockN = kDecodeBlockKeys;
  static constexpr int kRows = kDecodeMaxRows;
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kTileBytes = kBlockN * kRowBytes;  // K or V of one tile
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kWarpBytes = kStages * kStageBytes;
  static constexpr int kQOffset = kWarps * kWarpBytes;
  static constexpr int kSmemBytes = kQOffset + kRows * kRowBytes;
  static constexpr int kOTiles = kHeadDim / 8;
  // The merge reuses the stages: per warp O [kRows][kHeadDim] fp32, then max and sum per row.
  static constexpr int kMergeO = 0;
  static constexpr int kMergeMax = kWarps * kRows * kHeadDim * 4;
  static constexpr int kMergeSum = kMergeMax + kWarps * kRows * 4;
  static_assert(kMergeSum + kWarps * kRows * 4 <= kQOffset, "the merge must fit in the stages");
  static_assert(kHeadDim % 64 == 0 && (kBlockN * kChunksPerRow) % 32 == 0);
};

// d128: 3 stages of 16 keys per warp, 4 warps: 96 KB + 4 KB Q, two blocks per SM and 16 KB in
// flight per warp. d64: 4 stages (the same bytes in flight per warp, half the shared memory).
template <typename Element, int kHeadDim>
using DecodeTraitsFor = DecodeTraits<Element, kHeadDim, kHeadDim == 64 ? 4 : 3>;

// Element offset of key `key`'s row of K/V head kv_head in sequence b, and the distance between
// consecutive keys' rows (a tile never crosses a page: page_size % kBlockN == 0).
struct KeyRows {
  int64_t first;
  int64_t stride;
};
template <int kHeadDim>
__device__ __forceinline__ KeyRows key_rows(const DecodeParams& p, int b, int kv_head, int key) {
  const int64_t row_elems = static_cast<int64_t>(p.heads_kv) * kHeadDim;
  if (p.block_table != nullptr) {
    const int page = p.block_table[static_cast<int64_t>(b) * p.pages_per_sequence + key / p.page_size];
    const int64_t token = static_cast<int64_t>(page) * p.page_size + key % p.page_size;
    return {token * row_elems + static_cast<int64_t>(kv_head) * kHeadDim, row_elems};
  }
  if (p.cu_seqlens_kv != nullptr)
    return {(static_cast<int64_t>(p.cu_seqlens_kv[b]) + key) * row_elems + static_cast<int64_t>(kv_head) * kHeadDim,
            row_elems};
  return {((static_cast<int64_t>(b) * p.heads_kv + kv_head) * p.seq_kv + key) * kHeadDim, kHeadDim};
}

// Element offset of query row i of head h in sequence b (q and o share the layout).
template <int kHeadDim>
__device__ __forceinline__ int64_t query_row(const DecodeParams& p, int b, int h, int i) {
  if (p.cu_seqlens_q != nullptr) return ((static_cast<int64_t>(p.cu_seqlens_q[b]) + i) * p.heads + h) * kHeadDim;
  return ((static_cast<int64_t>(b) * p.heads + h) * p.seq_q + i) * kHeadDim;
}

// Row (b, h, i) of the padded [batch, heads, seq_q] index space (lse, the workspace).
__device__ __forceinline__ int64_t padded_row(const DecodeParams& p, int b, int h, int i) {
  return (static_cast<int64_t>(b) * p.heads + h) * p.seq_q + i;
}

// Issues one warp's copies of key tile `tile` (keys tile*kBlockN ...) into its stage; keys at or
// past kv_len read nothing and are zero-filled (never garbage: 0 * NaN would poison P V).
template <typename Traits>
__device__ __forceinline__ void copy_key_tile(const DecodeParams& p, uint32_t stage, int b, int kv_head, int tile,
                                              int kv_len, int lane) {
  using Element = typename Traits::Element;
  constexpr int kPasses = Traits::kBlockN * Traits::kChunksPerRow / 32;
  const int key0 = tile * Traits::kBlockN;
  const KeyRows rows = key_rows<Traits::kHeadDim>(p, b, kv_head, key0);
  const auto* k = static_cast<const Element*>(p.k) + rows.first;
  const auto* v = static_cast<const Element*>(p.v) + rows.first;
  // Each K/V byte is read once: evict-first keeps the stream from displacing what is reused.
  const uint64_t policy = l2_evict_first_policy();
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int index = pass * 32 + lane;
    const int row = index / Traits::kChunksPerRow;
    const int chunk = index % Traits::kChunksPerRow;
    const bool valid = key0 + row < kv_len;
    const int64_t offset = valid ? row * rows.stride + chunk * 8 : 0;
    const uint32_t dst = static_cast<uint32_t>(row * Traits::kRowBytes + ((chunk ^ (row & 7)) << 4));
    cp_async_16_zfill(stage + dst, k + offset, valid, policy);
    cp_async_16_zfill(stage + Traits::kTileBytes + dst, v + offset, valid, policy);
  }
}

// L2 prefetch for the next wave. An unsplit grid of more blocks than fit at once runs in waves
// whose blocks start and end nearly together (equal work), so between two waves every slot
// drains, exits, relaunches and waits a DRAM round trip for its first tiles, and DRAM idles. Once
// its own keys have landed, block i asks L2 for the first kDecodePrefetchKeys visible keys of K
// and V of block i + wave_blocks (blocks start in index order, so that one takes the slot freed
// next), and the drain loads them. Dense caches only (one contiguous run per K/V head and
// sequence); a hint that changes no result. Measured 2026-12-07 on an H100 80GB HBM3, CUDA 13.0
// (docs/perf/NOTES.md): at 64 sequences x 8 K/V heads x 4096 keys, 0.45%, 0.75% and 0.9% less time
// with 64, 128 and 256 keys; 128 keys issued at the block's start instead, 0.2%.
inline constexpr int kDecodePrefetchKeys = 256;

template <typename Traits>
__device__ __forceinline__ void prefetch_next_wave(const DecodeParams& p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (p.wave_blocks <= 0 || p.block_table != nullptr || p.cu_seqlens_kv != nullptr) return;
  const long long next = static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y + p.wave_blocks;
  if (gridDim.x != 1 || next >= static_cast<long long>(gridDim.y) * gridDim.z) return;
  const int kv_head = static_cast<int>(next % gridDim.y);
  const int b = static_cast<int>(next / gridDim.y);
  const int q_len = p.seq_lens_q != nullptr ? p.seq_lens_q[b] : p.seq_q;
  const int kv_len = p.seq_lens_kv != nullptr ? p.seq_lens_kv[b] : p.seq_kv;
  if (q_len == 0 || kv_len == 0) return;
  const MaskBounds mask = p.mask.for_lengths(q_len, kv_len);
  const int lo = mask.first_key(0);
  const int keys = min(kDecodePrefetchKeys, mask.last_key(q_len - 1, kv_len) + 1 - lo);
  if (keys <= 0) return;
  const int64_t first = (static_cast<int64_t>(b) * p.heads_kv + kv_head) * p.seq_kv + lo;
  const auto* k = static_cast<const typename Traits::Element*>(p.k) + first * Traits::kHeadDim;
  const auto* v = static_cast<const typename Traits::Element*>(p.v) + first * Traits::kHeadDim;
  const uint32_t bytes = static_cast<uint32_t>(keys * Traits::kRowBytes);  // a multiple of 16
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(k), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(v), "r"(bytes) : "memory");
#endif
}

// Swizzled shared address of 16-byte chunk `chunk` of tile row `row` (chunk ^ row % 8).
template <typename Traits>
__device__ __forceinline__ uint32_t swizzled(uint32_t tile, int row, int chunk) {
  return tile + static_cast<uint32_t>(row * Traits::kRowBytes + ((chunk ^ (row & 7)) << 4));
}

// The body shared by the unsplit and the split kernel.
template <typename Traits, bool kSplit>
__device__ __forceinline__ void decode_block(const DecodeParams& p) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kStages = Traits::kStages;
  constexpr int kOTiles = Traits::kOTiles;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = shared_address(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int split = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int q_len = p.seq_lens_q != nullptr ? p.seq_lens_q[b] : p.seq_q;
  const int kv_len = p.seq_lens_kv != nullptr ? p.seq_lens_kv[b] : p.seq_kv;
  const int group = p.group_size;
  const int rows = q_len * group;  // block row m: query row m / group of head kv_head * group + m % group
  if (rows == 0) return;           // a sequence with no query rows has nothing to write
  const MaskBounds mask = p.mask.for_lengths(q_len, kv_len);

  // The keys any row sees: [first_key(0), last_key(q_len - 1)]; this split's share of its tiles.
  const int lo = mask.first_key(0);
  const int hi = kv_len > 0 ? mask.last_key(q_len - 1, kv_len) : -1;
  int tile_begin = 0, tile_end = 0;
  if (hi >= lo) {
    const int first = lo / kBlockN;
    const int count = hi / kBlockN + 1 - first;
    const int per_split = (count + p.splits - 1) / p.splits;
    tile_begin = min(first + split * per_split, first + count);
    tile_end = min(tile_begin + per_split, first + count);
  }

  // This warp's tiles: tile_begin + warp, + kWarps, ...; prologue of kStages - 1 groups, issued
  // first: the key stream is what the block waits for.
  const uint32_t stages = smem_base + warp * Traits::kWarpBytes;
  const int my_tiles = tile_end - tile_begin > warp ? (tile_end - tile_begin - warp + Traits::kWarps - 1) / Traits::kWarps : 0;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < my_tiles)
      copy_key_tile<Traits>(p, stages + s * Traits::kStageBytes, b, kv_head, tile_begin + warp + s * Traits::kWarps,
                            kv_len, lane);
    cp_async_commit();
  }
  // Q (rows >= rows zero) into shared memory, then into A fragments for the whole loop; loaded
  // after the first key tiles are on their way, so its round trip overlaps theirs.
  const uint32_t q_tile = smem_base + Traits::kQOffset;
  for (int index = tid; index < Traits::kRows * Traits::kChunksPerRow; index += Traits::kThreads) {
    const int m = index / Traits::kChunksPerRow;
    const int chunk = index % Traits::kChunksPerRow;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (m < rows) {
      const int h = kv_head * group + m % group;
      value = *reinterpret_cast<const uint4*>(static_cast<const Element*>(p.q) +
                                              query_row<kHeadDim>(p, b, h, m / group) + chunk * 8);
    }
    *reinterpret_cast<uint4*>(smem + (swizzled<Traits>(q_tile, m, chunk) - smem_base)) = value;
  }

  __syncthreads();  // Q is in shared memory
  uint32_t qa[kHeadDim / 16][4];
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) ldmatrix_x4(qa[kk], swizzled<Traits>(q_tile, lane & 15, 2 * kk + (lane >> 4)));

  // The keys this lane's two rows (lane/4 and lane/4 + 8) see.
  int first_key[2], last_key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = (lane >> 2) + 8 * h;
    const int i = m < rows ? m / group : 0;
    first_key[h] = mask.first_key(i);
    last_key[h] = mask.last_key(i, kv_len);
  }

  float o[kOTiles][4];
#pragma unroll
  for (int dt = 0; dt < kOTiles; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dt][e] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};

  for (int t = 0; t < my_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncwarp();  // every lane's copies of tile t have landed; every lane is done with tile t - 1
    if (t + kStages - 1 < my_tiles)
      copy_key_tile<Traits>(p, stages + ((t + kStages - 1) % kStages) * Traits::kStageBytes, b, kv_head,
                            tile_begin + warp + (t + kStages - 1) * Traits::kWarps, kv_len, lane);
    cp_async_commit();
    const uint32_t k_tile = stages + (t % kStages) * Traits::kStageBytes;
    const uint32_t v_tile = k_tile + Traits::kTileBytes;
    const int key0 = (tile_begin + warp + t * Traits::kWarps) * kBlockN;

    // S = Q K^T: one ldmatrix x4 gives keys 0-7 and 8-15 (two n8 tiles) of one k16 step.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t kb[4];
      ldmatrix_x4(kb, swizzled<Traits>(k_tile, ((lane >> 4) << 3) + (lane & 7), 2 * kk + ((lane >> 3) & 1)));
      mma_16816<Element>(s[0], qa[kk], kb[0], kb[1]);
      mma_16816<Element>(s[1], qa[kk], kb[2], kb[3]);
    }

    // Mask (window edges, the diagonal, keys past kv_len) and the online softmax; element
    // (nt, 2h + e) is row lane/4 + 8h, key key0 + 8nt + 2(lane%4) + e.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = row_max[h];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + 8 * nt + 2 * (lane & 3) + e;
          if (key < first_key[h] || key > last_key[h]) s[nt][2 * h + e] = -INFINITY;
          tile_max = fmaxf(tile_max, s[nt][2 * h + e]);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float max_scaled = tile_max == -INFINITY ? 0.f : tile_max * p.scale_log2;
      const float rescale = exp2_approx(row_max[h] * p.scale_log2 - max_scaled);
      row_max[h] = tile_max;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float prob = exp2_approx(fmaf(s[nt][2 * h + e], p.scale_log2, -max_scaled));
          s[nt][2 * h + e] = prob;
          sum += prob;
        }
      row_sum[h] = row_sum[h] * rescale + sum;
#pragma unroll
      for (int dt = 0; dt < kOTiles; ++dt) {
        o[dt][2 * h] *= rescale;
        o[dt][2 * h + 1] *= rescale;
      }
    }

    // O += P V: P's C fragments are the A fragment of one k16 step; V by ldmatrix.trans.
    uint32_t pa[4];
    pa[0] = pack2<Element>(s[0][0], s[0][1]);
    pa[1] = pack2<Element>(s[0][2], s[0][3]);
    pa[2] = pack2<Element>(s[1][0], s[1][1]);
    pa[3] = pack2<Element>(s[1][2], s[1][3]);
#pragma unroll
    for (int dp = 0; dp < kOTiles / 2; ++dp) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, swizzled<Traits>(v_tile, (((lane >> 3) & 1) << 3) + (lane & 7), 2 * dp + (lane >> 4)));
      mma_16816<Element>(o[2 * dp], pa, vb[0], vb[1]);
      mma_16816<Element>(o[2 * dp + 1], pa, vb[2], vb[3]);
    }
  }
  cp_async_wait<0>();
  // Split: the combine kernel may be scheduled once every block is here (it waits for our writes
  // itself); not earlier, so that its blocks do not sit waiting through the keys' whole stream.
  if constexpr (kSplit) griddepcontrol_launch_dependents();
  if constexpr (!kSplit) {
    if (tid == 0) prefetch_next_wave<Traits>(p);  // warp 0's keys are in; the others' nearly
  }

  // Merge the warps: each publishes its rows' max, sum and unnormalised O in the (now idle)
  // stages; then every thread combines 8 columns of a row over the warps.
  __syncthreads();
  float* merge_o = reinterpret_cast<float*>(smem + Traits::kMergeO);
  float* merge_max = reinterpret_cast<float*>(smem + Traits::kMergeMax);
  float* merge_sum = reinterpret_cast<float*>(smem + Traits::kMergeSum);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = (lane >> 2) + 8 * h;
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if ((lane & 3) == 0) {
      merge_max[warp * Traits::kRows + m] = row_max[h];
      merge_sum[warp * Traits::kRows + m] = sum;
    }
#pragma unroll
    for (int dt = 0; dt < kOTiles; ++dt)
      *reinterpret_cast<float2*>(merge_o + (warp * Traits::kRows + m) * kHeadDim + 8 * dt + 2 * (lane & 3)) =
          make_float2(o[dt][2 * h], o[dt][2 * h + 1]);
  }
  __syncthreads();

  constexpr int kChunks = kHeadDim / 8;
  for (int index = tid; index < rows * kChunks; index += Traits::kThreads) {
    const int m = index / kChunks;
    const int col = (index % kChunks) * 8;
    float block_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < Traits::kWarps; ++w) block_max = fmaxf(block_max, merge_max[w * Traits::kRows + m]);
    float total = 0.f;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (block_max != -INFINITY) {
#pragma unroll
      for (int w = 0; w < Traits::kWarps; ++w) {
        const float weight = exp2_approx((merge_max[w * Traits::kRows + m] - block_max) * p.scale_log2);
        total += weight * merge_sum[w * Traits::kRows + m];
        const float* src = merge_o + (w * Traits::kRows + m) * kHeadDim + col;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] += weight * src[j];
      }
    }
    // A row that saw no key: zeros and -inf (log of an empty sum).
    const float inverse = total > 0.f ? 1.f / total : 0.f;
    const float lse = total > 0.f ? block_max * p.scale + logf(total) : -INFINITY;
    const int i = m / group;
    const int h = kv_head * group + m % group;
    if constexpr (kSplit) {
      const int64_t row = static_cast<int64_t>(split) * p.batch * p.heads * p.seq_q + padded_row(p, b, h, i);
      float4* dst = reinterpret_cast<float4*>(p.partial_o + row * kHeadDim + col);
      dst[0] = make_float4(acc[0] * inverse, acc[1] * inverse, acc[2] * inverse, acc[3] * inverse);
      dst[1] = make_float4(acc[4] * inverse, acc[5] * inverse, acc[6] * inverse, acc[7] * inverse);
      if (col == 0) p.partial_lse[row] = lse;
    } else {
      uint4 packed;
      packed.x = pack2<Element>(acc[0] * inverse, acc[1] * inverse);
      packed.y = pack2<Element>(acc[2] * inverse, acc[3] * inverse);
      packed.z = pack2<Element>(acc[4] * inverse, acc[5] * inverse);
      packed.w = pack2<Element>(acc[6] * inverse, acc[7] * inverse);
      *reinterpret_cast<uint4*>(static_cast<Element*>(p.o) + query_row<kHeadDim>(p, b, h, i) + col) = packed;
      if (col == 0 && p.lse != nullptr) p.lse[padded_row(p, b, h, i)] = lse;
    }
  }
}

// The names say the role in a trace: "decode", "splitkv" when split, "combine".
template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads) flash_decode_kernel(const __grid_constant__ DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async, bf16 mma.sync and ldmatrix need sm_80
#else
  decode_block<Traits, false>(p);
#endif
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads) flash_decode_splitkv_kernel(const __grid_constant__ DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  decode_block<Traits, true>(p);
#endif
}

// One block per query row (b, h, i): the splits' logsumexps weigh their normalised O. Every
// load of a step is independent of the others, so each step costs one L2 round trip: thread s
// reads split s's logsumexp (splits <= kDecodeMaxSplits = the block's threads); warp w sums the
// splits w, w + kCombineWarps, ... for its lanes' columns; the warps' sums meet in shared memory.
// Launched as a programmatic dependent of the split kernel, which lets it be scheduled when
// every split block has finished its keys; griddepcontrol.wait then waits for their writes.
constexpr int kCombineWarps = 4;
constexpr int kCombineThreads = kCombineWarps * 32;
static_assert(kCombineThreads >= kDecodeMaxSplits, "one thread per split's logsumexp");
template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(kCombineThreads) flash_decode_combine_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kPerLane = kHeadDim / 32;
  __shared__ float weights[kDecodeMaxSplits];
  __shared__ float partial[kCombineWarps][kHeadDim];
  griddepcontrol_wait();
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int64_t row = blockIdx.x;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads * p.seq_q;
  const int i = static_cast<int>(row % p.seq_q);
  const int h = static_cast<int>((row / p.seq_q) % p.heads);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.seq_q) * p.heads));
  const int q_len = p.seq_lens_q != nullptr ? p.seq_lens_q[b] : p.seq_q;
  if (i >= q_len) return;  // no such row in a packed o; its padded lse is never read

  if (tid < p.splits) weights[tid] = p.partial_lse[tid * rows + row];
  __syncthreads();
  // Every warp reduces the (at most 128) logsumexps itself: no second barrier.
  float max_lse = -INFINITY;
  for (int s = lane; s < p.splits; s += 32) max_lse = fmaxf(max_lse, weights[s]);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
  float total = 0.f;
  for (int s = lane; s < p.splits; s += 32) total += max_lse == -INFINITY ? 0.f : __expf(weights[s] - max_lse);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);

  float acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) acc[j] = 0.f;
  if (max_lse != -INFINITY) {
    const float* src = p.partial_o + row * kHeadDim + lane * kPerLane;
    const int64_t split_stride = rows * kHeadDim;
#pragma unroll 8
    for (int s = warp; s < p.splits; s += kCombineWarps) {
      const float weight = __expf(weights[s] - max_lse);
      if constexpr (kPerLane == 4) {
        const float4 value = *reinterpret_cast<const float4*>(src + s * split_stride);
        acc[0] += weight * value.x;
        acc[1] += weight * value.y;
        acc[2] += weight * value.z;
        acc[3] += weight * value.w;
      } else {
        const float2 value = *reinterpret_cast<const float2*>(src + s * split_stride);
        acc[0] += weight * value.x;
        acc[1] += weight * value.y;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) partial[warp][lane * kPerLane + j] = acc[j];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    acc[j] = 0.f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) acc[j] += partial[w][lane * kPerLane + j];
  }
  const float inverse = total > 0.f ? 1.f / total : 0.f;
  Element* dst = static_cast<Element*>(p.o) + query_row<kHeadDim>(p, b, h, i) + lane * kPerLane;
#pragma unroll
  for (int j = 0; j < kPerLane; j += 2)
    *reinterpret_cast<uint32_t*>(dst + j) = pack2<Element>(acc[j] * inverse, acc[j + 1] * inverse);
  if (lane == 0 && p.lse != nullptr) p.lse[row] = total > 0.f ? max_lse + logf(total) : -INFINITY;
}

}  // namespace attnprof::kernels::decode
