// efficient, math and manual on ragged batches and paged K/V caches against the float64
// reference: lengths 1, 17 and the maximum, seq_q != seq_kv, only q or only k/v ragged,
// sequences whose keys end before their queries (rows that see no key), causal none / top-left
// / bottom-right, a window, head dims 64 and 128, bf16/fp16/fp32, GQA and MQA, pages of 16 and 64
// tokens. Then what each must reject (with a reason), and the trace of math and manual on a
// paged ragged case: the padding, gathering and unpadding copies are their own kernels, every
// iteration.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "commands/run.hpp"
#include "config/config.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "refusals_here.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

AttentionBackend& backend_instance(const std::string& name) {
  static std::map<std::string, std::unique_ptr<AttentionBackend>> instances;
  auto& slot = instances[name];
  if (!slot) slot = find_backend(name)->make();
  return *slot;
}

// A layout of the batch: which tensors are ragged or paged, and with which lengths.
struct Layout {
  std::string name;
  std::vector<int> seq_lens_q;
  std::vector<int> seq_lens_kv;
  int page_size = 0;
  int heads_kv = 4;  // of 4 query heads
};

AttentionShape dense_shape(int batch, int heads, int seq_q, int seq_kv, int head_dim) {
  AttentionShape s;
  s.batch = batch;
  s.heads = heads;
  s.seq_q = seq_q;
  s.seq_kv = seq_kv;
  s.head_dim = head_dim;
  return s;
}

constexpr int kBatch = 3;
constexpr int kHeads = 4;
constexpr int kSeqQ = 300;
constexpr int kSeqKv = 1000;

std::vector<Layout> layouts() {
  return {
      {"ragged", {1, 17, kSeqQ}, {kSeqKv, 17, 511}, 0, 4},
      {"ragged_gqa", {17, kSeqQ, 1}, {511, 17, kSeqKv}, 0, 2},
      {"ragged_q", {1, 17, kSeqQ}, {}, 0, 4},
      {"ragged_kv", {}, {kSeqKv, 17, 1}, 0, 4},
      // keys end before the queries: bottom-right rows (and a whole sequence) see no key
      {"short_kv", {17, 1, kSeqQ}, {5, kSeqKv, 0}, 0, 4},
      {"paged16_ragged_mqa", {1, 17, kSeqQ}, {kSeqKv, 17, 511}, 16, 1},
      {"paged64", {}, {}, 64, 4},
      {"paged64_ragged_kv", {}, {511, kSeqKv, 17}, 64, 2},
  };
}

struct MaskCase {
  CausalMode causal;
  AttentionWindow window;
};

struct RaggedCase {
  std::string backend;
  std::string layout;
  AttentionProblem problem;
};

std::vector<RaggedCase> all_cases() {
  const std::vector<MaskCase> masks = {{CausalMode::none, {}},
                                       {CausalMode::top_left, {}},
                                       {CausalMode::bottom_right, {}},
                                       {CausalMode::bottom_right, {64, 0}},
                                       {CausalMode::none, {8, 8}}};
  std::vector<RaggedCase> cases;
  for (const char* backend : {"efficient", "math", "manual:in_place", "manual:out_of_place"})
    for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
      for (int head_dim : {64, 128})
        for (const Layout& layout : layouts())
          for (const MaskCase& mask : masks) {
            // Keep the suite small: out_of_place and fp16 see every layout under one mask each.
            const std::string name = backend;
            if ((name == "manual:out_of_place" || dtype == DType::fp16) &&
                !(mask.causal == CausalMode::bottom_right && !mask.window.bounded()))
              continue;
            AttentionProblem p;
            p.shape = dense_shape(kBatch, kHeads, kSeqQ, kSeqKv, head_dim);
            p.shape.heads_kv = layout.heads_kv;
            p.shape.seq_lens_q = layout.seq_lens_q;
            p.shape.seq_lens_kv = layout.seq_lens_kv;
            p.shape.page_size = layout.page_size;
            p.dtype = dtype;
            set_causal_mode(p, mask.causal);
            p.window = mask.window;
            cases.push_back({backend, layout.name, p});
          }
  return cases;
}

std::string test_name(const testing::TestParamInfo<RaggedCase>& info) {
  std::string name = fmt::format("{}_{}_{}", info.index, info.param.layout, case_label(info.param.backend, info.param.problem));
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// What a backend may reject of these cases, and must therefore give a reason for; everything
// else it must run.
bool may_reject(const RaggedCase& c) {
  if (c.backend == "efficient") return c.problem.shape.paged();
  if (c.backend.rfind("manual", 0) == 0) {
    // rows that see no key: the five-line softmax would give NaN
    const AttentionShape& s = c.problem.shape;
    for (int b = 0; b < s.batch; ++b)
      for (int row = 0; row < s.q_len(b); ++row)
        if (visible_keys(c.problem, row, s.q_len(b), s.kv_len(b)).count() == 0) return true;
  }
  return false;
}

class RaggedBackends : public testing::TestWithParam<RaggedCase> {};

TEST_P(RaggedBackends, MatchesFloat64Reference) {
  const RaggedCase& c = GetParam();
  AttentionBackend& backend = backend_instance(c.backend);
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here(c.backend, backend));
  if (auto reason = backend.check_problem(c.problem)) {
    ASSERT_TRUE(may_reject(c)) << c.backend << " rejected " << c.layout << " " << case_label(c.backend, c.problem)
                               << ": " << *reason;
    ASSERT_FALSE(reason->empty());
    ATTNPROF_SKIP_BECAUSE(test::SkipReason::refused_as_documented,
                          c.backend + " refused " + c.layout + " (may_reject): " + *reason);
  }
  ASSERT_TRUE(c.backend != "efficient" || !c.problem.shape.paged()) << "efficient accepted a paged cache";

  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(c.problem, seed, stream.get());
  VerifyOptions options;
  options.compare_lse = c.backend == "efficient";  // the only one of the three that writes lse
  const Verification v = run_and_verify(backend, device_case, stream.get(), options);
  EXPECT_TRUE(v.passed) << c.layout << " " << case_label(c.backend, c.problem) << " seed " << seed << ": "
                        << v.detail;
  EXPECT_EQ(v.non_finite, 0);
  std::printf("  %-20s %-56s rel.err %.3e (%lld rows)\n", c.layout.c_str(), case_label(c.backend, c.problem).c_str(),
              v.relative_error, static_cast<long long>(v.rows_checked));
}

INSTANTIATE_TEST_SUITE_P(Layouts, RaggedBackends, testing::ValuesIn(all_cases()), test_name);

AttentionProblem ragged_problem(int head_dim, int page_size) {
  AttentionProblem p;
  p.shape = dense_shape(kBatch, kHeads, kSeqQ, kSeqKv, head_dim);
  p.shape.seq_lens_q = {1, 17, kSeqQ};
  p.shape.seq_lens_kv = {kSeqKv, 17, 511};
  p.shape.page_size = page_size;
  return p;
}

// Reasons: checked on the host, no GPU needed beyond the binary's start.
TEST(RaggedBackendsReject, EachNamesWhatItCannotRun) {
  auto rejection = [](const char* backend, const AttentionProblem& p) {
    return backend_instance(backend).check_problem(p).value_or("");
  };
  EXPECT_NE(rejection("efficient", ragged_problem(64, 16)).find("contiguous"), std::string::npos);
  EXPECT_NE(rejection("efficient", ragged_problem(256, 0)).find("head dims up to 128"), std::string::npos);
  AttentionProblem biased = ragged_problem(64, 0);
  biased.has_bias = true;
  EXPECT_NE(rejection("efficient", biased).find("without a bias"), std::string::npos);
  AttentionProblem wrong_count = ragged_problem(64, 0);
  wrong_count.shape.seq_lens_q = {1, 2};
  for (const char* backend : {"efficient", "math", "manual:in_place"})
    EXPECT_NE(rejection(backend, wrong_count).find("one length per sequence"), std::string::npos) << backend;
  AttentionProblem empty_rows = ragged_problem(64, 0);
  empty_rows.shape.seq_lens_kv = {kSeqKv, 0, 511};  // sequence 1's 17 rows see no key
  EXPECT_NE(rejection("manual:in_place", empty_rows).find("of sequence 1"), std::string::npos);
  EXPECT_EQ(rejection("math", empty_rows), "");
  EXPECT_EQ(rejection("efficient", empty_rows), "");
  for (const char* backend : {"math", "manual:in_place", "manual:out_of_place"})
    EXPECT_EQ(rejection(backend, ragged_problem(128, 16)), "") << backend;
  EXPECT_EQ(rejection("efficient", ragged_problem(128, 0)), "");
}

// The trace of one paged, ragged case: math and manual pad q, gather K and V from the pages and
// unpad o every iteration, each as its own kernel; efficient runs a ragged batch in one kernel.
TEST(RaggedBackendsTrace, CopiesShowAsTheirOwnKernels) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnprof_ragged_backends_test";
  std::filesystem::remove_all(out);
  RunOptions options;
  options.config = parse_config(R"({"backends": ["math", "manual"], "dtypes": ["bf16"], "causal": ["bottom_right"],
                                    "shapes": [{"batch": 1, "heads": 1, "seq_q": 1, "seq_kv": 1, "head_dim": 64}],
                                    "warmup": 1, "iterations": 3})",
                                "ragged_backends_test", accepted_backend_names());
  ShapeSpec paged;
  paged.shape = ragged_problem(64, 16).shape;
  paged.shape.heads_kv = 2;
  ShapeSpec ragged;
  ragged.shape = ragged_problem(64, 0).shape;
  options.config.shapes = {paged, ragged};
  options.config.backends = {"math", "manual", "efficient"};
  options.backends = expand_backend_names(options.config.backends);
  options.out_dir = out;
  options.progress = stdout;
  const RunOutcome outcome = run_sweep(options);
  EXPECT_EQ(outcome.exit_code, 0);

  int checked = 0;
  for (const CaseSummary& c : outcome.summary.cases) {
    std::printf("  %-16s %-9s %-56s %5.1f kernels/iter, %8.1f us\n", c.backend.c_str(),
                c.problem.shape.paged() ? "paged" : "ragged", c.label.c_str(), c.kernels_per_iter, c.median_us);
    for (const KernelSummary& k : c.kernels)
      std::printf("      %4.1f x %8.2f us  %.90s\n", k.per_iter, k.gpu_us_per_iter, k.name.c_str());
    std::map<std::string, double> per_iter;  // kernel kind -> launches per iteration
    for (const KernelSummary& k : c.kernels)
      for (const char* kind : {"::pad_ragged_kernel", "::unpad_ragged_kernel", "::gather_paged_kv_kernel"})
        if (k.name.find(kind) != std::string::npos) per_iter[kind] += k.per_iter;
    const bool is_paged = c.problem.shape.paged();
    SCOPED_TRACE(c.label + (is_paged ? " (paged)" : " (ragged)"));
    if (c.status == CaseStatus::skipped) {
      EXPECT_TRUE(c.backend == "efficient" && is_paged) << c.reason;
      continue;
    }
    EXPECT_EQ(c.status, CaseStatus::ok) << c.reason;
    EXPECT_TRUE(c.verified && c.verify_passed) << "rel.err " << c.relative_error;
    if (c.backend == "efficient") {
      EXPECT_EQ(c.kernels_per_iter, 1.0);
      EXPECT_TRUE(per_iter.empty());
    } else {
      EXPECT_EQ(per_iter["::pad_ragged_kernel"], is_paged ? 1.0 : 3.0);  // q (and k, v when packed)
      EXPECT_EQ(per_iter["::unpad_ragged_kernel"], 1.0);
      EXPECT_EQ(per_iter["::gather_paged_kv_kernel"], is_paged ? 2.0 : 0.0);  // K and V
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2 /*math*/ + 2 * 2 /*manual variants*/ + 1 /*efficient, ragged*/);
}

// Timings for the record (nothing asserted): a ragged causal prefill of about 8k tokens against
// the same batch padded to its longest sequence, efficient packed vs dense, math and manual
// padding it themselves.
TEST(RaggedBackendsTrace, PrefillTimingsBesideThePaddedBatch) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnprof_ragged_prefill_timings";
  std::filesystem::remove_all(out);
  RunOptions options;
  options.config = parse_config(R"({"backends": ["efficient"], "dtypes": ["bf16"], "causal": ["bottom_right"],
                                    "shapes": [{"batch": 1, "heads": 1, "seq_q": 1, "seq_kv": 1, "head_dim": 128}],
                                    "warmup": 2, "iterations": 10})",
                                "ragged_backends_test", accepted_backend_names());
  ShapeSpec ragged;
  ragged.shape = dense_shape(8, 16, 2048, 2048, 128);
  ragged.shape.seq_lens_q = {2048, 1, 17, 1500, 700, 2048, 333, 1024};  // 7671 tokens
  ragged.shape.seq_lens_kv = ragged.shape.seq_lens_q;
  ShapeSpec padded;
  padded.shape = dense_shape(8, 16, 2048, 2048, 128);
  options.config.shapes = {ragged, padded};
  options.config.backends = {"efficient", "math", "manual:in_place"};
  options.backends = expand_backend_names(options.config.backends);
  options.out_dir = out;
  options.progress = stdout;
  const RunOutcome outcome = run_sweep(options);
  EXPECT_EQ(outcome.exit_code, 0);
  for (const CaseSummary& c : outcome.summary.cases) {
    EXPECT_EQ(c.status, CaseStatus::ok) << c.label << ": " << c.reason;
    std::printf("  TIMING %-16s %-7s %-50s median %9.1f us, %5.1f kernels/iter, verified %d\n", c.backend.c_str(),
                c.problem.shape.ragged() ? "ragged" : "padded", c.label.c_str(), c.median_us, c.kernels_per_iter,
                c.verified && c.verify_passed ? 1 : 0);
  }
}

}  // namespace
}  // namespace attnprof
