// The child processes of `profile`, with plain shell commands: descendants orphaned by the command
// are re-parented to attnprof (a subreaper), waited for up to a grace period, and sent the signals
// that reach attnprof meanwhile.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/document_file.hpp"
#include "process/child_processes.hpp"
#include "process/spawn.hpp"
#include "support/scratch_dir.hpp"

namespace attnprof {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_child_processes_test", name);
}

// `script` run by /bin/sh with the directory as $0, as `profile` runs its command: spawned, then
// waited for, then the processes it left.
struct Profiled {
  ChildExit exit;
  AdoptedDescendants descendants;
};

Profiled run_leaving_descendants(const std::string& script, const std::filesystem::path& dir,
                                 std::chrono::milliseconds grace, ChildSignalForwarding& forwarding) {
  pid_t child = 0;
  EXPECT_EQ(spawn_with_default_signals({"/bin/sh", "-c", script, dir.string()}, nullptr, child), 0);
  forwarding.add(child);
  Profiled p;
  p.exit = wait_for_child(child);
  forwarding.remove(child);
  p.descendants = wait_for_adopted_descendants(grace, forwarding);
  return p;
}

TEST(ChildProcesses, AGrandchildTheCommandLeavesRunningIsWaitedFor) {
  const std::filesystem::path dir = fresh_dir("grandchild");
  const ChildSubreaper subreaper;
  ASSERT_EQ(subreaper.error(), 0);
  ChildSignalForwarding forwarding;
  // The shell exits at once; its background subshell writes its file half a second later.
  const Profiled p = run_leaving_descendants("(sleep 0.5; echo written > \"$0/late.txt\") >/dev/null 2>&1 & exit 3",
                                             dir, std::chrono::seconds(30), forwarding);
  EXPECT_EQ(p.exit.exit_code, 3);  // the command's own, not its descendants'
  EXPECT_EQ(read_file_text(dir / "late.txt"), "written\n");
  EXPECT_GE(p.descendants.waited_for, 1u);
  EXPECT_TRUE(p.descendants.still_running.empty());
}

TEST(ChildProcesses, DescendantsStillRunningAfterTheGracePeriodAreNamed) {
  const std::filesystem::path dir = fresh_dir("grace");
  const ChildSubreaper subreaper;
  ASSERT_EQ(subreaper.error(), 0);
  ChildSignalForwarding forwarding;
  const auto start = std::chrono::steady_clock::now();
  const Profiled p = run_leaving_descendants("sleep 20 >/dev/null 2>&1 & echo $! > \"$0/pid\"; exit 0", dir,
                                             std::chrono::milliseconds(300), forwarding);
  const auto waited = std::chrono::steady_clock::now() - start;
  const pid_t sleeper = static_cast<pid_t>(std::stol(read_file_text(dir / "pid")));
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(20));  // generous: the bound, not its precision
  EXPECT_EQ(p.descendants.still_running, std::vector<pid_t>{sleeper});
  // Not left for a later test to reap.
  ASSERT_EQ(kill(sleeper, SIGKILL), 0);
  int status = 0;
  EXPECT_EQ(waitpid(sleeper, &status, 0), sleeper);
}

TEST(ChildProcesses, ASignalSentWhileWaitingForDescendantsReachesThem) {
  const std::filesystem::path dir = fresh_dir("forward");
  const ChildSubreaper subreaper;
  ASSERT_EQ(subreaper.error(), 0);
  std::atomic<bool> waited{false};
  ChildSignalForwarding forwarding;  // outlives the sender: its SIGTERM must never meet the default action
  std::thread sender([&] {
    for (int i = 0; i < 500 && !std::filesystem::exists(dir / "started"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    // Again until it arrives: the wait adds the descendant to the forwarding at its next poll.
    while (!waited && !std::filesystem::exists(dir / "ended")) {
      kill(getpid(), SIGTERM);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // The descendant ends on SIGTERM (a trap runs between two short sleeps), else after 20 s or more.
  const Profiled p = run_leaving_descendants("(trap 'touch \"$0/ended\"; exit 0' TERM; touch \"$0/started\"; "
                                             "i=0; while [ $i -lt 1000 ]; do sleep 0.02; i=$((i + 1)); done) "
                                             ">/dev/null 2>&1 & exit 0",
                                             dir, std::chrono::seconds(60), forwarding);
  waited = true;
  sender.join();
  EXPECT_TRUE(std::filesystem::exists(dir / "ended"));
  EXPECT_TRUE(p.descendants.still_running.empty());
  for (const pid_t left : p.descendants.still_running) {  // only when it failed
    kill(left, SIGKILL);
    waitpid(left, nullptr, 0);
  }
}

TEST(ChildProcesses, NoDescendantLeftMeansNoWait) {
  const std::filesystem::path dir = fresh_dir("none");
  const ChildSubreaper subreaper;
  ChildSignalForwarding forwarding;
  const auto start = std::chrono::steady_clock::now();
  const Profiled p = run_leaving_descendants("exit 0", dir, std::chrono::seconds(30), forwarding);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(p.descendants.waited_for, 0u);
}

// Adopted descendants come and go: the pids removed free their places for the next ones.
TEST(ChildProcesses, ForwardingTakesMoreChildrenOverTimeThanAtOnce) {
  ChildSignalForwarding forwarding;
  for (std::size_t i = 0; i < 2 * ChildSignalForwarding::kMaxChildren; ++i) {
    const pid_t unused = INT_MAX - static_cast<pid_t>(i);  // never signalled: no signal comes in this test
    ASSERT_NO_THROW(forwarding.add(unused));
    forwarding.remove(unused);
  }
}

}  // namespace
}  // namespace attnprof
