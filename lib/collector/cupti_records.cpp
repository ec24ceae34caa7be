#include "collector/cupti_records.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "collector/sweep_tags.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof {
namespace {

// CUPTI's memory kind by name; an empty view for UNKNOWN and for values this build's CUPTI does not name.
std::string_view known_memory_kind(unsigned kind) {
  namespace name = trace::memory_kind;
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return name::kPageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return name::kPinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return name::kDevice;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return name::kArray;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return name::kManaged;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return name::kDeviceStatic;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return name::kManagedStatic;
    default: return {};
  }
}

std::string memory_kind_name(unsigned kind) {
  const std::string_view known = known_memory_kind(kind);
  return std::string(known.empty() ? trace::memory_kind::kUnknown : known);
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

// The fields every CUPTI GPU record (kernel, memcpy, memset) names alike: the interval, where it
// ran and the correlation id that ties it to its API call.
template <class Record>
void copy_gpu_fields(const Record* r, trace::GpuActivity& g) {
  g.start_ns = r->start;
  g.end_ns = r->end;
  g.device = r->deviceId;
  g.context = r->contextId;
  g.stream = r->streamId;
  g.correlation = r->correlationId;
}

const std::string& demangled(RecordConversion& state, const char* mangled) {
  auto it = state.demangled.find(mangled);
  if (it == state.demangled.end()) it = state.demangled.emplace(mangled, demangle(mangled)).first;
  return it->second;
}

const std::string& api_name(RecordConversion& state, bool driver, std::uint32_t cbid) {
  const auto key = std::make_pair(driver, cbid);
  auto it = state.api_names.find(key);
  if (it == state.api_names.end()) {
    const char* raw = nullptr;
    const CUptiResult status = cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                                                    cbid, &raw);
    std::string name = status == CUPTI_SUCCESS && raw != nullptr
                           ? strip_api_version(raw)
                           : fmt::format("{} API cbid {}", driver ? "driver" : "runtime", cbid);
    it = state.api_names.emplace(key, std::move(name)).first;
  }
  return it->second;
}

// CUPTI's "no context" and "not stream-ordered" ids are 0 in the model, as in the trace.
std::uint32_t id_or_zero(std::uint32_t id, std::uint32_t invalid) { return id == invalid ? 0 : id; }

// An allocation or release; a record of an operation type this build does not know is counted.
void convert_memory(const CUpti_ActivityMemory4& r, RecordConversion& state) {
  trace::MemoryActivity m;
  switch (r.memoryOperationType) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION: m.operation = trace::MemoryOperation::allocation; break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE: m.operation = trace::MemoryOperation::release; break;
    default: ++state.memory_counts.unknown_operation; return;
  }
  if (r.timestamp == 0) {
    ++state.health.invalid_timestamps;
    return;
  }
  m.start_ns = r.timestamp;
  m.address = r.address;
  m.bytes = r.bytes;
  m.memory_kind = memory_kind_name(r.memoryKind);
  if (known_memory_kind(r.memoryKind).empty()) ++state.memory_counts.unknown_kind;
  m.device = r.deviceId;
  m.context = id_or_zero(r.contextId, CUPTI_INVALID_CONTEXT_ID);
  m.stream = id_or_zero(r.streamId, CUPTI_INVALID_STREAM_ID);
  m.process = r.processId;
  m.correlation = r.correlationId;
  switch (r.memoryPoolConfig.memoryPoolType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID: break;  // not from a pool
    case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL: m.pool_type = trace::pool_type::kLocal; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED: m.pool_type = trace::pool_type::kImported; break;
    default:
      m.pool_type = trace::pool_type::kUnknown;
      ++state.memory_counts.unknown_pool_type;
      break;
  }
  if (!m.pool_type.empty()) m.pool_address = r.memoryPoolConfig.address;
  state.batch.memory.push_back(std::move(m));
}

}  // namespace

void convert_record(const CUpti_Activity& record, RecordConversion& state) {
  const void* raw = &record;
  const auto kind = record.kind;
  ++state.health.records;
  auto valid_times = [&](std::uint64_t start, std::uint64_t end) {
    if (start != 0 && end >= start) return true;
    ++state.health.invalid_timestamps;
    return false;
  };
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* r = static_cast<const CUpti_ActivityKernel10*>(raw);
      if (!valid_times(r->start, r->end)) return;
      trace::KernelActivity k;
      copy_gpu_fields(r, k);
      k.name = demangled(state, r->name);
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
      state.batch.kernels.push_back(std::move(k));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* r = static_cast<const CUpti_ActivityMemcpy6*>(raw);
      if (!valid_times(r->start, r->end)) return;
      trace::MemcpyActivity m;
      copy_gpu_fields(r, m);
      m.kind = memcpy_kind(r->copyKind);
      m.src_memory = memory_kind_name(r->srcKind);
      m.dst_memory = memory_kind_name(r->dstKind);
      m.bytes = r->bytes;
      state.batch.memcpys.push_back(std::move(m));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* r = static_cast<const CUpti_ActivityMemset4*>(raw);
      if (!valid_times(r->start, r->end)) return;
      trace::MemsetActivity m;
      copy_gpu_fields(r, m);
      m.bytes = r->bytes;
      m.value = r->value;
      m.memory = memory_kind_name(r->memoryKind);
      state.batch.memsets.push_back(std::move(m));
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* r = static_cast<const CUpti_ActivityAPI*>(raw);
      trace::ApiCall c;
      const bool driver = kind == CUPTI_ACTIVITY_KIND_DRIVER;
      c.domain = driver ? trace::ApiDomain::driver : trace::ApiDomain::runtime;
      c.name = api_name(state, driver, r->cbid);
      c.cbid = r->cbid;
      c.start_ns = r->start;
      c.end_ns = r->end;
      c.process = r->processId;
      c.thread = r->threadId;
      c.correlation = r->correlationId;
      c.return_value = static_cast<int>(r->returnValue);
      state.batch.api_calls.push_back(std::move(c));
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* r = static_cast<const CUpti_ActivityExternalCorrelation*>(raw);
      if (r->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) state.external_ids[r->correlationId] = r->externalId;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto* r = static_cast<const CUpti_ActivityMarker2*>(raw);
      if (r->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        RecordConversion::MarkerStart start;
        start.name = r->name != nullptr ? r->name : "";
        if (r->domain != nullptr && *r->domain != '\0') start.name = std::string(r->domain) + ": " + start.name;
        start.timestamp = r->timestamp;
        start.thread = r->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? r->objectId.pt.threadId : 0;
        // The process, as API records name it: a launch from a thread holding no range is matched
        // to the ranges of its own process (trace/annotation_cases.hpp).
        start.process = r->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || r->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS
                            ? r->objectId.pt.processId
                            : 0;
        state.open_markers[r->id] = std::move(start);
      } else if (r->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = state.open_markers.find(r->id);
        if (it == state.open_markers.end()) return;
        trace::Annotation a;
        a.name = std::move(it->second.name);
        a.start_ns = it->second.timestamp;
        a.end_ns = r->timestamp;
        a.process = it->second.process;
        a.thread = it->second.thread;
        state.open_markers.erase(it);
        state.batch.annotations.push_back(std::move(a));
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      convert_memory(*static_cast<const CUpti_ActivityMemory4*>(raw), state);
      return;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
      // Each allocation record names its pool already; the pool's own life has no place in the model.
      ++state.memory_counts.pool_operations;
      return;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* r = static_cast<const CUpti_ActivityOverhead3*>(raw);
      trace::OverheadActivity o;
      o.kind = overhead_kind_name(r->overheadKind);
      o.start_ns = r->start;
      o.end_ns = r->end;
      o.thread = r->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? r->objectId.pt.threadId : 0;
      std::free(r->overheadData);  // CUPTI hands ownership of the detail struct to the client
      state.batch.overheads.push_back(std::move(o));
      return;
    }
    default:
      return;
  }
}

void join_launches(trace::ActivityBatch& batch, const std::unordered_map<std::uint32_t, std::uint64_t>& external_ids) {
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
  for (trace::MemoryActivity& m : batch.memory) {
    if (m.correlation == 0) continue;  // made outside any API call (context creation, module loading)
    if (auto it = calls.find(m.correlation); it != calls.end()) {
      m.api = it->second->name;
      m.tag = it->second->tag;
      m.thread = it->second->thread;
    } else if (auto ext = external_ids.find(m.correlation); ext != external_ids.end()) {
      m.tag = decode_tag(ext->second);
    }
  }
}

std::vector<std::string> memory_record_notes(const RecordConversion::MemoryRecordCounts& counts) {
  std::vector<std::string> notes;
  if (counts.unknown_operation > 0)
    notes.push_back(fmt::format("{} memory record(s) of an operation type this build's CUPTI does not name were left "
                                "out (neither allocation nor release)",
                                counts.unknown_operation));
  if (counts.unknown_kind > 0)
    notes.push_back(fmt::format("{} memory record(s) of an unknown memory kind were kept as \"{}\"", counts.unknown_kind,
                                trace::memory_kind::kUnknown));
  if (counts.unknown_pool_type > 0)
    notes.push_back(fmt::format("{} memory record(s) from a memory pool of a type this build's CUPTI does not name were "
                                "kept with pool type \"{}\"",
                                counts.unknown_pool_type, trace::pool_type::kUnknown));
  if (counts.pool_operations > 0)
    notes.push_back(fmt::format("{} memory pool operation(s) (created, destroyed, trimmed) were counted, not traced",
                                counts.pool_operations));
  return notes;
}

void close_open_markers(RecordConversion& state, std::uint64_t end_ns) {
  for (auto& [id, start] : state.open_markers) {
    trace::Annotation a;
    a.name = std::move(start.name);
    a.start_ns = start.timestamp;
    a.end_ns = std::max(end_ns, start.timestamp);
    a.process = start.process;
    a.thread = start.thread;
    state.batch.annotations.push_back(std::move(a));
  }
  state.open_markers.clear();
}

}  // namespace attnprof
