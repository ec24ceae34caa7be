// The mask as the kernels evaluate it (core/mask_bounds.hpp) against visible_keys(), the one
// definition: every row's key range, and for every block of query rows the key tiles it visits,
// skips and masks, over causal or not, both alignments, windows, odd and unequal lengths and the
// flash (128 x 64) and efficient (64 x 64, 64 x 32) tile shapes.
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"

namespace attnprof {
namespace {

std::vector<AttentionProblem> mask_problems() {
  const std::vector<std::pair<int, int>> lengths = {{1, 1},    {17, 17},  {33, 255}, {255, 33}, {128, 128},
                                                    {200, 64}, {64, 200}, {1, 300},  {300, 1},  {129, 257}};
  const std::vector<AttentionWindow> windows = {{-1, -1}, {3, 0}, {64, 0},  {17, 5},
                                                {-1, 4},  {0, -1}, {0, 0}, {200, 300}};
  std::vector<AttentionProblem> problems;
  for (auto [seq_q, seq_kv] : lengths)
    for (const AttentionWindow& window : windows)
      for (bool causal : {false, true})
        for (MaskAlignment alignment : {MaskAlignment::top_left, MaskAlignment::bottom_right}) {
          AttentionProblem p;
          p.shape = {1, 1, seq_q, seq_kv, 64};
          p.causal = causal;
          p.alignment = alignment;
          p.window = window;
          problems.push_back(p);
        }
  return problems;
}

std::string describe(const AttentionProblem& p) {
  return fmt::format("seq_q {} seq_kv {} causal {} {} window [{}, {}]", p.shape.seq_q, p.shape.seq_kv, p.causal,
                     p.is_bottom_right() ? "bottom_right" : "top_left", p.window.left, p.window.right);
}

TEST(MaskBounds, RowRangesAreVisibleKeys) {
  for (const AttentionProblem& p : mask_problems()) {
    const MaskBounds m = mask_bounds(p);
    EXPECT_EQ(m.bounded(), p.causal || p.window.bounded()) << describe(p);
    for (int row = 0; row < p.shape.seq_q; ++row) {
      const KeyRange want = visible_keys(p, row, p.shape.seq_q, p.shape.seq_kv);
      const int first = m.first_key(row), last = m.last_key(row, p.shape.seq_kv);
      if (want.count() == 0) {
        EXPECT_LT(last, first) << describe(p) << " row " << row;
      } else {
        EXPECT_EQ(first, want.first) << describe(p) << " row " << row;
        EXPECT_EQ(last, want.last) << describe(p) << " row " << row;
      }
    }
  }
}

TEST(MaskBounds, KeyTilesSkipOnlyUnseenKeysAndMaskOnlyPartlySeenTiles) {
  for (const AttentionProblem& p : mask_problems())
    for (auto [block_rows, block_keys] : {std::pair{128, 64}, std::pair{64, 64}, std::pair{64, 32}}) {
      const int seq_q = p.shape.seq_q, seq_kv = p.shape.seq_kv;
      const MaskBounds m = mask_bounds(p);
      for (int first_row = 0; first_row < seq_q; first_row += block_rows) {
        const KeyTiles t = key_tiles(m, seq_q, seq_kv, first_row, block_rows, block_keys);
        const std::string where =
            fmt::format("{} block {}x{} rows from {}", describe(p), block_rows, block_keys, first_row);
        ASSERT_LE(t.begin, t.unmasked_begin) << where;
        ASSERT_LE(t.unmasked_begin, t.unmasked_end) << where;
        ASSERT_LE(t.unmasked_end, t.end) << where;
        ASSERT_GE(t.begin, 0) << where;
        ASSERT_LE(t.end, (seq_kv + block_keys - 1) / block_keys) << where;
        bool any_seen = false;
        const int tiles = (seq_kv + block_keys - 1) / block_keys;
        for (int n = 0; n < tiles; ++n) {
          bool seen = false, whole = true;
          for (int row = first_row; row < std::min(first_row + block_rows, seq_q); ++row) {
            const KeyRange keys = visible_keys(p, row, seq_q, seq_kv);
            for (int key = n * block_keys; key < (n + 1) * block_keys; ++key) {
              const bool visible = key < seq_kv && key >= keys.first && key <= keys.last;
              seen = seen || visible;
              whole = whole && visible;
            }
          }
          any_seen = any_seen || seen;
          if (seen) {
            EXPECT_TRUE(n >= t.begin && n < t.end) << where << ": tile " << n << " holds seen keys but is skipped";
          }
          if (n >= t.unmasked_begin && n < t.unmasked_end) {
            EXPECT_TRUE(whole) << where << ": tile " << n << " is not seen whole by every row but is left unmasked";
          }
        }
        if (!any_seen) {
          EXPECT_EQ(t.begin, t.end) << where << ": no row sees a key, yet tiles are visited";
        }
      }
    }
}

// The tile loop the kernels had before windows: causal top-left and full attention visit and
// mask exactly the tiles they did, so those cases keep their cost.
TEST(MaskBounds, FullAndTopLeftCausalKeepTheirTiles) {
  for (int seq_q : {1, 17, 128, 1000, 4097})
    for (int seq_kv : {1, 17, 128, 1000, 4097})
      for (bool causal : {false, true}) {
        AttentionProblem p;
        p.shape = {1, 1, seq_q, seq_kv, 64};
        p.causal = causal;
        const MaskBounds m = mask_bounds(p);
        for (int m0 = 0; m0 < seq_q; m0 += 128) {
          const KeyTiles t = key_tiles(m, seq_q, seq_kv, m0, 128, 64);
          const int kv_limit = causal ? std::min(seq_kv, std::min(seq_q, m0 + 128)) : seq_kv;
          const int n_unmasked = (causal ? std::min(seq_kv, m0 + 1) : seq_kv) / 64;
          EXPECT_EQ(t.begin, 0);
          EXPECT_EQ(t.unmasked_begin, 0);
          EXPECT_EQ(t.end, (kv_limit + 63) / 64) << seq_q << " " << seq_kv << " " << m0;
          EXPECT_EQ(t.unmasked_end, std::min(n_unmasked, t.end)) << seq_q << " " << seq_kv << " " << m0;
        }
      }
}

}  // namespace
}  // namespace attnprof
