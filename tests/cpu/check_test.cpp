// `attnprof check`: fails on an added kernel, a new memcpy, a changed register count, a lost
// case or launch API change; passes on an identical summary.
#include <gtest/gtest.h>

#include "check/check.hpp"

namespace attnprof {
namespace {

CaseSummary flash_case(const std::string& label) {
  CaseSummary c;
  c.label = label;
  c.backend = "flash";
  c.status = CaseStatus::ok;
  c.verified = c.verify_passed = true;
  c.iterations = 20;
  c.median_us = 400;
  c.kernels_per_iter = 1;
  KernelSummary k;
  k.name = "void flash_fwd_kernel<Traits>(Params)";
  k.per_iter = 1;
  k.registers_per_thread = 255;
  k.launch_api = "cudaLaunchKernel";
  c.kernels = {k};
  return c;
}

RunSummary baseline() {
  RunSummary r;
  r.cases = {flash_case("flash bf16 full 2x16x4096x4096x128"), flash_case("flash bf16 causal 2x16x4096x4096x128")};
  return r;
}

const Difference* find(const CheckReport& report, const std::string& field_prefix) {
  for (const Difference& d : report.differences)
    if (d.field.rfind(field_prefix, 0) == 0) return &d;
  return nullptr;
}

TEST(Check, IdenticalSummariesPass) {
  const CheckReport report = compare_summaries(baseline(), baseline(), {});
  EXPECT_TRUE(report.passed());
  EXPECT_TRUE(report.differences.empty());
  EXPECT_EQ(report.cases_compared.size(), 2u);
}

TEST(Check, AnAddedKernelFails) {
  RunSummary now = baseline();
  KernelSummary extra = now.cases[0].kernels[0];
  extra.name = "void convert_kernel<float, __nv_bfloat16>(float const*, __nv_bfloat16*, long)";
  now.cases[0].kernels.push_back(extra);
  now.cases[0].kernels_per_iter = 2;
  const CheckReport report = compare_summaries(baseline(), now, {});
  EXPECT_FALSE(report.passed());
  ASSERT_NE(find(report, "kernels_per_iter"), nullptr);
  EXPECT_EQ(find(report, "kernels_per_iter")->kind, DifferenceKind::regression);
  ASSERT_NE(find(report, "new kernel"), nullptr);
  EXPECT_TRUE(find(report, "new kernel")->fails);
}

TEST(Check, ANewMemcpyFails) {
  RunSummary now = baseline();
  now.cases[1].memcpy_per_iter = 1;
  now.cases[1].memcpy_bytes_per_iter = 1 << 27;
  const CheckReport report = compare_summaries(baseline(), now, {});
  EXPECT_EQ(report.failures(), 2);  // the count and the bytes
  EXPECT_EQ(find(report, "memcpy_per_iter")->current, "1");
  EXPECT_EQ(find(report, "memcpy_per_iter")->case_label, "flash bf16 causal 2x16x4096x4096x128");
}

TEST(Check, AChangedRegisterCountFailsEvenWhenLower) {
  RunSummary now = baseline();
  now.cases[0].kernels[0].registers_per_thread = 232;
  const CheckReport report = compare_summaries(baseline(), now, {});
  ASSERT_EQ(report.failures(), 1);
  EXPECT_EQ(find(report, "registers per thread")->field, "registers per thread: flash_fwd_kernel");
  EXPECT_EQ(find(report, "registers per thread")->baseline, "255");
  EXPECT_EQ(find(report, "registers per thread")->current, "232");
}

TEST(Check, ALaunchApiChangeFails) {
  RunSummary now = baseline();
  now.cases[0].kernels[0].launch_api = "cuLaunchKernelEx";
  EXPECT_EQ(compare_summaries(baseline(), now, {}).failures(), 1);
}

TEST(Check, FewerKernelsIsAnImprovementNotAFailure) {
  RunSummary before = baseline();
  before.cases[0].kernels_per_iter = 3;
  const CheckReport report = compare_summaries(before, baseline(), {});
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(find(report, "kernels_per_iter")->kind, DifferenceKind::improvement);
}

TEST(Check, MissingCasesFailAndAddedCasesAreReported) {
  RunSummary now = baseline();
  now.cases.pop_back();
  now.cases.push_back(flash_case("flash fp16 full 2x16x4096x4096x128"));
  const CheckReport report = compare_summaries(baseline(), now, {});
  EXPECT_EQ(report.failures(), 1);
  int added = 0, missing = 0;
  for (const Difference& d : report.differences) {
    added += d.kind == DifferenceKind::added_case;
    missing += d.kind == DifferenceKind::missing_case;
  }
  EXPECT_EQ(added, 1);
  EXPECT_EQ(missing, 1);
}

TEST(Check, ACaseThatStopsWorkingFails) {
  RunSummary now = baseline();
  now.cases[0].status = CaseStatus::failed;
  now.cases[0].reason = "cudaMalloc failed: out of memory";
  const CheckReport report = compare_summaries(baseline(), now, {});
  ASSERT_EQ(report.failures(), 1);
  EXPECT_NE(find(report, "status")->current.find("out of memory"), std::string::npos);
}

TEST(Check, ASkippedCaseThatNowFailsFails) {
  RunSummary before = baseline();
  before.cases[0].status = CaseStatus::skipped;
  RunSummary now = baseline();
  now.cases[0].status = CaseStatus::failed;
  const CheckReport report = compare_summaries(before, now, {});
  ASSERT_EQ(report.failures(), 1);
  EXPECT_EQ(find(report, "status")->kind, DifferenceKind::regression);
  now.cases[0].status = CaseStatus::ok;  // skipped -> ok is news, not a regression
  EXPECT_TRUE(compare_summaries(before, now, {}).passed());
}

TEST(Check, OneMoreKernelInAMillionIsAChangeAndPrintsDistinctly) {
  RunSummary before = baseline(), now = baseline();
  before.cases[0].kernels_per_iter = 2000000;
  now.cases[0].kernels_per_iter = 2000001;
  before.cases[1].kernels_per_iter = 20.05;
  now.cases[1].kernels_per_iter = 20.1;
  const CheckReport report = compare_summaries(before, now, {});
  EXPECT_EQ(report.failures(), 2);
  for (const Difference& d : report.differences) EXPECT_NE(d.baseline, d.current) << d.field;
}

TEST(Check, TwoCasesOfOneLabelCannotBeComparedAndFail) {
  RunSummary now = baseline();
  now.cases.push_back(now.cases[0]);
  const CheckReport report = compare_summaries(baseline(), now, {});
  EXPECT_FALSE(report.passed());
  ASSERT_NE(find(report, "case"), nullptr);
  EXPECT_NE(find(report, "case")->baseline.find("two cases"), std::string::npos);
}

TEST(Check, TimesOnlyCountWithATolerance) {
  RunSummary now = baseline();
  now.cases[0].median_us = 460;  // +15%
  EXPECT_TRUE(compare_summaries(baseline(), now, {}).passed());
  CheckOptions tolerant;
  tolerant.time_tolerance_percent = 20;
  EXPECT_TRUE(compare_summaries(baseline(), now, tolerant).passed());
  CheckOptions strict;
  strict.time_tolerance_percent = 10;
  const CheckReport report = compare_summaries(baseline(), now, strict);
  EXPECT_EQ(report.failures(), 1);
  EXPECT_NE(find(report, "median time")->current.find("+15.0%"), std::string::npos);
}

TEST(Check, SurprisesFailOnlyWhenAskedFor) {
  RunSummary now = baseline();
  now.cases[0].surprises.push_back({"/expect/0", "memcpy_per_iter", "0", "1", ""});
  EXPECT_TRUE(compare_summaries(baseline(), now, {}).passed());
  CheckOptions options;
  options.expectations = true;
  EXPECT_EQ(compare_summaries(baseline(), now, options).failures(), 1);
}

TEST(Check, AnIncompleteCaptureFails) {
  RunSummary now = baseline();
  now.capture.dropped_records = 12;
  EXPECT_EQ(compare_summaries(baseline(), now, {}).failures(), 1);
}

TEST(Check, JunitHasOneTestcasePerCaseAndAFailureWhereItFailed) {
  RunSummary now = baseline();
  now.cases[1].memcpy_per_iter = 1;
  const std::string xml = render_junit(compare_summaries(baseline(), now, {}));
  EXPECT_NE(xml.find("tests=\"2\" failures=\"1\""), std::string::npos) << xml;
  const auto full = xml.find("flash bf16 full"), causal = xml.find("flash bf16 causal"), failure = xml.find("<failure");
  ASSERT_LT(full, causal);
  EXPECT_GT(failure, causal);  // under the causal case, which has the memcpy, not the full one
  EXPECT_EQ(xml.find("<failure", failure + 1), std::string::npos);
}

}  // namespace
}  // namespace attnprof
