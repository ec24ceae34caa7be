// The CUPTI Activity API collector: kernels (concurrent), memcpy, memset, runtime and driver
// API calls, NVTX markers and CUPTI's own overhead. Buffers come back asynchronously on CUPTI's
// thread; drain() force-flushes and hands over every record since the last drain, with each
// kernel/memcpy/memset joined to the API call that launched it and tagged with the sweep
// position (case, phase, iteration) the runner pushed as an external correlation id.
// Dropped records are counted, never silent.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "collector/collector_options.hpp"
#include "collector/sweep_tags.hpp"
#include "trace/model.hpp"

namespace attnprof {

// How complete the capture is: written to summary.json and trace.json.
struct CollectorHealth {
  std::uint64_t records = 0;
  std::uint64_t dropped_records = 0;     // CUPTI's count of records lost for lack of a buffer
  std::uint64_t buffers_declined = 0;    // buffer requests refused because max_buffers was reached
  std::uint64_t invalid_timestamps = 0;  // GPU records with start 0 or end < start, left out of the trace
  std::uint64_t buffers_completed = 0;
};

class ActivityCollector {
 public:
  // Subscribes to CUPTI and enables the activity kinds. Only one collector may exist at a time
  // (CUPTI allows one subscriber per process). Call before the first CUDA call when possible.
  explicit ActivityCollector(CollectorOptions options = {});
  ~ActivityCollector();
  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;

  // Timestamp on the records' clock.
  static std::uint64_t now_ns();

  // Tags every CUDA API call (and so every GPU activity) until pop_tag(). Not nested.
  void push_tag(const trace::SweepTag& tag);
  void pop_tag();

  // Force-flushes CUPTI and returns everything recorded since the last drain. The caller
  // synchronizes the device first so GPU records are complete.
  trace::ActivityBatch drain();

  CollectorHealth health() const;
  static std::string cupti_version_text();

  // Called from CUPTI's buffer callbacks.
  void on_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records);
  // Returns true when the collector keeps the buffer (zeroed, for the next request).
  bool on_buffer_completed(std::uint8_t* buffer, std::size_t valid_size);

 private:
  struct MarkerStart {
    std::string name;
    std::uint64_t timestamp = 0;
    std::uint32_t thread = 0;
  };
  void parse_record(const void* record);
  const std::string& demangled(const char* mangled);
  const std::string& api_name(bool driver, std::uint32_t cbid);

  CollectorOptions options_;
  mutable std::mutex mutex_;
  trace::ActivityBatch pending_;
  std::unordered_map<std::uint32_t, std::uint64_t> external_ids_;  // correlation -> external id
  std::unordered_map<std::uint32_t, MarkerStart> open_markers_;    // marker id -> start
  std::unordered_map<const char*, std::string> demangled_;
  std::map<std::pair<bool, std::uint32_t>, std::string> api_names_;
  CollectorHealth health_;  // its buffer counts live under buffers_mutex_ below

  // The buffer pool has a lock of its own: a request comes from the launching thread when its
  // buffer is full, and must not wait while CUPTI's thread parses another buffer under mutex_.
  mutable std::mutex buffers_mutex_;
  std::size_t buffers_in_flight_ = 0;
  std::uint64_t buffers_declined_ = 0;
  std::uint64_t buffers_completed_ = 0;
  static constexpr std::size_t kReadyBuffers = 4;
  std::vector<std::uint8_t*> ready_buffers_;  // zeroed and waiting for a request (zeroed_buffers only)
};

}  // namespace attnprof
