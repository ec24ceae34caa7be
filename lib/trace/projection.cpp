#include "trace/projection.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace attnprof::trace {

bool tag_covers(const SweepTag& range, const SweepTag& record) {
  if (range.case_index < 0 || range.case_index != record.case_index) return false;
  if (range.phase == Phase::none) return true;
  if (range.phase != record.phase) return false;
  return range.iteration < 0 || range.iteration == record.iteration;
}

std::vector<Annotation> project_annotations_to_gpu(const ActivityBatch& batch) {
  std::vector<Annotation> projected;
  for (const Annotation& host : batch.annotations) {
    if (host.on_gpu || host.tag.case_index < 0) continue;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<std::uint64_t, std::uint64_t>> spans;
    auto extend = [&](const auto& records) {
      for (const auto& r : records) {
        if (!tag_covers(host.tag, r.tag)) continue;
        auto [it, inserted] = spans.try_emplace({r.device, r.stream}, r.start_ns, r.end_ns);
        if (!inserted) {
          it->second.first = std::min(it->second.first, r.start_ns);
          it->second.second = std::max(it->second.second, r.end_ns);
        }
      }
    };
    extend(batch.kernels);
    extend(batch.memcpys);
    extend(batch.memsets);
    for (const auto& [where, span] : spans) {
      Annotation gpu = host;
      gpu.on_gpu = true;
      gpu.process = where.first;
      gpu.thread = where.second;
      gpu.start_ns = span.first;
      gpu.end_ns = span.second;
      projected.push_back(std::move(gpu));
    }
  }
  return projected;
}

}  // namespace attnprof::trace
