// --metrics on the CPU side: the group -> metric table, group parsing, decoding of evaluated values,
// auto-range names, matching ranges to the replayed forward's launches, per-name aggregation, and
// where the values end up (kernel records, trace args, summary and its JSON, the table).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "collector/sweep_tags.hpp"
#include "core/errors.hpp"
#include "metrics/kernel_metrics.hpp"
#include "summary/render.hpp"
#include "summary/summary.hpp"

namespace attnprof {
namespace {

using trace::Phase;

constexpr const char* kOccupancy = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr const char* kCtas = "sm__ctas_launched.sum";
constexpr const char* kDramPercent = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kDramBytes = "dram__bytes.sum.per_second";
constexpr const char* kTensor = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active";
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(MetricGroups, ParseNamesInTableOrderWithoutDuplicates) {
  EXPECT_EQ(parse_metric_groups({"tensor", "occupancy", "tensor"}),
            (std::vector<MetricGroup>{MetricGroup::occupancy, MetricGroup::tensor}));
  EXPECT_TRUE(parse_metric_groups({}).empty());
  for (MetricGroup g : {MetricGroup::occupancy, MetricGroup::dram, MetricGroup::tensor})
    EXPECT_EQ(parse_metric_group(to_string(g)), g);
}

TEST(MetricGroups, UnknownGroupNamesItAndTheKnownOnes) {
  try {
    parse_metric_groups({"occupancy", "l2"});
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'l2'"), std::string::npos) << what;
    EXPECT_NE(what.find("occupancy, dram, tensor"), std::string::npos) << what;
  }
}

TEST(MetricGroups, MetricNamesPerGroup) {
  EXPECT_TRUE(metric_names_for({}).empty());
  EXPECT_EQ(metric_names_for({MetricGroup::occupancy}), (std::vector<std::string>{kCtas, kOccupancy}));
  EXPECT_EQ(metric_names_for({MetricGroup::tensor, MetricGroup::dram}),
            (std::vector<std::string>{kCtas, kDramPercent, kDramBytes, kTensor}));
  EXPECT_EQ(metric_names_for({MetricGroup::occupancy, MetricGroup::dram, MetricGroup::tensor}).size(), 5u);
}

TEST(MetricGroups, OccupancyIsTheMetricNsightComputeReports) {
  // The acceptance compares with `ncu --metrics sm__warps_active.avg.pct_of_peak_sustained_active`.
  bool found = false;
  for (const MetricDefinition& d : metric_definitions())
    if (d.field == MetricField::achieved_occupancy_percent) {
      EXPECT_STREQ(d.cupti_name, kOccupancy);
      EXPECT_EQ(d.group, MetricGroup::occupancy);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(DecodeRange, ValuesGoToTheirFields) {
  const std::vector<std::string> names = {kCtas, kOccupancy, kDramPercent, kDramBytes, kTensor};
  const KernelMetrics k = decode_range(names, {"0", {264, 12.21, 35.5, 1.5e12, 61.25}});
  EXPECT_EQ(k.ctas_launched, 264);
  EXPECT_DOUBLE_EQ(*k.achieved_occupancy_percent, 12.21);
  EXPECT_DOUBLE_EQ(*k.dram_throughput_percent, 35.5);
  EXPECT_DOUBLE_EQ(*k.dram_bytes_per_second, 1.5e12);
  EXPECT_DOUBLE_EQ(*k.tensor_pipe_percent, 61.25);
  EXPECT_TRUE(k.has_values());
}

TEST(DecodeRange, NanInfinityAndNegativeValuesAreMissing) {
  const std::vector<std::string> names = {kCtas, kOccupancy, kDramPercent, kTensor};
  const KernelMetrics k =
      decode_range(names, {"0", {kNaN, std::numeric_limits<double>::infinity(), -1.0, 0.0}});
  EXPECT_FALSE(k.ctas_launched);
  EXPECT_FALSE(k.achieved_occupancy_percent);
  EXPECT_FALSE(k.dram_throughput_percent);
  ASSERT_TRUE(k.tensor_pipe_percent);  // 0 is a value: a kernel without tensor-core work
  EXPECT_EQ(*k.tensor_pipe_percent, 0.0);
}

TEST(DecodeRange, UnknownMetricsAndShortValueListsAreIgnored) {
  const KernelMetrics k = decode_range({"smsp__inst_executed.sum", kOccupancy, kTensor}, {"0", {5.0, 40.0}});
  EXPECT_DOUBLE_EQ(*k.achieved_occupancy_percent, 40.0);
  EXPECT_FALSE(k.tensor_pipe_percent);
  EXPECT_FALSE(k.ctas_launched);
}

TEST(AutoRangeName, DecimalIndexOrLastComponent) {
  EXPECT_EQ(auto_range_index("0"), 0u);
  EXPECT_EQ(auto_range_index("17"), 17u);
  EXPECT_EQ(auto_range_index("case/3"), 3u);
  EXPECT_EQ(auto_range_index("a:b:4", ':'), 4u);
  EXPECT_FALSE(auto_range_index(""));
  EXPECT_FALSE(auto_range_index("case/"));
  EXPECT_FALSE(auto_range_index("flash_fwd_kernel"));
  EXPECT_FALSE(auto_range_index("3a"));
  EXPECT_FALSE(auto_range_index("-1"));
  EXPECT_FALSE(auto_range_index("99999999999999999999999"));
}

trace::KernelActivity launch(const std::string& name, std::uint32_t correlation, std::uint64_t start, int grid_x,
                             Phase phase = Phase::metrics, int case_index = 0, int iteration = -1) {
  trace::KernelActivity k;
  k.name = name;
  k.correlation = correlation;
  k.start_ns = start;
  k.end_ns = start + 1000;
  k.grid = {grid_x, 1, 1};
  k.block = {128, 1, 1};
  k.tag = {case_index, phase, iteration};
  return k;
}

// A math-like case: two timed iterations of gemm, softmax, gemm; then the replayed forward, whose
// records come back out of order and with a duplicate of a replayed kernel; another case's record.
trace::ActivityBatch math_like_batch() {
  trace::ActivityBatch b;
  for (int i = 0; i < 2; ++i) {
    const std::uint32_t c = 10 + 3 * i;
    b.kernels.push_back(launch("gemm", c, 100 * c, 64, Phase::iteration, 0, i));
    b.kernels.push_back(launch("softmax", c + 1, 100 * c + 10, 8, Phase::iteration, 0, i));
    b.kernels.push_back(launch("gemm", c + 2, 100 * c + 20, 32, Phase::iteration, 0, i));
  }
  b.kernels.push_back(launch("softmax", 31, 5000, 8));
  b.kernels.push_back(launch("gemm", 30, 4000, 64));
  b.kernels.push_back(launch("gemm", 32, 6000, 32));
  b.kernels.push_back(launch("gemm", 30, 4500, 64));  // a replay pass recorded a second time
  b.kernels.push_back(launch("gemm", 40, 9000, 64, Phase::metrics, 1));
  return b;
}

MeasuredRanges three_ranges() {
  MeasuredRanges m;
  m.metric_names = {kCtas, kOccupancy, kTensor};
  m.ranges = {{"0", {64, 80.0, 50.0}}, {"1", {8, 3.0, 0.0}}, {"2", {32, 40.0, 70.0}}};
  m.passes = 1;
  return m;
}

TEST(Launches, OnePerCorrelationInLaunchOrder) {
  const trace::ActivityBatch b = math_like_batch();
  const auto launches = launches_in_order(b, 0, Phase::metrics);
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0]->correlation, 30u);
  EXPECT_EQ(launches[0]->start_ns, 4000u);  // the first execution of the replayed kernel
  EXPECT_EQ(launches[1]->name, "softmax");
  EXPECT_EQ(launches[2]->correlation, 32u);
  EXPECT_EQ(launches_in_order(b, 1, Phase::metrics).size(), 1u);
  EXPECT_TRUE(launches_in_order(b, 2, Phase::metrics).empty());
}

TEST(Launches, OfOneIteration) {
  const trace::ActivityBatch b = math_like_batch();
  const auto last = launches_in_order(b, 0, Phase::iteration, 1);
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(last[0]->correlation, 13u);
  EXPECT_EQ(last[2]->grid[0], 32);
  EXPECT_EQ(launches_in_order(b, 0, Phase::iteration).size(), 6u);
}

TEST(Apply, WithoutReplayedRecordsTheLastIterationsLaunchesCarryTheNames) {
  // The runner's fallback when CUPTI gives no records for the replayed kernels.
  trace::ActivityBatch b = math_like_batch();
  std::erase_if(b.kernels, [](const trace::KernelActivity& k) { return k.tag.phase == Phase::metrics; });
  const RangeMatch m = match_ranges_to_launches(three_ranges(), launches_in_order(b, 0, Phase::iteration, 1));
  EXPECT_TRUE(m.problems.empty());
  EXPECT_EQ(apply_kernel_metrics(b, 0, Phase::metrics, m.kernels), 6u);
  for (const trace::KernelActivity& k : b.kernels)
    EXPECT_DOUBLE_EQ(*k.achieved_occupancy_percent, k.name == "gemm" ? 60.0 : 3.0);
}

TEST(MatchRanges, AutoRangeIndexNamesTheLaunch) {
  const trace::ActivityBatch b = math_like_batch();
  const RangeMatch m = match_ranges_to_launches(three_ranges(), launches_in_order(b, 0, Phase::metrics));
  EXPECT_TRUE(m.problems.empty()) << m.problems.front();
  ASSERT_EQ(m.kernels.size(), 3u);
  EXPECT_EQ(m.kernels[0].kernel_name, "gemm");
  EXPECT_EQ(m.kernels[0].correlation, 30u);
  EXPECT_DOUBLE_EQ(*m.kernels[0].achieved_occupancy_percent, 80.0);
  EXPECT_EQ(m.kernels[1].kernel_name, "softmax");
  EXPECT_DOUBLE_EQ(*m.kernels[1].achieved_occupancy_percent, 3.0);
  EXPECT_EQ(m.kernels[2].correlation, 32u);
}

TEST(MatchRanges, StoredOutOfOrderStillPairsByIndexAndComesBackInLaunchOrder) {
  const trace::ActivityBatch b = math_like_batch();
  MeasuredRanges measured = three_ranges();
  std::swap(measured.ranges[0], measured.ranges[2]);
  const RangeMatch m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  EXPECT_TRUE(m.problems.empty());
  ASSERT_EQ(m.kernels.size(), 3u);
  EXPECT_EQ(m.kernels[0].correlation, 30u);
  EXPECT_DOUBLE_EQ(*m.kernels[0].achieved_occupancy_percent, 80.0);
  EXPECT_EQ(m.kernels[2].correlation, 32u);
  EXPECT_DOUBLE_EQ(*m.kernels[2].achieved_occupancy_percent, 40.0);
}

TEST(MatchRanges, UserRangeNamesPairByPosition) {
  const trace::ActivityBatch b = math_like_batch();
  MeasuredRanges measured = three_ranges();
  for (RangeValues& r : measured.ranges) r.name = "forward";
  const RangeMatch m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  EXPECT_TRUE(m.problems.empty());
  ASSERT_EQ(m.kernels.size(), 3u);
  EXPECT_EQ(m.kernels[1].kernel_name, "softmax");
}

TEST(MatchRanges, CtaCountMismatchRejectsThePair) {
  const trace::ActivityBatch b = math_like_batch();
  MeasuredRanges measured = three_ranges();
  measured.ranges[1].values[0] = 9;  // softmax has 8 blocks
  const RangeMatch m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  ASSERT_EQ(m.kernels.size(), 2u);
  ASSERT_EQ(m.problems.size(), 2u);
  EXPECT_NE(m.problems[0].find("counted 9 CTAs"), std::string::npos) << m.problems[0];
  EXPECT_NE(m.problems[0].find("softmax"), std::string::npos) << m.problems[0];
  EXPECT_NE(m.problems[1].find("1 of 3 kernel launches got no range"), std::string::npos) << m.problems[1];
}

TEST(MatchRanges, MissingCtaCountIsNotAMismatch) {
  const trace::ActivityBatch b = math_like_batch();
  MeasuredRanges measured = three_ranges();
  measured.ranges[1].values[0] = kNaN;
  EXPECT_EQ(match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics)).kernels.size(), 3u);
}

TEST(MatchRanges, MoreRangesThanLaunchesAndDroppedRangesAreReported) {
  const trace::ActivityBatch b = math_like_batch();
  MeasuredRanges measured = three_ranges();
  measured.ranges.push_back({"3", {64, 1.0, 1.0}});
  RangeMatch m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  EXPECT_EQ(m.kernels.size(), 3u);
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_NE(m.problems[0].find("no kernel launch 3"), std::string::npos) << m.problems[0];

  measured = three_ranges();
  measured.ranges.pop_back();
  measured.dropped_ranges = 1;
  m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_NE(m.problems[0].find("1 dropped"), std::string::npos) << m.problems[0];

  measured = three_ranges();
  measured.ranges[2].name = "0";
  m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  EXPECT_NE(m.problems[0].find("a second time"), std::string::npos) << m.problems[0];
}

TEST(MatchRanges, NoLaunchesMeansNoKernels) {
  const RangeMatch m = match_ranges_to_launches(three_ranges(), {});
  EXPECT_TRUE(m.kernels.empty());
  EXPECT_EQ(m.problems.size(), 3u);
}

TEST(Aggregate, LaunchWeightedMeanPerNameSkippingMissingValues) {
  std::vector<KernelMetrics> kernels(3);
  kernels[0].kernel_name = "gemm";
  kernels[0].achieved_occupancy_percent = 80;
  kernels[0].tensor_pipe_percent = 50;
  kernels[1].kernel_name = "softmax";
  kernels[1].achieved_occupancy_percent = 3;
  kernels[2].kernel_name = "gemm";
  kernels[2].achieved_occupancy_percent = 40;  // no tensor value for this launch
  const auto by_name = aggregate_by_name(kernels);
  ASSERT_EQ(by_name.size(), 2u);
  const KernelMetrics& gemm = by_name.at("gemm");
  EXPECT_EQ(gemm.launches, 2);
  EXPECT_DOUBLE_EQ(*gemm.achieved_occupancy_percent, 60.0);
  EXPECT_DOUBLE_EQ(*gemm.tensor_pipe_percent, 50.0);
  EXPECT_FALSE(gemm.dram_throughput_percent);
  EXPECT_EQ(by_name.at("softmax").launches, 1);
  EXPECT_DOUBLE_EQ(*by_name.at("softmax").achieved_occupancy_percent, 3.0);
}

TEST(Apply, ReplayedRecordsGetTheirLaunchTheOthersTheirNamesMean) {
  trace::ActivityBatch b = math_like_batch();
  const RangeMatch m = match_ranges_to_launches(three_ranges(), launches_in_order(b, 0, Phase::metrics));
  const std::size_t applied = apply_kernel_metrics(b, 0, Phase::metrics, m.kernels);
  EXPECT_EQ(applied, 6u + 4u);  // 6 timed records, 4 replayed records (one a duplicate); not case 1's
  for (const trace::KernelActivity& k : b.kernels) {
    if (k.tag.case_index != 0) {
      EXPECT_FALSE(k.achieved_occupancy_percent);
      continue;
    }
    ASSERT_TRUE(k.achieved_occupancy_percent) << k.name << " " << k.correlation;
    if (k.tag.phase == Phase::metrics) {
      EXPECT_DOUBLE_EQ(*k.achieved_occupancy_percent, k.correlation == 32 ? 40.0 : k.name == "gemm" ? 80.0 : 3.0);
    } else {
      EXPECT_DOUBLE_EQ(*k.achieved_occupancy_percent, k.name == "gemm" ? 60.0 : 3.0);
    }
    EXPECT_FALSE(k.dram_throughput_percent);
  }
}

TEST(Apply, SummaryCountsOnlyTimedIterationsAndCarriesTheValues) {
  trace::ActivityBatch b = math_like_batch();
  MeasuredRanges measured = three_ranges();
  measured.metric_names = {kCtas, kOccupancy, kTensor};
  const RangeMatch m = match_ranges_to_launches(measured, launches_in_order(b, 0, Phase::metrics));
  apply_kernel_metrics(b, 0, Phase::metrics, m.kernels);
  CaseMeasurements cm;
  cm.label = "math bf16 1x1x128x128x64";
  cm.backend = "math";
  cm.iterations = 2;
  cm.iteration_us = {10, 12};
  DeviceProperties device;
  const CaseSummary c = summarize_case(cm, b);
  EXPECT_DOUBLE_EQ(c.kernels_per_iter, 3.0);  // the replayed forward is not an iteration
  ASSERT_EQ(c.kernels.size(), 2u);
  for (const KernelSummary& k : c.kernels) {
    ASSERT_TRUE(k.achieved_occupancy_percent) << k.name;
    EXPECT_DOUBLE_EQ(*k.achieved_occupancy_percent, k.name == "gemm" ? 60.0 : 3.0);
    ASSERT_TRUE(k.tensor_pipe_percent);
    EXPECT_DOUBLE_EQ(*k.tensor_pipe_percent, k.name == "gemm" ? 60.0 : 0.0);
    EXPECT_FALSE(k.dram_throughput_percent);
  }
}

TEST(SummaryJson, MetricValuesRoundTripAndStayNullWhenAbsent) {
  CaseSummary c;
  c.label = "flash bf16 2x16x4096x4096x128";
  c.backend = "flash";
  KernelSummary k;
  k.name = "flash_fwd_kernel";
  k.achieved_occupancy_percent = 12.21;
  k.dram_throughput_percent = 4.5;
  k.dram_bytes_per_second = 2.1e11;
  k.tensor_pipe_percent = 63.0;
  c.kernels.push_back(k);
  KernelSummary plain;
  plain.name = "other";
  c.kernels.push_back(plain);
  const nlohmann::json j = c;
  EXPECT_TRUE(j.at("kernels").at(1).at("dram_throughput_percent").is_null());
  const CaseSummary back = j.get<CaseSummary>();
  ASSERT_EQ(back.kernels.size(), 2u);
  EXPECT_EQ(back.kernels[0].achieved_occupancy_percent, 12.21);
  EXPECT_EQ(back.kernels[0].dram_throughput_percent, 4.5);
  EXPECT_EQ(back.kernels[0].dram_bytes_per_second, 2.1e11);
  EXPECT_EQ(back.kernels[0].tensor_pipe_percent, 63.0);
  EXPECT_FALSE(back.kernels[1].tensor_pipe_percent);
  EXPECT_FALSE(back.kernels[1].achieved_occupancy_percent);
}

TEST(Render, TableShowsAchievedBesideTheoreticalAndMetricColumnsOnlyWhenMeasured) {
  RunSummary run;
  run.device.name = "NVIDIA H200";
  CaseSummary c;
  c.label = "flash bf16 2x16x4096x4096x128";
  c.iterations = 1;
  KernelSummary k;
  k.name = "flash_fwd_kernel";
  k.occupancy_valid = true;
  k.theoretical_occupancy_percent = 12.5;
  c.kernels.push_back(k);
  run.cases.push_back(c);
  std::string text = render_summary(run, OutputFormat::table);
  EXPECT_EQ(text.find("achieved"), std::string::npos);
  EXPECT_EQ(text.find("tensor pipe"), std::string::npos);
  EXPECT_EQ(text.find("dram"), std::string::npos);

  run.cases[0].kernels[0].achieved_occupancy_percent = 12.21;
  run.cases[0].kernels[0].tensor_pipe_percent = 63.04;
  run.cases[0].kernels[0].dram_throughput_percent = 4.5;
  run.cases[0].kernels[0].dram_bytes_per_second = 2.1e11;
  // The 120-column table gives achieved occupancy its own column and keeps the DRAM GB/s for
  // the wide formats.
  text = render_summary(run, OutputFormat::table);
  EXPECT_NE(text.find("occupancy  achieved"), std::string::npos) << text;
  EXPECT_NE(text.find("12.5%     12.2%"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor pipe"), std::string::npos) << text;
  EXPECT_NE(text.find("63.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("4.5%"), std::string::npos) << text;
  EXPECT_EQ(text.find("GB/s"), std::string::npos) << text;
  for (const std::string& wide : {render_summary(run, OutputFormat::table, {.wide = true, .findings = {}}), render_summary(run, OutputFormat::md)}) {
    EXPECT_NE(wide.find("12.5% (12.2% achieved)"), std::string::npos) << wide;
    EXPECT_NE(wide.find("4.5% (210 GB/s)"), std::string::npos) << wide;
  }
}

TEST(MetricsPhase, NameTagRoundTripAndNotCountedAsIteration) {
  EXPECT_STREQ(trace::to_string(Phase::metrics), "metrics");
  EXPECT_EQ(trace::parse_phase("metrics"), Phase::metrics);
  const trace::SweepTag tag{3, Phase::metrics, -1};
  const trace::SweepTag back = decode_tag(encode_tag(tag));
  EXPECT_EQ(back.case_index, 3);
  EXPECT_EQ(back.phase, Phase::metrics);
  EXPECT_EQ(back.iteration, -1);
  // A phase byte past the last known phase decodes as none, not as garbage.
  const std::uint64_t unknown = (std::uint64_t{4} << 32) | (std::uint64_t{0x7f} << 24);
  EXPECT_EQ(decode_tag(unknown).phase, Phase::none);
}

}  // namespace
}  // namespace attnprof
