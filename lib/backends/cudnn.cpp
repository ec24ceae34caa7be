// cuDNN's fused scaled-dot-product attention through the cuDNN graph (backend) C API.
// prepare() builds (or finds in a per-shape cache) a graph, runs heuristics and finalizes an
// execution plan: that host cost is what the `plan` phase of the trace shows. run() only binds
// pointers and calls cudnnBackendExecute, which launches one kernel through cuLaunchKernelEx.
#include <cudnn_graph.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/cudnn.hpp"
#include "backends/cudnn_graph.hpp"
#include "backends/cudnn_info.hpp"
#include "backends/cudnn_sdpa_graph.hpp"
#include "backends/factories.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"

namespace attnprof {
namespace {

// Below this the library is not cuDNN 9: no flash-attention fprop pattern on the graph API.
constexpr std::size_t kGraphApiMinVersion = 90000;

// Diagnostics, read once from the environment (cuDNN's own log: CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr):
//   ATTNPROF_CUDNN_VERBOSE=1        print every plan build: graph, configs offered, engine chosen, plan JSON
//   ATTNPROF_CUDNN_GRAPH=composite  use only the composite pattern graph (or =native: only the SDPA_FWD op)
//   ATTNPROF_CUDNN_FIRST_CONFIG=N   skip heuristics' first N engine configs, to compare plans by hand
//   ATTNPROF_CUDNN_PACKED_KV=pages  read packed K/V as a paged cache of one-token pages (=offsets: through
//                                   ragged offsets; default: pages for decode, sdpa_prefers_token_pages)
struct Diagnostics {
  bool verbose = false;
  std::string packed_kv;
  std::string graph;
  int first_config = 0;
};

const Diagnostics& diagnostics() {
  static const Diagnostics d = [] {
    Diagnostics out;
    auto env = [](const char* name) {
      const char* value = std::getenv(name);
      return std::string(value != nullptr ? value : "");
    };
    out.verbose = !env("ATTNPROF_CUDNN_VERBOSE").empty() && env("ATTNPROF_CUDNN_VERBOSE") != "0";
    out.graph = env("ATTNPROF_CUDNN_GRAPH");
    out.first_config = std::atoi(env("ATTNPROF_CUDNN_FIRST_CONFIG").c_str());
    out.packed_kv = env("ATTNPROF_CUDNN_PACKED_KV");
    return out;
  }();
  return d;
}

std::vector<SdpaGraphVariant> variants_to_try(const AttentionProblem& problem, std::size_t version) {
  const std::string& packed_kv = diagnostics().packed_kv;
  const bool token_pages =
      packed_kv == "pages" || (packed_kv != "offsets" && sdpa_prefers_token_pages(problem));
  std::vector<SdpaGraphVariant> variants = sdpa_graph_variants(problem, version, token_pages);
  const std::string& only = diagnostics().graph;
  if (only == "native" || only == "composite")
    std::erase_if(variants, [&](const SdpaGraphVariant& v) {
      return (v.kind == SdpaGraphKind::native_op) != (only == "native");
    });
  return variants;
}

// Everything the graph and its per-sequence device arrays depend on (the scale is bound at execution).
struct PlanKey {
  int batch, heads, heads_kv, seq_q, seq_kv, head_dim;
  DType dtype;
  bool causal;
  MaskAlignment alignment;
  int window_left, window_right;
  std::vector<int> seq_lens_q, seq_lens_kv;
  int page_size;
  AttentionPass pass;  // a backward problem's forward also writes the logsumexp
  auto operator<=>(const PlanKey&) const = default;
};

PlanKey key_of(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  return {s.batch,        s.heads,         s.kv_heads(),    s.seq_q,      s.seq_kv,
          s.head_dim,     p.dtype,         p.causal,        p.alignment,  p.window.left,
          p.window.right, s.seq_lens_q,    s.seq_lens_kv,   s.page_size,  p.pass};
}

// An int32 array uploaded once for a plan (lengths, ragged offsets), on the case's stream and
// waited for: a plain cudaMemcpy runs on the legacy stream, which the case's non-blocking stream
// does not wait for, and from pageable memory it may return before the data has landed.
DeviceBuffer upload_int32(const std::vector<std::int32_t>& values, cudaStream_t stream) {
  DeviceBuffer buffer(values.size() * sizeof(std::int32_t));
  CUDA_CHECK(cudaMemcpyAsync(buffer.get(), values.data(), values.size() * sizeof(std::int32_t),
                             cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return buffer;
}

std::vector<std::int32_t> lengths_of(const AttentionShape& s, bool query_side) {
  std::vector<std::int32_t> lens(static_cast<std::size_t>(s.batch));
  for (int b = 0; b < s.batch; ++b) lens[static_cast<std::size_t>(b)] = query_side ? s.q_len(b) : s.kv_len(b);
  return lens;
}

// Element offsets as int32 (sdpa_unsupported refuses problems whose offsets would not fit).
std::vector<std::int32_t> int32_offsets(const std::vector<int>& lens, int heads, int head_dim) {
  const std::vector<std::int64_t> wide = sdpa_ragged_offsets(lens, heads, head_dim);
  return std::vector<std::int32_t>(wide.begin(), wide.end());
}

// Per-sequence device arrays of a ragged or paged plan, made in prepare() and bound by run().
struct SequenceArrays {
  DeviceBuffer seq_len_q, seq_len_kv;        // [batch] int32
  DeviceBuffer offsets_q, offsets_kv;        // [batch + 1] int32 element offsets, when packed
  DeviceBuffer token_pages;                  // [batch, seq_kv] int32: packed K/V read as one-token pages
};

SequenceArrays make_sequence_arrays(const AttentionShape& s, bool packed_kv_as_pages, cudaStream_t stream) {
  SequenceArrays arrays;
  arrays.seq_len_q = upload_int32(lengths_of(s, true), stream);
  arrays.seq_len_kv = upload_int32(lengths_of(s, false), stream);
  if (s.packed_q()) arrays.offsets_q = upload_int32(int32_offsets(s.seq_lens_q, s.heads, s.head_dim), stream);
  if (s.packed_kv() && packed_kv_as_pages) arrays.token_pages = upload_int32(sdpa_token_page_table(s), stream);
  else if (s.packed_kv())
    arrays.offsets_kv = upload_int32(int32_offsets(s.seq_lens_kv, s.kv_heads(), s.head_dim), stream);
  return arrays;
}

// Everything one finalized plan needs, kept together so descriptors outlive the plan that refers to them.
struct CudnnPlan {
  std::string graph_name;
  OperationGraphBuilder graph;
  ExecutionPlan execution;
  DeviceBuffer workspace;
  SequenceArrays sequences;  // empty unless the problem is ragged or paged
  std::vector<std::int64_t> uids;
  // By-value scalars: the variant pack points at these host values.
  float scale = 0.f;
  std::vector<ByValueScalar> constants;  // the mask's; never resized once the plan is built
  // The variant pack of the last pointers run() saw (a sweep reuses one buffer set per case).
  BackendDescriptor variant_pack;
  AttentionBuffers bound{};
  // A backward plan's: the fp32 buffers its graph keeps in memory, and the pointers last bound.
  DeviceBuffer softmax_sum, dq_accum;
  BackwardBuffers bound_backward{};

  void abandon() {
    graph.abandon();
    execution.abandon();
    variant_pack.abandon();
  }
};

bool same_pointers(const AttentionBuffers& a, const AttentionBuffers& b) {
  return a.q == b.q && a.k == b.k && a.v == b.v && a.o == b.o && a.lse == b.lse && a.block_table == b.block_table;
}

bool same_pointers(const BackwardBuffers& a, const BackwardBuffers& b) {
  return a.q == b.q && a.k == b.k && a.v == b.v && a.o == b.o && a.lse == b.lse && a.d_o == b.d_o && a.dq == b.dq &&
         a.dk == b.dk && a.dv == b.dv;
}

class CudnnBackend final : public AttentionBackend {
 public:
  explicit CudnnBackend(const CudnnBackendOptions& options) : check_band_surface_(options.check_band_surface) {}

  ~CudnnBackend() override {
    // At process exit the CUDA runtime may already be gone; destroying plans and the handle then
    // can crash inside the driver, so leave them to the OS (PyTorch leaks its handles for the same reason).
    int device = 0;
    if (cudaGetDevice(&device) == cudaErrorCudartUnloading) {
      for (auto& [key, plan] : plans_) plan->abandon();
      for (auto& [key, plan] : backward_plans_) plan->abandon();
      if (handle_) handle_->abandon();
    }
  }

  Unsupported check_device(const DeviceProperties& device) const override {
    if (device.compute_major < 8)
      return fmt::format("cuDNN's fused attention needs compute capability 8.0 or newer; {} is {}.{}", device.name,
                         device.compute_major, device.compute_minor);
    const std::size_t version = cudnn_runtime_version_number();
    if (version < kGraphApiMinVersion)
      return fmt::format(
          "the loaded cuDNN is {}; this backend needs cuDNN 9: older graph APIs have neither the fused "
          "flash-attention fprop pattern for arbitrary sequence lengths nor the SDPA_FWD operation",
          format_cudnn_version(version));
    return std::nullopt;
  }

  Unsupported check_problem(const AttentionProblem& problem) const override {
    return sdpa_unsupported(problem, cudnn_runtime_version_number(), check_band_surface_);
  }

  Unsupported check_backward(const AttentionProblem& problem) const override {
    return sdpa_backward_unsupported(problem, cudnn_runtime_version_number());
  }

  void prepare(const AttentionProblem& problem, cudaStream_t stream) override {
    if (const Unsupported why = ragged_on_this_device(problem)) throw BackendUnsupportedError(*why);
    if (problem.is_backward())
      if (const Unsupported why = backward_on_this_device(problem)) throw BackendUnsupportedError(*why);
    if (!handle_) handle_ = std::make_unique<CudnnHandle>();
    bind_stream(stream);
    const PlanKey key = key_of(problem);
    if (plans_.find(key) == plans_.end()) plans_.emplace(key, build_plan(problem, stream));
    if (problem.is_backward() && backward_plans_.find(key) == backward_plans_.end())
      backward_plans_.emplace(key, build_backward_plan(problem, stream));
  }

  void run_backward(const AttentionProblem& problem, const BackwardBuffers& buffers, cudaStream_t stream) override {
    CudnnPlan& plan = plan_for(backward_plans_, problem, stream);
    plan.scale = problem.softmax_scale();
    if (plan.variant_pack.get() == nullptr || !same_pointers(plan.bound_backward, buffers)) {
      std::vector<void*> pointers = {const_cast<void*>(buffers.q),   const_cast<void*>(buffers.k),
                                     const_cast<void*>(buffers.v),   const_cast<void*>(buffers.o),
                                     &plan.scale,                    const_cast<float*>(buffers.lse),
                                     const_cast<void*>(buffers.d_o), buffers.dq,
                                     buffers.dk,                     buffers.dv,
                                     plan.softmax_sum.get(),         plan.dq_accum.get()};
      for (ByValueScalar& constant : plan.constants) pointers.push_back(constant.data());
      if (plan.sequences.seq_len_q.get() != nullptr)
        pointers.insert(pointers.end(), {plan.sequences.seq_len_q.get(), plan.sequences.seq_len_kv.get()});
      plan.variant_pack = make_variant_pack(plan.uids, pointers, plan.workspace.get());
      plan.bound_backward = buffers;
    }
    CUDNN_CHECK(cudnnBackendExecute(handle_->get(), plan.execution.plan.get(), plan.variant_pack.get()));
  }

  void run(const AttentionProblem& problem, const AttentionBuffers& buffers, cudaStream_t stream) override {
    CudnnPlan& plan = plan_for(plans_, problem, stream);
    plan.scale = problem.softmax_scale();
    if (plan.variant_pack.get() == nullptr || !same_pointers(plan.bound, buffers)) {
      std::vector<void*> pointers = {const_cast<void*>(buffers.q), const_cast<void*>(buffers.k),
                                     const_cast<void*>(buffers.v), buffers.o, &plan.scale};
      if (problem.is_backward()) {
        if (buffers.lse == nullptr)
          throw GpuCallError("cudnn: a backward problem's forward was run without a logsumexp buffer");
        pointers.push_back(buffers.lse);
      }
      for (ByValueScalar& constant : plan.constants) pointers.push_back(constant.data());
      append_sequence_pointers(problem.shape, plan, buffers, pointers);
      plan.variant_pack = make_variant_pack(plan.uids, pointers, plan.workspace.get());
      plan.bound = buffers;
    }
    CUDNN_CHECK(cudnnBackendExecute(handle_->get(), plan.execution.plan.get(), plan.variant_pack.get()));
  }

 private:
  // Ragged offsets (packed Q/O or K/V) run only on Hopper and newer before cuDNN 9.18.1; only
  // prepare() knows the device.
  static Unsupported ragged_on_this_device(const AttentionProblem& problem) {
    const AttentionShape& s = problem.shape;
    if (!s.packed_q() && !s.packed_kv()) return std::nullopt;
    const std::size_t version = cudnn_runtime_version_number();
    if (version >= kRaggedBeforeHopperMinVersion) return std::nullopt;
    int device = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major >= 9) return std::nullopt;
    return fmt::format(
        "packed (ragged) tensors through cuDNN's ragged offsets need compute capability 9.0 or newer before cuDNN "
        "{}; this device is {}.x and the loaded cuDNN is {}",
        format_cudnn_version(kRaggedBeforeHopperMinVersion), major, format_cudnn_version(version));
  }

  // Head dims above 128 in the backward are Hopper's only (cudnn-frontend's support surface);
  // only prepare() knows the device.
  static Unsupported backward_on_this_device(const AttentionProblem& problem) {
    int device = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (problem.shape.head_dim <= 128 || major == 9) return std::nullopt;
    return fmt::format("cuDNN's SDPA backward takes head_dim above 128 on compute capability 9.x only; this device is "
                       "{}.x",
                       major);
  }

  // The backward graph's plan: the same variant order as the forward's (composite graphs only).
  std::unique_ptr<CudnnPlan> build_backward_plan(const AttentionProblem& problem, cudaStream_t stream) {
    const auto start = std::chrono::steady_clock::now();
    const std::size_t version = cudnn_runtime_version_number();
    const std::string label = case_label("cudnn", problem);
    std::string tried;
    bool malformed = false;
    for (const SdpaGraphVariant& variant : sdpa_graph_variants(problem, version)) {
      auto plan = std::make_unique<CudnnPlan>();
      plan->graph_name = "backward " + describe(variant, problem);
      const bool lengths = sdpa_backward_needs_lengths(problem, version);
      if (lengths) plan->graph_name += " with a full-length padding mask (cuDNN <= 9.15, seq_kv % 128 != 0)";
      // Backward graphs are composite only: a BAD_PARAM while describing one is ours.
      const auto add_ops = [&](OperationGraphBuilder& graph) {
        return add_sdpa_backward(graph, problem, variant, version);
      };
      const bool found = search_plan(*plan, add_ops, true, tried, malformed);
      if (!found) continue;
      const AttentionShape& s = problem.shape;
      const std::size_t rows = static_cast<std::size_t>(s.batch) * s.heads * s.seq_q;
      plan->workspace = DeviceBuffer(static_cast<std::size_t>(plan->execution.workspace_bytes), "workspace");
      plan->softmax_sum = DeviceBuffer(rows * sizeof(float), "softmax_sum");
      plan->dq_accum = DeviceBuffer(rows * s.head_dim * sizeof(float), "dq_accumulator");
      plan->uids = {sdpa_uid::q,   sdpa_uid::k,  sdpa_uid::v,  sdpa_uid::o,  sdpa_uid::scale,       sdpa_uid::stats,
                    sdpa_uid::d_o, sdpa_uid::dq, sdpa_uid::dk, sdpa_uid::dv, sdpa_uid::softmax_sum, sdpa_uid::dq_accum};
      for (const ByValueScalar& constant : plan->constants) plan->uids.push_back(constant.uid);
      if (lengths) {
        plan->uids.insert(plan->uids.end(), {sdpa_uid::seq_len_q, sdpa_uid::seq_len_kv});
        plan->sequences.seq_len_q = upload_int32(lengths_of(s, true), stream);
        plan->sequences.seq_len_kv = upload_int32(lengths_of(s, false), stream);
      }
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (diagnostics().verbose) log_plan(label, *plan, ms);
      return plan;
    }
    throw_no_plan("backward execution plan", label, tried, malformed);
  }

  // The per-sequence inputs, in the order build_plan() listed their uids.
  static void append_sequence_pointers(const AttentionShape& s, CudnnPlan& plan, const AttentionBuffers& buffers,
                                       std::vector<void*>& pointers) {
    if (plan.sequences.seq_len_q.get() == nullptr) return;
    pointers.push_back(plan.sequences.seq_len_q.get());
    pointers.push_back(plan.sequences.seq_len_kv.get());
    if (plan.sequences.token_pages.get() != nullptr) {
      pointers.push_back(plan.sequences.token_pages.get());
    } else if (s.paged()) {
      if (buffers.block_table == nullptr)
        throw GpuCallError("cudnn: a paged problem was run without a block table (AttentionBuffers::block_table)");
      pointers.push_back(const_cast<int*>(buffers.block_table));
    }
    if (s.packed_q()) pointers.insert(pointers.end(), 2, plan.sequences.offsets_q.get());   // Q, O
    if (plan.sequences.offsets_kv.get() != nullptr) pointers.insert(pointers.end(), 2, plan.sequences.offsets_kv.get());
  }

  static std::vector<std::int64_t> sequence_uids(const AttentionShape& s, bool packed_kv_as_pages) {
    std::vector<std::int64_t> uids = {sdpa_uid::seq_len_q, sdpa_uid::seq_len_kv};
    if (s.paged() || (s.packed_kv() && packed_kv_as_pages)) uids.push_back(sdpa_uid::page_table);
    if (s.packed_q()) uids.insert(uids.end(), {sdpa_uid::ragged_q, sdpa_uid::ragged_o});
    if (s.packed_kv() && !packed_kv_as_pages) uids.insert(uids.end(), {sdpa_uid::ragged_k, sdpa_uid::ragged_v});
    return uids;
  }

  void bind_stream(cudaStream_t stream) {
    if (stream_bound_ && stream == bound_stream_) return;
    CUDNN_CHECK(cudnnSetStream(handle_->get(), stream));
    bound_stream_ = stream;
    stream_bound_ = true;
  }

  std::unique_ptr<CudnnPlan> build_plan(const AttentionProblem& problem, cudaStream_t stream) {
    const auto start = std::chrono::steady_clock::now();
    const std::size_t version = cudnn_runtime_version_number();
    const std::string label = case_label("cudnn", problem);
    note_missing_native_op_once(version);

    std::string tried;
    bool malformed = false;  // BAD_PARAM while describing the composite graph: our mistake, not the library's
    const std::vector<SdpaGraphVariant> variants = variants_to_try(problem, version);
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const SdpaGraphVariant& variant = variants[i];
      auto plan = std::make_unique<CudnnPlan>();
      plan->graph_name = describe(variant, problem);
      const auto add_ops = [&](OperationGraphBuilder& graph) { return add_sdpa_forward(graph, problem, variant); };
      const bool found = search_plan(*plan, add_ops, variant.kind == SdpaGraphKind::composite, tried, malformed);
      if (!found) continue;
      plan->workspace = DeviceBuffer(static_cast<std::size_t>(plan->execution.workspace_bytes), "workspace");
      plan->uids = {sdpa_uid::q, sdpa_uid::k, sdpa_uid::v, sdpa_uid::o, sdpa_uid::scale};
      if (problem.is_backward()) plan->uids.push_back(sdpa_uid::stats);
      for (const ByValueScalar& constant : plan->constants) plan->uids.push_back(constant.uid);
      if (sdpa_per_sequence(problem)) {
        const std::vector<std::int64_t> more = sequence_uids(problem.shape, variant.packed_kv_as_pages);
        plan->uids.insert(plan->uids.end(), more.begin(), more.end());
        plan->sequences = make_sequence_arrays(problem.shape, variant.packed_kv_as_pages, stream);
      }
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (i > 0)
        std::fprintf(stderr, "attnprof: cudnn %s: using the %s; tried before:\n%s", label.c_str(),
                     plan->graph_name.c_str(), tried.c_str());
      if (diagnostics().verbose) log_plan(label, *plan, ms);
      return plan;
    }

    if (variants.empty())
      tried = fmt::format("- none: ATTNPROF_CUDNN_GRAPH={} excludes every graph\n", diagnostics().graph);
    throw_no_plan("execution plan", label, tried, malformed);
  }

  // Describes one graph with `add_ops`, builds it and asks heuristics for an execution plan that
  // finalizes. False when none does, with the reason appended to `tried`; `composite`: a
  // BAD_PARAM while describing it is our mistake (sets `malformed`), not the library's.
  template <typename AddOps>
  bool search_plan(CudnnPlan& plan, AddOps&& add_ops, bool composite, std::string& tried, bool& malformed) {
    try {
      plan.constants = add_ops(plan.graph);
      plan.graph.build(handle_->get());
      PlanSearchOptions search;
      search.first_config = diagnostics().first_config;
      plan.execution = find_execution_plan(handle_->get(), plan.graph.graph(), search);
    } catch (const CudnnCallError& e) {
      tried += fmt::format("- {}: {}\n", plan.graph_name, e.what());
      malformed = malformed || (e.is_bad_param() && composite);
      return false;
    }
    if (plan.execution.plan.get() != nullptr) return true;
    tried += fmt::format("- {}: none of the {} engine config(s) heuristics offered finalized [{}]\n{}", plan.graph_name,
                         plan.execution.configs_offered, plan.execution.offered, plan.execution.rejections);
    return false;
  }

  // No graph gave a plan: a malformed graph is our error, otherwise the library cannot run it.
  [[noreturn]] static void throw_no_plan(const char* what, const std::string& label, const std::string& tried,
                                         bool malformed) {
    const std::string message = fmt::format(
        "cuDNN {} built no {} for {} (graphs tried, best first):\n{}"
        "(CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr shows why heuristics dropped candidates)",
        cudnn_runtime_description(), what, label, tried);
    if (malformed) throw GpuCallError(message);
    throw BackendUnsupportedError(message);
  }

  static void log_plan(const std::string& label, const CudnnPlan& plan, double ms) {
    const ExecutionPlan& e = plan.execution;
    std::fprintf(stderr,
                 "attnprof: cudnn %s: %s (%zu ops), %s = config #%d of %d offered, workspace %lld B, "
                 "built in %.1f ms on cuDNN %s\n  offered: %s\n",
                 label.c_str(), plan.graph_name.c_str(), plan.graph.operation_count(), e.engine_config.c_str(),
                 e.config_position, e.configs_offered, static_cast<long long>(e.workspace_bytes), ms,
                 cudnn_runtime_description().c_str(), e.offered.c_str());
    if (!e.rejections.empty()) std::fprintf(stderr, "  passed over:\n%s", e.rejections.c_str());
    const std::string json = execution_plan_json(e.plan.get());
    if (!json.empty()) std::fprintf(stderr, "  plan: %s\n", json.c_str());
  }

  static void note_missing_native_op_once(std::size_t version) {
    static bool noted = false;
    if (noted || version >= kNativeSdpaMinVersion) return;
    noted = true;
    std::fprintf(stderr,
                 "attnprof: cudnn: the loaded cuDNN %s predates 9.13.1 and has no SDPA_FWD operation; "
                 "cases without a mask use the composite pattern graph too\n",
                 format_cudnn_version(version).c_str());
  }

  std::unique_ptr<CudnnHandle> handle_;  // declared first: destroyed after every plan made with it
  // The plan of `problem` in `plans` (the forward's or the backward's), built by prepare() when
  // it is not there yet, with the handle bound to `stream`.
  CudnnPlan& plan_for(std::map<PlanKey, std::unique_ptr<CudnnPlan>>& plans, const AttentionProblem& problem,
                      cudaStream_t stream) {
    auto it = plans.find(key_of(problem));
    if (it == plans.end()) {
      prepare(problem, stream);
      it = plans.find(key_of(problem));
      if (it == plans.end())
        throw std::logic_error("cudnn: prepare() built no plan for " + case_label("cudnn", problem));
    }
    bind_stream(stream);
    return *it->second;
  }

  std::map<PlanKey, std::unique_ptr<CudnnPlan>> plans_;
  std::map<PlanKey, std::unique_ptr<CudnnPlan>> backward_plans_;
  cudaStream_t bound_stream_ = nullptr;
  bool stream_bound_ = false;
  bool check_band_surface_ = true;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cudnn_backend() { return std::make_unique<CudnnBackend>(CudnnBackendOptions{}); }

std::unique_ptr<AttentionBackend> make_cudnn_backend(const CudnnBackendOptions& options) {
  return std::make_unique<CudnnBackend>(options);
}

}  // namespace attnprof
