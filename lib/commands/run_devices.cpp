// The story of `attnprof run --devices`: share the cases out, start one worker process per GPU
// (each a one-GPU `attnprof run` of its share), pass signals on and wait, put the workers'
// summaries back into sweep order (a worker that died fails its cases with the reason), merge
// their traces into one, write the summary, and keep a failed worker's outputs for a look.
#include "commands/run_devices.hpp"

#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "process/spawn.hpp"
#include "summary/analysis.hpp"
#include "summary/provenance.hpp"
#include "trace/trace_merge.hpp"

namespace attnprof {
namespace {

void say(std::FILE* progress, const std::string& text) {
  if (progress == nullptr) return;
  std::fprintf(progress, "attnprof run: %s\n", text.c_str());
  std::fflush(progress);
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

// Starts every worker, then waits for all of them; signals sent to attnprof go on to them.
void start_and_wait(std::vector<DeviceWorker>& workers, const DeviceRunOptions& o, std::vector<std::string>& notes) {
  ChildSignalForwarding forwarding;  // before the first spawn, so no signal falls between
  std::vector<pid_t> started;
  std::vector<DeviceWorker*> running;
  for (DeviceWorker& w : workers) {
    const int error = spawn_with_default_signals(o.worker_command(w.share), nullptr, w.pid);  // our environment
    if (error != 0) {
      w.pid = 0;
      w.exit.exit_code = 127;
      notes.push_back(fmt::format("the worker for GPU {} could not be started: {}", w.share.device, std::strerror(error)));
      continue;
    }
    forwarding.add(w.pid);
    started.push_back(w.pid);
    running.push_back(&w);
  }
  const std::vector<ChildExit> exits = wait_for_children(started, forwarding);
  for (std::size_t i = 0; i < running.size(); ++i) running[i]->exit = exits[i];
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
  if (o.devices.size() > ChildSignalForwarding::kMaxChildren)
    throw UsageError(fmt::format("run: at most {} devices", ChildSignalForwarding::kMaxChildren));
  DeviceRunOutcome outcome;
  outcome.trace_path = o.out_dir / trace::trace_file_name("trace", o.trace_format);
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
  start_and_wait(outcome.workers, o, outcome.notes);

  // The workers' summaries, case by case back into sweep order.
  std::map<int, CaseSummary> by_index;
  std::vector<LabelledSummary> loaded;
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
                                         describe(w.exit));
    for (std::size_t k = 0; k < w.share.cases.size(); ++k) {
      const int index = w.share.cases[k];
      by_index[index] = s ? s->cases[k] : lost_case(o.cases[static_cast<std::size_t>(index)], w.share.device, lost);
    }
    if (!s) outcome.notes.push_back(fmt::format("the worker for GPU {} {} without its summary", w.share.device, describe(w.exit)));
    if (s) loaded.push_back({"", std::move(*s)});
  }

  // One summary: the first worker's header (summary.json keeps part of the device; the trace's
  // deviceProperties hold all of it), every worker's capture, every case in sweep order.
  RunSummary& summary = outcome.summary;
  summary = combine_summaries(loaded);
  for (const trace::MergeInput& in : traces)
    for (const DeviceProperties& d : in.head.devices)
      if (d.id == summary.device.id) summary.device = d;
  summary.cases.clear();
  for (std::size_t i = 0; i < o.cases.size(); ++i) {
    auto it = by_index.find(static_cast<int>(i));
    summary.cases.push_back(it != by_index.end() ? it->second
                                                 : lost_case(o.cases[i], o.devices.front(), "no worker was given this case"));
  }
  analyze_run(summary);  // again on the whole: a forward and its backward may have run on different GPUs

  // One trace: each worker's GPU keeps pid = its ordinal (one worker per GPU), each worker's
  // host process its own pid; every case keeps its index in the sweep.
  trace::MergeOptions merge;
  merge.write.format = o.trace_format;
  for (const PlannedCase& c : o.cases) merge.shared_cases.push_back({c.label, c.backend});
  nlohmann::json described = nlohmann::json::array();
  for (const DeviceWorker& w : outcome.workers)
    described.push_back({{"device", w.share.device},
                         {"pid", w.pid},
                         {"cases", w.share.cases},
                         {"exit_code", w.exit.exit_code},
                         {"wrote_summary", w.wrote_summary},
                         {"wrote_trace", w.wrote_trace}});
  bool merged = false;
  try {
    trace::merge_traces(traces, outcome.trace_path, merge, [&](const trace::MergeResult& result) {
      // The config, versions and metrics are the same for every worker: the first one's say it.
      Provenance provenance;
      for (const trace::MergedInput& in : result.inputs) {
        std::vector<std::string> unread;
        provenance = read_provenance(in.attnprof, unread);
        if (provenance.config.is_object()) break;
      }
      provenance.command = "run";
      provenance.worker.reset();
      provenance.devices = o.devices;
      provenance.workers = described;
      provenance.capture = summary.capture;
      for (const std::string& note : result.notes) outcome.notes.push_back(note);
      provenance.notes = outcome.notes;
      provenance.summary = summary;
      return nlohmann::json(provenance);
    });
    merged = true;
  } catch (const std::exception& e) {
    outcome.notes.push_back(fmt::format("merging the workers' traces failed: {}", e.what()));
  }
  write_json_atomically(outcome.summary_path.string(), nlohmann::json(summary));

  bool workers_wrote_all = true;
  for (const DeviceWorker& w : outcome.workers) workers_wrote_all = workers_wrote_all && w.wrote_summary && w.wrote_trace;
  outcome.exit_code = run_exit_code(summary, workers_wrote_all);

  // Once merged, the per-GPU outputs only repeat the merged ones; a failed worker's stay for a look.
  for (const DeviceWorker& w : outcome.workers) {
    if (merged && w.wrote_summary && w.wrote_trace) std::filesystem::remove_all(w.share.out_dir);
    else if (std::filesystem::exists(w.share.out_dir))
      outcome.notes.push_back(fmt::format("kept {} (the worker for GPU {} {})", w.share.out_dir.string(), w.share.device,
                                          describe(w.exit)));
  }
  return outcome;
}

}  // namespace attnprof
