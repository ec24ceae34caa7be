// One analysis pipeline (summary/analysis.hpp): `attnprof report` on the trace a real run wrote
// gives back the run's findings and surprises, case by case, and applying the run-level step
// again to the run's summary changes nothing. The run covers a forward and its backward (the
// run-level ratio finding), a memcpy inside the loop and a wrong guess (a surprise).
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.hpp"
#include "commands/run.hpp"
#include "config/config.hpp"
#include "summary/analysis.hpp"
#include "summary/trace_report.hpp"

namespace attnprof {
namespace {

Config pipeline_config() {
  const char* text = R"({
    "backends": ["manual:out_of_place", "flash:fa2"], "dtypes": ["bf16"], "causal": [true],
    "passes": ["forward", "backward"],
    "shapes": [{"batch": 2, "heads": 4, "seq_q": 257, "seq_kv": 257, "head_dim": 64}],
    "warmup": 1, "iterations": 3,
    "expect": [{"backend": "manual:out_of_place", "causal": true, "memcpy_per_iter": 0}]
  })";
  return parse_config(text, "pipeline_test", accepted_backend_names());
}

std::vector<std::string> finding_lines(const CaseSummary& c) {
  std::vector<std::string> out;
  for (const Finding& f : c.findings) out.push_back(f.kind + ": " + f.message);
  return out;
}

std::vector<std::string> surprise_lines(const CaseSummary& c) {
  std::vector<std::string> out;
  for (const Surprise& s : c.surprises) out.push_back(s.expectation + " " + s.field + ": " + s.expected + " / " + s.observed);
  return out;
}

TEST(Pipeline, ReportOnARunsTraceGivesTheRunsFindings) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnprof_pipeline_test";
  std::filesystem::remove_all(out);
  RunOptions options;
  options.config = pipeline_config();
  options.backends = expand_backend_names(options.config.backends);
  options.out_dir = out;
  options.progress = nullptr;
  const RunOutcome run = run_sweep(options);
  ASSERT_EQ(run.exit_code, 0);

  TraceReportOptions report_options;
  report_options.known_backends = accepted_backend_names();
  const TraceReport report = report_from_trace(run.trace_path, report_options);
  ASSERT_EQ(report.summary.cases.size(), run.summary.cases.size());
  bool any_ratio = false, any_surprise = false;
  for (std::size_t i = 0; i < run.summary.cases.size(); ++i) {
    const CaseSummary& ran = run.summary.cases[i];
    const CaseSummary& read = report.summary.cases[i];
    EXPECT_EQ(read.label, ran.label);
    EXPECT_EQ(finding_lines(read), finding_lines(ran)) << ran.label;
    EXPECT_EQ(surprise_lines(read), surprise_lines(ran)) << ran.label;
    for (const Finding& f : ran.findings) any_ratio = any_ratio || f.kind == "backward_forward_ratio";
    any_surprise = any_surprise || !ran.surprises.empty();
  }
  EXPECT_TRUE(any_ratio) << "no backward was paired with its forward: the run-level step did not run";
  EXPECT_TRUE(any_surprise) << "the wrong guess about the out-of-place masked_fill was not judged";

  RunSummary again = run.summary;
  analyze_run(again);
  EXPECT_EQ(nlohmann::json(again), nlohmann::json(run.summary));
}

}  // namespace
}  // namespace attnprof
