#include "process/spawn.hpp"

#include <signal.h>
#include <spawn.h>

#include <cerrno>

extern char** environ;

namespace attnprof {
namespace {

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

int spawn_with_default_signals(const std::vector<std::string>& command, const std::vector<std::string>* environment,
                               pid_t& pid) {
  if (command.empty()) return EINVAL;
  std::vector<std::string> args = command;
  std::vector<char*> argv = pointers_to(args);
  std::vector<std::string> env = environment != nullptr ? *environment : std::vector<std::string>();
  std::vector<char*> envp = pointers_to(env);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    // One ignored here still is where attnprof was started (nohup's SIGHUP): the command keeps it so.
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&defaults, sig);
  }
  // An inherited SIG_IGN for SIGCHLD makes the kernel reap our children itself, and waitpid fail.
  struct sigaction child_exit {};
  if (sigaction(SIGCHLD, nullptr, &child_exit) == 0 && child_exit.sa_handler == SIG_IGN) signal(SIGCHLD, SIG_DFL);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  const int status =
      posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environment != nullptr ? envp.data() : environ);
  posix_spawnattr_destroy(&attr);
  return status;
}

}  // namespace attnprof
