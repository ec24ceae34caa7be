// How many parts a decode problem's keys are split into (split-KV), as a pure host function so
// the CPU tests check it. Plain C++: no CUDA types.
#pragma once

#include <algorithm>

namespace attnprof::kernels {

// What the choice depends on: the blocks one split gives (batch x K/V heads), the key tiles of
// the longest sequence, and how many blocks the device runs at once.
struct DecodeSplitInputs {
  long long blocks = 1;       // batch * heads_kv: one block per (sequence, K/V head) per split
  int key_tiles = 1;          // key tiles of the longest sequence's visible range
  int sm_count = 1;           // the device's SMs
  int blocks_per_sm = 1;      // resident blocks of the decode kernel per SM (occupancy)
  int min_tiles_per_split = 1;  // fewer tiles than this per split starves the block's warps
  int warps = 1;              // warps of a block, each walking every warps-th tile of its split
  int max_splits = 128;       // the workspace's bound
};

// Splits in [1, max_splits]. No split when the unsplit grid already fills the device: at least
// one full wave, or a last partial wave that keeps 85% of the slots busy on average; or one block
// on each of at least 70% of the SMs and none on a second slot: those already keep DRAM busy and a
// split only adds the combine (H200, 96 blocks: 96.8 us unsplit, 103.2 in 8 splits; 64 blocks
// unsplit: 27% slower than 4 splits; docs/perf/NOTES.md, "v5"). Otherwise
// one wave when one can fill at least 90% of the slots: the most splits that still fit in it
// (measured on the H200, docs/perf/NOTES.md: a single wave beat two waves of twice the splits by
// 2-3%; the combine reads half as many partial results and no block waits for a slot), or fewer
// if that gives every split, and every warp in it, the same number of tiles (1 x 8 heads x
// 131072 keys: 32 splits of 256 tiles ran 0.8% faster than 33 of 249).
// Failing that, the fewest splits within 5% of the best busy fraction of the waves (a second
// kernel and a workspace round trip cost something, so no more splits than that). Never more
// splits than key tiles, nor so many that a split holds fewer than min_tiles_per_split tiles.
inline int choose_decode_splits(const DecodeSplitInputs& in) {
  const long long slots = static_cast<long long>(std::max(in.sm_count, 1)) * std::max(in.blocks_per_sm, 1);
  const long long blocks = std::max(in.blocks, 1LL);
  auto busy = [&](long long s) {  // mean fraction of slots busy over the waves of blocks * s
    const long long total = blocks * s;
    const long long waves = (total + slots - 1) / slots;
    return static_cast<double>(total) / static_cast<double>(waves * slots);
  };
  if (blocks >= slots && busy(1) >= 0.85) return 1;
  const long long sms = std::max(in.sm_count, 1);
  if (blocks <= sms && static_cast<double>(blocks) >= 0.7 * static_cast<double>(sms)) return 1;
  const int by_tiles = std::max(1, in.key_tiles / std::max(in.min_tiles_per_split, 1));
  const int limit = std::max(1, std::min({in.max_splits, in.key_tiles, by_tiles}));
  if (limit == 1) return 1;
  const long long one_wave = std::min<long long>(limit, slots / blocks);
  const auto fills_wave = [&](long long s) { return static_cast<double>(blocks * s) >= 0.9 * static_cast<double>(slots); };
  if (one_wave >= 1 && fills_wave(one_wave)) {
    const int warps = std::max(in.warps, 1);
    for (long long s = one_wave; s >= 1 && fills_wave(s); --s)
      if (in.key_tiles % s == 0 && (in.key_tiles / s) % warps == 0) return static_cast<int>(s);
    return static_cast<int>(one_wave);
  }
  // Busy fraction alone prefers one wave of tiny blocks; also ask for a wave at least as full
  // as the unsplit grid's, then take the fewest splits within 5% of the best seen.
  double best = 0.0;
  for (int s = 1; s <= limit; ++s) best = std::max(best, busy(s) * std::min(1.0, double(blocks * s) / double(slots)));
  for (int s = 1; s <= limit; ++s)
    if (busy(s) * std::min(1.0, double(blocks * s) / double(slots)) >= 0.95 * best) return s;
  return limit;
}

}  // namespace attnprof::kernels
