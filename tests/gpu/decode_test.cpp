// flash's decode path (kernels/decode) against the float64 reference: dense, ragged and paged
// K/V, packed q, seq_q != seq_kv, causal in both alignments and windows, head dims 64 and 128,
// bf16 and fp16, split and unsplit; the kernels one call launches (counted and named through a
// captured graph) and the reasons the backend gives for what it rejects.
#include <cctype>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

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

// flash:hopper takes the same decode path (lib/backends/flash.cpp, SplitKvDecode).
AttentionBackend& flash_hopper() {
  static const std::unique_ptr<AttentionBackend> backend = find_backend("flash:hopper")->make();
  return *backend;
}

struct DecodeCase {
  AttentionProblem problem;
  std::string what;  // a readable tag for the test name
};

AttentionProblem decode_problem(int batch, int heads, int heads_kv, int seq_q, int seq_kv, int head_dim, DType dtype,
                                CausalMode causal, AttentionWindow window = {}) {
  AttentionProblem p;
  p.shape.batch = batch;
  p.shape.heads = heads;
  p.shape.seq_q = seq_q;
  p.shape.seq_kv = seq_kv;
  p.shape.head_dim = head_dim;
  p.shape.heads_kv = heads_kv;
  p.dtype = dtype;
  set_causal_mode(p, causal);
  p.window = window;
  return p;
}

std::vector<DecodeCase> decode_cases() {
  std::vector<DecodeCase> cases;
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int d : {64, 128}) {
      const char* dt = dtype == DType::bf16 ? "bf16" : "fp16";
      auto add = [&](AttentionProblem p, const std::string& what) {
        cases.push_back({std::move(p), std::string(dt) + "_d" + std::to_string(d) + "_" + what});
      };
      // Dense: one query row against odd key counts, grouped and not; a full 16-row tile.
      add(decode_problem(2, 8, 2, 1, 1000, d, dtype, CausalMode::none), "dense_1x1000");
      add(decode_problem(3, 4, 4, 1, 17, d, dtype, CausalMode::bottom_right), "dense_mha_1x17_br");
      add(decode_problem(1, 8, 8, 1, 1, d, dtype, CausalMode::none), "dense_1x1");
      add(decode_problem(2, 16, 4, 4, 300, d, dtype, CausalMode::bottom_right), "dense_16rows_br");
      add(decode_problem(2, 8, 2, 3, 129, d, dtype, CausalMode::top_left), "dense_3x129_top_left");
      add(decode_problem(1, 8, 1, 2, 700, d, dtype, CausalMode::bottom_right, {100, 0}), "dense_window_br");
      add(decode_problem(2, 4, 2, 5, 3, d, dtype, CausalMode::bottom_right), "dense_sq_gt_skv_br");
      // Split: two blocks against 20000 keys; unsplit: a full wave of blocks.
      add(decode_problem(1, 8, 2, 1, 20000, d, dtype, CausalMode::none), "split_1x20000");
      add(decode_problem(1, 32, 8, 1, 9000, d, dtype, CausalMode::bottom_right, {4000, 0}), "split_window");
      add(decode_problem(66, 8, 4, 1, 200, d, dtype, CausalMode::none), "unsplit_full_wave");
      // Unsplit over more than two waves (each block warms L2 for the block a wave after it):
      // fewer keys than the prefetch's, and a window that starts past key 0.
      add(decode_problem(150, 8, 4, 1, 77, d, dtype, CausalMode::none), "unsplit_waves_1x77");
      add(decode_problem(150, 8, 4, 1, 300, d, dtype, CausalMode::bottom_right, {100, 0}), "unsplit_waves_window");
      // Ragged K/V (packed), lengths 1, 17 and the maximum; ragged q too.
      AttentionProblem ragged = decode_problem(3, 8, 2, 1, 2500, d, dtype, CausalMode::bottom_right);
      ragged.shape.seq_lens_kv = {1, 17, 2500};
      add(ragged, "ragged_kv");
      AttentionProblem ragged_q = decode_problem(3, 8, 4, 3, 400, d, dtype, CausalMode::bottom_right);
      ragged_q.shape.seq_lens_q = {1, 3, 2};
      ragged_q.shape.seq_lens_kv = {17, 1, 400};
      add(ragged_q, "ragged_q_and_kv");
      AttentionProblem ragged_split = decode_problem(2, 8, 2, 1, 30000, d, dtype, CausalMode::none);
      ragged_split.shape.seq_lens_kv = {30000, 17};
      add(ragged_split, "ragged_split");
      // Paged K/V: pages of 16 and 64, ragged lengths, split and not.
      for (int page : {16, 64}) {
        AttentionProblem paged = decode_problem(3, 8, 2, 1, 1000, d, dtype, CausalMode::bottom_right);
        paged.shape.page_size = page;
        paged.shape.seq_lens_kv = {1, 17, 1000};
        add(paged, "paged" + std::to_string(page));
        AttentionProblem paged_split = decode_problem(1, 32, 8, 1, 20000, d, dtype, CausalMode::bottom_right);
        paged_split.shape.page_size = page;
        add(paged_split, "paged" + std::to_string(page) + "_split");
      }
    }
  return cases;
}

std::string case_name(const testing::TestParamInfo<DecodeCase>& info) {
  std::string name = info.param.what;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class FlashDecode : public testing::TestWithParam<DecodeCase> {};

TEST_P(FlashDecode, OutputAndLogsumexpMatchFloat64Reference) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  const AttentionProblem& problem = GetParam().problem;
  ASSERT_FALSE(flash().check_problem(problem).has_value()) << *flash().check_problem(problem);
  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(problem, seed, stream.get());
  const Verification v = run_and_verify(flash(), device_case, stream.get(), {.compare_lse = true});
  EXPECT_TRUE(v.passed) << GetParam().what << " seed " << seed << ": " << v.detail;
  EXPECT_EQ(v.non_finite, 0);
  EXPECT_GT(v.rows_checked, 0);
  std::printf("  %-40s rel.err %.3e  lse max.abs %.3e\n", GetParam().what.c_str(), v.relative_error,
              v.lse_max_abs_error);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashDecode, testing::ValuesIn(decode_cases()), case_name);

// A split problem called again and again: whatever state the split path keeps between calls
// (its workspace, its arrival counters) must leave every call's output right.
TEST(FlashDecode, SplitStaysRightOverRepeatedCalls) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  AttentionProblem problem = decode_problem(2, 32, 8, 1, 40000, 128, DType::bf16, CausalMode::bottom_right);
  problem.shape.seq_lens_kv = {40000, 333};
  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(problem, seed, stream.get());
  for (int call = 0; call < 4; ++call) {
    const Verification v = run_and_verify(flash(), device_case, stream.get(), {.compare_lse = true});
    EXPECT_TRUE(v.passed) << "call " << call << " seed " << seed << ": " << v.detail;
    EXPECT_EQ(v.non_finite, 0) << "call " << call;
  }
}

// The kernels one run() launches, by name, from a graph captured around it.
std::vector<std::string> launched_kernels(const AttentionProblem& problem, AttentionBackend& backend = flash()) {
  CudaStream stream;
  DeviceCase device_case(problem, 1, stream.get());
  backend.prepare(problem, stream.get());
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  backend.run(problem, device_case.buffers(), stream.get());
  CUDA_CHECK(cudaStreamEndCapture(stream.get(), &graph));
  std::size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  std::vector<std::string> names;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) {
      names.push_back("(not a kernel)");
      continue;
    }
    cudaKernelNodeParams params{};
    CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &params));
    const char* name = nullptr;
    CUDA_CHECK(cudaFuncGetName(&name, params.func));
    names.emplace_back(name != nullptr ? name : "");
  }
  CUDA_CHECK(cudaGraphDestroy(graph));
  return names;
}

TEST(FlashDecode, OneKernelUnsplitTwoWhenSplit) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:fa2", flash()));
  const std::vector<std::string> unsplit =
      launched_kernels(decode_problem(66, 8, 4, 1, 200, 128, DType::bf16, CausalMode::none));
  ASSERT_EQ(unsplit.size(), 1u);
  EXPECT_NE(unsplit[0].find("decode"), std::string::npos) << unsplit[0];
  EXPECT_EQ(unsplit[0].find("splitkv"), std::string::npos) << unsplit[0];
  // One block on every SM (as many sequences as SMs, one K/V head) against 8192 keys: a split
  // would fill the second slots, but these blocks already keep DRAM busy; not split either.
  const int sms = query_device_properties(0).sm_count;
  const std::vector<std::string> one_per_sm =
      launched_kernels(decode_problem(sms, 4, 1, 1, 8192, 128, DType::bf16, CausalMode::none));
  ASSERT_EQ(one_per_sm.size(), 1u) << sms << " SMs";
  EXPECT_EQ(one_per_sm[0].find("splitkv"), std::string::npos) << one_per_sm[0];

  const std::vector<std::string> split =
      launched_kernels(decode_problem(1, 32, 8, 1, 131072, 128, DType::bf16, CausalMode::none));
  ASSERT_EQ(split.size(), 2u);
  int splitkv = 0, combine = 0;
  for (const std::string& name : split) {
    if (name.find("decode") != std::string::npos && name.find("splitkv") != std::string::npos) ++splitkv;
    if (name.find("combine") != std::string::npos) ++combine;
  }
  EXPECT_EQ(splitkv, 1) << split[0] << " / " << split[1];
  EXPECT_EQ(combine, 1) << split[0] << " / " << split[1];
}

TEST(FlashDecode, RejectsPagesThatSplitATile) {
  for (AttentionBackend* backend : {&flash(), &flash_hopper()}) {
    AttentionProblem p = decode_problem(2, 8, 2, 1, 100, 128, DType::bf16, CausalMode::none);
    p.shape.page_size = 24;
    ASSERT_TRUE(backend->check_problem(p).has_value());
    EXPECT_NE(backend->check_problem(p)->find("multiple of 16"), std::string::npos) << *backend->check_problem(p);
    p.shape.page_size = 32;
    EXPECT_FALSE(backend->check_problem(p).has_value()) << *backend->check_problem(p);
  }
  // flash:hopper's prefill kernel takes dense batches only: a paged prefill is flash:fa2's.
  AttentionProblem prefill = decode_problem(2, 8, 2, 64, 100, 128, DType::bf16, CausalMode::none);
  prefill.shape.page_size = 32;
  EXPECT_FALSE(flash().check_problem(prefill).has_value());
  ASSERT_TRUE(flash_hopper().check_problem(prefill).has_value());
  EXPECT_NE(flash_hopper().check_problem(prefill)->find("run on flash:fa2"), std::string::npos);
}

// flash:hopper's decode is flash:fa2's split-KV path: the same kernels, split or not, and right
// against the float64 reference on a paged, ragged cache split over the keys.
TEST(FlashDecode, HopperRunsTheSplitKvDecodeKernels) {
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here("flash:hopper", flash_hopper()));
  for (const AttentionProblem& p : {decode_problem(66, 8, 4, 1, 200, 128, DType::bf16, CausalMode::none),
                                    decode_problem(1, 32, 8, 1, 131072, 128, DType::bf16, CausalMode::none)}) {
    const std::vector<std::string> hopper = launched_kernels(p, flash_hopper());
    EXPECT_EQ(hopper, launched_kernels(p, flash()));
    for (const std::string& name : hopper) EXPECT_EQ(name.find("hopper"), std::string::npos) << name;
  }
  AttentionProblem paged = decode_problem(3, 32, 8, 1, 20000, 64, DType::fp16, CausalMode::bottom_right);
  paged.shape.seq_lens_kv = {20000, 1, 777};
  paged.shape.page_size = 64;
  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(paged, seed, stream.get());
  const Verification v = run_and_verify(flash_hopper(), device_case, stream.get(), {.compare_lse = true});
  EXPECT_TRUE(v.passed) << "seed " << seed << ": " << v.detail;
}

}  // namespace
}  // namespace attnprof
