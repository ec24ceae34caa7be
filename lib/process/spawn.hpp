// Starting a child process the way `profile` and `run --devices` both need it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace attnprof {

// Starts `command` (argv[0] searched in PATH) with default SIGINT/SIGTERM/SIGHUP/SIGPIPE handling
// and no signal blocked, whatever the caller's are. `environment` null: the caller's own.
// Returns 0 with `pid` set, or the error posix_spawnp gave (EINVAL for an empty command).
int spawn_with_default_signals(const std::vector<std::string>& command, const std::vector<std::string>* environment,
                               pid_t& pid);

}  // namespace attnprof
