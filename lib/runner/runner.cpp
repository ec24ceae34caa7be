#include "runner/runner.hpp"

#include <cupti.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/backend.hpp"
#include "backends/cudnn_info.hpp"
#include "summary/surprises.hpp"
#include "metrics/kernel_metrics.hpp"
#include "collector/nvtx_range.hpp"
#include "metrics/range_profiler.hpp"
#include "core/errors.hpp"
#include "core/utc_time.hpp"
#include "core/version.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "runner/device_case.hpp"
#include "summary/findings.hpp"
#include "trace/annotate.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/projection.hpp"

namespace attnprof {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Tags the CUDA calls of one step of the sweep; popped on every exit path.
class ScopedTag {
 public:
  ScopedTag(ActivityCollector& collector, trace::SweepTag tag) : collector_(collector) { collector_.push_tag(tag); }
  ~ScopedTag() {
    try {
      collector_.pop_tag();
    } catch (...) {
      // Popping can only fail if CUPTI is gone; the next push reports it.
    }
  }
  ScopedTag(const ScopedTag&) = delete;
  ScopedTag& operator=(const ScopedTag&) = delete;

 private:
  ActivityCollector& collector_;
};

// Inputs must not change when cases are added or reordered: seed from the case's name.
std::uint64_t case_seed(std::uint64_t seed, const std::string& label) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : label) hash = (hash ^ ch) * 1099511628211ull;
  return seed ^ hash;
}


bool interrupted(const RunOptions& o) { return o.interrupted != nullptr && o.interrupted->load(); }

// After an error, is the CUDA context still usable? Sticky errors (illegal address, launch
// failure) poison every later call; then the rest of the sweep cannot run.
std::optional<std::string> context_error() {
  cudaError_t status = cudaDeviceSynchronize();
  if (status == cudaSuccess) {
    void* probe = nullptr;
    status = cudaMalloc(&probe, 256);
    if (status == cudaSuccess) status = cudaFree(probe);
  }
  if (status == cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error left by the failed case
    return std::nullopt;
  }
  return fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
}

// Inputs and outputs must fit before any host memory is spent drawing them; a shape that
// cannot fit fails with the sizes, not with an allocation error deep inside a backend.
void require_device_memory(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  const double io_bytes = attention_min_bytes(p) + 4.0 * s.batch * s.heads * s.seq_q +
                          (p.has_bias ? 4.0 * s.seq_q * s.seq_kv : 0.0);
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (io_bytes > static_cast<double>(free_bytes))
    throw std::runtime_error(fmt::format("q, k, v and o need {:.1f} GiB of device memory; {:.1f} GiB of {:.1f} GiB are free",
                                         io_bytes / (1 << 30), static_cast<double>(free_bytes) / (1 << 30),
                                         static_cast<double>(total_bytes) / (1 << 30)));
}

struct CaseOutcome {
  CaseStatus status = CaseStatus::ok;
  std::string reason;
  CaseMeasurements measured;
  std::optional<MeasuredRanges> metrics;  // --metrics: the replayed forward's ranges
  std::string metrics_unavailable;        // why the range profiler could not measure
};

// Everything that happens on the GPU for one case. Throws on CUDA errors; the caller records them.
void execute_case(AttentionBackend& backend, const PlannedCase& pc, int index, const RunOptions& o,
                  ActivityCollector& collector, KernelMetricsProfiler* metrics, cudaStream_t stream,
                  CaseOutcome& out) {
  const Config& config = o.config;
  CaseMeasurements& m = out.measured;
  NvtxRange case_range("case " + pc.label);

  require_device_memory(pc.problem);
  std::unique_ptr<DeviceCase> device_case;
  {
    ScopedTag tag(collector, {index, trace::Phase::none, -1});
    device_case = std::make_unique<DeviceCase>(pc.problem, case_seed(config.seed, pc.label), stream);
  }

  for (int attempt = 0; attempt < 2; ++attempt) {
    ScopedTag tag(collector, {index, trace::Phase::plan, attempt});
    NvtxRange range(attempt == 0 ? "plan (cold)" : "plan (cached)");
    const auto start = Clock::now();
    backend.prepare(pc.problem, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    (attempt == 0 ? m.plan_cold_ms : m.plan_warm_ms) = ms_since(start);
  }

  if (config.verify) {
    ScopedTag tag(collector, {index, trace::Phase::verify, -1});
    NvtxRange range("verify");
    device_case->poison_outputs(stream);
    backend.run(pc.problem, device_case->buffers(), stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const Verification v =
        verify_attention(pc.problem, device_case->seed(), device_case->read_rows(rows_to_check(pc.problem.shape), stream),
                         {.interrupted = o.interrupted});
    m.verified = true;
    m.verify_passed = v.passed;
    m.relative_error = v.relative_error;
    m.error_bound = v.bound;
    if (!v.passed) {
      out.status = CaseStatus::failed;
      out.reason = "wrong result: " + v.detail;
    }
  }

  {
    ScopedTag tag(collector, {index, trace::Phase::warmup, -1});
    NvtxRange range("warmup");
    for (int i = 0; i < config.warmup; ++i) backend.run(pc.problem, device_case->buffers(), stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  std::vector<CudaEvent> starts(static_cast<std::size_t>(config.iterations));
  std::vector<CudaEvent> stops(static_cast<std::size_t>(config.iterations));
  double host_us = 0;
  int done = 0;
  for (; done < config.iterations && !interrupted(o); ++done) {
    const auto host_start = Clock::now();
    ScopedTag tag(collector, {index, trace::Phase::iteration, done});
    NvtxRange range(fmt::format("iter {}", done));
    CUDA_CHECK(cudaEventRecord(starts[done].get(), stream));
    backend.run(pc.problem, device_case->buffers(), stream);
    CUDA_CHECK(cudaEventRecord(stops[done].get(), stream));
    host_us += ms_since(host_start) * 1000.0;
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  m.iterations = done;
  for (int i = 0; i < done; ++i) m.iteration_us.push_back(elapsed_ms(starts[i], stops[i]) * 1000.0);
  m.host_enqueue_us_per_iter = done > 0 ? host_us / done : 0;
  if (done < config.iterations) {
    out.status = CaseStatus::interrupted;
    out.reason = fmt::format("interrupted after {} of {} timed iterations", done, config.iterations);
  }

  // --metrics: one more forward after the timed ones, its kernels replayed by the range profiler;
  // tagged `metrics`, so it is in the trace but in no timing and no per-iteration count.
  if (metrics != nullptr && done == config.iterations) {
    ScopedTag tag(collector, {index, trace::Phase::metrics, -1});
    NvtxRange range("metrics (replayed)");
    try {
      out.metrics = metrics->measure([&] { backend.run(pc.problem, device_case->buffers(), stream); });
    } catch (const MetricsUnavailableError& e) {
      out.metrics_unavailable = e.what();
    }
  }
}

// Tags host annotations with the case (the collector cannot: NVTX ranges carry no correlation)
// from the names the runner gave them.
void tag_annotations(trace::ActivityBatch& batch, int index) {
  for (trace::Annotation& a : batch.annotations) {
    a.tag.case_index = index;
    if (a.name.rfind("iter ", 0) == 0) {
      a.tag.phase = trace::Phase::iteration;
      a.tag.iteration = std::atoi(a.name.c_str() + 5);
    } else if (a.name == "warmup") {
      a.tag.phase = trace::Phase::warmup;
    } else if (a.name == "verify") {
      a.tag.phase = trace::Phase::verify;
    } else if (a.name == "metrics (replayed)") {
      a.tag.phase = trace::Phase::metrics;
    } else if (a.name.rfind("plan", 0) == 0) {
      a.tag.phase = trace::Phase::plan;
      a.tag.iteration = a.name == "plan (cold)" ? 0 : 1;
    }
  }
}

std::string progress_result(const CaseSummary& c) {
  if (c.status == CaseStatus::skipped) return "skipped: " + c.reason;
  std::string text = fmt::format("{}", to_string(c.status));
  if (c.iterations > 0)
    text += fmt::format("  {:.1f} us  {:.1f} TFLOP/s  {:.3g} kernels/it  {:.3g} memcpy/it", c.median_us, c.tflops,
                        c.kernels_per_iter, c.memcpy_per_iter);
  if (c.status != CaseStatus::ok) text += "  (" + c.reason + ")";
  return text;
}

// What stays the same across the cases of one sweep.
struct SweepState {
  const RunOptions& options;
  const DeviceProperties& device;
  ActivityCollector& collector;
  trace::ChromeTraceWriter& writer;
  CudaStream stream{};
  std::map<std::string, std::unique_ptr<AttentionBackend>> backends{};  // one per variant: plan caches live on
  std::optional<std::string> lost_context{};  // set once a sticky CUDA error makes the rest unrunnable
  std::uint64_t dropped_so_far = 0;
  std::unique_ptr<KernelMetricsProfiler> metrics{};  // --metrics; reset once counters prove unavailable
  nlohmann::json metrics_info{};                     // what --metrics measured, for the trace's metadata
  std::vector<std::string> notes{};                  // printed after the case's progress line
};

// --metrics: one profiler for the whole run. Without counters the run says why once and goes on.
void start_metrics(SweepState& state) {
  const RunOptions& o = state.options;
  state.metrics_info = {{"groups", o.metrics}};
  try {
    state.metrics = std::make_unique<KernelMetricsProfiler>(o.device, parse_metric_groups(o.metrics));
    state.metrics_info["chip"] = state.metrics->chip();
    state.metrics_info["metrics"] = state.metrics->metric_names();
    state.metrics_info["passes"] = state.metrics->passes();
    if (o.progress != nullptr)
      state.notes.push_back(fmt::format("metrics: {} on {}, {} replay pass(es) per kernel, outside the timed "
                                        "iterations",
                                        fmt::join(state.metrics->metric_names(), ", "), state.metrics->chip(),
                                        state.metrics->passes()));
  } catch (const MetricsUnavailableError& e) {
    state.metrics_info["unavailable"] = e.what();
    state.notes.push_back(fmt::format("metrics unavailable, continuing without them: {}", e.what()));
  }
}

// Pairs the replayed forward's ranges with its kernel launches and writes the values into all of
// the case's kernel records of those names, before the batch is written and summarized.
void attach_metrics(SweepState& state, trace::ActivityBatch& batch, const CaseOutcome& run, int index) {
  if (!run.metrics_unavailable.empty()) {
    state.metrics.reset();
    state.metrics_info["unavailable"] = run.metrics_unavailable;
    state.notes.push_back(fmt::format("metrics unavailable, continuing without them: {}", run.metrics_unavailable));
  }
  if (!run.metrics) return;
  auto launches = launches_in_order(batch, index, trace::Phase::metrics);
  if (launches.size() < run.metrics->ranges.size()) {
    // CUPTI (13.0 U1 on the H200) records no activity for kernels run under the range profiler:
    // the last timed iteration launched the same kernels in the same order (the CTA check in the
    // match catches it if not).
    auto last = launches_in_order(batch, index, trace::Phase::iteration, run.measured.iterations - 1);
    if (last.size() != run.metrics->ranges.size())
      state.notes.push_back(fmt::format("metrics of {}: {} ranges measured but {} launches in the last timed iteration",
                                        run.measured.label, run.metrics->ranges.size(), last.size()));
    launches = std::move(last);
  }
  const RangeMatch match = match_ranges_to_launches(*run.metrics, launches);
  apply_kernel_metrics(batch, index, trace::Phase::metrics, match.kernels);
  for (const std::string& problem : match.problems)
    state.notes.push_back(fmt::format("metrics of {}: {}", run.measured.label, problem));
}

// Decides whether the case can run, runs it, and records how it ended. Never throws for the
// case's own failures: they become its status and reason.
CaseOutcome attempt_case(SweepState& state, const PlannedCase& pc, int index) {
  CaseOutcome run;
  run.measured.label = pc.label;
  run.measured.backend = pc.backend;
  run.measured.problem = pc.problem;
  auto& backend = state.backends[pc.backend];
  if (!backend) backend = find_backend(pc.backend)->make();
  if (interrupted(state.options)) {
    run.status = CaseStatus::interrupted;
    run.reason = "not run: the sweep was interrupted";
  } else if (state.lost_context) {
    run.status = CaseStatus::failed;
    run.reason = "not run: the CUDA context was lost earlier (" + *state.lost_context + ")";
  } else if (auto why = backend->check_device(state.device)) {
    run.status = CaseStatus::skipped;
    run.reason = *why;
  } else if (auto why_not = backend->check_problem(pc.problem)) {
    run.status = CaseStatus::skipped;
    run.reason = *why_not;
  } else {
    try {
      execute_case(*backend, pc, index, state.options, state.collector, state.metrics.get(), state.stream.get(), run);
    } catch (const BackendUnsupportedError& e) {
      run.status = CaseStatus::skipped;
      run.reason = e.what();
    } catch (const std::exception& e) {
      run.status = CaseStatus::failed;
      run.reason = e.what();
      state.lost_context = context_error();
    }
  }
  return run;
}

// Drains the case's records after a device sync (so GPU timestamps are final), writes them to
// the trace and builds the case's summary. Records lost for lack of CUPTI buffers make the
// case's counts wrong, so the case is marked failed with the count.
CaseSummary record_case(SweepState& state, CaseOutcome run, int index) {
  trace::ActivityBatch batch;
  try {
    if (!state.lost_context) cudaDeviceSynchronize();
    batch = state.collector.drain();
    trace::annotate_occupancy(batch, {state.device});
    tag_annotations(batch, index);
    attach_metrics(state, batch, run, index);
    std::vector<trace::Annotation> on_gpu = trace::project_annotations_to_gpu(batch);
    batch.annotations.insert(batch.annotations.end(), on_gpu.begin(), on_gpu.end());
    state.writer.write(batch);
  } catch (const std::exception& e) {
    run.status = CaseStatus::failed;
    run.reason = std::string("recording the case failed: ") + e.what();
  }
  const trace::CaptureHealth health = state.collector.health();
  const std::uint64_t dropped = health.dropped_records + health.buffers_declined;
  if (dropped > state.dropped_so_far && run.status == CaseStatus::ok) {
    run.status = CaseStatus::failed;
    run.reason = fmt::format("{} activity records were dropped (CUPTI buffers exhausted): the counts are incomplete",
                             dropped - state.dropped_so_far);
  }
  state.dropped_so_far = dropped;

  CaseSummary cs = summarize_case(run.measured, batch);
  cs.device = state.options.device;
  cs.status = run.status;
  cs.reason = run.reason;
  add_findings(cs);
  add_surprises(cs, state.options.config.expect);
  return cs;
}

CaseSummary run_and_record_case(SweepState& state, const PlannedCase& pc, int index) {
  return record_case(state, attempt_case(state, pc, index), index);
}

nlohmann::json trace_metadata(const RunOptions& o, const RunSummary& summary) {
  nlohmann::json metadata = {{"tool", "attnprof"},
                             {"version", summary.tool_version},
                             {"command", "run"},
                             {"config_source", summary.config_source},
                             {"config", o.config.document},
                             {"versions",
                              {{"driver", summary.driver_version},
                               {"cuda_runtime", summary.cuda_runtime_version},
                               {"cupti", summary.cupti_version},
                               {"cudnn", summary.cudnn_version}}},
                             {"capture",
                              {{"records", summary.capture.records},
                               {"dropped_records", summary.capture.dropped_records},
                               {"buffers_declined", summary.capture.buffers_declined},
                               {"invalid_timestamps", summary.capture.invalid_timestamps}}},
                             {"summary", summary}};
  if (o.worker) metadata["worker"] = {{"device", o.device}, {"cases", o.worker_cases}};
  return metadata;
}

// The indices of the planned sweep this process runs: all of them, or a worker's share.
std::vector<std::size_t> cases_to_run(const RunOptions& o, std::size_t planned) {
  std::vector<std::size_t> indices;
  if (!o.worker) {
    for (std::size_t i = 0; i < planned; ++i) indices.push_back(i);
    return indices;
  }
  for (int i : o.worker_cases) {
    if (i < 0 || static_cast<std::size_t>(i) >= planned)
      throw UsageError(fmt::format("worker case {} is not in the sweep's {} cases", i, planned));
    indices.push_back(static_cast<std::size_t>(i));
  }
  return indices;
}

}  // namespace

std::vector<PlannedCase> plan_cases(const Config& config, const std::vector<std::string>& backends) {
  std::vector<PlannedCase> cases;
  for (const std::string& backend : backends)
    for (const ShapeSpec& shape : config.shapes)
      for (DType dtype : config.dtypes)
        for (bool causal : config.causal) {
          PlannedCase c;
          c.backend = backend;
          c.problem.shape = shape.shape;
          c.problem.dtype = dtype;
          c.problem.causal = causal;
          c.problem.has_bias = shape.bias;
          c.label = case_label(backend, c.problem);
          cases.push_back(std::move(c));
        }
  return cases;
}

RunOutcome run_sweep(const RunOptions& o) {
  require_devices();
  CUDA_CHECK(cudaSetDevice(o.device));
  const DeviceProperties device = query_device_properties(o.device);
  const SoftwareVersions versions = query_software_versions();
  ActivityCollector collector(o.collector);

  RunOutcome outcome;
  RunSummary& summary = outcome.summary;
  summary.tool_version = kToolVersion;
  summary.config_name = o.config.name;
  summary.config_source = o.config.source;
  summary.created_at = utc_now_iso8601();
  summary.device = device;
  summary.driver_version = versions.driver_text.empty() ? cuda_version_text(versions.driver) : versions.driver_text;
  summary.cuda_runtime_version = cuda_version_text(versions.runtime);
  summary.cupti_version = ActivityCollector::cupti_version_text();
  summary.cudnn_version = cudnn_runtime_version();

  const std::vector<PlannedCase> cases = plan_cases(o.config, o.backends);
  outcome.trace_path = o.out_dir / "trace.json";
  outcome.summary_path = o.out_dir / "summary.json";

  trace::TraceHeader header;
  header.base_time_ns = ActivityCollector::now_ns();
  header.devices = {device};
  header.host_process = static_cast<std::uint32_t>(getpid());
  header.host_process_name = o.worker ? fmt::format("attnprof run (pid {}, GPU {})", getpid(), o.device)
                                      : fmt::format("attnprof run (pid {})", getpid());
  const std::vector<std::size_t> to_run = cases_to_run(o, cases.size());
  trace::ChromeTraceWriter writer(outcome.trace_path, header);
  for (const PlannedCase& c : cases) writer.add_case({c.label, c.backend});

  SweepState state{o, device, collector, writer};
  if (!o.metrics.empty()) start_metrics(state);
  std::FILE* notes = o.progress != nullptr ? o.progress : stderr;
  auto print_notes = [&] {
    for (const std::string& note : state.notes) std::fprintf(notes, "%s\n", note.c_str());
    state.notes.clear();
  };
  print_notes();
  const int width = static_cast<int>(std::to_string(to_run.size()).size());
  for (std::size_t n = 0; n < to_run.size(); ++n) {
    const std::size_t i = to_run[n];
    const PlannedCase& pc = cases[i];
    // A worker shares the terminal with the other GPUs' workers: its lines go out whole.
    const std::string start = fmt::format("{}[{:>{}}/{}] {} ... ", o.worker ? fmt::format("[GPU {}] ", o.device) : "",
                                          n + 1, width, to_run.size(), pc.label);
    if (o.progress != nullptr && !o.worker) {
      std::fputs(start.c_str(), o.progress);
      std::fflush(o.progress);
    }
    CaseSummary cs = run_and_record_case(state, pc, static_cast<int>(i));
    if (o.progress != nullptr) {
      std::fprintf(o.progress, "%s%s\n", o.worker ? start.c_str() : "", progress_result(cs).c_str());
      std::fflush(o.progress);
    }
    print_notes();
    summary.cases.push_back(std::move(cs));
  }

  summary.interrupted = interrupted(o);
  summary.capture = collector.health();
  nlohmann::json metadata = trace_metadata(o, summary);
  if (!o.metrics.empty()) metadata["metrics"] = state.metrics_info;
  writer.finish(metadata);
  write_json_atomically(outcome.summary_path.string(), nlohmann::json(summary));

  bool all_ok = !summary.interrupted;
  for (const CaseSummary& c : summary.cases)
    all_ok = all_ok && (c.status == CaseStatus::ok || c.status == CaseStatus::skipped);
  outcome.exit_code = all_ok ? kExitOk : kExitPartialFailure;
  return outcome;
}

}  // namespace attnprof
