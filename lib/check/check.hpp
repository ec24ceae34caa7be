// `attnprof check`: a summary.json against a baseline summary.json, per case. CI fails when a
// change adds a kernel, a memcpy or memset, new kernel names, changes a kernel's register count
// or launch API, breaks a case, loses records, or (when asked) slows down, holds more device
// memory, or surprises.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "summary/summary.hpp"

namespace attnprof {

struct CheckOptions {
  std::optional<double> time_tolerance_percent;  // compare median times only when set
  // Compare achieved throughput when set: TFLOP/s, or GB/s for a memory-bound case (the roofline).
  std::optional<double> throughput_tolerance_percent;
  // Compare each case's peak device memory (summary.json's memory.peak_bytes) when set.
  std::optional<double> memory_tolerance_percent;
  bool expectations = false;                     // fail on surprises in the summary
};

enum class DifferenceKind { regression, improvement, added_case, missing_case, info };
const char* to_string(DifferenceKind kind);

struct Difference {
  std::string case_label;  // "" for run-wide differences
  std::string field;       // "kernels_per_iter", "kernel names", "registers per thread", ...
  std::string baseline;
  std::string current;
  DifferenceKind kind = DifferenceKind::info;
  bool fails = false;
};

struct CheckReport {
  std::vector<Difference> differences;
  std::vector<std::string> cases_compared;
  int failures() const;
  bool passed() const { return failures() == 0; }
};

CheckReport compare_summaries(const RunSummary& baseline, const RunSummary& current, const CheckOptions& options);

std::string render_check_table(const CheckReport& report, bool markdown);
std::string render_check_json(const CheckReport& report);
// JUnit XML: one testcase per compared case (plus one for the run), a <failure> per failing difference.
std::string render_junit(const CheckReport& report);

}  // namespace attnprof
