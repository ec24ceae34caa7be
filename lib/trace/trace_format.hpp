// How a trace is stored: plain Chrome-trace JSON, or the same gzip-compressed (`trace.json.gz`),
// as torch.profiler can write and Perfetto and TensorBoard read. Readers need not be told:
// they recognise gzip by its first bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnprof::trace {

enum class TraceFormat : std::uint8_t { json, json_gz };

// The names a config's `trace_format` and `--trace-format` take, in TraceFormat's order.
inline const std::vector<std::string> kTraceFormatNames = {"json", "json.gz"};

std::string_view to_string(TraceFormat format);
std::optional<TraceFormat> parse_trace_format(std::string_view name);

// The file name's convention: "trace" -> "trace.json" or "trace.json.gz".
std::string trace_file_name(std::string_view stem, TraceFormat format);

// zlib's level for traces: Z_BEST_SPEED. At 1 M events it writes 17x smaller files than JSON;
// zlib's default (6) saves a further 37% for 2.3x the writer's CPU time (docs/perf/NOTES.md,
// "gzip traces").
inline constexpr int kTraceGzipLevel = 1;

// How ChromeTraceWriter and merge_traces write a trace.
struct TraceWriteOptions {
  TraceFormat format = TraceFormat::json;
  int gzip_level = kTraceGzipLevel;  // 1 (fastest) to 9 (smallest); json.gz only
};

}  // namespace attnprof::trace
