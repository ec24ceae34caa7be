// The ATTNPROF_CUPTI_* variables that override the collector's settings: each value taken, an
// unset or empty variable leaves the default, and a value it cannot use is an error naming it.
#include <stdlib.h>

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "collector/collector_options.hpp"

namespace attnprof {
namespace {

const char* const kVariables[] = {"ATTNPROF_CUPTI_DRIVER",     "ATTNPROF_CUPTI_RUNTIME", "ATTNPROF_CUPTI_OVERHEAD",
                                  "ATTNPROF_CUPTI_PER_THREAD", "ATTNPROF_CUPTI_ZEROED",  "ATTNPROF_CUPTI_BUFFER_BYTES"};

class CollectorOptionsFromEnvironment : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : kVariables) unsetenv(v);
  }
};

TEST_F(CollectorOptionsFromEnvironment, NothingSetKeepsTheBase) {
  CollectorOptions base;
  base.driver_api = DriverApiRecords::launches;
  base.skip_runtime_queries = true;
  base.zeroed_buffers = true;
  setenv("ATTNPROF_CUPTI_ZEROED", "", 1);  // empty counts as unset
  const CollectorOptions o = collector_options_from_environment(base);
  EXPECT_EQ(o.driver_api, DriverApiRecords::launches);
  EXPECT_TRUE(o.skip_runtime_queries);
  EXPECT_TRUE(o.zeroed_buffers);
  EXPECT_TRUE(o.record_overhead);
  EXPECT_FALSE(o.per_thread_buffers.has_value());
  EXPECT_EQ(o.buffer_bytes, base.buffer_bytes);
}

TEST_F(CollectorOptionsFromEnvironment, EveryVariableIsApplied) {
  setenv("ATTNPROF_CUPTI_DRIVER", "all", 1);
  setenv("ATTNPROF_CUPTI_RUNTIME", "all", 1);
  setenv("ATTNPROF_CUPTI_OVERHEAD", "off", 1);
  setenv("ATTNPROF_CUPTI_PER_THREAD", "0", 1);
  setenv("ATTNPROF_CUPTI_ZEROED", "true", 1);
  setenv("ATTNPROF_CUPTI_BUFFER_BYTES", "33554432", 1);
  CollectorOptions base;
  base.driver_api = DriverApiRecords::launches;
  base.skip_runtime_queries = true;
  const CollectorOptions o = collector_options_from_environment(base);
  EXPECT_EQ(o.driver_api, DriverApiRecords::all);
  EXPECT_FALSE(o.skip_runtime_queries);
  EXPECT_FALSE(o.record_overhead);
  ASSERT_TRUE(o.per_thread_buffers.has_value());
  EXPECT_FALSE(*o.per_thread_buffers);
  EXPECT_TRUE(o.zeroed_buffers);
  EXPECT_EQ(o.buffer_bytes, 33554432u);

  setenv("ATTNPROF_CUPTI_DRIVER", "launches", 1);
  setenv("ATTNPROF_CUPTI_RUNTIME", "no-queries", 1);
  const CollectorOptions p = collector_options_from_environment(CollectorOptions{});
  EXPECT_EQ(p.driver_api, DriverApiRecords::launches);
  EXPECT_TRUE(p.skip_runtime_queries);
  EXPECT_TRUE(p.record_runtime);

  setenv("ATTNPROF_CUPTI_DRIVER", "none", 1);
  setenv("ATTNPROF_CUPTI_RUNTIME", "none", 1);
  const CollectorOptions q = collector_options_from_environment(CollectorOptions{});
  EXPECT_EQ(q.driver_api, DriverApiRecords::none);
  EXPECT_FALSE(q.record_runtime);
}

TEST_F(CollectorOptionsFromEnvironment, AValueItCannotUseNamesTheVariable) {
  const std::pair<const char*, const char*> bad[] = {{"ATTNPROF_CUPTI_DRIVER", "some"},
                                                     {"ATTNPROF_CUPTI_RUNTIME", "queries"},
                                                     {"ATTNPROF_CUPTI_OVERHEAD", "yes please"},
                                                     {"ATTNPROF_CUPTI_BUFFER_BYTES", "12"},
                                                     {"ATTNPROF_CUPTI_BUFFER_BYTES", "8MB"}};
  for (const auto& [variable, value] : bad) {
    clear();
    setenv(variable, value, 1);
    try {
      collector_options_from_environment(CollectorOptions{});
      ADD_FAILURE() << variable << "=" << value << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(variable) + "=" + value), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnprof
