#include "backends/padded_batch.hpp"

#include <cstddef>
#include <utility>

#include "elementwise/elementwise.hpp"
#include "elementwise/ragged_layout.hpp"

namespace attnprof {

void PaddedBatch::reserve(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  const std::size_t in_q = static_cast<std::size_t>(element_count_q(s)) * dtype_bytes(p.dtype);
  const std::size_t in_kv = static_cast<std::size_t>(element_count_kv(s)) * dtype_bytes(p.dtype);
  if (s.packed_q()) {
    q_.reserve(in_q);
    o_.reserve(in_q);
  }
  if (s.packed_kv() || s.paged()) {
    k_.reserve(in_kv);
    v_.reserve(in_kv);
  }
}

PaddedBatch::Dense PaddedBatch::pad(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream) {
  namespace k = kernels;
  const AttentionShape& s = p.shape;
  Dense dense{io.q, io.k, io.v, io.o};
  if (s.packed_q()) {
    k::pad_ragged(io.q, q_.get(), p.dtype, io.cu_seqlens_q, s.batch, s.heads, s.seq_q, s.head_dim, stream);
    dense.q = q_.get();
    dense.o = o_.get();
  }
  if (s.paged()) {
    const int* lens = s.ragged() ? io.seq_lens_kv : nullptr;
    for (auto [cache, copy] : {std::pair{io.k, &k_}, std::pair{io.v, &v_}})
      k::gather_paged_kv(cache, copy->get(), p.dtype, io.block_table, lens, s.batch, s.kv_heads(), s.seq_kv,
                         s.head_dim, s.page_size, s.pages_per_sequence(), stream);
  } else if (s.packed_kv()) {
    for (auto [packed, copy] : {std::pair{io.k, &k_}, std::pair{io.v, &v_}})
      k::pad_ragged(packed, copy->get(), p.dtype, io.cu_seqlens_kv, s.batch, s.kv_heads(), s.seq_kv, s.head_dim,
                    stream);
  }
  if (s.paged() || s.packed_kv()) {
    dense.k = k_.get();
    dense.v = v_.get();
  }
  return dense;
}

void PaddedBatch::unpad(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream) {
  const AttentionShape& s = p.shape;
  if (s.packed_q())
    kernels::unpad_ragged(o_.get(), io.o, p.dtype, io.cu_seqlens_q, s.batch, s.heads, s.seq_q, s.head_dim, stream);
}

bool* build_band_mask(const MaskBounds& mask, int seq_q, int seq_kv, bool* buffer, bool* spare, cudaStream_t stream) {
  kernels::fill_bool(buffer, true, static_cast<std::int64_t>(seq_q) * seq_kv, stream);
  if (mask.high < MaskBounds::kUnboundedKeys) {
    kernels::tril(buffer, spare, seq_q, seq_kv, mask.high, stream);
    std::swap(buffer, spare);
  }
  if (mask.low > -MaskBounds::kUnboundedKeys) {
    kernels::triu(buffer, spare, seq_q, seq_kv, mask.low, stream);
    std::swap(buffer, spare);
  }
  return buffer;
}

}  // namespace attnprof
