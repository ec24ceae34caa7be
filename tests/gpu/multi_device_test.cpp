// `attnprof run --devices all` on however many GPUs this machine has (one is enough): every case
// names the GPU it ran on, the trace has a process track per GPU used (pid = ordinal) holding
// exactly its cases' kernels, and the worker-process path (--isolate: one worker even for one
// GPU) merges back into the same cases, counts and tracks as the in-process run.
#include <cuda_runtime_api.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/scratch_dir.hpp"

namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_multi_device_test", name);
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws if invalid
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// Eight small cases of two backends, so that two GPUs or more each get some.
std::filesystem::path write_config(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "multi_device.json";
  std::ofstream(path) << R"({
    "backends": ["manual:in_place", "efficient"], "dtypes": ["bf16"], "causal": [false, true],
    "shapes": [{"batch": 1, "heads": 4, "seq_q": 256, "seq_kv": 256, "head_dim": 64},
               {"batch": 2, "heads": 4, "seq_q": 512, "seq_kv": 384, "head_dim": 64}],
    "warmup": 1, "iterations": 3
  })";
  return path;
}

int run_attnprof(const std::string& args, const std::filesystem::path& log) {
  const std::string command = fmt::format("\"{}\" {} > \"{}\" 2>&1", ATTNPROF_BINARY, args, log.string());
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string text_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct RunView {
  std::map<std::string, int> device_of;          // case label -> device
  std::map<std::string, double> kernels_per_iter;
  std::map<std::uint64_t, std::string> processes;  // pid -> name
  std::map<int, std::set<int>> kernel_pids_of_case;  // case index -> pids its kernels ran on
  std::vector<std::string> labels;
};

RunView check_run(const std::filesystem::path& out, int gpus) {
  RunView v;
  const nlohmann::json summary = read_json(out / "summary.json");
  for (const nlohmann::json& c : summary.at("cases")) {
    const std::string label = c.at("label");
    EXPECT_EQ(c.at("status"), "ok") << label << ": " << c.at("reason");
    const int device = c.at("device");
    EXPECT_GE(device, 0);
    EXPECT_LT(device, gpus);
    v.device_of[label] = device;
    v.kernels_per_iter[label] = c.at("per_iter").at("kernels");
    v.labels.push_back(label);
  }
  const nlohmann::json trace = read_json(out / "trace.json");
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      const auto pid = e.at("pid").get<std::uint64_t>();
      EXPECT_EQ(v.processes.count(pid), 0u) << "pid " << pid << " named twice";
      v.processes[pid] = e.at("args").at("name");
    }
    if (e.at("ph") == "X" && e.at("cat") == "kernel" && e.at("args").contains("case index"))
      v.kernel_pids_of_case[e.at("args").at("case index").get<int>()].insert(e.at("pid").get<int>());
  }
  // A process track per GPU that ran a case, pid = its ordinal; each case's kernels on its GPU.
  std::set<int> used;
  for (const auto& [label, device] : v.device_of) used.insert(device);
  for (int d : used) {
    EXPECT_EQ(v.processes.count(static_cast<std::uint64_t>(d)), 1u) << "no track for GPU " << d;
    if (v.processes.count(static_cast<std::uint64_t>(d)) == 0) continue;
    EXPECT_EQ(v.processes.at(static_cast<std::uint64_t>(d)).rfind(fmt::format("GPU {}: ", d), 0), 0u);
  }
  for (std::size_t i = 0; i < v.labels.size(); ++i) {
    const int device = v.device_of.at(v.labels[i]);
    EXPECT_EQ(v.kernel_pids_of_case[static_cast<int>(i)], (std::set<int>{device})) << v.labels[i];
  }
  EXPECT_EQ(trace.at("attnprof").at("summary").at("cases").size(), v.labels.size());
  return v;
}

TEST(MultiDevice, DevicesAllPutsEachCaseOnAGpuWithATrackPerGpu) {
  const int gpus = device_count();
  ASSERT_GT(gpus, 0);
  const auto dir = fresh_dir("all");
  const int code = run_attnprof(fmt::format("run --config \"{}\" --devices all --out \"{}\"", write_config(dir).string(),
                                            (dir / "out").string()),
                                dir / "log.txt");
  ASSERT_EQ(code, 0) << text_of(dir / "log.txt");
  const RunView v = check_run(dir / "out", gpus);
  ASSERT_EQ(v.labels.size(), 8u);
  std::set<int> used;
  for (const auto& [label, device] : v.device_of) used.insert(device);
  EXPECT_EQ(static_cast<int>(used.size()), std::min(gpus, 8)) << "every GPU gets a share";
  if (gpus > 1) {
    EXPECT_NE(text_of(dir / "log.txt").find("one worker process each"), std::string::npos);
  }
}

TEST(MultiDevice, IsolatedWorkersMergeBackToTheInProcessRun) {
  const int gpus = device_count();
  const auto dir = fresh_dir("isolate");
  const std::string config = write_config(dir).string();
  ASSERT_EQ(run_attnprof(fmt::format("run --config \"{}\" --device 0 --out \"{}\"", config, (dir / "direct").string()),
                         dir / "direct.txt"),
            0)
      << text_of(dir / "direct.txt");
  ASSERT_EQ(run_attnprof(fmt::format("run --config \"{}\" --devices all --isolate --out \"{}\"", config,
                                     (dir / "isolated").string()),
                         dir / "isolated.txt"),
            0)
      << text_of(dir / "isolated.txt");
  const RunView direct = check_run(dir / "direct", gpus);
  const RunView isolated = check_run(dir / "isolated", gpus);
  EXPECT_EQ(isolated.labels, direct.labels);  // sweep order
  EXPECT_EQ(isolated.kernels_per_iter, direct.kernels_per_iter);
  for (const auto& [label, device] : direct.device_of) EXPECT_EQ(device, 0) << label;
  // One host process per worker, named with its GPU; the per-GPU directories are merged away.
  std::set<int> used;
  for (const auto& [label, device] : isolated.device_of) used.insert(device);
  std::size_t workers = 0;
  for (const auto& [pid, name] : isolated.processes)
    if (name.rfind("attnprof run (pid ", 0) == 0) {
      ++workers;
      EXPECT_NE(name.find(", GPU "), std::string::npos) << name;
    }
  EXPECT_EQ(workers, used.size());
  for (int d : used) EXPECT_FALSE(std::filesystem::exists(dir / "isolated" / fmt::format("gpu{}", d)));
  // report rebuilds the merged run's summary: the same cases, each on its GPU.
  ASSERT_EQ(run_attnprof(fmt::format("report \"{}\" --out \"{}\"", (dir / "isolated" / "trace.json").string(),
                                     (dir / "report.json").string()),
                         dir / "report.txt"),
            0)
      << text_of(dir / "report.txt");
  const nlohmann::json report = read_json(dir / "report.json");
  ASSERT_EQ(report.at("cases").size(), isolated.labels.size());
  for (const nlohmann::json& c : report.at("cases")) {
    EXPECT_EQ(c.at("per_iter").at("kernels").get<double>(), isolated.kernels_per_iter.at(c.at("label")));
    EXPECT_EQ(c.at("device").get<int>(), isolated.device_of.at(c.at("label")));
  }
}

}  // namespace
