#include "collector/activity_collector.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "collector/cupti_check.hpp"

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

const char* memory_kind_name(unsigned kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "Device static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "Managed static";
    default: return "Unknown";
  }
}

trace::MemcpyKind memcpy_kind(unsigned kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return trace::MemcpyKind::HtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return trace::MemcpyKind::DtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return trace::MemcpyKind::HtoA;
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return trace::MemcpyKind::AtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return trace::MemcpyKind::AtoA;
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return trace::MemcpyKind::AtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return trace::MemcpyKind::DtoA;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return trace::MemcpyKind::DtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return trace::MemcpyKind::HtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return trace::MemcpyKind::PtoP;
    default: return trace::MemcpyKind::unknown;
  }
}

std::string overhead_kind_name(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "CUPTI overhead: driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "CUPTI overhead: buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "CUPTI overhead: instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "CUPTI overhead: resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "CUPTI overhead: module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "CUPTI overhead: lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "CUPTI overhead: command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "CUPTI overhead: activity buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "CUPTI overhead: UVM activity init";
    default: return "CUPTI overhead";
  }
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
  if (options_.zeroed_buffers)
    for (std::size_t i = 0; i < kReadyBuffers; ++i) {
      auto* buffer = static_cast<std::uint8_t*>(::operator new(options_.buffer_bytes, std::align_val_t(kAlign)));
      std::memset(buffer, 0, options_.buffer_bytes);
      ready_buffers_.push_back(buffer);
    }
  g_active = this;
  if (options_.record_nvtx) route_nvtx_to_cupti();
  try {
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
  } catch (...) {
    g_active = nullptr;
    throw;
  }
}

ActivityCollector::~ActivityCollector() {
  // Flush what is left so CUPTI returns every buffer while this object can still take it.
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
        CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_OVERHEAD})
    cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_active = nullptr;
  for (std::uint8_t* buffer : ready_buffers_) ::operator delete(buffer, std::align_val_t(kAlign));
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
      ++health_.records;
      parse_record(record);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) health_.dropped_records += dropped;
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

const std::string& ActivityCollector::demangled(const char* mangled) {
  auto it = demangled_.find(mangled);
  if (it == demangled_.end()) it = demangled_.emplace(mangled, demangle(mangled)).first;
  return it->second;
}

const std::string& ActivityCollector::api_name(bool driver, std::uint32_t cbid) {
  const auto key = std::make_pair(driver, cbid);
  auto it = api_names_.find(key);
  if (it == api_names_.end()) {
    const char* raw = nullptr;
    const CUptiResult status = cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                                                    cbid, &raw);
    std::string name = status == CUPTI_SUCCESS && raw != nullptr
                           ? strip_api_version(raw)
                           : fmt::format("{} API cbid {}", driver ? "driver" : "runtime", cbid);
    it = api_names_.emplace(key, std::move(name)).first;
  }
  return it->second;
}

void ActivityCollector::parse_record(const void* raw) {
  const auto kind = static_cast<const CUpti_Activity*>(raw)->kind;
  auto valid_times = [&](std::uint64_t start, std::uint64_t end) {
    if (start != 0 && end >= start) return true;
    ++health_.invalid_timestamps;
    return false;
  };
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* r = static_cast<const CUpti_ActivityKernel10*>(raw);
      if (!valid_times(r->start, r->end)) return;
      trace::KernelActivity k;
      k.name = demangled(r->name);
      k.start_ns = r->start;
      k.end_ns = r->end;
      k.device = r->deviceId;
      k.context = r->contextId;
      k.stream = r->streamId;
      k.correlation = r->correlationId;
      k.grid = {r->gridX, r->gridY, r->gridZ};
      k.block = {r->blockX, r->blockY, r->blockZ};
      k.cluster = {static_cast<int>(r->clusterX), static_cast<int>(r->clusterY), static_cast<int>(r->clusterZ)};
      k.registers_per_thread = r->registersPerThread;
      k.static_shared_bytes = r->staticSharedMemory;
      k.dynamic_shared_bytes = r->dynamicSharedMemory;
      k.local_bytes_per_thread = static_cast<int>(r->localMemoryPerThread);
      k.shared_optin = r->shmemLimitConfig == CUPTI_FUNC_SHMEM_LIMIT_OPTIN;
      k.shared_memory_executed = static_cast<int>(r->sharedMemoryExecuted);
      k.carveout_percent = r->isSharedMemoryCarveoutRequested ? r->sharedMemoryCarveoutRequested : -1;
      pending_.kernels.push_back(std::move(k));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* r = static_cast<const CUpti_ActivityMemcpy6*>(raw);
      if (!valid_times(r->start, r->end)) return;
      trace::MemcpyActivity m;
      m.kind = memcpy_kind(r->copyKind);
      m.src_memory = memory_kind_name(r->srcKind);
      m.dst_memory = memory_kind_name(r->dstKind);
      m.bytes = r->bytes;
      m.start_ns = r->start;
      m.end_ns = r->end;
      m.device = r->deviceId;
      m.context = r->contextId;
      m.stream = r->streamId;
      m.correlation = r->correlationId;
      pending_.memcpys.push_back(std::move(m));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* r = static_cast<const CUpti_ActivityMemset4*>(raw);
      if (!valid_times(r->start, r->end)) return;
      trace::MemsetActivity m;
      m.bytes = r->bytes;
      m.value = r->value;
      m.memory = memory_kind_name(r->memoryKind);
      m.start_ns = r->start;
      m.end_ns = r->end;
      m.device = r->deviceId;
      m.context = r->contextId;
      m.stream = r->streamId;
      m.correlation = r->correlationId;
      pending_.memsets.push_back(std::move(m));
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* r = static_cast<const CUpti_ActivityAPI*>(raw);
      trace::ApiCall c;
      const bool driver = kind == CUPTI_ACTIVITY_KIND_DRIVER;
      c.domain = driver ? trace::ApiDomain::driver : trace::ApiDomain::runtime;
      c.name = api_name(driver, r->cbid);
      c.cbid = r->cbid;
      c.start_ns = r->start;
      c.end_ns = r->end;
      c.process = r->processId;
      c.thread = r->threadId;
      c.correlation = r->correlationId;
      c.return_value = static_cast<int>(r->returnValue);
      pending_.api_calls.push_back(std::move(c));
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* r = static_cast<const CUpti_ActivityExternalCorrelation*>(raw);
      if (r->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) external_ids_[r->correlationId] = r->externalId;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto* r = static_cast<const CUpti_ActivityMarker2*>(raw);
      if (r->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        MarkerStart start;
        start.name = r->name != nullptr ? r->name : "";
        if (r->domain != nullptr && *r->domain != '\0') start.name = std::string(r->domain) + ": " + start.name;
        start.timestamp = r->timestamp;
        start.thread = r->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? r->objectId.pt.threadId : 0;
        open_markers_[r->id] = std::move(start);
      } else if (r->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = open_markers_.find(r->id);
        if (it == open_markers_.end()) return;
        trace::Annotation a;
        a.name = std::move(it->second.name);
        a.start_ns = it->second.timestamp;
        a.end_ns = r->timestamp;
        a.thread = it->second.thread;
        open_markers_.erase(it);
        pending_.annotations.push_back(std::move(a));
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* r = static_cast<const CUpti_ActivityOverhead3*>(raw);
      trace::OverheadActivity o;
      o.kind = overhead_kind_name(r->overheadKind);
      o.start_ns = r->start;
      o.end_ns = r->end;
      o.thread = r->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? r->objectId.pt.threadId : 0;
      std::free(r->overheadData);  // CUPTI hands ownership of the detail struct to the client
      pending_.overheads.push_back(std::move(o));
      return;
    }
    default:
      return;
  }
}

trace::ActivityBatch ActivityCollector::drain() {
  CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  trace::ActivityBatch batch;
  std::unordered_map<std::uint32_t, std::uint64_t> external_ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch = std::move(pending_);
    pending_ = {};
    external_ids.swap(external_ids_);
  }
  // Join: every API call gets its sweep tag; every GPU record its launching call's name and tag.
  std::unordered_map<std::uint32_t, trace::ApiCall*> calls;
  calls.reserve(batch.api_calls.size());
  for (trace::ApiCall& c : batch.api_calls) {
    if (auto it = external_ids.find(c.correlation); it != external_ids.end()) c.tag = decode_tag(it->second);
    calls[c.correlation] = &c;
  }
  auto join = [&](auto& gpu_records) {
    for (auto& g : gpu_records) {
      auto it = calls.find(g.correlation);
      if (it == calls.end()) continue;
      g.launch_api = it->second->name;
      g.tag = it->second->tag;
      it->second->launches_work = true;
    }
  };
  join(batch.kernels);
  join(batch.memcpys);
  join(batch.memsets);
  return batch;
}

CollectorHealth ActivityCollector::health() const {
  CollectorHealth h;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    h = health_;
  }
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  h.buffers_declined = buffers_declined_;
  h.buffers_completed = buffers_completed_;
  return h;
}

}  // namespace attnprof
