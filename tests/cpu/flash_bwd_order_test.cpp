// The order flash's backward blocks start in (kernels/flash_bwd/flash_bwd_order.hpp): heaviest
// first exactly where the premise holds (under a causal mask without a window, a key block is
// seen by at least as many query rows as the next one), and the grid dimension each index takes.
#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"
#include "flash_bwd/flash_bwd_order.hpp"

namespace attnprof::kernels {
namespace {

AttentionProblem problem(int seq_q, int seq_kv, bool causal, MaskAlignment alignment, AttentionWindow window) {
  AttentionProblem p;
  p.shape = {1, 1, seq_q, seq_kv, 64};
  p.causal = causal;
  p.alignment = alignment;
  p.window = window;
  return p;
}

// Query rows that see some key of key block k.
int rows_of_block(const MaskBounds& m, int k, int seq_q, int seq_kv) {
  const int key0 = k * kFlashBwdBlockKeys;
  const int key1 = std::min(key0 + kFlashBwdBlockKeys, seq_kv) - 1;
  int first = 0, last = -1;
  flash_bwd_query_span(m, key0, key1, seq_q, &first, &last);
  return last >= first ? last - first + 1 : 0;
}

// Causal, or a window with only a right bound (a causal diagonal moved right): heaviest first.
TEST(FlashBwdOrder, CausalKeyBlocksGetLighterAlongTheKeys) {
  for (auto [seq_q, seq_kv] : {std::pair{4096, 4096}, std::pair{1000, 4097}, std::pair{4097, 1000},
                               std::pair{129, 257}, std::pair{1, 300}, std::pair{300, 1}})
    for (MaskAlignment alignment : {MaskAlignment::top_left, MaskAlignment::bottom_right})
      for (bool causal : {true, false}) {
        const AttentionWindow window = causal ? AttentionWindow{} : AttentionWindow{-1, 200};
        const MaskBounds m = mask_bounds(problem(seq_q, seq_kv, causal, alignment, window));
        const int key_blocks = flash_bwd_key_blocks(seq_kv);
        const std::string label = fmt::format("{} x {} {} {}", seq_q, seq_kv,
                                              alignment == MaskAlignment::top_left ? "top_left" : "bottom_right",
                                              causal ? "causal" : "window [-1, 200]");
        ASSERT_TRUE(flash_bwd_heavy_first(m, key_blocks)) << label;
        for (int k = 0; k + 1 < key_blocks; ++k)
          EXPECT_GE(rows_of_block(m, k, seq_q, seq_kv), rows_of_block(m, k + 1, seq_q, seq_kv))
              << label << " block " << k;
      }
}

TEST(FlashBwdOrder, IndexOrderWithoutACausalBoundOrPastTheGridLimit) {
  const int seq = 4096, key_blocks = seq / kFlashBwdBlockKeys;
  auto heavy_first = [&](bool causal, AttentionWindow window) {
    return flash_bwd_heavy_first(mask_bounds(problem(seq, seq, causal, MaskAlignment::top_left, window)), key_blocks);
  };
  EXPECT_FALSE(heavy_first(false, {}));
  // A sliding window: every block but the edges sees the same rows; a left bound alone: the last
  // key blocks are the heaviest.
  EXPECT_FALSE(heavy_first(true, {256, 0}));
  EXPECT_FALSE(heavy_first(false, {0, -1}));
  const MaskBounds causal = mask_bounds(problem(seq, seq, true, MaskAlignment::top_left, {}));
  EXPECT_TRUE(flash_bwd_heavy_first(causal, kFlashBwdMaxGridYZ));
  EXPECT_FALSE(flash_bwd_heavy_first(causal, kFlashBwdMaxGridYZ + 1));  // the key blocks go on z
}

TEST(FlashBwdOrder, TheKeyBlocksGoOnZHeaviestFirstAndOnXOtherwise) {
  const int seq_kv = 1000, heads_kv = 3, batch = 5, key_blocks = 8;
  const FlashBwdGrid causal = flash_bwd_grid(mask_bounds(problem(777, seq_kv, true, MaskAlignment::bottom_right, {})),
                                             seq_kv, heads_kv, batch);
  EXPECT_EQ(causal.x, 3u);
  EXPECT_EQ(causal.y, 5u);
  EXPECT_EQ(causal.z, static_cast<unsigned>(key_blocks));
  const FlashBwdGrid plain = flash_bwd_grid(MaskBounds{}, seq_kv, heads_kv, batch);
  EXPECT_EQ(plain.x, static_cast<unsigned>(key_blocks));
  EXPECT_EQ(plain.y, 3u);
  EXPECT_EQ(plain.z, 5u);
}

}  // namespace
}  // namespace attnprof::kernels
