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
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "backends/cublas_gemm.hpp"
#include "backends/factories.hpp"
#include "core/mask_bounds.hpp"
#include "elementwise/elementwise.hpp"
#include "gpu/device_memory.hpp"

namespace attnprof {
namespace {

namespace k = kernels;

std::int64_t repeated_kv_elements(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.heads * s.seq_kv * s.head_dim;
}

// The first query row that sees no key, or -1 (each sequence's rows are alike: one pass).
int first_row_without_keys(const AttentionProblem& p) {
  for (int row = 0; row < p.shape.seq_q; ++row)
    if (visible_keys(p, row, p.shape.seq_q, p.shape.seq_kv).count() == 0) return row;
  return -1;
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
    if (const int row = first_row_without_keys(p); row >= 0)
      return fmt::format("query row {} sees no key under this mask: the five-line attention's softmax would give NaN "
                         "there (math's _safe_softmax gives the zeros the reference expects)",
                         row);
    const double need = (4.0 * static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv +
                         (p.has_grouped_heads() ? 2.0 * repeated_kv_elements(s) : 0.0)) *
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
    const std::size_t mask = static_cast<std::size_t>(s.seq_q) * s.seq_kv;
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

    // k = k.repeat_interleave(heads // heads_kv, dim=1); v likewise
    const void* key = io.k;
    const void* value = io.v;
    if (p.has_grouped_heads()) {
      const std::int64_t head = static_cast<std::int64_t>(s.seq_kv) * s.head_dim;
      k::repeat_interleave(io.k, k_repeated_.get(), p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      k::repeat_interleave(io.v, v_repeated_.get(), p.dtype, s.batch, s.heads, s.kv_heads(), head, stream);
      key = k_repeated_.get();
      value = v_repeated_.get();
    }

    BatchedGemm scores;
    scores.type = p.dtype;
    scores.transposed_b = true;
    scores.m = s.seq_q;
    scores.n = s.seq_kv;
    scores.k = s.head_dim;
    scores.a = io.q;
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
    if (mask.bounded()) {
      // mask = torch.ones(L, S, dtype=bool).tril(diagonal) [.triu(diagonal)]; causal top-left is .tril()
      bool* keep = ones_.as<bool>();
      bool* spare = keep_.as<bool>();
      k::fill_bool(keep, true, mask_elems, stream);
      if (mask.high < MaskBounds::kUnboundedKeys) {
        k::tril(keep, spare, s.seq_q, s.seq_kv, mask.high, stream);
        std::swap(keep, spare);
      }
      if (mask.low > -MaskBounds::kUnboundedKeys) {
        k::triu(keep, spare, s.seq_q, s.seq_kv, mask.low, stream);
        std::swap(keep, spare);
      }
      if (masked_fill_ == MaskedFill::out_of_place) {
        // Tensor.masked_fill = clone() + masked_fill_(): the clone is a device-to-device copy.
        CUDA_CHECK(cudaMemcpyAsync(filled_.get(), scaled_.get(), static_cast<std::size_t>(score_elems) * dtype_bytes(p.dtype),
                                   cudaMemcpyDeviceToDevice, stream));
        attn = filled_.get();
      }
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
    out.c = io.o;
    out.stride_c = static_cast<long long>(s.seq_q) * s.head_dim;
    out.batch = static_cast<int>(matrices);
    run_batched_gemm(cublas_->get(), stream, out);
    CUDA_CHECK_LAUNCH();
  }

 private:
  MaskedFill masked_fill_;
  mutable std::int64_t device_memory_ = 0;
  std::unique_ptr<CublasHandle> cublas_;
  DeviceBuffer raw_scores_, scaled_, filled_, probs_, ones_, keep_, k_repeated_, v_repeated_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_manual_backend(MaskedFill masked_fill) {
  return std::make_unique<ManualBackend>(masked_fill);
}

}  // namespace attnprof
