#include "trace/annotation_cases.hpp"

#include <algorithm>
#include <unordered_map>

namespace attnprof::trace {

bool is_transparent_range(const std::string& name) {
  // torch.profiler's steps, and the per-operator ranges torch.autograd.profiler.emit_nvtx() adds
  // ("aten::matmul, seq = 12"): they hold the user's ranges or sit beside them, never a case.
  return name.rfind("ProfilerStep#", 0) == 0 || name.rfind("aten::", 0) == 0;
}

AnnotationCaseIndex::AnnotationCaseIndex(std::vector<Annotation>& annotations) {
  // Per thread, a range is top-level when it starts at or after the end of the last top-level
  // range: sorted by start (longest first on ties), nested ranges start before that end.
  std::map<std::uint32_t, std::vector<std::size_t>> per_thread;
  for (std::size_t i = 0; i < annotations.size(); ++i) {
    const Annotation& a = annotations[i];
    if (a.on_gpu || is_transparent_range(a.name)) continue;
    per_thread[a.thread].push_back(i);
  }
  std::vector<std::size_t> top_level;
  for (auto& [thread, indices] : per_thread) {
    std::sort(indices.begin(), indices.end(), [&](std::size_t x, std::size_t y) {
      const Annotation& a = annotations[x];
      const Annotation& b = annotations[y];
      if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
      return a.end_ns > b.end_ns;
    });
    bool open = false;
    std::uint64_t open_end = 0;
    for (std::size_t i : indices) {
      const Annotation& a = annotations[i];
      if (open && a.start_ns < open_end) continue;  // nested in the open top-level range
      top_level.push_back(i);
      open = true;
      open_end = a.end_ns;
    }
  }
  // Cases are numbered in order of first occurrence, iterations in order of start.
  std::stable_sort(top_level.begin(), top_level.end(),
                   [&](std::size_t x, std::size_t y) { return annotations[x].start_ns < annotations[y].start_ns; });
  std::unordered_map<std::string, int> case_of;
  for (std::size_t i : top_level) {
    Annotation& a = annotations[i];
    auto [it, inserted] = case_of.try_emplace(a.name, static_cast<int>(cases_.size()));
    if (inserted) cases_.push_back({a.name, 0});
    AnnotationCase& c = cases_[static_cast<std::size_t>(it->second)];
    a.tag = {it->second, Phase::iteration, c.occurrences++};
    const Range r{a.start_ns, a.end_ns, a.tag};
    by_thread_[a.thread].push_back(r);
    all_.push_back(r);
  }
  for (auto& [thread, ranges] : by_thread_)
    std::sort(ranges.begin(), ranges.end(), [](const Range& x, const Range& y) { return x.start_ns < y.start_ns; });
  std::sort(all_.begin(), all_.end(), [](const Range& x, const Range& y) { return x.start_ns < y.start_ns; });
}

SweepTag AnnotationCaseIndex::find(const std::vector<Range>& ranges, std::uint64_t ts_ns) {
  // The last range starting at or before ts; it encloses ts if it has not ended yet.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), ts_ns,
                             [](std::uint64_t t, const Range& r) { return t < r.start_ns; });
  if (it == ranges.begin()) return {};
  --it;
  return ts_ns <= it->end_ns ? it->tag : SweepTag{};
}

SweepTag AnnotationCaseIndex::tag_at(std::uint32_t thread, std::uint64_t ts_ns) const {
  if (time_only_) return find(all_, ts_ns);
  auto it = by_thread_.find(thread);
  return it == by_thread_.end() ? SweepTag{} : find(it->second, ts_ns);
}

CaseAssignment assign_cases_from_annotations(ActivityBatch& batch) {
  CaseAssignment out;
  AnnotationCaseIndex index(batch.annotations);
  out.cases = index.cases();

  if (index.empty()) {
    out.whole_run = true;
    out.cases = {{kWholeRunCase, 1}};
    const SweepTag whole{0, Phase::iteration, 0};
    for (KernelActivity& k : batch.kernels) k.tag = whole;
    for (MemcpyActivity& m : batch.memcpys) m.tag = whole;
    for (MemsetActivity& m : batch.memsets) m.tag = whole;
    for (ApiCall& c : batch.api_calls) c.tag = whole;
    return out;
  }

  std::unordered_map<std::uint32_t, ApiCall*> calls;
  calls.reserve(batch.api_calls.size());
  for (ApiCall& c : batch.api_calls) calls[c.correlation] = &c;

  // Launching threads that never hold a range mean the two thread namings differ: use time alone.
  bool any_launch = false, any_match = false;
  auto survey = [&](const auto& records) {
    for (const auto& r : records) {
      auto it = calls.find(r.correlation);
      if (it == calls.end()) continue;
      any_launch = true;
      any_match = any_match || index.has_thread(it->second->thread);
    }
  };
  survey(batch.kernels);
  survey(batch.memcpys);
  survey(batch.memsets);
  if (any_launch && !any_match) index.match_by_time_only(true);
  out.matched_by_time_only = index.matching_by_time_only();

  for (ApiCall& c : batch.api_calls) c.tag = index.tag_at(c.thread, c.start_ns);
  auto tag_all = [&](auto& records) {
    for (auto& r : records) {
      auto it = calls.find(r.correlation);
      r.tag = it == calls.end() ? SweepTag{} : it->second->tag;
    }
  };
  tag_all(batch.kernels);
  tag_all(batch.memcpys);
  tag_all(batch.memsets);
  return out;
}

}  // namespace attnprof::trace
