// The order flash's backward blocks start in (kernels/flash_bwd/flash_bwd_order.hpp): heaviest
// first exactly where the premise holds (under a causal mask without a window, a key block is
// seen by at least as many query rows as the next one), and the grid dimension each index takes;
// the tail plan's runs (each step walked once, each part its own slot) and where it is taken.
#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

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

// flash_bwd_block undoes flash_bwd_grid: every block of the grid lands on a distinct (key block,
// K/V head, sequence), and together they are all of them; heaviest first, z is the key block.
TEST(FlashBwdOrder, EachGridBlockIsOneKeyBlockHeadAndSequence) {
  const int seq_kv = 1000, heads_kv = 3, batch = 5, key_blocks = 8;
  for (bool causal : {true, false}) {
    const MaskBounds m =
        causal ? mask_bounds(problem(777, seq_kv, true, MaskAlignment::bottom_right, {})) : MaskBounds{};
    const FlashBwdGrid g = flash_bwd_grid(m, seq_kv, heads_kv, batch);
    std::vector<int> seen(static_cast<std::size_t>(key_blocks) * heads_kv * batch, 0);
    for (unsigned z = 0; z < g.z; ++z)
      for (unsigned y = 0; y < g.y; ++y)
        for (unsigned x = 0; x < g.x; ++x) {
          const FlashBwdBlock block = flash_bwd_block(m, seq_kv, x, y, z);
          ASSERT_GE(block.key_block, 0);
          ASSERT_LT(block.key_block, key_blocks);
          ASSERT_GE(block.kv_head, 0);
          ASSERT_LT(block.kv_head, heads_kv);
          ASSERT_GE(block.b, 0);
          ASSERT_LT(block.b, batch);
          if (causal) {
            EXPECT_EQ(block.key_block, static_cast<int>(z));
          }
          ++seen[(static_cast<std::size_t>(block.b) * heads_kv + block.kv_head) * key_blocks + block.key_block];
        }
    for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << (causal ? "causal" : "no mask") << " #" << i;
  }
}

// The tail plan's runs: every step of every tail block walked by exactly one CTA; the CTAs of a
// block are flash_bwd_tail_ctas's; the slots of the parts (runs that do not cover their block
// whole) are distinct and below 2 ctas.
void expect_tail_covers_each_step_once(const FlashBwdTail& t, const std::string& label) {
  ASSERT_GT(t.blocks, 0) << label;
  std::vector<int> walked(static_cast<std::size_t>(t.blocks) * t.steps, 0);
  std::vector<int> slot_users(2 * static_cast<std::size_t>(t.ctas), 0);
  std::vector<std::pair<int, int>> ctas_of(static_cast<std::size_t>(t.blocks), {t.ctas, -1});
  for (int c = 0; c < t.ctas; ++c) {
    ASSERT_LT(t.begin(c), t.begin(c + 1)) << label << ": CTA " << c << " walks no step";
    for (long long s = t.begin(c); s < t.begin(c + 1);) {
      const int j = static_cast<int>(s / t.steps);
      const long long block_end = static_cast<long long>(j + 1) * t.steps;
      const long long end = std::min(block_end, t.begin(c + 1));
      for (long long x = s; x < end; ++x) ++walked[static_cast<std::size_t>(x)];
      auto& [first, last] = ctas_of[static_cast<std::size_t>(j)];
      first = std::min(first, c);
      last = std::max(last, c);
      if (!(s == block_end - t.steps && end == block_end)) ++slot_users[static_cast<std::size_t>(flash_bwd_tail_slot(t, c, j))];
      s = end;
    }
  }
  for (std::size_t x = 0; x < walked.size(); ++x) ASSERT_EQ(walked[x], 1) << label << ": step " << x;
  for (int n : slot_users) EXPECT_LE(n, 1) << label << ": a slot shared by two parts";
  for (int j = 0; j < t.blocks; ++j) {
    int first = -1, last = -1;
    flash_bwd_tail_ctas(t, j, &first, &last);
    EXPECT_EQ(first, ctas_of[static_cast<std::size_t>(j)].first) << label << ": block " << j;
    EXPECT_EQ(last, ctas_of[static_cast<std::size_t>(j)].second) << label << ": block " << j;
  }
}

TEST(FlashBwdTail, EveryTailStepIsWalkedOnceAndEveryPartHasItsOwnSlot) {
  // (seq_q, seq_kv, heads_kv, batch, group, step rows, slots)
  const std::vector<std::array<int, 7>> problems = {
      {4096, 4096, 16, 2, 1, 64, 132}, {4096, 4096, 29, 1, 1, 64, 132}, {257, 257, 2, 1, 4, 64, 7},
      {128, 384, 1, 2, 4, 128, 7},     {129, 1000, 4, 1, 1, 128, 7},     {17, 17, 4, 2, 1, 64, 7},
      {200, 136, 4, 1, 1, 64, 7},      {1000, 3000, 3, 5, 2, 64, 13},    {64, 128, 1, 1, 1, 64, 1}};
  for (const auto& [seq_q, seq_kv, heads_kv, batch, group, rows, slots] : problems)
    for (bool forced : {true, false}) {
      const FlashBwdTail t = flash_bwd_tail_plan(MaskBounds{}, seq_q, seq_kv, heads_kv, batch, group, rows, slots, forced);
      const std::string label = fmt::format("{} x {}, {} K/V heads x {}, group {}, {} rows, {} slots{}", seq_q, seq_kv,
                                            heads_kv, batch, group, rows, slots, forced ? " (forced)" : "");
      const int total = flash_bwd_key_blocks(seq_kv) * heads_kv * batch;
      EXPECT_EQ(t.first_block + t.blocks, total) << label;
      if (t.blocks == 0) continue;
      EXPECT_EQ(t.steps, (seq_q + rows - 1) / rows * group) << label;
      EXPECT_EQ(t.ctas, slots) << label;
      expect_tail_covers_each_step_once(t, label);
    }
}

TEST(FlashBwdTail, TakenWhereTheLastWaveWouldIdleSMsForLong) {
  auto plan = [](int seq, int heads_kv, int batch, int rows, MaskBounds m = {}) {
    return flash_bwd_tail_plan(m, seq, seq, heads_kv, batch, 1, rows, 132);
  };
  // 2 x 16 x 4096, 64-row steps: 1024 blocks of 64 steps on 132 SMs; the last wave's 100 blocks
  // become 132 runs of 48-49 steps.
  const FlashBwdTail long_rows = plan(4096, 16, 2, 64);
  EXPECT_EQ(long_rows.blocks, 100);
  EXPECT_EQ(long_rows.first_block, 924);
  EXPECT_EQ(long_rows.steps, 64);
  EXPECT_EQ(long_rows.ctas, 132);
  // 928 blocks: 4 in the last wave; with the wave before them, 136 blocks in 132 runs of 66 steps
  // instead of two block times.
  EXPECT_EQ(plan(4096, 29, 1, 64).blocks, 136);
  // Whole waves; short rows (16 and 8 steps: a run saves less than its start costs); a mask band.
  EXPECT_EQ(plan(4096, 33, 1, 64).blocks, 0);
  EXPECT_EQ(plan(1024, 16, 4, 64).blocks, 0);
  EXPECT_EQ(plan(1024, 16, 4, 128).blocks, 0);
  EXPECT_EQ(plan(4096, 16, 2, 64, mask_bounds(problem(4096, 4096, true, MaskAlignment::top_left, {}))).blocks, 0);
  EXPECT_EQ(plan(4096, 16, 2, 64, mask_bounds(problem(4096, 4096, false, MaskAlignment::top_left, {256, 0}))).blocks, 0);
  // Forced (tests): any tail with a step per CTA; none when the CTAs outnumber the steps.
  EXPECT_GT(flash_bwd_tail_plan(MaskBounds{}, 257, 257, 2, 1, 4, 64, 7, true).blocks, 0);
  EXPECT_EQ(flash_bwd_tail_plan(MaskBounds{}, 17, 17, 1, 1, 1, 64, 2, true).blocks, 0);
}

}  // namespace
}  // namespace attnprof::kernels
