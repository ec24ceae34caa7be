// Cases from annotation ranges: top-level ranges per thread, nesting, transparent profiler
// steps, iterations in order of start, GPU work joined through its launching call, and the
// fallbacks (no ranges: the whole run; launching threads never hold a range: by time alone).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trace/annotation_cases.hpp"

namespace attnprof::trace {
namespace {

Annotation range(const std::string& name, std::uint64_t start, std::uint64_t end, std::uint32_t thread = 1) {
  Annotation a;
  a.name = name;
  a.start_ns = start;
  a.end_ns = end;
  a.thread = thread;
  return a;
}

void launch(ActivityBatch& b, std::uint32_t correlation, std::uint64_t at, std::uint32_t thread = 1) {
  ApiCall c;
  c.name = "cudaLaunchKernel";
  c.correlation = correlation;
  c.start_ns = at;
  c.end_ns = at + 5;
  c.thread = thread;
  c.launches_work = true;
  b.api_calls.push_back(c);
  KernelActivity k;
  k.name = fmt::format("k{}", correlation);
  k.correlation = correlation;
  k.start_ns = at + 1000;
  k.end_ns = at + 2000;
  b.kernels.push_back(k);
}

TEST(AnnotationCases, TopLevelRangesAreCasesAndOccurrencesIterations) {
  std::vector<Annotation> ranges = {range("b", 300, 400), range("a", 100, 200), range("inner", 110, 120),
                                    range("a", 500, 600), range("ProfilerStep#0", 0, 1000),
                                    range("b", 150, 350, 2), range("aten::matmul, seq = 3", 480, 700)};
  AnnotationCaseIndex index(ranges);
  ASSERT_EQ(index.cases().size(), 2u);
  EXPECT_EQ(index.cases()[0].name, "a");
  EXPECT_EQ(index.cases()[0].occurrences, 2);
  EXPECT_EQ(index.cases()[1].name, "b");
  EXPECT_EQ(index.cases()[1].occurrences, 2);  // one on each thread

  EXPECT_EQ(ranges[1].tag.case_index, 0);
  EXPECT_EQ(ranges[1].tag.iteration, 0);
  EXPECT_EQ(ranges[3].tag.iteration, 1);
  EXPECT_EQ(ranges[2].tag.case_index, -1);  // nested
  EXPECT_EQ(ranges[4].tag.case_index, -1);  // transparent
  EXPECT_EQ(ranges[5].tag.iteration, 0);    // thread 2's "b" starts first
  EXPECT_EQ(ranges[0].tag.iteration, 1);
  EXPECT_EQ(ranges[6].tag.case_index, -1);  // emit_nvtx's operator range: transparent too

  EXPECT_EQ(index.tag_at(0, 1, 115).case_index, 0);
  EXPECT_EQ(index.tag_at(0, 1, 250).case_index, -1);
  EXPECT_EQ(index.tag_at(0, 1, 350).case_index, 1);
  EXPECT_EQ(index.tag_at(0, 2, 115).case_index, -1);  // thread 2 holds no "a"
  EXPECT_EQ(index.tag_at(0, 2, 200).case_index, 1);
  EXPECT_EQ(index.tag_at(0, 3, 115).case_index, -1);
}

TEST(AnnotationCases, GpuWorkBelongsToTheRangeAroundItsLaunch) {
  ActivityBatch b;
  b.annotations = {range("step", 100, 200), range("step", 300, 400)};
  launch(b, 1, 50);   // before: untagged
  launch(b, 2, 150);  // step 0 (the kernel itself runs at 1150, long after the range)
  launch(b, 3, 350);  // step 1
  launch(b, 4, 360);
  const CaseAssignment a = assign_cases_from_annotations(b);
  EXPECT_FALSE(a.whole_run);
  EXPECT_FALSE(a.matched_by_time_only);
  ASSERT_EQ(a.cases.size(), 1u);
  EXPECT_EQ(b.kernels[0].tag.case_index, -1);
  EXPECT_EQ(b.kernels[1].tag.case_index, 0);
  EXPECT_EQ(b.kernels[1].tag.phase, Phase::iteration);
  EXPECT_EQ(b.kernels[1].tag.iteration, 0);
  EXPECT_EQ(b.kernels[2].tag.iteration, 1);
  EXPECT_EQ(b.kernels[3].tag.iteration, 1);
  EXPECT_EQ(b.api_calls[1].tag.iteration, 0);
}

// PyTorch runs loss.backward() on its autograd thread, where no range is open: while exactly one
// top-level range of the process is open, that thread's launches belong to it.
TEST(AnnotationCases, LaunchesFromAThreadWithoutARangeBelongToTheOneOpenRange) {
  ActivityBatch b;
  b.annotations = {range("train step", 100, 200, 1), range("train step", 300, 400, 1), range("loader", 500, 700, 3),
                   range("other", 600, 800, 4)};
  launch(b, 1, 150, 1);  // the forward, on the range's own thread
  launch(b, 2, 180, 7);  // the backward, on the autograd thread: step 0
  launch(b, 3, 390, 7);  // step 1
  launch(b, 4, 250, 7);  // between the steps: no range open, untagged
  launch(b, 5, 650, 7);  // two ranges open (loader, other): ambiguous, untagged
  launch(b, 6, 550, 7);  // only loader open
  launch(b, 7, 150, 7);
  b.api_calls[6].process = 2;  // another process: its own ranges only (it has none)
  ApiCall sync;  // a call that launches nothing stays with its own thread
  sync.name = "cudaStreamSynchronize";
  sync.start_ns = 160;
  sync.end_ns = 170;
  sync.thread = 7;
  b.api_calls.push_back(sync);
  const CaseAssignment a = assign_cases_from_annotations(b);
  EXPECT_FALSE(a.matched_by_time_only);
  ASSERT_EQ(a.cases.size(), 3u);
  EXPECT_EQ(b.kernels[0].tag.case_index, 0);
  EXPECT_EQ(b.kernels[1].tag.case_index, 0);
  EXPECT_EQ(b.kernels[1].tag.iteration, 0);
  EXPECT_EQ(b.kernels[2].tag.case_index, 0);
  EXPECT_EQ(b.kernels[2].tag.iteration, 1);
  EXPECT_EQ(b.kernels[3].tag.case_index, -1);
  EXPECT_EQ(b.kernels[4].tag.case_index, -1);
  EXPECT_EQ(b.kernels[5].tag.case_index, 1);
  EXPECT_EQ(b.kernels[6].tag.case_index, -1);
  EXPECT_EQ(b.api_calls.back().tag.case_index, -1);
  // The range's edges are inclusive, as for its own thread.
  ActivityBatch edge;
  edge.annotations = {range("step", 100, 200, 1)};
  launch(edge, 1, 200, 7);
  launch(edge, 2, 201, 7);
  assign_cases_from_annotations(edge);
  EXPECT_EQ(edge.kernels[0].tag.case_index, 0);
  EXPECT_EQ(edge.kernels[1].tag.case_index, -1);
}

// A merged trace holds several processes whose thread ids may be the same: each keeps its ranges.
TEST(AnnotationCases, ThreadsOfTheSameIdInTwoProcessesKeepTheirOwnRanges) {
  ActivityBatch b;
  b.annotations = {range("rank 0 step", 100, 200, 1), range("rank 1 step", 150, 250, 1)};
  b.annotations[0].process = 10;
  b.annotations[1].process = 20;
  launch(b, 1, 160, 1);
  launch(b, 2, 170, 1);
  b.api_calls[0].process = 10;
  b.api_calls[1].process = 20;
  const CaseAssignment a = assign_cases_from_annotations(b);
  EXPECT_FALSE(a.matched_by_time_only);
  ASSERT_EQ(a.cases.size(), 2u);  // neither range is nested in the other
  EXPECT_EQ(b.kernels[0].tag.case_index, 0);
  EXPECT_EQ(b.kernels[1].tag.case_index, 1);
}

TEST(AnnotationCases, WithoutRangesTheWholeRunIsOneCase) {
  ActivityBatch b;
  launch(b, 1, 50);
  launch(b, 2, 150);
  const CaseAssignment a = assign_cases_from_annotations(b);
  EXPECT_TRUE(a.whole_run);
  ASSERT_EQ(a.cases.size(), 1u);
  EXPECT_EQ(a.cases[0].name, kWholeRunCase);
  for (const KernelActivity& k : b.kernels) {
    EXPECT_EQ(k.tag.case_index, 0);
    EXPECT_EQ(k.tag.iteration, 0);
  }
}

TEST(AnnotationCases, ThreadNamingsThatNeverMeetFallBackToTime) {
  ActivityBatch b;
  b.annotations = {range("step", 100, 200, 999)};
  launch(b, 1, 150, 1);
  const CaseAssignment a = assign_cases_from_annotations(b);
  EXPECT_TRUE(a.matched_by_time_only);
  EXPECT_EQ(b.kernels[0].tag.case_index, 0);
}

// Matching by time keeps the documented rule: the one range open then, none while several are.
TEST(AnnotationCases, ByTimeALaunchBelongsToTheOneOpenRangeAndToNoneWhileSeveralAre) {
  ActivityBatch b;
  b.annotations = {range("a", 100, 1000, 1), range("b", 200, 300, 2)};
  launch(b, 1, 500, 9);  // only a is open: a
  launch(b, 2, 250, 9);  // a and b are open: neither can claim it
  const CaseAssignment a = assign_cases_from_annotations(b);
  ASSERT_TRUE(a.matched_by_time_only);
  EXPECT_EQ(b.kernels[0].tag.case_index, 0);
  EXPECT_EQ(b.kernels[1].tag.case_index, -1);
}

}  // namespace
}  // namespace attnprof::trace
