// The flash backends. flash:fa2, two paths:
// - prefill: one FlashAttention-2-style fused forward kernel (kernels/flash) per call. bf16/fp16,
//   head dims 64 and 128, any seq_q and seq_kv, GQA/MQA (K/V heads read in place), causal and
//   sliding windows in either alignment (one "masked" instantiation with the bounds as run-time
//   values: tiles outside the band are skipped, its edges masked).
// - decode (group_size * seq_q <= 16 query rows per K/V head): kernels/decode, one block per
//   (split, K/V head, sequence) reading K and V once per K/V head; split over the keys with a
//   combine kernel when the unsplit grid would leave SMs idle (kernels/decode/decode_split.hpp).
//   Dense, packed (ragged) or paged K/V, dense or packed q. For measuring the split choice by
//   hand, ATTNPROF_DECODE_SPLITS=N (1-128, at most the key tiles; read once) replaces the heuristic's.
// Both write o and, when asked, the logsumexp (-inf for a row that sees no key). The score
// matrix never reaches device memory.
// - backward (dense batches, bf16/fp16, head dims 64 and 128, GQA, causal either way, windows):
//   kernels/flash_bwd, FlashAttention-2 style, three kernels: dot(dO, O) with the fp32 dQ
//   accumulator zeroed, the dQ dK dV kernel (P recomputed from the forward's logsumexp, dQ by
//   atomic adds), dQ converted to the input's type. Where the main kernel's last wave would leave
//   SMs idle for a whole block (no mask band, long rows), a fourth kernel walks the last blocks in
//   equal runs of steps (stream-K; kernels/flash_bwd/flash_bwd_order.hpp). For measuring and
//   testing it, ATTNPROF_FLASH_BWD_SLOTS=N (0-4096; read at prepare) plans it for N concurrent blocks
//   and takes any tail (0: none).
// flash:hopper: the Hopper-native forward (kernels/flash_hopper: wgmma, TMA, a producer and two
// consumer warpgroups, setmaxnreg) for dense batches on compute capability 9.0; bf16/fp16, head
// dims 64 and 128, GQA, causal and windows in either alignment. Decode problems (dense, ragged or
// paged) take flash:fa2's split-KV decode path. Backward at head dim 128 (bf16/fp16, dense, GQA,
// any mask): flash:fa2's pre-pass and dQ conversion around a wgmma main kernel
// (kernels/flash_hopper/flash_hopper_bwd_kernel.cuh); flash:fa2 runs head dim 64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numbers>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>
#include <tuple>

#include <fmt/format.h>

#include "backends/factories.hpp"
#include "backends/flash_bwd_params.hpp"
#include "core/mask_bounds.hpp"
#include "decode/decode.hpp"
#include "decode/decode_split.hpp"
#include "flash_bwd/flash_bwd.hpp"
#include "flash/flash.hpp"
#include "flash_hopper/flash_hopper.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"

namespace attnprof {
namespace {

constexpr int kMaxGridYZ = 65535;  // heads go on grid.y, batch on grid.z
constexpr int kMaxSequence = 1 << 29;  // MaskBounds' arithmetic stays inside int below this

// Few query rows per K/V head against the keys: the decode kernels (their M tile holds them all).
bool is_decode(const AttentionProblem& problem) {
  return static_cast<long long>(problem.shape.seq_q) * problem.shape.group_size() <= kernels::kDecodeMaxRows;
}

// ATTNPROF_DECODE_SPLITS, or 0 when unset.
int decode_splits_override() {
  static const int splits = [] {
    const char* text = std::getenv("ATTNPROF_DECODE_SPLITS");
    if (text == nullptr || *text == '\0') return 0;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 1 || value > kernels::kDecodeMaxSplits)
      throw std::invalid_argument(fmt::format("ATTNPROF_DECODE_SPLITS={}: expected a number of splits in 1-{}", text,
                                              kernels::kDecodeMaxSplits));
    return static_cast<int>(value);
  }();
  return splits;
}

// ATTNPROF_FLASH_BWD_SLOTS: the backward's tail planned as if N main-kernel blocks ran at a time,
// any tail taken (tests run the tail kernel on small problems with it; 0: none); -1 when unset.
// Read at each backward prepare().
int flash_bwd_slots_override() {
  const char* text = std::getenv("ATTNPROF_FLASH_BWD_SLOTS");
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 4096)
    throw std::invalid_argument(fmt::format("ATTNPROF_FLASH_BWD_SLOTS={}: expected a number of blocks in 0-4096", text));
  return static_cast<int>(value);
}

// Ragged or paged: the prefill path takes the varlen kernel (per-sequence lengths and bands).
bool is_varlen(const AttentionShape& s) { return s.ragged() || s.paged(); }

// A ragged or paged shape whose buffers lack the device arrays it needs is a caller's bug.
void require_sequence_arrays(const char* backend, const AttentionShape& s, const int* seq_lens_q,
                             const int* seq_lens_kv, const int* cu_seqlens_q, const int* cu_seqlens_kv,
                             const int* block_table) {
  if ((!s.seq_lens_q.empty() && seq_lens_q == nullptr) || (!s.seq_lens_kv.empty() && seq_lens_kv == nullptr) ||
      (s.packed_q() && cu_seqlens_q == nullptr) || (s.packed_kv() && cu_seqlens_kv == nullptr) ||
      (s.paged() && block_table == nullptr))
    throw std::invalid_argument(
        fmt::format("{}: the shape is ragged or paged but the buffers lack its sequence arrays", backend));
}

// The sequence arrays a ragged or paged shape uses, into the prefill or decode kernel's params
// (both name them alike); the others stay null.
template <typename Params>
void bind_sequence_arrays(const char* backend, const AttentionShape& s, const AttentionBuffers& buffers,
                          Params& params) {
  params.seq_lens_q = s.seq_lens_q.empty() ? nullptr : buffers.seq_lens_q;
  params.seq_lens_kv = s.seq_lens_kv.empty() ? nullptr : buffers.seq_lens_kv;
  params.cu_seqlens_q = s.packed_q() ? buffers.cu_seqlens_q : nullptr;
  params.cu_seqlens_kv = s.packed_kv() ? buffers.cu_seqlens_kv : nullptr;
  params.block_table = s.paged() ? buffers.block_table : nullptr;
  require_sequence_arrays(backend, s, params.seq_lens_q, params.seq_lens_kv, params.cu_seqlens_q, params.cu_seqlens_kv,
                          params.block_table);
}

// Key tiles of the longest visible key range over the batch (what the splits divide).
int decode_key_tiles(const AttentionProblem& problem) {
  const AttentionShape& s = problem.shape;
  const MaskBounds bounds = mask_bounds(problem);
  int most = 0;
  for (int b = 0; b < s.batch; ++b) {
    const int q_len = s.q_len(b);
    const int kv_len = s.kv_len(b);
    if (q_len == 0 || kv_len == 0) continue;
    const MaskBounds m = bounds.for_lengths(q_len, kv_len);
    const int lo = m.first_key(0);
    const int hi = m.last_key(q_len - 1, kv_len);
    if (hi >= lo) most = std::max(most, hi / kernels::kDecodeBlockKeys - lo / kernels::kDecodeBlockKeys + 1);
  }
  return most;
}

// What both flash variants' forward kernels refuse, said in `backend`'s name.
Unsupported fused_forward_unsupported(const char* backend, const AttentionProblem& problem) {
  const AttentionShape& s = problem.shape;
  if (problem.dtype != DType::bf16 && problem.dtype != DType::fp16)
    return fmt::format("{} supports bf16 and fp16 (got {}); use efficient or math", backend, to_string(problem.dtype));
  if (s.head_dim != 64 && s.head_dim != 128)
    return fmt::format("{} supports head_dim 64 and 128 (got {}); use efficient", backend, s.head_dim);
  if (problem.has_bias) return fmt::format("{} has no additive bias; use efficient", backend);
  if (!(problem.softmax_scale() > 0.f) || !std::isfinite(problem.softmax_scale()))
    return fmt::format("{} needs a finite positive softmax scale (got {})", backend, problem.softmax_scale());
  if (s.kv_heads() < 1 || s.heads % s.kv_heads() != 0)
    return fmt::format("{} needs heads ({}) to be a multiple of heads_kv ({})", backend, s.heads, s.kv_heads());
  if (std::max(s.seq_q, s.seq_kv) >= kMaxSequence)
    return fmt::format(
        "{} keeps key indices in 32-bit mask arithmetic: seq_q and seq_kv must be below {} (got {} x {})", backend,
        kMaxSequence, s.seq_q, s.seq_kv);
  if (s.heads > kMaxGridYZ || s.batch > kMaxGridYZ)
    return fmt::format("{} launches heads on grid.y and batch on grid.z, at most {} each (got {} x {})", backend,
                       kMaxGridYZ, s.batch, s.heads);
  return std::nullopt;
}

// A device whose blocks cannot have the `needed` bytes of shared memory (an unknown opt-in
// limit, 0, is not held against it).
Unsupported shared_memory_unsupported(const char* backend, const DeviceProperties& device, int needed) {
  if (device.shared_mem_per_block_optin > 0 && device.shared_mem_per_block_optin < needed)
    return fmt::format("{} needs {} bytes of shared memory per block; {} allows {}", backend, needed, device.name,
                       device.shared_mem_per_block_optin);
  return std::nullopt;
}

// The dense fields of the forward kernels' parameters (both variants).
kernels::FlashParams dense_flash_params(const AttentionProblem& problem, const AttentionBuffers& buffers) {
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
  return params;
}

// The backward's workspace in flash_bwd_workspace_floats' order (both variants): the fp32 dQ
// accumulator, then D = rowsum(dO O), then lse in log2 units.
void bind_backward_workspace(const AttentionShape& s, float* workspace, kernels::FlashBwdParams& params) {
  const long long rows = static_cast<long long>(s.batch) * s.heads * s.seq_q;
  params.dq_accum = workspace;
  params.d_sum = params.dq_accum + rows * s.head_dim;
  params.lse_log2 = params.d_sum + rows;
}

// The split-KV decode path (kernels/decode) both flash variants take for decode problems
// (is_decode): the split count from the device's SMs and the kernel's blocks per SM, the
// workspace of partial outputs, and the launch. `backend` names the caller in its messages.
class SplitKvDecode {
 public:
  explicit SplitKvDecode(const char* backend) : backend_(backend) {}

  // What the decode kernel refuses that the backend's other checks let through.
  Unsupported check(const AttentionProblem& problem) const {
    const AttentionShape& s = problem.shape;
    if (s.paged() && s.page_size % kernels::kDecodeBlockKeys != 0)
      return fmt::format("{} decode reads K/V in tiles of {} keys that must not cross a page: page_size must "
                         "be a multiple of {} (got {})",
                         backend_, kernels::kDecodeBlockKeys, kernels::kDecodeBlockKeys, s.page_size);
    return std::nullopt;
  }

  void prepare(const AttentionProblem& problem) {
    const auto key = std::make_pair(problem.dtype, problem.shape.head_dim);
    auto found = blocks_per_sm_.find(key);
    if (found == blocks_per_sm_.end()) {
      int blocks_per_sm = 0;
      CUDA_CHECK(kernels::decode_prepare(problem.dtype, problem.shape.head_dim, &blocks_per_sm));
      found = blocks_per_sm_.emplace(key, blocks_per_sm).first;
    }
    if (sm_count_ == 0) {
      int device = 0;
      CUDA_CHECK(cudaGetDevice(&device));
      CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
    }
    const kernels::DecodeSplitInputs in =
        kernels::decode_split_inputs(static_cast<long long>(problem.shape.batch) * problem.shape.kv_heads(),
                                     std::max(decode_key_tiles(problem), 1), sm_count_, found->second);
    splits_ = kernels::choose_decode_splits(in);
    wave_blocks_ = sm_count_ * found->second;
    if (decode_splits_override() > 0) splits_ = std::min(decode_splits_override(), in.key_tiles);
    if (splits_ > 1)
      workspace_.reserve(static_cast<std::size_t>(kernels::decode_workspace_floats(problem.shape, splits_)) *
                             sizeof(float),
                         "split_kv_partials");
    problem_ = problem;
  }

  void run(const AttentionProblem& problem, const AttentionBuffers& buffers, cudaStream_t stream) {
    if (!problem_ || !(*problem_ == problem))
      throw std::logic_error(fmt::format("{}: run() of a decode problem before prepare() of that problem", backend_));
    const AttentionShape& s = problem.shape;
    kernels::DecodeParams params;
    params.q = buffers.q;
    params.k = buffers.k;
    params.v = buffers.v;
    params.o = buffers.o;
    params.lse = buffers.lse;
    bind_sequence_arrays(backend_, s, buffers, params);
    params.batch = s.batch;
    params.heads = s.heads;
    params.heads_kv = s.kv_heads();
    params.group_size = s.group_size();
    params.seq_q = s.seq_q;
    params.seq_kv = s.seq_kv;
    params.page_size = s.page_size;
    params.pages_per_sequence = s.pages_per_sequence();
    params.scale = problem.softmax_scale();
    params.scale_log2 = params.scale * std::numbers::log2e_v<float>;
    params.mask = mask_bounds(problem);
    params.splits = splits_;
    params.wave_blocks = wave_blocks_;
    if (splits_ > 1) {
      params.partial_o = workspace_.as<float>();
      params.partial_lse = params.partial_o + static_cast<long long>(splits_) * s.batch * s.heads * s.seq_q * s.head_dim;
    }
    kernels::decode_forward(params, problem.dtype, s.head_dim, stream);
    CUDA_CHECK_LAUNCH();
  }

 private:
  const char* backend_;
  std::map<std::pair<DType, int>, int> blocks_per_sm_;  // prepared instantiations
  int sm_count_ = 0;
  int wave_blocks_ = 0;  // blocks of the prepared instantiation resident at once
  int splits_ = 1;
  std::optional<AttentionProblem> problem_;
  DeviceBuffer workspace_;  // split-KV partial O and logsumexp, grown in prepare()
};

class FlashBackend final : public AttentionBackend {
 public:
  Unsupported check_device(const DeviceProperties& device) const override {
    if (device.compute_major < 8)
      return fmt::format("flash:fa2 needs compute capability 8.0 or newer (bf16 mma.sync, cp.async, ldmatrix); {} is {}.{}",
                         device.name, device.compute_major, device.compute_minor);
    return shared_memory_unsupported("flash:fa2", device, kernels::flash_smem_bytes(128));
  }

  Unsupported check_problem(const AttentionProblem& problem) const override {
    if (Unsupported why = fused_forward_unsupported("flash:fa2", problem)) return why;
    if (is_decode(problem)) return decode_.check(problem);
    return std::nullopt;
  }

  Unsupported check_backward(const AttentionProblem& problem) const override {
    return flash_bwd_unsupported("flash:fa2", problem);
  }

  void run_backward(const AttentionProblem& problem, const BackwardBuffers& buffers, cudaStream_t stream) override {
    const AttentionShape& s = problem.shape;
    if (!backward_problem_ || !(*backward_problem_ == problem))
      throw std::logic_error("flash:fa2: run_backward() of a problem before prepare() of that problem");
    kernels::FlashBwdParams params = flash_bwd_params(problem, buffers);
    bind_backward_workspace(s, backward_workspace_.as<float>(), params);
    params.tail = backward_tail_;
    if (backward_tail_.blocks > 0) {
      params.tail_parts = params.dq_accum + kernels::flash_bwd_tail_parts_offset(s);
      params.tail_arrivals = reinterpret_cast<int*>(
          params.tail_parts + 2LL * backward_tail_.ctas * kernels::flash_bwd_tail_part_floats(s.head_dim));
    }
    kernels::flash_backward(params, problem.dtype, s.head_dim, stream);
    CUDA_CHECK_LAUNCH();
  }

  void prepare(const AttentionProblem& problem, cudaStream_t) override {
    if (problem.is_backward()) prepare_backward(problem);
    if (is_decode(problem)) {
      decode_.prepare(problem);
      return;
    }
    // One-time per instantiation: raise its dynamic shared-memory limit.
    const bool varlen = is_varlen(problem.shape);
    const bool masked = varlen || mask_bounds(problem).bounded();
    const auto key = std::make_tuple(problem.dtype, problem.shape.head_dim, masked, varlen);
    if (prepared_.count(key) != 0) return;
    CUDA_CHECK(kernels::flash_prepare(problem.dtype, problem.shape.head_dim, masked, varlen));
    prepared_.insert(key);
  }

  void run(const AttentionProblem& problem, const AttentionBuffers& buffers, cudaStream_t stream) override {
    if (is_decode(problem)) {
      decode_.run(problem, buffers, stream);
      return;
    }
    kernels::FlashParams params = dense_flash_params(problem, buffers);
    const AttentionShape& s = problem.shape;
    const bool varlen = is_varlen(s);
    if (varlen) {
      bind_sequence_arrays("flash:fa2", s, buffers, params);
      params.page_size = s.page_size;
      params.pages_per_sequence = s.pages_per_sequence();
    }
    kernels::flash_forward(params, problem.dtype, s.head_dim, varlen || params.mask.bounded(), varlen, stream);
    CUDA_CHECK_LAUNCH();
  }

 private:
  // The backward's instantiation, its tail (kernels/flash_bwd/flash_bwd_order.hpp: on sm_90, from
  // the SMs and the main kernel's blocks per SM) and its workspace (the fp32 dQ accumulator, D =
  // rowsum(dO O), the tail's parts).
  void prepare_backward(const AttentionProblem& problem) {
    const AttentionShape& s = problem.shape;
    const auto key = std::make_pair(problem.dtype, s.head_dim);
    auto found = backward_blocks_per_sm_.find(key);
    if (found == backward_blocks_per_sm_.end()) {
      CUDA_CHECK(kernels::flash_bwd_prepare(problem.dtype, s.head_dim, false));
      int blocks_per_sm = 0;
      CUDA_CHECK(kernels::flash_bwd_blocks_per_sm(problem.dtype, s.head_dim, &blocks_per_sm));
      found = backward_blocks_per_sm_.emplace(key, blocks_per_sm).first;
    }
    query_device();
    const int forced = flash_bwd_slots_override();
    const int slots = forced >= 0 ? forced : sm_count_ * found->second;
    backward_tail_ = compute_major_ >= 9
                         ? kernels::flash_bwd_tail_plan(mask_bounds(problem), s.seq_q, s.seq_kv, s.kv_heads(), s.batch,
                                                        s.group_size(), kernels::flash_bwd_step_rows(s.head_dim, false),
                                                        slots, forced >= 0)
                         : kernels::FlashBwdTail{};
    backward_workspace_.reserve(static_cast<std::size_t>(kernels::flash_bwd_workspace_floats(s, backward_tail_)) *
                                    sizeof(float),
                                "workspace");
    backward_problem_ = problem;
  }

  // The current device's SM count and compute capability, once.
  void query_device() {
    if (sm_count_ != 0) return;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&compute_major_, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  }

  std::set<std::tuple<DType, int, bool, bool>> prepared_;
  std::map<std::pair<DType, int>, int> backward_blocks_per_sm_;  // prepared instantiations: main-kernel blocks per SM
  kernels::FlashBwdTail backward_tail_;                           // the prepared problem's
  std::optional<AttentionProblem> backward_problem_;
  DeviceBuffer backward_workspace_;  // the backward's dQ accumulator and D, grown in prepare()
  int sm_count_ = 0;       // query_device()
  int compute_major_ = 0;  // query_device()
  SplitKvDecode decode_{"flash:fa2"};
};

// flash:hopper: the Hopper-native forward kernel for dense prefill; decode through SplitKvDecode.
class FlashHopperBackend final : public AttentionBackend {
 public:
  Unsupported check_device(const DeviceProperties& device) const override {
    if (device.compute_major != 9 || device.compute_minor != 0)
      return fmt::format("flash:hopper runs sm_90a code (wgmma, TMA, setmaxnreg) that only compute capability 9.0 "
                         "(Hopper) executes; {} is {}.{} (flash:fa2 runs there)",
                         device.name, device.compute_major, device.compute_minor);
    if (!kernels::flash_hopper_compiled())
      return std::string("this build has no sm_90a code for flash:hopper's kernel");
    return shared_memory_unsupported("flash:hopper", device, kernels::flash_hopper_smem_bytes(128));
  }

  Unsupported check_problem(const AttentionProblem& problem) const override {
    if (Unsupported why = fused_forward_unsupported("flash:hopper", problem)) return why;
    if (is_decode(problem)) return decode_.check(problem);
    if (is_varlen(problem.shape))
      return std::string("flash:hopper runs dense batches outside decode; ragged and paged prefill run on flash:fa2");
    return std::nullopt;
  }

  Unsupported check_backward(const AttentionProblem& problem) const override {
    if (Unsupported why = flash_bwd_unsupported("flash:hopper", problem)) return why;
    if (!kernels::flash_hopper_bwd_has_kernel(problem.dtype, problem.shape.head_dim))
      return fmt::format("flash:hopper's backward has a kernel for head dim 128 (got {}); flash:fa2 runs d{}",
                         problem.shape.head_dim, problem.shape.head_dim);
    return std::nullopt;
  }

  void run_backward(const AttentionProblem& problem, const BackwardBuffers& buffers, cudaStream_t stream) override {
    const AttentionShape& s = problem.shape;
    if (!backward_problem_ || !(*backward_problem_ == problem))
      throw std::logic_error("flash:hopper: run_backward() of a problem before prepare() of that problem");
    kernels::FlashBwdParams params = flash_bwd_params(problem, buffers);
    bind_backward_workspace(s, backward_workspace_.as<float>(), params);
    kernels::flash_hopper_backward(params, problem.dtype, s.head_dim, stream);
    CUDA_CHECK_LAUNCH();
  }

  void prepare(const AttentionProblem& problem, cudaStream_t) override {
    if (problem.is_backward()) {
      // The main kernel's instantiation; the pre-pass and the conversion need no set-up.
      const auto key = std::make_pair(problem.dtype, problem.shape.head_dim);
      if (backward_prepared_.count(key) == 0) {
        CUDA_CHECK(kernels::flash_hopper_bwd_prepare(problem.dtype, problem.shape.head_dim));
        backward_prepared_.insert(key);
      }
      backward_workspace_.reserve(static_cast<std::size_t>(kernels::flash_bwd_workspace_floats(problem.shape)) *
                                      sizeof(float),
                                  "workspace");
      backward_problem_ = problem;
    }
    if (is_decode(problem)) {
      decode_.prepare(problem);
      return;
    }
    const auto key = std::make_pair(problem.dtype, problem.shape.head_dim);
    if (prepared_.count(key) != 0) return;
    CUDA_CHECK(kernels::flash_hopper_prepare(problem.dtype, problem.shape.head_dim));
    prepared_.insert(key);
  }

  void run(const AttentionProblem& problem, const AttentionBuffers& buffers, cudaStream_t stream) override {
    if (is_decode(problem)) {
      decode_.run(problem, buffers, stream);
      return;
    }
    kernels::flash_hopper_forward(dense_flash_params(problem, buffers), problem.dtype, problem.shape.head_dim, stream);
    CUDA_CHECK_LAUNCH();
  }

 private:
  std::set<std::pair<DType, int>> prepared_;
  std::set<std::pair<DType, int>> backward_prepared_;
  std::optional<AttentionProblem> backward_problem_;
  DeviceBuffer backward_workspace_;  // the backward's dQ accumulator, D and lse in log2 units
  // Decode runs flash:fa2's split-KV kernel. The prefill kernel gives each query head its own
  // 128-row tiles: at decode it would fill 1 of those rows, read every K/V head once per query
  // head of its group and, at one sequence, leave most SMs idle (0.12-0.46x of the split-KV
  // kernel's GB/s at issue 19's shapes on an H100, docs/perf/NOTES.md).
  SplitKvDecode decode_{"flash:hopper"};
};

}  // namespace

std::unique_ptr<AttentionBackend> make_flash_backend() { return std::make_unique<FlashBackend>(); }
std::unique_ptr<AttentionBackend> make_flash_hopper_backend() { return std::make_unique<FlashHopperBackend>(); }

}  // namespace attnprof
