// Backward cases on the GPU (issue 20): cudnn's SDPA backward, flash's backward kernels
// (kernels/flash_bwd), and the eager-style backwards of math (fp32) and manual (both masked_fill
// variants) against the float64 reference gradients on fresh inputs with poisoned dQ, dK, dV (odd
// lengths, seq_q != seq_kv, both causal alignments, head dims 64 and 128, bf16 and fp16, grouped
// K/V heads); run-to-run bitwise repeatability of the gradients reported (printed, not asserted:
// cuDNN does not promise it for this graph, and flash adds dQ with atomics, in whatever order the
// blocks arrive); flash's stream-K tail kernel on small problems (dK and dV bitwise repeatable,
// asserted); backends without a backward refuse it with a reason; a sweep of backward cases writes
// them, pass included, with the backward/forward ratio finding.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "backends/cudnn_info.hpp"
#include "core/mask_bounds.hpp"
#include "flash_bwd/flash_bwd_order.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/device_memory.hpp"
#include "refusals_here.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

struct BackwardCase {
  int batch, heads, heads_kv, seq_q, seq_kv, head_dim;
  CausalMode causal;
  DType dtype;
  const char* backend = "cudnn";
};

AttentionProblem problem_of(const BackwardCase& c) {
  AttentionProblem p;
  p.shape = {c.batch, c.heads, c.seq_q, c.seq_kv, c.head_dim, c.heads_kv};
  p.dtype = c.dtype;
  set_causal_mode(p, c.causal);
  p.pass = AttentionPass::backward;
  return p;
}

bool gives_rows_without_keys_zero_gradients(const std::string& backend) {
  return backend == "flash:fa2" || backend == "flash:hopper" || backend == "efficient" ||
         backend == "math";  // cudnn refuses such rows; manual's softmax gives NaN there
}

std::vector<BackwardCase> cases() {
  std::vector<BackwardCase> out;
  for (const char* backend :
       {"cudnn", "flash:fa2", "flash:hopper", "efficient", "math", "manual:in_place", "manual:out_of_place"})
    for (DType dtype : {DType::bf16, DType::fp16})
      for (int d : {64, 128})
        for (CausalMode causal : {CausalMode::none, CausalMode::top_left, CausalMode::bottom_right}) {
          if (std::strcmp(backend, "flash:hopper") == 0 && d != 128) continue;  // its backward's one head dim
          out.push_back({2, 4, 4, 17, 17, d, causal, dtype, backend});     // odd, tiny
          out.push_back({1, 8, 2, 257, 257, d, causal, dtype, backend});   // odd, grouped heads
          out.push_back({2, 4, 1, 128, 384, d, causal, dtype, backend});   // seq_q < seq_kv, one K/V head
          // seq_q > seq_kv (bottom-right leaves rows without keys, which cudnn refuses; flash
          // and math give them zero gradients; efficient too, with flash's kernel body)
          if (causal != CausalMode::bottom_right || gives_rows_without_keys_zero_gradients(backend))
            out.push_back({1, 4, 4, 200, 136, d, causal, dtype, backend});
        }
  // flash, efficient, math, manual: a sliding window, and several key blocks per sequence with odd lengths.
  for (const char* backend : {"flash:fa2", "flash:hopper", "efficient", "math", "manual:in_place", "manual:out_of_place"})
    for (DType dtype : {DType::bf16, DType::fp16}) {
      out.push_back({1, 4, 2, 333, 333, 128, CausalMode::bottom_right, dtype, backend});
      out.push_back({1, 4, 4, 129, 1000, std::strcmp(backend, "flash:hopper") == 0 ? 128 : 64, CausalMode::none, dtype,
                     backend});
    }
  // flash:hopper: several key blocks and row tiles in both directions, top-left causal with GQA.
  for (DType dtype : {DType::bf16, DType::fp16})
    for (CausalMode causal : {CausalMode::none, CausalMode::top_left}) {
      out.push_back({2, 6, 2, 515, 300, 128, causal, dtype, "flash:hopper"});
      out.push_back({1, 2, 1, 70, 650, 128, causal, dtype, "flash:hopper"});
    }
  // math and manual take fp32 inputs too (math skips its casts; manual's GEMMs run in fp32).
  for (const char* backend : {"math", "manual:in_place", "manual:out_of_place"})
    for (CausalMode causal : {CausalMode::none, CausalMode::top_left, CausalMode::bottom_right}) {
      out.push_back({2, 4, 4, 17, 17, 64, causal, DType::fp32, backend});
      out.push_back({1, 8, 2, 257, 257, 128, causal, DType::fp32, backend});
      out.push_back({2, 4, 1, 128, 384, 64, causal, DType::fp32, backend});
    }
  // math and manual: rows longer than 2048 keys take the block-per-row softmax backward (element
  // by element at 2500 bf16 keys, in 16-byte packs at 2500 fp32 or 4096 bf16 keys).
  for (const char* backend : {"math", "manual:in_place", "manual:out_of_place"}) {
    out.push_back({1, 2, 1, 64, 2500, 64, CausalMode::none, DType::bf16, backend});
    out.push_back({1, 2, 2, 64, 4096, 128, CausalMode::bottom_right, DType::bf16, backend});
  }
  return out;
}

AttentionProblem windowed(AttentionProblem p) {
  p.window = {64, 0};
  return p;
}

std::string name_of(const BackwardCase& c) {
  std::string backend = c.backend;  // a test name takes letters, digits and underscores only
  for (char& ch : backend)
    if (ch == ':') ch = '_';
  return fmt::format("{}_{}_{}_b{}h{}kv{}_{}x{}_d{}", backend, to_string(c.dtype), to_string(c.causal), c.batch,
                     c.heads, c.heads_kv, c.seq_q, c.seq_kv, c.head_dim);
}

class Backward : public ::testing::TestWithParam<BackwardCase> {};

TEST_P(Backward, MatchesTheFloat64ReferenceGradients) {
  // The 333-row cases (flash, efficient, math, manual) run with a window of 64 keys to the left
  // (cudnn's cases take none).
  const bool window = GetParam().seq_q == 333;
  const AttentionProblem p = window ? windowed(problem_of(GetParam())) : problem_of(GetParam());
  const std::string name = GetParam().backend;
  auto backend = find_backend(name)->make();
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here(name, *backend));
  const std::string label = case_label(name, p);
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(name, p, label, backend->check_problem(p)));
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(name, p, label, backend->check_backward(p)));
  CudaStream stream;
  const std::uint64_t seed = std::random_device{}();  // fresh inputs every run; the seed is printed
  DeviceCase device(p, seed, stream.get());
  const Verification v = run_and_verify(*backend, device, stream.get());
  EXPECT_TRUE(v.passed) << case_label(name, p) << " seed " << seed << ": " << v.detail;
  EXPECT_GT(v.rows_checked, 0);
  std::printf("  %-60s dQ %.3e  dK %.3e  dV %.3e  (bound %.0e, %lld rows)\n", case_label(name, p).c_str(),
              v.dq_relative_error, v.dk_relative_error, v.dv_relative_error, v.bound,
              static_cast<long long>(v.rows_checked));

  // Run to run: the same inputs, poisoned again, a second backward; bitwise equal or not, said.
  const std::vector<float> first = device.read_gradients(stream.get());
  device.poison_gradients(stream.get());
  backend->run_backward(p, device.backward_buffers(), stream.get());
  CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  const std::vector<float> second = device.read_gradients(stream.get());
  ASSERT_EQ(first.size(), second.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < first.size(); ++i)
    if (std::memcmp(&first[i], &second[i], sizeof(float)) != 0) ++differ;
  std::printf("    run to run: %s\n", differ == 0 ? "bitwise identical"
                                                  : fmt::format("{} of {} gradient elements differ (not deterministic)",
                                                                differ, first.size())
                                                        .c_str());
}

INSTANTIATE_TEST_SUITE_P(Shapes, Backward, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name_of(info.param); });

// flash:fa2's tail kernel (kernels/flash_bwd/flash_bwd_order.hpp: the last blocks walked in equal
// runs by other blocks, parts of a block added by the last to arrive) on small problems, planned
// for 7 concurrent blocks through ATTNPROF_FLASH_BWD_SLOTS: the float64 reference gradients, and
// dK and dV bitwise equal run to run (the parts are added in a fixed order; dQ's atomics are not).
TEST(FlashBwdTail, PartsAddUpToTheReferenceGradientsInAFixedOrder) {
  if (const DeviceProperties d = query_device_properties(0); d.compute_major < 9)
    ATTNPROF_SKIP_BECAUSE(test::SkipReason::needs_compute_capability,
                          fmt::format("the tail kernel runs on compute capability 9.0 and up; {} is {}.{}", d.name,
                                      d.compute_major, d.compute_minor));
  constexpr int kSlots = 7;
  ASSERT_EQ(setenv("ATTNPROF_FLASH_BWD_SLOTS", std::to_string(kSlots).c_str(), 1), 0);
  struct Unset {
    ~Unset() { unsetenv("ATTNPROF_FLASH_BWD_SLOTS"); }
  } unset;
  const std::vector<BackwardCase> tail_cases = {
      {1, 8, 2, 257, 257, 128, CausalMode::none, DType::bf16, "flash:fa2"},   // parts crossing blocks, GQA
      {2, 4, 1, 128, 384, 64, CausalMode::none, DType::fp16, "flash:fa2"},    // 128-row steps, MQA
      {1, 4, 4, 129, 1000, 64, CausalMode::none, DType::bf16, "flash:fa2"},   // seq_q < seq_kv, a short key block
      {2, 4, 4, 17, 17, 128, CausalMode::none, DType::fp16, "flash:fa2"},     // blocks walked whole by the tail
      {1, 4, 4, 200, 136, 128, CausalMode::none, DType::bf16, "flash:fa2"}};  // seq_q > seq_kv
  for (const BackwardCase& c : tail_cases) {
    const AttentionProblem p = problem_of(c);
    const AttentionShape& s = p.shape;
    const kernels::FlashBwdTail tail =
        kernels::flash_bwd_tail_plan(mask_bounds(p), s.seq_q, s.seq_kv, s.kv_heads(), s.batch, s.group_size(),
                                     kernels::flash_bwd_step_rows(s.head_dim, false), kSlots, true);
    ASSERT_GT(tail.blocks, 0) << case_label(c.backend, p) << ": no tail planned, the test would not run it";
    auto backend = find_backend(c.backend)->make();
    ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(c.backend, p, case_label(c.backend, p), backend->check_backward(p)));
    CudaStream stream;
    const std::uint64_t seed = std::random_device{}();
    DeviceCase device(p, seed, stream.get());
    const Verification v = run_and_verify(*backend, device, stream.get());
    EXPECT_TRUE(v.passed) << case_label(c.backend, p) << " seed " << seed << ": " << v.detail;
    std::printf("  %-60s tail of %d blocks in %d runs of %d-step blocks: dQ %.3e  dK %.3e  dV %.3e\n",
                case_label(c.backend, p).c_str(), tail.blocks, tail.ctas, tail.steps, v.dq_relative_error,
                v.dk_relative_error, v.dv_relative_error);
    const std::vector<float> first = device.read_gradients(stream.get());
    device.poison_gradients(stream.get());
    backend->run_backward(p, device.backward_buffers(), stream.get());
    CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const std::vector<float> second = device.read_gradients(stream.get());
    const std::size_t dq = static_cast<std::size_t>(s.batch) * s.heads * s.seq_q * s.head_dim;
    ASSERT_EQ(first.size(), dq + 2 * static_cast<std::size_t>(s.batch) * s.kv_heads() * s.seq_kv * s.head_dim);
    ASSERT_EQ(second.size(), first.size());
    EXPECT_EQ(std::memcmp(first.data() + dq, second.data() + dq, (first.size() - dq) * sizeof(float)), 0)
        << case_label(c.backend, p) << ": dK or dV differ run to run";
  }
}

// The gradients are checked, not assumed: wrong ones (dK from another seed's run) fail.
TEST(CudnnBackwardChecks, GradientsOfOtherInputsFailVerification) {
  const AttentionProblem p = problem_of({1, 4, 2, 129, 129, 64, CausalMode::top_left, DType::bf16});
  auto backend = find_backend("cudnn")->make();
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("cudnn", *backend));
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here("cudnn", p, case_label("cudnn", p), backend->check_backward(p)));
  CudaStream stream;
  DeviceCase device(p, 11, stream.get());
  ASSERT_TRUE(run_and_verify(*backend, device, stream.get()).passed);
  const GradientOutputs got = device.read_gradient_rows(gradient_rows_to_check(p.shape), stream.get());
  EXPECT_TRUE(verify_gradients(p, 11, got).passed);
  EXPECT_FALSE(verify_gradients(p, 12, got).passed);  // the reference of other inputs
}

// Every backend but flash:hopper (its backward is head dim 128's only) has a backward for a plain
// dense problem at head dim 64, and a problem out of its reach gets a reason, never a fake pass:
// bias (none takes a dBias) and fp32 where only 16-bit kernels exist.
TEST(BackwardRefusals, EveryBackendHasOneAndSaysWhyWhereNot) {
  const AttentionProblem p = problem_of({1, 2, 2, 64, 64, 64, CausalMode::none, DType::bf16});
  AttentionProblem with_bias = p;
  with_bias.has_bias = true;
  for (const BackendInfo& info : backend_registry()) {
    const std::unique_ptr<AttentionBackend> backend = info.make();
    const Unsupported why = backend->check_backward(p);
    const Unsupported bias = backend->check_backward(with_bias);
    std::printf("  %-22s backward: %s; with a bias: %s\n", info.name.c_str(), why ? why->c_str() : "yes",
                bias ? bias->c_str() : "yes");
    if (info.name == "flash:hopper") {
      ASSERT_TRUE(why.has_value()) << "flash:hopper has no head dim 64 backward kernel";
      EXPECT_NE(why->find("flash:fa2"), std::string::npos) << *why;  // it says which variant has one
      continue;
    }
    EXPECT_FALSE(why.has_value()) << info.name << ": " << why.value_or("");
    if (bias) {
      EXPECT_FALSE(bias->empty()) << info.name;
    }
  }
}

}  // namespace
}  // namespace attnprof
