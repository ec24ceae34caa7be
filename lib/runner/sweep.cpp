#include "runner/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/backend.hpp"
#include "backends/cudnn_info.hpp"
#include "collector/activity_collector.hpp"
#include "collector/nvtx_range.hpp"
#include "core/errors.hpp"
#include "core/host_memory.hpp"
#include "core/utc_time.hpp"
#include "core/version.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "metrics/kernel_metrics.hpp"
#include "metrics/range_profiler.hpp"
#include "reference/gradients.hpp"
#include "reference/verification.hpp"
#include "runner/device_case.hpp"
#include "summary/analysis.hpp"
#include "sweep/buffer_roles.hpp"

namespace attnprof {

// What stays the same across the cases of one sweep.
struct Sweep::State {
  SweepSettings settings;
  DeviceProperties device;
  SoftwareVersions versions;
  ActivityCollector collector;
  CudaStream stream{};
  std::map<std::string, std::unique_ptr<AttentionBackend>> backends{};  // one per variant: plan caches live on
  std::optional<std::string> lost_context{};  // set once a sticky CUDA error makes the rest unrunnable
  std::uint64_t dropped_so_far = 0;
  std::unique_ptr<KernelMetricsProfiler> metrics{};  // --metrics; reset once counters prove unavailable
  nlohmann::json metrics_info{};                     // what --metrics measured, for the trace's provenance
  std::vector<std::string> notes{};
  MemoryLedger memory{};  // device memory the cases so far left allocated
  std::size_t collector_notes_taken = 0;

  State(SweepSettings s, DeviceProperties d, SoftwareVersions v)
      : settings(std::move(s)), device(std::move(d)), versions(std::move(v)), collector(settings.collector) {}
};

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool is_interrupted(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

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

// A case's reason with one more cause after it: the first failure stays the first thing said.
std::string join_reasons(const std::string& reason, const std::string& more) {
  return reason.empty() ? more : reason + "; " + more;
}

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

// Inputs and outputs must fit before anything is allocated; a shape that cannot fit fails with
// the sizes, not with an allocation error deep inside a backend.
void require_device_memory(const AttentionProblem& p) {
  const double io_bytes = DeviceCase::device_bytes(p);
  std::size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (io_bytes > static_cast<double>(free_bytes))
    throw std::runtime_error(fmt::format("{} need {:.1f} GiB of device memory; {:.1f} GiB of {:.1f} GiB are free",
                                         p.is_backward() ? "q, k, v, o, dO, dQ, dK and dV" : "q, k, v and o",
                                         io_bytes / (1 << 30), static_cast<double>(free_bytes) / (1 << 30),
                                         static_cast<double>(total_bytes) / (1 << 30)));
}

// The host side of a case is its float64 check (the inputs live on the GPU only); a case whose
// check cannot fit in the memory available now is skipped before anything is allocated.
std::optional<std::string> host_memory_shortage(const AttentionProblem& p, bool verify) {
  if (!verify) return std::nullopt;
  const std::optional<std::uint64_t> available = available_host_memory_bytes();
  const std::uint64_t needed = p.is_backward() ? gradient_verification_host_bytes(p) : verification_host_bytes(p);
  if (!available || needed <= *available) return std::nullopt;
  return fmt::format("verifying it needs {:.1f} GiB of host memory; {:.1f} GiB are available",
                     static_cast<double>(needed) / (1 << 30), static_cast<double>(*available) / (1 << 30));
}

// Waits for the work queued on `stream` while watching for an interrupt, polling with a growing
// pause (50 us up to 10 ms), so a signal is seen within 10 ms however long the work takes.
// Returns false when interrupted first: the queued work still runs; the case's drain waits for it.
bool wait_for_stream(cudaStream_t stream, const std::atomic<bool>* interrupted) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) CUDA_CHECK(status);
    if (is_interrupted(interrupted)) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10'000));
  }
}

// How many timed iterations may be queued ahead of the GPU: enough to hide launch latency, few
// enough that an interrupt waits at most ~0.25 s of queued work. From one iteration's GPU time.
int iterations_in_flight(double iteration_ms, int iterations) {
  if (iteration_ms <= 0) return 1;
  return std::clamp(static_cast<int>(250.0 / iteration_ms), 1, std::max(1, iterations));
}

struct CaseOutcome {
  CaseStatus status = CaseStatus::ok;
  std::string reason;
  CaseMeasurements measured;
  std::optional<MeasuredRanges> metrics;  // --metrics: the replayed forward's ranges
  std::string metrics_unavailable;        // why the range profiler could not measure
};

void announce(const SweepSettings& o, const char* step) {
  if (o.on_step) o.on_step(step);
}

void mark_interrupted(CaseOutcome& out, const std::string& where) {
  out.status = CaseStatus::interrupted;
  out.reason = "interrupted " + where;
}

// The verification's run-to-run check of a backward: the gradients the verified run left are kept,
// poisoned, and the backward runs once more on the same inputs; dQ, dK and dV are then compared
// bitwise. Atomic accumulation shows here as differing bits. nullopt when interrupted.
std::optional<GradientRepeatability> check_run_to_run(AttentionBackend& backend, DeviceCase& device,
                                                      cudaStream_t stream, const std::atomic<bool>* interrupted) {
  if (!device.keep_gradients(stream)) {
    GradientRepeatability not_checked;
    not_checked.note = "not checked: a copy of dQ, dK and dV does not fit in free device memory";
    return not_checked;
  }
  device.poison_gradients(stream);
  backend.run_backward(device.problem(), device.backward_buffers(), stream);
  if (!wait_for_stream(stream, interrupted)) return std::nullopt;
  return device.compare_with_kept(stream);
}

// Everything that happens on the GPU for one case. Throws on CUDA errors; the caller records
// them. An interrupt is honoured between steps and inside every wait: the case ends marked.
void execute_case(AttentionBackend& backend, const PlannedCase& pc, int index, const SweepSettings& o,
                  ActivityCollector& collector, KernelMetricsProfiler* metrics, cudaStream_t stream,
                  CaseOutcome& out) {
  const Config& config = o.config;
  CaseMeasurements& m = out.measured;
  NvtxRange case_range("case " + pc.label);
  const bool backward = pc.problem.is_backward();
  // One timed unit of the case: the forward, or the backward alone (its forward ran in set-up).
  auto run_pass = [&](DeviceCase& device) {
    if (backward) backend.run_backward(pc.problem, device.backward_buffers(), stream);
    else backend.run(pc.problem, device.buffers(), stream);
  };

  announce(o, "set-up");
  require_device_memory(pc.problem);
  std::unique_ptr<DeviceCase> device_case;
  {
    ScopedTag tag(collector, {index, trace::Phase::none, -1});
    device_case = std::make_unique<DeviceCase>(pc.problem, pc.seed, stream);
  }
  if (is_interrupted(o.interrupted)) return mark_interrupted(out, "during set-up");

  announce(o, "plan");
  for (int attempt = 0; attempt < 2; ++attempt) {
    ScopedTag tag(collector, {index, trace::Phase::plan, attempt});
    NvtxRange range(attempt == 0 ? "plan (cold)" : "plan (cached)");
    const auto start = Clock::now();
    backend.prepare(pc.problem, stream);
    const bool done = wait_for_stream(stream, o.interrupted);
    (attempt == 0 ? m.plan_cold_ms : m.plan_warm_ms) = ms_since(start);
    if (!done || is_interrupted(o.interrupted)) return mark_interrupted(out, "while building the plan");
  }

  if (backward) {
    // The forward once, untimed, for the O and logsumexp every backward below reads; outside
    // every counted phase, like the set-up.
    ScopedTag tag(collector, {index, trace::Phase::none, -1});
    NvtxRange range("forward (for the backward)");
    run_forward_for_backward(backend, *device_case, stream);
    if (!wait_for_stream(stream, o.interrupted)) return mark_interrupted(out, "during the forward before the backward");
  }

  if (config.verify) {
    announce(o, "verify");
    ScopedTag tag(collector, {index, trace::Phase::verify, -1});
    NvtxRange range("verify");
    if (backward) device_case->poison_gradients(stream);
    else device_case->poison_outputs(stream);
    run_pass(*device_case);
    if (!wait_for_stream(stream, o.interrupted)) return mark_interrupted(out, "during verification");
    Verification v;
    if (backward) {
      const GradientOutputs rows = device_case->read_gradient_rows(gradient_rows_to_check(pc.problem.shape), stream);
      v = verify_gradients(pc.problem, device_case->seed(), rows, {.interrupted = o.interrupted});
    } else {
      const OutputRows rows = device_case->read_rows(rows_to_check(pc.problem.shape), stream);
      v = verify_attention(pc.problem, device_case->seed(), rows, {.interrupted = o.interrupted});
    }
    if (v.interrupted) return mark_interrupted(out, "during verification (the float64 reference)");
    m.verified = true;
    m.verify_passed = v.passed;
    m.relative_error = v.relative_error;
    m.error_bound = v.bound;
    m.rows_verified = v.rows_checked;
    if (backward) {
      m.repeatability = check_run_to_run(backend, *device_case, stream, o.interrupted);
      if (!m.repeatability) return mark_interrupted(out, "during verification (the run-to-run check)");
    }
    if (!v.passed) {
      out.status = CaseStatus::failed;
      out.reason = "wrong result: " + v.detail;
    }
  }

  // One pass at a time, each awaited: the last one's GPU time sizes the timed queue.
  double iteration_ms = 0;
  if (config.warmup > 0) {
    announce(o, "warm-up");
    ScopedTag tag(collector, {index, trace::Phase::warmup, -1});
    NvtxRange range("warmup");
    CudaEvent start, stop;
    for (int i = 0; i < config.warmup; ++i) {
      CUDA_CHECK(cudaEventRecord(start.get(), stream));
      run_pass(*device_case);
      CUDA_CHECK(cudaEventRecord(stop.get(), stream));
      if (!wait_for_stream(stream, o.interrupted))
        return mark_interrupted(out, fmt::format("during warm-up ({} of {})", i, config.warmup));
      iteration_ms = elapsed_ms(start, stop);
    }
  }

  announce(o, "timing");
  std::vector<CudaEvent> starts(static_cast<std::size_t>(config.iterations));
  std::vector<CudaEvent> stops(static_cast<std::size_t>(config.iterations));
  int in_flight = iterations_in_flight(iteration_ms, config.iterations);
  double host_us = 0;
  int done = 0;
  bool interrupted = false;
  for (; done < config.iterations; ++done) {
    // Keep at most `in_flight` iterations queued, so an interrupt never waits for many.
    if (done >= in_flight) {
      const cudaEvent_t oldest = stops[static_cast<std::size_t>(done - in_flight)].get();
      for (cudaError_t status = cudaEventQuery(oldest); status != cudaSuccess && !is_interrupted(o.interrupted);
           status = cudaEventQuery(oldest)) {
        if (status != cudaErrorNotReady)  // a fault in the queued work, named where it shows
          throw_cuda_error(status, "cudaEventQuery(an earlier iteration's stop event)", __FILE__, __LINE__);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    if (is_interrupted(o.interrupted)) {
      interrupted = true;
      break;
    }
    const auto host_start = Clock::now();
    ScopedTag tag(collector, {index, trace::Phase::iteration, done});
    NvtxRange range(fmt::format("iter {}", done));
    CUDA_CHECK(cudaEventRecord(starts[done].get(), stream));
    run_pass(*device_case);
    CUDA_CHECK(cudaEventRecord(stops[done].get(), stream));
    host_us += ms_since(host_start) * 1000.0;
    // Without a warm-up, the first iteration's time sizes the queue.
    if (done == 0 && iteration_ms <= 0 && config.iterations > 1) {
      CUDA_CHECK(cudaEventSynchronize(stops[0].get()));
      in_flight = iterations_in_flight(elapsed_ms(starts[0], stops[0]), config.iterations);
    }
  }
  wait_for_stream(stream, nullptr);
  m.iterations = done;
  for (int i = 0; i < done; ++i) m.iteration_us.push_back(elapsed_ms(starts[i], stops[i]) * 1000.0);
  m.host_enqueue_us_per_iter = done > 0 ? host_us / done : 0;
  if (interrupted)
    return mark_interrupted(out, fmt::format("after {} of {} timed iterations", done, config.iterations));

  // --metrics: one more forward after the timed ones, its kernels replayed by the range profiler;
  // tagged `metrics`, so it is in the trace but in no timing and no per-iteration count. The
  // replay of one kernel cannot be interrupted; an interrupt before it skips it.
  if (metrics != nullptr && !is_interrupted(o.interrupted)) {
    announce(o, "metrics");
    ScopedTag tag(collector, {index, trace::Phase::metrics, -1});
    NvtxRange range("metrics (replayed)");
    try {
      out.metrics = metrics->measure([&] { run_pass(*device_case); });
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

// --metrics: one profiler for the whole run. Without counters the run says why once and goes on.
void start_metrics(Sweep::State& state) {
  const SweepSettings& o = state.settings;
  state.metrics_info = {{"groups", o.metrics}};
  try {
    state.metrics = std::make_unique<KernelMetricsProfiler>(o.device, parse_metric_groups(o.metrics));
    state.metrics_info["chip"] = state.metrics->chip();
    state.metrics_info["metrics"] = state.metrics->metric_names();
    state.metrics_info["passes"] = state.metrics->passes();
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
void attach_metrics(Sweep::State& state, trace::ActivityBatch& batch, const CaseOutcome& run, int index) {
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
CaseOutcome attempt_case(Sweep::State& state, const PlannedCase& pc, int index) {
  CaseOutcome run;
  run.measured.label = pc.label;
  run.measured.backend = pc.backend;
  run.measured.problem = pc.problem;
  auto& backend = state.backends[pc.backend];
  if (!backend) backend = find_backend(pc.backend)->make();
  if (is_interrupted(state.settings.interrupted)) {
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
  } else if (auto out_of_scope = backward_out_of_scope(pc.problem)) {
    run.status = CaseStatus::skipped;
    run.reason = *out_of_scope;
  } else if (auto no_backward = pc.problem.is_backward() ? backend->check_backward(pc.problem) : std::nullopt) {
    run.status = CaseStatus::skipped;
    run.reason = *no_backward;
  } else if (auto short_of = host_memory_shortage(pc.problem, state.settings.config.verify)) {
    run.status = CaseStatus::skipped;
    run.reason = *short_of;
  } else {
    try {
      execute_case(*backend, pc, index, state.settings, state.collector, state.metrics.get(), state.stream.get(), run);
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
CaseSummary record_case(Sweep::State& state, trace::ChromeTraceWriter& writer, CaseOutcome run, int index) {
  trace::ActivityBatch batch;
  try {
    if (!state.lost_context) {
      // Work an interrupted or failed case left queued may fault only now: the fault is the case's.
      const cudaError_t status = cudaDeviceSynchronize();
      if (status != cudaSuccess) {
        run.status = CaseStatus::failed;
        run.reason = join_reasons(run.reason, fmt::format("its queued GPU work failed: {} ({})",
                                                          cudaGetErrorString(status), cudaGetErrorName(status)));
        state.lost_context = context_error();
      }
    }
    batch = state.collector.drain();
    tag_annotations(batch, index);
    attach_metrics(state, batch, run, index);
    // What the case's buffers hold (the roles its backend named), in the trace too.
    const std::vector<BufferRole> roles = take_buffer_roles();
    assign_buffer_roles(batch, roles);
    prepare_batch(batch, {state.device});
    writer.write(batch);
    // For the case's summary only: what earlier cases left allocated, which it holds too, and the
    // roles of their releases.
    state.memory.carry_into(batch, index);
    assign_buffer_roles(batch, roles);
  } catch (const std::exception& e) {
    run.status = CaseStatus::failed;
    run.reason = join_reasons(run.reason, std::string("recording the case failed: ") + e.what());
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
  state.memory.record(batch);
  cs.device = state.settings.device;
  cs.status = run.status;
  cs.reason = run.reason;
  analyze_case(cs, &state.settings.config.expect);
  return cs;
}

}  // namespace

Sweep::Sweep(SweepSettings settings) {
  require_devices();
  CUDA_CHECK(cudaSetDevice(settings.device));
  DeviceProperties device = query_device_properties(settings.device);
  state_ = std::make_unique<State>(std::move(settings), std::move(device), query_software_versions());
  if (!state_->settings.metrics.empty()) start_metrics(*state_);
}

Sweep::~Sweep() = default;

const DeviceProperties& Sweep::device() const { return state_->device; }

RunSummary Sweep::new_summary() const {
  const State& s = *state_;
  RunSummary summary;
  summary.tool_version = kToolVersion;
  summary.config_name = s.settings.config.name;
  summary.config_source = s.settings.config.source;
  summary.created_at = utc_now_iso8601();
  summary.device = s.device;
  summary.driver_version = s.versions.driver_text.empty() ? cuda_version_text(s.versions.driver) : s.versions.driver_text;
  summary.cuda_runtime_version = cuda_version_text(s.versions.runtime);
  summary.cupti_version = ActivityCollector::cupti_version_text();
  summary.cudnn_version = cudnn_runtime_version();
  return summary;
}

trace::TraceHeader Sweep::trace_header(const std::string& process_name) const {
  trace::TraceHeader header;
  header.base_time_ns = ActivityCollector::now_ns();
  header.devices = {state_->device};
  header.host_process = static_cast<std::uint32_t>(getpid());
  header.host_process_name = process_name;
  return header;
}

CaseSummary Sweep::run_case(const PlannedCase& planned, int index, trace::ChromeTraceWriter& writer) {
  return record_case(*state_, writer, attempt_case(*state_, planned, index), index);
}

std::vector<std::string> Sweep::take_notes() {
  // The collector's (memory records unavailable, records of kinds it did not know), once each.
  const std::vector<std::string> collector_notes = state_->collector.notes();
  for (std::size_t i = state_->collector_notes_taken; i < collector_notes.size(); ++i)
    state_->notes.push_back(collector_notes[i]);
  state_->collector_notes_taken = collector_notes.size();
  return std::exchange(state_->notes, {});
}

nlohmann::json Sweep::metrics_info() const { return state_->metrics_info; }

trace::CaptureHealth Sweep::capture() const { return state_->collector.health(); }

bool Sweep::interrupted() const { return is_interrupted(state_->settings.interrupted); }

}  // namespace attnprof
