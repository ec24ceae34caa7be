// Theoretical occupancy from cuda_occupancy.h, one case per limiter, with H200 (sm_90) properties.
#include <gtest/gtest.h>

#include "core/occupancy.hpp"

namespace attnprof {
namespace {

struct OccupancyCase {
  const char* what;
  KernelResources kernel;
  int blocks_per_sm;
  double percent;
  const char* limiter;
};

void PrintTo(const OccupancyCase& c, std::ostream* os) { *os << c.what; }

class Occupancy : public testing::TestWithParam<OccupancyCase> {};

TEST_P(Occupancy, MatchesTheCalculator) {
  const OccupancyCase& c = GetParam();
  const attnprof::Occupancy e = theoretical_occupancy(sm90_reference_properties(), c.kernel);
  ASSERT_TRUE(e.valid) << e.error;
  EXPECT_EQ(e.active_blocks_per_sm, c.blocks_per_sm) << c.what;
  EXPECT_DOUBLE_EQ(e.theoretical_percent, c.percent) << c.what;
  EXPECT_EQ(e.limiter, c.limiter) << c.what;
}

INSTANTIATE_TEST_SUITE_P(
    Sm90, Occupancy,
    testing::Values(
        // FlashAttention-2's forward: 255 registers x 128 threads -> 2 blocks, 8 of 64 warps.
        OccupancyCase{"flash", {128, 255, 0, 65536, true, -1}, 2, 12.5, "registers"},
        // cuDNN's sm90 SDPA kernel: both registers and its 227 KiB of shared memory allow one block.
        OccupancyCase{"cudnn", {384, 168, 0, 232448 - 1024, true, -1}, 1, 18.75, "registers and shared memory"},
        // cutlassF 64x128: 256 threads x 128 registers -> 2 blocks; its 51 KiB of shared memory would allow 4.
        OccupancyCase{"cutlassF", {256, 128, 0, 52224, true, -1}, 2, 25.0, "registers"},
        // More than 48 KiB of static shared memory cannot launch at all: it must be dynamic and opted in.
        OccupancyCase{"static shared memory over 48 KiB", {256, 128, 52224, 0, false, -1}, 0, 0.0,
                      "cannot launch: shared memory"},
        OccupancyCase{"shared memory", {256, 32, 0, 100 * 1024, true, -1}, 2, 25.0, "shared memory"},
        OccupancyCase{"warps", {1024, 16, 0, 0, false, -1}, 2, 100.0, "warps"},
        OccupancyCase{"registers and warps tie", {1024, 32, 0, 0, false, -1}, 2, 100.0, "registers and warps"},
        OccupancyCase{"blocks", {32, 16, 0, 0, false, -1}, 32, 50.0, "blocks"}),
    [](const testing::TestParamInfo<OccupancyCase>& info) {
      std::string name = info.param.what;
      for (char& ch : name)
        if (ch == ' ') ch = '_';
      return name;
    });

TEST(Occupancy, ExplainsTheFlashCase) {
  const KernelResources flash{128, 255, 0, 65536, true, -1};
  const attnprof::Occupancy e = theoretical_occupancy(sm90_reference_properties(), flash);
  EXPECT_EQ(explain_occupancy(flash, e),
            "255 registers (allocated as 256) x 128 threads = 32768 registers per block of 65536 per SM -> 2 blocks/SM (8 of 64 warps) "
            "-> 12.5%, limited by registers");
}

TEST(Occupancy, ABlockThatCannotLaunchIsReported) {
  // 1024 threads x 255 registers needs 256K registers per block: no block fits.
  const attnprof::Occupancy e = theoretical_occupancy(sm90_reference_properties(), {1024, 255, 0, 0, false, -1});
  ASSERT_TRUE(e.valid);
  EXPECT_EQ(e.active_blocks_per_sm, 0);
  EXPECT_EQ(e.theoretical_percent, 0);
  EXPECT_NE(e.limiter.find("cannot launch"), std::string::npos);
}

TEST(Occupancy, UnknownArchitectureIsAnErrorNotAZero) {
  DeviceProperties old = sm90_reference_properties();
  old.compute_major = 2;
  const attnprof::Occupancy e = theoretical_occupancy(old, {128, 32, 0, 0, false, -1});
  EXPECT_FALSE(e.valid);
  EXPECT_FALSE(e.error.empty());
}

}  // namespace
}  // namespace attnprof
