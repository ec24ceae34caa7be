#include "sweep/buffer_roles.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>

namespace attnprof {
namespace {

struct NotedRoles {
  std::mutex mutex;
  std::vector<BufferRole> roles;
};

NotedRoles& noted() {
  static NotedRoles instance;
  return instance;
}

}  // namespace

void note_buffer_role(const void* address, std::size_t bytes, std::string_view role) {
  if (address == nullptr || role.empty()) return;
  NotedRoles& n = noted();
  const std::lock_guard<std::mutex> lock(n.mutex);
  n.roles.push_back({reinterpret_cast<std::uint64_t>(address), bytes, std::string(role)});
}

std::vector<BufferRole> take_buffer_roles() {
  NotedRoles& n = noted();
  const std::lock_guard<std::mutex> lock(n.mutex);
  return std::exchange(n.roles, {});
}

std::size_t assign_buffer_roles(trace::ActivityBatch& batch, const std::vector<BufferRole>& roles) {
  // The latest note for each (address, bytes).
  std::map<std::pair<std::uint64_t, std::uint64_t>, const std::string*> by_allocation;
  for (const BufferRole& r : roles) by_allocation[{r.address, r.bytes}] = &r.role;

  // Records in time order, so a release finds the allocation it frees.
  std::vector<std::size_t> order(batch.memory.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return batch.memory[a].start_ns < batch.memory[b].start_ns;
  });
  std::map<std::uint64_t, std::string> live;  // address -> the role of the allocation there
  std::size_t assigned = 0;
  for (std::size_t i : order) {
    trace::MemoryActivity& m = batch.memory[i];
    if (m.operation == trace::MemoryOperation::allocation) {
      if (m.role.empty()) {
        const auto noted_role = by_allocation.find({m.address, m.bytes});
        if (noted_role != by_allocation.end()) {
          m.role = *noted_role->second;
          ++assigned;
        }
      }
      live[m.address] = m.role;
    } else {
      const auto allocation = live.find(m.address);
      if (allocation == live.end()) continue;  // allocated before this batch: its role is unknown here
      if (m.role.empty() && !allocation->second.empty()) {
        m.role = allocation->second;
        ++assigned;
      }
      live.erase(allocation);
    }
  }
  return assigned;
}

void MemoryLedger::carry_into(trace::ActivityBatch& batch, int case_index) const {
  for (const auto& [key, allocation] : live_) {
    trace::MemoryActivity carried = allocation;
    carried.carried = true;
    carried.start_ns = 0;
    carried.tag = {case_index, trace::Phase::none, -1};
    batch.memory.push_back(std::move(carried));
  }
}

void MemoryLedger::record(const trace::ActivityBatch& batch) {
  std::vector<const trace::MemoryActivity*> own;
  for (const trace::MemoryActivity& m : batch.memory)
    if (!m.carried) own.push_back(&m);
  std::stable_sort(own.begin(), own.end(), [](const auto* a, const auto* b) { return a->start_ns < b->start_ns; });
  for (const trace::MemoryActivity* m : own) {
    const std::pair<std::uint32_t, std::uint64_t> key{m->device, m->address};
    if (m->operation == trace::MemoryOperation::allocation) live_[key] = *m;
    else live_.erase(key);
  }
}

std::uint64_t MemoryLedger::live_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& [key, allocation] : live_) bytes += allocation.bytes;
  return bytes;
}

}  // namespace attnprof
