// Every registered backend against the float64 CPU reference on fresh random inputs: odd
// lengths, seq_q != seq_kv, every head dim, every dtype, both causal settings, bias.
// Outputs are poisoned before each run; combinations a backend rejects are skipped with its reason.
#include <cctype>
#include <cstdio>
#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
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
  const DeviceProperties device = query_device_properties(0);
  if (auto reason = backend.check_device(device)) GTEST_SKIP() << *reason;
  if (auto reason = backend.check_problem(c.problem)) GTEST_SKIP() << *reason;

  // A fresh seed per test and per process run: the kernel must be right on any input.
  const std::uint64_t seed = std::random_device{}();
  CudaStream stream;
  DeviceCase device_case(c.problem, seed, stream.get());
  Verification v;
  try {
    v = run_and_verify(backend, device_case, stream.get());
  } catch (const BackendUnsupportedError& e) {
    GTEST_SKIP() << "the plan build rejected it: " << e.what();
  }
  RecordProperty("relative_error", fmt::format("{:.3e}", v.relative_error));
  EXPECT_TRUE(v.passed) << case_label(c.backend, c.problem) << " seed " << seed << ": " << v.detail;
  EXPECT_EQ(v.non_finite, 0);
  std::printf("  %-60s rel.err %.3e (bound %.0e, %lld rows)\n", case_label(c.backend, c.problem).c_str(),
              v.relative_error, v.bound, static_cast<long long>(v.rows_checked));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendCorrectness, testing::ValuesIn(all_cases()), test_name);

}  // namespace
}  // namespace attnprof
