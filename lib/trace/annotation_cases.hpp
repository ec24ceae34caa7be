// Cases of a program nobody tagged (a process under `attnprof profile`, a torch.profiler trace):
// each distinct name of a top-level host annotation range (NVTX push/pop, torch.cuda.nvtx.range,
// record_function) is a case, and each occurrence of it one timed iteration. GPU work belongs to
// the range that encloses, on the same host thread, the API call that launched it. Without any
// range the whole program is one case with one iteration.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
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

// The top-level ranges of host annotations, indexed by thread for look-ups by time.
class AnnotationCaseIndex {
 public:
  // Tags the top-level host ranges among `annotations` with {case, iteration, occurrence}
  // (nested, GPU and transparent ranges are left as they are).
  explicit AnnotationCaseIndex(std::vector<Annotation>& annotations);

  bool empty() const { return cases_.empty(); }
  const std::vector<AnnotationCase>& cases() const { return cases_; }

  // When no thread of the launching API calls ever holds a range (CUPTI names threads of
  // markers and API records differently on some platforms), match by time alone.
  void match_by_time_only(bool on) { time_only_ = on; }
  bool matching_by_time_only() const { return time_only_; }
  bool has_thread(std::uint32_t thread) const { return by_thread_.count(thread) != 0; }

  // The tag of the top-level range around `ts_ns` on `thread`; untagged (case -1) if none.
  SweepTag tag_at(std::uint32_t thread, std::uint64_t ts_ns) const;

 private:
  struct Range {
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    SweepTag tag;
  };
  static SweepTag find(const std::vector<Range>& ranges, std::uint64_t ts_ns);

  std::vector<AnnotationCase> cases_;
  std::map<std::uint32_t, std::vector<Range>> by_thread_;  // sorted by start, non-overlapping
  std::vector<Range> all_;                                   // every thread's, sorted by start
  bool time_only_ = false;
};

// Where a GPU record was launched from: the host thread and time of its API call.
struct LaunchSite {
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
// range stays untagged and is not counted.
CaseAssignment assign_cases_from_annotations(ActivityBatch& batch);

}  // namespace attnprof::trace
