#include "app/commands.hpp"

#include <cuda_runtime_api.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/backend.hpp"
#include "backends/cudnn_info.hpp"
#include "collector/activity_collector.hpp"
#include "check/check.hpp"
#include "config/config.hpp"
#include "core/errors.hpp"
#include "core/utc_time.hpp"
#include "gpu/device_info.hpp"
#include "inject/launcher.hpp"
#include "runner/device_workers.hpp"
#include "runner/runner.hpp"
#include "sweep/plan.hpp"
#include "summary/merged_summary.hpp"
#include "summary/render.hpp"
#include "summary/trace_report.hpp"
#include "trace/json_pull_parser.hpp"

namespace attnprof {
namespace {

constexpr const char* kEmbeddedSource = "<embedded configs/default.json>";


Config load_run_config(const RunCommand& o) {
  const std::vector<std::string> known = accepted_backend_names();
  Config config = o.config_path.empty() ? parse_config(embedded_default_config(), kEmbeddedSource, known)
                                        : load_config_file(o.config_path, known);
  if (o.iterations) config.iterations = *o.iterations;
  if (o.warmup) config.warmup = *o.warmup;
  if (!o.metrics.empty()) config.metrics = o.metrics;
  return config;
}

OutputFormat format_of(const std::string& text) {
  const auto format = parse_output_format(text);
  if (!format) throw UsageError(fmt::format("unknown format '{}': use table, md, csv or json", text));
  return *format;
}

}  // namespace

namespace {

std::filesystem::path self_executable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the attnprof executable (/proc/self/exe) to start the GPU workers");
  return exe;
}

// `attnprof run` as one GPU's worker: the user's options, this GPU and its share of the cases.
std::vector<std::string> worker_command(const RunCommand& o, const DeviceShare& share) {
  std::vector<std::string> argv = {self_executable().string(), "run"};
  if (!o.config_path.empty()) argv.insert(argv.end(), {"--config", o.config_path});
  if (!o.backends.empty()) argv.insert(argv.end(), {"--backends", fmt::format("{}", fmt::join(o.backends, ","))});
  if (!o.metrics.empty()) argv.insert(argv.end(), {"--metrics", fmt::format("{}", fmt::join(o.metrics, ","))});
  if (o.iterations) argv.insert(argv.end(), {"--iterations", std::to_string(*o.iterations)});
  if (o.warmup) argv.insert(argv.end(), {"--warmup", std::to_string(*o.warmup)});
  argv.insert(argv.end(), {"--cupti-buffer-size", std::to_string(o.buffer_bytes), "--cupti-max-buffers",
                           std::to_string(o.max_buffers), "--device", std::to_string(share.device), "--out",
                           share.out_dir.string(), "--worker-cases", fmt::format("{}", fmt::join(share.cases, ","))});
  if (o.quiet) argv.push_back("--quiet");
  return argv;
}

}  // namespace

int run_command(const RunCommand& o, const std::atomic<bool>* interrupted) {
  Config config;
  try {
    config = load_run_config(o);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  }
  const std::vector<std::string> backends = expand_backend_names(o.backends.empty() ? config.backends : o.backends);
  const OutputFormat format = format_of(o.format);

  if (o.dry_run) {
    const std::vector<PlannedCase> cases = plan_cases(config, backends);
    std::cout << fmt::format("{}: valid; {} cases, {} warm-up + {} timed iterations each\n", config.source,
                             cases.size(), config.warmup, config.iterations);
    // An explicit --devices list shows each case's GPU; `all` is counted when the run starts.
    std::vector<int> device_of(cases.size(), -1);
    if (!o.devices.empty() && o.devices != "all") {
      const std::vector<int> devices = parse_device_list(o.devices, std::nullopt);
      for (const DeviceShare& share : share_out(cases, devices, {}))
        for (int i : share.cases) device_of[static_cast<std::size_t>(i)] = share.device;
    } else if (o.devices == "all") {
      std::cout << "--devices all: the cases are shared out over the GPUs found when the run starts\n";
    }
    for (std::size_t i = 0; i < cases.size(); ++i)
      std::cout << (device_of[i] >= 0 ? fmt::format("  GPU {}  ", device_of[i]) : "  ") << cases[i].label << "\n";
    return kExitOk;
  }
  if (o.worker && !o.device) throw UsageError("--worker-cases needs --device");

  RunOptions options;
  options.config = config;
  options.backends = backends;
  const std::string stem =
      o.config_path.empty() ? "default" : std::filesystem::path(o.config_path).stem().string();
  options.out_dir = o.out_dir.empty() ? std::filesystem::path("traces") / fmt::format("{}-{}", stem, utc_now_compact())
                                      : std::filesystem::path(o.out_dir);
  options.device = o.device.value_or(0);
  options.collector.buffer_bytes = o.buffer_bytes;
  options.collector.max_buffers = o.max_buffers;
  options.metrics = config.metrics;
  options.progress = o.quiet ? nullptr : stderr;
  options.interrupted = interrupted;

  if (o.worker) {
    // One GPU's share of `run --devices`: the parent prints the merged table.
    options.worker = true;
    options.worker_cases = o.worker_cases;
    return run_sweep(options).exit_code;
  }

  std::vector<int> devices = {options.device};
  if (!o.devices.empty()) devices = parse_device_list(o.devices, require_devices());
  if (devices.size() > 1 || o.isolate) {
    DeviceRunOptions sharded;
    sharded.cases = plan_cases(config, backends);
    sharded.devices = devices;
    sharded.out_dir = options.out_dir;
    sharded.worker_command = [&](const DeviceShare& share) { return worker_command(o, share); };
    sharded.progress = o.quiet ? nullptr : stderr;
    const DeviceRunOutcome outcome = run_on_devices(sharded);
    std::cout << render_summary(outcome.summary, format);
    for (const std::string& note : outcome.notes) std::cerr << "attnprof run: note: " << note << "\n";
    std::cerr << fmt::format("wrote {} (open in ui.perfetto.dev) and {}\n", outcome.trace_path.string(),
                             outcome.summary_path.string());
    return outcome.exit_code;
  }

  options.device = devices.front();
  const RunOutcome outcome = run_sweep(options);
  std::cout << render_summary(outcome.summary, format);
  std::cerr << fmt::format("wrote {} (open in ui.perfetto.dev) and {}\n", outcome.trace_path.string(),
                           outcome.summary_path.string());
  return outcome.exit_code;
}

int devices_command() {
  const int count = require_devices();
  const SoftwareVersions v = query_software_versions();
  std::cout << fmt::format("driver {} (CUDA {}), CUDA runtime {}, CUPTI API {}, cuDNN {}\n",
                           v.driver_text.empty() ? "?" : v.driver_text, cuda_version_text(v.driver),
                           cuda_version_text(v.runtime), ActivityCollector::cupti_version_text(),
                           cudnn_runtime_description());
  for (int d = 0; d < count; ++d) {
    const DeviceProperties p = query_device_properties(d);
    std::cout << fmt::format(
        "GPU {}: {} (sm_{}{}), {} SMs, {:.1f} GiB, L2 {:.0f} MiB, {} regs/SM, {} KiB shared/SM ({} KiB opt-in per "
        "block), max {} threads/SM\n",
        d, p.name, p.compute_major, p.compute_minor, p.sm_count, static_cast<double>(p.total_global_mem) / (1 << 30),
        static_cast<double>(p.l2_cache_bytes) / (1 << 20), p.regs_per_sm, p.shared_mem_per_sm / 1024,
        p.shared_mem_per_block_optin / 1024, p.max_threads_per_sm);
  }
  return kExitOk;
}

int backends_command(const BackendsCommand& o) {
  std::optional<DeviceProperties> device;
  std::string no_device_reason;
  try {
    require_devices();
    device = query_device_properties(o.device);
    std::cout << fmt::format("GPU {}: {} (sm_{}{}), cuDNN {}\n\n", o.device, device->name, device->compute_major,
                             device->compute_minor, cudnn_runtime_description());
  } catch (const NoUsableGpuError& e) {
    no_device_reason = e.what();
    std::cout << "no GPU here (" << no_device_reason << "): device checks skipped, problem support shown\n\n";
  }
  const std::vector<int> head_dims = {32, 40, 64, 80, 96, 128, 160, 192, 256};
  for (const BackendInfo& info : backend_registry()) {
    const auto backend = info.make();
    std::string status = "runs here";
    if (device) {
      if (auto why = backend->check_device(*device)) status = "cannot run here: " + *why;
    } else {
      status = "not checked (no GPU)";
    }
    std::cout << fmt::format("{:<20} {}\n{:<20} {}\n", info.name, info.description, "", status);
    std::set<std::string> dtypes, dims, reasons;
    bool causal = false, bias = false;
    for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
      for (int d : head_dims)
        for (bool is_causal : {false, true})
          for (bool has_bias : {false, true}) {
            AttentionProblem p;
            p.shape = {1, 1, 128, 128, d};
            p.dtype = dtype;
            p.causal = is_causal;
            p.has_bias = has_bias;
            if (auto why = backend->check_problem(p)) {
              reasons.insert(*why);
              continue;
            }
            dtypes.insert(std::string(to_string(dtype)));
            dims.insert(fmt::format("{:03}", d));
            causal = causal || is_causal;
            bias = bias || has_bias;
          }
    std::string dim_list;
    for (const std::string& d : dims) {
      if (!dim_list.empty()) dim_list += ' ';
      dim_list += std::to_string(std::stoi(d));
    }
    std::cout << fmt::format("{:<20} dtypes: {}; head dims (of those probed): {}; causal: {}; bias: {}\n", "",
                             dtypes.empty() ? "none" : fmt::format("{}", fmt::join(dtypes, " ")),
                             dim_list.empty() ? "none" : dim_list, causal ? "yes" : "no", bias ? "yes" : "no");
    for (const std::string& why : reasons) std::cout << fmt::format("{:<20} rejects: {}\n", "", why);
    std::cout << "\n";
  }
  return kExitOk;
}

int check_command(const CheckCommand& o) {
  RunSummary current;
  try {
    current = load_summary(o.summary_path);
  } catch (const std::runtime_error& e) {
    std::cerr << "attnprof check: " << e.what() << "\n";
    return kExitUsage;
  }
  if (o.update) {
    write_json_atomically(o.baseline_path, nlohmann::json(current));
    std::cout << fmt::format("baseline {} updated from {} ({} cases)\n", o.baseline_path, o.summary_path,
                             current.cases.size());
    return kExitOk;
  }
  RunSummary baseline;
  try {
    baseline = load_summary(o.baseline_path);
  } catch (const std::runtime_error& e) {
    std::cerr << "attnprof check: " << e.what() << "\n";
    return kExitUsage;
  }
  CheckOptions options;
  options.time_tolerance_percent = o.time_tolerance_percent;
  options.expectations = o.expectations;
  const CheckReport report = compare_summaries(baseline, current, options);
  std::cout << (o.format == "json" ? render_check_json(report) : render_check_table(report, o.format == "md"));
  if (!o.junit_path.empty()) write_text_atomically(o.junit_path, render_junit(report));
  return report.passed() ? kExitOk : kExitRegression;
}

int report_command(const ReportCommand& o) {
  const OutputFormat format = format_of(o.format);
  TraceReport report;
  try {
    TraceReportOptions options;
    options.known_backends = accepted_backend_names();
    report = report_from_trace(o.trace_path, options);
  } catch (const trace::TraceFormatError& e) {
    std::cerr << "attnprof report: " << e.what() << "\n";
    return kExitUsage;
  }
  for (const std::string& note : report.notes) std::cerr << "attnprof report: note: " << note << "\n";
  std::cout << render_summary(report.summary, format);
  if (!o.summary_out.empty()) {
    write_json_atomically(o.summary_out, nlohmann::json(report.summary));
    std::cerr << fmt::format("attnprof report: {} ({} events, {}) -> {}\n", o.trace_path, report.events,
                             report.origin, o.summary_out);
  }
  return kExitOk;
}

int profile_command(const ProfileCommand& o) {
  const OutputFormat format = format_of(o.format);
  ProfileLaunch launch;
  launch.command = o.command;
  launch.out_dir = o.out_dir.empty() ? std::filesystem::path("traces") / fmt::format("profile-{}", utc_now_compact())
                                     : std::filesystem::path(o.out_dir);
  if (launch.command.empty())
    throw UsageError("profile: no command to run; usage: attnprof profile [--out DIR] -- <command> [args...]");
  launch.inject_library = find_inject_library();
  const ProfileOutcome outcome = profile_program(launch);

  if (outcome.signal) std::cerr << fmt::format("attnprof profile: the command was ended by signal {}\n", *outcome.signal);
  if (outcome.processes.empty()) {
    std::cerr << "attnprof profile: nothing was recorded: no process of the command used CUDA, or none could write "
                 "its profile (killed with SIGKILL?)\n";
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
                             dir.string(), (dir / "trace-merged.json").string());
  }
  return outcome.exit_code;
}
int merge_command(const MergeCommand& o) {
  const OutputFormat format = format_of(o.format);
  std::vector<std::filesystem::path> inputs(o.inputs.begin(), o.inputs.end());
  std::optional<std::filesystem::path> summary_out;
  if (!o.summary_path.empty()) summary_out = o.summary_path;
  ProfileMerge merged;
  try {
    merged = merge_process_traces(inputs, o.out_path, summary_out);
  } catch (const trace::TraceFormatError& e) {
    std::cerr << "attnprof merge: " << e.what() << "\n";
    return kExitUsage;
  }
  for (const std::string& note : merged.notes) std::cerr << "attnprof merge: note: " << note << "\n";
  std::cout << render_summary(merged.combined, format);
  std::cerr << fmt::format("attnprof merge: {} traces, {} events -> {} (open in ui.perfetto.dev) and {}\n",
                           merged.merge.inputs.size(), merged.merge.events, merged.trace.string(),
                           merged.summary.string());
  for (const trace::MergedInput& in : merged.merge.inputs)
    std::cerr << fmt::format("  {:<12} {}  pid {}, GPU pids {}+, clock {:+.3f} ms, cases {}..{}\n", in.label,
                             in.path.string(), in.host_pid, in.gpu_pid_base, in.clock_shift_ns / 1e6, in.first_case,
                             in.first_case + in.case_count - 1);
  return kExitOk;
}

}  // namespace attnprof
