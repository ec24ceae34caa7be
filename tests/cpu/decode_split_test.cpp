// The decode split-KV heuristic (kernels/decode/decode_split.hpp): no split where one wave
// already fills the device, splits where few blocks meet long sequences, and the bounds.
#include <gtest/gtest.h>

#include "decode/decode_split.hpp"

namespace attnprof::kernels {
namespace {

DecodeSplitInputs h200(long long blocks, int key_tiles) {
  DecodeSplitInputs in;
  in.blocks = blocks;
  in.key_tiles = key_tiles;
  in.sm_count = 132;
  in.blocks_per_sm = 2;
  in.min_tiles_per_split = 4;
  in.max_splits = 128;
  return in;
}

TEST(DecodeSplit, FullGridIsNotSplit) {
  // 64 sequences x 8 K/V heads = 512 blocks on 264 slots: ~2 full waves.
  EXPECT_EQ(choose_decode_splits(h200(64 * 8, 4096 / 16)), 1);
  EXPECT_EQ(choose_decode_splits(h200(132 * 2, 100000)), 1);
}

TEST(DecodeSplit, OneBlockOnMostSmsIsNotSplit) {
  // 16 sequences x 8 K/V heads = 128 blocks on 132 SMs; 12 x 8 = 96 blocks, 73% of them.
  EXPECT_EQ(choose_decode_splits(h200(16 * 8, 4096 / 16)), 1);
  EXPECT_EQ(choose_decode_splits(h200(12 * 8, 8192 / 16)), 1);
  EXPECT_EQ(choose_decode_splits(h200(93, 4096 / 16)), 1);  // 70.5% of the SMs
  EXPECT_EQ(choose_decode_splits(h200(132, 32768 / 16)), 1);
  // Below 70% of the SMs, or past one block per SM (some SMs would hold two), the split rules decide.
  EXPECT_GT(choose_decode_splits(h200(92, 4096 / 16)), 1);
  EXPECT_GT(choose_decode_splits(h200(8 * 8, 32768 / 16)), 1);
  EXPECT_GT(choose_decode_splits(h200(24 * 8, 4096 / 16)), 1);
  EXPECT_GT(choose_decode_splits(h200(133, 4096 / 16)), 1);
}

TEST(DecodeSplit, FewBlocksAgainstLongSequencesSplit) {
  const int one = choose_decode_splits(h200(1 * 8, 131072 / 16));
  EXPECT_GT(one, 16);
  // The split grid keeps at least 95% of the slots of its waves busy.
  const long long total = 8LL * one;
  const long long waves = (total + 263) / 264;
  EXPECT_GE(static_cast<double>(total) / (waves * 264.0), 0.95) << one << " splits";
  const int eight = choose_decode_splits(h200(8 * 8, 32768 / 16));
  EXPECT_GT(eight, 1);
  EXPECT_LE(eight, 128);
}

TEST(DecodeSplit, PrefersTheFullestSingleWave) {
  // 8 sequences x 8 K/V heads: 4 splits fill 256 of 264 slots in one wave (8 would take two).
  EXPECT_EQ(choose_decode_splits(h200(8 * 8, 32768 / 16)), 4);
  // 1 x 8 against 8191 tiles (a prime: no even split): 33 splits fill all 264 slots.
  EXPECT_EQ(choose_decode_splits(h200(1 * 8, 8191)), 33);
  // With 4 warps per block, 32 splits of 256 tiles (64 per warp) fill 256 slots evenly, where 33
  // would leave splits of 249 and 224 tiles; a prime tile count has no even split: the fullest wave.
  DecodeSplitInputs even = h200(1 * 8, 131072 / 16);
  even.warps = 4;
  EXPECT_EQ(choose_decode_splits(even), 32);
  even.key_tiles = 8191;
  EXPECT_EQ(choose_decode_splits(even), 33);
  even = h200(8 * 8, 32768 / 16);
  even.warps = 4;
  EXPECT_EQ(choose_decode_splits(even), 4);
  // 2 x 8: 16 splits, 256 slots.
  EXPECT_EQ(choose_decode_splits(h200(2 * 8, 32768 / 16)), 16);
  // 70 blocks: 3 splits fill only 210 slots (80%); no single wave is full enough, so the
  // multi-wave rule decides, and its grid keeps 90% of its waves' slots busy.
  const int s = choose_decode_splits(h200(70, 32768 / 16));
  const long long total = 70LL * s, waves = (total + 263) / 264;
  EXPECT_GE(static_cast<double>(total) / (waves * 264.0), 0.9) << s << " splits";
  // Few key tiles cap the splits below a full wave: then the multi-wave rule decides too.
  EXPECT_LE(choose_decode_splits(h200(8, 64)), 16);
}

TEST(DecodeSplit, NeverMoreSplitsThanKeyTiles) {
  for (int tiles : {1, 2, 3, 7, 40})
    for (long long blocks : {1LL, 3LL, 8LL}) {
      DecodeSplitInputs in = h200(blocks, tiles);
      in.min_tiles_per_split = 1;
      const int s = choose_decode_splits(in);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, tiles) << blocks << " blocks, " << tiles << " tiles";
    }
  // And no split holds fewer tiles than the block's warps need.
  EXPECT_EQ(choose_decode_splits(h200(1, 3)), 1);
  EXPECT_LE(choose_decode_splits(h200(1, 40)), 10);
}

TEST(DecodeSplit, RespectsTheWorkspaceBound) {
  DecodeSplitInputs in = h200(1, 1 << 20);
  in.max_splits = 16;
  EXPECT_LE(choose_decode_splits(in), 16);
  EXPECT_GE(choose_decode_splits(in), 1);
}

TEST(DecodeSplit, DegenerateInputsGiveOneSplit) {
  DecodeSplitInputs in;
  in.blocks = 0;
  in.key_tiles = 0;
  in.sm_count = 0;
  in.blocks_per_sm = 0;
  EXPECT_EQ(choose_decode_splits(in), 1);
}

}  // namespace
}  // namespace attnprof::kernels
