// `attnprof run --devices`, the story: the sweep's cases shared out over several GPUs, one worker process
// per GPU. A process, not a thread, per GPU: CUPTI takes one subscriber per process and the
// collector drains everything at once, so per-GPU threads would have to untangle each other's
// records and NVTX ranges; a worker is exactly a one-GPU run of its share (the code path every
// GPU test covers), a sticky CUDA error or a crash costs only its own cases, and its trace
// merges like any other process's (trace/trace_merge.hpp). The workers' traces and summaries
// become one trace.json (a process track per GPU: pid = device ordinal, as in a one-GPU run)
// and one summary.json (cases in sweep order, each with its device).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "process/child_processes.hpp"
#include "summary/summary.hpp"
#include "sweep/plan.hpp"
#include "trace/trace_format.hpp"

namespace attnprof {

// One GPU's share of the sweep.
struct DeviceShare {
  int device = 0;
  std::vector<int> cases;           // indices into the planned sweep, in sweep order
  std::filesystem::path out_dir;    // the worker writes trace.json and summary.json here
};

struct DeviceRunOptions {
  std::vector<PlannedCase> cases;   // the whole sweep, in order
  std::vector<int> devices;         // ordinals, each once
  std::filesystem::path out_dir;    // the merged trace.json and summary.json
  // The worker's command line for a share (app/ knows attnprof's own: `attnprof run ... --device N
  // --worker-cases ...`). Workers inherit the environment and the terminal.
  std::function<std::vector<std::string>(const DeviceShare&)> worker_command;
  std::FILE* progress = stderr;     // nullptr for quiet
  trace::TraceFormat trace_format = trace::TraceFormat::json;  // of the merged trace (workers write json)
};

struct DeviceWorker {
  DeviceShare share;
  pid_t pid = 0;
  ChildExit exit;                   // its exit status, or 128 + the signal that ended it
  bool wrote_summary = false;
  bool wrote_trace = false;
};

struct DeviceRunOutcome {
  RunSummary summary;
  std::filesystem::path trace_path;
  std::filesystem::path summary_path;
  int exit_code = 0;                // kExitOk, or kExitPartialFailure as a one-GPU run decides it
  std::vector<DeviceWorker> workers;
  std::vector<std::string> notes;
};

// The shares: shard_cases over the devices; a device left without cases gets no worker.
std::vector<DeviceShare> share_out(const std::vector<PlannedCase>& cases, const std::vector<int>& devices,
                                   const std::filesystem::path& out_dir);

// Starts one worker per share, waits for all (SIGINT/SIGTERM/SIGHUP sent to attnprof go on to
// them; a Ctrl-C on the terminal reaches them itself), then merges their outputs. A worker that
// ends without its summary fails its cases with the reason; its trace, if it finished one, is
// still merged. The per-GPU directories are removed once merged, kept when a worker failed.
DeviceRunOutcome run_on_devices(const DeviceRunOptions& options);

}  // namespace attnprof
