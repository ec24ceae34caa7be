// Streams the event model to a Chrome-trace JSON file in the schema PyTorch's profiler
// (Kineto) writes, so Perfetto, chrome://tracing and HTA read it unchanged. Memory stays flat:
// each event is formatted into a small buffer and written out; nothing is kept per event, only
// the tracks already named, per case and per kernel launch configuration their args as
// already formatted, and per GPU the bytes of device memory in use. Events are written one per line without spaces (the header is indented).
// With TraceFormat::json_gz the same text is deflated into gzip as it is flushed.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/device_properties.hpp"
#include "core/document_file.hpp"
#include "trace/model.hpp"
#include "trace/trace_format.hpp"

namespace attnprof::trace {

struct TraceHeader {
  std::uint64_t base_time_ns = 0;  // every ts is relative to this (Kineto's baseTimeNanoseconds)
  std::vector<DeviceProperties> devices;
  std::string host_process_name;   // "attnprof run (pid 1234)"; empty: named when first used (merges)
  std::uint32_t host_process = 0;  // pid used for host tracks
  std::optional<int> rank;         // distributedInfo.rank, for multi-process jobs
  std::optional<int> local_rank;   // distributedInfo.local_rank (LOCAL_RANK: the rank on its host)
  std::optional<int> world_size;   // distributedInfo.world_size
};

// Whose activities are written next. One process's trace has one source, made from the header;
// a merged trace (`attnprof merge`, `run --devices`) switches source per input process so each
// gets its own process tracks: host pid, and GPU pids `gpu_pid_base + device`.
struct TraceSource {
  std::uint32_t host_process = 0;
  std::string host_process_name;
  std::uint32_t gpu_pid_base = 0;
  std::string gpu_process_prefix;  // "rank 1 / " -> "rank 1 / GPU 0: NVIDIA H200"
  int sort_index_base = 0;         // Perfetto's order: host at base, GPU d at base + 100 + d
  // Write ac2g flows from launches_work / launch_api (one process's trace). Merges copy each
  // input's own flow events instead (write(const FlowEvent&)), with ids made unique.
  bool automatic_flows = true;
};

// One end of an ac2g flow, as read from another trace: `start` on the launching host thread,
// otherwise the end on the GPU stream (`bp: "e"`).
struct FlowEvent {
  bool start = true;
  std::uint64_t id = 0;
  std::uint64_t ts_ns = 0;
  std::uint32_t device = 0;  // end only: the GPU
  std::uint32_t thread = 0;  // host thread (start) or stream (end)
};

// What a case is called in kernel args ("case", "backend").
struct CaseName {
  std::string label;
  std::string backend;
};

class ChromeTraceWriter {
 public:
  // Writes to `<path>.tmp`; finish() renames it over `path`, so no reader sees half a trace.
  // The name is the caller's: `.json.gz` is the convention for gzip (trace_file_name()).
  ChromeTraceWriter(std::filesystem::path path, TraceHeader header, TraceWriteOptions options = {});
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // Registers the name of the case after the last one named (a run's cases, in order).
  void add_case(CaseName name);
  // Names case `index` (merges learn names as they go, from indices another trace wrote).
  void set_case(std::size_t index, CaseName name);
  bool has_case(std::size_t index) const {
    const auto it = cases_.find(index);
    return it != cases_.end() && !it->second.name.label.empty();
  }

  // The process the next activities belong to (see TraceSource).
  void set_source(TraceSource source);

  void write(const KernelActivity& kernel);
  void write(const MemcpyActivity& memcpy);
  void write(const MemsetActivity& memset);
  void write(const ApiCall& call);
  void write(const Annotation& annotation);
  void write(const OverheadActivity& overhead);
  // Kineto's "[memory]" instant event on the host thread that made the call, and for device
  // memory the next value of the GPU's "device memory in use" counter track. Give them in time
  // order: the running totals (the events' "Total Allocated", the counter) follow the order given.
  void write(const MemoryActivity& memory);
  // Everything in `batch`; its memory events sorted by time first.
  void write(const ActivityBatch& batch);
  void write(const FlowEvent& flow);

  // Closes traceEvents, writes the `attnprof` object (tool/config/versions/dropped records) and
  // renames the file into place. Safe to call once; later calls do nothing.
  void finish(const nlohmann::json& attnprof_metadata);
  // Gives up: removes `<path>.tmp` and leaves whatever `path` holds alone (a merge that failed
  // must not replace a good trace with part of one). Later finish() calls do nothing; after a
  // finish() that renamed, there is nothing to remove.
  void abandon();

  std::uint64_t events_written() const { return events_; }
  // Bytes of the JSON document so far (written out or still buffered), before any compression.
  std::uint64_t bytes_written() const { return output_.document_bytes() + buffer_.size(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  // What a kernel's launch configuration fixes: every arg from "registers per thread" to "occupancy".
  struct KernelShape {
    std::uint32_t device = 0;
    std::array<int, 3> grid{}, block{}, cluster{};
    int registers = 0, static_shared = 0, dynamic_shared = 0, local = 0, shared_executed = 0, carveout = -1;
    Occupancy occupancy;

    static KernelShape of(const KernelActivity& kernel);
    std::size_t slot(std::size_t slots) const;  // a hash of the configuration, below `slots`
    bool operator==(const KernelShape&) const = default;
  };

  void begin_event();
  void flush_if_large();
  void ensure_host_track(std::uint32_t thread);
  void ensure_gpu_track(std::uint32_t device, std::uint32_t stream);
  void ensure_gpu_process(std::uint32_t device);
  std::uint32_t gpu_pid(std::uint32_t device) const { return source_.gpu_pid_base + device; }
  void write_metadata_event(std::string_view what, std::uint32_t pid, std::optional<std::uint32_t> tid,
                            std::string_view key, std::string_view value_json);
  void write_case_args(const SweepTag& tag);
  void write_flow_start(std::uint64_t id, std::uint64_t ts_ns, std::uint32_t thread);
  void write_flow_end(std::uint64_t id, std::uint64_t ts_ns, std::uint32_t device, std::uint32_t stream);
  void write_track(std::uint32_t pid, std::uint32_t tid);  // ,"pid":..,"tid":.."
  // A GPU event (kernel, memcpy, memset): begin_gpu_event, "{..."name":..", write_gpu_placement
  // (track, ts, dur, and the args object opened with the ids), its own args, end_gpu_event
  // (launch API, case args, the closing braces and the ac2g flow's end).
  void begin_gpu_event(const GpuActivity& g);
  void write_gpu_placement(const GpuActivity& g);
  void write_bandwidth(const GpuActivity& g, std::uint64_t bytes);  // a copy's or fill's GB/s arg
  void end_gpu_event(const GpuActivity& g);
  void write_kernel_shape_args(const KernelActivity& kernel);
  void format_kernel_shape_args(const KernelActivity& kernel);
  void append_ts(std::uint64_t ns);
  void append_dur(std::uint64_t start_ns, std::uint64_t end_ns);

  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  DocumentWriter output_;
  fmt::memory_buffer buffer_;
  TraceHeader header_;
  struct NamedCase {
    CaseName name;
    std::string args;  // ,"backend":..,"case":.. as written into its events
  };
  // By index, not a vector: a merge's indices come from its inputs, and may be anything up to 2^31.
  std::map<std::size_t, NamedCase> cases_;
  // The case of the last event, looked up once for the run of events that share it.
  std::size_t last_case_index_ = static_cast<std::size_t>(-1);
  const NamedCase* last_case_ = nullptr;
  TraceSource source_;
  std::set<std::uint32_t> host_processes_;                         // named host pids
  std::set<std::pair<std::uint32_t, std::uint32_t>> host_threads_;  // (pid, thread)
  std::set<std::pair<std::uint32_t, std::uint32_t>> gpu_tracks_;    // (pid, stream)
  std::set<std::uint32_t> gpu_processes_;                          // named GPU pids
  // The last track written to (pid, thread or stream): already named, no set look-up needed.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> last_host_track_, last_gpu_track_;
  // The args a kernel's launch configuration fixes, formatted once per configuration and copied
  // after that: a sweep launches the same few kernels thousands of times. Direct-mapped by a hash
  // of the configuration; a collision just formats again.
  struct FormattedShape {
    KernelShape shape;
    std::string json;
  };
  std::array<FormattedShape, 64> kernel_shapes_;
  // Bytes held, by (host memory?, the pid of the process holding it): GPU pids for device memory.
  std::map<std::pair<bool, std::uint32_t>, std::uint64_t> memory_in_use_;
  std::uint64_t events_ = 0;
  bool finished_ = false;
};

// JSON string escaping for names that carry C++ templates, quotes and control characters.
void append_json_string(fmt::memory_buffer& out, std::string_view text);
// The same without the quotes, for a string written in pieces.
void append_json_text(fmt::memory_buffer& out, std::string_view text);

// Microseconds with a three-digit nanosecond fraction, relative to base: "12.345".
void append_relative_us(fmt::memory_buffer& out, std::uint64_t ns, std::uint64_t base_ns);

}  // namespace attnprof::trace
