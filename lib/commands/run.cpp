// The story of `attnprof run`: read the config, plan the cases, then either list them (--dry-run),
// share them out over several GPUs (run_devices.cpp), or sweep them on this GPU: each case run
// and recorded by the sweep engine (runner/sweep.hpp) and written to the trace as it ends, then
// the trace's provenance, summary.json, the table and the exit code.
#include "commands/run.hpp"

#include <unistd.h>

#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/backend.hpp"
#include "commands/run_devices.hpp"
#include "core/errors.hpp"
#include "core/utc_time.hpp"
#include "gpu/device_info.hpp"
#include "html/html_report.hpp"
#include "runner/sweep.hpp"
#include "summary/analysis.hpp"
#include "summary/provenance.hpp"
#include "summary/render.hpp"
#include "sweep/plan.hpp"
#include "trace/chrome_trace_writer.hpp"

namespace attnprof {
namespace {

constexpr const char* kEmbeddedSource = "<embedded configs/default.json>";

// The config, or with --shape the config's settings around that one shape (its causal word and
// dtype, when given, replace the config's); --passes replaces its "passes" and is validated as
// that field is (a config error naming /passes).
Config load_run_config(const RunRequest& r) {
  const std::vector<std::string> known = accepted_backend_names();
  Config config = r.config_path.empty() ? parse_config(embedded_default_config(), kEmbeddedSource, known)
                                        : load_config_file(r.config_path, known);
  if (!r.shape.empty()) {
    nlohmann::json document = config.document;
    document.update(shape_option_document(r.shape));
    config = parse_config(document.dump(), fmt::format("--shape {} (settings from {})", r.shape, config.source), known);
  }
  if (!r.passes.empty()) {
    nlohmann::json document = config.document;
    document["passes"] = r.passes;
    config = parse_config(document.dump(),
                          fmt::format("--passes {} (settings from {})", fmt::join(r.passes, ","), config.source), known);
  }
  if (r.iterations) config.iterations = *r.iterations;
  if (r.warmup) config.warmup = *r.warmup;
  if (!r.metrics.empty()) config.metrics = r.metrics;
  if (!r.trace_format.empty()) config.trace_format = *trace::parse_trace_format(r.trace_format);
  return config;
}

// --dry-run: the cases, and each one's GPU when --devices names them.
void print_plan(const RunRequest& r, const Config& config, const std::vector<PlannedCase>& cases) {
  std::cout << fmt::format("{}: valid; {} cases, {} warm-up + {} timed iterations each\n", config.source, cases.size(),
                           config.warmup, config.iterations);
  std::vector<int> device_of(cases.size(), -1);
  if (!r.devices.empty() && r.devices != "all") {
    for (const DeviceShare& share : share_out(cases, parse_device_list(r.devices, std::nullopt), {}))
      for (int i : share.cases) device_of[static_cast<std::size_t>(i)] = share.device;
  } else if (r.devices == "all") {
    std::cout << "--devices all: the cases are shared out over the GPUs found when the run starts\n";
  }
  for (std::size_t i = 0; i < cases.size(); ++i)
    std::cout << (device_of[i] >= 0 ? fmt::format("  GPU {}  ", device_of[i]) : "  ") << cases[i].label << "\n";
}

std::filesystem::path self_executable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the attnprof executable (/proc/self/exe) to start the GPU workers");
  return exe;
}

// `attnprof run` as one GPU's worker: the user's options, this GPU and its share of the cases.
std::vector<std::string> worker_command(const RunRequest& r, const DeviceShare& share) {
  std::vector<std::string> argv = {self_executable().string(), "run"};
  if (!r.config_path.empty()) argv.insert(argv.end(), {"--config", r.config_path});
  if (!r.shape.empty()) argv.insert(argv.end(), {"--shape", r.shape});
  if (!r.backends.empty()) argv.insert(argv.end(), {"--backends", fmt::format("{}", fmt::join(r.backends, ","))});
  if (!r.passes.empty()) argv.insert(argv.end(), {"--passes", fmt::format("{}", fmt::join(r.passes, ","))});
  if (!r.metrics.empty()) argv.insert(argv.end(), {"--metrics", fmt::format("{}", fmt::join(r.metrics, ","))});
  if (r.iterations) argv.insert(argv.end(), {"--iterations", std::to_string(*r.iterations)});
  if (r.warmup) argv.insert(argv.end(), {"--warmup", std::to_string(*r.warmup)});
  argv.insert(argv.end(), {"--cupti-buffer-size", std::to_string(r.buffer_bytes), "--cupti-max-buffers",
                           std::to_string(r.max_buffers), "--device", std::to_string(share.device), "--out",
                           share.out_dir.string(), "--worker-cases", fmt::format("{}", fmt::join(share.cases, ","))});
  if (r.quiet) argv.push_back("--quiet");
  argv.insert(argv.end(), {"--trace-format", "json"});  // the parent merges them into the format asked for
  return argv;
}

// The indices of the planned sweep this process runs: all of them, or a worker's share.
std::vector<std::size_t> cases_to_run(const RunOptions& o, std::size_t planned) {
  std::vector<std::size_t> indices;
  if (!o.worker) {
    for (std::size_t i = 0; i < planned; ++i) indices.push_back(i);
    return indices;
  }
  for (int i : o.worker_cases) {
    if (i < 0 || static_cast<std::size_t>(i) >= planned)
      throw UsageError(fmt::format("worker case {} is not in the sweep's {} cases", i, planned));
    indices.push_back(static_cast<std::size_t>(i));
  }
  return indices;
}

std::string progress_result(const CaseSummary& c) {
  if (c.status == CaseStatus::skipped) return "skipped: " + c.reason;
  std::string text = fmt::format("{}", to_string(c.status));
  if (c.iterations > 0)
    text += fmt::format("  {:.1f} us  {:.1f} TFLOP/s  {:.3g} kernels/it  {:.3g} memcpy/it", c.median_us, c.tflops,
                        c.kernels_per_iter, c.memcpy_per_iter);
  if (c.status != CaseStatus::ok) text += "  (" + c.reason + ")";
  return text;
}

void print_outputs(const RunRequest& r, const RunSummary& summary, OutputFormat format,
                   const std::filesystem::path& trace, const std::filesystem::path& summary_path) {
  std::cout << render_summary(summary, format, {.wide = r.wide, .findings = findings_view_named(r.findings)});
  std::string also;
  if (!r.html_path.empty()) {
    write_text_atomically(r.html_path, render_html_report(summary));
    also = fmt::format(" and the report {}", r.html_path);
  }
  std::cerr << fmt::format("wrote {} (open in ui.perfetto.dev), {}{}\n", trace.string(), summary_path.string(), also);
}

}  // namespace

RunOutcome run_sweep(const RunOptions& o) {
  const std::vector<PlannedCase> cases = plan_cases(o.config, o.backends);
  const std::vector<std::size_t> to_run = cases_to_run(o, cases.size());
  SweepSettings settings{o.config, o.device, o.collector, o.metrics, o.interrupted, {}};
  // Each step of a case as it begins, on the case's progress line (a long case shows where it is;
  // a worker's lines go out whole, so it shows none).
  if (o.progress != nullptr && !o.worker)
    settings.on_step = [progress = o.progress](const char* step) {
      std::fprintf(progress, "%s ", step);
      std::fflush(progress);
    };
  Sweep sweep(std::move(settings));

  RunOutcome outcome;
  outcome.trace_path = o.out_dir / trace::trace_file_name("trace", o.trace_format);
  outcome.summary_path = o.out_dir / "summary.json";
  RunSummary& summary = outcome.summary;
  summary = sweep.new_summary();
  const std::string process = o.worker ? fmt::format("attnprof run (pid {}, GPU {})", getpid(), o.device)
                                       : fmt::format("attnprof run (pid {})", getpid());
  trace::ChromeTraceWriter writer(outcome.trace_path, sweep.trace_header(process), {o.trace_format});
  for (const PlannedCase& c : cases) writer.add_case({c.label, c.backend});

  std::FILE* notes = o.progress != nullptr ? o.progress : stderr;
  auto print_notes = [&] {
    for (const std::string& note : sweep.take_notes()) std::fprintf(notes, "%s\n", note.c_str());
  };
  print_notes();
  const int width = static_cast<int>(std::to_string(to_run.size()).size());
  for (std::size_t n = 0; n < to_run.size(); ++n) {
    const PlannedCase& pc = cases[to_run[n]];
    // A worker shares the terminal with the other GPUs' workers: its lines go out whole.
    const std::string start = fmt::format("{}[{:>{}}/{}] {} ... ", o.worker ? fmt::format("[GPU {}] ", o.device) : "",
                                          n + 1, width, to_run.size(), pc.label);
    if (o.progress != nullptr && !o.worker) {
      std::fputs(start.c_str(), o.progress);
      std::fflush(o.progress);
    }
    CaseSummary cs = sweep.run_case(pc, static_cast<int>(to_run[n]), writer);
    if (o.progress != nullptr) {
      std::fprintf(o.progress, "%s%s\n", o.worker ? start.c_str() : "", progress_result(cs).c_str());
      std::fflush(o.progress);
    }
    print_notes();
    summary.cases.push_back(std::move(cs));
  }

  summary.interrupted = sweep.interrupted();
  summary.capture = sweep.capture();
  analyze_run(summary);
  Provenance provenance = Provenance::of("run", summary);
  provenance.config_source = o.config.source;
  provenance.config = o.config.document;
  provenance.metrics = sweep.metrics_info();
  if (o.worker) provenance.worker = Provenance::WorkerShare{o.device, o.worker_cases};
  writer.finish(nlohmann::json(provenance));
  write_json_atomically(outcome.summary_path.string(), nlohmann::json(summary));
  outcome.exit_code = run_exit_code(summary);
  return outcome;
}

int run_command(const RunRequest& r, const std::atomic<bool>* interrupted) {
  Config config;
  try {
    config = load_run_config(r);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  }
  const std::vector<std::string> backends = expand_backend_names(r.backends.empty() ? config.backends : r.backends);
  const OutputFormat format = output_format_named(r.format);
  findings_view_named(r.findings);  // a bad --findings is a usage error before any GPU work
  // A malformed --devices is a usage error (2) whether or not this machine has a GPU (4).
  if (!r.devices.empty() && r.devices != "all") parse_device_list(r.devices, std::nullopt);
  if (r.dry_run) {
    print_plan(r, config, plan_cases(config, backends));
    return kExitOk;
  }
  if (r.worker && !r.device) throw UsageError("--worker-cases needs --device");

  RunOptions options;
  options.config = config;
  options.backends = backends;
  const std::string stem = r.config_path.empty() ? "default" : std::filesystem::path(r.config_path).stem().string();
  options.out_dir = r.out_dir.empty() ? std::filesystem::path("traces") / fmt::format("{}-{}", stem, utc_now_compact())
                                      : std::filesystem::path(r.out_dir);
  options.device = r.device.value_or(0);
  options.collector.buffer_bytes = r.buffer_bytes;
  options.collector.max_buffers = r.max_buffers;
  options.metrics = config.metrics;
  options.trace_format = config.trace_format;
  options.progress = r.quiet ? nullptr : stderr;
  options.interrupted = interrupted;

  if (r.worker) {
    // One GPU's share of `run --devices`: the parent prints the merged table.
    options.worker = true;
    options.worker_cases = r.worker_cases;
    return run_sweep(options).exit_code;
  }

  // Before any worker starts: without a GPU each worker would fail its cases (3) where the run
  // as a whole has no usable GPU (4).
  const int device_count = require_devices();
  std::vector<int> devices = {options.device};
  if (!r.devices.empty()) devices = parse_device_list(r.devices, device_count);
  else if (options.device >= device_count)
    throw UsageError(fmt::format("--device {}: there is no GPU {} (this machine has {}: 0..{})", options.device,
                                 options.device, device_count, device_count - 1));
  if (devices.size() > 1 || r.isolate) {
    DeviceRunOptions sharded;
    sharded.cases = plan_cases(config, backends);
    sharded.devices = devices;
    sharded.out_dir = options.out_dir;
    sharded.worker_command = [&](const DeviceShare& share) { return worker_command(r, share); };
    sharded.progress = r.quiet ? nullptr : stderr;
    sharded.trace_format = config.trace_format;
    const DeviceRunOutcome outcome = run_on_devices(sharded);
    for (const std::string& note : outcome.notes) std::cerr << "attnprof run: note: " << note << "\n";
    print_outputs(r, outcome.summary, format, outcome.trace_path, outcome.summary_path);
    return outcome.exit_code;
  }

  options.device = devices.front();
  const RunOutcome outcome = run_sweep(options);
  print_outputs(r, outcome.summary, format, outcome.trace_path, outcome.summary_path);
  return outcome.exit_code;
}

}  // namespace attnprof
