// One side of `attnprof diff`: a run folder, a summary.json or a trace, read into a run summary.
// A folder gives its summary.json (the run's CUDA-event timings) before its trace; a trace, ours
// or torch.profiler's, is summarised by `report`'s reader (summary/trace_report.hpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "summary/summary.hpp"

namespace attnprof {

struct DiffInput {
  std::string path;                // as the user named it
  std::string source;              // the file read: the path, or the summary/trace inside a folder
  std::string origin;              // "summary.json", or the trace's origin ("Kineto (torch.profiler)", ...)
  RunSummary summary;
  std::vector<std::string> notes;  // what the trace reader had to assume
};

// Reads `path`. Throws UsageError, naming the file and the problem, when it does not exist,
// cannot be read, is neither an attnprof summary nor a Chrome/Kineto trace, or is a folder
// holding neither (or several traces and no summary).
DiffInput load_diff_input(const std::filesystem::path& path);

}  // namespace attnprof
