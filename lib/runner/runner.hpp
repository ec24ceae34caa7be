// The sweep: every case (backend x shape x dtype x causal) gets seeded inputs, is checked against
// the float64 reference, warmed up and timed with CUDA events while the collector records it;
// after each case its records go to the trace and its summary is built, so a failure later in
// the sweep never loses what already ran.
#pragma once

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "collector/activity_collector.hpp"
#include "config/config.hpp"
#include "sweep/plan.hpp"
#include "summary/summary.hpp"

namespace attnprof {

struct RunOptions {
  Config config;
  std::vector<std::string> backends;       // variant names, already expanded and validated
  std::filesystem::path out_dir;           // trace.json and summary.json go here
  int device = 0;
  // A worker of `run --devices`: runs only these indices of the planned sweep (the other
  // workers run the rest), keeps their indices in the trace so the traces merge into one, prints
  // each progress line whole with "[GPU N]" before it. Empty: every case, as a one-GPU run.
  std::vector<int> worker_cases;
  bool worker = false;
  CollectorOptions collector;
  std::vector<std::string> metrics;        // range-profiler metric groups ("occupancy", ...)
  std::FILE* progress = stderr;            // progress lines; nullptr for none
  const std::atomic<bool>* interrupted = nullptr;  // set by a signal handler: stop after the current step
};

// The cases a config asks for, in sweep order: backend, then shape, dtype, causal.
std::vector<PlannedCase> plan_cases(const Config& config, const std::vector<std::string>& backends);

struct RunOutcome {
  RunSummary summary;
  std::filesystem::path trace_path;
  std::filesystem::path summary_path;
  int exit_code = 0;  // kExitOk, or kExitPartialFailure when a case failed or the run was interrupted
};

// Runs the sweep and writes trace.json and summary.json. Throws NoUsableGpuError before
// writing anything when there is no device.
RunOutcome run_sweep(const RunOptions& options);

}  // namespace attnprof
