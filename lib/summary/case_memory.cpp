#include "summary/case_memory.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace attnprof {

bool is_device_memory(const std::string& memory_kind) {
  return memory_kind == "Device" || memory_kind == "Array" || memory_kind.empty();
}

const MemoryRole* CaseMemory::role(std::string_view name) const {
  const auto it = std::find_if(roles.begin(), roles.end(), [&](const MemoryRole& r) { return r.role == name; });
  return it == roles.end() ? nullptr : &*it;
}

std::uint32_t MemoryTimeline::name_id(const std::string& name) {
  auto [it, inserted] = name_ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

void MemoryTimeline::add(const trace::MemoryActivity& m) {
  Record r;
  r.start_ns = m.start_ns;
  r.address = m.address;
  r.bytes = m.bytes;
  r.api = name_id(m.api);
  r.role = name_id(m.role.empty() ? std::string(kUnnamedMemoryRole) : m.role);
  r.operation = m.operation;
  r.phase = m.tag.phase;
  r.device = is_device_memory(m.memory_kind);
  r.carried = m.carried;
  records_.push_back(r);
}

std::optional<CaseMemory> MemoryTimeline::summarize(
    int iterations, std::optional<std::pair<std::uint64_t, std::uint64_t>> timed_window) const {
  if (records_.empty()) return std::nullopt;
  const double iters = iterations > 0 ? iterations : 1;

  // The timed iterations' stretch of time: their GPU span and their own memory records.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> window = timed_window;
  for (const Record& r : records_) {
    if (r.phase != trace::Phase::iteration) continue;
    if (!window) window = {r.start_ns, r.start_ns};
    window->first = std::min(window->first, r.start_ns);
    window->second = std::max(window->second, r.start_ns);
  }

  std::vector<std::size_t> order(records_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return records_[a].start_ns < records_[b].start_ns; });

  struct Live {
    std::uint64_t bytes;
    std::uint32_t role;
  };
  std::unordered_map<std::uint64_t, Live> live;  // by address: an address is reused once released
  std::vector<std::uint64_t> role_live(names_.size(), 0), role_max(names_.size(), 0), role_plan(names_.size(), 0);
  std::vector<std::uint64_t> role_iteration(names_.size(), 0), role_carried(names_.size(), 0);
  std::vector<bool> is_role(names_.size(), false);
  std::uint64_t total = 0;
  std::uint64_t peak = 0;
  std::vector<std::uint64_t> peak_roles(names_.size(), 0);
  bool sampled = false;
  const auto sample = [&] {
    if (sampled && total <= peak) return;
    sampled = true;
    peak = total;
    peak_roles = role_live;
  };

  CaseMemory out;
  struct OpTotals {
    std::uint64_t count = 0, bytes = 0, largest = 0;
    std::map<std::uint64_t, std::uint64_t> by_size;  // bytes of one -> bytes in all
  };
  std::map<std::tuple<int, std::uint32_t, std::uint32_t>, OpTotals> ops;  // (operation, api, role)
  std::uint64_t allocations = 0, allocation_bytes = 0, releases = 0, release_bytes = 0;
  const auto count_in_iteration = [&](const Record& r, std::uint64_t bytes, std::uint32_t role) {
    OpTotals& op = ops[{static_cast<int>(r.operation), r.api, role}];
    op.count += 1;
    op.bytes += bytes;
    op.largest = std::max(op.largest, bytes);
    op.by_size[bytes] += bytes;
    if (r.operation == trace::MemoryOperation::allocation) {
      allocations += 1;
      allocation_bytes += bytes;
      role_iteration[role] += bytes;
    } else {
      releases += 1;
      release_bytes += bytes;
    }
  };
  const auto remove = [&](std::unordered_map<std::uint64_t, Live>::iterator it) {
    total -= it->second.bytes;
    role_live[it->second.role] -= it->second.bytes;
    live.erase(it);
  };

  bool started = false;  // the live bytes at the window's start were sampled
  for (std::size_t i : order) {
    const Record& r = records_[i];
    const bool in_iteration = r.phase == trace::Phase::iteration;
    if (window && !started && r.start_ns >= window->first) {
      sample();  // what the plan and everything before left held
      started = true;
    }
    if (r.operation == trace::MemoryOperation::allocation) {
      if (!r.device) {
        ++out.other_kind_records;
        continue;
      }
      // An address still live was released without a record: the new allocation replaces it.
      if (const auto it = live.find(r.address); it != live.end()) remove(it);
      live[r.address] = {r.bytes, r.role};
      total += r.bytes;
      role_live[r.role] += r.bytes;
      role_max[r.role] = std::max(role_max[r.role], role_live[r.role]);
      is_role[r.role] = true;
      if (r.carried) {
        out.carried_bytes += r.bytes;
        role_carried[r.role] += r.bytes;
      }
      if (r.phase == trace::Phase::plan) {
        out.plan_allocations += 1;
        out.plan_bytes += r.bytes;
        role_plan[r.role] += r.bytes;
      }
      if (in_iteration) count_in_iteration(r, r.bytes, r.role);
    } else {
      const auto it = live.find(r.address);
      if (it == live.end()) {
        if (!r.device) {
          ++out.other_kind_records;
          continue;
        }
        out.unmatched_releases += 1;
        out.unmatched_release_bytes += r.bytes;
        if (in_iteration) count_in_iteration(r, r.bytes, r.role);
        continue;
      }
      const std::uint64_t bytes = it->second.bytes;
      const std::uint32_t role = it->second.role;
      remove(it);
      // A release names no role; the allocation it frees does.
      if (in_iteration) count_in_iteration(r, bytes, names_[r.role] == kUnnamedMemoryRole ? role : r.role);
    }
    if (!window || (r.start_ns >= window->first && r.start_ns <= window->second)) sample();
  }
  if (window && !started) sample();
  if (!sampled) sample();

  out.peak_bytes = peak;
  for (std::uint32_t id = 0; id < names_.size(); ++id) {
    if (!is_role[id]) continue;
    out.roles.push_back({names_[id], peak_roles[id], role_max[id], role_plan[id],
                         static_cast<double>(role_iteration[id]) / iters, role_carried[id]});
  }
  std::stable_sort(out.roles.begin(), out.roles.end(), [](const MemoryRole& a, const MemoryRole& b) {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes > b.peak_bytes;
    if (a.max_bytes != b.max_bytes) return a.max_bytes > b.max_bytes;
    return a.role < b.role;  // not the order records arrived in
  });
  out.allocations_per_iter = static_cast<double>(allocations) / iters;
  out.allocation_bytes_per_iter = static_cast<double>(allocation_bytes) / iters;
  out.releases_per_iter = static_cast<double>(releases) / iters;
  out.release_bytes_per_iter = static_cast<double>(release_bytes) / iters;
  for (const auto& [key, op] : ops) {
    const auto& [operation, api, role] = key;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> sizes(op.by_size.begin(), op.by_size.end());
    std::stable_sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    MemoryOperations& o = out.in_iterations.emplace_back(
        MemoryOperations{trace::to_string(static_cast<trace::MemoryOperation>(operation)), names_[api], names_[role],
                         static_cast<double>(op.count) / iters, static_cast<double>(op.bytes) / iters, op.largest, {}});
    for (std::size_t i = 0; i < sizes.size() && i < kMemoryOperationSizes; ++i) o.sizes.push_back(sizes[i].first);
  }
  std::stable_sort(out.in_iterations.begin(), out.in_iterations.end(),
                   [](const MemoryOperations& a, const MemoryOperations& b) {
                     if (a.operation != b.operation) return a.operation == "allocation";
                     if (a.bytes_per_iter != b.bytes_per_iter) return a.bytes_per_iter > b.bytes_per_iter;
                     return std::tie(a.api, a.role) < std::tie(b.api, b.role);
                   });
  return out;
}

}  // namespace attnprof
