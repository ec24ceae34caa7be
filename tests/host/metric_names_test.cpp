// The metrics --metrics configures exist on the H200's chip (GH100), checked with CUPTI's profiler
// host API, which needs no GPU: a renamed or retired metric fails here, on the build machine, not
// in the one GPU session of the day.
#include <gtest/gtest.h>

#include "metrics/kernel_metrics.hpp"
#include "metrics/range_profiler.hpp"

namespace attnprof {
namespace {

constexpr const char* kChip = "GH100";  // H100 and H200

TEST(MetricNamesOnGH100, EveryTableEntryIsValid) {
  std::vector<std::string> names;
  for (const MetricDefinition& d : metric_definitions()) names.push_back(d.cupti_name);
  const HostMetricCheck check = check_metrics_on_host(kChip, names);
  for (const std::string& bad : check.invalid) ADD_FAILURE() << bad;
  for (const std::string& d : check.descriptions) std::printf("%s\n", d.c_str());
  EXPECT_EQ(check.descriptions.size(), names.size());
}

TEST(MetricNamesOnGH100, EveryGroupFitsInOnePass) {
  // One pass means kernel replay runs each kernel once more per pass: the measured forward costs
  // about one forward per pass. (Without a device's counter availability image the host API
  // still schedules the passes for the chip.)
  for (const auto& groups : std::vector<std::vector<MetricGroup>>{
           {MetricGroup::occupancy}, {MetricGroup::occupancy, MetricGroup::dram, MetricGroup::tensor}}) {
    const HostMetricCheck check = check_metrics_on_host(kChip, metric_names_for(groups));
    EXPECT_TRUE(check.invalid.empty());
    EXPECT_GT(check.config_image_bytes, 0u);
    EXPECT_EQ(check.passes, 1u) << metric_names_for(groups).size() << " metrics";
  }
}

TEST(MetricNamesOnGH100, LaunchMetricsAndTyposAreRejected) {
  // sm__maximum_warps_per_active_cycle_pct is Nsight Compute's theoretical occupancy, a launch
  // attribute, not a counter: theoretical occupancy comes from cuda_occupancy.h instead.
  const HostMetricCheck check = check_metrics_on_host(
      kChip, {"sm__maximum_warps_per_active_cycle_pct", "sm__warps_active.avg.pct_of_peak_sustained_actve",
              "sm__warps_active.avg.pct_of_peak_sustained_active"});
  ASSERT_EQ(check.invalid.size(), 2u);
  EXPECT_NE(check.invalid[0].find("CUPTI_ERROR_INVALID_METRIC_NAME"), std::string::npos) << check.invalid[0];
  EXPECT_EQ(check.descriptions.size(), 1u);
}

TEST(MetricNamesOnGH100, UnknownChipIsUnavailableNotACrash) {
  EXPECT_THROW(check_metrics_on_host("NOT_A_CHIP", {"sm__warps_active.avg.pct_of_peak_sustained_active"}),
               MetricsUnavailableError);
}

}  // namespace
}  // namespace attnprof
