// What `--metrics` measures and how the range profiler's numbers become per-kernel results. Kept
// apart from CUPTI (range_profiler.hpp owns every CUPTI call) so CPU tests reach all of it: the
// group -> metric table, parsing of group names, decoding of evaluated values (NaN and friends),
// matching auto ranges to the kernel launches of the profiled forward, and per-name aggregation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/model.hpp"

namespace attnprof {

enum class MetricGroup { occupancy, dram, tensor };

const char* to_string(MetricGroup group);
std::optional<MetricGroup> parse_metric_group(const std::string& text);
// "occupancy, dram, tensor": for messages and --help.
std::string metric_group_names();

// Which KernelMetrics field a metric fills.
enum class MetricField { achieved_occupancy_percent, dram_throughput_percent, dram_bytes_per_second,
                         tensor_pipe_percent, ctas_launched };

struct MetricDefinition {
  std::optional<MetricGroup> group;  // nullopt: always collected (used to check the range/launch match)
  const char* cupti_name;            // a CUPTI/Perfworks metric, valid on GH100 (checked with the host API)
  MetricField field;
};

// The whole table, in the order values are configured and evaluated.
const std::vector<MetricDefinition>& metric_definitions();

// Group names from the command line or config -> groups, deduplicated, in table order.
// Throws UsageError naming an unknown group and the known ones.
std::vector<MetricGroup> parse_metric_groups(const std::vector<std::string>& names);

// The CUPTI metric names to configure for these groups: the always-collected ones first, then
// each group's, in table order.
std::vector<std::string> metric_names_for(const std::vector<MetricGroup>& groups);

// One range as the range profiler returns it: its name and one evaluated value per metric name.
struct RangeValues {
  std::string name;            // auto range: the launch index as a decimal string, "0", "1", ...
  std::vector<double> values;  // parallel to MeasuredRanges::metric_names
};

struct MeasuredRanges {
  std::vector<std::string> metric_names;
  std::vector<RangeValues> ranges;  // in the order CUPTI stored them
  std::size_t dropped_ranges = 0;   // ranges past the counter data image's capacity
  std::size_t passes = 0;           // replay passes the configuration needed
};

// One kernel launch's measured values; a value CUPTI could not give stays empty.
struct KernelMetrics {
  std::string kernel_name;  // demangled, from the launch the range was matched to
  std::uint32_t correlation = 0;
  std::optional<double> achieved_occupancy_percent;
  std::optional<double> dram_throughput_percent;
  std::optional<double> dram_bytes_per_second;
  std::optional<double> tensor_pipe_percent;
  std::optional<double> ctas_launched;
  int launches = 1;  // after aggregation: how many launches the values average over

  bool has_values() const;
};

// A range's values as a KernelMetrics without a kernel name. NaN, infinities and negative values
// (what evaluation gives for counters that were not collected) become empty; a value of a metric
// the table does not know is ignored.
KernelMetrics decode_range(const std::vector<std::string>& metric_names, const RangeValues& range);

// The launch index an auto range's name encodes: "3" -> 3. With nesting the last component counts
// ("case/3" with delimiter "/"). Anything else (a user range name) -> nullopt.
std::optional<std::size_t> auto_range_index(const std::string& range_name, char delimiter = '/');

// The kernel launches of the profiled forward, in launch order: records of `phase` (and, when
// given, `iteration`) for case `case_index`, one per correlation id (a replayed kernel may come
// back more than once), ordered by correlation id (assigned at the launch call, so it is launch
// order on one thread).
std::vector<const trace::KernelActivity*> launches_in_order(const trace::ActivityBatch& batch, int case_index,
                                                            trace::Phase phase,
                                                            std::optional<int> iteration = std::nullopt);

struct RangeMatch {
  std::vector<KernelMetrics> kernels;  // one per matched range, named after its launch, in launch order
  std::vector<std::string> problems;   // each mismatch in one sentence; empty when all matched
};

// Pairs ranges with launches: an auto range's index names its launch, any other range takes the
// launch at its own position. A pair is rejected when the range counted a different number of CTAs
// than the launch's grid has (the pairing is wrong, or the launch was not the one profiled).
RangeMatch match_ranges_to_launches(const MeasuredRanges& measured,
                                    const std::vector<const trace::KernelActivity*>& launches);

// Per kernel name: the launch-weighted mean of each value over the launches that have it
// (a kernel launched twice in one forward, e.g. with two sizes, gets one number, as in the summary).
std::map<std::string, KernelMetrics> aggregate_by_name(const std::vector<KernelMetrics>& kernels);

// Writes the values into the case's kernel records: the records of the profiled forward get their
// own launch's values, every other record of the case the aggregate of its kernel name. Returns how
// many records received values.
std::size_t apply_kernel_metrics(trace::ActivityBatch& batch, int case_index, trace::Phase profiled_phase,
                                 const std::vector<KernelMetrics>& per_launch);

}  // namespace attnprof
