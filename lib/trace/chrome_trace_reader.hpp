// Reads a Chrome-trace JSON file (plain or gzip: `trace.json.gz` is recognised by its first
// bytes), ours or one torch.profiler (Kineto) exported, in one streaming
// pass: the top-level object is walked token by token, the small header values
// (deviceProperties, baseTimeNanoseconds, distributedInfo, our `attnprof` object) are kept, and
// each element of traceEvents is handed to a callback as a small flat record, then forgotten.
// Memory stays flat however large the file. Errors are TraceFormatError: `malformed` (with line,
// column and byte offset) or `foreign` (valid JSON that is not a trace).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_properties.hpp"
#include "trace/json_pull_parser.hpp"
#include "trace/model.hpp"

namespace attnprof::trace {

// An optional string that keeps its storage when reset, so that reading millions of events
// allocates nothing per event. Reads like std::optional<std::string>.
class ReusableText {
 public:
  explicit operator bool() const { return present_; }
  bool has_value() const { return present_; }
  const std::string& operator*() const { return text_; }
  const std::string* operator->() const { return &text_; }
  const std::string& value() const { return text_; }
  std::string value_or(std::string_view fallback) const { return present_ ? text_ : std::string(fallback); }
  ReusableText& operator=(std::string_view text) {
    text_.assign(text.data(), text.size());
    present_ = true;
    return *this;
  }
  void reset() { present_ = false; }

 private:
  std::string text_;
  bool present_ = false;
};

// The args attnprof reads (Kineto's names and ours, trace/trace_keys.hpp); every other arg is skipped unread.
struct TraceEventArgs {
  std::optional<std::int64_t> correlation, device, context, stream, cbid, return_value;
  std::optional<std::int64_t> registers_per_thread, shared_memory, static_shared_memory, dynamic_shared_memory;
  std::optional<std::int64_t> local_memory_per_thread, shared_memory_config, bytes, value;
  std::optional<std::array<int, 3>> grid, block, cluster;
  std::optional<std::int64_t> carveout_percent;
  std::optional<double> achieved_occupancy_percent;
  std::optional<double> dram_throughput_percent, dram_gb_per_second, tensor_pipe_percent;  // --metrics
  ReusableText copy_kind, launch_api;
  std::optional<std::int64_t> case_index, iteration;
  ReusableText phase, case_label, backend;
  ReusableText metadata_name;    // args.name of an "M" event
  ReusableText metadata_labels;  // args.labels of an "M" event (Kineto's process_labels: "GPU 0")
  // A "[memory]" event's: Kineto's (Bytes is negative for a release; Addr is signed in Kineto's,
  // unsigned in ours, kept as its 64 bits) and ours.
  std::optional<std::int64_t> device_type, device_id, memory_bytes;
  std::optional<std::uint64_t> addr, pool_address;
  ReusableText operation, memory_kind, api, pool_type, role;

  // Everything unset again; the text fields keep their storage. (Lists every field: add new ones.)
  void clear();
};

// One element of traceEvents, flattened. Valid only during the callback.
struct TraceEvent {
  std::uint64_t index = 0;  // position in traceEvents
  std::string ph, cat, name;
  std::uint64_t pid = 0, tid = 0;  // string pids/tids (allowed by Perfetto) are hashed
  std::optional<std::int64_t> ts_ns, dur_ns;  // ts and dur as written, in nanoseconds, exact
  std::optional<std::uint64_t> id;
  std::string bp;
  TraceEventArgs args;

  void clear();
};

// Whether TraceEventArgs keeps args.<key> (trace_keys.hpp's kArgKeys says which should).
bool reads_arg(std::string_view key);

// The header of a trace: what the top-level object holds besides traceEvents.
struct TraceDocument {
  std::string source;
  bool bare_array = false;  // the whole document is an array of events (allowed by the format)
  std::optional<std::uint64_t> base_time_ns;
  std::vector<DeviceProperties> devices;  // from deviceProperties
  std::optional<int> rank;                // distributedInfo.rank
  nlohmann::json attnprof;                // our metadata object; null in other traces
  std::string trace_name;
  std::uint64_t events = 0;
};

using TraceEventCallback = std::function<void(const TraceEvent& event, const TraceDocument& so_far)>;

// Streams `path`. The document passed with each event holds the header values seen before
// traceEvents (both writers put them first); the returned one holds them all.
TraceDocument read_chrome_trace(const std::filesystem::path& path, const TraceEventCallback& on_event);
TraceDocument read_chrome_trace(JsonPullParser& parser, const TraceEventCallback& on_event);

// deviceProperties entry (Kineto's keys or ours) -> DeviceProperties. Fields Kineto does not
// write (max blocks per SM, reserved shared memory per block) come from the compute capability.
DeviceProperties device_properties_from_json(const nlohmann::json& entry);

// What every ts of a trace is shifted by, decided once from its first timed event: relative
// timestamps (ours, newer Kineto) are offsets from baseTimeNanoseconds, and may be negative (a
// record from before the base); absolute ones (older Kineto) are already past it.
std::int64_t timestamp_shift(std::optional<std::uint64_t> base_time_ns, std::int64_t first_ts_ns);

// Turns trace events into activities of the model: kernels, memcpys, memsets, runtime/driver
// calls, host and GPU annotations, overheads, memory allocations and releases ("[memory]"
// instant events, ours and Kineto's). Sweep tags come from our "case index"/"phase"/
// "iteration" args when present. A kernel's derived facts (occupancy) are not read back: the
// reader's caller computes them from the kernel's resources (trace/annotate.hpp); nor are a
// memory event's totals, nor our "device memory in use" counter events (derived from the rest).
// Kineto's "[memory]" events of CPU (and other non-CUDA) memory are left out, counted in a note;
// so are releases whose allocation the trace does not hold (it began after it), which are kept.
class TraceEventConverter {
 public:
  std::optional<Activity> convert(const TraceEvent& event, const TraceDocument& document);

  // The device kernels of `device` ran on: the trace's deviceProperties entry, or an H200's
  // when the trace has none (noted).
  const DeviceProperties& device_for(std::uint32_t device, const TraceDocument& document);
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::uint64_t to_ns(std::int64_t ts_ns, const TraceDocument& document);
  KernelActivity kernel(const TraceEvent& e, const TraceDocument& document, std::uint64_t start, std::uint64_t end);
  std::optional<MemoryActivity> memory(const TraceEvent& e, std::uint64_t start);
  // Keeps notes_[slot] saying `text` (added the first time).
  void set_note(std::optional<std::size_t>& slot, std::string text);

  // Addresses allocated and not yet released, by process: what tells a release without its allocation.
  struct LiveAllocation {
    std::uint64_t process = 0, address = 0;
    bool operator==(const LiveAllocation&) const = default;
  };
  struct LiveAllocationHash {
    std::size_t operator()(const LiveAllocation& a) const { return std::hash<std::uint64_t>()(a.address * 31 + a.process); }
  };
  std::unordered_set<LiveAllocation, LiveAllocationHash> live_allocations_;
  std::uint64_t releases_without_allocation_ = 0, foreign_memory_events_ = 0;
  std::optional<std::size_t> releases_note_, foreign_memory_note_;

  std::optional<std::int64_t> shift_;  // added to every ts: baseTimeNanoseconds for relative traces
  std::optional<DeviceProperties> fallback_device_;
  std::vector<std::string> notes_;
};

// "Memcpy DtoD (Device -> Device)" -> DtoD, "Device", "Device"; "Memset (Device)" -> "Device".
void parse_memcpy_name(const std::string& name, MemcpyKind& kind, std::string& src, std::string& dst);
std::string parse_memset_memory(const std::string& name);

}  // namespace attnprof::trace
