// Where ragged and paged rows live (core/layout.hpp) and which rows verification checks in a
// ragged batch: every stored row is written once, the block table is a shuffle and never the
// identity, and no checked row is padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/layout.hpp"
#include "reference/verification.hpp"

namespace attnprof {
namespace {

TEST(Layout, TheBlockTableIsADistinctShuffleNeverTheIdentity) {
  for (int batch : {1, 2, 7}) {
    for (int page : {1, 16, 64}) {
      AttentionShape s{batch, 4, 1, 100, 64, 2};
      s.page_size = page;
      const std::vector<int> table = shuffled_block_table(s, 42);
      ASSERT_EQ(table.size(), static_cast<std::size_t>(batch * s.pages_per_sequence()));
      const std::set<int> distinct(table.begin(), table.end());
      EXPECT_EQ(distinct.size(), table.size());
      bool identity = true;
      for (std::size_t n = 0; n < table.size(); ++n) {
        EXPECT_GE(table[n], 0);
        EXPECT_LT(table[n], page_pool_size(s));
        identity = identity && table[n] == static_cast<int>(n);
      }
      EXPECT_FALSE(identity) << "batch " << batch << " page " << page;
      EXPECT_EQ(shuffled_block_table(s, 42), table);  // a function of the seed
    }
  }
}

TEST(Layout, PackedRowsFollowTheCumulativeOffsets) {
  AttentionShape s{3, 2, 17, 17, 64};
  s.seq_lens_q = {1, 17, 5};
  const std::vector<std::int64_t> map = stored_rows_q(s);
  // Sequence 1, head 1, row 3: token cu[1] + 3 = 4, head 1 of 2.
  EXPECT_EQ(map[(1 * 2 + 1) * 17 + 3], (1 + 3) * 2 + 1);
  EXPECT_EQ(map[(0 * 2 + 0) * 17 + 1], -1);  // sequence 0 has one row
  std::set<std::int64_t> stored;
  for (std::int64_t row : map) {
    if (row >= 0) {
      EXPECT_TRUE(stored.insert(row).second);
    }
  }
  EXPECT_EQ(static_cast<std::int64_t>(stored.size()), s.total_q() * s.heads);
  EXPECT_EQ(*stored.rbegin() + 1, stored_elements_q(s) / s.head_dim);
}

TEST(Layout, PagedRowsLandInTheirTablesPages) {
  AttentionShape s{2, 4, 1, 40, 64, 2};
  s.page_size = 16;  // 3 pages per sequence, a pool of 7
  s.seq_lens_kv = {40, 5};
  const std::vector<int> table = shuffled_block_table(s, 7);
  const std::vector<std::int64_t> map = stored_rows_kv(s, table);
  // Sequence 1, K/V head 1, key 20: page table[1 * 3 + 1], slot 4.
  EXPECT_EQ(map[(1 * 2 + 1) * 40 + 20], (static_cast<std::int64_t>(table[4]) * 16 + 4) * 2 + 1);
  std::set<std::int64_t> stored(map.begin(), map.end());
  EXPECT_EQ(stored.size(), map.size());  // no two logical rows share a slot
  EXPECT_LT(*stored.rbegin(), stored_elements_kv(s) / s.head_dim);
}

TEST(Layout, RaggedRowsToCheckAreNeverPaddingAndCoverEverySequenceEdge) {
  AttentionShape s{3, 32, 8192, 8192, 128, 8};
  s.seq_lens_q = {1, 17, 8192};
  const std::vector<std::int64_t> rows = rows_to_check(s, 1024);
  EXPECT_LE(rows.size(), 1100u);
  EXPECT_GT(rows.size(), 900u);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  std::set<int> sequences;
  bool last_row_of_longest = false;
  for (std::int64_t r : rows) {
    const int b = static_cast<int>(r / (8192LL * 32));
    const int i = static_cast<int>(r % 8192);
    ASSERT_LT(i, s.q_len(b)) << "row " << r << " is padding";
    sequences.insert(b);
    last_row_of_longest = last_row_of_longest || (b == 2 && i == 8191);
  }
  EXPECT_EQ(sequences.size(), 3u);
  EXPECT_TRUE(last_row_of_longest);
  // Few rows in all: every one of them.
  AttentionShape small{3, 2, 17, 17, 64};
  small.seq_lens_q = {1, 17, 5};
  EXPECT_EQ(rows_to_check(small, 1024).size(), static_cast<std::size_t>(23 * 2));
}

}  // namespace
}  // namespace attnprof
