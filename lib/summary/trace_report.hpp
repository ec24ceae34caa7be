// `attnprof report`: the run summary rebuilt from a saved trace in one streaming pass.
// - Our traces (run or profile): counts per iteration are recomputed from the GPU events'
//   case/phase/iteration args; timings, verification and plan times come from the summary the
//   run stored in the trace's `attnprof` object (without one: GPU span of each iteration).
// - torch.profiler (Kineto) traces: cases from record_function / NVTX ranges
//   (user_annotation), GPU work joined to them through correlation ids; time is the GPU span.
// Throws trace::TraceFormatError for malformed or foreign files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "summary/summary.hpp"
#include "trace/json_pull_parser.hpp"

namespace attnprof {

struct TraceReportOptions {
  // Backend names a config may use, so the run's expectations can be re-read from the config
  // stored in the trace and surprises recomputed. Empty: the run's own surprises are kept.
  std::vector<std::string> known_backends;
};

struct TraceReport {
  RunSummary summary;
  std::string origin;               // "attnprof run", "attnprof profile", "Kineto (torch.profiler)", ...
  std::vector<std::string> notes;   // what had to be assumed, for stderr
  std::uint64_t events = 0;
};

TraceReport report_from_trace(const std::filesystem::path& trace, const TraceReportOptions& options = {});
// The same from a parser already opened (a trace held in memory, say).
TraceReport report_from_trace(trace::JsonPullParser& parser, const TraceReportOptions& options = {});

}  // namespace attnprof
