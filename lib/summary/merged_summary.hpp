// Several processes' results as one: the summaries of a job's ranks combined, and `attnprof
// merge`, which turns the per-rank traces of `attnprof profile -- torchrun ...` (or of any
// attnprof runs) into one trace with a process track per rank and GPU, plus one summary.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "summary/summary.hpp"
#include "trace/trace_merge.hpp"

namespace attnprof {

struct LabelledSummary {
  std::string label;  // "rank 1", "pid 4242"; empty: the labels stay as they are
  RunSummary summary;
};

// The first summary's header, every summary's cases in order (labels prefixed "[<label>] "),
// capture counts added, interrupted if any was.
RunSummary combine_summaries(const std::vector<LabelledSummary>& parts);

// The per-process traces in `inputs`: a file is taken as given; a directory contributes the
// traces attnprof writes (trace.json, trace-pid<N>.json, trace-rank<R>-pid<N>.json), not other
// JSON files beside them. `exclude` (the merge's own output) is never an input. Throws
// UsageError when an input does not exist or nothing is found.
std::vector<std::filesystem::path> find_process_traces(const std::vector<std::filesystem::path>& inputs,
                                                       const std::filesystem::path& exclude);

// Order and names for the inputs: by rank (distributedInfo, or rank<R> in the file name), then
// those without one by pid. Each gets a label ("rank 1", "pid 4242") and a slot of its own
// (its rank, when no other input claims it).
std::vector<trace::MergeInput> plan_rank_merge(std::vector<trace::TraceHead> heads);

// The summary path written beside a merged trace: summary.json for trace.json, summary-X.json
// for trace-X.json, otherwise <stem>-summary.json.
std::filesystem::path merged_summary_path(const std::filesystem::path& trace);

struct ProfileMerge {
  std::filesystem::path trace;
  std::filesystem::path summary;
  RunSummary combined;
  trace::MergeResult merge;
  std::vector<std::string> notes;
};

// `attnprof merge`: reads the inputs' heads, merges the traces into `out` with the combined
// summary inside its `attnprof` object, and writes that summary beside it (or to `summary_out`).
ProfileMerge merge_process_traces(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out,
                                  const std::optional<std::filesystem::path>& summary_out = std::nullopt);

}  // namespace attnprof
