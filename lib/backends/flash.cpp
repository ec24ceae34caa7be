// The flash backend: one FlashAttention-2-style fused forward kernel (kernels/flash) per call.
// bf16/fp16, head dims 64 and 128, any seq_q and seq_kv, GQA/MQA (K/V heads read in place),
// causal and sliding windows in either alignment (one "masked" instantiation with the bounds as
// run-time values: tiles outside the band are skipped, its edges masked); it writes o and, when
// asked, the logsumexp (-inf for a row that sees no key). The score matrix never reaches device
// memory.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "backends/factories.hpp"
#include "core/mask_bounds.hpp"
#include "flash/flash.hpp"
#include "gpu/cuda_check.hpp"

namespace attnprof {
namespace {

constexpr int kMaxGridYZ = 65535;  // heads go on grid.y, batch on grid.z
constexpr int kMaxSequence = 1 << 29;  // MaskBounds' arithmetic stays inside int below this

class FlashBackend final : public AttentionBackend {
 public:
  Unsupported check_device(const DeviceProperties& device) const override {
    if (device.compute_major < 8)
      return fmt::format("flash needs compute capability 8.0 or newer (bf16 mma.sync, cp.async, ldmatrix); {} is {}.{}",
                         device.name, device.compute_major, device.compute_minor);
    const int needed = kernels::flash_smem_bytes(128);
    if (device.shared_mem_per_block_optin > 0 && device.shared_mem_per_block_optin < needed)
      return fmt::format("flash needs {} bytes of shared memory per block; {} allows {}", needed, device.name,
                         device.shared_mem_per_block_optin);
    return std::nullopt;
  }

  Unsupported check_problem(const AttentionProblem& problem) const override {
    const AttentionShape& s = problem.shape;
    if (problem.dtype != DType::bf16 && problem.dtype != DType::fp16)
      return fmt::format("flash supports bf16 and fp16 (got {}); use efficient or math", to_string(problem.dtype));
    if (s.head_dim != 64 && s.head_dim != 128)
      return fmt::format("flash supports head_dim 64 and 128 (got {}); use efficient", s.head_dim);
    if (problem.has_bias) return std::string("flash has no additive bias; use efficient");
    if (!(problem.softmax_scale() > 0.f) || !std::isfinite(problem.softmax_scale()))
      return fmt::format("flash needs a finite positive softmax scale (got {})", problem.softmax_scale());
    if (s.kv_heads() < 1 || s.heads % s.kv_heads() != 0)
      return fmt::format("flash needs heads ({}) to be a multiple of heads_kv ({})", s.heads, s.kv_heads());
    if (std::max(s.seq_q, s.seq_kv) >= kMaxSequence)
      return fmt::format(
          "flash keeps key indices in 32-bit mask arithmetic: seq_q and seq_kv must be below {} (got {} x {})",
          kMaxSequence, s.seq_q, s.seq_kv);
    if (s.heads > kMaxGridYZ || s.batch > kMaxGridYZ)
      return fmt::format("flash launches heads on grid.y and batch on grid.z, at most {} each (got {} x {})",
                         kMaxGridYZ, s.batch, s.heads);
    return std::nullopt;
  }

  void prepare(const AttentionProblem& problem, cudaStream_t) override {
    // One-time per instantiation: raise its dynamic shared-memory limit.
    const bool masked = mask_bounds(problem).bounded();
    const auto key = std::make_tuple(problem.dtype, problem.shape.head_dim, masked);
    if (prepared_.count(key) != 0) return;
    CUDA_CHECK(kernels::flash_prepare(problem.dtype, problem.shape.head_dim, masked));
    prepared_.insert(key);
  }

  void run(const AttentionProblem& problem, const AttentionBuffers& buffers, cudaStream_t stream) override {
    kernels::FlashParams params;
    params.q = buffers.q;
    params.k = buffers.k;
    params.v = buffers.v;
    params.o = buffers.o;
    params.lse = buffers.lse;
    params.batch = problem.shape.batch;
    params.heads = problem.shape.heads;
    params.heads_kv = problem.shape.kv_heads();
    params.group_size = problem.shape.group_size();
    params.seq_q = problem.shape.seq_q;
    params.seq_kv = problem.shape.seq_kv;
    params.scale = problem.softmax_scale();
    params.scale_log2 = params.scale * std::numbers::log2e_v<float>;
    params.mask = mask_bounds(problem);
    kernels::flash_forward(params, problem.dtype, problem.shape.head_dim, params.mask.bounded(), stream);
    CUDA_CHECK_LAUNCH();
  }

 private:
  std::set<std::tuple<DType, int, bool>> prepared_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_flash_backend() { return std::make_unique<FlashBackend>(); }

}  // namespace attnprof
