// The layout copies of a padded ragged batch and a gathered paged cache. They move bits, not
// values: a row of head_dim elements is copied as 16-byte words when its size and every pointer
// allow it, as single 2- or 4-byte elements otherwise. Grid y walks the (batch, head) pairs of
// the padded side (one division per pair), grid x the words of one head's [seq, head_dim] block.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "elementwise/ragged_layout.hpp"

namespace attnprof::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocksX = 65535 * 4;
constexpr int kMaxBlocksY = 65535;

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

template <typename Word>
__device__ __forceinline__ Word zero_word() {
  return Word{};
}

// One (batch, head) block of the padded side per grid-y step: rows [0, len) are copied from or to
// the packed side, rows [len, seq) are zero (pad) or skipped (unpad).
template <typename Word, bool kPad>
__device__ __forceinline__ void ragged_copy(const Word* src, Word* dst, const int* cu_seqlens, int batch, int heads,
                                            int seq, int row_words) {
  const std::int64_t head_words = static_cast<std::int64_t>(seq) * row_words;
  for (std::int64_t bh = blockIdx.y; bh < static_cast<std::int64_t>(batch) * heads; bh += gridDim.y) {
    const int b = static_cast<int>(bh / heads), h = static_cast<int>(bh % heads);
    const int start = cu_seqlens[b];
    const int len = cu_seqlens[b + 1] - start;
    const std::int64_t padded0 = bh * head_words;
    // Packed row (start + i, h) starts at ((start + i) * heads + h) * row_words.
    const std::int64_t packed0 = (static_cast<std::int64_t>(start) * heads + h) * row_words;
    const std::int64_t packed_row = static_cast<std::int64_t>(heads) * row_words;
    for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < head_words;
         e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const int i = static_cast<int>(e / row_words), w = static_cast<int>(e - static_cast<std::int64_t>(i) * row_words);
      if constexpr (kPad) {
        dst[padded0 + e] = i < len ? src[packed0 + i * packed_row + w] : zero_word<Word>();
      } else {
        if (i < len) dst[packed0 + i * packed_row + w] = src[padded0 + e];
      }
    }
  }
}

template <typename Word>
__global__ void __launch_bounds__(kThreads) pad_ragged_kernel(const Word* src, Word* dst, const int* cu_seqlens,
                                                            int batch, int heads, int seq, int row_words) {
  ragged_copy<Word, true>(src, dst, cu_seqlens, batch, heads, seq, row_words);
}

template <typename Word>
__global__ void __launch_bounds__(kThreads) unpad_ragged_kernel(const Word* src, Word* dst, const int* cu_seqlens,
                                                              int batch, int heads, int seq, int row_words) {
  ragged_copy<Word, false>(src, dst, cu_seqlens, batch, heads, seq, row_words);
}

template <typename Word>
__global__ void __launch_bounds__(kThreads)
    gather_paged_kv_kernel(const Word* cache, Word* dst, const int* block_table, const int* seq_lens_kv, int batch,
                           int heads_kv, int seq_kv, int row_words, int page_size, int pages_per_sequence) {
  const std::int64_t head_words = static_cast<std::int64_t>(seq_kv) * row_words;
  const std::int64_t slot_words = static_cast<std::int64_t>(heads_kv) * row_words;  // one token of a page
  for (std::int64_t bh = blockIdx.y; bh < static_cast<std::int64_t>(batch) * heads_kv; bh += gridDim.y) {
    const int b = static_cast<int>(bh / heads_kv), h = static_cast<int>(bh % heads_kv);
    const int len = seq_lens_kv != nullptr ? seq_lens_kv[b] : seq_kv;
    const int* table = block_table + static_cast<std::int64_t>(b) * pages_per_sequence;
    for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < head_words;
         e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const int j = static_cast<int>(e / row_words), w = static_cast<int>(e - static_cast<std::int64_t>(j) * row_words);
      Word value = zero_word<Word>();
      if (j < len) {
        const std::int64_t page = table[j / page_size];
        const std::int64_t token = page * page_size + j % page_size;
        value = cache[token * slot_words + static_cast<std::int64_t>(h) * row_words + w];
      }
      dst[bh * head_words + e] = value;
    }
  }
}

__global__ void __launch_bounds__(kThreads) ragged_mask_kernel(bool* keep, const int* seq_lens_q,
                                                             const int* seq_lens_kv, MaskBounds mask, int seq_q,
                                                             int seq_kv) {
  const int b = blockIdx.y;
  const int q_len = seq_lens_q != nullptr ? seq_lens_q[b] : seq_q;
  const int kv_len = seq_lens_kv != nullptr ? seq_lens_kv[b] : seq_kv;
  const MaskBounds m = mask.for_lengths(q_len, kv_len);
  const bool bounded = m.bounded();
  const std::int64_t n = static_cast<std::int64_t>(seq_q) * seq_kv;
  bool* out = keep + b * n;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(e / seq_kv), j = static_cast<int>(e - static_cast<std::int64_t>(i) * seq_kv);
    out[e] = j < kv_len && (!bounded || m.sees(i, j));
  }
}

dim3 head_grid(std::int64_t head_words, std::int64_t heads_total) {
  const std::int64_t x = std::clamp<std::int64_t>((head_words + kThreads - 1) / kThreads, 1, kMaxBlocksX);
  const std::int64_t y = std::clamp<std::int64_t>(heads_total, 1, kMaxBlocksY);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// f(Word tag, words per row): 16-byte words when a row is a whole number of them and every
// pointer is 16-byte aligned, else words of one element.
template <typename F>
void with_word(const char* op, DType type, int head_dim, bool pointers_aligned, F&& f) {
  const int element = dtype_bytes(type);
  const int row_bytes = head_dim * element;
  if (row_bytes % 16 == 0 && pointers_aligned) return f(uint4{}, row_bytes / 16);
  if (element == 2) return f(static_cast<unsigned short>(0), head_dim);
  if (element == 4) return f(0u, head_dim);
  throw std::invalid_argument(std::string(op) + ": no copy for elements of " + std::to_string(element) + " bytes");
}

template <bool kPad>
void launch_ragged_copy(const void* src, void* dst, DType type, const int* cu_seqlens, int batch, int heads, int seq,
                        int head_dim, cudaStream_t stream) {
  with_word(kPad ? "pad_ragged" : "unpad_ragged", type, head_dim, aligned(src, 16) && aligned(dst, 16),
            [&](auto tag, int row_words) {
              using Word = decltype(tag);
              const dim3 grid = head_grid(static_cast<std::int64_t>(seq) * row_words,
                                          static_cast<std::int64_t>(batch) * heads);
              const auto kernel = kPad ? pad_ragged_kernel<Word> : unpad_ragged_kernel<Word>;
              kernel<<<grid, kThreads, 0, stream>>>(static_cast<const Word*>(src), static_cast<Word*>(dst), cu_seqlens,
                                                    batch, heads, seq, row_words);
            });
}

}  // namespace

void pad_ragged(const void* src, void* dst, DType type, const int* cu_seqlens, int batch, int heads, int seq,
                int head_dim, cudaStream_t stream) {
  launch_ragged_copy<true>(src, dst, type, cu_seqlens, batch, heads, seq, head_dim, stream);
}

void unpad_ragged(const void* src, void* dst, DType type, const int* cu_seqlens, int batch, int heads, int seq,
                  int head_dim, cudaStream_t stream) {
  launch_ragged_copy<false>(src, dst, type, cu_seqlens, batch, heads, seq, head_dim, stream);
}

void gather_paged_kv(const void* cache, void* dst, DType type, const int* block_table, const int* seq_lens_kv,
                     int batch, int heads_kv, int seq_kv, int head_dim, int page_size, int pages_per_sequence,
                     cudaStream_t stream) {
  with_word("gather_paged_kv", type, head_dim, aligned(cache, 16) && aligned(dst, 16), [&](auto tag, int row_words) {
    using Word = decltype(tag);
    const dim3 grid = head_grid(static_cast<std::int64_t>(seq_kv) * row_words,
                                static_cast<std::int64_t>(batch) * heads_kv);
    gather_paged_kv_kernel<Word><<<grid, kThreads, 0, stream>>>(static_cast<const Word*>(cache),
                                                                static_cast<Word*>(dst), block_table, seq_lens_kv,
                                                                batch, heads_kv, seq_kv, row_words, page_size,
                                                                pages_per_sequence);
  });
}

void ragged_mask(bool* keep, const int* seq_lens_q, const int* seq_lens_kv, const MaskBounds& mask, int batch,
                 int seq_q, int seq_kv, cudaStream_t stream) {
  if (batch > kMaxBlocksY)
    throw std::invalid_argument("ragged_mask: batch " + std::to_string(batch) + " is over the grid's " +
                                std::to_string(kMaxBlocksY));
  const std::int64_t n = static_cast<std::int64_t>(seq_q) * seq_kv;
  const dim3 grid(static_cast<unsigned>(std::clamp<std::int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocksX)),
                  static_cast<unsigned>(batch));
  ragged_mask_kernel<<<grid, kThreads, 0, stream>>>(keep, seq_lens_q, seq_lens_kv, mask, seq_q, seq_kv);
}

}  // namespace attnprof::kernels
