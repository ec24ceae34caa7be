// The CUPTI Activity API collector: kernels (concurrent), memcpy, memset, runtime and driver
// API calls, NVTX markers, CUPTI's own overhead, device-memory allocations and releases.
// Buffers come back asynchronously on CUPTI's thread; drain() force-flushes and hands over every
// record since the last drain, with each kernel/memcpy/memset/allocation joined to the API call
// that made it and tagged with the sweep position (case, phase, iteration) the runner pushed as
// an external correlation id.
// Dropped records are counted, never silent.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "collector/collector_options.hpp"
#include "collector/cupti_records.hpp"
#include "trace/model.hpp"

namespace attnprof {

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
  // synchronizes the device first so GPU records are complete. The last drain of a process
  // (`final_drain`) also closes the NVTX ranges still open, at the moment of the drain.
  trace::ActivityBatch drain(bool final_drain = false);

  // Records converted, dropped by CUPTI, declined for lack of a buffer, left out for bad timestamps.
  trace::CaptureHealth health() const;
  std::uint64_t buffers_completed() const;
  static std::string cupti_version_text();
  // What the capture lacks or guessed, one line each: an optional activity kind the driver
  // refused (memory records), memory records of values this build's CUPTI does not name.
  std::vector<std::string> notes() const;

  // Called from CUPTI's buffer callbacks.
  void on_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records);
  // Returns true when the collector keeps the buffer (zeroed, for the next request).
  bool on_buffer_completed(std::uint8_t* buffer, std::size_t valid_size);

 private:
  // What the destructor does, also for a constructor that fails part-way: CUPTI's activity kinds
  // off (after a last flush) and the ready buffers freed.
  void shut_down() noexcept;
  // Enables a kind the run can do without: a refusal becomes a note ("no <records> records: ..."),
  // not an error. Returns whether it is on.
  bool enable_optional_kind(CUpti_ActivityKind kind, const char* name, const char* records);

  CollectorOptions options_;
  mutable std::mutex mutex_;     // guards conversion_: CUPTI's thread converts, drain() takes
  RecordConversion conversion_;
  std::vector<std::string> enable_notes_;  // optional kinds refused; written by the constructor only

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
