// The backward pass on the CPU: the float64 reference gradients against finite differences of the
// forward, its verification, the pass in case names, plans, FLOP and byte counts, summary.json
// and the backward/forward ratio finding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "reference/gradients.hpp"
#include "reference/inputs.hpp"
#include "summary/findings.hpp"
#include "summary/render.hpp"
#include "summary/roofline.hpp"
#include "summary/summary.hpp"
#include "sweep/plan.hpp"

namespace attnprof {
namespace {

AttentionProblem problem_of(int b, int h, int hkv, int sq, int skv, int d, CausalMode causal,
                            AttentionPass pass = AttentionPass::backward) {
  AttentionProblem p;
  p.shape.batch = b;
  p.shape.heads = h;
  p.shape.heads_kv = hkv;
  p.shape.seq_q = sq;
  p.shape.seq_kv = skv;
  p.shape.head_dim = d;
  p.dtype = DType::fp32;
  set_causal_mode(p, causal);
  p.pass = pass;
  return p;
}

std::vector<double> whole(const AttentionProblem& p, std::uint64_t seed, InputTensor tensor) {
  std::vector<float> values(static_cast<std::size_t>(input_element_count(p, tensor)));
  generate_input(p, seed, tensor, 0, static_cast<std::int64_t>(values.size()), values.data());
  return std::vector<double>(values.begin(), values.end());
}

// L = sum(dO o O) of the plain float64 forward: its gradients are dQ, dK, dV.
double loss(const AttentionProblem& p, const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v, const std::vector<double>& d_o) {
  const AttentionShape& s = p.shape;
  const int d = s.head_dim;
  const double scale = p.softmax_scale();
  double total = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t kv_head = static_cast<std::size_t>(b * s.kv_heads() + h / s.group_size());
      for (int i = 0; i < s.seq_q; ++i) {
        const KeyRange keys = visible_keys(p, i, s.seq_q, s.seq_kv);
        if (keys.count() == 0) continue;
        const std::size_t row = (static_cast<std::size_t>(b * s.heads + h) * s.seq_q + i) * d;
        std::vector<double> scores;
        double row_max = -std::numeric_limits<double>::infinity();
        for (int j = keys.first; j <= keys.last; ++j) {
          const std::size_t key = (kv_head * s.seq_kv + j) * d;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += q[row + c] * k[key + c];
          scores.push_back(dot * scale);
          row_max = std::max(row_max, scores.back());
        }
        double sum = 0;
        for (double& x : scores) sum += (x = std::exp(x - row_max));
        for (int c = 0; c < d; ++c) {
          double o = 0;
          for (int j = keys.first; j <= keys.last; ++j)
            o += scores[static_cast<std::size_t>(j - keys.first)] / sum * v[(kv_head * s.seq_kv + j) * d + c];
          total += d_o[row + c] * o;
        }
      }
    }
  return total;
}

struct FiniteDifferenceCase {
  std::string name;
  int heads, heads_kv, seq_q, seq_kv;
  CausalMode causal;
  AttentionWindow window;
};

class ReferenceGradientTest : public ::testing::TestWithParam<FiniteDifferenceCase> {};

// Every element of dQ, dK and dV of a tiny problem against a central difference of the loss.
TEST_P(ReferenceGradientTest, MatchesFiniteDifferencesOfTheForward) {
  const FiniteDifferenceCase& c = GetParam();
  AttentionProblem p = problem_of(2, c.heads, c.heads_kv, c.seq_q, c.seq_kv, 8, c.causal);
  p.window = c.window;
  const std::uint64_t seed = 77;
  std::vector<double> q = whole(p, seed, InputTensor::q), k = whole(p, seed, InputTensor::k),
                      v = whole(p, seed, InputTensor::v), d_o = whole(p, seed, InputTensor::grad_o);
  GradientRows rows;
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(q.size()) / 8; ++r) rows.q_rows.push_back(r);
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(k.size()) / 8; ++r) rows.kv_rows.push_back(r);
  const ReferenceGradients ref = reference_gradients(p, seed, rows, nullptr, 2);
  ASSERT_FALSE(ref.interrupted);

  const double h = 1e-5;
  auto check = [&](std::vector<double>& x, const std::vector<double>& gradient, const char* name) {
    ASSERT_EQ(x.size(), gradient.size());
    double nonzero = 0;
    for (std::size_t n = 0; n < x.size(); ++n) {
      const double kept = x[n];
      x[n] = kept + h;
      const double up = loss(p, q, k, v, d_o);
      x[n] = kept - h;
      const double down = loss(p, q, k, v, d_o);
      x[n] = kept;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(gradient[n], numeric, 1e-7 + 1e-6 * std::abs(numeric)) << name << " element " << n;
      nonzero += std::abs(gradient[n]);
    }
    EXPECT_GT(nonzero, 0.0) << name << " is all zeros: the check would prove nothing";
  };
  check(q, ref.dq, "dQ");
  check(k, ref.dk, "dK");
  check(v, ref.dv, "dV");
}

INSTANTIATE_TEST_SUITE_P(
    Masks, ReferenceGradientTest,
    ::testing::Values(FiniteDifferenceCase{"full_gqa", 4, 2, 5, 7, CausalMode::none, {}},
                      FiniteDifferenceCase{"causal_top_left_gqa", 4, 2, 5, 7, CausalMode::top_left, {}},
                      FiniteDifferenceCase{"causal_bottom_right_gqa", 4, 2, 5, 7, CausalMode::bottom_right, {}},
                      FiniteDifferenceCase{"causal_top_left_seq_q_longer", 2, 2, 7, 5, CausalMode::top_left, {}},
                      FiniteDifferenceCase{"causal_bottom_right_rows_without_keys", 2, 1, 7, 5,
                                           CausalMode::bottom_right, {}},
                      FiniteDifferenceCase{"window_mqa", 3, 1, 9, 9, CausalMode::none, {2, 1}}),
    [](const auto& info) { return info.param.name; });

// A row that sees no key has zero dQ; a key that no row sees has zero dK and dV.
// A backward case draws v with mean 1/2: then D = rowsum(dO * O) is large, and a backward that
// left it out of dS = P (dP - D) is far off (with v of mean 0, O and D were near 0 and it passed).
TEST(BackwardInputs, VOfABackwardCaseHasAMeanOfOneHalfAndTheForwardsIsCentred) {
  AttentionProblem p;
  p.shape = {1, 2, 64, 96, 32};
  p.pass = AttentionPass::backward;
  std::vector<float> v(static_cast<std::size_t>(input_element_count(p, InputTensor::v)));
  generate_input(p, 11, InputTensor::v, 0, static_cast<std::int64_t>(v.size()), v.data());
  double sum = 0;
  for (float x : v) {
    EXPECT_GE(x, 0.0f);
    EXPECT_LE(x, 1.0f);
    sum += x;
  }
  EXPECT_NEAR(sum / v.size(), 0.5, 0.02);
  p.pass = AttentionPass::forward;
  generate_input(p, 11, InputTensor::v, 0, static_cast<std::int64_t>(v.size()), v.data());
  sum = 0;
  for (float x : v) sum += x;
  EXPECT_NEAR(sum / v.size(), 0.0, 0.02);
  EXPECT_EQ(input_range(InputTensor::grad_o, AttentionPass::backward).low, -1.0f);  // dO stays centred
}

TEST(ReferenceGradients, RowsWithoutKeysAndKeysWithoutRowsAreZero) {
  const AttentionProblem p = problem_of(1, 2, 2, 7, 5, 8, CausalMode::bottom_right);  // rows 0, 1 see no key
  GradientRows rows;
  rows.q_rows = {0, 1, 3};  // (row 2 sees one key: P = 1, so its dS, and dQ, vanish too)
  rows.kv_rows = {0, 4};
  const ReferenceGradients ref = reference_gradients(p, 5, rows, nullptr, 1);
  for (int c = 0; c < 16; ++c) EXPECT_EQ(ref.dq[static_cast<std::size_t>(c)], 0.0) << c;
  double row3 = 0;
  for (int c = 16; c < 24; ++c) row3 += std::abs(ref.dq[static_cast<std::size_t>(c)]);
  EXPECT_GT(row3, 0.0);

  const AttentionProblem top_left = problem_of(1, 1, 1, 3, 6, 8, CausalMode::top_left);  // keys 3..5: no row
  rows.q_rows = {};
  rows.kv_rows = {2, 3, 5};
  const ReferenceGradients keys = reference_gradients(top_left, 5, rows, nullptr, 1);
  double seen = 0;
  for (int c = 0; c < 8; ++c) seen += std::abs(keys.dk[static_cast<std::size_t>(c)]) + std::abs(keys.dv[static_cast<std::size_t>(c)]);
  EXPECT_GT(seen, 0.0);
  for (std::size_t n = 8; n < keys.dk.size(); ++n) {
    EXPECT_EQ(keys.dk[n], 0.0) << n;
    EXPECT_EQ(keys.dv[n], 0.0) << n;
  }
}

// The same dK/dV rows, computed with the group's query rows split over different threads, agree.
TEST(ReferenceGradients, ThreadCountDoesNotChangeTheSums) {
  const AttentionProblem p = problem_of(1, 8, 2, 33, 17, 16, CausalMode::top_left);
  GradientRows rows;
  rows.q_rows = {0, 40, 200};
  rows.kv_rows = {0, 16, 17, 33};
  const ReferenceGradients one = reference_gradients(p, 9, rows, nullptr, 1);
  const ReferenceGradients many = reference_gradients(p, 9, rows, nullptr, 5);
  for (std::size_t n = 0; n < one.dk.size(); ++n) {
    EXPECT_NEAR(one.dk[n], many.dk[n], 1e-12) << n;
    EXPECT_NEAR(one.dv[n], many.dv[n], 1e-12) << n;
  }
  for (std::size_t n = 0; n < one.dq.size(); ++n) EXPECT_DOUBLE_EQ(one.dq[n], many.dq[n]) << n;
}

TEST(ReferenceGradients, RefusesRaggedProblemsAndBadRows) {
  AttentionProblem p = problem_of(2, 2, 2, 8, 8, 8, CausalMode::none);
  GradientRows rows;
  rows.q_rows = {3, 2};
  EXPECT_THROW(reference_gradients(p, 1, rows), std::invalid_argument);
  rows.q_rows = {};
  rows.kv_rows = {32};
  EXPECT_THROW(reference_gradients(p, 1, rows), std::invalid_argument);
  p.shape.seq_lens_q = {3, 8};
  rows.kv_rows = {0};
  EXPECT_THROW(reference_gradients(p, 1, rows), std::invalid_argument);
}

TEST(GradientRows, FewGroupsWithTheirEdgesAndTheForwardsQueryRows) {
  AttentionShape s;
  s.batch = 2;
  s.heads = 16;
  s.heads_kv = 4;
  s.seq_q = 4096;
  s.seq_kv = 4096;
  s.head_dim = 128;
  const GradientRows rows = gradient_rows_to_check(s, 1024);
  EXPECT_EQ(rows.q_rows, rows_to_check(s, 1024));
  ASSERT_FALSE(rows.kv_rows.empty());
  EXPECT_LE(rows.kv_rows.size(), 512u);
  EXPECT_TRUE(std::is_sorted(rows.kv_rows.begin(), rows.kv_rows.end()));
  std::vector<std::int64_t> groups;
  for (std::int64_t r : rows.kv_rows)
    if (groups.empty() || groups.back() != r / s.seq_kv) groups.push_back(r / s.seq_kv);
  EXPECT_EQ(groups.size(), 2u);
  const std::int64_t last = 2 * 4 - 1;
  EXPECT_EQ(groups.back(), last);
  EXPECT_NE(std::find(rows.kv_rows.begin(), rows.kv_rows.end(), last * s.seq_kv), rows.kv_rows.end());
  EXPECT_EQ(rows.kv_rows.back(), (last + 1) * s.seq_kv - 1);

  s.batch = 1;
  s.heads = s.heads_kv = 1;
  s.seq_q = s.seq_kv = 17;
  const GradientRows small = gradient_rows_to_check(s, 1024);
  EXPECT_EQ(small.q_rows.size(), 17u);
  EXPECT_EQ(small.kv_rows.size(), 17u);
}

// verify_gradients passes the reference itself, and names the tensor that is wrong.
TEST(VerifyGradients, PassesTheReferenceAndNamesTheWrongTensor) {
  AttentionProblem p = problem_of(1, 4, 2, 17, 33, 16, CausalMode::top_left);
  p.dtype = DType::bf16;
  const GradientRows rows = gradient_rows_to_check(p.shape, 64);
  const ReferenceGradients ref = reference_gradients(p, 3, rows, nullptr, 2);
  GradientOutputs got;
  got.rows = rows;
  got.dq.assign(ref.dq.begin(), ref.dq.end());
  got.dk.assign(ref.dk.begin(), ref.dk.end());
  got.dv.assign(ref.dv.begin(), ref.dv.end());
  const Verification good = verify_gradients(p, 3, got, {.threads = 2});
  EXPECT_TRUE(good.passed) << good.detail;
  EXPECT_LT(good.relative_error, 1e-6);
  EXPECT_GE(good.dk_relative_error, 0.0);
  EXPECT_EQ(good.bound, gradient_error_bound(DType::bf16));
  EXPECT_GT(gradient_error_bound(DType::bf16), relative_error_bound(DType::bf16));

  GradientOutputs wrong_dk = got;
  for (float& x : wrong_dk.dk) x *= 1.1f;
  const Verification bad = verify_gradients(p, 3, wrong_dk, {.threads = 2});
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.detail.find("dK relative error"), std::string::npos) << bad.detail;

  GradientOutputs swapped = got;  // dK and dV exchanged: both wrong
  std::swap(swapped.dk, swapped.dv);
  EXPECT_FALSE(verify_gradients(p, 3, swapped, {.threads = 2}).passed);

  GradientOutputs poisoned = got;
  poisoned.dv[5] = std::numeric_limits<float>::quiet_NaN();
  const Verification nan = verify_gradients(p, 3, poisoned, {.threads = 2});
  EXPECT_FALSE(nan.passed);
  EXPECT_NE(nan.detail.find("NaN/inf"), std::string::npos) << nan.detail;

  GradientOutputs unwritten = got;  // the device scan found poison outside the checked rows
  unwritten.non_finite = 3;
  unwritten.first_non_finite = "dQ element 12";
  const Verification scan = verify_gradients(p, 3, unwritten, {.threads = 2});
  EXPECT_FALSE(scan.passed);
  EXPECT_NE(scan.detail.find("dQ element 12"), std::string::npos) << scan.detail;

  GradientOutputs short_read = got;
  short_read.dq.pop_back();
  EXPECT_FALSE(verify_gradients(p, 3, short_read).passed);
}

// ---- the pass in the case, its FLOPs and bytes ------------------------------------------------

TEST(BackwardCounts, FlopsAreTwoAndAHalfTimesTheForwards) {
  AttentionProblem forward = problem_of(2, 16, 16, 4096, 4096, 128, CausalMode::none, AttentionPass::forward);
  AttentionProblem backward = forward;
  backward.pass = AttentionPass::backward;
  EXPECT_DOUBLE_EQ(attention_flops(forward), 4.0 * 2 * 16 * 4096.0 * 4096 * 128);
  EXPECT_DOUBLE_EQ(attention_flops(backward), 2.5 * 4.0 * 2 * 16 * 4096.0 * 4096 * 128);
  set_causal_mode(forward, CausalMode::top_left);
  set_causal_mode(backward, CausalMode::top_left);
  EXPECT_DOUBLE_EQ(attention_flops(backward), 2.5 * attention_flops(forward));
  EXPECT_DOUBLE_EQ(pass_flop_factor(AttentionPass::forward), 1.0);
}

TEST(BackwardCounts, MinimumBytesReadQKVODoLseAndWriteDqDkDv) {
  AttentionProblem p = problem_of(4, 16, 4, 1024, 2048, 64, CausalMode::none, AttentionPass::backward);
  p.dtype = DType::bf16;
  const double q_sized = 4.0 * 16 * 1024 * 64, kv_sized = 4.0 * 4 * 2048 * 64;
  // q, o, dO, dQ and k, v, dK, dV in bf16; the logsumexp in fp32.
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), 4 * (q_sized + kv_sized) * 2 + 4.0 * 4 * 16 * 1024);
  p.pass = AttentionPass::forward;
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), 2 * (q_sized + kv_sized) * 2);
}

TEST(BackwardCases, LabelSaysBackwardAndForwardLabelsStay) {
  AttentionProblem p = problem_of(2, 16, 16, 4096, 4096, 128, CausalMode::top_left, AttentionPass::forward);
  p.dtype = DType::bf16;
  EXPECT_EQ(case_label("cudnn", p), "cudnn bf16 causal 2x16x4096x4096x128");
  p.pass = AttentionPass::backward;
  EXPECT_EQ(case_label("cudnn", p), "cudnn backward bf16 causal 2x16x4096x4096x128");
  EXPECT_EQ(to_string(AttentionPass::backward), "backward");
  EXPECT_EQ(parse_pass("forward"), AttentionPass::forward);
  EXPECT_FALSE(parse_pass("Backward").has_value());
}

Config config_with_passes(const std::string& passes) {
  return parse_config(R"({"backends": ["flash", "cudnn"], "causal": [false, true], "passes": )" + passes +
                          R"(, "shapes": [{"batch": 2, "heads": 4, "seq_q": 64, "head_dim": 64}]})",
                      "test.json", {"flash", "cudnn"});
}

TEST(BackwardCases, PlanRunsEachPassOfAProblemWithTheSameInputs) {
  const std::vector<PlannedCase> cases = plan_cases(config_with_passes(R"(["forward", "backward"])"), {"flash", "cudnn"});
  ASSERT_EQ(cases.size(), 8u);
  EXPECT_EQ(cases[0].label, "flash bf16 full 2x4x64x64x64");
  EXPECT_EQ(cases[1].label, "flash backward bf16 full 2x4x64x64x64");
  EXPECT_TRUE(cases[1].problem.is_backward());
  EXPECT_EQ(cases[0].seed, cases[1].seed);      // one problem, both passes: the same q, k, v
  EXPECT_NE(cases[0].seed, cases[2].seed);      // causal is another problem
  EXPECT_EQ(cases[0].seed, cases[4].seed);      // and every backend sees the same
  const std::vector<PlannedCase> backward_only = plan_cases(config_with_passes(R"(["backward"])"), {"cudnn"});
  ASSERT_EQ(backward_only.size(), 2u);
  EXPECT_TRUE(backward_only[0].problem.is_backward());
  EXPECT_EQ(backward_only[0].seed, cases[4].seed);
  EXPECT_DOUBLE_EQ(estimated_case_cost(cases[1]), 2.5 * estimated_case_cost(cases[0]));
}

TEST(BackwardCases, RaggedPagedAndDecodeBackwardsAreOutOfScope) {
  AttentionProblem p = problem_of(3, 8, 8, 64, 64, 64, CausalMode::none);
  EXPECT_FALSE(backward_out_of_scope(p).has_value());
  p.pass = AttentionPass::forward;
  p.shape.page_size = 16;
  EXPECT_FALSE(backward_out_of_scope(p).has_value());  // a forward is never refused here
  p.pass = AttentionPass::backward;
  EXPECT_NE(backward_out_of_scope(p).value_or("").find("paged"), std::string::npos);
  p.shape.page_size = 0;
  p.shape.seq_lens_q = {1, 17, 64};
  EXPECT_NE(backward_out_of_scope(p).value_or("").find("ragged"), std::string::npos);
  p.shape.seq_lens_q.clear();
  p.shape.seq_q = 1;
  p.shape.seq_kv = 4096;
  EXPECT_NE(backward_out_of_scope(p).value_or("").find("decode"), std::string::npos);
  p.shape.seq_q = p.shape.seq_kv = 16;  // short, but square: a training shape
  EXPECT_FALSE(backward_out_of_scope(p).has_value());
}

// ---- summary.json, the table and the ratio finding --------------------------------------------

CaseSummary timed_case(const std::string& backend, AttentionProblem p, double median_us) {
  CaseSummary c;
  c.backend = backend;
  c.problem = p;
  c.label = case_label(backend, p);
  c.median_us = median_us;
  c.iterations = 1;
  c.iteration_us = {median_us};
  return c;
}

TEST(BackwardSummary, ThePassRoundTripsThroughSummaryJsonAndTheCsv) {
  AttentionProblem p = problem_of(2, 16, 4, 1024, 1024, 128, CausalMode::bottom_right);
  p.dtype = DType::bf16;
  RunSummary run;
  run.cases = {timed_case("cudnn", p, 900.0)};
  place_on_roofline(run);
  const nlohmann::json j = run.cases[0];
  EXPECT_EQ(j["problem"]["pass"], "backward");
  EXPECT_EQ(j["roofline"]["flops_counted"], kBackwardFlopsNote);
  const CaseSummary back = j.get<CaseSummary>();
  EXPECT_TRUE(back.problem == p);
  EXPECT_EQ(back.label, "cudnn backward bf16 causal_br 2x16/4x1024x1024x128");

  p.pass = AttentionPass::forward;
  const nlohmann::json forward = timed_case("cudnn", p, 400.0);
  EXPECT_FALSE(forward["problem"].contains("pass"));  // forward summaries stay as they were
  EXPECT_EQ(forward.get<CaseSummary>().problem.pass, AttentionPass::forward);

  nlohmann::json unknown = j;
  unknown["problem"]["pass"] = "sideways";
  EXPECT_THROW(unknown.get<CaseSummary>(), std::runtime_error);

  const std::string csv = render_summary(run, OutputFormat::csv);
  EXPECT_NE(csv.find(",pass\n"), std::string::npos);
  EXPECT_NE(csv.find(",backward\n"), std::string::npos);
  const std::string table = render_summary(run, OutputFormat::table);
  EXPECT_NE(table.find("2.5x the forward"), std::string::npos) << table;
}

TEST(BackwardSummary, RatioFindingPairsEachBackwardWithItsForward) {
  AttentionProblem p = problem_of(2, 16, 16, 4096, 4096, 128, CausalMode::top_left, AttentionPass::forward);
  p.dtype = DType::bf16;
  AttentionProblem b = p;
  b.pass = AttentionPass::backward;
  AttentionProblem other = b;
  set_causal_mode(other, CausalMode::none);
  RunSummary run;
  run.cases = {timed_case("cudnn", p, 200.0), timed_case("cudnn", b, 550.0), timed_case("flash", b, 900.0),
               timed_case("cudnn", other, 700.0)};
  add_run_findings(run);
  add_run_findings(run);  // once, however often asked
  auto ratio_findings = [](const CaseSummary& c) {
    std::vector<Finding> found;
    for (const Finding& f : c.findings)
      if (f.kind == "backward_forward_ratio") found.push_back(f);
    return found;
  };
  ASSERT_EQ(ratio_findings(run.cases[1]).size(), 1u);
  const Finding f = ratio_findings(run.cases[1])[0];
  EXPECT_DOUBLE_EQ(f.evidence["ratio"].get<double>(), 2.75);
  EXPECT_EQ(f.evidence["forward_case"], "cudnn bf16 causal 2x16x4096x4096x128");
  EXPECT_NE(f.message.find("2.75x"), std::string::npos) << f.message;
  EXPECT_TRUE(ratio_findings(run.cases[0]).empty());  // on the backward only
  EXPECT_TRUE(ratio_findings(run.cases[2]).empty());  // flash ran no forward
  EXPECT_TRUE(ratio_findings(run.cases[3]).empty());  // no forward of the non-causal problem

  run.cases[0].status = CaseStatus::failed;  // a forward that failed is no reference
  add_run_findings(run);
  EXPECT_TRUE(ratio_findings(run.cases[1]).empty());
}

}  // namespace
}  // namespace attnprof
