// Summaries of programs attnprof did not drive: a process under `attnprof profile`, or a trace
// torch.profiler exported. Cases come from the program's NVTX / record_function ranges
// (trace/annotation_cases.hpp); each occurrence of a range is one iteration, timed as the span
// of its GPU work (first start to last end), since no CUDA events bracket it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device_properties.hpp"
#include "summary/case_accumulator.hpp"
#include "summary/provenance.hpp"
#include "summary/summary.hpp"
#include "trace/annotation_cases.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/model.hpp"

namespace attnprof {

// A case that is not an attention problem we know: a zero shape, so no FLOP count and no TFLOP/s.
AttentionProblem unknown_problem();

// Per-case summaries (with findings) of the GPU records of `tagged` whose tags index `cases`
// (phase `iteration`, iteration = occurrence). Records of other phases or no case are ignored.
std::vector<CaseSummary> summarize_program_cases(const std::vector<trace::AnnotationCase>& cases,
                                                 const trace::ActivityBatch& tagged);
// The same from accumulators already fed, one per case (`attnprof report` streams into them).
std::vector<CaseSummary> summarize_program_cases(const std::vector<trace::AnnotationCase>& cases,
                                                 const std::vector<CaseAccumulator>& per_case);

// What the injection knows about the process it ran in.
struct ProgramInfo {
  std::string command;  // the command line, for the summary and the trace's process name
  std::uint32_t pid = 0;
  std::optional<int> rank;  // RANK, for multi-process jobs
  std::optional<int> local_rank;  // LOCAL_RANK: the rank on its host
  std::optional<int> world_size;  // WORLD_SIZE
  std::string driver_version;  // "580.159.04 (CUDA 13.0)"
  std::string cupti_version;
};

// Assigns cases to `batch` from its annotations (whole run without any), projects the
// top-level ranges onto the GPU streams, and builds the run summary. Appends what the reader of
// the summary should know to `notes`.
RunSummary summarize_program(trace::ActivityBatch& batch, const std::vector<DeviceProperties>& devices,
                             const ProgramInfo& info, const trace::CaptureHealth& capture, std::vector<std::string>& notes);

// The trace header of a profiled process: timestamps relative to its first record (so every
// value keeps its nanoseconds), its devices, and a host track named after the command.
trace::TraceHeader program_trace_header(const trace::ActivityBatch& batch, const std::vector<DeviceProperties>& devices,
                                        const ProgramInfo& info);

// The trace's provenance for a profiled process's summary.
Provenance program_provenance(const RunSummary& summary, const ProgramInfo& info, const std::vector<std::string>& notes);

}  // namespace attnprof
