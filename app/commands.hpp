// The sub-commands: each turns parsed options into library calls and returns an exit code.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace attnprof {

struct RunCommand {
  std::string config_path;
  std::string out_dir;
  std::vector<std::string> backends;
  std::string format = "table";
  std::vector<std::string> metrics;
  std::optional<int> device;   // --device N: one GPU
  std::string devices;         // --devices all|0,1,...: the cases shared out, one worker process per GPU
  bool isolate = false;        // --isolate: a worker process even for one GPU
  std::vector<int> worker_cases;  // hidden --worker-cases: this process is one GPU's worker of --devices
  bool worker = false;
  std::optional<int> iterations;
  std::optional<int> warmup;
  bool dry_run = false;
  bool quiet = false;
  std::size_t buffer_bytes = 8u << 20;
  std::size_t max_buffers = 256;
};

struct BackendsCommand {
  int device = 0;
};

struct CheckCommand {
  std::string baseline_path;
  std::string summary_path;
  std::string junit_path;
  std::optional<double> time_tolerance_percent;
  bool expectations = false;
  bool update = false;
  std::string format = "table";
};

struct ReportCommand {
  std::string trace_path;
  std::string format = "table";
  std::string summary_out;
};

struct ProfileCommand {
  std::string out_dir;
  std::string format = "table";
  std::vector<std::string> command;
};

struct MergeCommand {
  std::vector<std::string> inputs;
  std::string out_path;
  std::string summary_path;  // default: beside the merged trace
  std::string format = "table";
};

int run_command(const RunCommand& options, const std::atomic<bool>* interrupted);
int devices_command();
int backends_command(const BackendsCommand& options);
int check_command(const CheckCommand& options);
int report_command(const ReportCommand& options);
int profile_command(const ProfileCommand& options);
int merge_command(const MergeCommand& options);

}  // namespace attnprof
