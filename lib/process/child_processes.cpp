#include "process/child_processes.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace attnprof {
namespace {

// The children's pids, for the signal handler (async-signal-safe: a fixed array, plain stores).
std::array<volatile sig_atomic_t, ChildSignalForwarding::kMaxChildren> g_children{};
volatile sig_atomic_t g_child_count = 0;
// A signal that came while no child was registered yet (between the handlers and the spawn, or
// the spawn and add()): every child added later gets it, as it would have had it had it been there.
volatile sig_atomic_t g_pending_signal = 0;

extern "C" void forward_to_children(int sig, siginfo_t* info, void*) {
  if (g_child_count == 0) {
    g_pending_signal = sig;
    return;
  }
  if (info != nullptr && info->si_code > 0) return;  // from the terminal: the children had it too
  for (sig_atomic_t i = 0; i < g_child_count; ++i) {
    const pid_t child = static_cast<pid_t>(g_children[static_cast<std::size_t>(i)]);
    if (child > 0) kill(child, sig);
  }
}

ChildExit exit_of(int status) {
  ChildExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
    exit.exit_code = 128 + *exit.signal;
  }
  return exit;
}

void pause_between_polls() {
  const timespec pause{0, 20'000'000};
  nanosleep(&pause, nullptr);
}

// The running children of this process, by the parent /proc/<pid>/stat names: the per-thread
// `children` files would be cheaper but need CONFIG_PROC_CHILDREN, which not every kernel has.
std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> children;
  const pid_t self = getpid();
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(it->path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;  // it ended meanwhile
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read from the last ')'.
    const std::size_t comm_end = stat.rfind(')');
    if (comm_end == std::string::npos) continue;
    std::istringstream rest(stat.substr(comm_end + 1));
    char state = 0;
    long parent = 0;
    if (rest >> state >> parent && parent == self) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return children;
}

}  // namespace

std::string describe(const ChildExit& exit) {
  if (exit.signal) return fmt::format("was ended by signal {} ({})", *exit.signal, strsignal(*exit.signal));
  return fmt::format("exited with code {}", exit.exit_code);
}

ChildSignalForwarding::ChildSignalForwarding() : handlers_(forward_to_children) {}

// The children are forgotten before the previous handlers come back (members go last).
ChildSignalForwarding::~ChildSignalForwarding() {
  g_child_count = 0;
  g_pending_signal = 0;
}

void ChildSignalForwarding::add(pid_t child) {
  // A removed child's slot is taken again first: over a run, children may come and go by the hundred.
  // The handler reads a slot as 0 or as the new pid, both of which it handles.
  std::size_t slot = 0;
  while (slot < static_cast<std::size_t>(g_child_count) && g_children[slot] != 0) ++slot;
  if (slot >= kMaxChildren) throw std::length_error(fmt::format("at most {} child processes", kMaxChildren));
  g_children[slot] = child;
  if (slot == static_cast<std::size_t>(g_child_count)) g_child_count = g_child_count + 1;
  if (const sig_atomic_t pending = g_pending_signal; pending != 0) kill(child, static_cast<int>(pending));
}

void ChildSignalForwarding::remove(pid_t child) {
  for (sig_atomic_t i = 0; i < g_child_count; ++i)
    if (g_children[static_cast<std::size_t>(i)] == child) g_children[static_cast<std::size_t>(i)] = 0;
}

ChildExit wait_for_child(pid_t child) {
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(fmt::format("waitpid failed: {}", std::strerror(errno)));
  return exit_of(status);
}

std::vector<ChildExit> wait_for_children(const std::vector<pid_t>& children, ChildSignalForwarding& forwarding) {
  std::vector<ChildExit> exits(children.size());
  std::vector<bool> done(children.size(), false);
  std::size_t running = children.size();
  while (running > 0) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      const pid_t ended = waitpid(children[i], &status, WNOHANG);
      if (ended == 0 || (ended < 0 && errno == EINTR)) continue;
      exits[i] = ended < 0 ? ChildExit{127, std::nullopt} : exit_of(status);  // not ours to wait for: lost
      forwarding.remove(children[i]);
      done[i] = true;
      --running;
    }
    if (running > 0) pause_between_polls();
  }
  return exits;
}

ChildSubreaper::ChildSubreaper() {
  // Unknown (the get failed): taken as off, the default.
  if (prctl(PR_GET_CHILD_SUBREAPER, &previous_, 0, 0, 0) != 0) previous_ = 0;
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) error_ = errno;
}

ChildSubreaper::~ChildSubreaper() {
  // Nothing to do if this fails: the process stays a subreaper, which only keeps orphans nearer.
  if (error_ == 0) (void)prctl(PR_SET_CHILD_SUBREAPER, previous_, 0, 0, 0);
}

AdoptedDescendants wait_for_adopted_descendants(std::chrono::milliseconds grace, ChildSignalForwarding& forwarding) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  AdoptedDescendants result;
  std::set<pid_t> running;  // added to `forwarding`; a child stays ours (its pid unreused) until reaped
  for (;;) {
    for (;;) {
      int status = 0;
      const pid_t ended = waitpid(-1, &status, WNOHANG);
      if (ended > 0) {
        forwarding.remove(ended);
        running.erase(ended);
        ++result.waited_for;
      } else if (ended == 0) {
        break;  // some still run
      } else if (errno == ECHILD) {
        return result;  // none left
      } else if (errno != EINTR) {
        throw std::runtime_error(fmt::format("waitpid failed: {}", std::strerror(errno)));
      }
    }
    for (const pid_t child : children_of_this_process()) {
      if (running.count(child) != 0) continue;
      try {
        forwarding.add(child);
      } catch (const std::length_error&) {
        // Past kMaxChildren at once: this one is still waited for, only not sent signals.
      }
      running.insert(child);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    pause_between_polls();
  }
  result.still_running.assign(running.begin(), running.end());
  return result;
}

}  // namespace attnprof
