#include "core/layout.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace attnprof {

std::int64_t page_pool_size(const AttentionShape& s) {
  return s.paged() ? static_cast<std::int64_t>(s.batch) * s.pages_per_sequence() + 1 : 0;
}

std::vector<int> shuffled_block_table(const AttentionShape& s, std::uint64_t seed) {
  if (!s.paged()) return {};
  const std::int64_t entries = static_cast<std::int64_t>(s.batch) * s.pages_per_sequence();
  std::vector<int> pool(static_cast<std::size_t>(page_pool_size(s)));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 engine(seed ^ 0x70616765ull);  // "page"
  std::shuffle(pool.begin(), pool.end(), engine);
  std::vector<int> table(pool.begin(), pool.begin() + entries);
  bool identity = true;
  for (std::int64_t n = 0; n < entries && identity; ++n) identity = table[static_cast<std::size_t>(n)] == n;
  if (identity)  // the pool has one page more than the table: shift onto it
    for (int& page : table) ++page;
  return table;
}

std::int64_t stored_row_q(const AttentionShape& s, const std::vector<int>& cu_q, std::int64_t logical_row) {
  if (!s.packed_q()) return logical_row;
  const std::int64_t i = logical_row % s.seq_q;
  const std::int64_t head = logical_row / s.seq_q % s.heads;
  const std::int64_t b = logical_row / (static_cast<std::int64_t>(s.seq_q) * s.heads);
  if (i >= s.q_len(static_cast<int>(b))) return -1;
  return (cu_q[static_cast<std::size_t>(b)] + i) * s.heads + head;
}

std::vector<std::int64_t> stored_rows_q(const AttentionShape& s) {
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  std::vector<std::int64_t> map(static_cast<std::size_t>(rows));
  const std::vector<int> cu = cumulative_offsets(s.seq_lens_q);
  for (std::int64_t r = 0; r < rows; ++r) map[static_cast<std::size_t>(r)] = stored_row_q(s, cu, r);
  return map;
}

std::vector<std::int64_t> stored_rows_kv(const AttentionShape& s, const std::vector<int>& table) {
  const int hkv = s.kv_heads();
  std::vector<std::int64_t> map(static_cast<std::size_t>(s.batch) * hkv * s.seq_kv);
  const std::vector<int> cu = cumulative_offsets(s.seq_lens_kv);
  const int pages = s.pages_per_sequence();
  std::size_t n = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < hkv; ++h)
      for (int j = 0; j < s.seq_kv; ++j, ++n) {
        if (s.paged()) {
          const std::int64_t page = table[static_cast<std::size_t>(b) * pages + j / s.page_size];
          map[n] = (page * s.page_size + j % s.page_size) * hkv + h;
        } else if (s.packed_kv()) {
          map[n] = j < s.kv_len(b) ? (static_cast<std::int64_t>(cu[static_cast<std::size_t>(b)]) + j) * hkv + h : -1;
        } else {
          map[n] = static_cast<std::int64_t>(n);
        }
      }
  return map;
}

}  // namespace attnprof
