// The whole run on a GPU: math and both manual variants over causal and full cases. The trace
// must be valid JSON in the Kineto schema, and the summary must show what the design promises:
// one D2D memcpy per causal iteration for manual:out_of_place, none for manual:in_place, and
// ten or more kernels per iteration for math.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.hpp"
#include "commands/run.hpp"
#include "config/config.hpp"

namespace attnprof {
namespace {

Config small_config() {
  const char* text = R"({
    "backends": ["math", "manual"], "dtypes": ["bf16"], "causal": [false, true],
    "shapes": [{"batch": 2, "heads": 4, "seq_q": 257, "seq_kv": 300, "head_dim": 64}],
    "warmup": 1, "iterations": 5,
    "expect": [{"backend": "manual:out_of_place", "causal": true, "memcpy_per_iter": 0}]
  })";
  return parse_config(text, "run_test", accepted_backend_names());
}

TEST(Run, ManualAndMathShowTheirSignatures) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnprof_run_test";
  std::filesystem::remove_all(out);
  RunOptions options;
  options.config = small_config();
  options.backends = expand_backend_names(options.config.backends);
  options.out_dir = out;
  options.progress = stdout;
  const RunOutcome outcome = run_sweep(options);
  EXPECT_EQ(outcome.exit_code, 0);

  std::map<std::string, const CaseSummary*> cases;
  for (const CaseSummary& c : outcome.summary.cases) {
    cases[c.label] = &c;
    EXPECT_EQ(c.status, CaseStatus::ok) << c.label << ": " << c.reason;
    EXPECT_TRUE(c.verified && c.verify_passed) << c.label << " rel.err " << c.relative_error;
    EXPECT_EQ(c.iterations, 5);
  }
  const CaseSummary& out_of_place = *cases.at("manual:out_of_place bf16 causal 2x4x257x300x64");
  const CaseSummary& in_place = *cases.at("manual:in_place bf16 causal 2x4x257x300x64");
  EXPECT_EQ(out_of_place.memcpy_per_iter, 1.0);
  EXPECT_EQ(in_place.memcpy_per_iter, 0.0);
  EXPECT_EQ(out_of_place.memcpy_bytes_per_iter, 2.0 * 4 * 257 * 300 * 2);
  EXPECT_EQ(cases.at("manual:in_place bf16 full 2x4x257x300x64")->kernels_per_iter, 4.0);
  EXPECT_EQ(in_place.kernels_per_iter, 7.0);
  ASSERT_EQ(out_of_place.surprises.size(), 1u);  // the guess "memcpy_per_iter: 0" is wrong
  EXPECT_EQ(out_of_place.surprises[0].field, "memcpy_per_iter");
  EXPECT_TRUE(in_place.surprises.empty());
  EXPECT_GE(cases.at("math bf16 full 2x4x257x300x64")->kernels_per_iter, 14.0);
  EXPECT_GE(cases.at("math bf16 causal 2x4x257x300x64")->kernels_per_iter, 20.0);

  std::ifstream in(outcome.trace_path);
  const nlohmann::json trace = nlohmann::json::parse(in);  // throws if invalid
  EXPECT_EQ(trace.at("schemaVersion"), 1);
  EXPECT_TRUE(trace.at("baseTimeNanoseconds").is_number_unsigned());
  EXPECT_EQ(trace.at("attnprof").at("capture").at("dropped_records"), 0);
  std::set<std::uint64_t> flow_starts, flow_ends;
  std::size_t kernels = 0, memcpys = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "s") flow_starts.insert(e.at("id").get<std::uint64_t>());
    if (ph == "f") {
      flow_ends.insert(e.at("id").get<std::uint64_t>());
      EXPECT_EQ(e.at("bp"), "e");
    }
    if (ph == "X" && e.at("cat") == "kernel") {
      ++kernels;
      EXPECT_TRUE(e.at("args").contains("registers per thread"));
      EXPECT_TRUE(e.at("args").contains("theoretical occupancy %"));
    }
    if (ph == "X" && e.at("cat") == "gpu_memcpy") ++memcpys;
  }
  EXPECT_GT(kernels, 0u);
  EXPECT_GT(memcpys, 0u);
  EXPECT_EQ(flow_starts, flow_ends);  // every launch reaches its GPU work and back
}

}  // namespace
}  // namespace attnprof
