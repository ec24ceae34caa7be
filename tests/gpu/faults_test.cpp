// Faults in the middle of a sweep: each affected case is recorded as failed or skipped with its
// reason, the rest runs, trace.json and summary.json stay valid, the exit code says what
// happened (3 for partial failure), dropped records are counted.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.hpp"
#include "core/errors.hpp"
#include "commands/run.hpp"

namespace attnprof {
namespace {

std::filesystem::path fresh_dir(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  return dir;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws on invalid JSON
}

RunOutcome run_config(const char* text, const std::filesystem::path& out, CollectorOptions collector = {}) {
  RunOptions options;
  options.config = parse_config(text, "faults_test", accepted_backend_names());
  options.backends = expand_backend_names(options.config.backends);
  options.out_dir = out;
  options.collector = collector;
  options.progress = stdout;
  return run_sweep(options);
}

TEST(Faults, UnsupportedCombinationsAreSkippedWithTheirReason) {
  const auto out = fresh_dir("attnprof_faults_unsupported");
  const RunOutcome r = run_config(R"({"backends": ["flash", "cudnn", "manual:in_place"], "dtypes": ["fp32"],
      "shapes": [{"batch": 1, "heads": 2, "seq_q": 64, "head_dim": 96}], "iterations": 2, "warmup": 0})", out);
  EXPECT_EQ(r.exit_code, kExitOk);
  ASSERT_EQ(r.summary.cases.size(), 3u);
  EXPECT_EQ(r.summary.cases[0].status, CaseStatus::skipped);
  EXPECT_FALSE(r.summary.cases[0].reason.empty());
  EXPECT_EQ(r.summary.cases[1].status, CaseStatus::skipped);
  EXPECT_NE(r.summary.cases[1].reason.find("fp32"), std::string::npos) << r.summary.cases[1].reason;
  EXPECT_EQ(r.summary.cases[2].status, CaseStatus::ok);  // manual runs fp32 and any head dim
  read_json(r.trace_path);
  EXPECT_EQ(read_json(r.summary_path).at("cases").size(), 3u);
}

TEST(Faults, AShapeTooLargeForTheGpuFailsAndTheSweepGoesOn) {
  const auto out = fresh_dir("attnprof_faults_oom");
  // 64 x 64 x 65536 x 128 bf16: each of q, k, v, o is 64 GiB.
  const RunOutcome r = run_config(R"({"backends": ["efficient", "manual:in_place"],
      "shapes": [{"batch": 64, "heads": 64, "seq_q": 65536, "head_dim": 128},
                 {"batch": 1, "heads": 2, "seq_q": 100, "head_dim": 64}], "iterations": 2, "warmup": 0})", out);
  EXPECT_EQ(r.exit_code, kExitPartialFailure);
  ASSERT_EQ(r.summary.cases.size(), 4u);
  EXPECT_EQ(r.summary.cases[0].status, CaseStatus::failed);
  EXPECT_NE(r.summary.cases[0].reason.find("GiB of device memory"), std::string::npos) << r.summary.cases[0].reason;
  EXPECT_EQ(r.summary.cases[1].status, CaseStatus::ok) << r.summary.cases[1].reason;
  EXPECT_EQ(r.summary.cases[2].status, CaseStatus::skipped);  // manual's own estimate rejects the huge shape
  EXPECT_EQ(r.summary.cases[3].status, CaseStatus::ok);
  EXPECT_EQ(read_json(r.summary_path).at("cases").at(0).at("status"), "failed");
}

TEST(Faults, ExhaustedCuptiBuffersAreCountedAndFailTheAffectedCases) {
  const auto out = fresh_dir("attnprof_faults_buffers");
  CollectorOptions tiny;
  tiny.buffer_bytes = 2048;
  tiny.max_buffers = 1;
  const RunOutcome r = run_config(R"({"backends": ["math"],
      "shapes": [{"batch": 1, "heads": 2, "seq_q": 64, "head_dim": 64}], "iterations": 50, "warmup": 0})", out, tiny);
  EXPECT_EQ(r.exit_code, kExitPartialFailure);
  EXPECT_FALSE(r.summary.capture.complete());
  EXPECT_EQ(r.summary.cases[0].status, CaseStatus::failed);
  EXPECT_NE(r.summary.cases[0].reason.find("dropped"), std::string::npos) << r.summary.cases[0].reason;
  const nlohmann::json trace = read_json(r.trace_path);
  EXPECT_GT(trace.at("attnprof").at("capture").at("dropped_records").get<std::uint64_t>() +
                trace.at("attnprof").at("capture").at("buffers_declined").get<std::uint64_t>(),
            0u);
}

TEST(Faults, SigintMidSweepWritesWhatRanAndExitsThree) {
  const auto out = fresh_dir("attnprof_faults_sigint");
  std::filesystem::create_directories(out);
  const auto config = out / "long.json";
  std::ofstream(config) << R"({"backends": ["math", "manual"], "causal": [false, true],
      "shapes": [{"batch": 4, "heads": 16, "seq_q": 2048, "head_dim": 64}], "iterations": 2000, "warmup": 0,
      "verify": false})";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl(ATTNPROF_BINARY, ATTNPROF_BINARY, "run", "--config", config.c_str(), "--out", (out / "run").c_str(),
          "--quiet", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(6));
  kill(child, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kExitPartialFailure);
  const nlohmann::json summary = read_json(out / "run" / "summary.json");
  read_json(out / "run" / "trace.json");
  EXPECT_TRUE(summary.at("interrupted").get<bool>());
  int interrupted = 0, finished = 0;
  for (const nlohmann::json& c : summary.at("cases")) {
    interrupted += c.at("status") == "interrupted";
    finished += c.at("status") == "ok";
  }
  EXPECT_GT(interrupted, 0);
  EXPECT_EQ(summary.at("cases").size(), 6u);
  std::printf("  after SIGINT: %d cases finished, %d interrupted\n", finished, interrupted);
}

}  // namespace
}  // namespace attnprof
