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
// Backward (dense batches): the autograd of those five lines in the input dtype (16-bit GEMMs
// accumulating in fp32, like the forward). The case hands the backward q, k, v and dO only, so
// the lines first run again up to the probabilities (what autograd would have saved; the
// out-of-place variant's clone included), then: dP = dO v^T and dV = P^T dO; softmax's backward;
// masked_fill's backward, grad.masked_fill(~mask, 0), which autograd runs as the out-of-place op
// whichever variant ran forward (a clone, so one more device-to-device memcpy, then the fill);
// the scale's backward; dQ = dA k and dK = dA^T q; with grouped heads the repeated dK and dV
// summed over each group (repeat_interleave's backward).
#include <cmath>
#include <optional>
#include <stdexcept>
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
    // The forward's four score-sized tensors; the backward's four more (dP, dF, its masked
    // clone, dA) and two repeated gradients.
    const double score_tensors = p.is_backward() ? 8.0 : 4.0;
    const double repeated_tensors = p.is_backward() ? 4.0 : 2.0;
    const double need = (score_tensors * static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv +
                         (p.has_grouped_heads() ? repeated_tensors * repeated_kv_elements(s) : 0.0) +
                         (s.packed_q() ? 2.0 * element_count_q(s) : 0.0) +
                         (s.packed_kv() || s.paged() ? 2.0 * element_count_kv(s) : 0.0)) *
                        dtype_bytes(p.dtype);
    if (device_memory_ > 0 && need > 0.75 * static_cast<double>(device_memory_))
      return fmt::format("manual materialises the score matrix several times: {:.1f} GiB of workspace, more than "
                         "75% of the device's {:.1f} GiB",
                         need / (1 << 30), static_cast<double>(device_memory_) / (1 << 30));
    return std::nullopt;
  }

  Unsupported check_backward(const AttentionProblem& p) const override {
    if (p.shape.ragged() || p.shape.paged()) return std::string("manual's backward takes dense batches only");
    return std::nullopt;
  }

  void prepare(const AttentionProblem& p, cudaStream_t) override {
    if (!cublas_) cublas_ = std::make_unique<CublasHandle>();
    const AttentionShape& s = p.shape;
    const std::size_t scores = static_cast<std::size_t>(s.batch) * s.heads * s.seq_q * s.seq_kv * dtype_bytes(p.dtype);
    const std::size_t mask = static_cast<std::size_t>(s.ragged() ? s.batch : 1) * s.seq_q * s.seq_kv;
    padded_.reserve(p);
    raw_scores_.reserve(scores, "scores");
    scaled_.reserve(scores, "scaled_scores");
    // Only the out-of-place masked_fill needs a second score-sized buffer (its clone); the in-place
    // one fills the scaled scores where they are, which is the memory it saves.
    if (masked_fill_ == MaskedFill::out_of_place && (mask_bounds(p).bounded() || s.ragged()))
      filled_.reserve(scores, "masked_scores");
    probs_.reserve(scores, "probabilities");
    ones_.reserve(mask, "mask");
    keep_.reserve(mask, "mask");
    if (p.has_grouped_heads()) {
      k_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * dtype_bytes(p.dtype), "k_repeated");
      v_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * dtype_bytes(p.dtype), "v_repeated");
    }
    if (p.is_backward()) {
      grad_probs_.reserve(scores, "grad_probabilities");
      grad_filled_.reserve(scores, "grad_masked_scores");
      grad_scaled_.reserve(scores, "grad_scaled_scores");
      grad_raw_scores_.reserve(scores, "grad_scores");
      if (p.has_grouped_heads()) {
        grad_k_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * dtype_bytes(p.dtype),
                                 "grad_k_repeated");
        grad_v_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * dtype_bytes(p.dtype),
                                 "grad_v_repeated");
      }
      backward_problem_ = p;
    }
  }

  void run(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream) override {
    const AttentionShape& s = p.shape;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;

    // Padded / gathered inputs first (a ragged batch, a paged cache); the output stays padded
    // until the valid rows are copied back at the end.
    const PaddedBatch::Dense dense = padded_.pad(p, io, stream);
    const Operands in = probabilities(p, dense.q, dense.k, dense.v, io.seq_lens_q, io.seq_lens_kv, stream);

    BatchedGemm out = per_head_gemm(p.dtype, s.seq_q, s.head_dim, s.seq_kv, matrices);
    out.a = probs_.get();
    out.stride_a = static_cast<long long>(s.seq_q) * s.seq_kv;
    out.b = in.value;
    out.stride_b = static_cast<long long>(s.seq_kv) * s.head_dim;
    out.c = dense.o;
    out.stride_c = static_cast<long long>(s.seq_q) * s.head_dim;
    run_batched_gemm(cublas_->get(), stream, out);
    // out.transpose(1, 2)[valid]: the valid rows back into the packed output.
    padded_.unpad(p, io, stream);
    CUDA_CHECK_LAUNCH();
  }

  void run_backward(const AttentionProblem& p, const BackwardBuffers& io, cudaStream_t stream) override {
    if (!backward_problem_ || !(*backward_problem_ == p))
      throw std::logic_error("manual: run_backward() of a problem before prepare() of that problem");
    const AttentionShape& s = p.shape;
    const std::int64_t mask_elems = static_cast<std::int64_t>(s.seq_q) * s.seq_kv;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;
    const std::int64_t score_elems = mask_elems * matrices;
    const long long q_stride = static_cast<long long>(s.seq_q) * s.head_dim;    // one head of q, o, dQ
    const long long kv_stride = static_cast<long long>(s.seq_kv) * s.head_dim;  // one (repeated) K/V head
    const bool grouped = p.has_grouped_heads();

    // What autograd would have saved: the five lines again, up to the probabilities.
    const Operands in = probabilities(p, io.q, io.k, io.v, nullptr, nullptr, stream);

    // out = probs @ v: dP = dO v^T, dV = probs^T dO (per query head; summed over a group below).
    BatchedGemm grad_probs = per_head_gemm(p.dtype, s.seq_q, s.seq_kv, s.head_dim, matrices);
    grad_probs.transposed_b = true;
    grad_probs.a = io.d_o;
    grad_probs.stride_a = q_stride;
    grad_probs.b = in.value;
    grad_probs.stride_b = kv_stride;
    grad_probs.c = grad_probs_.get();
    grad_probs.stride_c = mask_elems;
    run_batched_gemm(cublas_->get(), stream, grad_probs);

    BatchedGemm grad_v = per_head_gemm(p.dtype, s.seq_kv, s.head_dim, s.seq_q, matrices);
    grad_v.transposed_a = true;
    grad_v.a = probs_.get();
    grad_v.stride_a = mask_elems;
    grad_v.b = io.d_o;
    grad_v.stride_b = q_stride;
    grad_v.c = grouped ? grad_v_repeated_.get() : io.dv;
    grad_v.stride_c = kv_stride;
    run_batched_gemm(cublas_->get(), stream, grad_v);

    // attn.softmax(-1)
    k::softmax_backward_rows(grad_probs_.get(), probs_.get(), grad_filled_.get(), p.dtype, matrices * s.seq_q,
                             s.seq_kv, stream);
    // masked_fill(~mask, -inf) / masked_fill_: the gradient is grad.masked_fill(~mask, 0), the
    // out-of-place op in both variants: a clone (device-to-device copy), then the fill.
    const void* grad_scaled = grad_filled_.get();
    if (in.keep != nullptr) {
      CUDA_CHECK(cudaMemcpyAsync(grad_scaled_.get(), grad_filled_.get(),
                                 static_cast<std::size_t>(score_elems) * dtype_bytes(p.dtype), cudaMemcpyDeviceToDevice,
                                 stream));
      k::masked_fill(grad_scaled_.get(), p.dtype, in.keep, 0.f, mask_elems, matrices, stream);
      grad_scaled = grad_scaled_.get();
    }
    // attn * scale
    k::scale(grad_scaled, grad_raw_scores_.get(), p.dtype, p.softmax_scale(), score_elems, stream);

    // q @ k.transpose(-2, -1): dQ = dA k, dK = dA^T q.
    BatchedGemm grad_q = per_head_gemm(p.dtype, s.seq_q, s.head_dim, s.seq_kv, matrices);
    grad_q.a = grad_raw_scores_.get();
    grad_q.stride_a = mask_elems;
    grad_q.b = in.key;
    grad_q.stride_b = kv_stride;
    grad_q.c = io.dq;
    grad_q.stride_c = q_stride;
    run_batched_gemm(cublas_->get(), stream, grad_q);

    BatchedGemm grad_k = per_head_gemm(p.dtype, s.seq_kv, s.head_dim, s.seq_q, matrices);
    grad_k.transposed_a = true;
    grad_k.a = grad_raw_scores_.get();
    grad_k.stride_a = mask_elems;
    grad_k.b = io.q;
    grad_k.stride_b = q_stride;
    grad_k.c = grouped ? grad_k_repeated_.get() : io.dk;
    grad_k.stride_c = kv_stride;
    run_batched_gemm(cublas_->get(), stream, grad_k);

    // k.repeat_interleave / v.repeat_interleave: each K/V head's gradient is the sum over its group.
    if (grouped) {
      const std::int64_t head = static_cast<std::int64_t>(s.seq_kv) * s.head_dim;
      k::sum_head_groups(grad_k_repeated_.get(), io.dk, p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      k::sum_head_groups(grad_v_repeated_.get(), io.dv, p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
    }
    CUDA_CHECK_LAUNCH();
  }

 private:
  // What the lines after the first product read: k and v (repeated when grouped) and the mask
  // masked_fill kept (null when nothing is masked).
  struct Operands {
    const void* key;
    const void* value;
    const bool* keep;
  };

  // The five lines up to the probabilities (probs_): the repeats, attn = (q @ k^T) * scale, the
  // mask rebuilt, masked_fill (out_of_place: clone first), softmax. q, k, v are dense; the
  // sequence lengths only for a ragged batch.
  Operands probabilities(const AttentionProblem& p, const void* query, const void* key, const void* value,
                         const int* seq_lens_q, const int* seq_lens_kv, cudaStream_t stream) {
    const AttentionShape& s = p.shape;
    const std::int64_t mask_elems = static_cast<std::int64_t>(s.seq_q) * s.seq_kv;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;
    const std::int64_t score_elems = mask_elems * matrices;

    // k = k.repeat_interleave(heads // heads_kv, dim=1); v likewise
    if (p.has_grouped_heads()) {
      const std::int64_t head = static_cast<std::int64_t>(s.seq_kv) * s.head_dim;
      k::repeat_interleave(key, k_repeated_.get(), p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      k::repeat_interleave(value, v_repeated_.get(), p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      key = k_repeated_.get();
      value = v_repeated_.get();
    }

    BatchedGemm scores = per_head_gemm(p.dtype, s.seq_q, s.seq_kv, s.head_dim, matrices);
    scores.transposed_b = true;
    scores.a = query;
    scores.stride_a = static_cast<long long>(s.seq_q) * s.head_dim;
    scores.b = key;
    scores.stride_b = static_cast<long long>(s.seq_kv) * s.head_dim;
    scores.c = raw_scores_.get();
    scores.stride_c = mask_elems;
    run_batched_gemm(cublas_->get(), stream, scores);
    k::scale(raw_scores_.get(), scaled_.get(), p.dtype, p.softmax_scale(), score_elems, stream);

    void* attn = scaled_.get();
    const bool* kept = nullptr;
    const MaskBounds mask = mask_bounds(p);
    if (mask.bounded() || s.ragged()) {
      bool* keep = ones_.as<bool>();
      if (s.ragged()) {
        // mask[b] = (arange(S) < kv_len[b]) & sequence b's own causal/window band: [batch, 1, L, S]
        k::ragged_mask(keep, seq_lens_q, seq_lens_kv, mask, s.batch, s.seq_q, s.seq_kv, stream);
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
      kept = keep;
    }
    k::softmax_rows(attn, probs_.get(), p.dtype, matrices * s.seq_q, s.seq_kv, stream);
    return {key, value, kept};
  }

  MaskedFill masked_fill_;
  mutable std::int64_t device_memory_ = 0;
  std::unique_ptr<CublasHandle> cublas_;
  PaddedBatch padded_;
  DeviceBuffer raw_scores_, scaled_, filled_, probs_, ones_, keep_, k_repeated_, v_repeated_;
  // The backward's, reserved by prepare() of a backward problem: dP, dF (softmax's input), its
  // masked clone, dA (the product's), and the repeated dK and dV.
  std::optional<AttentionProblem> backward_problem_;
  DeviceBuffer grad_probs_, grad_filled_, grad_scaled_, grad_raw_scores_, grad_k_repeated_, grad_v_repeated_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_manual_backend(MaskedFill masked_fill) {
  return std::make_unique<ManualBackend>(masked_fill);
}

}  // namespace attnprof
