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
