// Streams the event model to a Chrome-trace JSON file in the schema PyTorch's profiler
// (Kineto) writes, so Perfetto, chrome://tracing and HTA read it unchanged. Memory stays flat:
// each event is formatted into a small buffer and written out; nothing is kept per event
// except the set of tracks already named.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/device_properties.hpp"
#include "trace/model.hpp"

namespace attnprof::trace {

struct TraceHeader {
  std::uint64_t base_time_ns = 0;  // every ts is relative to this (Kineto's baseTimeNanoseconds)
  std::vector<DeviceProperties> devices;
  std::string host_process_name;   // "attnprof run (pid 1234)"
  std::uint32_t host_process = 0;  // pid used for host tracks
  std::optional<int> rank;         // distributedInfo.rank, for multi-process jobs
};

// What a case is called in kernel args ("case", "backend").
struct CaseName {
  std::string label;
  std::string backend;
};

class ChromeTraceWriter {
 public:
  // Writes to `<path>.tmp`; finish() renames it over `path`, so no reader sees half a trace.
  ChromeTraceWriter(std::filesystem::path path, TraceHeader header);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // Registers the name of case `index` (indices are dense, in order).
  void add_case(CaseName name);

  void write(const KernelActivity& kernel);
  void write(const MemcpyActivity& memcpy);
  void write(const MemsetActivity& memset);
  void write(const ApiCall& call);
  void write(const Annotation& annotation);
  void write(const OverheadActivity& overhead);
  void write(const ActivityBatch& batch);

  // Closes traceEvents, writes the `attnprof` object (tool/config/versions/dropped records) and
  // renames the file into place. Safe to call once; later calls do nothing.
  void finish(const nlohmann::json& attnprof_metadata);

  std::uint64_t events_written() const { return events_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void begin_event();
  void flush_if_large();
  void ensure_host_track(std::uint32_t thread);
  void ensure_gpu_track(std::uint32_t device, std::uint32_t stream);
  void write_metadata_event(std::string_view what, std::uint32_t pid, std::optional<std::uint32_t> tid,
                            std::string_view key, std::string_view value_json);
  void write_case_args(const SweepTag& tag);
  void write_flow_end(std::uint32_t correlation, std::uint64_t ts_ns, std::uint32_t device, std::uint32_t stream);
  void append_ts(std::uint64_t ns);
  void append_dur(std::uint64_t start_ns, std::uint64_t end_ns);

  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  std::FILE* file_ = nullptr;
  fmt::memory_buffer buffer_;
  TraceHeader header_;
  std::vector<CaseName> cases_;
  std::set<std::uint32_t> host_threads_;
  std::set<std::pair<std::uint32_t, std::uint32_t>> gpu_tracks_;
  std::set<std::uint32_t> gpu_processes_;
  std::uint64_t events_ = 0;
  bool finished_ = false;
};

// JSON string escaping for names that carry C++ templates, quotes and control characters.
void append_json_string(fmt::memory_buffer& out, std::string_view text);

// Microseconds with a three-digit nanosecond fraction, relative to base: "12.345".
void append_relative_us(fmt::memory_buffer& out, std::uint64_t ns, std::uint64_t base_ns);

}  // namespace attnprof::trace
