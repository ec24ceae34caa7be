#include "trace/trace_format.hpp"

namespace attnprof::trace {

std::string_view to_string(TraceFormat format) {
  return kTraceFormatNames.at(static_cast<std::size_t>(format));  // named in the enum's order
}

std::optional<TraceFormat> parse_trace_format(std::string_view name) {
  for (std::size_t i = 0; i < kTraceFormatNames.size(); ++i)
    if (kTraceFormatNames[i] == name) return static_cast<TraceFormat>(i);
  return std::nullopt;
}

std::string trace_file_name(std::string_view stem, TraceFormat format) {
  return std::string(stem) + "." + std::string(to_string(format));
}

}  // namespace attnprof::trace
