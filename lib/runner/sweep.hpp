// The sweep engine of `attnprof run`, one GPU: each case gets inputs drawn on the device, is
// checked against the float64 reference, warmed up and timed with CUDA events while the
// collector records it; after each case its records are drained, annotated (occupancy, --metrics
// values), written to the trace and summarized, so a failure later in the sweep never loses what
// already ran. The story around it (config, outputs, progress) is commands/run.cpp's.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collector/collector_options.hpp"
#include "config/config.hpp"
#include "core/device_properties.hpp"
#include "summary/summary.hpp"
#include "sweep/plan.hpp"
#include "trace/chrome_trace_writer.hpp"

namespace attnprof {

struct SweepSettings {
  Config config;                      // warm-up, iterations, verification, seed, expectations
  int device = 0;
  CollectorOptions collector;
  std::vector<std::string> metrics;   // range-profiler metric groups ("occupancy", ...); empty: none
  const std::atomic<bool>* interrupted = nullptr;  // set by a signal handler: stop after the current step
  // Told as each step of a case begins: "set-up", "plan", "verify", "warm-up", "timing", "metrics".
  std::function<void(const char* step)> on_step;
};

class Sweep {
 public:
  // Selects the device and subscribes the collector (one per process). Throws NoUsableGpuError
  // when there is no usable device.
  explicit Sweep(SweepSettings settings);
  ~Sweep();
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  const DeviceProperties& device() const;
  // A run summary with no cases yet: tool, config, device and library versions.
  RunSummary new_summary() const;
  // The trace's header: this process and its GPU, timestamps from now.
  trace::TraceHeader trace_header(const std::string& process_name) const;

  // Runs one case and records it: its records go to `writer`, its summary comes back with its
  // status and reason (never throws for the case's own failures: skipped, failed, interrupted).
  CaseSummary run_case(const PlannedCase& planned, int index, trace::ChromeTraceWriter& writer);

  // What the sweep has to say since last asked (metrics set-up, metrics matching problems).
  std::vector<std::string> take_notes();
  // What --metrics measured, or why it could not (null when not asked): the trace's provenance.
  nlohmann::json metrics_info() const;
  trace::CaptureHealth capture() const;
  bool interrupted() const;

  struct State;  // sweep.cpp's

 private:
  std::unique_ptr<State> state_;
};

}  // namespace attnprof
