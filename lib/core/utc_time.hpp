// The current time in UTC as text, for summaries ("2026-12-02T16:04:05Z") and output folder
// names ("20261202-160405").
#pragma once

#include <string>

namespace attnprof {

std::string utc_now(const char* strftime_format);
inline std::string utc_now_iso8601() { return utc_now("%Y-%m-%dT%H:%M:%SZ"); }
inline std::string utc_now_compact() { return utc_now("%Y%m%d-%H%M%S"); }

}  // namespace attnprof
