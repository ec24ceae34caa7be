// The child processes `profile` and `run --devices` start: signals sent to attnprof itself go
// on to them, and how each one ended.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "process/scoped_signal_handlers.hpp"

namespace attnprof {

// How a child ended: its exit status, or 128 + the signal that ended it (as a shell says it).
struct ChildExit {
  int exit_code = 0;
  std::optional<int> signal;
};

// "exited with code 3", "was ended by signal 9 (Killed)".
std::string describe(const ChildExit& exit);

// While alive, SIGINT, SIGTERM and SIGHUP sent to attnprof itself (kill, timeout, a CI runner)
// go on to every child added. A Ctrl-C on the terminal reached the whole foreground process
// group already (the kernel marks it SI_KERNEL, a kill() SI_USER), so it is not sent twice.
// Create it before the first spawn, so that no signal falls between; one at a time per process.
class ChildSignalForwarding {
 public:
  static constexpr std::size_t kMaxChildren = 1024;

  ChildSignalForwarding();
  ~ChildSignalForwarding();
  ChildSignalForwarding(const ChildSignalForwarding&) = delete;
  ChildSignalForwarding& operator=(const ChildSignalForwarding&) = delete;

  void add(pid_t child);     // throws std::length_error past kMaxChildren running at once
  void remove(pid_t child);  // once it has ended: its pid may be reused

 private:
  ScopedSignalHandlers handlers_;
};

// Waits for one child, retrying when a signal interrupts the wait.
ChildExit wait_for_child(pid_t child);

// Waits for every child, polling (so no handler needs to interrupt a wait) and forgetting each
// in `forwarding` as it ends. A child that cannot be waited for counts as exit code 127.
std::vector<ChildExit> wait_for_children(const std::vector<pid_t>& children, ChildSignalForwarding& forwarding);

}  // namespace attnprof
