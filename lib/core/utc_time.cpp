#include "core/utc_time.hpp"

#include <ctime>

namespace attnprof {

std::string utc_now(const char* strftime_format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[64];
  const std::size_t length = std::strftime(text, sizeof text, strftime_format, &tm);
  return std::string(text, length);
}

}  // namespace attnprof
