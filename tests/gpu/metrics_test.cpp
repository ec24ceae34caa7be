// --metrics on a GPU: the range profiler measures kernels of known occupancy (a full grid-stride
// grid -> high, 8 blocks of 2 warps -> 2 of 64 warps = 3.1%), works beside the activity collector,
// and a run with metrics puts achieved occupancy beside theoretical without changing the counts.
// Without permission to read counters, or on a device the range profiler does not support, the
// tests say why and skip; any other reason the profiler gives fails them.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.hpp"
#include "collector/activity_collector.hpp"
#include "collector/cupti_check.hpp"
#include "commands/run.hpp"
#include "config/config.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/device_memory.hpp"
#include "metrics/kernel_metrics.hpp"
#include "metrics/range_profiler.hpp"
#include "refusals_here.hpp"

namespace attnprof {
namespace testing {
void launch_busy_kernel(float* out, int n, int grid, int block, int rounds, cudaStream_t stream);
}
namespace {

const std::vector<MetricGroup> kAllGroups = {MetricGroup::occupancy, MetricGroup::dram, MetricGroup::tensor};

struct BusyLaunch {
  int grid, block, n, rounds;
};

// Full: 8 blocks of 8 warps on every SM (64 of 64 warps), several grid strides. Sparse: 8 SMs
// with one block of 2 warps each, long enough to dominate its own range.
std::vector<BusyLaunch> busy_launches(const DeviceProperties& d) {
  const int full_grid = d.sm_count * (d.max_threads_per_sm / 256);
  return {{full_grid, 256, full_grid * 256 * 4, 2000}, {8, 64, 8 * 64, 200000}};
}

void run_busy(float* out, const std::vector<BusyLaunch>& launches, cudaStream_t stream) {
  for (const BusyLaunch& l : launches) {
    testing::launch_busy_kernel(out, l.n, l.grid, l.block, l.rounds, stream);
    CUDA_CHECK_LAUNCH();
  }
}

std::unique_ptr<KernelMetricsProfiler> profiler_or_skip_reason(const std::vector<MetricGroup>& groups,
                                                                std::string& reason) {
  try {
    return std::make_unique<KernelMetricsProfiler>(0, groups);
  } catch (const MetricsUnavailableError& e) {
    reason = e.what();
    return nullptr;
  }
}

// A skip when the profiler's reason is this device's or this user's, in its own words
// (lib/metrics/range_profiler.cpp: advice() and profiling_support_problem()); a failure otherwise
// (an unknown metric, a CUPTI call we got wrong).
std::optional<test::RefusalVerdict> counters_unavailable(const std::string& reason) {
  const bool not_here = reason.find("restricted to administrators") != std::string::npos ||
                        reason.find("does not support CUPTI's profiling API") != std::string::npos ||
                        reason.find("holds the counters") != std::string::npos ||
                        reason.find("cuptiProfilerDeviceSupported says range profiling is") != std::string::npos;
  return test::RefusalVerdict{
      not_here, test::SkipReason::counters_unavailable,
      not_here ? reason : "the range profiler failed for a reason that is not this device's or this user's: " + reason};
}

TEST(RangeProfiler, KnownOccupancyOfTwoKernels) {
  const DeviceProperties device = query_device_properties(0);
  std::string reason;
  auto profiler = profiler_or_skip_reason(kAllGroups, reason);
  if (!profiler) ATTNPROF_SKIP_OR_FAIL(counters_unavailable(reason));
  std::printf("chip %s, %zu pass(es) for %zu metrics\n", profiler->chip().c_str(), profiler->passes(),
              profiler->metric_names().size());

  const std::vector<BusyLaunch> launches = busy_launches(device);
  DeviceBuffer out(static_cast<std::size_t>(launches[0].n) * sizeof(float));
  CudaStream stream;
  const MeasuredRanges measured = profiler->measure([&] { run_busy(out.as<float>(), launches, stream.get()); });
  EXPECT_EQ(measured.dropped_ranges, 0u);
  ASSERT_EQ(measured.ranges.size(), 2u);
  for (const RangeValues& r : measured.ranges) {
    std::printf("range '%s':", r.name.c_str());
    for (std::size_t i = 0; i < r.values.size(); ++i)
      std::printf(" %s=%g", measured.metric_names[i].c_str(), r.values[i]);
    std::printf("\n");
  }
  EXPECT_EQ(auto_range_index(measured.ranges[0].name), 0u) << measured.ranges[0].name;
  EXPECT_EQ(auto_range_index(measured.ranges[1].name), 1u) << measured.ranges[1].name;

  const KernelMetrics full = decode_range(measured.metric_names, measured.ranges[0]);
  const KernelMetrics sparse = decode_range(measured.metric_names, measured.ranges[1]);
  EXPECT_EQ(full.ctas_launched, launches[0].grid);
  EXPECT_EQ(sparse.ctas_launched, launches[1].grid);
  ASSERT_TRUE(full.achieved_occupancy_percent && sparse.achieved_occupancy_percent);
  // Measured on the H200: 60.1% for the full grid (ncu agrees on such kernels within 0.1 point,
  // docs/perf/occupancy_vs_ncu.sh); far above the 2-of-64-warps kernel either way.
  EXPECT_GT(*full.achieved_occupancy_percent, 40.0);
  EXPECT_GT(*full.achieved_occupancy_percent, 10 * *sparse.achieved_occupancy_percent);
  EXPECT_LE(*full.achieved_occupancy_percent, 100.0);
  EXPECT_NEAR(*sparse.achieved_occupancy_percent, 100.0 * 2 / 64, 1.0);  // 2 of 64 warps per active SM
  ASSERT_TRUE(full.tensor_pipe_percent);
  EXPECT_LT(*full.tensor_pipe_percent, 1.0);  // FFMA only
  ASSERT_TRUE(full.dram_bytes_per_second && full.dram_throughput_percent);
  EXPECT_GT(*full.dram_bytes_per_second, 0.0);

  // The profiler is made once and measures again (one per case in a run).
  const MeasuredRanges again = profiler->measure([&] { run_busy(out.as<float>(), {launches[1]}, stream.get()); });
  ASSERT_EQ(again.ranges.size(), 1u);
  EXPECT_EQ(auto_range_index(again.ranges[0].name), 0u);
}

TEST(RangeProfiler, BesideTheActivityCollectorRangesMatchTheRecordedLaunches) {
  const DeviceProperties device = query_device_properties(0);
  ActivityCollector collector;
  std::string reason;
  auto profiler = profiler_or_skip_reason({MetricGroup::occupancy}, reason);
  if (!profiler) ATTNPROF_SKIP_OR_FAIL(counters_unavailable(reason));

  const std::vector<BusyLaunch> launches = busy_launches(device);
  DeviceBuffer out(static_cast<std::size_t>(launches[0].n) * sizeof(float));
  CudaStream stream;
  collector.drain();
  collector.push_tag({0, trace::Phase::iteration, 0});
  run_busy(out.as<float>(), launches, stream.get());  // traced, as a timed iteration is
  collector.pop_tag();
  CUDA_CHECK(cudaDeviceSynchronize());

  collector.push_tag({0, trace::Phase::metrics, -1});
  MeasuredRanges measured;
  try {
    measured = profiler->measure([&] { run_busy(out.as<float>(), launches, stream.get()); });
  } catch (const MetricsUnavailableError& e) {
    collector.pop_tag();
    FAIL() << "the range profiler failed with the activity collector active: " << e.what();
  }
  collector.pop_tag();
  CUDA_CHECK(cudaDeviceSynchronize());
  trace::ActivityBatch batch = collector.drain();

  // On the H200 (CUPTI 13.0 U1) kernels run under the range profiler leave no activity records,
  // so ranges are matched to the traced launches of the same forward, as the runner does.
  std::size_t replayed_records = 0;
  for (const trace::KernelActivity& k : batch.kernels) replayed_records += k.tag.phase == trace::Phase::metrics;
  std::printf("%zu kernel records of the profiled launches (2 launches), %zu ranges\n", replayed_records,
              measured.ranges.size());
  ASSERT_EQ(measured.ranges.size(), 2u);
  const auto order = launches_in_order(batch, 0, trace::Phase::iteration);
  ASSERT_EQ(order.size(), 2u);
  const RangeMatch match = match_ranges_to_launches(measured, order);
  for (const std::string& p : match.problems) ADD_FAILURE() << p;
  ASSERT_EQ(match.kernels.size(), 2u);
  EXPECT_NE(match.kernels[0].kernel_name.find("busy_kernel"), std::string::npos) << match.kernels[0].kernel_name;
  EXPECT_GT(*match.kernels[0].achieved_occupancy_percent, 40.0);
  EXPECT_NEAR(*match.kernels[1].achieved_occupancy_percent, 100.0 * 2 / 64, 1.0);
  EXPECT_EQ(apply_kernel_metrics(batch, 0, trace::Phase::iteration, match.kernels), 2u);
}

Config metrics_config() {
  const char* text = R"({
    "backends": ["math", "efficient"], "dtypes": ["bf16"], "causal": [false],
    "shapes": [{"batch": 1, "heads": 4, "seq_q": 512, "seq_kv": 512, "head_dim": 64}],
    "warmup": 1, "iterations": 3, "metrics": ["occupancy"]
  })";
  return parse_config(text, "metrics_test", accepted_backend_names());
}

TEST(RunWithMetrics, AchievedBesideTheoreticalAndCountsUnchanged) {
  std::string reason;
  if (!profiler_or_skip_reason({MetricGroup::occupancy}, reason)) ATTNPROF_SKIP_OR_FAIL(counters_unavailable(reason));

  const std::filesystem::path out = std::filesystem::temp_directory_path() / "attnprof_metrics_test";
  std::filesystem::remove_all(out);
  RunOptions options;
  options.config = metrics_config();
  options.backends = expand_backend_names(options.config.backends);
  options.out_dir = out;
  options.metrics = options.config.metrics;
  options.progress = stdout;
  const RunOutcome outcome = run_sweep(options);
  EXPECT_EQ(outcome.exit_code, 0);
  for (const CaseSummary& c : outcome.summary.cases) {
    ASSERT_EQ(c.status, CaseStatus::ok) << c.label << ": " << c.reason;
    EXPECT_EQ(c.iterations, 3);
    for (const KernelSummary& k : c.kernels) {
      ASSERT_TRUE(k.achieved_occupancy_percent) << c.label << ": " << k.name;
      EXPECT_GT(*k.achieved_occupancy_percent, 0.0) << k.name;
      EXPECT_LE(*k.achieved_occupancy_percent, 100.5) << k.name;
      std::printf("%s: %s theoretical %.2f%% achieved %.2f%%\n", c.label.c_str(), k.name.c_str(),
                  k.theoretical_occupancy_percent, *k.achieved_occupancy_percent);
    }
    // The replayed forward is not counted.
    if (c.backend == "efficient") {
      EXPECT_EQ(c.kernels_per_iter, 1.0);
    }
    if (c.backend == "math") {
      EXPECT_GE(c.kernels_per_iter, 14.0);
    }
  }

  std::ifstream in(outcome.trace_path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  EXPECT_TRUE(trace.at("attnprof").at("metrics").contains("passes")) << trace.at("attnprof").at("metrics").dump();
  std::size_t replayed = 0, with_achieved = 0;
  std::set<std::string> annotations;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    if (e.at("cat") == "user_annotation" || e.at("cat") == "gpu_user_annotation") annotations.insert(e.at("name"));
    if (e.at("cat") != "kernel") continue;
    replayed += e.at("args").value("phase", "") == "metrics";
    with_achieved += e.at("args").contains("achieved occupancy %");
  }
  std::printf("%zu kernel records from the replayed forward, %zu kernel events with achieved occupancy\n", replayed,
              with_achieved);
  EXPECT_GT(with_achieved, 0u);
  EXPECT_TRUE(annotations.count("metrics (replayed)"));
}

}  // namespace
}  // namespace attnprof
