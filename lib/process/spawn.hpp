// Starting a child process the way `profile` and `run --devices` both need it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace attnprof {

// Starts `command` (argv[0] searched in PATH) with default SIGINT/SIGTERM/SIGHUP/SIGPIPE handling
// (except where the caller ignores one: nohup's SIGHUP stays ignored) and no signal blocked.
// `environment` null: the caller's own. An ignored SIGCHLD is set back to default first, so that
// the caller can wait for the command.
// Returns 0 with `pid` set, or the error posix_spawnp gave (EINVAL for an empty command).
int spawn_with_default_signals(const std::vector<std::string>& command, const std::vector<std::string>* environment,
                               pid_t& pid);

}  // namespace attnprof
