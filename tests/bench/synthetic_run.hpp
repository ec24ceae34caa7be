// A synthetic `attnprof run` for the trace writer and reader at scale: the records a sweep
// writes (per timed iteration an NVTX range and its GPU projection, one launch API call per
// kernel, realistic kernel names and args, a D2D copy for manual:out_of_place), generated one
// iteration at a time so that nothing but the writer's buffer grows with the trace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "summary/summary.hpp"
#include "trace/chrome_trace_writer.hpp"

namespace attnprof::bench {

struct SyntheticRunOptions {
  // Stop after the iteration that brings the trace to this many events, or this many bytes
  // (whichever is set; 0 = unset). Cases share the iterations evenly.
  std::uint64_t target_events = 0;
  std::uint64_t target_bytes = 0;
  int warmup = 2;
  // json or json.gz (and the gzip level). target_bytes counts the JSON, before compression.
  trace::TraceWriteOptions write;
  // Called after every iteration written (e.g. to sample memory); may be empty.
  std::function<void(const trace::ChromeTraceWriter&)> on_iteration;
};

struct SyntheticRunResult {
  std::uint64_t events = 0;     // events in traceEvents (flows and track names included)
  std::uint64_t bytes = 0;      // size of the file (compressed, for json.gz)
  std::uint64_t gpu_records = 0;
  RunSummary summary;           // as the run would have written it (also stored in the trace)
};

// Writes the trace of a synthetic sweep to `path`, with the run's summary and config in its
// `attnprof` object, exactly as runner.cpp does.
SyntheticRunResult write_synthetic_run(const std::filesystem::path& path, const SyntheticRunOptions& options);

// The backend names the synthetic config uses, for report_from_trace's expectations.
const std::vector<std::string>& synthetic_backend_names();

}  // namespace attnprof::bench
