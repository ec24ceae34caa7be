// `attnprof profile -- <command...>`: any CUDA program under the same collector as `run`. This
// side starts the command with the injection library in its environment (CUDA_INJECTION64_PATH,
// NVTX_INJECTION64_PATH, ATTNPROF_PROFILE_DIR), passes SIGINT/SIGTERM sent to attnprof on, waits
// for it and for the processes it leaves running, and gathers what each process that used CUDA
// wrote. The other side, inside each profiled process, is inject/injection.cpp (the driver loads
// it there; it links no CUDA runtime, so it cannot live here). Nothing here touches CUDA: host
// tests drive it with plain programs.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <optional>
#include <string>
#include <vector>

#include "summary/render.hpp"
#include "trace/trace_format.hpp"

namespace attnprof {

// The command line of `attnprof profile`.
struct ProfileRequest {
  std::string out_dir;              // empty: traces/profile-<UTC time>
  std::string trace_format = "json";
  std::string format{to_string(OutputFormat::table)};
  double grace_seconds = 10;  // ProfileLaunch::descendant_grace
  bool memory = false;        // ProfileLaunch::pytorch_allocations
  std::vector<std::string> command;
};

int profile_command(const ProfileRequest& request);

struct ProfileLaunch {
  std::vector<std::string> command;      // program and arguments; the program is looked up in PATH
  std::filesystem::path out_dir;         // created if missing; per-process outputs land here
  std::filesystem::path inject_library;  // libattnprof_inject.so (absolute after launch)
  trace::TraceFormat trace_format = trace::TraceFormat::json;  // how each process writes its trace
  std::FILE* progress = stderr;          // one line per notable step; nullptr for none
  // How long, once the command has ended, to wait for the processes it left running (a launcher's
  // workers orphaned when it died): each writes its profile when it ends. Those still running
  // after it are named, and what there is gathered.
  std::chrono::milliseconds descendant_grace{10'000};
  // Every PyTorch tensor allocation a CUPTI memory record: PyTorch's caching allocator hands out
  // pieces of segments it allocated once, which CUDA (and so CUPTI) never sees; on its
  // cudaMallocAsync backend each tensor is a stream-ordered allocation of its own. Sets
  // PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync for the command (added to the user's settings).
  bool pytorch_allocations = false;
};

// PYTORCH_CUDA_ALLOC_CONF with the cudaMallocAsync backend added to `current` (the user's value,
// or none): "backend:cudaMallocAsync", or "<current>,backend:cudaMallocAsync". A `current` that
// names another backend is kept as it is (nullopt): the user chose it.
std::optional<std::string> allocation_conf_for_memory(const std::optional<std::string>& current);

struct ProfiledProcess {
  std::uint32_t pid = 0;
  std::optional<int> rank;
  std::filesystem::path trace;
  std::filesystem::path summary;
};

struct ProfileOutcome {
  int exit_code = 0;                 // the command's: its exit status, or 128 + the signal that ended it
  std::optional<int> signal;         // the signal that ended it, if one did
  // Processes of the command left running when it ended (re-parented to attnprof): how many were
  // waited for, and those still running when descendant_grace ran out. Not in the exit code.
  std::size_t descendants_waited_for = 0;
  std::vector<std::uint32_t> descendants_still_running;
  std::vector<ProfiledProcess> processes;  // what each process that ran GPU work wrote
  // Processes that initialised CUDA but launched nothing on a GPU (torch.compile's workers):
  // listed once, never cases.
  struct IdleProcess {
    std::uint32_t pid = 0;
    std::string command;
  };
  std::vector<IdleProcess> idle;
  // With one process: out_dir/trace.json and out_dir/summary.json. With several, each keeps its
  // trace-[rank<R>-]pid<N>.json and summary.json lists every process's cases.
  std::optional<std::filesystem::path> trace;
  std::optional<std::filesystem::path> summary;
};

// Where libattnprof_inject.so is: $ATTNPROF_INJECT_LIBRARY, next to the executable, in
// ../lib or ../lib/inject from it (the build tree), or where the build put it. Throws
// std::runtime_error listing the places it looked.
std::filesystem::path find_inject_library();

// Runs the command to completion. Throws UsageError for an empty command; a program that cannot
// be started gives exit code 127 (not found) or 126 (not executable), as a shell would.
ProfileOutcome profile_program(const ProfileLaunch& launch);

// Combines the summaries of several processes into out_dir/summary.json, each case label
// prefixed with "[pid N] " (or "[rank R] ").
std::filesystem::path combine_process_summaries(const std::vector<ProfiledProcess>& processes,
                                                const std::filesystem::path& out_dir);

}  // namespace attnprof
