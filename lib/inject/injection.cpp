// libattnprof_inject.so: loaded by the CUDA driver into a program started by `attnprof profile`
// (CUDA_INJECTION64_PATH), and by NVTX as its tool (NVTX_INJECTION64_PATH). It runs the same
// CUPTI collector as `attnprof run`, keeps every record until the process ends, and then writes
// trace-pid<N>.json and summary-pid<N>.json into $ATTNPROF_PROFILE_DIR: at exit, or on SIGINT /
// SIGTERM (flushed, then the signal is re-raised so the program's exit status stays its own).
//
// Only InitializeInjection and InitializeInjectionNvtx2 are exported (inject.map): nothing of
// ours may interpose on the host program's symbols.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "collector/activity_collector.hpp"
#include "inject/driver_devices.hpp"
#include "summary/program_summary.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/trace_files.hpp"
#include "trace/trace_format.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof {
namespace {

// Everything the injection owns. Created once per process, never destroyed: CUPTI's threads may
// still call into the collector while the process tears down.
struct Session {
  std::mutex mutex;
  bool flushed = false;
  pid_t pid = 0;  // the process that initialized CUPTI: a fork()ed child without exec must not flush
  ActivityCollector* collector = nullptr;
  std::filesystem::path out_dir;
  int signal_pipe[2] = {-1, -1};
};

Session* g_session = nullptr;
std::mutex g_start_mutex;
bool g_started = false;
thread_local bool g_starting = false;  // set while this thread sets CUPTI up
volatile sig_atomic_t g_session_pid = 0;
// CLOCK_MONOTONIC nanoseconds of the first terminating signal; 0 until one comes.
std::atomic<std::int64_t> g_first_signal_ns{0};
static_assert(std::atomic<std::int64_t>::is_always_lock_free, "read and written in a signal handler");

void log(const std::string& text) { std::fprintf(stderr, "attnprof profile: %s\n", text.c_str()); }

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw)
    if (c == '\0') c = ' ';
  return raw.empty() ? fmt::format("pid {}", getpid()) : raw;
}

// The first of `names` set to a non-negative integer.
std::optional<int> integer_from_environment(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long number = std::strtol(value, &end, 10);
    if (end != nullptr && *end == '\0' && number >= 0) return static_cast<int>(number);
  }
  return std::nullopt;
}

// torchrun (RANK, LOCAL_RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_*), MPICH/Hydra and Intel
// MPI (PMI_*, MPI_LOCALRANKID), Slurm (SLURM_*). The global rank names the output; without one,
// the local rank does.
std::optional<int> rank_from_environment() {
  if (auto rank = integer_from_environment({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})) return rank;
  return integer_from_environment({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
}

std::optional<int> local_rank_from_environment() {
  return integer_from_environment({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
}

std::optional<int> world_size_from_environment() {
  return integer_from_environment({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
}

// Writes this process's trace and summary. Idempotent; safe from atexit and the signal thread.
void flush_outputs(const char* why) {
  Session* s = g_session;
  // HPCToolkit #195: flushing CUPTI in a fork()ed child can hang (and the mutex may have been
  // copied locked), so a child that did not start CUDA itself leaves at once.
  if (s == nullptr || getpid() != s->pid) return;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->flushed) return;
  s->flushed = true;
  try {
    // GPU records are final only once the work is done; sync whatever context this thread has.
    CUcontext context = nullptr;
    if (cuCtxGetCurrent(&context) == CUDA_SUCCESS && context != nullptr) cuCtxSynchronize();
    trace::ActivityBatch batch = s->collector->drain(/*final_drain=*/true);
    if (batch.kernels.empty() && batch.memcpys.empty() && batch.memsets.empty()) {
      // CUDA initialised but nothing ran on a GPU (torch.compile's workers): one line for the
      // launcher's list, not a trace with an empty case.
      if (!batch.api_calls.empty()) {
        const std::optional<int> rank = rank_from_environment();
        const nlohmann::json idle = {{"pid", s->pid}, {"command", command_line()}, {"api_calls", batch.api_calls.size()}};
        write_json_atomically((s->out_dir / trace::process_output_name("idle", static_cast<std::uint32_t>(s->pid), rank)).string(),
                              idle);
      }
      return;
    }

    std::set<std::uint32_t> ordinals;
    for (const auto& k : batch.kernels) ordinals.insert(k.device);
    for (const auto& m : batch.memcpys) ordinals.insert(m.device);
    for (const auto& m : batch.memsets) ordinals.insert(m.device);
    for (const auto& m : batch.memory)
      if (!trace::is_host_memory(m.memory_kind)) ordinals.insert(m.device);
    std::vector<DeviceProperties> devices;
    std::vector<std::string> notes = s->collector->notes();
    for (std::uint32_t ordinal : ordinals) {
      try {
        devices.push_back(driver_device_properties(static_cast<int>(ordinal)));
      } catch (const std::exception& e) {
        notes.push_back(fmt::format("device {}: {}", ordinal, e.what()));
      }
    }

    const trace::CaptureHealth capture = s->collector->health();

    ProgramInfo info;
    info.command = command_line();
    info.pid = static_cast<std::uint32_t>(s->pid);
    info.rank = rank_from_environment();
    info.local_rank = local_rank_from_environment();
    info.world_size = world_size_from_environment();
    info.driver_version = driver_version_text();
    info.cupti_version = ActivityCollector::cupti_version_text();
    // Which libcupti recorded this process (PyTorch brings its own): worth knowing when it misbehaves.
    Dl_info cupti{};
    if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &cupti) != 0 && cupti.dli_fname != nullptr)
      notes.push_back(fmt::format("recorded by CUPTI {} from {}", info.cupti_version, cupti.dli_fname));

    RunSummary summary = summarize_program(batch, devices, info, capture, notes);
    for (CaseSummary& c : summary.cases) c.device = summary.device.id;  // the device its work is judged on
    // `attnprof profile --trace-format` says how the trace is stored (json.gz: gzip while writing).
    const char* format_name = std::getenv("ATTNPROF_TRACE_FORMAT");
    const trace::TraceFormat format = format_name != nullptr
                                          ? trace::parse_trace_format(format_name).value_or(trace::TraceFormat::json)
                                          : trace::TraceFormat::json;
    std::filesystem::path trace_path = s->out_dir / trace::process_output_name("trace", info.pid, info.rank);
    if (format == trace::TraceFormat::json_gz) trace_path += ".gz";
    const std::filesystem::path summary_path = s->out_dir / trace::process_output_name("summary", info.pid, info.rank);
    trace::ChromeTraceWriter writer(trace_path, program_trace_header(batch, devices, info), {format});
    for (const CaseSummary& c : summary.cases) writer.add_case({c.label, c.backend});
    writer.write(batch);
    writer.finish(nlohmann::json(program_provenance(summary, info, notes)));
    write_json_atomically(summary_path.string(), nlohmann::json(summary));
    log(fmt::format("pid {} ({}): {} kernels, {} memcpy, {} memset, {} memory records in {} case(s) -> {}", info.pid,
                    why, batch.kernels.size(), batch.memcpys.size(), batch.memsets.size(), batch.memory.size(),
                    summary.cases.size(), trace_path.string()));
    for (const std::string& note : notes) log(fmt::format("pid {}: {}", info.pid, note));
    if (!capture.complete())
      log(fmt::format("pid {}: {} records dropped, {} buffer requests declined: the trace is incomplete", info.pid,
                      capture.dropped_records, capture.buffers_declined));
  } catch (const std::exception& e) {
    log(fmt::format("pid {}: could not write the profile: {}", s->pid, e.what()));
  }
}

void at_exit() { flush_outputs("exit"); }

// Async-signal-safe: hand the signal to the flushing thread, or die at once in a fork()ed child.
extern "C" void on_terminating_signal(int sig) {
  if (getpid() != g_session_pid || g_session == nullptr) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  // A second signal within a second is the first one again: `timeout` signals attnprof, which
  // passes it on, and then the whole process group, so the program gets it twice at once; ending
  // then would lose the profile being flushed. A later one (Ctrl-C pressed again) ends the process
  // without waiting for the flush. clock_gettime is async-signal-safe.
  timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t now_ns = static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  const std::int64_t first_ns = g_first_signal_ns.load();
  if (first_ns != 0) {
    if (now_ns - first_ns < 1000000000) return;
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  g_first_signal_ns.store(now_ns);
  const unsigned char byte = static_cast<unsigned char>(sig);
  const ssize_t ignored = write(g_session->signal_pipe[1], &byte, 1);
  (void)ignored;
}

void watch_signals(Session* s) {
  unsigned char byte = 0;
  for (;;) {
    const ssize_t n = read(s->signal_pipe[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;
  }
  const int sig = byte;
  flush_outputs(sig == SIGINT ? "SIGINT" : "SIGTERM");
  signal(sig, SIG_DFL);
  kill(getpid(), sig);  // the program ends as the signal would have ended it
}

// Only signals that would kill the program outright are caught: a program with its own handler
// (Python's KeyboardInterrupt) ends through exit, and atexit flushes.
void install_signal_handlers(Session* s) {
  if (pipe(s->signal_pipe) != 0) return;
  bool any = false;
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction ours {};
    ours.sa_handler = on_terminating_signal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    sigaction(sig, &ours, nullptr);
    any = true;
  }
  if (any) std::thread(watch_signals, s).detach();
}

void pin_this_library() {
  // NVTX unloads a tool whose init fails, and the driver may dlclose too: our atexit handler and
  // CUPTI's callbacks point into this library, so it must stay mapped.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pin_this_library), &info) != 0 && info.dli_fname != nullptr)
    dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

void start_session() {
  // Not std::call_once: setting CUPTI up may initialize CUDA, and the driver then calls
  // InitializeInjection on this same thread; that call must return, not wait for itself.
  if (g_starting) return;
  std::lock_guard<std::mutex> lock(g_start_mutex);
  if (g_started) return;
  g_started = true;
  g_starting = true;
  pin_this_library();
  auto* s = new Session();
  s->pid = getpid();
  const char* dir = std::getenv("ATTNPROF_PROFILE_DIR");
  s->out_dir = dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::current_path();
  try {
    // Measured on the H200 (docs/perf/NOTES.md, profile overhead): recording only the driver calls
    // that launch work and handing CUPTI pre-zeroed buffers took the profiled launch loops from
    // 1.83x/1.31x to 1.31x/1.23x unprofiled; the ATTNPROF_CUPTI_* variables still override.
    CollectorOptions profile_defaults;
    profile_defaults.driver_api = DriverApiRecords::launches;
    profile_defaults.zeroed_buffers = true;
    profile_defaults.record_overhead = false;
    // PyTorch's 200-call SDPA loop: 36,879 runtime records -> 4,159, 5.4-5.9 ms -> 4.3-4.4 ms.
    profile_defaults.skip_runtime_queries = true;
    profile_defaults.print_notes = false;  // flush_outputs() logs the collector's notes with the process's
    s->collector = new ActivityCollector(collector_options_from_environment(profile_defaults));
  } catch (const std::exception& e) {
    log(fmt::format("pid {}: CUPTI could not be set up, this process is not recorded: {}", s->pid, e.what()));
    delete s;
    g_starting = false;
    return;
  }
  g_session = s;
  g_session_pid = s->pid;
  std::atexit(at_exit);
  install_signal_handlers(s);
  g_starting = false;
}

}  // namespace
}  // namespace attnprof

// Called by the CUDA driver at cuInit. Returning 1 whatever happens: the program must run even
// when it cannot be recorded.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  attnprof::start_session();
  return 1;
}

// Called by NVTX (each copy of it, at its first call) because NVTX_INJECTION64_PATH names this
// library. Forwards to the libcupti this library is bound to, so ranges reach the same CUPTI
// that records the kernels even when the program (PyTorch) loaded its own libcupti first.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void* (*get_export_table)(std::uint32_t)) {
  const char* off = std::getenv("ATTNPROF_PROFILE_NVTX");
  if (off != nullptr && std::string(off) == "0") return 0;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) == 0 || info.dli_fname == nullptr) return 0;
  void* cupti = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (cupti == nullptr) cupti = dlopen(info.dli_fname, RTLD_LAZY);
  if (cupti == nullptr) return 0;
  using Init = int (*)(const void* (*)(std::uint32_t));
  const auto forward = reinterpret_cast<Init>(dlsym(cupti, "InitializeInjectionNvtx2"));
  if (forward == nullptr) return 0;
  // Start recording now, so a range opened before the first CUDA call is not lost.
  attnprof::start_session();
  return forward(get_export_table);
}
