// The in-memory event model: what the collector produces, the writer writes, the reader reads
// back and the summary aggregates. It knows nothing of CUPTI.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/occupancy.hpp"

namespace attnprof::trace {

// Where in the sweep an activity happened. Assigned through CUPTI external correlation ids
// (runs) or NVTX ranges (profiled programs). `metrics` is the one extra forward replayed under
// the range profiler (--metrics): in the trace, never in per-iteration counts or timings.
enum class Phase : std::uint8_t { none, plan, verify, warmup, iteration, metrics };

const char* to_string(Phase phase);
std::optional<Phase> parse_phase(const std::string& text);

struct SweepTag {
  int case_index = -1;  // index into the run's cases, -1 when outside any case
  Phase phase = Phase::none;
  int iteration = -1;   // for Phase::iteration: 0..N-1; for warmup: 0..W-1
};

// What every GPU activity (kernel, memcpy, memset) carries: when and where it ran, the API call
// that launched it (by correlation id) and its place in the sweep.
struct GpuActivity {
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation = 0;
  std::string launch_api;  // "cudaLaunchKernel", "cuLaunchKernelEx", ...
  SweepTag tag;
};

struct KernelActivity : GpuActivity {
  std::string name;  // demangled
  std::array<int, 3> grid{};
  std::array<int, 3> block{};
  std::array<int, 3> cluster{};
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  int local_bytes_per_thread = 0;
  bool shared_optin = false;
  int shared_memory_executed = 0;  // SM shared-memory size the driver configured
  int carveout_percent = -1;       // the shared-memory carveout the launch asked for, -1 for none
  Occupancy occupancy;             // theoretical, from the fields above: trace/annotate.hpp
  std::optional<double> achieved_occupancy_percent;  // from --metrics occupancy (range profiler)
  std::optional<double> dram_throughput_percent;     // from --metrics dram: % of peak DRAM throughput
  std::optional<double> dram_bytes_per_second;       // from --metrics dram
  std::optional<double> tensor_pipe_percent;         // from --metrics tensor: % of active cycles the tensor pipe was busy
};

enum class MemcpyKind : std::uint8_t { unknown, HtoD, DtoH, HtoA, AtoH, AtoA, AtoD, DtoA, DtoD, HtoH, PtoP };
const char* to_string(MemcpyKind kind);
MemcpyKind parse_memcpy_kind(const std::string& text);

struct MemcpyActivity : GpuActivity {
  MemcpyKind kind = MemcpyKind::unknown;
  std::string src_memory;  // "Device", "Pageable", "Pinned", ...
  std::string dst_memory;
  std::uint64_t bytes = 0;
};

struct MemsetActivity : GpuActivity {
  std::uint64_t bytes = 0;
  std::uint32_t value = 0;
  std::string memory;  // "Device", ...
};

// A device-memory allocation or release: CUPTI's memory activity record (CUPTI_ACTIVITY_KIND_MEMORY2),
// or a Kineto "[memory]" event read back. Its case tag is the tag of the API call that made it
// (by correlation id); a release keeps the address and bytes of what it frees.
enum class MemoryOperation : std::uint8_t { allocation, release };
const char* to_string(MemoryOperation operation);  // "allocation", "release"
std::optional<MemoryOperation> parse_memory_operation(const std::string& text);

struct MemoryActivity {
  MemoryOperation operation = MemoryOperation::allocation;
  std::uint64_t start_ns = 0;   // when it happened (CUPTI's timestamp)
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::string memory_kind;      // "Device", "Pinned", "Managed", "Pageable", "Array", "Unknown"
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream = 0;     // a stream-ordered (cudaMallocAsync) operation's stream, else 0
  std::uint32_t process = 0;
  std::uint32_t thread = 0;
  std::uint32_t correlation = 0;
  std::string api;              // the API call that made it, where known ("cudaMalloc", "cuMemFree_v2", ...)
  std::uint64_t pool_address = 0;  // the memory pool a stream-ordered allocation came from (0: none)
  std::string pool_type;           // "local", "imported", or "" outside a pool
  std::string role;             // what the backend calls the buffer ("scores", "workspace", "q", ...), where it names it
  // Not a record of this batch: an allocation an earlier case made and left live (a backend keeps
  // its buffers from case to case), carried into the case's batch by the runner (start_ns 0) so
  // the case's memory counts what it holds. Never written to the trace.
  bool carried = false;
  SweepTag tag;
};

enum class ApiDomain : std::uint8_t { runtime, driver };

// A CUDA runtime or driver API call on a host thread.
struct ApiCall {
  ApiDomain domain = ApiDomain::runtime;
  std::string name;  // "cudaLaunchKernel", version suffix removed
  std::uint32_t cbid = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t process = 0;
  std::uint32_t thread = 0;
  std::uint32_t correlation = 0;
  int return_value = 0;
  bool launches_work = false;  // a kernel launch, memcpy or memset: the start of an ac2g flow
  SweepTag tag;
};

// An NVTX range on a host thread (cat user_annotation), or the same range projected onto the
// GPU stream its work ran on (cat gpu_user_annotation).
struct Annotation {
  std::string name;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  bool on_gpu = false;
  std::uint32_t process = 0;  // host process (on_gpu: device)
  std::uint32_t thread = 0;   // host thread (on_gpu: stream)
  SweepTag tag;
};

// Time CUPTI itself spent (buffer flushes, instrumentation), so nobody mistakes it for the program's.
struct OverheadActivity {
  std::string kind;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t process = 0;
  std::uint32_t thread = 0;
};

using Activity =
    std::variant<KernelActivity, MemcpyActivity, MemsetActivity, ApiCall, Annotation, OverheadActivity, MemoryActivity>;

std::uint64_t start_of(const Activity& activity);

// How complete a capture is: written to summary.json and trace.json, and added up when the
// captures of several processes become one.
struct CaptureHealth {
  std::uint64_t records = 0;
  std::uint64_t dropped_records = 0;     // CUPTI's count of records lost for lack of a buffer
  std::uint64_t buffers_declined = 0;    // buffer requests refused because the buffer limit was reached
  std::uint64_t invalid_timestamps = 0;  // GPU records with start 0 or end < start, left out of the trace

  bool complete() const { return dropped_records == 0 && buffers_declined == 0; }
  CaptureHealth& operator+=(const CaptureHealth& other);
  bool operator==(const CaptureHealth&) const = default;
};

// Everything recorded for a stretch of the run (one case, or a whole profiled program).
struct ActivityBatch {
  std::vector<KernelActivity> kernels;
  std::vector<MemcpyActivity> memcpys;
  std::vector<MemsetActivity> memsets;
  std::vector<ApiCall> api_calls;
  std::vector<Annotation> annotations;
  std::vector<OverheadActivity> overheads;
  std::vector<MemoryActivity> memory;

  bool empty() const;
  std::size_t size() const;
  void append(ActivityBatch&& other);
};

}  // namespace attnprof::trace
