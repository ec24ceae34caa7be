#include "runner/device_workers.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "process/scoped_signal_handlers.hpp"
#include "process/spawn.hpp"
#include "trace/trace_merge.hpp"

namespace attnprof {
namespace {

// The workers' pids, for the signal handler (async-signal-safe: a fixed array, plain stores).
constexpr std::size_t kMaxWorkers = 1024;
std::array<volatile sig_atomic_t, kMaxWorkers> g_workers{};
volatile sig_atomic_t g_worker_count = 0;

// Signals sent to attnprof itself (kill, timeout, a CI runner) go on to every worker; a Ctrl-C
// on the terminal reached the whole process group already (the kernel marks it SI_KERNEL).
extern "C" void forward_to_workers(int sig, siginfo_t* info, void*) {
  if (info != nullptr && info->si_code > 0) return;
  for (sig_atomic_t i = 0; i < g_worker_count; ++i)
    if (g_workers[static_cast<std::size_t>(i)] > 0) kill(static_cast<pid_t>(g_workers[static_cast<std::size_t>(i)]), sig);
}

// The workers are forgotten before the previous handlers come back (members go last).
class WorkerSignalForwarding {
 public:
  ~WorkerSignalForwarding() { g_worker_count = 0; }

 private:
  ScopedSignalHandlers handlers_{forward_to_workers};
};

void say(std::FILE* progress, const std::string& text) {
  if (progress == nullptr) return;
  std::fprintf(progress, "attnprof run: %s\n", text.c_str());
  std::fflush(progress);
}

pid_t spawn_worker(const std::vector<std::string>& command, std::string& error) {
  pid_t pid = 0;
  const int status = spawn_with_default_signals(command, nullptr, pid);  // our environment
  if (status != 0) {
    error = std::strerror(status);
    return 0;
  }
  return pid;
}

// Waits for every started worker, polling so that no signal handler needs to interrupt a wait.
void wait_for_workers(std::vector<DeviceWorker>& workers) {
  std::size_t running = 0;
  for (const DeviceWorker& w : workers) running += w.pid > 0 ? 1 : 0;
  while (running > 0) {
    for (DeviceWorker& w : workers) {
      if (w.pid <= 0) continue;
      int status = 0;
      const pid_t done = waitpid(w.pid, &status, WNOHANG);
      if (done == 0) continue;
      if (done < 0 && errno == EINTR) continue;
      if (done < 0) {
        w.exit_code = 127;  // not ours to wait for any more: counted as lost
      } else if (WIFEXITED(status)) {
        w.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        w.signal = WTERMSIG(status);
        w.exit_code = 128 + *w.signal;
      }
      for (sig_atomic_t i = 0; i < g_worker_count; ++i)
        if (g_workers[static_cast<std::size_t>(i)] == w.pid) g_workers[static_cast<std::size_t>(i)] = 0;
      w.pid = -w.pid;  // done; keep the number for the record
      --running;
    }
    if (running > 0) {
      const timespec pause{0, 20'000'000};
      nanosleep(&pause, nullptr);
    }
  }
  for (DeviceWorker& w : workers) w.pid = w.pid < 0 ? -w.pid : w.pid;
}

std::string how_it_ended(const DeviceWorker& w) {
  if (w.signal) return fmt::format("was ended by signal {} ({})", *w.signal, strsignal(*w.signal));
  return fmt::format("exited with code {}", w.exit_code);
}

CaseSummary lost_case(const PlannedCase& pc, int device, const std::string& reason) {
  CaseSummary c;
  c.label = pc.label;
  c.backend = pc.backend;
  c.problem = pc.problem;
  c.device = device;
  c.status = CaseStatus::failed;
  c.reason = reason;
  return c;
}

}  // namespace

std::vector<DeviceShare> share_out(const std::vector<PlannedCase>& cases, const std::vector<int>& devices,
                                   const std::filesystem::path& out_dir) {
  const std::vector<std::vector<int>> shards = shard_cases(cases, devices.size());
  std::vector<DeviceShare> shares;
  for (std::size_t i = 0; i < devices.size() && i < shards.size(); ++i) {
    if (shards[i].empty()) continue;
    shares.push_back({devices[i], shards[i], out_dir / fmt::format("gpu{}", devices[i])});
  }
  return shares;
}

DeviceRunOutcome run_on_devices(const DeviceRunOptions& o) {
  if (o.devices.empty()) throw UsageError("run: no device to run on");
  if (o.devices.size() > kMaxWorkers) throw UsageError(fmt::format("run: at most {} devices", kMaxWorkers));
  DeviceRunOutcome outcome;
  outcome.trace_path = o.out_dir / "trace.json";
  outcome.summary_path = o.out_dir / "summary.json";
  std::filesystem::create_directories(o.out_dir);

  for (DeviceShare& share : share_out(o.cases, o.devices, o.out_dir)) {
    std::filesystem::remove_all(share.out_dir);  // a worker's stale outputs would be taken for this run's
    DeviceWorker w;
    w.share = std::move(share);
    outcome.workers.push_back(std::move(w));
  }
  std::vector<std::string> plan;
  for (const DeviceWorker& w : outcome.workers) plan.push_back(fmt::format("GPU {}: {}", w.share.device, w.share.cases.size()));
  say(o.progress, fmt::format("{} cases over {} GPUs, one worker process each ({} cases)", o.cases.size(),
                              outcome.workers.size(), fmt::join(plan, ", ")));

  {
    WorkerSignalForwarding forwarding;  // before the first spawn, so no signal falls between
    for (DeviceWorker& w : outcome.workers) {
      std::string error;
      w.pid = spawn_worker(o.worker_command(w.share), error);
      if (w.pid <= 0) {
        w.exit_code = 127;
        outcome.notes.push_back(fmt::format("the worker for GPU {} could not be started: {}", w.share.device, error));
        continue;
      }
      g_workers[static_cast<std::size_t>(g_worker_count)] = w.pid;
      g_worker_count = g_worker_count + 1;
    }
    wait_for_workers(outcome.workers);
  }

  // The workers' summaries, case by case back into sweep order.
  std::map<int, CaseSummary> by_index;
  std::vector<RunSummary> loaded;
  std::vector<trace::MergeInput> traces;
  for (DeviceWorker& w : outcome.workers) {
    const std::filesystem::path summary_path = w.share.out_dir / "summary.json";
    const std::filesystem::path trace_path = w.share.out_dir / "trace.json";
    std::optional<RunSummary> s;
    if (std::filesystem::exists(summary_path)) {
      try {
        s = load_summary(summary_path.string());
      } catch (const std::exception& e) {
        outcome.notes.push_back(fmt::format("GPU {}: {}", w.share.device, e.what()));
      }
    }
    w.wrote_summary = s.has_value();
    w.wrote_trace = std::filesystem::exists(trace_path);
    if (w.wrote_trace) traces.push_back({trace::read_trace_head(trace_path), "", 0});
    if (s && s->cases.size() != w.share.cases.size()) {
      outcome.notes.push_back(fmt::format("GPU {}: its summary lists {} cases, not the {} it was given", w.share.device,
                                          s->cases.size(), w.share.cases.size()));
      s.reset();
    }
    const std::string lost = fmt::format("the worker for GPU {} {} before it recorded this case", w.share.device,
                                         how_it_ended(w));
    for (std::size_t k = 0; k < w.share.cases.size(); ++k) {
      const int index = w.share.cases[k];
      by_index[index] = s ? s->cases[k] : lost_case(o.cases[static_cast<std::size_t>(index)], w.share.device, lost);
    }
    if (!s) outcome.notes.push_back(fmt::format("the worker for GPU {} {} without its summary", w.share.device, how_it_ended(w)));
    if (s) loaded.push_back(std::move(*s));
  }

  RunSummary& summary = outcome.summary;
  if (!loaded.empty()) summary = loaded.front();
  // summary.json keeps only part of the device; the trace's deviceProperties hold all of it.
  for (const trace::MergeInput& in : traces)
    for (const DeviceProperties& d : in.head.devices)
      if (d.id == summary.device.id) summary.device = d;
  summary.cases.clear();
  summary.capture = {};
  summary.interrupted = false;
  for (const RunSummary& s : loaded) {
    summary.capture += s.capture;
    summary.interrupted = summary.interrupted || s.interrupted;
  }
  for (std::size_t i = 0; i < o.cases.size(); ++i) {
    auto it = by_index.find(static_cast<int>(i));
    summary.cases.push_back(it != by_index.end() ? it->second
                                                 : lost_case(o.cases[i], o.devices.front(), "no worker was given this case"));
  }

  // One trace: each worker's GPU keeps pid = its ordinal (one worker per GPU), each worker's
  // host process its own pid; every case keeps its index in the sweep.
  trace::MergeOptions merge;
  for (const PlannedCase& c : o.cases) merge.shared_cases.push_back({c.label, c.backend});
  nlohmann::json described = nlohmann::json::array();
  for (const DeviceWorker& w : outcome.workers)
    described.push_back({{"device", w.share.device},
                         {"pid", w.pid},
                         {"cases", w.share.cases},
                         {"exit_code", w.exit_code},
                         {"wrote_summary", w.wrote_summary},
                         {"wrote_trace", w.wrote_trace}});
  bool merged = false;
  try {
    trace::merge_traces(traces, outcome.trace_path, merge, [&](const trace::MergeResult& result) {
      nlohmann::json metadata = nlohmann::json::object();
      for (const trace::MergedInput& in : result.inputs)
        if (in.attnprof.is_object() && in.attnprof.contains("config")) {
          metadata = in.attnprof;  // config, versions, metrics: the same for every worker
          break;
        }
      metadata.erase("worker");
      metadata["tool"] = "attnprof";
      metadata["command"] = "run";
      metadata["devices"] = o.devices;
      metadata["workers"] = described;
      metadata["capture"] = {{"records", summary.capture.records},
                             {"dropped_records", summary.capture.dropped_records},
                             {"buffers_declined", summary.capture.buffers_declined},
                             {"invalid_timestamps", summary.capture.invalid_timestamps}};
      for (const std::string& note : result.notes) outcome.notes.push_back(note);
      if (!outcome.notes.empty()) metadata["notes"] = outcome.notes;
      metadata["summary"] = summary;
      return metadata;
    });
    merged = true;
  } catch (const std::exception& e) {
    outcome.notes.push_back(fmt::format("merging the workers' traces failed: {}", e.what()));
  }
  write_json_atomically(outcome.summary_path.string(), nlohmann::json(summary));

  bool all_ok = !summary.interrupted;
  for (const CaseSummary& c : summary.cases)
    all_ok = all_ok && (c.status == CaseStatus::ok || c.status == CaseStatus::skipped);
  bool workers_ok = true;
  for (const DeviceWorker& w : outcome.workers) workers_ok = workers_ok && w.wrote_summary && w.wrote_trace;
  outcome.exit_code = all_ok && workers_ok ? kExitOk : kExitPartialFailure;

  // Once merged, the per-GPU outputs only repeat the merged ones; a failed worker's stay for a look.
  for (const DeviceWorker& w : outcome.workers) {
    if (merged && w.wrote_summary && w.wrote_trace) std::filesystem::remove_all(w.share.out_dir);
    else if (std::filesystem::exists(w.share.out_dir))
      outcome.notes.push_back(fmt::format("kept {} (the worker for GPU {} {})", w.share.out_dir.string(), w.share.device,
                                          how_it_ended(w)));
  }
  return outcome;
}

}  // namespace attnprof
