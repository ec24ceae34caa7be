// Tile configuration of the efficient kernels: one traits type per (element, head-dim bucket).
// Shape of the work, in the style of xformers' cutlassF rather than FlashAttention-2:
//   64 query rows per block; 4 row-warps of 16 rows; for head dims > 64 two column-warps per
//   row group (256 threads), so each warp holds a small accumulator and the kernel runs at
//   <= 128 registers, 2 blocks (16 warps) per SM = 25% theoretical occupancy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace attnprof::kernels::efficient {

// bf16/fp16 on tensor cores (mma.sync m16n8k16, fp32 accumulation).
//  d64  : 4 warps (128 thr), each 16 rows x all 64 keys of a tile; Q fragments in registers.
//  d128 : 8 warps, the two warps of a row group split the 64 keys of a tile (32 each) and
//         keep independent softmax states; the halves are merged once, at the end.
//  d256 : 8 warps, the two warps split the head dim of the output; the 32-key score tile is
//         split by keys, its row max is exchanged and P is staged through shared memory
//         (cutlassF's scheme), so each warp holds only 16 x 128 of the output.
template <typename T, int kHeadDim_>
struct MmaTraits {
  using Element = T;
  static constexpr int kHeadDim = kHeadDim_;  // compiled bucket; real head dims <= it are zero-padded
  static constexpr int kBlockM = 64;
  static constexpr int kRowWarps = 4;
  static constexpr int kColWarps = kHeadDim <= 64 ? 1 : 2;
  static constexpr bool kSplitDims = kHeadDim > 128;
  static constexpr int kWarps = kRowWarps * kColWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocksPerSm = 16 / kWarps;  // caps registers at 128 per thread
  static constexpr int kBlockN = kHeadDim == 128 ? 64 : 32;
  static constexpr int kWarpKeys = kBlockN / kColWarps;                         // scores per warp row
  static constexpr int kWarpDims = kSplitDims ? kHeadDim / kColWarps : kHeadDim;  // accumulator columns
  static constexpr int kPvKeys = kSplitDims ? kBlockN : kWarpKeys;  // keys each warp multiplies V by
  static constexpr int kOutChunks = kHeadDim / 8 / kColWarps;       // 16-byte output chunks a warp writes per row
  static constexpr bool kQInRegisters = kHeadDim <= 64;

  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row of Q, K, V
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kPRowBytes = 128;  // P tile rows padded to one 128-byte swizzle span

  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kTileBytes = kBlockN * kRowBytes;
  static constexpr int kKOffset = kQBytes;
  static constexpr int kVOffset = kKOffset + 2 * kTileBytes;  // K and V double-buffered
  static constexpr int kPOffset = kVOffset + 2 * kTileBytes;
  static constexpr int kPBytes = kSplitDims ? kBlockM * kPRowBytes : 0;
  static constexpr int kStatsOffset = kPOffset + kPBytes;
  static constexpr int kStatsBytes = kSplitDims ? 2 * kColWarps * kBlockM * 4 : 0;  // row max, row sum
  static constexpr int kSmemBytes = kStatsOffset + kStatsBytes;

  // Key split: the merge area (per warp, half an accumulator + its row statistics) reuses K/V.
  static constexpr int kMergeFloatsPerWarp = (kHeadDim / 16) * 4 * 32 + 4 * 32;
  static constexpr int kMergeBytes = (kColWarps > 1 && !kSplitDims) ? kWarps * kMergeFloatsPerWarp * 4 : 0;

  static_assert(kHeadDim % 64 == 0, "buckets are multiples of 64 (128-byte swizzle rows)");
  static_assert(kWarpKeys % 16 == 0 && kPvKeys % 16 == 0 && kWarpDims % 16 == 0, "ldmatrix.x4 granularity");
  static_assert(kBlockN * 2 <= kPRowBytes, "a P row must fit one swizzle span");
  static_assert(kMergeBytes <= 4 * kTileBytes, "merge area must fit in the K/V buffers");
  static_assert((kBlockM * kChunks) % kThreads == 0 && (kBlockN * kChunks) % kThreads == 0, "even tile loads");
};

// fp32 on FFMA (exact fp32 products, no TF32): 64 query rows x 32 keys per tile, 256 threads.
// Thread (r = tid/8, c = tid%8) scores rows {r, r+32} against keys {c, c+8, c+16, c+24} and
// accumulates rows {r, r+32} x columns {4c + 32j .. +3}; rows of 8 lanes reduce by shuffles.
template <int kHeadDim_>
struct SimtTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 32;
  static constexpr int kThreads = 256;
  static constexpr int kMinBlocksPerSm = kHeadDim <= 128 ? 2 : 1;
  static constexpr int kChunks = kHeadDim / 4;  // 16-byte chunks per row
  static constexpr int kLd = kHeadDim + 4;      // floats per shared row: +16 B keeps float4 rows conflict-free
  static constexpr int kPLd = kBlockN + 1;
  static constexpr int kColGroups = kHeadDim / 32;  // float4 column groups per thread

  static constexpr int kKOffset = kBlockM * kLd * 4;
  static constexpr int kVOffset = kKOffset + kBlockN * kLd * 4;
  static constexpr int kPOffset = kVOffset + kBlockN * kLd * 4;
  static constexpr int kSmemBytes = kPOffset + kBlockM * kPLd * 4;

  static_assert(kHeadDim % 32 == 0, "column groups of 8 lanes x float4");
  static_assert((kBlockM * kChunks) % kThreads == 0 && (kBlockN * kChunks) % kThreads == 0, "even tile loads");
};

}  // namespace attnprof::kernels::efficient
