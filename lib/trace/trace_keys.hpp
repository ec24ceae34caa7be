// The words of a Chrome trace, spelled once: the keys, categories and phases ChromeTraceWriter
// writes and every reader (chrome_trace_reader, trace_merge, the summary's trace_report) reads.
// Kineto's names where Kineto has one, so Perfetto, chrome://tracing and HTA read ours unchanged.
// Each constant views a string literal, so its data() is also a NUL-terminated C string.
#pragma once

#include <array>
#include <string_view>

namespace attnprof::trace {

// The document's top-level keys, in the order the writer writes them.
namespace document_key {
inline constexpr std::string_view kSchemaVersion = "schemaVersion";
inline constexpr std::string_view kDeviceProperties = "deviceProperties";
inline constexpr std::string_view kDistributedInfo = "distributedInfo";
inline constexpr std::string_view kDisplayTimeUnit = "displayTimeUnit";
inline constexpr std::string_view kBaseTimeNanoseconds = "baseTimeNanoseconds";
inline constexpr std::string_view kTraceEvents = "traceEvents";
inline constexpr std::string_view kTraceName = "traceName";
inline constexpr std::string_view kAttnprof = "attnprof";  // our metadata object (summary/provenance.hpp)
}  // namespace document_key

// One deviceProperties entry (Kineto's names).
namespace device_key {
inline constexpr std::string_view kId = "id";
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kTotalGlobalMem = "totalGlobalMem";
inline constexpr std::string_view kComputeMajor = "computeMajor";
inline constexpr std::string_view kComputeMinor = "computeMinor";
inline constexpr std::string_view kMaxThreadsPerBlock = "maxThreadsPerBlock";
inline constexpr std::string_view kMaxThreadsPerMultiprocessor = "maxThreadsPerMultiprocessor";
inline constexpr std::string_view kMaxBlocksPerMultiprocessor = "maxBlocksPerMultiprocessor";
inline constexpr std::string_view kRegsPerBlock = "regsPerBlock";
inline constexpr std::string_view kRegsPerMultiprocessor = "regsPerMultiprocessor";
inline constexpr std::string_view kWarpSize = "warpSize";
inline constexpr std::string_view kSharedMemPerBlock = "sharedMemPerBlock";
inline constexpr std::string_view kSharedMemPerMultiprocessor = "sharedMemPerMultiprocessor";
inline constexpr std::string_view kSharedMemPerBlockOptin = "sharedMemPerBlockOptin";
inline constexpr std::string_view kReservedSharedMemPerBlock = "reservedSharedMemPerBlock";
inline constexpr std::string_view kNumSms = "numSms";
inline constexpr std::string_view kL2CacheSize = "l2CacheSize";
inline constexpr std::string_view kClockRateKHz = "clockRateKHz";
inline constexpr std::string_view kMemoryClockRateKHz = "memoryClockRateKHz";
inline constexpr std::string_view kMemoryBusWidth = "memoryBusWidth";
}  // namespace device_key

// The distributedInfo object (Kineto's, for multi-process jobs).
namespace distributed_key {
inline constexpr std::string_view kRank = "rank";
inline constexpr std::string_view kLocalRank = "local_rank";
inline constexpr std::string_view kWorldSize = "world_size";
}  // namespace distributed_key

// The members of one element of traceEvents.
namespace event_key {
inline constexpr std::string_view kPh = "ph";
inline constexpr std::string_view kCat = "cat";
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kPid = "pid";
inline constexpr std::string_view kTid = "tid";
inline constexpr std::string_view kTs = "ts";
inline constexpr std::string_view kDur = "dur";
inline constexpr std::string_view kId = "id";
inline constexpr std::string_view kBp = "bp";
inline constexpr std::string_view kScope = "s";  // an instant event's scope
inline constexpr std::string_view kArgs = "args";
}  // namespace event_key

// The values of "ph" the writer writes, and the flow end's "bp".
namespace ph {
inline constexpr std::string_view kComplete = "X";
inline constexpr std::string_view kMetadata = "M";
inline constexpr std::string_view kFlowStart = "s";
inline constexpr std::string_view kFlowEnd = "f";
inline constexpr std::string_view kEnclosingSlice = "e";  // "bp": a flow that ends on the slice around it
inline constexpr std::string_view kInstant = "i";         // Kineto's "[memory]" events
inline constexpr std::string_view kThreadScope = "t";     // "s": an instant event on its thread's track
inline constexpr std::string_view kCounter = "C";         // the "device memory in use" track
}  // namespace ph

// The values of "cat".
namespace category {
inline constexpr std::string_view kKernel = "kernel";
inline constexpr std::string_view kGpuMemcpy = "gpu_memcpy";
inline constexpr std::string_view kGpuMemset = "gpu_memset";
inline constexpr std::string_view kCudaRuntime = "cuda_runtime";
inline constexpr std::string_view kCudaDriver = "cuda_driver";
inline constexpr std::string_view kUserAnnotation = "user_annotation";
inline constexpr std::string_view kGpuUserAnnotation = "gpu_user_annotation";
inline constexpr std::string_view kOverhead = "overhead";
inline constexpr std::string_view kCpuInstantEvent = "cpu_instant_event";  // Kineto's, of its "[memory]" events
inline constexpr std::string_view kFlow = "ac2g";  // a launch joined to its GPU work; also the flow's name
}  // namespace category

// Metadata ("M") events: what they name, and their one arg.
namespace metadata {
inline constexpr std::string_view kProcessName = "process_name";
inline constexpr std::string_view kProcessSortIndex = "process_sort_index";
inline constexpr std::string_view kThreadName = "thread_name";
inline constexpr std::string_view kThreadSortIndex = "thread_sort_index";
inline constexpr std::string_view kProcessLabels = "process_labels";  // Kineto's ("GPU 0"); we write none
inline constexpr std::string_view kNameArg = "name";
inline constexpr std::string_view kSortIndexArg = "sort_index";
inline constexpr std::string_view kLabelsArg = "labels";  // of process_labels
}  // namespace metadata

// The args of the events. Derived facts (blocks and warps per SM, occupancy, bandwidth) are
// written for people and tools; readers recompute them from the resources (trace/annotate.hpp).
namespace arg {
// Where a GPU event ran, and the API call that launched it (every GPU event).
inline constexpr std::string_view kDevice = "device";
inline constexpr std::string_view kContext = "context";
inline constexpr std::string_view kStream = "stream";
inline constexpr std::string_view kCorrelation = "correlation";
inline constexpr std::string_view kLaunchApi = "launch api";
// A kernel's launch configuration and what follows from it.
inline constexpr std::string_view kRegistersPerThread = "registers per thread";
inline constexpr std::string_view kSharedMemory = "shared memory";  // static + dynamic (Kineto's)
inline constexpr std::string_view kStaticSharedMemory = "static shared memory";
inline constexpr std::string_view kDynamicSharedMemory = "dynamic shared memory";
inline constexpr std::string_view kLocalMemoryPerThread = "local memory per thread";
inline constexpr std::string_view kBlocksPerSm = "blocks per SM";
inline constexpr std::string_view kWarpsPerSm = "warps per SM";
inline constexpr std::string_view kGrid = "grid";
inline constexpr std::string_view kBlock = "block";
inline constexpr std::string_view kCluster = "cluster";
inline constexpr std::string_view kSharedMemoryConfig = "shared memory config";
inline constexpr std::string_view kSharedMemoryCarveout = "shared memory carveout %";
inline constexpr std::string_view kEstimatedAchievedOccupancy = "est. achieved occupancy %";  // Kineto's estimate
inline constexpr std::string_view kTheoreticalOccupancy = "theoretical occupancy %";
inline constexpr std::string_view kOccupancyLimiter = "occupancy limiter";
inline constexpr std::string_view kOccupancy = "occupancy";  // an object: occupancy_key below
// --metrics: measured by CUPTI's range profiler.
inline constexpr std::string_view kAchievedOccupancy = "achieved occupancy %";
inline constexpr std::string_view kDramThroughput = "dram throughput %";
inline constexpr std::string_view kDramBandwidth = "dram bandwidth (GB/s)";
inline constexpr std::string_view kTensorPipeActive = "tensor pipe active %";
// Copies and fills.
inline constexpr std::string_view kBytes = "bytes";
inline constexpr std::string_view kMemoryBandwidth = "memory bandwidth (GB/s)";
inline constexpr std::string_view kCopyKind = "copy kind";
inline constexpr std::string_view kValue = "value";
// CUDA API calls.
inline constexpr std::string_view kCbid = "cbid";
inline constexpr std::string_view kReturnValue = "return value";
// The sweep: which case, and where in it.
inline constexpr std::string_view kBackend = "backend";
inline constexpr std::string_view kCase = "case";
inline constexpr std::string_view kCaseIndex = "case index";
inline constexpr std::string_view kPhase = "phase";
inline constexpr std::string_view kIteration = "iteration";
// Annotations and CUPTI's overhead.
inline constexpr std::string_view kNvtx = "nvtx";
inline constexpr std::string_view kSource = "source";
// A "[memory]" event: Kineto's args (what torch.profiler(profile_memory=True) writes), then ours.
inline constexpr std::string_view kDeviceType = "Device Type";  // kineto_device_type below
inline constexpr std::string_view kDeviceId = "Device Id";
inline constexpr std::string_view kAddr = "Addr";
inline constexpr std::string_view kMemoryBytes = "Bytes";  // negative for a release
inline constexpr std::string_view kTotalAllocated = "Total Allocated";
inline constexpr std::string_view kTotalReserved = "Total Reserved";
inline constexpr std::string_view kOperation = "operation";  // "allocation" or "release"
inline constexpr std::string_view kMemoryKind = "memory kind";
inline constexpr std::string_view kApi = "api";  // the CUDA call that allocated or released
inline constexpr std::string_view kPoolAddress = "pool address";
inline constexpr std::string_view kPoolType = "pool type";
inline constexpr std::string_view kRole = "role";
}  // namespace arg

// "Device Type" of a "[memory]" event: c10::DeviceType's values, as Kineto writes them.
namespace kineto_device_type {
inline constexpr int kCpu = 0;
inline constexpr int kCuda = 1;
}  // namespace kineto_device_type

// Where memory lives, as CUPTI's memory kinds are named in memcpy, memset and memory events.
namespace memory_kind {
inline constexpr std::string_view kPageable = "Pageable";
inline constexpr std::string_view kPinned = "Pinned";
inline constexpr std::string_view kDevice = "Device";
inline constexpr std::string_view kArray = "Array";
inline constexpr std::string_view kManaged = "Managed";
inline constexpr std::string_view kDeviceStatic = "Device static";
inline constexpr std::string_view kManagedStatic = "Managed static";
inline constexpr std::string_view kUnknown = "Unknown";
}  // namespace memory_kind

// Host memory (pageable or pinned) is not device memory: written with Kineto's CPU device type,
// and left out of the "device memory in use" track.
constexpr bool is_host_memory(std::string_view kind) {
  return kind == memory_kind::kPageable || kind == memory_kind::kPinned;
}

// The values of a memory event's "pool type".
namespace pool_type {
inline constexpr std::string_view kLocal = "local";
inline constexpr std::string_view kImported = "imported";
inline constexpr std::string_view kUnknown = "unknown";  // a value this build's CUPTI does not name
}  // namespace pool_type

// The members of args.occupancy (cudaOccupancy's names).
namespace occupancy_key {
inline constexpr std::string_view kActiveBlocksPerMultiprocessor = "activeBlocksPerMultiprocessor";
inline constexpr std::string_view kBlockLimitRegs = "blockLimitRegs";
inline constexpr std::string_view kBlockLimitSharedMem = "blockLimitSharedMem";
inline constexpr std::string_view kBlockLimitWarps = "blockLimitWarps";
inline constexpr std::string_view kBlockLimitBlocks = "blockLimitBlocks";
}  // namespace occupancy_key

// How the names of copies and of GPU processes are made, for readers that take them apart:
// "Memcpy DtoD (Device -> Device)", "GPU 0: NVIDIA H200".
namespace event_name {
inline constexpr std::string_view kMemcpyPrefix = "Memcpy ";
inline constexpr std::string_view kMemcpyArrow = " -> ";
inline constexpr std::string_view kGpuProcessPrefix = "GPU ";
inline constexpr std::string_view kMemory = "[memory]";                        // Kineto's allocation events
inline constexpr std::string_view kDeviceMemoryInUse = "device memory in use";  // our counter track
}  // namespace event_name

// Not a trace: what the reader recognises of a summary.json, the file most often given instead
// (summary.cpp writes and checks the same two words).
namespace summary_document {
inline constexpr std::string_view kSchemaKey = "schema";
inline constexpr std::string_view kSchema = "attnprof-summary";
}  // namespace summary_document

// ---- The tables: every word above that the writer writes, by where it goes. ----

inline constexpr std::array kDocumentKeys = {
    document_key::kSchemaVersion, document_key::kDeviceProperties, document_key::kDistributedInfo,
    document_key::kDisplayTimeUnit, document_key::kBaseTimeNanoseconds, document_key::kTraceEvents,
    document_key::kTraceName, document_key::kAttnprof,
};

inline constexpr std::array kDeviceKeys = {
    device_key::kId, device_key::kName, device_key::kTotalGlobalMem, device_key::kComputeMajor,
    device_key::kComputeMinor, device_key::kMaxThreadsPerBlock, device_key::kMaxThreadsPerMultiprocessor,
    device_key::kMaxBlocksPerMultiprocessor, device_key::kRegsPerBlock, device_key::kRegsPerMultiprocessor,
    device_key::kWarpSize, device_key::kSharedMemPerBlock, device_key::kSharedMemPerMultiprocessor,
    device_key::kSharedMemPerBlockOptin, device_key::kReservedSharedMemPerBlock, device_key::kNumSms,
    device_key::kL2CacheSize, device_key::kClockRateKHz, device_key::kMemoryClockRateKHz,
    device_key::kMemoryBusWidth,
};

inline constexpr std::array kDistributedKeys = {distributed_key::kRank, distributed_key::kLocalRank,
                                                distributed_key::kWorldSize};

inline constexpr std::array kEventKeys = {
    event_key::kPh,  event_key::kCat, event_key::kName, event_key::kPid, event_key::kTid,
    event_key::kTs,  event_key::kDur, event_key::kId,   event_key::kBp,  event_key::kScope,
    event_key::kArgs,
};

inline constexpr std::array kCategories = {
    category::kKernel,         category::kGpuMemcpy,        category::kGpuMemset,
    category::kCudaRuntime,    category::kCudaDriver,       category::kUserAnnotation,
    category::kGpuUserAnnotation, category::kOverhead,      category::kCpuInstantEvent,
    category::kFlow,
};

inline constexpr std::array kMetadataNames = {metadata::kProcessName, metadata::kProcessSortIndex,
                                              metadata::kThreadName, metadata::kThreadSortIndex};

// An arg key, and whether read_chrome_trace keeps it (reads_arg()): the rest are skipped unread.
struct ArgKey {
  std::string_view name;
  bool read_back;
};

// Every arg the writer writes, metadata events' included.
inline constexpr std::array kArgKeys = {
    ArgKey{arg::kDevice, true},
    ArgKey{arg::kContext, true},
    ArgKey{arg::kStream, true},
    ArgKey{arg::kCorrelation, true},
    ArgKey{arg::kLaunchApi, true},
    ArgKey{arg::kRegistersPerThread, true},
    ArgKey{arg::kSharedMemory, true},
    ArgKey{arg::kStaticSharedMemory, true},
    ArgKey{arg::kDynamicSharedMemory, true},
    ArgKey{arg::kLocalMemoryPerThread, true},
    ArgKey{arg::kBlocksPerSm, false},
    ArgKey{arg::kWarpsPerSm, false},
    ArgKey{arg::kGrid, true},
    ArgKey{arg::kBlock, true},
    ArgKey{arg::kCluster, true},
    ArgKey{arg::kSharedMemoryConfig, true},
    ArgKey{arg::kSharedMemoryCarveout, true},
    ArgKey{arg::kEstimatedAchievedOccupancy, false},
    ArgKey{arg::kTheoreticalOccupancy, false},
    ArgKey{arg::kOccupancyLimiter, false},
    ArgKey{arg::kOccupancy, false},
    ArgKey{arg::kAchievedOccupancy, true},
    ArgKey{arg::kDramThroughput, true},
    ArgKey{arg::kDramBandwidth, true},
    ArgKey{arg::kTensorPipeActive, true},
    ArgKey{arg::kBytes, true},
    ArgKey{arg::kMemoryBandwidth, false},
    ArgKey{arg::kCopyKind, true},
    ArgKey{arg::kValue, true},
    ArgKey{arg::kCbid, true},
    ArgKey{arg::kReturnValue, true},
    ArgKey{arg::kBackend, true},
    ArgKey{arg::kCase, true},
    ArgKey{arg::kCaseIndex, true},
    ArgKey{arg::kPhase, true},
    ArgKey{arg::kIteration, true},
    ArgKey{arg::kNvtx, false},
    ArgKey{arg::kSource, false},
    ArgKey{arg::kDeviceType, true},
    ArgKey{arg::kDeviceId, true},
    ArgKey{arg::kAddr, true},
    ArgKey{arg::kMemoryBytes, true},
    ArgKey{arg::kTotalAllocated, false},  // derived: the writer's running total
    ArgKey{arg::kTotalReserved, false},
    ArgKey{arg::kOperation, true},
    ArgKey{arg::kMemoryKind, true},
    ArgKey{arg::kApi, true},
    ArgKey{arg::kPoolAddress, true},
    ArgKey{arg::kPoolType, true},
    ArgKey{arg::kRole, true},
    ArgKey{metadata::kNameArg, true},
    ArgKey{metadata::kSortIndexArg, false},
};

inline constexpr std::array kOccupancyKeys = {
    occupancy_key::kActiveBlocksPerMultiprocessor, occupancy_key::kBlockLimitRegs,
    occupancy_key::kBlockLimitSharedMem, occupancy_key::kBlockLimitWarps, occupancy_key::kBlockLimitBlocks,
};

}  // namespace attnprof::trace
