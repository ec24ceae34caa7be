#include "summary/program_summary.hpp"

#include <algorithm>
#include <ctime>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/utc_time.hpp"
#include "core/version.hpp"
#include "summary/analysis.hpp"

namespace attnprof {

AttentionProblem unknown_problem() {
  AttentionProblem p;
  p.shape.batch = p.shape.heads = p.shape.seq_q = p.shape.seq_kv = p.shape.head_dim = 0;
  return p;
}

std::vector<CaseSummary> summarize_program_cases(const std::vector<trace::AnnotationCase>& cases,
                                                 const trace::ActivityBatch& tagged) {
  std::vector<CaseAccumulator> per_case(cases.size());
  auto take = [&](const auto& records) {
    for (const auto& r : records) {
      const int c = r.tag.case_index;
      if (c >= 0 && static_cast<std::size_t>(c) < cases.size()) per_case[static_cast<std::size_t>(c)].add(r);
    }
  };
  take(tagged.kernels);
  take(tagged.memcpys);
  take(tagged.memsets);
  take(tagged.memory);
  return summarize_program_cases(cases, per_case);
}

std::vector<CaseSummary> summarize_program_cases(const std::vector<trace::AnnotationCase>& cases,
                                                 const std::vector<CaseAccumulator>& per_case) {
  std::vector<CaseSummary> out;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CaseMeasurements m;
    m.label = cases[i].name;
    m.problem = unknown_problem();
    m.iterations = cases[i].occurrences;
    // Occurrences without GPU work have no span; they still count as iterations.
    if (i < per_case.size()) m.iteration_us = per_case[i].span_us();
    CaseSummary c = i < per_case.size() ? per_case[i].summarize(m) : CaseAccumulator().summarize(m);
    analyze_case(c, nullptr);  // a profiled program states no expectations
    out.push_back(std::move(c));
  }
  return out;
}

RunSummary summarize_program(trace::ActivityBatch& batch, const std::vector<DeviceProperties>& devices,
                             const ProgramInfo& info, const trace::CaptureHealth& capture, std::vector<std::string>& notes) {
  const trace::CaseAssignment assignment = trace::assign_cases_from_annotations(batch);
  if (assignment.whole_run)
    notes.push_back("the program opened no NVTX range: the whole run is one case (\"whole run\") of one iteration");
  if (assignment.matched_by_time_only)
    notes.push_back("no thread that launched GPU work held an NVTX range: work was matched to ranges by time alone");
  prepare_batch(batch, devices);

  DeviceProperties device;
  if (!devices.empty()) {
    device = devices.front();
  } else {
    device = sm90_reference_properties();
    notes.push_back("no device properties were recorded: occupancy is explained for an NVIDIA H200 (sm_90)");
  }

  RunSummary s;
  s.tool_version = kToolVersion;
  s.config_name = "profile";
  s.config_source = info.command;
  s.created_at = utc_now_iso8601();
  s.device = device;
  s.driver_version = info.driver_version;
  s.cupti_version = info.cupti_version;
  s.capture = capture;
  s.cases = summarize_program_cases(assignment.cases, batch);
  analyze_run(s);
  return s;
}

trace::TraceHeader program_trace_header(const trace::ActivityBatch& batch, const std::vector<DeviceProperties>& devices,
                                        const ProgramInfo& info) {
  std::uint64_t base = std::numeric_limits<std::uint64_t>::max();
  auto earliest = [&](const auto& records) {
    for (const auto& r : records)
      if (r.start_ns > 0) base = std::min(base, r.start_ns);
  };
  earliest(batch.kernels);
  earliest(batch.memcpys);
  earliest(batch.memsets);
  earliest(batch.api_calls);
  earliest(batch.annotations);
  earliest(batch.overheads);
  if (base == std::numeric_limits<std::uint64_t>::max()) base = 0;

  trace::TraceHeader header;
  header.base_time_ns = base;
  header.devices = devices;
  header.host_process = info.pid;
  const std::string command = info.command.size() > 120 ? info.command.substr(0, 117) + "..." : info.command;
  header.host_process_name = fmt::format("attnprof profile: {} (pid {})", command, info.pid);
  header.rank = info.rank;
  header.local_rank = info.local_rank;
  header.world_size = info.world_size;
  return header;
}

Provenance program_provenance(const RunSummary& summary, const ProgramInfo& info, const std::vector<std::string>& notes) {
  Provenance p = Provenance::of("profile", summary);
  p.program = info.command;
  p.pid = info.pid;
  p.rank = info.rank;
  p.local_rank = info.local_rank;
  p.world_size = info.world_size;
  p.notes = notes;
  return p;
}

}  // namespace attnprof
