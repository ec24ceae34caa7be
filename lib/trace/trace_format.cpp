#include "trace/trace_format.hpp"

namespace attnprof::trace {

std::string_view to_string(TraceFormat format) {
  switch (format) {
    case TraceFormat::json: return "json";
    case TraceFormat::json_gz: return "json.gz";
  }
  return "json";
}

std::optional<TraceFormat> parse_trace_format(std::string_view name) {
  if (name == "json") return TraceFormat::json;
  if (name == "json.gz") return TraceFormat::json_gz;
  return std::nullopt;
}

std::string trace_file_name(std::string_view stem, TraceFormat format) {
  return std::string(stem) + "." + std::string(to_string(format));
}

}  // namespace attnprof::trace
