// `attnprof profile` end to end on a GPU: launch_loop (docs/examples/launch_loop.cu) runs under
// the CUPTI injection; its NVTX ranges become cases with exact per-iteration counts, the trace
// rebuilds the same summary through `report`, the exit code and SIGTERM come back, child
// processes that use CUDA write their own profile, and a fork() without exec does not hang.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "summary/summary.hpp"
#include "summary/trace_report.hpp"
#include "support/scratch_dir.hpp"

extern char** environ;

namespace attnprof {
namespace {

std::filesystem::path self_dir() { return std::filesystem::read_symlink("/proc/self/exe").parent_path(); }

// The build tree may have moved (a GPU machine may run a copy of it): look beside this test first.
std::filesystem::path attnprof_binary() {
  const std::filesystem::path near = self_dir() / ".." / "app" / "attnprof";
  return std::filesystem::exists(near) ? near : std::filesystem::path(ATTNPROF_BINARY);
}
std::filesystem::path launch_loop_binary() {
  const std::filesystem::path near = self_dir() / "launch_loop";
  return std::filesystem::exists(near) ? near : std::filesystem::path(LAUNCH_LOOP_BINARY);
}

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_profile_test", name);
}

pid_t start(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  EXPECT_EQ(error, 0) << "cannot start " << args[0];
  return pid;
}

// Exit code (or 128 + signal); -1 if it had to be killed after `limit`.
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int profile(const std::filesystem::path& out, const std::vector<std::string>& program_args,
            std::chrono::seconds limit = std::chrono::seconds(120)) {
  std::vector<std::string> args = {attnprof_binary().string(), "profile", "--out", out.string(), "--",
                                   launch_loop_binary().string()};
  args.insert(args.end(), program_args.begin(), program_args.end());
  return wait_for(start(args), limit);
}

const CaseSummary* find_case(const RunSummary& s, const std::string& label) {
  for (const CaseSummary& c : s.cases)
    if (c.label == label) return &c;
  return nullptr;
}

void expect_test_pattern(const RunSummary& s, const std::string& prefix = "") {
  const CaseSummary* step = find_case(s, prefix + "step");
  ASSERT_NE(step, nullptr) << "no case \"step\": were the NVTX ranges recorded? (NVTX_INJECTION64_PATH)";
  EXPECT_EQ(step->iterations, 3);
  EXPECT_EQ(step->kernels_per_iter, 2.0);
  EXPECT_EQ(step->memcpy_per_iter, 1.0);
  EXPECT_EQ(step->memcpy_bytes_per_iter, 65536.0 * 4);
  EXPECT_EQ(step->memset_per_iter, 1.0);
  EXPECT_EQ(step->iteration_us.size(), 3u);
  ASSERT_FALSE(step->kernels.empty());
  EXPECT_GT(step->kernels[0].registers_per_thread, 0);
  EXPECT_TRUE(step->kernels[0].occupancy_valid) << step->kernels[0].occupancy_limiter;
  EXPECT_EQ(step->kernels[0].launch_api.rfind("cudaLaunchKernel", 0), 0u) << step->kernels[0].launch_api;
  const CaseSummary* other = find_case(s, prefix + "other");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->iterations, 1);
  EXPECT_EQ(other->kernels_per_iter, 1.0);
  EXPECT_EQ(find_case(s, prefix + "inner"), nullptr) << "a nested range became a case";
  EXPECT_EQ(s.capture.dropped_records, 0u);
}

TEST(Profile, NvtxRangesBecomeCasesAndTheExitCodeComesBack) {
  const std::filesystem::path out = fresh_dir("pattern");
  EXPECT_EQ(profile(out, {"--test-pattern", "--exit-code", "7"}), 7);
  ASSERT_TRUE(std::filesystem::exists(out / "summary.json")) << "no profile written in " << out;
  const RunSummary s = load_summary((out / "summary.json").string());
  expect_test_pattern(s);
  EXPECT_GT(s.device.sm_count, 0);

  // The trace opens as Kineto's does, and `report` rebuilds the same summary from it.
  std::ifstream in(out / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  int host_ranges = 0, gpu_ranges = 0, flows = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string cat = e.value("cat", "");
    host_ranges += cat == "user_annotation" && e.value("name", "") == "step";
    gpu_ranges += cat == "gpu_user_annotation" && e.value("name", "") == "step";
    flows += cat == "ac2g";
  }
  EXPECT_GE(host_ranges, 3);
  EXPECT_EQ(gpu_ranges, 3);
  EXPECT_GT(flows, 0);
  // (summary.json keeps the device's name and SM count only, so compare the cases.)
  const TraceReport report = report_from_trace(out / "trace.json");
  EXPECT_EQ(nlohmann::json(report.summary)["cases"], nlohmann::json(s)["cases"]);
}

TEST(Profile, AProgramWithoutRangesIsOneCase) {
  const std::filesystem::path out = fresh_dir("whole");
  EXPECT_EQ(profile(out, {"--launches", "1000", "--repeats", "1"}), 0);
  const RunSummary s = load_summary((out / "summary.json").string());
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_EQ(s.cases[0].label, "whole run");
  EXPECT_EQ(s.cases[0].kernels_per_iter, 1200.0);  // 200 warm-up + 1000 timed
}

TEST(Profile, ChildProcessesThatUseCudaWriteTheirOwnProfile) {
  const std::filesystem::path out = fresh_dir("children");
  EXPECT_EQ(profile(out, {"--test-pattern", "--spawn-child"}), 0);
  int traces = 0;
  for (const auto& entry : std::filesystem::directory_iterator(out))
    traces += entry.path().filename().string().rfind("trace-pid", 0) == 0;
  EXPECT_EQ(traces, 2);
  const RunSummary s = load_summary((out / "summary.json").string());
  bool parent_step = false, child_step = false;
  for (const CaseSummary& c : s.cases) {
    parent_step = parent_step || (c.label.size() > 5 && c.label.substr(c.label.size() - 5) == " step" &&
                                  c.label.find("child") == std::string::npos);
    child_step = child_step || c.label.find("child step") != std::string::npos;
  }
  EXPECT_TRUE(parent_step);
  EXPECT_TRUE(child_step);
}

TEST(Profile, AForkWithoutExecNeitherHangsNorWritesTwice) {
  const std::filesystem::path out = fresh_dir("fork");
  EXPECT_EQ(profile(out, {"--test-pattern", "--fork-child"}, std::chrono::seconds(60)), 0) << "-1: it hung";
  EXPECT_TRUE(std::filesystem::exists(out / "trace.json"));  // exactly one process wrote
}

TEST(Profile, SigtermIsPassedOnAndTheProfileStillWritten) {
  const std::filesystem::path out = fresh_dir("sigterm");
  const std::filesystem::path ready = out / "ready";
  const pid_t attnprof = start({attnprof_binary().string(), "profile", "--out", out.string(), "--",
                                launch_loop_binary().string(), "--test-pattern", "--ready-file", ready.string(),
                                "--sleep-ms", "60000"});
  for (int i = 0; i < 6000 && !std::filesystem::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(ready)) << "launch_loop never got ready";
  kill(attnprof, SIGTERM);
  EXPECT_EQ(wait_for(attnprof, std::chrono::seconds(60)), 128 + SIGTERM);
  ASSERT_TRUE(std::filesystem::exists(out / "summary.json")) << "SIGTERM lost the profile";
  expect_test_pattern(load_summary((out / "summary.json").string()));
}

}  // namespace
}  // namespace attnprof
