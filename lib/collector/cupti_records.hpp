// CUPTI activity records -> the trace model, as free functions over plain state, so that CPU
// tests can feed them synthetic records (no GPU, no subscription). The collector calls
// convert_record() for each record of a completed buffer and join_launches() at drain().
#pragma once

#include <cupti.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/model.hpp"

namespace attnprof {

// What converting needs to remember from one record to the next.
struct RecordConversion {
  struct MarkerStart {
    std::string name;
    std::uint64_t timestamp = 0;
    std::uint32_t process = 0;
    std::uint32_t thread = 0;
  };

  trace::ActivityBatch batch;                                      // converted since the last drain
  std::unordered_map<std::uint32_t, std::uint64_t> external_ids;   // correlation id -> our sweep tag
  std::unordered_map<std::uint32_t, MarkerStart> open_markers;     // NVTX range id -> its start
  trace::CaptureHealth health;                                     // records seen, invalid timestamps left out

  // Memory records CUPTI gave in a form this build does not know (a newer CUPTI's values), and
  // pool records, which the model has no place for: counted so that the run can say so.
  struct MemoryRecordCounts {
    std::uint64_t unknown_operation = 0;  // neither allocation nor release: not converted
    std::uint64_t unknown_kind = 0;       // converted, memory kind "Unknown"
    std::uint64_t unknown_pool_type = 0;  // converted, pool type "unknown"
    std::uint64_t pool_operations = 0;    // a pool created, destroyed or trimmed (CUPTI_ACTIVITY_KIND_MEMORY_POOL)
  } memory_counts;

  // Names looked up once: demangled kernel names (by CUPTI's string, stable for the process) and
  // API names (CUPTI's table, version suffix removed).
  std::unordered_map<const char*, std::string> demangled;
  std::map<std::pair<bool, std::uint32_t>, std::string> api_names;
};

// Converts one record of any kind the collector enables into `state`: kernels (with their launch
// configuration; occupancy is trace/annotate.hpp's), memcpy, memset, runtime and driver calls,
// external correlation ids, NVTX ranges (start and end records paired), CUPTI overhead, device
// memory allocations and releases (pool records are counted). A record whose timestamps cannot
// be right (start 0, end before start) is counted, not converted. Other kinds are ignored.
void convert_record(const CUpti_Activity& record, RecordConversion& state);

// Ranges still open when a process writes its profile (a signal or exit() inside one) become
// ranges that end at `end_ns`, the moment of that last drain; otherwise they would vanish and
// their work would fall to no case.
void close_open_markers(RecordConversion& state, std::uint64_t end_ns);

// The records of a drain joined: every API call gets its sweep tag from `external_ids`, every
// kernel, memcpy and memset its launching call's name and tag (the call is marked as launching
// work, the start of a flow). Every memory allocation or release gets the name, tag and thread
// of the call with its correlation id; without a recorded call (the driver call under a runtime
// call that was not recorded), its tag straight from `external_ids`.
void join_launches(trace::ActivityBatch& batch, const std::unordered_map<std::uint32_t, std::uint64_t>& external_ids);

// What `counts` has to say, one line each ("3 memory records of an unknown operation type left
// out (a newer CUPTI?)"); nothing when all are zero.
std::vector<std::string> memory_record_notes(const RecordConversion::MemoryRecordCounts& counts);

}  // namespace attnprof
