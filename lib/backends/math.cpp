// `math`: attention built the way PyTorch's math SDPA builds it (aten/.../attention.cpp,
// _scaled_dot_product_attention_math), one kernel per eager op: fp32 upcast of q/k/v, both
// scaled by sqrt(scale), the causal mask rebuilt every call (ones -> tril -> where(0, -inf) ->
// add_), fp32 FFMA GEMMs, _safe_softmax (softmax, isneginf, all, where), the attention
// weights downcast (returned by PyTorch, unused) and the output downcast.
// GQA as enable_gqa does it: the fp32 K and V repeated into `heads` heads every call
// (repeat_interleave, one copy kernel each), K scaled after the repeat. Bottom-right alignment
// and sliding windows as the boolean mask a caller passes (what PyTorch's causal_lower_right
// materialises for math): ones -> tril(diagonal) and/or triu(diagonal), built every call like
// the causal mask; a row the mask leaves empty comes out zero through _safe_softmax.
// Ragged batches and paged caches as a plain PyTorch program meets them, every call: the packed
// q, k, v padded to the longest sequence (pad_ragged), the pages gathered into a contiguous K and
// V (gather_paged_kv), a [batch, 1, L, S] mask that also hides the padded keys and follows each
// sequence's own bottom-right diagonal, then the valid rows copied back into the packed output
// (unpad_ragged). Those copies are their own kernels in the trace.
// Backward (dense batches, no bias): autograd's ops over that graph, in fp32. The case hands the
// backward q, k, v and dO only, so the forward's fp32 path is first run again up to the
// probabilities (what autograd would have saved), then: dO.to(float); dP = dO V^T and
// dV = P^T dO (two GEMMs); _safe_softmax's backward from its output (zeroed rows give zero
// gradients); the mask's add_ passes the gradient through; dQs = dS Ks and dKs = dS^T Qs (two
// GEMMs); both times sqrt(scale); with grouped heads the repeated dK and dV summed over each
// group (repeat_interleave's backward); dQ, dK, dV cast down.
#include <cmath>
#include <optional>
#include <stdexcept>
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

// Score-sized fp32 tensors the eager code materialises: attn, softmax, where output.
constexpr int kScoreTensorsFp32 = 3;

// Elements of K (or V) repeated into every query head: [batch, heads, seq_kv, head_dim].
std::int64_t repeated_kv_elements(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.heads * s.seq_kv * s.head_dim;
}

// Elements of one mask: [seq_q, seq_kv], or one per sequence ([batch, seq_q, seq_kv]) when ragged.
std::int64_t mask_elements(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.ragged() ? s.batch : 1) * s.seq_q * s.seq_kv;
}

// The backward's fp32 buffers beyond the forward's: dP and dS (score-sized), dO, dQs and dQ,
// dKs [and dK, dV repeated], dK and dV.
double backward_workspace_bytes(const AttentionProblem& p) {
  if (!p.is_backward()) return 0.0;
  const AttentionShape& s = p.shape;
  const double scores = static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv;
  const double repeated = static_cast<double>(repeated_kv_elements(s));
  return 4.0 * (2.0 * scores + 3.0 * element_count_q(s) + 2.0 * element_count_kv(s) +
                (p.has_grouped_heads() ? 3.0 : 1.0) * repeated);
}

double workspace_bytes(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  const double scores = static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv;
  const double mask = static_cast<double>(mask_elements(s));
  const double repeated = p.has_grouped_heads() ? 2.0 * 4.0 * repeated_kv_elements(s) : 0.0;
  // The padded (or gathered) copies in the input dtype: q and o, k and v.
  const double padded = dtype_bytes(p.dtype) * ((s.packed_q() ? 2.0 * element_count_q(s) : 0.0) +
                                                (s.packed_kv() || s.paged() ? 2.0 * element_count_kv(s) : 0.0));
  return scores * (4.0 * kScoreTensorsFp32 + 1.0 /*isneginf*/ + dtype_bytes(p.dtype) /*weights*/) +
         mask * (2.0 + 4.0) + 4.0 * (3.0 * element_count_kv(s) + 3.0 * element_count_q(s)) + repeated + padded +
         backward_workspace_bytes(p);
}

class MathBackend final : public AttentionBackend {
 public:
  Unsupported check_device(const DeviceProperties& device) const override {
    device_memory_ = device.total_global_mem;
    return std::nullopt;
  }

  Unsupported check_problem(const AttentionProblem& p) const override {
    const AttentionShape& s = p.shape;
    if (s.kv_heads() < 1 || s.heads % s.kv_heads() != 0)
      return fmt::format("heads ({}) must be a multiple of heads_kv ({}) to repeat K and V into every query head",
                         s.heads, s.kv_heads());
    if ((!s.seq_lens_q.empty() && static_cast<int>(s.seq_lens_q.size()) != s.batch) ||
        (!s.seq_lens_kv.empty() && static_cast<int>(s.seq_lens_kv.size()) != s.batch))
      return fmt::format("a ragged batch needs one length per sequence ({}); got {} query and {} key lengths", s.batch,
                         s.seq_lens_q.size(), s.seq_lens_kv.size());
    const double need = workspace_bytes(p);
    if (device_memory_ > 0 && need > 0.75 * static_cast<double>(device_memory_))
      return fmt::format("math materialises every score matrix in fp32: {:.1f} GiB of workspace, more than 75% of "
                         "the device's {:.1f} GiB",
                         need / (1 << 30), static_cast<double>(device_memory_) / (1 << 30));
    return std::nullopt;
  }

  Unsupported check_backward(const AttentionProblem& p) const override {
    if (p.has_bias)
      return std::string("math's backward takes no additive bias (the backward's buffers carry none to rebuild the "
                         "scores with)");
    if (p.shape.ragged() || p.shape.paged()) return std::string("math's backward takes dense batches only");
    return std::nullopt;
  }

  void prepare(const AttentionProblem& p, cudaStream_t) override {
    if (!cublas_) cublas_ = std::make_unique<CublasHandle>();
    const AttentionShape& s = p.shape;
    const std::size_t q = static_cast<std::size_t>(element_count_q(s)) * 4;
    const std::size_t kv = static_cast<std::size_t>(element_count_kv(s)) * 4;
    const std::size_t scores = static_cast<std::size_t>(s.batch) * s.heads * s.seq_q * s.seq_kv;
    const std::size_t mask = static_cast<std::size_t>(mask_elements(s));
    padded_.reserve(p);
    q32_.reserve(q, "q_fp32");
    k32_.reserve(kv, "k_fp32");
    v32_.reserve(kv, "v_fp32");
    q_scaled_.reserve(q, "q_scaled");
    k_scaled_.reserve(p.has_grouped_heads() ? static_cast<std::size_t>(repeated_kv_elements(s)) * 4 : kv, "k_scaled");
    out32_.reserve(q, "o_fp32");
    if (p.has_grouped_heads()) {
      k_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * 4, "k_repeated");
      v_repeated_.reserve(static_cast<std::size_t>(repeated_kv_elements(s)) * 4, "v_repeated");
    }
    attn_.reserve(scores * 4, "scores");
    softmax_.reserve(scores * 4, "softmax");
    probs_.reserve(scores * 4, "probabilities");
    is_neginf_.reserve(scores, "mask");
    rows_all_neginf_.reserve(static_cast<std::size_t>(s.batch) * s.heads * s.seq_q, "mask");
    weights_.reserve(scores * dtype_bytes(p.dtype), "probabilities_cast");
    ones_.reserve(mask, "mask");
    tril_.reserve(mask, "mask");
    mask_float_.reserve(mask * 4, "mask");
    scalars_.reserve(3 * sizeof(float), "other");
    if (p.is_backward()) {
      const std::size_t repeated = static_cast<std::size_t>(repeated_kv_elements(s)) * 4;
      d_o32_.reserve(q, "do_fp32");
      grad_probs_.reserve(scores * 4, "grad_probabilities");
      grad_scores_.reserve(scores * 4, "grad_scores");
      grad_q_scaled_.reserve(q, "grad_q_scaled");
      grad_k_scaled_.reserve(p.has_grouped_heads() ? repeated : kv, "grad_k_scaled");
      dq32_.reserve(q, "dq_fp32");
      dk32_.reserve(kv, "dk_fp32");
      dv32_.reserve(kv, "dv_fp32");
      if (p.has_grouped_heads()) {
        grad_k_repeated_.reserve(repeated, "grad_k_repeated");
        grad_v_repeated_.reserve(repeated, "grad_v_repeated");
      }
      backward_problem_ = p;
    }
  }

  void run(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream) override {
    const AttentionShape& s = p.shape;
    const std::int64_t nq = element_count_q(s);
    const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;
    const bool upcast = p.dtype != DType::fp32;

    // A ragged batch is padded to [batch, heads, seq, head_dim] and a paged cache gathered into
    // a contiguous one before SDPA sees them; the output is padded until the end.
    const PaddedBatch::Dense in = padded_.pad(p, io, stream);
    void* o_dense = in.o;
    const Operands fp32 = probabilities(p, in.q, in.k, in.v, io.bias, io.seq_lens_q, io.seq_lens_kv, stream);
    // PyTorch returns attn.to(dtype) too, although SDPA drops it: the copy is still made.
    if (upcast) k::convert(probs_.get(), DType::fp32, weights_.get(), p.dtype, rows * s.seq_kv, stream);

    BatchedGemm out = per_head_gemm(DType::fp32, s.seq_q, s.head_dim, s.seq_kv, matrices);
    out.a = probs_.get();
    out.stride_a = static_cast<long long>(s.seq_q) * s.seq_kv;
    out.b = fp32.v;
    out.stride_b = static_cast<long long>(s.seq_kv) * s.head_dim;
    out.c = upcast ? out32_.get() : o_dense;
    out.stride_c = static_cast<long long>(s.seq_q) * s.head_dim;
    run_batched_gemm(cublas_->get(), stream, out);
    if (upcast) k::convert(out32_.get(), DType::fp32, o_dense, p.dtype, nq, stream);
    // out.transpose(1, 2)[valid]: the valid rows back into the packed output.
    padded_.unpad(p, io, stream);
    CUDA_CHECK_LAUNCH();
  }

  void run_backward(const AttentionProblem& p, const BackwardBuffers& io, cudaStream_t stream) override {
    if (!backward_problem_ || !(*backward_problem_ == p))
      throw std::logic_error("math: run_backward() of a problem before prepare() of that problem");
    const AttentionShape& s = p.shape;
    const std::int64_t nq = element_count_q(s), nkv = element_count_kv(s);
    const std::int64_t n_repeated = p.has_grouped_heads() ? repeated_kv_elements(s) : nkv;
    const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;
    const long long q_stride = static_cast<long long>(s.seq_q) * s.head_dim;    // one head of q, o, dQ
    const long long kv_stride = static_cast<long long>(s.seq_kv) * s.head_dim;  // one (repeated) K/V head
    const long long score_stride = static_cast<long long>(s.seq_q) * s.seq_kv;
    const bool upcast = p.dtype != DType::fp32;
    const bool grouped = p.has_grouped_heads();
    const float sf = std::sqrt(p.softmax_scale());

    // What autograd would have saved: the forward's fp32 path again, up to the probabilities.
    const Operands fp32 = probabilities(p, io.q, io.k, io.v, nullptr, nullptr, nullptr, stream);

    // out.to(dtype): the gradient back to fp32.
    const void* d_o = io.d_o;
    if (upcast) {
      k::convert(io.d_o, p.dtype, d_o32_.get(), DType::fp32, nq, stream);
      d_o = d_o32_.get();
    }
    // out = probs @ v: dP = dO v^T, dV = probs^T dO (per query head; summed over a group below).
    BatchedGemm grad_probs = per_head_gemm(DType::fp32, s.seq_q, s.seq_kv, s.head_dim, matrices);
    grad_probs.transposed_b = true;
    grad_probs.a = d_o;
    grad_probs.stride_a = q_stride;
    grad_probs.b = fp32.v;
    grad_probs.stride_b = kv_stride;
    grad_probs.c = grad_probs_.get();
    grad_probs.stride_c = score_stride;
    run_batched_gemm(cublas_->get(), stream, grad_probs);

    void* dv32 = upcast ? dv32_.get() : io.dv;
    BatchedGemm grad_v = per_head_gemm(DType::fp32, s.seq_kv, s.head_dim, s.seq_q, matrices);
    grad_v.transposed_a = true;
    grad_v.a = probs_.get();
    grad_v.stride_a = score_stride;
    grad_v.b = d_o;
    grad_v.stride_b = q_stride;
    grad_v.c = grouped ? grad_v_repeated_.get() : dv32;
    grad_v.stride_c = kv_stride;
    run_batched_gemm(cublas_->get(), stream, grad_v);

    // _safe_softmax's backward from its output: a row it zeroed has zero gradient. The mask's
    // add_ passes the gradient through unchanged (masked probabilities are 0, so is dS there).
    k::softmax_backward_rows(grad_probs_.get(), probs_.get(), grad_scores_.get(), DType::fp32, rows, s.seq_kv,
                             stream);

    // attn = q_scaled @ k_scaled^T: dQs = dS k_scaled, dKs = dS^T q_scaled.
    BatchedGemm grad_q = per_head_gemm(DType::fp32, s.seq_q, s.head_dim, s.seq_kv, matrices);
    grad_q.a = grad_scores_.get();
    grad_q.stride_a = score_stride;
    grad_q.b = fp32.k_scaled;
    grad_q.stride_b = kv_stride;
    grad_q.c = grad_q_scaled_.get();
    grad_q.stride_c = q_stride;
    run_batched_gemm(cublas_->get(), stream, grad_q);

    BatchedGemm grad_k = per_head_gemm(DType::fp32, s.seq_kv, s.head_dim, s.seq_q, matrices);
    grad_k.transposed_a = true;
    grad_k.a = grad_scores_.get();
    grad_k.stride_a = score_stride;
    grad_k.b = fp32.q_scaled;
    grad_k.stride_b = q_stride;
    grad_k.c = grad_k_scaled_.get();
    grad_k.stride_c = kv_stride;
    run_batched_gemm(cublas_->get(), stream, grad_k);

    // q * sf and k * sf (k after its repeat): the gradients times sf.
    void* dq32 = upcast ? dq32_.get() : io.dq;
    void* dk32 = upcast ? dk32_.get() : io.dk;
    k::scale(grad_q_scaled_.get(), dq32, DType::fp32, sf, nq, stream);
    k::scale(grad_k_scaled_.get(), grouped ? grad_k_repeated_.get() : dk32, DType::fp32, sf, n_repeated, stream);
    // repeat_interleave's backward: each K/V head's gradient is the sum over its group.
    if (grouped) {
      const std::int64_t head = static_cast<std::int64_t>(s.seq_kv) * s.head_dim;
      k::sum_head_groups(grad_k_repeated_.get(), dk32, DType::fp32, s.batch, s.heads, s.kv_heads(), head, stream);
      k::sum_head_groups(grad_v_repeated_.get(), dv32, DType::fp32, s.batch, s.heads, s.kv_heads(), head, stream);
    }
    // q, k, v .to(float): the gradients back to the input dtype.
    if (upcast) {
      k::convert(dq32_.get(), DType::fp32, io.dq, p.dtype, nq, stream);
      k::convert(dk32_.get(), DType::fp32, io.dk, p.dtype, nkv, stream);
      k::convert(dv32_.get(), DType::fp32, io.dv, p.dtype, nkv, stream);
    }
    CUDA_CHECK_LAUNCH();
  }

 private:
  // The fp32 operands of the two products: q and k scaled by sqrt(scale) (k repeated first when
  // grouped), and v (repeated when grouped).
  struct Operands {
    const void* q_scaled;
    const void* k_scaled;
    const void* v;
  };

  // The forward up to the probabilities (probs_), one kernel per eager op: the upcasts, the
  // scaling, the repeats, the mask rebuilt, S = Qs Ks^T, the mask and bias added, _safe_softmax.
  // q, k, v are dense; the sequence lengths only for a ragged batch, the bias only with has_bias.
  Operands probabilities(const AttentionProblem& p, const void* q, const void* kk, const void* v, const float* bias,
                         const int* seq_lens_q, const int* seq_lens_kv, cudaStream_t stream) {
    const AttentionShape& s = p.shape;
    const std::int64_t nq = element_count_q(s), nkv = element_count_kv(s);
    const std::int64_t n_repeated = p.has_grouped_heads() ? repeated_kv_elements(s) : nkv;
    const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
    const std::int64_t mask_elems = static_cast<std::int64_t>(s.seq_q) * s.seq_kv;
    const std::int64_t matrices = static_cast<std::int64_t>(s.batch) * s.heads;

    // q, k, v .to(float)
    if (p.dtype != DType::fp32) {
      k::convert(q, p.dtype, q32_.get(), DType::fp32, nq, stream);
      k::convert(kk, p.dtype, k32_.get(), DType::fp32, nkv, stream);
      k::convert(v, p.dtype, v32_.get(), DType::fp32, nkv, stream);
      q = q32_.get();
      kk = k32_.get();
      v = v32_.get();
    }
    // scaling_factor = sqrt(scale): q * sf and k * sf; with grouped heads, K and V are first
    // repeated into every query head (pre_process_group_query_attention_input) and the repeated
    // K is scaled.
    const float sf = std::sqrt(p.softmax_scale());
    k::scale(q, q_scaled_.get(), DType::fp32, sf, nq, stream);
    if (p.has_grouped_heads()) {
      const std::int64_t head = static_cast<std::int64_t>(s.seq_kv) * s.head_dim;
      k::repeat_interleave(kk, k_repeated_.get(), DType::fp32, s.batch, s.heads, s.kv_heads(), head, stream);
      k::repeat_interleave(v, v_repeated_.get(), DType::fp32, s.batch, s.heads, s.kv_heads(), head, stream);
      kk = k_repeated_.get();
      v = v_repeated_.get();
    }
    k::scale(kk, k_scaled_.get(), DType::fp32, sf, n_repeated, stream);

    float* zero = scalars_.as<float>();
    float* neg_inf = zero + 1;
    float* softmax_zero = zero + 2;
    const MaskBounds mask = mask_bounds(p);
    if (s.ragged()) {
      // One mask per sequence: arange(S) < kv_len[b], and each sequence's own causal/window
      // band; then where(mask, 0, -inf) over all of them.
      k::ragged_mask(ones_.as<bool>(), seq_lens_q, seq_lens_kv, mask, s.batch, s.seq_q, s.seq_kv, stream);
      k::fill_float(zero, 0.f, 1, stream);
      k::fill_float(neg_inf, -INFINITY, 1, stream);
      k::where_scalars(ones_.as<bool>(), zero, neg_inf, mask_float_.as<float>(), mask_elems * s.batch, stream);
    } else if (mask.bounded()) {
      // at::ones({L, S}, bool).tril(diagonal) [.triu(diagonal) for a window's left edge], then
      // convert_boolean_attn_mask: where(mask, 0, -inf). Top-left causal is plain .tril().
      const bool* built = build_band_mask(mask, s.seq_q, s.seq_kv, ones_.as<bool>(), tril_.as<bool>(), stream);
      k::fill_float(zero, 0.f, 1, stream);
      k::fill_float(neg_inf, -INFINITY, 1, stream);
      k::where_scalars(built, zero, neg_inf, mask_float_.as<float>(), mask_elems, stream);
    }

    BatchedGemm scores = per_head_gemm(DType::fp32, s.seq_q, s.seq_kv, s.head_dim, matrices);
    scores.transposed_b = true;
    scores.a = q_scaled_.get();
    scores.stride_a = static_cast<long long>(s.seq_q) * s.head_dim;
    scores.b = k_scaled_.get();
    scores.stride_b = static_cast<long long>(s.seq_kv) * s.head_dim;
    scores.c = attn_.get();
    scores.stride_c = mask_elems;
    run_batched_gemm(cublas_->get(), stream, scores);

    if (s.ragged())
      k::add_batch_broadcast(attn_.as<float>(), mask_float_.as<float>(), mask_elems, s.batch, s.heads, stream);
    else if (mask.bounded())
      k::add_broadcast(attn_.as<float>(), mask_float_.as<float>(), mask_elems, matrices, stream);
    if (p.has_bias && bias != nullptr) k::add_broadcast(attn_.as<float>(), bias, mask_elems, matrices, stream);

    // _safe_softmax: softmax, then zero the rows that were all -inf
    k::softmax_rows(attn_.get(), softmax_.get(), DType::fp32, rows, s.seq_kv, stream);
    k::isneginf(attn_.as<float>(), is_neginf_.as<bool>(), rows * s.seq_kv, stream);
    k::all_rows(is_neginf_.as<bool>(), rows_all_neginf_.as<bool>(), rows, s.seq_kv, stream);
    k::fill_float(softmax_zero, 0.f, 1, stream);
    k::where_rows(rows_all_neginf_.as<bool>(), softmax_zero, softmax_.as<float>(), probs_.as<float>(), rows, s.seq_kv,
                  stream);
    return {q_scaled_.get(), k_scaled_.get(), v};
  }

  mutable std::int64_t device_memory_ = 0;
  std::unique_ptr<CublasHandle> cublas_;
  PaddedBatch padded_;
  DeviceBuffer q32_, k32_, v32_, q_scaled_, k_scaled_, out32_, k_repeated_, v_repeated_;
  DeviceBuffer attn_, softmax_, probs_, is_neginf_, rows_all_neginf_, weights_;
  DeviceBuffer ones_, tril_, mask_float_, scalars_;
  // The backward's, reserved by prepare() of a backward problem.
  std::optional<AttentionProblem> backward_problem_;
  DeviceBuffer d_o32_, grad_probs_, grad_scores_, grad_q_scaled_, grad_k_scaled_, grad_k_repeated_, grad_v_repeated_;
  DeviceBuffer dq32_, dk32_, dv32_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_math_backend() { return std::make_unique<MathBackend>(); }

}  // namespace attnprof
