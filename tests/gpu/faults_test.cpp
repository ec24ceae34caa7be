// Faults in the middle of a sweep: each affected case is recorded as failed or skipped with its
// reason, the rest runs, trace.json and summary.json stay valid, the exit code says what
// happened (3 for partial failure), dropped records are counted, and SIGTERM is honoured within
// a second in the middle of a large case.
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
#include "commands/run.hpp"
#include "core/errors.hpp"
#include "support/scratch_dir.hpp"

namespace attnprof {
namespace {

std::filesystem::path fresh_dir(const char* name) {
  return attnprof::test::fresh_dir("attnprof_faults_test", name, false);
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
  const RunOutcome r = run_config(R"({"backends": ["flash:fa2", "cudnn", "manual:in_place"], "dtypes": ["fp32"],
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

// `attnprof run` of a large case with stderr read as it comes: when the case's progress line
// shows `step`, wait `delay`, send SIGTERM, and time how long the process takes to end.
struct Interrupted {
  std::chrono::duration<double> latency{};
  int exit_code = -1;
  std::string progress;  // stderr
};

Interrupted interrupt_at(const std::filesystem::path& out, const char* config_text, const std::string& step,
                         std::chrono::milliseconds delay) {
  std::filesystem::create_directories(out);
  const auto config = out / "large.json";
  std::ofstream(config) << config_text;
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    execl(ATTNPROF_BINARY, ATTNPROF_BINARY, "run", "--config", config.c_str(), "--out", (out / "run").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  Interrupted result;
  char buffer[512];
  bool sent = false;
  std::chrono::steady_clock::time_point signalled;
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    result.progress.append(buffer, static_cast<std::size_t>(n));
    if (!sent && result.progress.find(" " + step + " ") != std::string::npos) {
      std::this_thread::sleep_for(delay);
      signalled = std::chrono::steady_clock::now();
      kill(child, SIGTERM);
      sent = true;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  result.latency = std::chrono::steady_clock::now() - signalled;
  EXPECT_TRUE(sent) << "the progress never showed '" << step << "':\n" << result.progress;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

void expect_outputs_of_an_interrupted_case(const std::filesystem::path& run, const Interrupted& r) {
  std::printf("  SIGTERM honoured in %.3f s\n%s", r.latency.count(), r.progress.c_str());
  EXPECT_LT(r.latency.count(), 1.0);
  EXPECT_EQ(r.exit_code, kExitPartialFailure);
  const nlohmann::json summary = read_json(run / "summary.json");
  read_json(run / "trace.json");
  EXPECT_TRUE(summary.at("interrupted").get<bool>());
  ASSERT_EQ(summary.at("cases").size(), 1u);
  EXPECT_EQ(summary.at("cases").at(0).at("status"), "interrupted");
  std::printf("  reason: %s\n", summary.at("cases").at(0).at("reason").get<std::string>().c_str());
}

// 8 x 32 x 32 queries against 131072 keys (bf16, K and V 17 GiB): the GPU forward is a few
// milliseconds, the float64 check of 1024 rows over 131072 keys takes seconds.
constexpr const char* kLargeCase = R"({"backends": ["flash:fa2"], "causal": [false],
    "shapes": [{"batch": 8, "heads": 32, "seq_q": 32, "seq_kv": 131072, "head_dim": 128}],
    "warmup": 1, "iterations": 3})";

TEST(Faults, SigtermDuringSetUpIsHonouredWithinASecond) {
  const auto out = fresh_dir("attnprof_faults_sigterm_setup");
  const Interrupted r = interrupt_at(out, kLargeCase, "set-up", std::chrono::milliseconds(0));
  expect_outputs_of_an_interrupted_case(out / "run", r);
}

TEST(Faults, SigtermDuringVerificationIsHonouredWithinASecond) {
  const auto out = fresh_dir("attnprof_faults_sigterm_verify");
  const Interrupted r = interrupt_at(out, kLargeCase, "verify", std::chrono::milliseconds(500));
  expect_outputs_of_an_interrupted_case(out / "run", r);
  const nlohmann::json summary = read_json(out / "run" / "summary.json");
  EXPECT_NE(summary.at("cases").at(0).at("reason").get<std::string>().find("verification"), std::string::npos);
}

}  // namespace
}  // namespace attnprof
