// main() of every GPU test binary. Without a usable GPU it says why (no NVIDIA driver, a driver
// older than the runtime, no device, ...) and exits 77, which ctest reports as skipped; with
// ATTNPROF_REQUIRE_GPU=1 (a GPU machine's run) it exits 1 instead. On a GPU, a test may skip only
// with a listed reason (support/skip_reasons.hpp): any other skip is counted as a failure, and
// the run ends with "skipped with reason: N (...)". A run whose every test skipped checked
// nothing: it exits 77.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "gpu/device_info.hpp"
#include "support/skip_reasons.hpp"

namespace {

using attnprof::GpuAvailability;
using attnprof::GpuVerdict;
using attnprof::test::SkipTally;

bool gpu_required() {
  const char* value = std::getenv("ATTNPROF_REQUIRE_GPU");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

// Counts each finished test's skip by its reason; a skip without a listed one is a failure.
class SkipPolicy : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    const testing::TestResult& result = *info.result();
    if (!result.Skipped()) {
      passed_ += result.Passed() ? 1 : 0;
      return;
    }
    std::string message;
    for (int i = 0; i < result.total_part_count(); ++i)
      if (result.GetTestPartResult(i).skipped()) message = result.GetTestPartResult(i).message();
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    const std::size_t unlisted = tally_.unlisted().size();
    tally_.record(name, message);
    if (tally_.unlisted().size() > unlisted)
      std::printf("[  FAILED  ] %s skipped without a listed reason (tests/support/skip_reasons.hpp): %s\n",
                  name.c_str(), message.c_str());
  }

  void OnTestProgramEnd(const testing::UnitTest&) override {
    std::printf("%s\n", tally_.summary_line().c_str());
    if (!tally_.unlisted().empty()) {
      std::printf("skipped without a listed reason, counted as failures: %zu\n", tally_.unlisted().size());
      for (const std::string& line : tally_.unlisted()) std::printf("  %s\n", line.c_str());
    }
    std::fflush(stdout);
  }

  bool failed() const { return !tally_.unlisted().empty(); }
  bool checked_nothing() const { return passed_ == 0 && tally_.listed() > 0; }

 private:
  SkipTally tally_;
  int passed_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  const bool required = gpu_required();
  const GpuAvailability gpu = attnprof::gpu_availability();
  if (gpu.verdict != GpuVerdict::usable) {
    if (required) {
      std::printf("FAILED: ATTNPROF_REQUIRE_GPU is set and there is no usable GPU: %s\n", gpu.message.c_str());
      return 1;
    }
    std::printf("SKIPPED: %s (set ATTNPROF_REQUIRE_GPU=1 to make this a failure)\n", gpu.message.c_str());
    return 77;
  }
  if (!gpu.message.empty()) std::printf("note: %s\n", gpu.message.c_str());
  auto* policy = new SkipPolicy;  // the listeners list owns it
  testing::UnitTest::GetInstance()->listeners().Append(policy);
  const int code = RUN_ALL_TESTS();
  if (code != 0 || policy->failed()) return 1;
  return policy->checked_nothing() ? 77 : 0;
}
