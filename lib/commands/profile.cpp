// The story of `attnprof profile`, launching side: find the injection library, start the command
// with it, pass signals on, wait, gather each process's trace and summary (one process: they
// become trace.json and summary.json; several: one summary lists every process's cases), print.
#include "commands/profile.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands/merge.hpp"
#include "core/errors.hpp"
#include "core/utc_time.hpp"
#include "process/child_processes.hpp"
#include "process/spawn.hpp"
#include "summary/render.hpp"
#include "summary/summary.hpp"
#include "trace/trace_files.hpp"
#include "trace/trace_format.hpp"

extern char** environ;

namespace attnprof {
namespace {

void say(std::FILE* progress, const std::string& text) {
  if (progress == nullptr) return;
  std::fprintf(progress, "attnprof profile: %s\n", text.c_str());
  std::fflush(progress);
}

// The trace of several processes merged into one, as profile_command suggests it.
constexpr const char* kMergedTraceName = "trace-merged.json";

// The trace one process's files become (its summary: merged_summary_path of it, summary.json).
std::filesystem::path single_trace_path(const std::filesystem::path& dir, trace::TraceFormat format) {
  return dir / trace::trace_file_name("trace", format);
}

// Outputs of an earlier profile into the same directory would be taken for this one's: its
// per-process files, the trace and summary one process's files became, and the suggested merge
// with its summary (a later `merge DIR` reads every trace there).
void remove_stale_outputs(const std::filesystem::path& dir) {
  const std::filesystem::path merged = dir / kMergedTraceName;
  std::set<std::filesystem::path> combined = {merged, merged_summary_path(merged)};
  for (const trace::TraceFormat format : {trace::TraceFormat::json, trace::TraceFormat::json_gz}) {
    combined.insert(single_trace_path(dir, format));
    combined.insert(merged_summary_path(single_trace_path(dir, format)));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (trace::parse_process_output_name(entry.path().filename().string()) || combined.count(entry.path()))
      std::filesystem::remove(entry.path());
  }
}

constexpr std::string_view kAllocConf = "PYTORCH_CUDA_ALLOC_CONF=";
constexpr std::string_view kAsyncBackend = "backend:cudaMallocAsync";

std::vector<std::string> child_environment(const ProfileLaunch& launch, std::FILE* progress) {
  const std::string inject = launch.inject_library.string();
  std::vector<std::string> env;
  bool user_nvtx = false;
  std::optional<std::string> user_alloc_conf;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (launch.pytorch_allocations && entry.rfind(kAllocConf, 0) == 0) {
      user_alloc_conf = entry.substr(kAllocConf.size());
      continue;
    }
    if (entry.rfind("CUDA_INJECTION64_PATH=", 0) == 0 && entry != "CUDA_INJECTION64_PATH=" + inject)
      say(progress, fmt::format("{} is replaced by attnprof's library for the command (the driver loads one)", entry));
    if (entry.rfind("CUDA_INJECTION64_PATH=", 0) == 0 || entry.rfind("ATTNPROF_PROFILE_DIR=", 0) == 0 ||
        entry.rfind("ATTNPROF_TRACE_FORMAT=", 0) == 0)
      continue;
    if (entry.rfind("NVTX_INJECTION64_PATH=", 0) == 0) user_nvtx = true;
    env.push_back(entry);
  }
  env.push_back("CUDA_INJECTION64_PATH=" + inject);
  // NVTX's loader reads this before the program's first NVTX call; our library forwards to the
  // libcupti it is bound to (PyTorch may have loaded its own: it must be that one).
  if (!user_nvtx) env.push_back("NVTX_INJECTION64_PATH=" + inject);
  else say(progress, "NVTX_INJECTION64_PATH is already set; NVTX ranges go where it says, not to attnprof");
  env.push_back("ATTNPROF_PROFILE_DIR=" + launch.out_dir.string());
  env.push_back("ATTNPROF_TRACE_FORMAT=" + std::string(trace::to_string(launch.trace_format)));
  if (launch.pytorch_allocations) {
    const std::optional<std::string> conf = allocation_conf_for_memory(user_alloc_conf);
    env.push_back(std::string(kAllocConf) + conf.value_or(*user_alloc_conf));
    say(progress, conf ? fmt::format("--memory: {}{} for the command, so every PyTorch tensor allocation is a CUDA "
                                     "allocation CUPTI records (PyTorch's caching allocator hides them in its segments)",
                                     kAllocConf, *conf)
                       : fmt::format("--memory: {}{} names another allocator backend and is kept; PyTorch's tensor "
                                     "allocations are recorded only as far as that backend makes CUDA allocations",
                                     kAllocConf, *user_alloc_conf));
  }
  return env;
}

}  // namespace

std::optional<std::string> allocation_conf_for_memory(const std::optional<std::string>& current) {
  if (!current || current->empty()) return std::string(kAsyncBackend);
  const std::size_t backend = current->find("backend:");
  if (backend != std::string::npos) {
    if (current->compare(backend, kAsyncBackend.size(), kAsyncBackend) == 0) return *current;
    return std::nullopt;
  }
  return *current + "," + std::string(kAsyncBackend);
}

namespace {

std::filesystem::path self_directory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

}  // namespace

std::filesystem::path find_inject_library() {
  constexpr const char* kName = "libattnprof_inject.so";
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("ATTNPROF_INJECT_LIBRARY"); env != nullptr && *env != '\0') candidates.emplace_back(env);
  const std::filesystem::path dir = self_directory();
  if (!dir.empty()) {
    candidates.push_back(dir / kName);
    candidates.push_back(dir / ".." / "lib" / kName);
    candidates.push_back(dir / ".." / "lib" / "inject" / kName);
  }
#ifdef ATTNPROF_INJECT_BUILD_PATH
  candidates.emplace_back(ATTNPROF_INJECT_BUILD_PATH);
#endif
  std::string looked;
  for (const std::filesystem::path& c : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(c, ec)) return std::filesystem::weakly_canonical(c);
    looked += "\n  " + c.string();
  }
  throw std::runtime_error(fmt::format("cannot find {} (build the attnprof_inject target, or set "
                                       "ATTNPROF_INJECT_LIBRARY); looked in:{}",
                                       kName, looked));
}

ProfileOutcome profile_program(const ProfileLaunch& given) {
  if (given.command.empty() || given.command.front().empty())
    throw UsageError("profile: no command to run; usage: attnprof profile [--out DIR] -- <command> [args...]");
  ProfileLaunch launch = given;
  std::filesystem::create_directories(launch.out_dir);
  launch.out_dir = std::filesystem::canonical(launch.out_dir);
  launch.inject_library = std::filesystem::absolute(launch.inject_library);
  remove_stale_outputs(launch.out_dir);

  const std::vector<std::string> env = child_environment(launch, launch.progress);
  ProfileOutcome outcome;
  // A launcher (torchrun, a multiprocessing pool) that dies first leaves its workers writing their
  // profiles: as a subreaper, attnprof gets them as children and can wait for them.
  const ChildSubreaper subreaper;
  if (subreaper.error() != 0)
    say(launch.progress, fmt::format("prctl(PR_SET_CHILD_SUBREAPER) failed: {}; processes the command leaves running "
                                     "when it ends are not waited for, and their profiles may be missing",
                                     std::strerror(subreaper.error())));
  ChildSignalForwarding forwarding;  // installed before the spawn, so no signal falls between
  pid_t child = 0;
  const int spawn_error = spawn_with_default_signals(launch.command, &env, child);
  if (spawn_error != 0) {
    say(launch.progress, fmt::format("cannot run '{}': {}", launch.command.front(), std::strerror(spawn_error)));
    outcome.exit_code = spawn_error == ENOENT ? 127 : 126;
    return outcome;
  }
  forwarding.add(child);
  const ChildExit exit = wait_for_child(child);
  forwarding.remove(child);
  outcome.exit_code = exit.exit_code;
  outcome.signal = exit.signal;
  const AdoptedDescendants descendants = wait_for_adopted_descendants(launch.descendant_grace, forwarding);
  outcome.descendants_waited_for = descendants.waited_for;
  outcome.descendants_still_running.assign(descendants.still_running.begin(), descendants.still_running.end());
  if (!descendants.still_running.empty()) {
    say(launch.progress, fmt::format("{} orphaned process(es) of the command still run after {:g} s (pid {}); "
                                     "gathering what there is: their profiles may be missing or cut short",
                                     descendants.still_running.size(),
                                     std::chrono::duration<double>(launch.descendant_grace).count(),
                                     fmt::join(descendants.still_running, ", ")));
  } else if (descendants.waited_for > 0) {
    say(launch.progress, fmt::format("waited for {} orphaned process(es) of the command", descendants.waited_for));
  }

  // What each process that used CUDA wrote.
  for (const auto& entry : std::filesystem::directory_iterator(launch.out_dir)) {
    const std::string name = entry.path().filename().string();
    const std::optional<trace::ProcessOutputName> output = trace::parse_process_output_name(name);
    if (output && output->stem == "idle") {
      ProfileOutcome::IdleProcess idle{output->pid, ""};
      try {
        std::ifstream in(entry.path());
        idle.command = nlohmann::json::parse(in).value("command", "");
      } catch (const std::exception&) {
        // The pid is what matters; a marker cut short by a kill still names it.
      }
      outcome.idle.push_back(std::move(idle));
      std::filesystem::remove(entry.path());
      continue;
    }
    if (!output || output->stem != "summary") continue;
    ProfiledProcess p;
    p.pid = output->pid;
    p.rank = output->rank;
    p.summary = entry.path();
    const std::string trace_name = trace::process_output_name("trace", output->pid, output->rank);
    p.trace = launch.out_dir / trace_name;
    if (!std::filesystem::exists(p.trace)) p.trace = launch.out_dir / (trace_name + ".gz");
    if (std::filesystem::exists(p.trace)) outcome.processes.push_back(p);
  }
  std::sort(outcome.idle.begin(), outcome.idle.end(),
            [](const ProfileOutcome::IdleProcess& a, const ProfileOutcome::IdleProcess& b) { return a.pid < b.pid; });
  std::sort(outcome.processes.begin(), outcome.processes.end(), [&](const ProfiledProcess& a, const ProfiledProcess& b) {
    const bool a_root = a.pid == static_cast<std::uint32_t>(child), b_root = b.pid == static_cast<std::uint32_t>(child);
    if (a_root != b_root) return a_root;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.pid < b.pid;
  });

  if (outcome.processes.size() == 1) {
    ProfiledProcess& p = outcome.processes.front();
    const std::filesystem::path trace = single_trace_path(
        launch.out_dir, p.trace.extension() == ".gz" ? trace::TraceFormat::json_gz : trace::TraceFormat::json);
    const std::filesystem::path summary = merged_summary_path(trace);
    std::filesystem::rename(p.trace, trace);
    std::filesystem::rename(p.summary, summary);
    p.trace = trace;
    p.summary = summary;
    outcome.trace = trace;
    outcome.summary = summary;
  } else if (outcome.processes.size() > 1) {
    outcome.summary = combine_process_summaries(outcome.processes, launch.out_dir);
  }
  return outcome;
}

std::filesystem::path combine_process_summaries(const std::vector<ProfiledProcess>& processes,
                                                const std::filesystem::path& out_dir) {
  // A rank names a process only where no other process has it: children inherit RANK, and two
  // cases of one label could not be told apart (check refuses them).
  std::map<int, int> processes_of_rank;
  for (const ProfiledProcess& p : processes)
    if (p.rank) ++processes_of_rank[*p.rank];
  std::vector<LabelledSummary> parts;
  for (const ProfiledProcess& p : processes) {
    const std::string label = !p.rank                            ? fmt::format("pid {}", p.pid)
                              : processes_of_rank.at(*p.rank) == 1 ? fmt::format("rank {}", *p.rank)
                                                                   : fmt::format("rank {} pid {}", *p.rank, p.pid);
    parts.push_back({label, load_summary(p.summary.string())});
  }
  const std::filesystem::path path = out_dir / "summary.json";
  write_json_atomically(path.string(), nlohmann::json(combine_summaries(parts)));
  return path;
}

int profile_command(const ProfileRequest& r) {
  const OutputFormat format = output_format_named(r.format);
  ProfileLaunch launch;
  launch.command = r.command;
  // The default folder names the second and attnprof's pid: two profiles started in the same
  // second must not write (and clear) one folder.
  launch.out_dir = r.out_dir.empty()
                       ? std::filesystem::path("traces") / fmt::format("profile-{}-{}", utc_now_compact(), getpid())
                       : std::filesystem::path(r.out_dir);
  if (launch.command.empty())
    throw UsageError("profile: no command to run; usage: attnprof profile [--out DIR] -- <command> [args...]");
  launch.inject_library = find_inject_library();
  launch.trace_format = trace::parse_trace_format(r.trace_format).value_or(trace::TraceFormat::json);
  if (!(r.grace_seconds >= 0 && r.grace_seconds <= 1e6))
    throw UsageError(fmt::format("profile: --grace takes seconds from 0 to 1e6, not {}", r.grace_seconds));
  launch.descendant_grace = std::chrono::milliseconds(static_cast<std::int64_t>(r.grace_seconds * 1000));
  launch.pytorch_allocations = r.memory;
  const ProfileOutcome outcome = profile_program(launch);

  if (outcome.signal) std::cerr << fmt::format("attnprof profile: the command was ended by signal {}\n", *outcome.signal);
  if (!outcome.idle.empty()) {
    std::cerr << fmt::format("attnprof profile: {} process(es) initialised CUDA but launched no GPU work:\n",
                             outcome.idle.size());
    for (const ProfileOutcome::IdleProcess& p : outcome.idle)
      std::cerr << fmt::format("  pid {}  {}\n", p.pid, p.command.size() > 100 ? p.command.substr(0, 97) + "..." : p.command);
  }
  if (outcome.processes.empty()) {
    // A profile is written at exit() or on SIGINT/SIGTERM: a crash, _exit() or SIGKILL leaves none.
    const std::string why = outcome.signal == SIGKILL ? "SIGKILL ended the command before it could write one"
                            : outcome.signal          ? fmt::format("signal {} ended the command", *outcome.signal)
                                                      : "no process of the command used CUDA, or none wrote its profile "
                                                        "(a crash or _exit() leaves none)";
    std::cerr << fmt::format("attnprof profile: nothing was recorded: {}\n", why);
    return outcome.exit_code;
  }
  if (outcome.summary) std::cout << render_summary(load_summary(outcome.summary->string()), format);
  if (outcome.trace) {
    std::cerr << fmt::format("attnprof profile: wrote {} (open in ui.perfetto.dev) and {}\n", outcome.trace->string(),
                             outcome.summary->string());
  } else {
    std::cerr << fmt::format("attnprof profile: {} processes used CUDA; each wrote its own trace, {} lists every "
                             "process's cases:\n",
                             outcome.processes.size(), outcome.summary ? outcome.summary->string() : "");
    for (const ProfiledProcess& p : outcome.processes) std::cerr << "  " << p.trace.string() << "\n";
    const std::filesystem::path dir = outcome.processes.front().trace.parent_path();
    std::cerr << fmt::format("attnprof profile: one trace with a process track per rank and GPU: attnprof merge {} "
                             "--out {}\n",
                             dir.string(), (dir / kMergedTraceName).string());
  }
  return outcome.exit_code;
}

}  // namespace attnprof
