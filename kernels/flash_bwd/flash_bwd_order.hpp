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

// A main-kernel block's place in the problem: its key block, K/V head and sequence.
struct FlashBwdBlock {
  int key_block = 0, kv_head = 0, b = 0;
};

// The inverse of flash_bwd_grid: the block at (x, y, z) of that grid.
ATTNPROF_HOST_DEVICE inline FlashBwdBlock flash_bwd_block(const MaskBounds& m, int seq_kv, unsigned x, unsigned y,
                                                          unsigned z) {
  const auto i = [](unsigned v) { return static_cast<int>(v); };
  if (flash_bwd_heavy_first(m, flash_bwd_key_blocks(seq_kv))) return {i(z), i(x), i(y)};
  return {i(x), i(y), i(z)};
}

// Query rows per step of the main kernel: 128 for flash (not fused) at head dim 64, else 64.
ATTNPROF_HOST_DEVICE constexpr int flash_bwd_step_rows(int head_dim, bool fused) {
  return !fused && head_dim == 64 ? 2 * kFlashBwdBlockRows : kFlashBwdBlockRows;
}

// The tail of flash's (not fused) backward, stream-K style. Without a mask band every block walks
// the same steps, one block per SM at a time, so a last wave of r blocks on s slots costs a whole
// block's time (measured: 100 blocks in the last wave cost 96% of a full one). The tail kernel
// takes the last `blocks` blocks instead and gives each of its `ctas` blocks an equal run of their
// steps, flattened in block order: CTA c walks steps [begin(c), begin(c + 1)), parts of at most a
// few blocks. A block walked by several CTAs has each part's dK and dV (fp32) in a slot of the
// workspace; the last part to arrive adds them in CTA order (deterministic) and stores them.
struct FlashBwdTail {
  int first_block = 0;  // the blocks before it run in the main kernel (grid order, key blocks fastest)
  int blocks = 0;       // blocks the tail kernel walks; 0: no tail kernel
  int ctas = 0;         // the tail kernel's blocks
  int steps = 0;        // steps every block walks
  ATTNPROF_HOST_DEVICE long long begin(int cta) const {
    return static_cast<long long>(blocks) * steps * cta / ctas;
  }
};

// The CTAs that walk part of tail block j: [*first, *last] (the ranges are contiguous).
ATTNPROF_HOST_DEVICE inline void flash_bwd_tail_ctas(const FlashBwdTail& t, int j, int* first, int* last) {
  const long long lo = static_cast<long long>(j) * t.steps, hi = lo + t.steps;
  // CTA c begins at floor(total c / ctas): the last c whose begin is <= lo, and the last whose begin is < hi.
  const long long total = static_cast<long long>(t.blocks) * t.steps;
  int c = static_cast<int>(lo * t.ctas / total);
  while (c + 1 < t.ctas && t.begin(c + 1) <= lo) ++c;
  while (c > 0 && t.begin(c) > lo) --c;
  *first = c;
  while (c + 1 < t.ctas && t.begin(c + 1) < hi) ++c;
  *last = c;
}

// Slot of CTA c's part of tail block j: a CTA has at most two parts that share a block (its first
// and its last); 2c when its run starts inside block j, else 2c + 1.
ATTNPROF_HOST_DEVICE inline int flash_bwd_tail_slot(const FlashBwdTail& t, int cta, int j) {
  return t.begin(cta) >= static_cast<long long>(j) * t.steps ? 2 * cta : 2 * cta + 1;
}

// Steps a part of a block costs beyond the block's own (loading K and V, the pipeline's start,
// writing and adding the parts' dK and dV): the planning margin.
inline constexpr int kFlashBwdTailOverheadSteps = 2;

// The tail for a problem on `slots` concurrent main-kernel blocks (SMs x blocks per SM). The last
// partial wave becomes the tail (with one full wave more when it holds under half the slots, so
// that a CTA's run stays near a block); taken when it is predicted to save at least 3% of the
// tail's time and each CTA walks 8 steps or more. `forced` (tests, measurements) takes any tail
// that gives each CTA a step.
inline FlashBwdTail flash_bwd_tail_plan(const MaskBounds& m, int seq_q, int seq_kv, int heads_kv, int batch,
                                        int group_size, int step_rows, int slots, bool forced = false) {
  FlashBwdTail t;
  const long long total = static_cast<long long>(flash_bwd_key_blocks(seq_kv)) * heads_kv * batch;
  t.first_block = static_cast<int>(total);
  if (m.bounded() || slots <= 0 || total <= 0 || seq_q <= 0) return t;
  const long long remainder = total % slots;
  if (remainder == 0) return t;
  long long blocks = remainder;
  if (2 * remainder < slots && total >= remainder + slots) blocks += slots;
  const long long steps = static_cast<long long>((seq_q + step_rows - 1) / step_rows) * group_size;
  const long long per_cta = (blocks * steps + slots - 1) / slots;
  const long long rounds = (blocks + slots - 1) / slots;
  if (blocks * steps < slots) return t;  // a CTA without a step
  if (!forced && (per_cta < 8 || 100 * (per_cta + kFlashBwdTailOverheadSteps) > 97 * rounds * steps)) return t;
  t.blocks = static_cast<int>(blocks);
  t.first_block = static_cast<int>(total - blocks);
  t.ctas = slots;
  t.steps = static_cast<int>(steps);
  return t;
}

}  // namespace attnprof::kernels
