// `manual`: the five-line attention people write by hand, on cuBLAS and eager-style kernels:
//   attn = (q @ k.transpose(-2, -1)) * scale
//   mask = torch.ones(L, S, dtype=bool).tril()
//   attn = attn.masked_fill(~mask, -inf)     # out_of_place: copies attn first
//   attn.masked_fill_(~mask, -inf)           # in_place: no copy
//   out  = attn.softmax(-1) @ v
// The out-of-place masked_fill is a clone (a device-to-device cudaMemcpyAsync) followed by the
// in-place fill; the trace shows that memcpy, and the in-place variant shows it gone.
// Grouped K/V heads as a hand-written GQA does it: k, v = k.repeat_interleave(g, 1),
// v.repeat_interleave(g, 1) every call (two copy kernels). Bottom-right alignment and windows
// through the mask given to masked_fill: .tril(diagonal) and/or .triu(diagonal). A row the mask
// leaves empty would be NaN (softmax of all -inf), so such problems are rejected.
// Ragged batches and paged caches as such a script meets them, every call: the packed q, k, v
// padded to the longest sequence (pad_ragged), the pages gathered into a contiguous K and V
// (gather_paged_kv), a [batch, 1, L, S] mask that also hides the padded keys and follows each
// sequence's own bottom-right diagonal, and the valid rows copied back into the packed output
// (unpad_ragged); each copy is its own kernel in the trace.
#include <cmath>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "backends/cublas_gemm.hpp"
#include "backends/factories.hpp"
#include "backends/padded_batch.hpp"
#include "core/mask_bounds.hpp"
#include "elementwise/elementwise.hpp"
#include "elementwise/ragged_layout.hpp"
#include "gpu/device_memory.hpp"

namespace attnprof {
namespace {

namespace k = kernels;

std::int64_t repeated_kv_elements(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.heads * s.seq_kv * s.head_dim;
}

struct RowWithoutKeys {
  int sequence = -1;  // -1: every row sees a key
  int row = -1;
};

// The first query row (of a sequence's own rows) that sees no key under its sequence's lengths.
// A dense batch's sequences are alike: one pass. Padded rows are not counted: their NaN output
// is dropped by the copy back into the packed output.
RowWithoutKeys first_row_without_keys(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  for (int b = 0; b < (s.ragged() ? s.batch : 1); ++b)
    for (int row = 0; row < s.q_len(b); ++row)
      if (visible_keys(p, row, s.q_len(b), s.kv_len(b)).count() == 0) return {b, row};
  return {};
}

class ManualBackend final : public AttentionBackend {
 public:
  explicit ManualBackend(MaskedFill masked_fill) : masked_fill_(masked_fill) {}

  Unsupported check_device(const DeviceProperties& device) const override {
    device_memory_ = device.total_global_mem;
    return std::nullopt;
  }

  Unsupported check_problem(const AttentionProblem& p) const override {
    if (p.has_bias) return "the five-line manual attention has no bias term; use math or efficient";
    const AttentionShape& s = p.shape;
    if (s.kv_heads() < 1 || s.heads % s.kv_heads() != 0)
      return fmt::format("heads ({}) must be a multiple of heads_kv ({}) to repeat K and V", s.heads, s.kv_heads());
    if ((!s.seq_lens_q.empty() && static_cast<int>(s.seq_lens_q.size()) != s.batch) ||
        (!s.seq_lens_kv.empty() && static_cast<int>(s.seq_lens_kv.size()) != s.batch))
      return fmt::format("a ragged batch needs one length per sequence ({}); got {} query and {} key lengths", s.batch,
                         s.seq_lens_q.size(), s.seq_lens_kv.size());
    if (const RowWithoutKeys empty = first_row_without_keys(p); empty.row >= 0)
      return fmt::format("query row {}{} sees no key under this mask: the five-line attention's softmax would give "
                         "NaN there (math's _safe_softmax gives the zeros the reference expects)",
                         empty.row, s.ragged() ? fmt::format(" of sequence {}", empty.sequence) : std::string());
    const double need = (4.0 * static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv +
                         (p.has_grouped_heads() ? 2.0 * repeated_kv_elements(s) : 0.0) +
                         (s.packed_q() ? 2.0 * element_count_q(s) : 0.0) +
                         (s.packed_kv() || s.paged() ? 2.0 * element_count_kv(s) : 0.0)) *
                        dtype_bytes(p.dtype);
    if (device_memory_ > 0 && need > 0.75 * static_cast<double>(device_memory_))
      return fmt::format("manual materialises the score matrix several times: {:.1f} GiB of workspace, more than "
                         "75% of the device's {:.1f} GiB",
                         need / (1 << 30), static_cast<double>(device_memory_) / (1 << 30));
    return std::nullopt;
  }

  void prepare(const AttentionProblem& p, cudaStream_t) override {
    if (!cublas_) cublas_ = std::make_unique<CublasHandle>();
    const AttentionShape& s = p.shape;
    const std::size_t scores = static_cast<std::size_t>(s.batch) * s.heads * s.seq_q * s.seq_kv * dtype_bytes(p.dtype);
    const std::size_t mask = static_cast<std::size_t>(s.ragged() ? s.batch : 1) * s.seq_q * s.seq_kv;
    padded_.reserve(p);
    raw_scores_.reserve(scores);
    scaled_.reserve(scores);
    filled_.reserve(scores);
    probs_.reserve(scores);
    ones_.reserve(mask);
    keep_.reserve(mask);
    if (p.has_grouped_heads()) {
      k_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * dtype_bytes(p.dtype));
      v_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * dtype_bytes(p.dtype));
    }
  }

  void run(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream) override {
    const AttentionShape& s = p.shape;
    const std::int64_t mask_elems = static_cast<std::int64_t>(s.seq_q) * s.seq_kv;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;
    const std::int64_t score_elems = mask_elems * matrices;

    // Padded / gathered inputs first (a ragged batch, a paged cache); the output stays padded
    // until the valid rows are copied back at the end.
    const PaddedBatch::Dense dense = padded_.pad(p, io, stream);
    const void* query = dense.q;
    const void* key = dense.k;
    const void* value = dense.v;
    void* o_dense = dense.o;

    // k = k.repeat_interleave(heads // heads_kv, dim=1); v likewise
    if (p.has_grouped_heads()) {
      const std::int64_t head = static_cast<std::int64_t>(s.seq_kv) * s.head_dim;
      k::repeat_interleave(key, k_repeated_.get(), p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      k::repeat_interleave(value, v_repeated_.get(), p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      key = k_repeated_.get();
      value = v_repeated_.get();
    }

    BatchedGemm scores;
    scores.type = p.dtype;
    scores.transposed_b = true;
    scores.m = s.seq_q;
    scores.n = s.seq_kv;
    scores.k = s.head_dim;
    scores.a = query;
    scores.stride_a = static_cast<long long>(s.seq_q) * s.head_dim;
    scores.b = key;
    scores.stride_b = static_cast<long long>(s.seq_kv) * s.head_dim;
    scores.c = raw_scores_.get();
    scores.stride_c = mask_elems;
    scores.batch = static_cast<int>(matrices);
    run_batched_gemm(cublas_->get(), stream, scores);
    k::scale(raw_scores_.get(), scaled_.get(), p.dtype, p.softmax_scale(), score_elems, stream);

    void* attn = scaled_.get();
    const MaskBounds mask = mask_bounds(p);
    if (mask.bounded() || s.ragged()) {
      bool* keep = ones_.as<bool>();
      if (s.ragged()) {
        // mask[b] = (arange(S) < kv_len[b]) & sequence b's own causal/window band: [batch, 1, L, S]
        k::ragged_mask(keep, io.seq_lens_q, io.seq_lens_kv, mask, s.batch, s.seq_q, s.seq_kv, stream);
      } else {
        // mask = torch.ones(L, S, dtype=bool).tril(diagonal) [.triu(diagonal)]; causal top-left is .tril()
        keep = build_band_mask(mask, s.seq_q, s.seq_kv, keep, keep_.as<bool>(), stream);
      }
      if (masked_fill_ == MaskedFill::out_of_place) {
        // Tensor.masked_fill = clone() + masked_fill_(): the clone is a device-to-device copy.
        CUDA_CHECK(cudaMemcpyAsync(filled_.get(), scaled_.get(), static_cast<std::size_t>(score_elems) * dtype_bytes(p.dtype),
                                   cudaMemcpyDeviceToDevice, stream));
        attn = filled_.get();
      }
      if (s.ragged())
        k::masked_fill_batch(attn, p.dtype, keep, -INFINITY, mask_elems, s.batch, s.heads, stream);
      else
        k::masked_fill(attn, p.dtype, keep, -INFINITY, mask_elems, matrices, stream);
    }
    k::softmax_rows(attn, probs_.get(), p.dtype, matrices * s.seq_q, s.seq_kv, stream);

    BatchedGemm out;
    out.type = p.dtype;
    out.transposed_b = false;
    out.m = s.seq_q;
    out.n = s.head_dim;
    out.k = s.seq_kv;
    out.a = probs_.get();
    out.stride_a = mask_elems;
    out.b = value;
    out.stride_b = static_cast<long long>(s.seq_kv) * s.head_dim;
    out.c = o_dense;
    out.stride_c = static_cast<long long>(s.seq_q) * s.head_dim;
    out.batch = static_cast<int>(matrices);
    run_batched_gemm(cublas_->get(), stream, out);
    // out.transpose(1, 2)[valid]: the valid rows back into the packed output.
    padded_.unpad(p, io, stream);
    CUDA_CHECK_LAUNCH();
  }

 private:
  MaskedFill masked_fill_;
  mutable std::int64_t device_memory_ = 0;
  std::unique_ptr<CublasHandle> cublas_;
  PaddedBatch padded_;
  DeviceBuffer raw_scores_, scaled_, filled_, probs_, ones_, keep_, k_repeated_, v_repeated_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_manual_backend(MaskedFill masked_fill) {
  return std::make_unique<ManualBackend>(masked_fill);
}

}  // namespace attnprof
