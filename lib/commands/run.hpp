// `attnprof run`: the config's cases on one GPU, or shared out over several (run_devices.hpp),
// written as trace.json and summary.json, printed as a table.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "collector/collector_options.hpp"
#include "config/config.hpp"
#include "summary/render.hpp"
#include "summary/summary.hpp"
#include "trace/trace_format.hpp"

namespace attnprof {

// The command line of `attnprof run`.
struct RunRequest {
  std::string config_path;         // empty: the embedded configs/default.json
  std::string shape;               // --shape: one shape (config's one-line form) instead of the config's
  std::string out_dir;             // empty: traces/<config>-<UTC time>
  std::vector<std::string> backends;
  std::vector<std::string> passes;  // --passes forward,backward: instead of the config's "passes"
  std::string format{to_string(OutputFormat::table)};
  bool wide = false;
  std::vector<std::string> findings;  // --findings: all, default, top N (summary/finding_groups.hpp)
  std::string trace_format;        // empty: the config's
  std::string html_path;           // also write the HTML report here
  std::vector<std::string> metrics;
  std::optional<int> device;       // --device N: one GPU
  std::string devices;             // --devices all|0,1,...: the cases shared out, one worker process per GPU
  bool isolate = false;            // --isolate: a worker process even for one GPU
  std::vector<int> worker_cases;   // hidden --worker-cases: this process is one GPU's worker of --devices
  bool worker = false;
  std::optional<int> iterations;
  std::optional<int> warmup;
  bool dry_run = false;
  bool quiet = false;
  std::size_t buffer_bytes = 8u << 20;
  std::size_t max_buffers = 256;
};

int run_command(const RunRequest& request, const std::atomic<bool>* interrupted);

// One GPU's run, whole (and each worker of `run --devices`): the sweep, its trace and summary.
struct RunOptions {
  Config config;
  std::vector<std::string> backends;  // variant names, already expanded and validated
  std::filesystem::path out_dir;      // trace.json and summary.json go here
  int device = 0;
  // A worker of `run --devices`: runs only these indices of the planned sweep (the other workers
  // run the rest), keeps their indices in the trace so the traces merge into one, prints each
  // progress line whole with "[GPU N]" before it.
  std::vector<int> worker_cases;
  bool worker = false;
  CollectorOptions collector;
  std::vector<std::string> metrics;   // range-profiler metric groups ("occupancy", ...)
  trace::TraceFormat trace_format = trace::TraceFormat::json;
  std::FILE* progress = stderr;       // progress lines; nullptr for none
  const std::atomic<bool>* interrupted = nullptr;
};

struct RunOutcome {
  RunSummary summary;
  std::filesystem::path trace_path;
  std::filesystem::path summary_path;
  int exit_code = 0;
};

// Throws NoUsableGpuError before writing anything when there is no device.
RunOutcome run_sweep(const RunOptions& options);

}  // namespace attnprof
