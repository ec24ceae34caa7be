#include "collector/collector_options.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace attnprof {
namespace {

bool flag_from_environment(const char* variable, bool fallback) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  if (text == "1" || text == "on" || text == "true") return true;
  if (text == "0" || text == "off" || text == "false") return false;
  throw std::invalid_argument(fmt::format("{}={}: expected 0 or 1", variable, text));
}

}  // namespace

CollectorOptions collector_options_from_environment(CollectorOptions base) {
  if (const char* driver = std::getenv("ATTNPROF_CUPTI_DRIVER"); driver != nullptr && *driver != '\0') {
    const std::string_view text(driver);
    if (text == "all") base.driver_api = DriverApiRecords::all;
    else if (text == "launches") base.driver_api = DriverApiRecords::launches;
    else if (text == "none") base.driver_api = DriverApiRecords::none;
    else throw std::invalid_argument(fmt::format("ATTNPROF_CUPTI_DRIVER={}: expected all, launches or none", text));
  }
  if (const char* runtime = std::getenv("ATTNPROF_CUPTI_RUNTIME"); runtime != nullptr && *runtime != '\0') {
    const std::string_view text(runtime);
    base.record_runtime = text != "none";
    if (text == "all") base.skip_runtime_queries = false;
    else if (text == "no-queries") base.skip_runtime_queries = true;
    else if (text != "none")
      throw std::invalid_argument(fmt::format("ATTNPROF_CUPTI_RUNTIME={}: expected all, no-queries or none", text));
  }
  base.record_overhead = flag_from_environment("ATTNPROF_CUPTI_OVERHEAD", base.record_overhead);
  if (std::getenv("ATTNPROF_CUPTI_PER_THREAD") != nullptr)
    base.per_thread_buffers = flag_from_environment("ATTNPROF_CUPTI_PER_THREAD", true);
  base.zeroed_buffers = flag_from_environment("ATTNPROF_CUPTI_ZEROED", base.zeroed_buffers);
  if (const char* bytes = std::getenv("ATTNPROF_CUPTI_BUFFER_BYTES"); bytes != nullptr && *bytes != '\0') {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(bytes, &end, 10);
    if (end == bytes || *end != '\0' || n < 1024)
      throw std::invalid_argument(fmt::format("ATTNPROF_CUPTI_BUFFER_BYTES={}: expected a byte count >= 1024", bytes));
    base.buffer_bytes = static_cast<std::size_t>(n);
  }
  return base;
}

}  // namespace attnprof
