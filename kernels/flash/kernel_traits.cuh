// Tile configuration of the flash forward kernel: everything the kernel body is generic over.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace attnprof::kernels::flash {

template <typename Element_, int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kStages_>
struct FlashFwdTraits {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;  // query rows per block
  static constexpr int kBlockN = kBlockN_;  // keys per K/V tile
  static constexpr int kWarps = kWarps_;
  static constexpr int kStages = kStages_;  // K/V tiles in flight (prefetch distance kStages - 1)
  static constexpr int kThreads = kWarps * 32;
  // 255 registers x 128 threads: two blocks per SM, the FA2 design point.
  static constexpr int kMinBlocksPerSm = 2;

  // Each warp owns kWarpRows query rows (split-Q: no inter-warp reduction), as kMTiles
  // m16 tiles; S is kBlockN/8 n8 tiles wide, O kHeadDim/8.
  static constexpr int kWarpRows = kBlockM / kWarps;
  static constexpr int kMTiles = kWarpRows / 16;
  static constexpr int kSTiles = kBlockN / 8;
  static constexpr int kOTiles = kHeadDim / 8;

  // Shared memory rows are head_dim elements: 128 or 256 bytes, stored in 16-byte chunks whose
  // index is XORed with (row % 8), so the 8 rows an ldmatrix phase reads hit 8 distinct bank groups.
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kChunksPerRow = kRowBytes / 16;
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kKVTileBytes = kBlockN * kRowBytes;
  // After the K/V stages: per-lane running row sums (kMTiles x 2 floats per thread), then the
  // block's K/V element offset (8 bytes) or, in the ragged/paged kernel, its BlockSequence.
  static constexpr int kRowSumsOffset = kQBytes + 2 * kStages * kKVTileBytes;
  static constexpr int kKVHeadOffset = kRowSumsOffset + kMTiles * 2 * kThreads * 4;
  static constexpr int kSmemBytes = kKVHeadOffset + 64;

  static_assert(std::is_same_v<Element, __nv_bfloat16> || std::is_same_v<Element, __half>);
  static_assert(kHeadDim % 64 == 0, "rows must be whole 128-byte swizzle atoms");
  static_assert(kWarpRows % 16 == 0 && kBlockN % 16 == 0);
  static_assert(kThreads % kChunksPerRow == 0 && (kThreads / kChunksPerRow) % 8 == 0,
                "each thread's copy rows must keep one row % 8, so its swizzled chunk is fixed");
  static_assert(kBlockM % (kThreads / kChunksPerRow) == 0 && kBlockN % (kThreads / kChunksPerRow) == 0);
  static_assert((kWarpRows * kChunksPerRow) % 32 == 0);
  static_assert(kStages >= 2);
};

// d128: FA2's A100/H100 choice, 128x64 with 4 warps. d64: 128x64 as well, not FA2's 128x128:
// with 128 keys S takes 128 registers and ptxas spills. K and V double-buffered:
// d128 32 + 2x2x16 KB + 2 KB row sums = 98 KB, d64 16 + 2x2x8 + 2 = 50 KB, so two blocks fit in
// an SM's 228 KB; 255 (d128) / 218-233 (d64) registers x 128 threads also allow exactly two.
template <typename Element>
using FlashFwdTraitsD64 = FlashFwdTraits<Element, 64, 128, 64, 4, 2>;
template <typename Element>
using FlashFwdTraitsD128 = FlashFwdTraits<Element, 128, 128, 64, 4, 2>;

}  // namespace attnprof::kernels::flash
