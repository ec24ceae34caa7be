// The one analysis pipeline (summary/analysis.hpp): what each step adds, that the run-level step
// can be applied again (run --devices combines summaries that were analysed already), and that a
// profiled program's summary goes through the same steps as a run's.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/occupancy.hpp"
#include "summary/analysis.hpp"
#include "summary/program_summary.hpp"

namespace attnprof {
namespace {

CaseSummary timed_case(const std::string& backend, AttentionProblem p, double median_us) {
  CaseSummary c;
  c.backend = backend;
  c.problem = p;
  c.label = case_label(backend, p);
  c.median_us = median_us;
  c.iterations = 1;
  c.iteration_us = {median_us};
  KernelSummary k;
  k.name = "void attnprof::flash_forward_kernel<...>(...)";
  k.per_iter = 1;
  k.gpu_us_per_iter = median_us;
  k.grid = {8, 1, 1};
  k.block = {128, 1, 1};
  k.registers_per_thread = 255;
  k.occupancy_valid = true;
  k.active_blocks_per_sm = 2;
  c.kernels = {k};
  c.kernels_per_iter = 1;
  return c;
}

std::vector<std::string> kinds(const CaseSummary& c) {
  std::vector<std::string> out;
  for (const Finding& f : c.findings) out.push_back(f.kind);
  return out;
}

RunSummary forward_and_backward() {
  AttentionProblem forward;
  forward.shape = {2, 16, 4096, 4096, 128};
  forward.dtype = DType::bf16;
  AttentionProblem backward = forward;
  backward.pass = AttentionPass::backward;
  RunSummary run;
  run.device = sm90_reference_properties();
  run.device.clock_rate_khz = 1'980'000;  // the clocks give the roofs (an H100 SXM's)
  run.device.memory_clock_rate_khz = 2'619'000;
  run.device.memory_bus_width_bits = 5120;
  run.cases = {timed_case("flash:fa2", forward, 800.0), timed_case("flash:fa2", backward, 2000.0)};
  return run;
}

TEST(Analysis, TheRunStepPlacesEveryCaseAndComparesCases) {
  RunSummary run = forward_and_backward();
  for (CaseSummary& c : run.cases) analyze_case(c, nullptr);
  analyze_run(run);
  ASSERT_TRUE(run.roofs.has_value());
  const std::vector<std::string> backward = kinds(run.cases[1]);
  // The roof is a column, not a finding; the idle SMs a finding at this size (8 blocks on 132 SMs).
  EXPECT_TRUE(run.cases[1].roofline.roof_percent.has_value());
  EXPECT_EQ(std::find(backward.begin(), backward.end(), "roofline"), backward.end());
  EXPECT_NE(std::find(backward.begin(), backward.end(), "idle_sms"), backward.end());
  EXPECT_NE(std::find(backward.begin(), backward.end(), "backward_forward_ratio"), backward.end());
  // The run-level findings come after the case's own, as the table lists them.
  EXPECT_EQ(backward.back(), "backward_forward_ratio");
}

TEST(Analysis, TheRunStepAppliedAgainChangesNothing) {
  RunSummary once = forward_and_backward();
  for (CaseSummary& c : once.cases) analyze_case(c, nullptr);
  analyze_run(once);
  RunSummary twice = once;
  analyze_run(twice);
  EXPECT_EQ(nlohmann::json(twice), nlohmann::json(once))
      << nlohmann::json::diff(nlohmann::json(once), nlohmann::json(twice)).dump(1);
}

TEST(Analysis, SurprisesAreJudgedOnlyWithExpectations) {
  RunSummary run = forward_and_backward();
  Expectation e;
  e.backend = "flash:fa2";
  e.kernels_per_iter = 3;
  const std::vector<Expectation> expectations = {e};
  CaseSummary judged = run.cases[0];
  analyze_case(judged, &expectations);
  CaseSummary kept = run.cases[0];
  kept.surprises = {{"/expect/0", "kernels_per_iter", "3", "1", "guessed"}};
  analyze_case(kept, nullptr);
  ASSERT_EQ(judged.surprises.size(), 1u);
  EXPECT_EQ(judged.surprises[0].field, "kernels_per_iter");
  ASSERT_EQ(kept.surprises.size(), 1u);  // a null list keeps what the case had
  EXPECT_EQ(kept.surprises[0].note, "guessed");
}

TEST(Analysis, AFailedCaseGetsNoFindings) {
  RunSummary run = forward_and_backward();
  run.cases[1].status = CaseStatus::failed;
  for (CaseSummary& c : run.cases) analyze_case(c, nullptr);
  analyze_run(run);
  EXPECT_TRUE(run.cases[1].findings.empty()) << run.cases[1].findings.front().kind;
}

}  // namespace
}  // namespace attnprof
