#include "collector/activity_collector.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "collector/cupti_check.hpp"
#include "collector/cupti_records.hpp"
#include "collector/sweep_tags.hpp"

namespace attnprof {

void throw_cupti_error(CUptiResult status, const char* call, const char* file, int line) {
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  throw GpuCallError(fmt::format("{} failed at {}:{}: {} (CUptiResult {})", call, file, line, text,
                                 static_cast<int>(status)));
}

namespace {

constexpr std::size_t kAlign = 8;
ActivityCollector* g_active = nullptr;  // CUPTI's callbacks are plain C functions

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (g_active != nullptr) {
    g_active->on_buffer_requested(buffer, size, max_records);
  } else {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  if (g_active != nullptr && g_active->on_buffer_completed(buffer, valid_size)) return;  // kept for reuse
  ::operator delete(buffer, std::align_val_t(kAlign));
}

// NVTX only forwards to a tool if NVTX_INJECTION64_PATH names one before the first NVTX call;
// point it at the libcupti this process already loaded so our ranges reach the collector.
void route_nvtx_to_cupti() {
  if (std::getenv("NVTX_INJECTION64_PATH") != nullptr) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) != 0 && info.dli_fname != nullptr)
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

// Every driver API whose name says it launches GPU work, enabled one by one (without the
// DRIVER kind, which would override the selection).
void enable_work_launching_driver_apis() {
  for (std::uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    const std::string_view api(name);
    const bool launches_work = api.rfind("cuLaunch", 0) == 0 || api.rfind("cuMemcpy", 0) == 0 ||
                               api.rfind("cuMemset", 0) == 0 || api.rfind("cuGraphLaunch", 0) == 0;
    if (launches_work) CUPTI_CHECK(cuptiActivityEnableDriverApi(cbid, 1));
  }
}

void disable_runtime_queries() {
  for (const CUpti_CallbackId cbid :
       {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020})
    CUPTI_CHECK(cuptiActivityEnableRuntimeApi(cbid, 0));
}

}  // namespace

ActivityCollector::ActivityCollector(CollectorOptions options) : options_(options) {
  if (g_active != nullptr) throw std::logic_error("only one ActivityCollector may be active");
  if (options_.buffer_bytes < 1024) options_.buffer_bytes = 1024;
  try {
    if (options_.zeroed_buffers)
      for (std::size_t i = 0; i < kReadyBuffers; ++i) {
        auto* buffer = static_cast<std::uint8_t*>(::operator new(options_.buffer_bytes, std::align_val_t(kAlign)));
        std::memset(buffer, 0, options_.buffer_bytes);
        ready_buffers_.push_back(buffer);
      }
    g_active = this;
    if (options_.record_nvtx) route_nvtx_to_cupti();
    if (options_.per_thread_buffers) {
      std::size_t size = sizeof(std::uint8_t);
      std::uint8_t value = *options_.per_thread_buffers ? 1 : 0;
      CUPTI_CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &value));
    }
    if (options_.zeroed_buffers) {
      std::size_t size = sizeof(std::uint8_t);
      std::uint8_t value = 1;
      CUPTI_CHECK(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &value));
    }
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    if (options_.record_runtime) {
      CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
      if (options_.skip_runtime_queries) disable_runtime_queries();  // after the kind, which would override it
    }
    if (options_.driver_api == DriverApiRecords::all) CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    else if (options_.driver_api == DriverApiRecords::launches) enable_work_launching_driver_apis();
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
    if (options_.record_nvtx) CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER));
    if (options_.record_overhead) CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_OVERHEAD));
    if (options_.record_memory) {
      if (enable_optional_kind(CUPTI_ACTIVITY_KIND_MEMORY2, "CUPTI_ACTIVITY_KIND_MEMORY2", "device-memory"))
        enable_optional_kind(CUPTI_ACTIVITY_KIND_MEMORY_POOL, "CUPTI_ACTIVITY_KIND_MEMORY_POOL", "memory-pool");
    }
  } catch (...) {
    // No destructor runs for a constructor that throws: turn off what was turned on, free the buffers.
    shut_down();
    throw;
  }
}

ActivityCollector::~ActivityCollector() { shut_down(); }

void ActivityCollector::shut_down() noexcept {
  // Flush what is left so CUPTI returns every buffer while this object can still take it.
  if (g_active == this) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind kind :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
          CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
          CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_MEMORY2,
          CUPTI_ACTIVITY_KIND_MEMORY_POOL})
      cuptiActivityDisable(kind);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    g_active = nullptr;
  }
  for (std::uint8_t* buffer : ready_buffers_) ::operator delete(buffer, std::align_val_t(kAlign));
  ready_buffers_.clear();
}

bool ActivityCollector::enable_optional_kind(CUpti_ActivityKind kind, const char* name, const char* records) {
  const CUptiResult status = cuptiActivityEnable(kind);
  if (status == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  std::string note = fmt::format("no {} records: cuptiActivityEnable({}) failed: {} (CUptiResult {})", records, name,
                                 text, static_cast<int>(status));
  if (options_.print_notes) {
    // Once per process: a sweep that makes a collector per run should not repeat it.
    static std::once_flag printed;
    std::call_once(printed, [&] { std::fprintf(stderr, "attnprof: %s\n", note.c_str()); });
  }
  enable_notes_.push_back(std::move(note));
  return false;
}

std::vector<std::string> ActivityCollector::notes() const {
  std::vector<std::string> notes = enable_notes_;
  RecordConversion::MemoryRecordCounts counts;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    counts = conversion_.memory_counts;
  }
  for (std::string& note : memory_record_notes(counts)) notes.push_back(std::move(note));
  return notes;
}

std::uint64_t ActivityCollector::now_ns() {
  uint64_t ts = 0;
  CUPTI_CHECK(cuptiGetTimestamp(&ts));
  return ts;
}

std::string ActivityCollector::cupti_version_text() {
  uint32_t version = 0;
  CUPTI_CHECK(cuptiGetVersion(&version));
  return std::to_string(version);
}

void ActivityCollector::push_tag(const trace::SweepTag& tag) {
  CUPTI_CHECK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, encode_tag(tag)));
}

void ActivityCollector::pop_tag() {
  uint64_t last = 0;
  CUPTI_CHECK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last));
}

void ActivityCollector::on_buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *max_records = 0;
  *buffer = nullptr;
  {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    if (options_.max_buffers > 0 && buffers_in_flight_ >= options_.max_buffers) {
      // Declining makes CUPTI drop records; it counts them and drain() reports the count.
      ++buffers_declined_;
      *size = 0;
      return;
    }
    if (!ready_buffers_.empty()) {
      // Zeroed on CUPTI's worker thread when it came back, not here in the launching thread.
      *buffer = ready_buffers_.back();
      ready_buffers_.pop_back();
    }
    ++buffers_in_flight_;  // taken back below if no buffer can be had
  }
  if (*buffer == nullptr) {
    *buffer = static_cast<std::uint8_t*>(::operator new(options_.buffer_bytes, std::align_val_t(kAlign), std::nothrow));
    if (*buffer != nullptr && options_.zeroed_buffers) std::memset(*buffer, 0, options_.buffer_bytes);
  }
  *size = *buffer != nullptr ? options_.buffer_bytes : 0;
  if (*buffer == nullptr) {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    --buffers_in_flight_;
    ++buffers_declined_;
  }
}

bool ActivityCollector::on_buffer_completed(std::uint8_t* buffer, std::size_t valid_size) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    CUpti_Activity* record = nullptr;
    while (valid_size > 0) {
      const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_size, &record);
      if (status != CUPTI_SUCCESS) break;  // CUPTI_ERROR_MAX_LIMIT_REACHED: end of buffer
      convert_record(*record, conversion_);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS)
      conversion_.health.dropped_records += dropped;
  }
  bool room = false;
  {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    if (buffers_in_flight_ > 0) --buffers_in_flight_;
    ++buffers_completed_;
    room = options_.zeroed_buffers && ready_buffers_.size() < kReadyBuffers;
  }
  if (!room) return false;
  std::memset(buffer, 0, options_.buffer_bytes);  // unlocked: a request need not wait for it
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  if (ready_buffers_.size() >= kReadyBuffers) return false;  // another completion filled the pool meanwhile
  ready_buffers_.push_back(buffer);
  return true;
}

trace::ActivityBatch ActivityCollector::drain(bool final_drain) {
  const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const std::uint64_t drained_at = final_drain ? now_ns() : 0;
  trace::ActivityBatch batch;
  std::unordered_map<std::uint32_t, std::uint64_t> external_ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (final_drain) close_open_markers(conversion_, drained_at);
    batch = std::move(conversion_.batch);
    conversion_.batch = {};
    external_ids.swap(conversion_.external_ids);
  }
  // Checked once the records converted so far are taken: on a failed flush they go with this
  // drain's error, not into the next case's batch.
  if (flushed != CUPTI_SUCCESS)
    throw_cupti_error(flushed, "cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)", __FILE__, __LINE__);
  join_launches(batch, external_ids);
  return batch;
}

trace::CaptureHealth ActivityCollector::health() const {
  trace::CaptureHealth h;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    h = conversion_.health;
  }
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  h.buffers_declined = buffers_declined_;
  return h;
}

std::uint64_t ActivityCollector::buffers_completed() const {
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  return buffers_completed_;
}

}  // namespace attnprof
