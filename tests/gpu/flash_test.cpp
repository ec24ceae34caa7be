// The flash backend beyond the generic output check: its logsumexp against the float64
// reference on every shape class (1, 17, 1000, 4097, seq_q != seq_kv, both causal settings, both
// dtypes, d64/d128), ragged and paged prefill (the varlen kernel), a null lse pointer, grids with many heads and batches, bitwise repeatability
// (a moving result is a race), and the reasons it gives for what it rejects.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "refusals_here.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

AttentionBackend& flash() {
  static const std::unique_ptr<AttentionBackend> backend = find_backend("flash:fa2")->make();
  return *backend;
}

AttentionProblem make_problem(AttentionShape shape, int head_dim, DType dtype, bool causal) {
  shape.head_dim = head_dim;
  AttentionProblem p;
  p.shape = shape;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

std::vector<AttentionProblem> lse_cases() {
  const std::vector<AttentionShape> shapes = {
      {1, 2, 1, 1, 0},    {1, 2, 17, 17, 0},   {2, 3, 1000, 1000, 0}, {1, 2, 4097, 4097, 0},
      {1, 2, 17, 1000, 0}, {1, 2, 1000, 17, 0}, {2, 2, 129, 257, 0},   {1, 1, 64, 64, 0},
  };
  std::vector<AttentionProblem> cases;
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int d : {64, 128})
      for (const AttentionShape& s : shapes)
        for (bool causal : {false, true}) cases.push_back(make_problem(s, d, dtype, causal));
  return cases;
}

std::string case_name(const testing::TestParamInfo<AttentionProblem>& info) {
  std::string name = case_label("flash", info.param);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// One problem flash accepts, on a fresh seed, against the float64 reference: output and logsumexp.
Verification expect_output_and_lse_match(const AttentionProblem& problem) {
  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(problem, seed, stream.get());
  const Verification v = run_and_verify(flash(), device_case, stream.get(), {.compare_lse = true});
  EXPECT_TRUE(v.passed) << case_label("flash", problem) << " seed " << seed << ": " << v.detail;
  EXPECT_EQ(v.non_finite, 0);
  return v;
}

class FlashLogsumexp : public testing::TestWithParam<AttentionProblem> {};

TEST_P(FlashLogsumexp, OutputAndLogsumexpMatchFloat64Reference) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  const AttentionProblem& problem = GetParam();
  ASSERT_FALSE(flash().check_problem(problem).has_value()) << *flash().check_problem(problem);
  const Verification v = expect_output_and_lse_match(problem);
  EXPECT_GE(v.lse_max_abs_error, 0.0) << "logsumexp was not compared";
  std::printf("  %-48s rel.err %.3e  lse max.abs %.3e\n", case_label("flash", problem).c_str(), v.relative_error,
              v.lse_max_abs_error);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashLogsumexp, testing::ValuesIn(lse_cases()), case_name);

// Ragged and paged prefill (the varlen kernel): packed q/o and k/v, per-sequence lengths (1, 17,
// the maximum) and bands, a paged K/V cache of pages of 16 and 64 (and one of 48: a tile spans
// pages that do not align with it), against the float64 reference per sequence.
std::vector<AttentionProblem> varlen_cases() {
  std::vector<AttentionProblem> cases;
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int d : {64, 128})
      for (CausalMode causal : {CausalMode::none, CausalMode::top_left, CausalMode::bottom_right}) {
        AttentionProblem same = make_problem({3, 4, 300, 300, 0}, d, dtype, false);
        same.shape.heads_kv = 2;
        same.shape.seq_lens_q = {1, 17, 300};
        same.shape.seq_lens_kv = {1, 17, 300};
        set_causal_mode(same, causal);
        cases.push_back(same);
        AttentionProblem differ = same;  // seq_q != seq_kv within each sequence
        differ.shape.seq_kv = 333;
        differ.shape.seq_lens_q = {17, 300, 1};
        differ.shape.seq_lens_kv = {333, 17, 129};
        cases.push_back(differ);
        AttentionProblem kv_only = same;  // dense q, packed k/v
        kv_only.shape.seq_q = 130;
        kv_only.shape.seq_lens_q.clear();
        kv_only.shape.seq_lens_kv = {200, 1, 300};
        cases.push_back(kv_only);
        for (int page : {16, 48, 64}) {
          AttentionProblem paged = differ;
          paged.shape.page_size = page;
          cases.push_back(paged);
        }
      }
  AttentionProblem window = make_problem({2, 8, 500, 700, 0}, 128, DType::bf16, false);
  window.shape.heads_kv = 2;
  window.shape.seq_lens_q = {500, 77};
  window.shape.seq_lens_kv = {700, 400};
  window.shape.page_size = 64;
  window.window = {100, 0};
  set_causal_mode(window, CausalMode::bottom_right);
  cases.push_back(window);
  return cases;
}

std::string varlen_name(const testing::TestParamInfo<AttentionProblem>& info) {
  const AttentionShape& s = info.param.shape;
  std::string name = case_name(info) + (s.packed_q() ? "_packed_q" : "_dense_q") +
                     (s.paged() ? "_paged" + std::to_string(s.page_size) : s.packed_kv() ? "_packed_kv" : "") + "_" +
                     std::to_string(info.index);
  return name;
}

class FlashVarlen : public testing::TestWithParam<AttentionProblem> {};

TEST_P(FlashVarlen, OutputAndLogsumexpMatchFloat64Reference) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  const AttentionProblem& problem = GetParam();
  ASSERT_FALSE(flash().check_problem(problem).has_value()) << *flash().check_problem(problem);
  const Verification v = expect_output_and_lse_match(problem);
  EXPECT_GT(v.rows_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Ragged, FlashVarlen, testing::ValuesIn(varlen_cases()), varlen_name);

// lse == nullptr: the output is still right and the lse buffer is never written.
TEST(Flash, NullLogsumexpIsNotWritten) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  for (bool causal : {false, true}) {
    const AttentionProblem problem = make_problem({2, 3, 300, 200, 0}, 128, DType::bf16, causal);
    const std::uint64_t seed = std::random_device{}();
    CudaStream stream;
    DeviceCase device_case(problem, seed, stream.get());
    flash().prepare(problem, stream.get());
    device_case.poison_outputs(stream.get());
    AttentionBuffers buffers = device_case.buffers();
    buffers.lse = nullptr;
    flash().run(problem, buffers, stream.get());
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const Verification v =
        verify_attention(problem, seed, device_case.read_rows(rows_to_check(problem.shape), stream.get()));
    EXPECT_TRUE(v.passed) << v.detail;
    const std::vector<float> lse = device_case.read_lse(stream.get());
    std::uint32_t poison = 0;
    std::memset(&poison, kPoisonByte, sizeof(poison));
    for (std::size_t i = 0; i < lse.size(); ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &lse[i], sizeof(bits));
      ASSERT_EQ(bits, poison) << "lse[" << i << "] was written although lse was null";
    }
  }
}

// Many heads and batches (grid.y / grid.z), a ragged last query tile, fp16; with 70 and with
// 10 K/V heads (groups of 7), so that a wrong head-to-K/V-head mapping shows.
TEST(Flash, ManyHeadsAndBatches) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  for (int heads_kv : {70, 10})
    for (bool causal : {false, true}) {
      AttentionProblem problem = make_problem({3, 70, 65, 130, 0}, 64, DType::fp16, causal);
      problem.shape.heads_kv = heads_kv;  // case_label names it: "3x70/10x65x130x64"
      expect_output_and_lse_match(problem);
    }
}

// Two runs on the same inputs give the same bits: the kernel has no order-dependent reduction,
// so any difference is a race (a missing barrier or a stage reused too early).
TEST(Flash, RepeatedRunsAreBitwiseIdentical) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  for (int d : {64, 128})
    for (int variant = 0; variant < 3; ++variant) {
      // Full, causal, and GQA 8/2 with a bottom-right window (masked tiles on both edges).
      AttentionProblem problem = make_problem({2, 8, 1500, 1100, 0}, d, DType::bf16, variant == 1);
      if (variant == 2) {
        problem.shape.heads_kv = 2;
        problem.window = {200, 30};
        problem.alignment = MaskAlignment::bottom_right;
      }
      CudaStream stream;
      DeviceCase device_case(problem, std::random_device{}(), stream.get());
      flash().prepare(problem, stream.get());
      std::vector<float> first;
      std::vector<float> first_lse;
      for (int run = 0; run < 3; ++run) {
        device_case.poison_outputs(stream.get());
        flash().run(problem, device_case.buffers(), stream.get());
        CUDA_CHECK(cudaStreamSynchronize(stream.get()));
        std::vector<float> out = device_case.read_output(stream.get());
        std::vector<float> lse = device_case.read_lse(stream.get());
        if (run == 0) {
          first = std::move(out);
          first_lse = std::move(lse);
          continue;
        }
        ASSERT_EQ(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)), 0)
            << case_label("flash", problem) << ": output differs between runs";
        ASSERT_EQ(std::memcmp(lse.data(), first_lse.data(), lse.size() * sizeof(float)), 0)
            << case_label("flash", problem) << ": logsumexp differs between runs";
      }
    }
}

TEST(Flash, RejectsWhatItCannotRunWithAReason) {
  const AttentionProblem base = make_problem({1, 2, 17, 17, 0}, 64, DType::bf16, false);
  EXPECT_FALSE(flash().check_problem(base).has_value());

  AttentionProblem d96 = base;
  d96.shape.head_dim = 96;
  ASSERT_TRUE(flash().check_problem(d96).has_value());
  EXPECT_NE(flash().check_problem(d96)->find("head_dim 64 and 128 (got 96)"), std::string::npos)
      << *flash().check_problem(d96);

  AttentionProblem fp32 = base;
  fp32.dtype = DType::fp32;
  ASSERT_TRUE(flash().check_problem(fp32).has_value());
  EXPECT_NE(flash().check_problem(fp32)->find("bf16 and fp16"), std::string::npos);

  AttentionProblem bias = base;
  bias.has_bias = true;
  ASSERT_TRUE(flash().check_problem(bias).has_value());
  EXPECT_NE(flash().check_problem(bias)->find("bias"), std::string::npos);

  DeviceProperties turing = sm90_reference_properties();
  turing.compute_major = 7;
  turing.compute_minor = 5;
  ASSERT_TRUE(flash().check_device(turing).has_value());
  EXPECT_NE(flash().check_device(turing)->find("8.0"), std::string::npos);
  EXPECT_FALSE(flash().check_device(sm90_reference_properties()).has_value());
}

}  // namespace
}  // namespace attnprof
