// The child processes `profile` and `run --devices` start: signals sent to attnprof itself go
// on to them, and how each one ended; for `profile`, also the descendants they leave running.
#pragma once

#include <sys/types.h>

#include <chrono>
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

// While alive, this process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a descendant
// orphaned meanwhile (a launcher's worker after the launcher died) is re-parented to it instead of
// to init, so that it can be waited for. The previous setting comes back after it.
class ChildSubreaper {
 public:
  ChildSubreaper();
  ~ChildSubreaper();
  ChildSubreaper(const ChildSubreaper&) = delete;
  ChildSubreaper& operator=(const ChildSubreaper&) = delete;

  int error() const { return error_; }  // 0, or the errno of the prctl that failed (nothing changed then)

 private:
  int previous_ = 0;
  int error_ = 0;
};

// The processes re-parented to this one that wait_for_adopted_descendants saw.
struct AdoptedDescendants {
  std::size_t waited_for = 0;        // ended while it waited (or before)
  std::vector<pid_t> still_running;  // when the grace period ran out, ascending
};

// Waits for every remaining child of this process, which, once the direct children have been
// waited for, are the descendants re-parented to it: polls until none is left or `grace` has
// passed. Each one found running is added to `forwarding`, so a signal sent to attnprof
// meanwhile reaches it too. Reaps any child of the process: call it after the direct ones.
AdoptedDescendants wait_for_adopted_descendants(std::chrono::milliseconds grace, ChildSignalForwarding& forwarding);

// Waits for one child, retrying when a signal interrupts the wait.
ChildExit wait_for_child(pid_t child);

// Waits for every child, polling (so no handler needs to interrupt a wait) and forgetting each
// in `forwarding` as it ends. A child that cannot be waited for counts as exit code 127.
std::vector<ChildExit> wait_for_children(const std::vector<pid_t>& children, ChildSignalForwarding& forwarding);

}  // namespace attnprof
