#include "process/child_processes.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <array>
#include <cerrno>
#include <cstring>
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
    if (running > 0) {
      const timespec pause{0, 20'000'000};
      nanosleep(&pause, nullptr);
    }
  }
  return exits;
}

}  // namespace attnprof
