// `attnprof profile`'s launcher with plain (non-CUDA) programs: the environment the command gets,
// its exit code or signal passed back, signals sent to attnprof passed on, the processes it leaves
// running waited for, and the per-process outputs gathered (renamed for one process, combined for
// several).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "commands/profile.hpp"
#include "core/errors.hpp"
#include "process/child_processes.hpp"
#include "process/spawn.hpp"
#include "summary/summary.hpp"
#include "support/scratch_dir.hpp"

namespace attnprof {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_launcher_test", name, false);
}

ProfileLaunch shell(const std::string& script, const std::filesystem::path& out) {
  ProfileLaunch launch;
  launch.command = {"/bin/sh", "-c", script};
  launch.out_dir = out;
  launch.inject_library = "/nonexistent/libattnprof_inject.so";  // a shell never loads it
  launch.progress = nullptr;
  return launch;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ProfileLauncher, AnEmptyCommandIsAUsageError) {
  ProfileLaunch launch;
  launch.out_dir = fresh_dir("empty");
  EXPECT_THROW(profile_program(launch), UsageError);
}

TEST(ProfileLauncher, TheCommandsExitCodeComesBack) {
  EXPECT_EQ(profile_program(shell("exit 0", fresh_dir("exit0"))).exit_code, 0);
  const ProfileOutcome seven = profile_program(shell("exit 7", fresh_dir("exit7")));
  EXPECT_EQ(seven.exit_code, 7);
  EXPECT_FALSE(seven.signal);
  EXPECT_TRUE(seven.processes.empty());
}

TEST(ProfileLauncher, ASignalThatEndsTheCommandGives128PlusIt) {
  const ProfileOutcome o = profile_program(shell("kill -TERM $$", fresh_dir("killed")));
  EXPECT_EQ(o.exit_code, 128 + SIGTERM);
  EXPECT_EQ(o.signal, SIGTERM);
}

TEST(ProfileLauncher, AProgramThatCannotStartGives127) {
  ProfileLaunch launch = shell("", fresh_dir("missing"));
  launch.command = {"attnprof-no-such-program-here"};
  EXPECT_EQ(profile_program(launch).exit_code, 127);
}

TEST(ProfileLauncher, TheCommandRunsWithTheInjectionInItsEnvironment) {
  const std::filesystem::path out = fresh_dir("env");
  ProfileLaunch launch = shell("env > \"$ATTNPROF_PROFILE_DIR/env.txt\"", out);
  ::unsetenv("NVTX_INJECTION64_PATH");
  ASSERT_EQ(profile_program(launch).exit_code, 0);
  const std::string env = read_text(out / "env.txt");
  EXPECT_NE(env.find("CUDA_INJECTION64_PATH=/nonexistent/libattnprof_inject.so"), std::string::npos) << env;
  EXPECT_NE(env.find("NVTX_INJECTION64_PATH=/nonexistent/libattnprof_inject.so"), std::string::npos);
  EXPECT_NE(env.find("ATTNPROF_PROFILE_DIR=" + std::filesystem::canonical(out).string()), std::string::npos);
}

TEST(ProfileLauncher, MemoryPutsPytorchsAllocatorOnCudaMallocAsync) {
  const std::filesystem::path out = fresh_dir("memory_env");
  ProfileLaunch launch = shell("env > \"$ATTNPROF_PROFILE_DIR/env.txt\"", out);
  launch.pytorch_allocations = true;
  ::setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
  ASSERT_EQ(profile_program(launch).exit_code, 0);
  ::unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  const std::string env = read_text(out / "env.txt");
  EXPECT_NE(env.find("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,backend:cudaMallocAsync\n"), std::string::npos)
      << env;
  // Without --memory the user's setting goes through untouched.
  launch.pytorch_allocations = false;
  ASSERT_EQ(profile_program(launch).exit_code, 0);
  EXPECT_EQ(read_text(out / "env.txt").find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos);
}

TEST(ProfileLauncher, MemorysAllocatorSettingKeepsTheUsersBackend) {
  EXPECT_EQ(allocation_conf_for_memory(std::nullopt), "backend:cudaMallocAsync");
  EXPECT_EQ(allocation_conf_for_memory(std::string()), "backend:cudaMallocAsync");
  EXPECT_EQ(allocation_conf_for_memory(std::string("max_split_size_mb:128")),
            "max_split_size_mb:128,backend:cudaMallocAsync");
  EXPECT_EQ(allocation_conf_for_memory(std::string("backend:cudaMallocAsync")), "backend:cudaMallocAsync");
  EXPECT_EQ(allocation_conf_for_memory(std::string("backend:native,max_split_size_mb:64")), std::nullopt);
}

TEST(ProfileLauncher, SignalsSentToAttnprofReachTheCommand) {
  const std::filesystem::path out = fresh_dir("forward");
  std::filesystem::create_directories(out);
  const std::filesystem::path started = out / "started";
  std::thread sender([&] {
    for (int i = 0; i < 500 && !std::filesystem::exists(started); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kill(getpid(), SIGTERM);  // as `timeout` or a CI runner would
  });
  const ProfileOutcome o = profile_program(
      shell("trap 'exit 5' TERM; touch \"$ATTNPROF_PROFILE_DIR/started\"; while :; do sleep 0.02; done", out));
  sender.join();
  EXPECT_EQ(o.exit_code, 5);
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);  // attnprof's own handling is back
}

// Sets a signal's disposition for the test's scope.
class ScopedDisposition {
 public:
  ScopedDisposition(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction now {};
    now.sa_handler = handler;
    sigemptyset(&now.sa_mask);
    sigaction(sig, &now, &previous_);
  }
  ~ScopedDisposition() { sigaction(sig_, &previous_, nullptr); }

 private:
  int sig_;
  struct sigaction previous_ {};
};

TEST(ProfileLauncher, ASighupIgnoredByNohupStaysIgnoredForTheCommand) {
  const ScopedDisposition nohup(SIGHUP, SIG_IGN);
  // The shell survives its own SIGHUP only while it is ignored (sh cannot undo an ignore it inherited).
  EXPECT_EQ(profile_program(shell("kill -HUP $$; exit 3", fresh_dir("nohup"))).exit_code, 3);
}

TEST(ProfileLauncher, AnInheritedIgnoredSigchldStillLetsItWaitForTheCommand) {
  const ScopedDisposition ignored(SIGCHLD, SIG_IGN);
  EXPECT_EQ(profile_program(shell("exit 7", fresh_dir("sigchld"))).exit_code, 7);
}

TEST(ProfileLauncher, AnEarlierProfilesCombinedOutputsAreRemoved) {
  const std::filesystem::path out = fresh_dir("stale_combined");
  std::filesystem::create_directories(out);
  // summary-merged.json: what `merge --out trace-merged.json` writes beside its trace.
  for (const char* name : {"trace.json", "summary.json", "trace-merged.json", "summary-merged.json"})
    std::ofstream(out / name) << "{}";
  std::ofstream(out / "notes.txt") << "the user's";
  ASSERT_EQ(profile_program(shell("exit 0", out)).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(out / "trace.json"));
  EXPECT_FALSE(std::filesystem::exists(out / "summary.json"));
  EXPECT_FALSE(std::filesystem::exists(out / "trace-merged.json"));
  EXPECT_FALSE(std::filesystem::exists(out / "summary-merged.json"));
  EXPECT_TRUE(std::filesystem::exists(out / "notes.txt"));
}

// A signal that reaches attnprof before its child is registered (during the spawn) is not lost:
// the child gets it when it is added.
TEST(ProfileLauncher, ASignalBeforeTheChildIsRegisteredReachesItWhenItIs) {
  ChildSignalForwarding forwarding;
  raise(SIGTERM);  // no child yet
  pid_t child = 0;
  ASSERT_EQ(spawn_with_default_signals({"/bin/sh", "-c", "sleep 5; exit 0"}, nullptr, child), 0);
  forwarding.add(child);
  const ChildExit exit = wait_for_child(child);
  forwarding.remove(child);
  EXPECT_EQ(exit.signal, SIGTERM);
}

void write_fake_output(const std::filesystem::path& dir, const std::string& suffix, const std::string& label) {
  RunSummary s;
  s.config_name = "profile";
  s.capture.records = 10;
  CaseSummary c;
  c.label = label;
  s.cases.push_back(c);
  write_json_atomically((dir / ("summary-" + suffix)).string(), nlohmann::json(s));
  std::ofstream(dir / ("trace-" + suffix)) << R"({"traceEvents": []})";
}

TEST(ProfileLauncher, OneProcessesOutputBecomesTraceAndSummary) {
  const std::filesystem::path out = fresh_dir("one");
  std::filesystem::create_directories(out);
  write_fake_output(out, "pid1.json", "stale");  // from an earlier profile: removed first
  // The child writes what the injection would, under its own pid.
  ProfileLaunch launch = shell("", out);
  launch.command = {"/bin/sh", "-c", "cp \"$0/template.json\" \"$ATTNPROF_PROFILE_DIR/summary-pid$$.json\" && "
                                     "echo '{\"traceEvents\": []}' > \"$ATTNPROF_PROFILE_DIR/trace-pid$$.json\"",
                    out.string()};
  RunSummary s;
  s.cases.resize(1);
  s.cases[0].label = "sdpa flash";
  write_json_atomically((out / "template.json").string(), nlohmann::json(s));
  const ProfileOutcome o = profile_program(launch);
  ASSERT_EQ(o.processes.size(), 1u);
  ASSERT_TRUE(o.trace && o.summary);
  EXPECT_EQ(o.trace->filename(), "trace.json");
  EXPECT_EQ(load_summary(o.summary->string()).cases.at(0).label, "sdpa flash");
  EXPECT_FALSE(std::filesystem::exists(out / "summary-pid1.json"));
}

// A launch whose command copies in what the injection would have written for several processes:
// for each (suffix, label), summary-<suffix> with one case of that label and trace-<suffix>.
ProfileLaunch writing_outputs(const std::filesystem::path& out,
                              const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::filesystem::create_directories(out / "stash");
  for (const auto& [suffix, label] : outputs) write_fake_output(out / "stash", suffix, label);
  ProfileLaunch launch = shell("", out);
  launch.command = {"/bin/sh", "-c", "cp \"$0\"/stash/* \"$ATTNPROF_PROFILE_DIR\"/", out.string()};
  return launch;
}

TEST(ProfileLauncher, SeveralProcessesKeepTheirTracesAndShareOneSummary) {
  const std::filesystem::path out = fresh_dir("several");
  const ProfileOutcome o = profile_program(writing_outputs(out, {{"rank1-pid300.json", "b"}, {"rank0-pid200.json", "a"}}));
  ASSERT_EQ(o.processes.size(), 2u);
  EXPECT_EQ(o.processes[0].rank, 0);
  EXPECT_FALSE(o.trace);
  ASSERT_TRUE(o.summary);
  const RunSummary combined = load_summary(o.summary->string());
  ASSERT_EQ(combined.cases.size(), 2u);
  EXPECT_EQ(combined.cases[0].label, "[rank 0] a");
  EXPECT_EQ(combined.cases[1].label, "[rank 1] b");
  EXPECT_EQ(combined.capture.records, 20u);
  EXPECT_TRUE(std::filesystem::exists(out / "trace-rank1-pid300.json"));
}

// A launcher's worker orphaned when the launcher died writes its profile after the command ended:
// attnprof waits for it before gathering.
TEST(ProfileLauncher, AProcessTheCommandLeavesRunningIsWaitedForAndGathered) {
  ProfileLaunch launch = writing_outputs(fresh_dir("orphan"), {{"pid4242.json", "late worker"}});
  // The shell exits at once, its background process writes the outputs half a second later.
  launch.command[2] = "(sleep 0.5; cp \"$0\"/stash/* \"$ATTNPROF_PROFILE_DIR\"/) >/dev/null 2>&1 & exit 4";
  const ProfileOutcome o = profile_program(launch);
  EXPECT_EQ(o.exit_code, 4);  // the command's, not the worker's
  ASSERT_EQ(o.processes.size(), 1u);
  ASSERT_TRUE(o.summary);
  EXPECT_EQ(load_summary(o.summary->string()).cases.at(0).label, "late worker");
}

TEST(ProfileLauncher, ProcessesStillRunningAfterTheGracePeriodAreNamed) {
  const std::filesystem::path out = fresh_dir("grace");
  ProfileLaunch launch =
      shell("sleep 20 >/dev/null 2>&1 & echo $! > \"$ATTNPROF_PROFILE_DIR/sleeper.pid\"; exit 0", out);
  launch.descendant_grace = std::chrono::milliseconds(300);
  std::FILE* progress = std::tmpfile();
  ASSERT_NE(progress, nullptr);
  launch.progress = progress;
  const auto start = std::chrono::steady_clock::now();
  const ProfileOutcome o = profile_program(launch);
  const auto waited = std::chrono::steady_clock::now() - start;
  const pid_t sleeper = static_cast<pid_t>(std::stol(read_text(out / "sleeper.pid")));
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(20));  // generous: the bound, not its precision
  EXPECT_EQ(o.descendants_still_running, std::vector<std::uint32_t>{static_cast<std::uint32_t>(sleeper)});
  std::rewind(progress);
  std::string said;
  for (int c = std::fgetc(progress); c != EOF; c = std::fgetc(progress)) said += static_cast<char>(c);
  std::fclose(progress);
  EXPECT_NE(said.find(fmt::format("still run after 0.3 s (pid {})", sleeper)), std::string::npos) << said;
  // Not left for a later test to reap.
  ASSERT_EQ(kill(sleeper, SIGKILL), 0);
  EXPECT_EQ(waitpid(sleeper, nullptr, 0), sleeper);
}

// A child inherits RANK: two processes of one rank keep distinct case labels through their pids.
TEST(ProfileLauncher, ProcessesThatShareARankAreToldApartByTheirPids) {
  const ProfileLaunch launch = writing_outputs(fresh_dir("shared_rank"), {{"rank0-pid200.json", "sdpa flash"},
                                                                          {"rank0-pid201.json", "sdpa flash"},
                                                                          {"rank1-pid300.json", "sdpa flash"}});
  const RunSummary combined = load_summary(profile_program(launch).summary.value().string());
  std::set<std::string> labels;
  for (const CaseSummary& c : combined.cases) labels.insert(c.label);
  EXPECT_EQ(labels, (std::set<std::string>{"[rank 0 pid 200] sdpa flash", "[rank 0 pid 201] sdpa flash",
                                           "[rank 1] sdpa flash"}));
}

}  // namespace
}  // namespace attnprof
