// A case's device memory from its memory records (trace::MemoryActivity), whatever order they
// arrive in: kept small (no strings per record) until the case is summarized, then replayed in
// time order. CaseAccumulator owns one; summary.hpp's CaseMemory is what it gives.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "summary/summary.hpp"
#include "trace/model.hpp"

namespace attnprof {

// Whether a record's memory kind is the device's, the only memory the peak counts: "Device",
// "Array", or "" (a reader that could not tell).
bool is_device_memory(const std::string& memory_kind);

class MemoryTimeline {
 public:
  void add(const trace::MemoryActivity& record);
  bool empty() const { return records_.empty(); }

  // The case's memory. `iterations` divides the per-iteration figures (1 when unknown);
  // `timed_window` is the GPU span of the timed iterations where known (first start, last end):
  // with the iteration records' own times it bounds where the peak is looked for. Absent when no
  // record was added.
  std::optional<CaseMemory> summarize(int iterations,
                                      std::optional<std::pair<std::uint64_t, std::uint64_t>> timed_window) const;

 private:
  struct Record {
    std::uint64_t start_ns = 0;
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
    std::uint32_t api = 0;   // index into names_
    std::uint32_t role = 0;  // index into names_
    trace::MemoryOperation operation = trace::MemoryOperation::allocation;
    trace::Phase phase = trace::Phase::none;
    bool device = true;
    bool carried = false;
  };
  std::uint32_t name_id(const std::string& name);

  std::vector<Record> records_;  // in arrival order: equal times keep it
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
};

}  // namespace attnprof
