// The story of `attnprof check`: read the summary (and the baseline, unless --update rewrites it
// from the summary), compare them case by case (check/check.hpp), print the differences, write
// JUnit when asked, and exit 1 when anything failed. An unreadable file is a usage error.
#include "commands/check.hpp"

#include <iostream>

#include <fmt/format.h>

#include "check/check.hpp"
#include "core/errors.hpp"
#include "summary/render.hpp"
#include "summary/summary.hpp"

namespace attnprof {

int check_command(const CheckRequest& r) {
  const OutputFormat format = output_format_named(r.format, RenderedReport::check);
  RunSummary current, baseline;
  try {
    current = load_summary(r.summary_path);
    if (r.update) {
      write_json_atomically(r.baseline_path, nlohmann::json(current));
      std::cout << fmt::format("baseline {} updated from {} ({} cases)\n", r.baseline_path, r.summary_path,
                               current.cases.size());
      return kExitOk;
    }
    baseline = load_summary(r.baseline_path);
  } catch (const std::runtime_error& e) {
    std::cerr << "attnprof check: " << e.what() << "\n";
    return kExitUsage;
  }
  CheckOptions options;
  options.time_tolerance_percent = r.time_tolerance_percent;
  options.throughput_tolerance_percent = r.throughput_tolerance_percent;
  options.memory_tolerance_percent = r.memory_tolerance_percent;
  options.expectations = r.expectations;
  const CheckReport report = compare_summaries(baseline, current, options);
  std::cout << (format == OutputFormat::json ? render_check_json(report)
                                              : render_check_table(report, format == OutputFormat::md));
  if (!r.junit_path.empty()) write_text_atomically(r.junit_path, render_junit(report));
  return report.passed() ? kExitOk : kExitRegression;
}

}  // namespace attnprof
