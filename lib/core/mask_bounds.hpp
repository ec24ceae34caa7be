// The mask of a problem in the form the kernels evaluate it, and the key tiles a block of query
// rows must visit. Plain header shared by host code and CUDA kernels (compiled by nvcc, the
// functions are __host__ __device__); the CPU tests check it against visible_keys().
#pragma once

#include <algorithm>

#include "core/types.hpp"

#if defined(__CUDACC__)
#define ATTNPROF_HOST_DEVICE __host__ __device__
#else
#define ATTNPROF_HOST_DEVICE
#endif

namespace attnprof {

// Row i sees key j when low <= j - i <= high and 0 <= j < seq_kv: exactly visible_keys(), as a
// band around the diagonal. An unbounded side holds -/+kUnboundedKeys, so no test needs a
// branch; with seq_q and seq_kv below 2^29 (the backends check) no sum overflows an int. Kernels
// test j - i against low and high: both are uniform over the grid, so they cost no per-thread
// register.
struct MaskBounds {
  static constexpr int kUnboundedKeys = 1 << 30;
  int low = -kUnboundedKeys;  // diagonal offset - window left (top-left: offset 0)
  int high = kUnboundedKeys;  // diagonal offset + window right (0 past the diagonal when causal)
  int diagonal = 0;           // the diagonal offset low and high were built around
  bool bottom_right = false;  // the diagonal follows each sequence's own lengths

  // The bounds of one sequence of a ragged batch, q_len query rows against kv_len keys: a
  // bottom-right diagonal moves to kv_len - q_len; a top-left one stays. Unbounded sides stay so.
  ATTNPROF_HOST_DEVICE MaskBounds for_lengths(int q_len, int kv_len) const {
    if (!bottom_right) return *this;
    MaskBounds m = *this;
    const int shift = (kv_len - q_len) - diagonal;
    m.diagonal += shift;
    if (low > -kUnboundedKeys) m.low += shift;
    if (high < kUnboundedKeys) m.high += shift;
    return m;
  }

  // False when every row sees every key: no mask at all, whatever the alignment.
  ATTNPROF_HOST_DEVICE bool bounded() const { return low > -kUnboundedKeys || high < kUnboundedKeys; }
  ATTNPROF_HOST_DEVICE bool sees(int row, int key) const { return key - row >= low && key - row <= high; }
  ATTNPROF_HOST_DEVICE int first_key(int row) const { return row + low > 0 ? row + low : 0; }
  ATTNPROF_HOST_DEVICE int last_key(int row, int seq_kv) const {
    return row + high < seq_kv - 1 ? row + high : seq_kv - 1;
  }
};

inline MaskBounds mask_bounds(const AttentionProblem& p) {
  MaskBounds m;
  if (!p.causal && !p.window.bounded()) return m;
  // The diagonal of row 0: key 0 top-left, key seq_kv - seq_q bottom-right.
  const int offset = p.is_bottom_right() ? p.shape.seq_kv - p.shape.seq_q : 0;
  m.diagonal = offset;
  m.bottom_right = p.is_bottom_right();
  // A bound of kUnboundedKeys or more already reaches past every key.
  if (p.window.left >= 0) m.low = offset - std::min(p.window.left, MaskBounds::kUnboundedKeys);
  // Causal caps the right side at the diagonal; a window's right bound (>= 0) cannot widen it.
  if (p.causal)
    m.high = offset;
  else if (p.window.right >= 0)
    m.high = offset + std::min(p.window.right, MaskBounds::kUnboundedKeys);
  return m;
}

// The key tiles (of block_keys keys) that query rows [first_row, first_row + block_rows) ∩
// [0, seq_q) visit: [begin, end). Tiles in [unmasked_begin, unmasked_end) hold only keys every
// one of those rows sees, so they need no element mask; [begin, unmasked_begin) and
// [unmasked_end, end) do. Tiles outside [begin, end) hold no key any of the rows sees.
// begin == end when no row of the block sees a key.
struct KeyTiles {
  int begin = 0;
  int end = 0;
  int unmasked_begin = 0;
  int unmasked_end = 0;
};

ATTNPROF_HOST_DEVICE inline KeyTiles key_tiles(const MaskBounds& m, int seq_q, int seq_kv, int first_row,
                                               int block_rows, int block_keys) {
  KeyTiles t;
  const int last_row = (first_row + block_rows < seq_q ? first_row + block_rows : seq_q) - 1;
  // first_key and last_key never decrease with the row, so the block's keys lie in
  // [first_key(first_row), last_key(last_row)]; when that is empty, every row's is.
  const int lo = m.first_key(first_row);
  const int hi = m.last_key(last_row, seq_kv);
  if (hi < lo) return t;
  t.begin = lo / block_keys;
  t.end = hi / block_keys + 1;
  // A tile is seen whole by every row when it starts at or after the last row's first key and
  // ends at or before the first row's last key.
  const int whole_from = (m.first_key(last_row) + block_keys - 1) / block_keys;
  const int first_row_last = m.last_key(first_row, seq_kv);
  const int whole_to = first_row_last >= 0 ? (first_row_last + 1) / block_keys : 0;
  t.unmasked_begin = whole_from < t.begin ? t.begin : (whole_from > t.end ? t.end : whole_from);
  t.unmasked_end = whole_to < t.unmasked_begin ? t.unmasked_begin : (whole_to > t.end ? t.end : whole_to);
  return t;
}

}  // namespace attnprof
