// The report's charts, as inline SVG. What each chart shows is computed by the data
// functions here, apart from the drawing, so tests can say how many marks a chart must hold.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "html/html_report.hpp"
#include "summary/summary.hpp"

namespace attnprof::html {

inline constexpr const char* kMemcpyCategory = "memcpy";
inline constexpr const char* kMemsetCategory = "memset";
// A case with both: the summary has no duration per memory operation, only their sum.
inline constexpr const char* kMemoryCategory = "memcpy + memset";

struct CategoryTime {
  std::string category;  // kernel_category() of kernels, or one of the memory categories above
  double us_per_iter = 0;
  std::vector<const KernelSummary*> kernels;  // a kernel category's kernels, largest first
};

// A case's GPU time per timed iteration by category, the categories with time only, in a fixed
// order (compute, communication, then memory). Memory time is the busy time outside kernels.
std::vector<CategoryTime> gpu_time_by_category(const CaseSummary& c);

// Cases that ran (status ok): the rows of the GPU-time chart.
std::vector<std::size_t> cases_that_ran(const RunSummary& s);

// Cases that ran on the same problem (shape, dtype, causal, ...) with a FLOP count and a
// TFLOP/s, in order of first appearance: the groups of the TFLOP/s chart.
struct ProblemGroup {
  std::string label;  // "bf16 causal 1x2x256x256x64"
  std::vector<std::size_t> cases;
};
std::vector<ProblemGroup> tflops_groups(const RunSummary& s);

// FLOP per byte of the minimum traffic (core/types.hpp): a roofline's x.
double arithmetic_intensity(const AttentionProblem& problem);
// Cases with a FLOP count and a TFLOP/s: the roofline's points.
std::vector<std::size_t> roofline_cases(const RunSummary& s);

struct OccupancyRow {
  std::size_t case_index = 0;
  std::size_t kernel_index = 0;
};
// Kernels of cases that ran with an achieved occupancy: the occupancy chart's rows.
std::vector<OccupancyRow> occupancy_rows(const RunSummary& s);

// Cases that ran with device memory recorded (CaseSummary::memory): the memory chart's rows.
std::vector<std::size_t> memory_cases(const RunSummary& s);
// The roles held at some case's peak (MemoryRole::peak_bytes > 0), in order of first appearance:
// the memory chart's stack order and colours.
std::vector<std::string> memory_roles(const RunSummary& s);
// Cases with memory, a peak above zero and a sequence length: the memory-scaling chart's points.
std::vector<std::size_t> memory_scaling_cases(const RunSummary& s);
// A memory-scaling line: one backend's cases of one problem but for its sequence lengths (dtype,
// masking, batch, heads, head dim, pass), by seq_kv.
struct MemorySeries {
  std::string backend;
  std::string label;  // "flash:fa2 bf16 causal 1x16 d64"
  std::vector<std::size_t> cases;
};
std::vector<MemorySeries> memory_series(const RunSummary& s);

// Backends in order of first appearance; a backend's colour is palette()[its index].
std::vector<std::string> backend_order(const RunSummary& s);

std::string gpu_time_chart(const RunSummary& s);
std::string tflops_chart(const RunSummary& s);
std::string roofline_chart(const RunSummary& s, const std::optional<DeviceRoofs>& roofs);
std::string occupancy_chart(const RunSummary& s);  // "" when no kernel has an achieved occupancy
// "" when no case has memory: device memory held at each case's peak, stacked by role; the peak
// against the sequence length per backend, log-log (a slope of 2 is O(S^2), of 1 is O(S)).
std::string memory_chart(const RunSummary& s);
std::string memory_scaling_chart(const RunSummary& s);

}  // namespace attnprof::html
