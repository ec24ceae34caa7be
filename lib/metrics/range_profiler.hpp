// Per-kernel hardware counters through CUPTI's range profiler (cupti_range_profiler.h): auto
// ranges (one per kernel) with kernel replay, so CUPTI reruns each kernel as often as the metrics
// need and the caller runs its work once. Owns every range-profiler and profiler-host call; what
// the values mean and which kernel they belong to is decided in kernel_metrics.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "metrics/kernel_metrics.hpp"

namespace attnprof {

// Counters cannot be read in this process: not permitted (non-root with a restricted driver),
// not supported (device, vGPU, MIG, WSL...), a metric unknown to the chip, or another profiling
// session in the way. The message names the CUPTI call, its result and what to do about it.
// A run prints it once and continues without metrics.
class MetricsUnavailableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The host half of the profiler API needs no GPU: for a chip name ("GH100") it says which metric
// names are unknown and what a configuration of the valid ones costs. Throws
// MetricsUnavailableError when the host API itself cannot start (e.g. libnvperf_host missing).
struct HostMetricCheck {
  std::vector<std::string> invalid;       // "name: CUPTI's result"
  std::vector<std::string> descriptions;  // per valid name: "name: description [unit]"
  std::size_t config_image_bytes = 0;     // of all valid names together
  std::size_t passes = 0;                 // replay passes those need on the chip
};
HostMetricCheck check_metrics_on_host(const std::string& chip, const std::vector<std::string>& metric_names);

struct RangeProfilerOptions {
  std::size_t max_ranges = 512;  // kernels one measure() can record; later ones are dropped and counted
  int max_passes = 32;           // Start/Stop rounds before giving up on "all passes submitted"
};

class KernelMetricsProfiler {
 public:
  // Prepares the counters for `device`'s primary context (made current if needed): checks that
  // profiling is supported and permitted, that every metric exists on the chip, and builds the
  // configuration once for the whole run. Throws MetricsUnavailableError otherwise.
  KernelMetricsProfiler(int device, const std::vector<MetricGroup>& groups, RangeProfilerOptions options = {});
  ~KernelMetricsProfiler();
  KernelMetricsProfiler(const KernelMetricsProfiler&) = delete;
  KernelMetricsProfiler& operator=(const KernelMetricsProfiler&) = delete;

  const std::string& chip() const;
  const std::vector<std::string>& metric_names() const;
  std::size_t passes() const;  // replay passes per kernel

  // Enables the range profiler, runs `work` (launch, no sync needed) under auto ranges and
  // kernel replay, disables it again and returns one RangeValues per kernel, in the order CUPTI
  // stored them. The range profiler is only enabled inside this call, so nothing else the process
  // runs is replayed or serialized. CUPTI failures throw MetricsUnavailableError; whatever `work`
  // throws passes through.
  MeasuredRanges measure(const std::function<void()>& work);

 private:
  void configure();
  MeasuredRanges measure_once(const std::function<void()>& work);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace attnprof
