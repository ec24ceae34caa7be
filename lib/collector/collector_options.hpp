// What the CUPTI collector records and how it hands CUPTI its buffers: plain options, and the
// ATTNPROF_CUPTI_* environment variables that override them (CPU only, tested without a GPU).
#pragma once

#include <cstddef>
#include <optional>

namespace attnprof {

// Which CUDA driver API calls become records. The runtime makes driver calls of its own for each
// runtime call; recording only the driver calls that launch work (kernels, copies, fills, graph
// launches) keeps every launch a library makes through the driver (cuBLAS, cuDNN) and its flow,
// at a lower cost per launch. `none` records no driver calls: kernels a library launches through
// the driver then have no launch API and no flow (for measuring what the records cost).
enum class DriverApiRecords { all, launches, none };

struct CollectorOptions {
  std::size_t buffer_bytes = 8u << 20;  // host activity buffer handed to CUPTI per request
  std::size_t max_buffers = 256;        // in flight at once; past it requests are declined (records dropped, counted)
  bool record_overhead = true;
  bool record_nvtx = true;
  DriverApiRecords driver_api = DriverApiRecords::all;
  std::optional<bool> per_thread_buffers;  // CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER; unset: CUPTI's default
  bool zeroed_buffers = false;             // hand CUPTI zeroed buffers so it need not zero them in the launching thread
  // Leave out the runtime calls a framework makes around every op that launch nothing:
  // cudaGetDevice, cudaSetDevice, cudaGetLastError, cudaPeekAtLastError, cudaEventCreate(WithFlags),
  // cudaEventDestroy (torch.profiler drops the same ones, cudaPeekAtLastError aside, from its traces).
  bool skip_runtime_queries = false;
  // No runtime API records. CUPTI then records the driver call inside each runtime launch instead
  // (with DriverApiRecords::launches), so kernels keep a launch API and a flow, but runtime calls
  // that launch nothing (synchronizations, allocations) are gone; cheaper per launch
  // (docs/perf/NOTES.md, "profile overhead").
  bool record_runtime = true;
  // Device-memory allocations and releases (CUPTI_ACTIVITY_KIND_MEMORY2) and memory-pool records.
  // A driver that refuses them leaves the collector without them, with a note (notes()).
  bool record_memory = true;
  // Print each of the collector's notes once on stderr as it arises; off for a caller that
  // reports ActivityCollector::notes() itself (the profiled process's side does).
  bool print_notes = true;
};

// `base` with the ATTNPROF_CUPTI_* environment variables applied, for measuring the collector's
// cost in a profiled program: ATTNPROF_CUPTI_DRIVER=all|launches|none, ATTNPROF_CUPTI_OVERHEAD=0|1,
// ATTNPROF_CUPTI_PER_THREAD=0|1, ATTNPROF_CUPTI_ZEROED=0|1, ATTNPROF_CUPTI_BUFFER_BYTES=N,
// ATTNPROF_CUPTI_RUNTIME=all|no-queries|none.
// Throws std::invalid_argument naming a variable with a value it cannot use.
CollectorOptions collector_options_from_environment(CollectorOptions base);

}  // namespace attnprof
