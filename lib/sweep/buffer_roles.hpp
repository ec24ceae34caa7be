// What a backend calls its device buffers ("scores", "workspace", "q", ...), so the memory records
// CUPTI makes of their allocations (trace::MemoryActivity) can say what each one holds. A buffer
// is named when it is allocated (gpu/device_memory.hpp's DeviceBuffer takes a role); the runner
// takes the names noted during a case and gives them to that case's allocation records, matched
// by address and size, and to their releases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "trace/model.hpp"

namespace attnprof {

struct BufferRole {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::string role;
};

// Notes that the allocation at `address` of `bytes` holds `role` (thread-safe; an empty role is
// not noted).
void note_buffer_role(const void* address, std::size_t bytes, std::string_view role);

// The roles noted since the last call, oldest first; the list starts empty again.
std::vector<BufferRole> take_buffer_roles();

// Gives each allocation record of `batch` without a role the role noted for its address and size
// (the latest such note: an address reused for another buffer of the same size takes the newer
// name), and each release the role of the allocation it frees (the latest allocation at its
// address before it, in time order). Returns how many records got a role.
std::size_t assign_buffer_roles(trace::ActivityBatch& batch, const std::vector<BufferRole>& roles);

// Device memory live across the cases of a run: a case starts holding what the cases before it
// left allocated, since a backend keeps (and only grows) its buffers from one case to the next.
class MemoryLedger {
 public:
  // Adds to `batch` a carried allocation record (MemoryActivity::carried, start_ns 0, tagged with
  // `case_index`) for every allocation live before it, with its role.
  void carry_into(trace::ActivityBatch& batch, int case_index) const;
  // Applies the batch's own allocations and releases (carried records are skipped), in time order.
  // A release of an address the ledger does not hold is ignored.
  void record(const trace::ActivityBatch& batch);
  std::uint64_t live_bytes() const;

 private:
  std::map<std::pair<std::uint32_t, std::uint64_t>, trace::MemoryActivity> live_;  // (device, address)
};

}  // namespace attnprof
