// Where the rows of a ragged batch and of a paged K/V cache live (the layouts of AttentionShape in
// core/types.hpp), as host-side maps: the device set-up scatters the logically drawn rows with them
// and verification finds the output rows it reads back. Rows are head_dim elements; a logical row
// of q/o is flat over [batch, heads, seq_q], of k/v over [batch, heads_kv, seq_kv].
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.hpp"

namespace attnprof {

// Pages in a paged cache's pool: every sequence's pages plus one, so that the shuffled block
// table is never the identity, not even for a single page.
std::int64_t page_pool_size(const AttentionShape& shape);

// The block table [batch, pages_per_sequence]: a shuffle (from `seed`) of distinct pages of the
// pool, never the identity. Empty when the shape is not paged.
std::vector<int> shuffled_block_table(const AttentionShape& shape, std::uint64_t seed);

// Stored row of each logical q/o row (packed: (cu_q[b] + i) * heads + h), -1 for a padding row
// (i >= q_len(b)). The identity for a dense q.
std::vector<std::int64_t> stored_rows_q(const AttentionShape& shape);

// Stored row of each logical k/v row: packed (cu_kv[b] + j) * heads_kv + h, or paged
// (page * page_size + j % page_size) * heads_kv + h with page = table[b][j / page_size];
// -1 for padding of a packed batch. Paged rows past kv_len(b) are kept (they hold drawn values
// no correct kernel reads).
std::vector<std::int64_t> stored_rows_kv(const AttentionShape& shape, const std::vector<int>& block_table);

// The stored row of one logical q/o row, -1 for a padding row.
std::int64_t stored_row_q(const AttentionShape& shape, const std::vector<int>& cu_q, std::int64_t logical_row);

}  // namespace attnprof
