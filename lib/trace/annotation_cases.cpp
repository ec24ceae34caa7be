#include "trace/annotation_cases.hpp"

#include <algorithm>
#include <set>
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
  std::map<Thread, std::vector<std::size_t>> per_thread;
  for (std::size_t i = 0; i < annotations.size(); ++i) {
    const Annotation& a = annotations[i];
    if (a.on_gpu || is_transparent_range(a.name)) continue;
    per_thread[{a.process, a.thread}].push_back(i);
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
  std::map<std::uint32_t, std::vector<Range>> by_process;
  std::vector<Range> all;
  for (std::size_t i : top_level) {
    Annotation& a = annotations[i];
    auto [it, inserted] = case_of.try_emplace(a.name, static_cast<int>(cases_.size()));
    if (inserted) cases_.push_back({a.name, 0});
    AnnotationCase& c = cases_[static_cast<std::size_t>(it->second)];
    a.tag = {it->second, Phase::iteration, c.occurrences++};
    const Range r{a.start_ns, a.end_ns, a.tag};
    by_thread_[{a.process, a.thread}].push_back(r);
    by_process[a.process].push_back(r);
    all.push_back(r);
  }
  for (const auto& [process, ranges] : by_process) spans_by_process_[process] = open_spans(ranges);
  for (auto& [thread, ranges] : by_thread_)
    std::sort(ranges.begin(), ranges.end(), [](const Range& x, const Range& y) { return x.start_ns < y.start_ns; });
  all_spans_ = open_spans(all);
}

SweepTag AnnotationCaseIndex::find(const std::vector<Range>& ranges, std::uint64_t ts_ns) {
  // The last range starting at or before ts; it encloses ts if it has not ended yet.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), ts_ns,
                             [](std::uint64_t t, const Range& r) { return t < r.start_ns; });
  if (it == ranges.begin()) return {};
  --it;
  return ts_ns <= it->end_ns ? it->tag : SweepTag{};
}

std::vector<AnnotationCaseIndex::OpenSpan> AnnotationCaseIndex::open_spans(const std::vector<Range>& ranges) {
  // Sweep the ranges' edges in time order (a range covers [start, end], so it closes at end + 1),
  // keeping the set of open ranges; between two edges the set is constant.
  struct Edge {
    std::uint64_t ns;
    bool opens;
    std::size_t range;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    edges.push_back({ranges[i].start_ns, true, i});
    edges.push_back({ranges[i].end_ns + 1, false, i});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.ns < y.ns; });
  std::vector<OpenSpan> spans;
  std::set<std::size_t> open;
  for (std::size_t e = 0; e < edges.size();) {
    const std::uint64_t at = edges[e].ns;
    for (; e < edges.size() && edges[e].ns == at; ++e) {
      if (edges[e].opens)
        open.insert(edges[e].range);
      else
        open.erase(edges[e].range);
    }
    if (e == edges.size() || open.empty()) continue;
    OpenSpan span{at, edges[e].ns, static_cast<int>(open.size()), {}};
    if (open.size() == 1) span.tag = ranges[*open.begin()].tag;
    spans.push_back(span);
  }
  return spans;
}

SweepTag AnnotationCaseIndex::single_open(const std::vector<OpenSpan>& spans, std::uint64_t ts_ns) {
  auto span = std::upper_bound(spans.begin(), spans.end(), ts_ns,
                               [](std::uint64_t t, const OpenSpan& s) { return t < s.start_ns; });
  if (span == spans.begin()) return {};
  --span;
  return ts_ns < span->end_ns && span->open == 1 ? span->tag : SweepTag{};
}

SweepTag AnnotationCaseIndex::tag_for_launch(std::uint32_t process, std::uint32_t thread, std::uint64_t ts_ns) const {
  const SweepTag own = tag_at(process, thread, ts_ns);
  if (own.case_index >= 0 || time_only_) return own;
  const auto it = spans_by_process_.find(process);
  if (it == spans_by_process_.end()) return own;
  const SweepTag shared = single_open(it->second, ts_ns);
  return shared.case_index >= 0 ? shared : own;
}

SweepTag AnnotationCaseIndex::tag_at(std::uint32_t process, std::uint32_t thread, std::uint64_t ts_ns) const {
  if (time_only_) return single_open(all_spans_, ts_ns);
  auto it = by_thread_.find({process, thread});
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
    for (MemoryActivity& m : batch.memory) m.tag = whole;
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
      any_match = any_match || index.has_thread(it->second->process, it->second->thread);
    }
  };
  survey(batch.kernels);
  survey(batch.memcpys);
  survey(batch.memsets);
  if (any_launch && !any_match) index.match_by_time_only(true);
  out.matched_by_time_only = index.matching_by_time_only();

  // A call that launches GPU work may be claimed by another thread's range (tag_for_launch);
  // the other calls stay with their own thread's range.
  for (ApiCall& c : batch.api_calls)
    c.tag = c.launches_work ? index.tag_for_launch(c.process, c.thread, c.start_ns) : index.tag_at(c.process, c.thread, c.start_ns);
  auto tag_all = [&](auto& records) {
    for (auto& r : records) {
      auto it = calls.find(r.correlation);
      r.tag = it == calls.end() ? SweepTag{} : it->second->tag;
    }
  };
  tag_all(batch.kernels);
  tag_all(batch.memcpys);
  tag_all(batch.memsets);
  // An allocation takes its call's tag; one without a recorded call (Kineto's "[memory]" events
  // have none) takes the range around it on its own thread, as a launch would.
  for (MemoryActivity& m : batch.memory) {
    auto it = m.correlation != 0 ? calls.find(m.correlation) : calls.end();
    m.tag = it != calls.end() ? it->second->tag : index.tag_for_launch(m.process, m.thread, m.start_ns);
  }
  return out;
}

}  // namespace attnprof::trace
