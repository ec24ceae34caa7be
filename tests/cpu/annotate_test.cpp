// The annotate step: occupancy computed once per kernel record from its resources and device,
// the same whether the record came from CUPTI or back from a trace.
#include <filesystem>

#include <gtest/gtest.h>

#include "trace/annotate.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"

namespace attnprof::trace {
namespace {

KernelActivity flash_like() {
  KernelActivity k;
  k.name = "flash_fwd_kernel";
  k.start_ns = 1'000'000;
  k.end_ns = 1'030'000;
  k.block = {128, 1, 1};
  k.grid = {64, 16, 1};
  k.registers_per_thread = 255;
  k.dynamic_shared_bytes = 65536;
  k.shared_optin = true;
  return k;
}

TEST(Annotate, OccupancyComesFromTheRecordsResourcesAndCarriesItsExplanation) {
  KernelActivity k = flash_like();
  annotate_occupancy(k, sm90_reference_properties());
  ASSERT_TRUE(k.occupancy.valid) << k.occupancy.error;
  EXPECT_EQ(k.occupancy.active_blocks_per_sm, 2);
  EXPECT_DOUBLE_EQ(k.occupancy.theoretical_percent, 12.5);
  EXPECT_EQ(explain_occupancy(resources_of(k), k.occupancy),
            "255 registers (allocated as 256) x 128 threads = 32768 registers per block of 65536 per SM -> 2 blocks/SM (8 of 64 warps) "
            "-> 12.5%, limited by registers");
}

TEST(Annotate, AKernelOnADeviceWithoutPropertiesSaysSo) {
  ActivityBatch batch;
  batch.kernels.push_back(flash_like());
  batch.kernels.back().device = 3;
  annotate_occupancy(batch, {sm90_reference_properties()});  // device 0 only
  EXPECT_FALSE(batch.kernels[0].occupancy.valid);
  EXPECT_EQ(batch.kernels[0].occupancy.error, "no properties of device 3");
}

// A launch that asked for a carveout: its occupancy depends on it, so the trace carries the
// request and a re-read trace gives back the run's occupancy.
TEST(Annotate, ATraceReReadGivesTheRunsOccupancyCarveoutIncluded) {
  KernelActivity k = flash_like();
  k.registers_per_thread = 32;
  k.dynamic_shared_bytes = 40 * 1024;
  k.carveout_percent = 25;  // ~57 KiB of shared memory per SM: one block, not five
  annotate_occupancy(k, sm90_reference_properties());
  KernelActivity without = k;
  without.carveout_percent = -1;
  annotate_occupancy(without, sm90_reference_properties());
  ASSERT_NE(k.occupancy.active_blocks_per_sm, without.occupancy.active_blocks_per_sm);

  const std::filesystem::path path = std::filesystem::temp_directory_path() / "attnprof_annotate_test.json";
  TraceHeader header;
  header.devices = {sm90_reference_properties()};
  {
    ChromeTraceWriter writer(path, header);
    ActivityBatch batch;
    batch.kernels.push_back(k);
    writer.write(batch);
    writer.finish(nlohmann::json::object());
  }
  std::optional<KernelActivity> read;
  TraceEventConverter converter;
  read_chrome_trace(path, [&](const TraceEvent& e, const TraceDocument& doc) {
    if (auto a = converter.convert(e, doc))
      if (auto* kernel = std::get_if<KernelActivity>(&*a)) {
        annotate_occupancy(*kernel, converter.device_for(kernel->device, doc));
        read = *kernel;
      }
  });
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->carveout_percent, 25);
  EXPECT_EQ(read->occupancy, k.occupancy);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace attnprof::trace
