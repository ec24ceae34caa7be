// Host launchers of the copies a plain PyTorch program makes around a dense attention call when
// its batch is ragged or its K/V cache paged (the math and manual backends): pad the packed
// sequences to the longest, gather the pages into a contiguous cache, copy the valid rows back,
// and the boolean mask that hides the padding. Each is one kernel launch whose name says what it
// is (pad_ragged, unpad_ragged, gather_paged_kv, ragged_mask), so the trace shows the copies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"

namespace attnprof::kernels {

// dst [batch, heads, seq, head_dim] from packed src [total, heads, head_dim] (sequence b's rows
// at cu_seqlens[b] .. cu_seqlens[b + 1] - 1); rows past a sequence's length are zero
// (PyTorch: pad_sequence / a zeros tensor and a copy, then .transpose(1, 2)).
void pad_ragged(const void* src, void* dst, DType type, const int* cu_seqlens, int batch, int heads, int seq,
                int head_dim, cudaStream_t stream);

// Packed dst [total, heads, head_dim] from padded src [batch, heads, seq, head_dim]: only the
// rows below each sequence's length are written (PyTorch: out.transpose(1, 2)[valid] indexing).
void unpad_ragged(const void* src, void* dst, DType type, const int* cu_seqlens, int batch, int heads, int seq,
                  int head_dim, cudaStream_t stream);

// dst [batch, heads_kv, seq_kv, head_dim] from a paged cache [pages, page_size, heads_kv,
// head_dim] through block_table [batch, pages_per_sequence]: token j of sequence b from page
// block_table[b][j / page_size], slot j % page_size. Tokens at or past seq_lens_kv[b] are zero;
// a null seq_lens_kv gives every sequence seq_kv tokens (PyTorch: cache[block_table] indexing,
// then a reshape and a transpose into a contiguous tensor).
void gather_paged_kv(const void* cache, void* dst, DType type, const int* block_table, const int* seq_lens_kv,
                     int batch, int heads_kv, int seq_kv, int head_dim, int page_size, int pages_per_sequence,
                     cudaStream_t stream);

// keep [batch, seq_q, seq_kv]: key j exists in sequence b (j < seq_lens_kv[b]) and, when the
// mask is bounded, row i sees it under sequence b's own bounds (mask.for_lengths: a bottom-right
// diagonal follows each sequence's lengths). Rows past a sequence's length are padding and keep
// the same formula. What a plain program builds from arange(S) < lengths and the tril/triu masks,
// as one kernel.
void ragged_mask(bool* keep, const int* seq_lens_q, const int* seq_lens_kv, const MaskBounds& mask, int batch,
                 int seq_q, int seq_kv, cudaStream_t stream);

}  // namespace attnprof::kernels
