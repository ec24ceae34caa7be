// Golden summaries: `attnprof report` of the committed sample trace (an H200 run) and of the small
// Kineto trace must rebuild exactly the summaries recorded in tests/golden/reports. A change to
// the reader, the aggregation, occupancy or the findings that alters any field shows up here.
// Regenerate (only when a change is meant): tests/golden/regenerate.sh shows the diff, --write takes it.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "summary/trace_report.hpp"

namespace attnprof {
namespace {

// The backend names a config may use (attnprof's registry): the stored config's expectations
// are re-read with them, as `attnprof report` does.
const std::vector<std::string> kKnownBackends = {"math",  "manual",    "manual:out_of_place", "manual:in_place", "efficient",
                                                 "flash", "flash:fa2", "flash:hopper",        "cudnn"};

nlohmann::json golden(const std::string& name) {
  std::ifstream in(std::filesystem::path(ATTNPROF_GOLDEN_DIR) / "reports" / name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

// What may differ between the recording and today without meaning anything: the version of the
// tool that rebuilt it and the path the trace was given as.
nlohmann::json comparable(nlohmann::json summary) {
  summary.erase("tool_version");
  summary["config"].erase("source");
  return summary;
}

void expect_same_summary(const nlohmann::json& got, const nlohmann::json& want) {
  const nlohmann::json patch = nlohmann::json::diff(comparable(want), comparable(got));
  EXPECT_TRUE(patch.empty()) << "rebuilt summary differs from the golden one (JSON patch from golden to now):\n"
                             << patch.dump(2);
}

TEST(GoldenReport, TheSampleTraceRebuildsItsRecordedSummary) {
  TraceReportOptions options;
  options.known_backends = kKnownBackends;
  const TraceReport report =
      report_from_trace(std::filesystem::path(ATTNPROF_SOURCE_DIR) / "traces/samples/sample_trace.json", options);
  EXPECT_EQ(report.origin, "attnprof run");
  expect_same_summary(nlohmann::json(report.summary), golden("sample_trace.summary.json"));
}

TEST(GoldenReport, TheKinetoTraceRebuildsItsRecordedSummary) {
  TraceReportOptions options;
  options.known_backends = kKnownBackends;
  const TraceReport report =
      report_from_trace(std::filesystem::path(ATTNPROF_GOLDEN_DIR) / "kineto_small_trace.json", options);
  expect_same_summary(nlohmann::json(report.summary), golden("kineto_small_trace.summary.json"));
}

}  // namespace
}  // namespace attnprof
