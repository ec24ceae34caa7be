#include "metrics/kernel_metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace attnprof {

const char* to_string(MetricGroup group) {
  switch (group) {
    case MetricGroup::occupancy: return "occupancy";
    case MetricGroup::dram: return "dram";
    case MetricGroup::tensor: return "tensor";
  }
  return "occupancy";
}

std::optional<MetricGroup> parse_metric_group(const std::string& text) {
  for (MetricGroup g : {MetricGroup::occupancy, MetricGroup::dram, MetricGroup::tensor})
    if (text == to_string(g)) return g;
  return std::nullopt;
}

std::string metric_group_names() { return "occupancy, dram, tensor"; }

const std::vector<MetricDefinition>& metric_definitions() {
  // Names checked with cuptiProfilerHostGetMetricProperties for chip GH100 (tests/cupti_host).
  // sm__warps_active...pct_of_peak_sustained_active is what Nsight Compute reports as
  // "Achieved Occupancy"; the hmma pipe counts HMMA and Hopper's HGMMA (wgmma) alike.
  static const std::vector<MetricDefinition> table = {
      {std::nullopt, "sm__ctas_launched.sum", MetricField::ctas_launched},
      {MetricGroup::occupancy, "sm__warps_active.avg.pct_of_peak_sustained_active",
       MetricField::achieved_occupancy_percent},
      {MetricGroup::dram, "dram__throughput.avg.pct_of_peak_sustained_elapsed", MetricField::dram_throughput_percent},
      {MetricGroup::dram, "dram__bytes.sum.per_second", MetricField::dram_bytes_per_second},
      {MetricGroup::tensor, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
       MetricField::tensor_pipe_percent},
  };
  return table;
}

std::vector<MetricGroup> parse_metric_groups(const std::vector<std::string>& names) {
  std::vector<bool> wanted(3, false);
  for (const std::string& name : names) {
    const auto group = parse_metric_group(name);
    if (!group)
      throw UsageError(fmt::format("unknown metric group '{}': use {}", name, metric_group_names()));
    wanted[static_cast<std::size_t>(*group)] = true;
  }
  std::vector<MetricGroup> groups;
  for (MetricGroup g : {MetricGroup::occupancy, MetricGroup::dram, MetricGroup::tensor})
    if (wanted[static_cast<std::size_t>(g)]) groups.push_back(g);
  return groups;
}

std::vector<std::string> metric_names_for(const std::vector<MetricGroup>& groups) {
  std::vector<std::string> names;
  if (groups.empty()) return names;
  for (const MetricDefinition& d : metric_definitions())
    if (!d.group) names.push_back(d.cupti_name);
  for (const MetricDefinition& d : metric_definitions())
    if (d.group && std::find(groups.begin(), groups.end(), *d.group) != groups.end()) names.push_back(d.cupti_name);
  return names;
}

bool KernelMetrics::has_values() const {
  return achieved_occupancy_percent || dram_throughput_percent || dram_bytes_per_second || tensor_pipe_percent;
}

namespace {

std::optional<double>& field_of(KernelMetrics& k, MetricField field) {
  switch (field) {
    case MetricField::achieved_occupancy_percent: return k.achieved_occupancy_percent;
    case MetricField::dram_throughput_percent: return k.dram_throughput_percent;
    case MetricField::dram_bytes_per_second: return k.dram_bytes_per_second;
    case MetricField::tensor_pipe_percent: return k.tensor_pipe_percent;
    case MetricField::ctas_launched: return k.ctas_launched;
  }
  return k.ctas_launched;
}

const std::optional<double>& field_of(const KernelMetrics& k, MetricField field) {
  return field_of(const_cast<KernelMetrics&>(k), field);
}

constexpr MetricField kValueFields[] = {MetricField::achieved_occupancy_percent, MetricField::dram_throughput_percent,
                                        MetricField::dram_bytes_per_second, MetricField::tensor_pipe_percent,
                                        MetricField::ctas_launched};

}  // namespace

KernelMetrics decode_range(const std::vector<std::string>& metric_names, const RangeValues& range) {
  KernelMetrics k;
  const std::size_t n = std::min(metric_names.size(), range.values.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double v = range.values[i];
    if (!std::isfinite(v) || v < 0) continue;  // not collected for this range
    for (const MetricDefinition& d : metric_definitions())
      if (metric_names[i] == d.cupti_name) field_of(k, d.field) = v;
  }
  return k;
}

std::optional<std::size_t> auto_range_index(const std::string& range_name, char delimiter) {
  const auto last = range_name.rfind(delimiter);
  const std::string_view digits =
      last == std::string::npos ? std::string_view(range_name) : std::string_view(range_name).substr(last + 1);
  if (digits.empty()) return std::nullopt;
  std::size_t index = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return index;
}

std::vector<const trace::KernelActivity*> launches_in_order(const trace::ActivityBatch& batch, int case_index,
                                                            trace::Phase phase, std::optional<int> iteration) {
  std::unordered_map<std::uint32_t, const trace::KernelActivity*> by_correlation;
  for (const trace::KernelActivity& k : batch.kernels) {
    if (k.tag.case_index != case_index || k.tag.phase != phase) continue;
    if (iteration && k.tag.iteration != *iteration) continue;
    auto [it, inserted] = by_correlation.try_emplace(k.correlation, &k);
    if (!inserted && k.start_ns < it->second->start_ns) it->second = &k;  // keep the first execution
  }
  std::vector<const trace::KernelActivity*> launches;
  launches.reserve(by_correlation.size());
  for (const auto& [correlation, k] : by_correlation) launches.push_back(k);
  std::sort(launches.begin(), launches.end(), [](const trace::KernelActivity* a, const trace::KernelActivity* b) {
    return a->correlation < b->correlation;
  });
  return launches;
}

RangeMatch match_ranges_to_launches(const MeasuredRanges& measured,
                                    const std::vector<const trace::KernelActivity*>& launches) {
  RangeMatch match;
  std::vector<bool> taken(launches.size(), false);
  std::vector<std::pair<std::size_t, KernelMetrics>> paired;
  for (std::size_t position = 0; position < measured.ranges.size(); ++position) {
    const RangeValues& range = measured.ranges[position];
    const std::size_t index = auto_range_index(range.name).value_or(position);
    if (index >= launches.size()) {
      match.problems.push_back(fmt::format("range '{}' has no kernel launch {} (the profiled forward launched {})",
                                           range.name, index, launches.size()));
      continue;
    }
    if (taken[index]) {
      match.problems.push_back(fmt::format("range '{}' names launch {} a second time", range.name, index));
      continue;
    }
    const trace::KernelActivity& launch = *launches[index];
    KernelMetrics k = decode_range(measured.metric_names, range);
    const double grid_blocks = static_cast<double>(launch.grid[0]) * launch.grid[1] * launch.grid[2];
    if (k.ctas_launched && std::abs(*k.ctas_launched - grid_blocks) > 0.5) {
      match.problems.push_back(fmt::format("range '{}' counted {:.0f} CTAs but launch {} ({}) has a grid of {:.0f}",
                                           range.name, *k.ctas_launched, index, launch.name, grid_blocks));
      continue;
    }
    taken[index] = true;
    k.kernel_name = launch.name;
    k.correlation = launch.correlation;
    paired.emplace_back(index, std::move(k));
  }
  const auto unmatched = static_cast<std::size_t>(std::count(taken.begin(), taken.end(), false));
  if (unmatched > 0)
    match.problems.push_back(fmt::format("{} of {} kernel launches got no range ({} ranges{})", unmatched,
                                         launches.size(), measured.ranges.size(),
                                         measured.dropped_ranges > 0
                                             ? fmt::format(", {} dropped for lack of space", measured.dropped_ranges)
                                             : std::string()));
  std::sort(paired.begin(), paired.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, k] : paired) match.kernels.push_back(std::move(k));
  return match;
}

std::map<std::string, KernelMetrics> aggregate_by_name(const std::vector<KernelMetrics>& kernels) {
  struct Sum {
    double total = 0;
    int count = 0;
  };
  std::map<std::string, std::map<MetricField, Sum>> sums;
  std::map<std::string, int> launches;
  for (const KernelMetrics& k : kernels) {
    ++launches[k.kernel_name];
    auto& by_field = sums[k.kernel_name];
    for (MetricField f : kValueFields)
      if (const std::optional<double>& v = field_of(k, f)) {
        by_field[f].total += *v;
        by_field[f].count += 1;
      }
  }
  std::map<std::string, KernelMetrics> out;
  for (const auto& [name, by_field] : sums) {
    KernelMetrics k;
    k.kernel_name = name;
    k.launches = launches[name];
    for (const auto& [field, sum] : by_field)
      if (sum.count > 0) field_of(k, field) = sum.total / sum.count;
    out.emplace(name, std::move(k));
  }
  return out;
}

namespace {

void copy_values(const KernelMetrics& from, trace::KernelActivity& to) {
  to.achieved_occupancy_percent = from.achieved_occupancy_percent;
  to.dram_throughput_percent = from.dram_throughput_percent;
  to.dram_bytes_per_second = from.dram_bytes_per_second;
  to.tensor_pipe_percent = from.tensor_pipe_percent;
}

}  // namespace

std::size_t apply_kernel_metrics(trace::ActivityBatch& batch, int case_index, trace::Phase profiled_phase,
                                 const std::vector<KernelMetrics>& per_launch) {
  const std::map<std::string, KernelMetrics> by_name = aggregate_by_name(per_launch);
  std::unordered_map<std::uint32_t, const KernelMetrics*> by_correlation;
  for (const KernelMetrics& k : per_launch) by_correlation.emplace(k.correlation, &k);
  std::size_t applied = 0;
  for (trace::KernelActivity& record : batch.kernels) {
    if (record.tag.case_index != case_index) continue;
    const KernelMetrics* values = nullptr;
    if (record.tag.phase == profiled_phase) {
      if (auto it = by_correlation.find(record.correlation); it != by_correlation.end()) values = it->second;
    } else if (auto it = by_name.find(record.name); it != by_name.end()) {
      values = &it->second;
    }
    if (values == nullptr || !values->has_values()) continue;
    copy_values(*values, record);
    ++applied;
  }
  return applied;
}

}  // namespace attnprof
