// `attnprof merge`: the per-process traces of a job (`attnprof profile -- torchrun ...`, or any
// attnprof runs) as one trace with a process track per rank and GPU, and one summary.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "summary/render.hpp"
#include "summary/summary.hpp"
#include "trace/trace_merge.hpp"

namespace attnprof {

struct MergeRequest {
  std::vector<std::string> inputs;
  std::string out_path;
  std::string summary_path;  // default: beside the merged trace
  std::string trace_format;  // empty: json.gz when out_path ends in .gz, else json
  std::string format{to_string(OutputFormat::table)};
};

int merge_command(const MergeRequest& request);

// The summary path written beside a merged trace: summary.json for trace.json, summary-X.json
// for trace-X.json, otherwise <stem>-summary.json (a .json.gz trace counts as its .json name).
std::filesystem::path merged_summary_path(const std::filesystem::path& trace);

struct ProfileMerge {
  std::filesystem::path trace;
  std::filesystem::path summary;
  RunSummary combined;
  trace::MergeResult merge;
  std::vector<std::string> notes;
};

// Reads the inputs' heads, merges the traces into `out` with the combined summary in its
// provenance, and writes that summary beside it (or to `summary_out`).
ProfileMerge merge_process_traces(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out,
                                  const std::optional<std::filesystem::path>& summary_out = std::nullopt,
                                  trace::TraceFormat format = trace::TraceFormat::json);

}  // namespace attnprof
