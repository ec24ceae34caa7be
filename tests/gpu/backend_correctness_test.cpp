// Every registered backend against the float64 CPU reference on fresh random inputs: odd
// lengths, seq_q != seq_kv, every head dim, every dtype, both causal settings, bias; then the
// workloads (grouped K/V heads 8/2 and 8/1, sliding windows, top-left and bottom-right masks,
// rows that see no key). Outputs are poisoned before each run. A combination a backend refuses
// is skipped only where the refusal policy (refusals_here.hpp) accepts it: a requirement this
// machine lacks, or what `attnprof backends`' table of that backend (or its documented rule)
// refuses; any other refusal fails the case. What each backend must reject is checked for a
// reason too.
#include <cctype>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "backends/cudnn_info.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "refusals_here.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

struct CorrectnessCase {
  std::string backend;
  AttentionProblem problem;
};

std::vector<CorrectnessCase> all_cases() {
  const std::vector<AttentionShape> shapes = {
      {1, 2, 1, 1, 0},     {1, 2, 17, 17, 0},     {2, 3, 1000, 1000, 0}, {1, 2, 4097, 4097, 0},
      {1, 2, 17, 1000, 0}, {1, 2, 1000, 17, 0},   {2, 2, 129, 257, 0},
  };
  const std::vector<AttentionShape> small_shapes = {{1, 2, 17, 17, 0}, {2, 3, 1000, 1000, 0}, {1, 2, 17, 1000, 0}};
  std::vector<CorrectnessCase> cases;
  for (const BackendInfo& info : backend_registry()) {
    auto add = [&](AttentionShape shape, int head_dim, DType dtype, bool causal, bool bias) {
      shape.head_dim = head_dim;
      AttentionProblem p;
      p.shape = shape;
      p.dtype = dtype;
      p.causal = causal;
      p.has_bias = bias;
      cases.push_back({info.name, p});
    };
    for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
      for (int d : {64, 128})
        for (const AttentionShape& s : shapes)
          for (bool causal : {false, true}) add(s, d, dtype, causal, false);
    for (DType dtype : {DType::bf16, DType::fp32})
      for (int d : {40, 96, 160, 256})
        for (const AttentionShape& s : small_shapes)
          for (bool causal : {false, true}) add(s, d, dtype, causal, false);
    for (DType dtype : {DType::bf16, DType::fp32})
      for (const AttentionShape& s : {AttentionShape{1, 2, 17, 1000, 0}, AttentionShape{2, 3, 1000, 1000, 0}})
        for (bool causal : {false, true}) add(s, 64, dtype, causal, true);
  }
  return cases;
}

std::string test_name(const testing::TestParamInfo<CorrectnessCase>& info) {
  std::string name = case_label(info.param.backend, info.param.problem);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

AttentionBackend& backend_instance(const std::string& name) {
  static std::map<std::string, std::unique_ptr<AttentionBackend>> instances;
  auto& slot = instances[name];
  if (!slot) slot = find_backend(name)->make();
  return *slot;
}

class BackendCorrectness : public testing::TestWithParam<CorrectnessCase> {};

TEST_P(BackendCorrectness, MatchesFloat64Reference) {
  const CorrectnessCase& c = GetParam();
  AttentionBackend& backend = backend_instance(c.backend);
  const std::string label = case_label(c.backend, c.problem);
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here(c.backend, backend));
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(c.backend, c.problem, label, backend.check_problem(c.problem)));

  // A fresh seed per test and per process run: the kernel must be right on any input.
  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(c.problem, seed, stream.get());
  Verification v;
  Unsupported plan_refusal;
  try {
    v = run_and_verify(backend, device_case, stream.get());
  } catch (const BackendUnsupportedError& e) {
    plan_refusal = std::string("the plan build rejected it: ") + e.what();
  }
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(c.backend, c.problem, label, plan_refusal));
  RecordProperty("relative_error", fmt::format("{:.3e}", v.relative_error));
  EXPECT_TRUE(v.passed) << case_label(c.backend, c.problem) << " seed " << seed << ": " << v.detail;
  EXPECT_EQ(v.non_finite, 0);
  std::printf("  %-60s rel.err %.3e (bound %.0e, %lld rows)\n", case_label(c.backend, c.problem).c_str(),
              v.relative_error, v.bound, static_cast<long long>(v.rows_checked));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendCorrectness, testing::ValuesIn(all_cases()), test_name);

// flash:hopper's persistent grid with more work tiles than SMs: every block walks several tiles
// and crosses their boundaries (with 176-key tiles its pipeline runs across them), including
// work tiles of a single key tile (seq_kv <= 176) and odd lengths; the 128-key kernels too.
std::vector<CorrectnessCase> persistent_cases() {
  struct Spec {
    AttentionShape shape;
    DType dtype;
    bool causal;
  };
  const std::vector<Spec> specs = {
      {{4, 8, 2049, 333, 128}, DType::bf16, false},  // 544 work tiles of 2 key tiles
      {{2, 4, 4001, 100, 128}, DType::bf16, false},  // 256 work tiles of one key tile
      {{3, 8, 1025, 1001, 128}, DType::fp16, false},  // 216 work tiles of 6 key tiles
      {{4, 8, 2049, 333, 64}, DType::bf16, false},   // 128-key tiles
      {{4, 8, 2049, 333, 128}, DType::bf16, true},   // 128-key tiles under a band
  };
  std::vector<CorrectnessCase> cases;
  for (const Spec& spec : specs) {
    AttentionProblem p;
    p.shape = spec.shape;
    p.dtype = spec.dtype;
    p.causal = spec.causal;
    cases.push_back({"flash:hopper", p});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Persistent, BackendCorrectness, testing::ValuesIn(persistent_cases()), test_name);

// ---------------------------------------------------------------------------------------------
// Workloads: GQA/MQA, windows, mask alignment.

struct MaskSpec {
  bool causal;
  AttentionWindow window;
  MaskAlignment alignment;
};

AttentionProblem workload(AttentionShape shape, int heads_kv, int head_dim, DType dtype, const MaskSpec& mask,
                          bool bias = false) {
  shape.heads_kv = heads_kv;
  shape.head_dim = head_dim;
  AttentionProblem p;
  p.shape = shape;
  p.dtype = dtype;
  p.causal = mask.causal;
  p.window = mask.window;
  p.alignment = mask.alignment;
  p.has_bias = bias;
  return p;
}

// case_label() names neither K/V heads, nor window, nor alignment: the tests name them all.
std::string workload_label(const std::string& backend, const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  std::string mask = p.causal ? "causal" : "full";
  if (p.window.bounded()) mask += fmt::format(" window[{},{}]", p.window.left, p.window.right);
  if ((p.causal || p.window.bounded()) && p.is_bottom_right()) mask += " bottom_right";
  return fmt::format("{} {} {}{} {}x{}/{}x{}x{}x{}", backend, to_string(p.dtype), mask, p.has_bias ? " bias" : "",
                     s.batch, s.heads, s.kv_heads(), s.seq_q, s.seq_kv, s.head_dim);
}

bool writes_logsumexp(const std::string& backend) { return backend.rfind("flash", 0) == 0 || backend == "efficient"; }

std::vector<CorrectnessCase> workload_cases() {
  constexpr auto tl = MaskAlignment::top_left;
  constexpr auto br = MaskAlignment::bottom_right;
  const std::vector<MaskSpec> masks = {
      {false, {-1, -1}, tl}, {true, {-1, -1}, tl},  {true, {-1, -1}, br},  {false, {3, 0}, tl},
      {false, {3, 0}, br},   {false, {64, 0}, tl},  {false, {64, 0}, br},  {false, {17, 5}, tl},
      {false, {17, 5}, br},  {false, {-1, 4}, tl},  {false, {-1, 4}, br},  {true, {17, 5}, tl},
      {true, {17, 5}, br},   {true, {300, -1}, br},
  };
  // Odd lengths, seq_q != seq_kv both ways (bottom-right with seq_q > seq_kv and windows leave
  // rows with no key), decode, and one long enough for unmasked tiles between two masked edges.
  const std::vector<std::pair<int, int>> lengths = {{1, 1}, {17, 17}, {33, 255}, {255, 33}, {1, 255}, {1000, 1000}};
  struct Heads {
    int batch, heads, heads_kv;
  };
  const std::vector<Heads> head_layouts = {{2, 8, 8}, {1, 8, 2}, {2, 8, 1}};
  // Head dim and dtype rotate over the cross product above, so each pair meets every mask.
  const std::vector<std::pair<int, DType>> kinds = {{64, DType::bf16}, {128, DType::fp16}, {128, DType::bf16},
                                                    {64, DType::fp16}};
  // What only some backends run: fp32, head dims off 64/128, bias. Heads of 33 x 36 bf16 and
  // 33 x 34 fp32 elements are no whole number of 16-byte packs: repeat_interleave's element path.
  const std::vector<std::pair<int, DType>> extra_kinds = {
      {64, DType::fp32}, {128, DType::fp32}, {40, DType::bf16}, {96, DType::fp16},
      {256, DType::bf16}, {256, DType::fp32}, {36, DType::bf16}, {34, DType::fp32}};
  const std::vector<MaskSpec> extra_masks = {masks[2], masks[6], masks[8], masks[12]};

  std::vector<CorrectnessCase> cases;
  for (const BackendInfo& info : backend_registry()) {
    std::size_t index = 0;
    for (const MaskSpec& mask : masks)
      for (auto [seq_q, seq_kv] : lengths)
        for (const Heads& h : head_layouts) {
          const auto [head_dim, dtype] = kinds[index++ % kinds.size()];
          cases.push_back({info.name, workload({h.batch, h.heads, seq_q, seq_kv}, h.heads_kv, head_dim, dtype, mask)});
        }
    for (const MaskSpec& mask : extra_masks)
      for (auto [seq_q, seq_kv] : {std::pair{33, 255}, std::pair{255, 33}})
        for (auto [head_dim, dtype] : extra_kinds)
          cases.push_back({info.name, workload({1, 8, seq_q, seq_kv}, 2, head_dim, dtype, mask)});
    for (const MaskSpec& mask : {masks[2], masks[7]})
      for (DType dtype : {DType::bf16, DType::fp32})
        cases.push_back({info.name, workload({2, 8, 33, 255}, 2, 64, dtype, mask, true)});
  }
  return cases;
}

std::string workload_test_name(const testing::TestParamInfo<CorrectnessCase>& info) {
  std::string name = workload_label(info.param.backend, info.param.problem);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class WorkloadCorrectness : public testing::TestWithParam<CorrectnessCase> {};

// One case against the reference on a fresh seed, the logsumexp compared where the backend
// writes one; a refusal skips it where the refusal policy accepts it, and fails it otherwise.
// (Called last in a test body: its skip or failure ends the test.)
void expect_matches_reference(const CorrectnessCase& c, const std::string& label) {
  AttentionBackend& backend = backend_instance(c.backend);
  ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here(c.backend, backend));
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(c.backend, c.problem, label, backend.check_problem(c.problem)));

  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(c.problem, seed, stream.get());
  Verification v;
  Unsupported plan_refusal;
  try {
    v = run_and_verify(backend, device_case, stream.get(), {.compare_lse = writes_logsumexp(c.backend)});
  } catch (const BackendUnsupportedError& e) {
    plan_refusal = std::string("the plan build rejected it: ") + e.what();
  }
  ATTNPROF_SKIP_OR_FAIL(test::case_refusal_here(c.backend, c.problem, label, plan_refusal));
  EXPECT_TRUE(v.passed) << label << " seed " << seed << ": " << v.detail;
  EXPECT_EQ(v.non_finite, 0);
  EXPECT_GT(v.rows_checked, 0);
  std::printf("  %-64s rel.err %.3e (bound %.0e, %lld rows)\n", label.c_str(), v.relative_error, v.bound,
              static_cast<long long>(v.rows_checked));
}

TEST_P(WorkloadCorrectness, MatchesFloat64Reference) {
  expect_matches_reference(GetParam(), workload_label(GetParam().backend, GetParam().problem));
}

INSTANTIATE_TEST_SUITE_P(Workloads, WorkloadCorrectness, testing::ValuesIn(workload_cases()), workload_test_name);

// ---------------------------------------------------------------------------------------------
// Ragged batches and paged caches: packed q/o and k/v with lengths 1, 17 and the maximum, paged
// K/V in pages of 16 and 64 through a shuffled block table, decode (one query token) and prefill,
// every causal setting (bottom-right follows each sequence's own lengths), a window, GQA. Every
// backend gets every case; what one refuses is skipped or failed as the refusal policy says.

struct RaggedSpec {
  AttentionShape shape;
  std::vector<int> lens_q, lens_kv;
  int page_size;
};

std::vector<CorrectnessCase> ragged_cases() {
  const std::vector<RaggedSpec> specs = {
      // prefill: packed q and k/v, equal per sequence, and seq_q != seq_kv
      {{3, 8, 300, 300, 0, 2}, {1, 17, 300}, {1, 17, 300}, 0},
      {{3, 8, 300, 300, 0, 2}, {17, 300, 1}, {33, 300, 255}, 0},
      {{3, 8, 300, 300, 0, 2}, {1, 17, 300}, {1, 17, 300}, 64},  // packed q, paged k/v
      // decode: one query token against ragged, paged caches
      {{3, 8, 1, 4097, 0, 2}, {}, {1, 17, 4097}, 16},
      {{3, 8, 1, 4097, 0, 2}, {}, {1, 17, 4097}, 0},
      {{2, 32, 1, 2048, 0, 8}, {}, {}, 64},
      {{2, 32, 1, 2048, 0, 8}, {}, {}, 16},
      {{4, 8, 4, 1000, 0, 1}, {}, {1000, 17, 4, 999}, 16},  // a few query tokens, MQA
  };
  constexpr auto tl = MaskAlignment::top_left;
  constexpr auto br = MaskAlignment::bottom_right;
  const std::vector<MaskSpec> masks = {{false, {-1, -1}, tl}, {true, {-1, -1}, tl}, {true, {-1, -1}, br},
                                       {true, {64, -1}, br}};
  const std::vector<std::pair<int, DType>> kinds = {{128, DType::bf16}, {64, DType::fp16}, {64, DType::bf16},
                                                    {128, DType::fp16}};
  std::vector<CorrectnessCase> cases;
  for (const BackendInfo& info : backend_registry()) {
    std::size_t index = 0;
    for (const RaggedSpec& spec : specs)
      for (const MaskSpec& mask : masks) {
        const auto [head_dim, dtype] = kinds[index++ % kinds.size()];
        AttentionProblem p = workload(spec.shape, spec.shape.heads_kv, head_dim, dtype, mask);
        p.shape.seq_lens_q = spec.lens_q;
        p.shape.seq_lens_kv = spec.lens_kv;
        p.shape.page_size = spec.page_size;
        cases.push_back({info.name, p});
      }
    // fp32 where a backend takes it (efficient, math)
    AttentionProblem p = workload({3, 8, 300, 300, 0, 2}, 2, 64, DType::fp32, masks[2]);
    p.shape.seq_lens_q = p.shape.seq_lens_kv = {1, 17, 300};
    cases.push_back({info.name, p});
  }
  return cases;
}

std::string ragged_test_name(const testing::TestParamInfo<CorrectnessCase>& info) {
  std::string name = workload_label(info.param.backend, info.param.problem) + " " + layout_label(info.param.problem.shape);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name + "_" + std::to_string(info.index);
}

class RaggedCorrectness : public testing::TestWithParam<CorrectnessCase> {};

TEST_P(RaggedCorrectness, MatchesFloat64ReferencePerSequence) {
  const CorrectnessCase& c = GetParam();
  expect_matches_reference(c, workload_label(c.backend, c.problem) + " " + layout_label(c.problem.shape));
}

INSTANTIATE_TEST_SUITE_P(RaggedAndPaged, RaggedCorrectness, testing::ValuesIn(ragged_cases()), ragged_test_name);

// flash (both variants) and efficient: a row that sees no key writes zeros (the verifier checks
// those) and a logsumexp of -inf, on every row the reference leaves empty.
TEST(WorkloadCorrectness, RowsThatSeeNoKeyHaveMinusInfinityLogsumexp) {
  const std::vector<MaskSpec> masks = {{true, {-1, -1}, MaskAlignment::bottom_right},
                                       {false, {3, 0}, MaskAlignment::top_left},
                                       {false, {-1, 4}, MaskAlignment::bottom_right}};
  for (const std::string name : {"flash:fa2", "efficient", "flash:hopper"}) {
    AttentionBackend& backend = backend_instance(name);
    ATTNPROF_SKIP_OR_FAIL(test::device_refusal_here(name, backend));
    for (const MaskSpec& mask : masks)
      for (auto [seq_q, seq_kv] : {std::pair{255, 33}, std::pair{300, 17}}) {
        const AttentionProblem p = workload({2, 4, seq_q, seq_kv}, 2, 128, DType::bf16, mask);
        int empty_rows = 0;
        for (int row = 0; row < seq_q; ++row) empty_rows += visible_keys(p, row, seq_q, seq_kv).count() == 0;
        ASSERT_GT(empty_rows, 0) << workload_label(name, p) << ": the case must have rows without keys";
        CudaStream stream;
        DeviceCase device_case(p, std::random_device{}(), stream.get());
        const Verification v = run_and_verify(backend, device_case, stream.get(), {.compare_lse = true});
        EXPECT_TRUE(v.passed) << workload_label(name, p) << ": " << v.detail;
        const std::vector<float> lse = device_case.read_lse(stream.get());
        for (std::size_t r = 0; r < lse.size(); ++r) {
          const int row = static_cast<int>(r % seq_q);
          if (visible_keys(p, row, seq_q, seq_kv).count() != 0) continue;
          ASSERT_TRUE(std::isinf(lse[r]) && lse[r] < 0)
              << workload_label(name, p) << ": row " << r << " sees no key; lse " << lse[r];
        }
      }
  }
}

// What a backend cannot run it rejects with a reason, before any memory is allocated.
TEST(WorkloadCorrectness, BackendsRejectWhatTheyCannotRunWithAReason) {
  const MaskSpec causal_br{true, {-1, -1}, MaskAlignment::bottom_right};
  const MaskSpec window{false, {17, 5}, MaskAlignment::top_left};
  const MaskSpec full{false, {-1, -1}, MaskAlignment::top_left};
  auto reason = [](const std::string& backend, const AttentionProblem& p) {
    return backend_instance(backend).check_problem(p).value_or("");
  };
  // heads not a multiple of heads_kv: everyone.
  for (const BackendInfo& info : backend_registry())
    EXPECT_NE(reason(info.name, workload({1, 8, 17, 17}, 3, 64, DType::bf16, full)), "") << info.name;
  // cudnn (cuDNN 9.10.2 and newer; the H100 and H200 machines of 2026-12 had 9.14 as the system
  // library and 9.19 in PyTorch's wheel): GQA, windows and
  // bottom-right bands run with seq_q <= seq_kv; rows that see no key, and left-bounded or
  // bottom-right bands with seq_q > seq_kv, are outside cuDNN's support (gpu_cudnn_test checks
  // the rules version by version).
  if (cudnn_runtime_version_number() >= 91002) {
    EXPECT_EQ(reason("cudnn", workload({1, 8, 17, 33}, 2, 64, DType::bf16, full)), "");
    EXPECT_EQ(reason("cudnn", workload({1, 8, 17, 33}, 1, 64, DType::bf16, window)), "");
    EXPECT_EQ(reason("cudnn", workload({1, 8, 17, 33}, 8, 64, DType::bf16, causal_br)), "");
    EXPECT_EQ(reason("cudnn", workload({1, 8, 33, 33}, 8, 64, DType::bf16, causal_br)), "");
    EXPECT_EQ(reason("cudnn", workload({1, 8, 255, 33}, 2, 64, DType::bf16, {false, {-1, 4}, MaskAlignment::top_left})),
              "");
    EXPECT_NE(reason("cudnn", workload({1, 8, 255, 33}, 2, 64, DType::bf16, causal_br)).find("see no key"),
              std::string::npos);
    EXPECT_NE(reason("cudnn", workload({1, 8, 255, 33}, 2, 64, DType::bf16, {false, {230, 0}, MaskAlignment::top_left}))
                  .find("seq_q 255 > seq_kv 33"),
              std::string::npos);
  }
  // manual: a row without keys would be NaN in the five-line softmax.
  for (const std::string name : {"manual:out_of_place", "manual:in_place"}) {
    EXPECT_NE(reason(name, workload({1, 8, 255, 33}, 2, 64, DType::bf16, causal_br)).find("sees no key"),
              std::string::npos);
    EXPECT_EQ(reason(name, workload({1, 8, 33, 255}, 2, 64, DType::bf16, causal_br)), "");
  }
  // flash (both variants), efficient and math run every mask and head layout.
  for (const std::string name : {"flash:fa2", "flash:hopper", "efficient", "math"})
    for (const MaskSpec& mask : {causal_br, window})
      EXPECT_EQ(reason(name, workload({1, 8, 255, 33}, 1, 64, DType::bf16, mask)), "") << name;
}

}  // namespace
}  // namespace attnprof
