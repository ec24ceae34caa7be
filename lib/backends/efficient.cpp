// The `efficient` backend: memory-efficient attention in the style of xformers' cutlassF
// (PyTorch's "efficient" SDPA backend), one kernel per forward. It covers what flash does not:
// fp32 inputs (on FFMA), any head dim that is a multiple of 8 up to 256, and an additive bias;
// like flash (and unlike PyTorch's) it reads grouped K/V heads in place (GQA, MQA) and runs
// causal and sliding-window masks in either alignment, visiting only the key tiles they leave.
// Ragged batches run packed, in the same one kernel: each block reads its sequence's lengths and
// offsets (cumulative offsets of the packed q/o and k/v) and masks by that sequence's own
// bounds. A paged K/V cache is not read: like PyTorch's, this kernel reads K/V contiguous.
// Backward (bf16/fp16, head dims 64 and 128, dense): one fused kernel after one memset, as
// xformers' cutlassB (PyTorch's efficient backward) is one kernel and a fill: flash:fa2's backward
// kernel in its fused variant (kernels/flash_bwd): D = rowsum(dO O) computed in the kernel, dQ
// added in fp32 and converted by the last key block to reach each tile of query rows.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/factories.hpp"
#include "backends/flash_bwd_params.hpp"
#include "core/mask_bounds.hpp"
#include "efficient/efficient.hpp"
#include "flash_bwd/flash_bwd.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"

namespace attnprof {
namespace {

namespace kernel = kernels::efficient;

constexpr int kMaxGridYZ = 65535;  // heads and batch are the grid's y and z
constexpr int kMaxSequence = 1 << 29;  // MaskBounds' arithmetic stays inside int below this

class EfficientBackend final : public AttentionBackend {
 public:
  Unsupported check_device(const DeviceProperties& device) const override {
    if (device.compute_major < 8)
      return fmt::format("needs compute capability 8.0 or newer (mma.sync bf16, cp.async); {} is {}.{}",
                         device.name, device.compute_major, device.compute_minor);
    int needed = 0;
    for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
      for (int head_dim : {64, 128, 256}) needed = std::max(needed, kernel::forward_smem_bytes(dtype, head_dim));
    if (device.shared_mem_per_block_optin < needed)
      return fmt::format("needs {} bytes of shared memory per block; {} allows {}", needed, device.name,
                         device.shared_mem_per_block_optin);
    return std::nullopt;
  }

  Unsupported check_problem(const AttentionProblem& problem) const override {
    const AttentionShape& s = problem.shape;
    if (s.head_dim < 8 || s.head_dim > kernel::kMaxHeadDim || s.head_dim % 8 != 0)
      return fmt::format("head_dim must be a multiple of 8 from 8 to {}; got {}", kernel::kMaxHeadDim, s.head_dim);
    if (s.batch < 1 || s.heads < 1 || s.seq_q < 1 || s.seq_kv < 1)
      return fmt::format("batch, heads, seq_q and seq_kv must be at least 1; got {}", shape_label(s));
    if (s.kv_heads() < 1 || s.heads % s.kv_heads() != 0)
      return fmt::format("heads ({}) must be a multiple of heads_kv ({})", s.heads, s.kv_heads());
    if (std::max(s.seq_q, s.seq_kv) >= kMaxSequence)
      return fmt::format("seq_q and seq_kv must be below {} (32-bit mask arithmetic); got {} x {}", kMaxSequence,
                         s.seq_q, s.seq_kv);
    if (s.batch > kMaxGridYZ || s.heads > kMaxGridYZ)
      return fmt::format("batch and heads must be at most {} (grid y/z); got batch {}, heads {}", kMaxGridYZ,
                         s.batch, s.heads);
    if (s.paged())
      return fmt::format("efficient reads K and V contiguous (dense or packed), like PyTorch's memory-efficient "
                         "kernel; a paged cache (page_size {}) needs its pages gathered first (math and manual do "
                         "that; flash:fa2 reads pages in place)",
                         s.page_size);
    if ((!s.seq_lens_q.empty() && static_cast<int>(s.seq_lens_q.size()) != s.batch) ||
        (!s.seq_lens_kv.empty() && static_cast<int>(s.seq_lens_kv.size()) != s.batch))
      return fmt::format("a ragged batch needs one length per sequence ({}); got {} query and {} key lengths", s.batch,
                         s.seq_lens_q.size(), s.seq_lens_kv.size());
    if (s.ragged() && s.head_dim > kernel::kMaxRaggedHeadDim)
      return fmt::format("the ragged kernels are compiled for head dims up to {} (buckets 64 and 128); got {}",
                         kernel::kMaxRaggedHeadDim, s.head_dim);
    if (s.ragged() && problem.has_bias && !kernel::ragged_takes_bias(problem.dtype))
      return fmt::format("the {} ragged kernels are compiled without a bias term (fp32's takes one; dense batches do "
                         "too)",
                         to_string(problem.dtype));
    if (problem.softmax_scale() == 0.f || !std::isfinite(problem.softmax_scale()))
      return fmt::format("softmax scale must be finite and non-zero; got {}", problem.softmax_scale());
    return std::nullopt;
  }

  Unsupported check_backward(const AttentionProblem& problem) const override {
    return flash_bwd_unsupported("efficient", problem);
  }

  void run_backward(const AttentionProblem& problem, const BackwardBuffers& buffers, cudaStream_t stream) override {
    const AttentionShape& s = problem.shape;
    if (!backward_problem_ || !(*backward_problem_ == problem))
      throw std::logic_error("efficient: run_backward() of a problem before prepare() of that problem");
    kernels::FlashBwdParams params = flash_bwd_params(problem, buffers);
    params.dq_accum = backward_workspace_.as<float>();
    params.dq_arrivals =
        reinterpret_cast<int*>(params.dq_accum + static_cast<long long>(s.batch) * s.heads * s.seq_q * s.head_dim);
    params.dq_tile_arrivals = tile_arrivals_.as<const int>();
    CUDA_CHECK(kernels::flash_backward_fused(params, problem.dtype, s.head_dim, zero_dq_, stream));
    CUDA_CHECK_LAUNCH();
  }

  // One cudaFuncSetAttribute per compiled instantiation, the first time a problem needs it.
  void prepare(const AttentionProblem& problem, cudaStream_t stream) override {
    if (problem.is_backward()) prepare_backward(problem, stream);
    const bool ragged = problem.shape.ragged();
    const auto key = std::make_tuple(problem.dtype, kernel::head_dim_bucket(problem.shape.head_dim), ragged);
    if (prepared_.count(key) != 0) return;
    CUDA_CHECK(kernel::prepare_forward(problem.dtype, problem.shape.head_dim, ragged));
    prepared_.insert(key);
  }

  void run(const AttentionProblem& problem, const AttentionBuffers& buffers, cudaStream_t stream) override {
    kernel::ForwardParams params;
    params.q = buffers.q;
    params.k = buffers.k;
    params.v = buffers.v;
    params.o = buffers.o;
    params.lse = buffers.lse;
    params.bias = problem.has_bias ? buffers.bias : nullptr;
    params.batch = problem.shape.batch;
    params.heads = problem.shape.heads;
    params.heads_kv = problem.shape.kv_heads();
    params.group_size = problem.shape.group_size();
    params.seq_q = problem.shape.seq_q;
    params.seq_kv = problem.shape.seq_kv;
    params.head_dim = problem.shape.head_dim;
    params.scale = problem.softmax_scale();
    params.mask = mask_bounds(problem);
    params.bias_ld = problem.shape.seq_kv;
    if (problem.shape.ragged()) {
      params.seq_lens_q = buffers.seq_lens_q;
      params.seq_lens_kv = buffers.seq_lens_kv;
    }
    if (problem.shape.packed_q()) params.cu_seqlens_q = buffers.cu_seqlens_q;
    if (problem.shape.packed_kv()) params.cu_seqlens_kv = buffers.cu_seqlens_kv;
    if ((problem.shape.ragged() && (params.seq_lens_q == nullptr || params.seq_lens_kv == nullptr)) ||
        (problem.shape.packed_q() && params.cu_seqlens_q == nullptr) ||
        (problem.shape.packed_kv() && params.cu_seqlens_kv == nullptr))
      throw std::invalid_argument("efficient: a ragged batch needs its device length and offset arrays");
    kernel::forward(problem.dtype, params, stream);
    CUDA_CHECK_LAUNCH();
  }

 private:
  // The fused backward's instantiation, its zeroed workspace (the fp32 dQ accumulator and the
  // arrival counters) and each row tile's expected arrivals (uploaded once per problem).
  void prepare_backward(const AttentionProblem& problem, cudaStream_t stream) {
    if (backward_problem_ && *backward_problem_ == problem) return;  // prepared already: nothing to upload again
    const auto key = std::make_pair(problem.dtype, problem.shape.head_dim);
    if (backward_prepared_.count(key) == 0) {
      CUDA_CHECK(kernels::flash_bwd_prepare(problem.dtype, problem.shape.head_dim, true));
      backward_prepared_.insert(key);
    }
    const AttentionShape& s = problem.shape;
    backward_workspace_.reserve(static_cast<std::size_t>(kernels::flash_bwd_fused_workspace_bytes(s)), "workspace");
    const std::vector<int> arrivals = kernels::flash_bwd_tile_arrivals(mask_bounds(problem), s.seq_q, s.seq_kv);
    tile_arrivals_.reserve(arrivals.size() * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(tile_arrivals_.get(), arrivals.data(), arrivals.size() * sizeof(int),
                               cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));  // `arrivals` goes out of scope
    zero_dq_ = std::find(arrivals.begin(), arrivals.end(), 0) != arrivals.end();
    backward_problem_ = problem;
  }

  std::set<std::tuple<DType, int, bool>> prepared_;
  std::set<std::pair<DType, int>> backward_prepared_;
  std::optional<AttentionProblem> backward_problem_;
  DeviceBuffer backward_workspace_;  // the fused backward's fp32 dQ accumulator, then its counters
  DeviceBuffer tile_arrivals_;       // [row tiles] key blocks adding into each tile's dQ
  bool zero_dq_ = false;             // some tile has none: its dQ rows are zeroed by a memset
};

}  // namespace

std::unique_ptr<AttentionBackend> make_efficient_backend() { return std::make_unique<EfficientBackend>(); }

}  // namespace attnprof
