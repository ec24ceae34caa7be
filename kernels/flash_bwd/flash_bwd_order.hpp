// The main backward kernel's walk as plain functions of the mask (host and device; the CPU tests
// check them): its tiles, the query rows a key block visits, and the order the blocks start in.
#pragma once

#include "core/mask_bounds.hpp"

namespace attnprof::kernels {

// The main kernel's tiles: keys per block (16 per warp), query rows per step (flash at head dim
// 64 takes two of these a step; the fused kernel's dQ tiles are these).
inline constexpr int kFlashBwdBlockKeys = 128;
inline constexpr int kFlashBwdBlockRows = 64;

// Key blocks over seq_kv keys: the grid's extent along the keys, whichever dimension holds them.
ATTNPROF_HOST_DEVICE inline int flash_bwd_key_blocks(int seq_kv) {
  return (seq_kv + kFlashBwdBlockKeys - 1) / kFlashBwdBlockKeys;
}

// The query rows that see any key of [key0, key1]: [*first, *last] (empty when *last < *first).
// Row i sees key j when low <= j - i <= high: i in [j - high, j - low].
ATTNPROF_HOST_DEVICE inline void flash_bwd_query_span(const MaskBounds& m, int key0, int key1, int seq_q, int* first,
                                                      int* last) {
  const long long lo = static_cast<long long>(key0) - m.high;
  const long long hi = static_cast<long long>(key1) - m.low;
  *first = static_cast<int>(lo < 0 ? 0 : lo);
  *last = static_cast<int>(hi > seq_q - 1 ? seq_q - 1 : hi);
}

// The grid's y and z dimensions hold at most this many blocks.
inline constexpr int kFlashBwdMaxGridYZ = 65535;

// Under a causal mask without a window (either alignment) key block k is seen by every query row
// that key block k + 1 is seen by, and more: the blocks differ in work by up to seq_q / 64 steps.
// Started in index order, the last wave still holds long blocks; started heaviest first (list
// scheduling, longest first), the short ones fill the end. So there the key block is the slowest
// grid index (z, at most kFlashBwdMaxGridYZ blocks); otherwise it is the fastest (x), so that the
// blocks running together share one head's Q and dO in L2.
ATTNPROF_HOST_DEVICE inline bool flash_bwd_heavy_first(const MaskBounds& m, int key_blocks) {
  return m.high < MaskBounds::kUnboundedKeys && m.low == -MaskBounds::kUnboundedKeys &&
         key_blocks <= kFlashBwdMaxGridYZ;
}

struct FlashBwdGrid {
  unsigned x = 1, y = 1, z = 1;
};

// Heaviest first: (K/V heads, sequences, key blocks); otherwise (key blocks, K/V heads, sequences).
inline FlashBwdGrid flash_bwd_grid(const MaskBounds& m, int seq_kv, int heads_kv, int batch) {
  const int key_blocks = flash_bwd_key_blocks(seq_kv);
  const auto u = [](int v) { return static_cast<unsigned>(v); };
  if (flash_bwd_heavy_first(m, key_blocks)) return {u(heads_kv), u(batch), u(key_blocks)};
  return {u(key_blocks), u(heads_kv), u(batch)};
}

}  // namespace attnprof::kernels
