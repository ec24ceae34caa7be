// Cases of a program nobody tagged (a process under `attnprof profile`, a torch.profiler trace):
// each distinct name of a top-level host annotation range (NVTX push/pop, torch.cuda.nvtx.range,
// record_function) is a case, and each occurrence of it one timed iteration. GPU work belongs to
// the range that encloses, on the same host thread, the API call that launched it, or, launched
// from a thread holding none, to the one top-level range of its process open at that moment
// (docs/profile.md). Without any range the whole program is one case with one iteration.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace/model.hpp"

namespace attnprof::trace {

struct AnnotationCase {
  std::string name;
  int occurrences = 0;
};

// Ranges that group others without being a case: torch.profiler's "ProfilerStep#N", and the
// operator ranges of emit_nvtx() ("aten::..."); the ranges inside them can be cases.
bool is_transparent_range(const std::string& name);

// The top-level ranges of host annotations, indexed by (process, thread) for look-ups by time:
// thread ids repeat across the processes of a merged trace.
class AnnotationCaseIndex {
 public:
  // Tags the top-level host ranges among `annotations` with {case, iteration, occurrence}
  // (nested, GPU and transparent ranges are left as they are).
  explicit AnnotationCaseIndex(std::vector<Annotation>& annotations);

  bool empty() const { return cases_.empty(); }
  const std::vector<AnnotationCase>& cases() const { return cases_; }

  // When no thread of the launching API calls ever holds a range (CUPTI names threads of
  // markers and API records differently on some platforms), match by time alone: a launch
  // belongs to the one top-level range open then, on any thread, and to none while several are.
  void match_by_time_only(bool on) { time_only_ = on; }
  bool matching_by_time_only() const { return time_only_; }
  bool has_thread(std::uint32_t process, std::uint32_t thread) const { return by_thread_.count({process, thread}) != 0; }

  // The tag of the top-level range around `ts_ns` on `thread` of `process`; untagged (case -1) if none.
  SweepTag tag_at(std::uint32_t process, std::uint32_t thread, std::uint64_t ts_ns) const;

  // The case of work launched at `ts_ns` by `thread` of `process`: the top-level range around it
  // on that thread; failing that, while exactly one top-level range of that process is open (on
  // any of its threads), that one: work a framework launches from a thread of its own (PyTorch's
  // autograd engine runs loss.backward() on one) belongs to the range the user opened around it.
  // None or several open: untagged, since no single range can claim it.
  SweepTag tag_for_launch(std::uint32_t process, std::uint32_t thread, std::uint64_t ts_ns) const;

 private:
  struct Range {
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    SweepTag tag;
  };
  static SweepTag find(const std::vector<Range>& ranges, std::uint64_t ts_ns);

  // A stretch of a process's time over which the number of open top-level ranges is constant;
  // `tag` is the one open range's when exactly one is.
  struct OpenSpan {
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;  // exclusive
    int open = 0;
    SweepTag tag;
  };
  static std::vector<OpenSpan> open_spans(const std::vector<Range>& ranges);
  // The tag of the one range open at ts_ns among `spans`; untagged when none or several are.
  static SweepTag single_open(const std::vector<OpenSpan>& spans, std::uint64_t ts_ns);

  std::vector<AnnotationCase> cases_;
  using Thread = std::pair<std::uint32_t, std::uint32_t>;  // (process, thread)
  std::map<Thread, std::vector<Range>> by_thread_;           // sorted by start, non-overlapping
  std::map<std::uint32_t, std::vector<OpenSpan>> spans_by_process_;
  std::vector<OpenSpan> all_spans_;  // every thread's ranges as spans: the time-only rule
  bool time_only_ = false;
};

// Where a GPU record was launched from: the host process, thread and time of its API call.
struct LaunchSite {
  std::uint32_t process = 0;
  std::uint32_t thread = 0;
  std::uint64_t start_ns = 0;
};

struct CaseAssignment {
  std::vector<AnnotationCase> cases;  // in order of first occurrence; index = SweepTag::case_index
  bool whole_run = false;             // no ranges: one case ("whole run"), one iteration
  bool matched_by_time_only = false;
};

// The label of the single case of a program without ranges.
inline constexpr const char* kWholeRunCase = "whole run";

// Tags every GPU record of `batch` (and the API call that launched it, and the top-level host
// ranges) with its case and iteration; phase is always `iteration`. GPU work outside every
// range stays untagged and is not counted. Memory allocations and releases are tagged as the
// call that made them, or, without one, as work launched from their thread at their time.
CaseAssignment assign_cases_from_annotations(ActivityBatch& batch);

}  // namespace attnprof::trace
