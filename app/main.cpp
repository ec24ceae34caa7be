// attnprof: the command line. Parses arguments into a request, hands it to its command
// (lib/commands, one file per command), maps errors to exit codes.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands/check.hpp"
#include "commands/diff.hpp"
#include "commands/inventory.hpp"
#include "commands/merge.hpp"
#include "commands/profile.hpp"
#include "commands/report.hpp"
#include "commands/run.hpp"
#include "core/errors.hpp"
#include "core/version.hpp"
#include "diff/case_matching.hpp"
#include "diff/render_diff.hpp"
#include "summary/render.hpp"
#include "trace/trace_format.hpp"

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
  // A second Ctrl-C ends the process at once.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace attnprof;
  CLI::App app{"attnprof: what an attention backend really does on the GPU.\n"
               "Runs each backend over configured shapes while CUPTI records every kernel, memcpy and memset,\n"
               "then writes a Chrome trace (open it in ui.perfetto.dev) and a summary table.\n"
               "Guess first (the config's \"expect\" list), then open the trace."};
  app.set_version_flag("--version", std::string("attnprof ") + kToolVersion);
  app.require_subcommand(1);
  // The choices as every help text lists them (a, b or c), from their tables.
  const std::string summary_formats = choice_list(output_format_names());
  const std::string trace_formats = choice_list(trace::kTraceFormatNames);
  const std::string findings_help =
      "which findings the table and md print, ranked by the share of their case's time they explain: default (costs "
      "of at least 3%, facts about the dominant kernel, results that differ), all, or top N; summary.json keeps all";
  app.footer(
      "Exit codes: 0 ok, 1 check found a regression or surprise, 2 usage or config error (an unreadable\n"
      "            input or unwritable output included), 3 some cases failed (the others ran and were\n"
      "            written), 4 no usable GPU.");

  RunRequest run;
  CLI::App* run_cmd = app.add_subcommand("run", "run the backends over the config's cases and write trace.json + summary.json");
  run_cmd->add_option("--config,-c", run.config_path, "config file (default: the embedded configs/default.json)")
      ->check(CLI::ExistingFile);
  run_cmd->add_option("--out,-o", run.out_dir, "output directory (default: traces/<config>-<UTC time>)");
  run_cmd->add_option("--backends,-b", run.backends, "backends to run instead of the config's (e.g. flash,manual:in_place)")
      ->delimiter(',');
  run_cmd->add_option("--passes", run.passes,
                      "passes to time instead of the config's: forward, backward, or forward,backward (a backward "
                      "case times dQ, dK, dV alone)")
      ->delimiter(',');
  run_cmd->add_option("--shape", run.shape,
                      "one shape instead of the config's, e.g. b=8,h=32,hkv=8,sq=1,skv=32768,d=128 (keys: b h hkv sq skv "
                      "d causal=false|true|top_left|bottom_right window=LEFT:RIGHT dtype bias; a ragged batch: lq=1:17:64 "
                      "lkv=4096:17:1 (one length per sequence); a paged K/V cache: page=16)");
  run_cmd->add_option("--trace-format", run.trace_format,
                      trace_formats + " (gzip written while streaming); overrides the config")
      ->check(CLI::IsMember(trace::kTraceFormatNames));
  run_cmd->add_option("--html", run.html_path, "also write a self-contained HTML report with plots here");
  run_cmd->add_flag("--wide", run.wide, "the table with every detail column (wider than 120 columns)");
  run_cmd->add_option("--findings", run.findings, findings_help)->expected(1, 2);
  run_cmd->add_option("--format,-f", run.format, "summary format on stdout: " + summary_formats)
      ->check(CLI::IsMember(output_format_names()));
  run_cmd->add_option("--metrics", run.metrics,
                      "measure per kernel with CUPTI's range profiler (kernel replay, outside the timed iterations): "
                      "occupancy, dram, tensor")
      ->delimiter(',')
      ->check(CLI::IsMember({"occupancy", "dram", "tensor"}));
  CLI::Option* device_opt = run_cmd->add_option("--device", run.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--devices", run.devices,
                      "share the cases out over these GPUs, one worker process each: all, or ordinals (0,1,3); "
                      "one trace with a process per GPU and one summary with each case's GPU")
      ->excludes(device_opt);
  run_cmd->add_flag("--isolate", run.isolate,
                    "run the cases in a worker process even on one GPU (--devices with several GPUs always does)");
  CLI::Option* worker_opt =
      run_cmd->add_option("--worker-cases", run.worker_cases, "internal: this process runs these cases for --devices")
      ->delimiter(',')
      ->group("");
  run_cmd->add_option("--iterations", run.iterations, "timed iterations per case (overrides the config)")
      ->check(CLI::Range(1, 100000));
  run_cmd->add_option("--warmup", run.warmup, "warm-up iterations per case (overrides the config)")
      ->check(CLI::Range(0, 10000));
  run_cmd->add_flag("--dry-run", run.dry_run, "validate the config and list the cases; touch no GPU");
  run_cmd->add_flag("--quiet,-q", run.quiet, "no progress lines on stderr");
  run_cmd->add_option("--cupti-buffer-size", run.buffer_bytes,
                      "bytes per CUPTI activity buffer (tiny values force drops, for testing)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  run_cmd->add_option("--cupti-max-buffers", run.max_buffers, "CUPTI buffers in flight before records are dropped")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));

  CLI::App* devices_cmd = app.add_subcommand("devices", "list GPUs, driver, CUDA, CUPTI and cuDNN versions");
  BackendsRequest backends;
  CLI::App* backends_cmd = app.add_subcommand("backends", "what each backend runs on this GPU, and why not");
  backends_cmd->add_option("--device", backends.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);

  CheckRequest check;
  CLI::App* check_cmd = app.add_subcommand(
      "check", "compare a summary.json with a baseline summary; exit 1 on a regression (for CI)");
  check_cmd->add_option("--baseline", check.baseline_path, "the baseline summary.json (created by --update)")->required();
  check_cmd->add_option("summary", check.summary_path, "the summary.json to judge")->required();
  check_cmd->add_option("--junit", check.junit_path, "also write JUnit XML here");
  check_cmd->add_option("--time-tolerance", check.time_tolerance_percent,
                        "also fail when a case's median time grows by more than this percent")
      ->check(CLI::Range(0.0, 1e6));
  check_cmd->add_option("--throughput-tolerance", check.throughput_tolerance_percent,
                        "also fail when a case's TFLOP/s (GB/s when memory-bound) drops by more than this percent")
      ->check(CLI::Range(0.0, 100.0));
  check_cmd->add_option("--memory-tolerance", check.memory_tolerance_percent,
                        "also fail when a case's peak device memory grows by more than this percent")
      ->check(CLI::Range(0.0, 1e6));
  check_cmd->add_flag("--expectations", check.expectations, "also fail on surprises (guesses the trace contradicts)");
  check_cmd->add_flag("--update", check.update, "rewrite the baseline with the summary (atomically) and exit 0");
  check_cmd->add_option("--format,-f", check.format,
                        "report format: " + choice_list(output_format_names(RenderedReport::check)))
      ->check(CLI::IsMember(output_format_names(RenderedReport::check)));

  DiffRequest diff;
  CLI::App* diff_cmd = app.add_subcommand(
      "diff", "what changed between two runs (folders, summaries or traces), each change stated with its noise");
  diff_cmd->add_option("A", diff.a_path, "the earlier run: a run folder, summary.json(.gz) or trace (ours or torch.profiler's)")
      ->required();
  diff_cmd->add_option("B", diff.b_path, "the later run, as A")->required();
  diff_cmd->add_option("--match", diff.match, "pair cases that differ on purpose (comma-separated rules):\n" +
                                                  match_rules_help())
      ->delimiter(',');
  diff_cmd->add_option("--noise", diff.noise,
                       "the drift floor in percent (default 10): a smaller change of median time is within noise");
  diff_cmd->add_option("--format,-f", diff.format, summary_formats)->check(CLI::IsMember(output_format_names()));
  diff_cmd->add_option("--html", diff.html_path, "also write A and B side by side as a self-contained HTML page here");
  diff_cmd->footer(wrap_text(verdict_rule_text(DiffOptions{}), 110, "", "") +
                   "\nCases are paired by backend, problem (shape, dtype, mask, pass, workload fields) and GPU ordinal;\n"
                   "ranges of profiled programs and torch.profiler traces by name. Unpaired cases are listed, never dropped.\n"
                   "Exit code: 0 on every valid comparison, whatever changed (check is the CI gate); 2 on bad input.");

  ReportRequest report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "rebuild the summary from a saved trace (attnprof's or Kineto's), or analyse a saved summary.json again");
  report_cmd->add_option("trace", report.trace_path,
                         "trace.json[.gz], or a *summary.json[.gz] whose findings this version computes again")
      ->required();
  report_cmd->add_option("--format,-f", report.format, summary_formats)
      ->check(CLI::IsMember(output_format_names()));
  report_cmd->add_option("--out,-o", report.summary_out, "also write the rebuilt summary.json here");
  report_cmd->add_option("--html", report.html_path, "also write a self-contained HTML report with plots here");
  report_cmd->add_flag("--wide", report.wide, "the table with every detail column (wider than 120 columns)");
  report_cmd->add_option("--findings", report.findings, findings_help)->expected(1, 2);

  ProfileRequest profile;
  CLI::App* profile_cmd = app.add_subcommand("profile", "profile any CUDA program (PyTorch included) through CUPTI injection");
  profile_cmd->add_option("--out,-o", profile.out_dir, "output directory (default: traces/profile-<UTC time>)");
  profile_cmd->add_option("--trace-format", profile.trace_format, trace_formats + ": how each process writes its trace")
      ->check(CLI::IsMember(trace::kTraceFormatNames));
  profile_cmd->add_option("--format,-f", profile.format, summary_formats)
      ->check(CLI::IsMember(output_format_names()));
  profile_cmd->add_option("--grace", profile.grace_seconds,
                          "seconds to wait, once the command has ended, for the processes it left running (default 10)")
      ->check(CLI::Range(0.0, 1e6));
  profile_cmd->add_flag("--memory", profile.memory,
                        "record every PyTorch tensor allocation: runs the command with PYTORCH_CUDA_ALLOC_CONF="
                        "backend:cudaMallocAsync (added to yours), since PyTorch's caching allocator hides tensors "
                        "inside segments CUDA allocated once");
  profile_cmd->add_option("command", profile.command, "the program and its arguments, after --");
  profile_cmd->prefix_command();
  profile_cmd->footer(
      "Exit code: the command's own (128+N when signal N ended it); 2 for a usage error.\n"
      "SIGINT/SIGTERM sent to attnprof are passed on to the command, which writes its profile before it ends.\n"
      "Processes the command leaves running (a launcher's workers) are waited for, up to --grace seconds, and\n"
      "signals sent to attnprof meanwhile are passed on to them; their exit codes are not the command's.");

  MergeRequest merge;
  CLI::App* merge_cmd = app.add_subcommand("merge", "merge per-rank traces into one trace with a track per rank");
  merge_cmd->add_option("inputs", merge.inputs, "trace files or directories holding them")->required();
  merge_cmd->add_option("--out,-o", merge.out_path, "merged trace path")->required();
  merge_cmd->add_option("--summary", merge.summary_path,
                        "merged summary path (default: beside the trace: summary.json for trace.json, else "
                        "<name>-summary.json)");
  merge_cmd->add_option("--trace-format", merge.trace_format,
                        trace_formats + " (default: gzip when --out ends in .gz)")
      ->check(CLI::IsMember(trace::kTraceFormatNames));
  merge_cmd->add_option("--format,-f", merge.format, "summary format on stdout: " + summary_formats)
      ->check(CLI::IsMember(output_format_names()));
  merge_cmd->footer(
      "Inputs: trace files, or directories holding attnprof's per-process traces (trace.json, trace-pid<N>.json,\n"
      "trace-rank<R>-pid<N>.json), e.g. the --out of `attnprof profile -- torchrun ...`. Each rank gets its own\n"
      "process tracks (\"rank 1 / GPU 1: ...\"); clocks are aligned on the earliest baseTimeNanoseconds.");

  // `profile [options] -- <command...>`: everything after the first "--" is the command, verbatim,
  // so its own options (-c, --out, ...) never reach attnprof's parser.
  int parsed_argc = argc;
  std::optional<std::vector<std::string>> profiled_command;
  if (argc > 1 && std::string(argv[1]) == "profile")
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--") {
        profiled_command.emplace(argv + i + 1, argv + argc);
        parsed_argc = i;
        break;
      }
  try {
    app.parse(parsed_argc, argv);
    if (profiled_command) {
      std::vector<std::string> extras = profile.command;  // words between the options and "--"
      for (const std::string& r : profile_cmd->remaining()) extras.push_back(r);
      if (!extras.empty()) throw CLI::ExtrasError(extras);
      profile.command = *profiled_command;
    } else if (*profile_cmd && !profile_cmd->remaining().empty()) {
      // Without "--" the command's own options would be taken for attnprof's.
      std::cerr << "attnprof profile: put -- before the command: attnprof profile [--out DIR] -- <command...>\n";
      return kExitUsage;
    }
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  run.worker = worker_opt->count() > 0;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  try {
    if (*run_cmd) return run_command(run, &g_interrupted);
    if (*devices_cmd) return devices_command();
    if (*backends_cmd) return backends_command(backends);
    if (*check_cmd) return check_command(check);
    if (*diff_cmd) return diff_command(diff);
    if (*report_cmd) return report_command(report);
    if (*profile_cmd) return profile_command(profile);
    if (*merge_cmd) return merge_command(merge);
  } catch (const NoUsableGpuError& e) {
    std::cerr << "attnprof: " << e.what() << "\n";
    return kExitNoGpu;
  } catch (const UsageError& e) {
    std::cerr << "attnprof: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::filesystem::filesystem_error& e) {
    // A folder or file the user named that cannot be created, renamed or read.
    std::cerr << "attnprof: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "attnprof: " << e.what() << "\n";
    return kExitPartialFailure;
  }
  return kExitUsage;
}
