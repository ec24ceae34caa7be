// The names attnprof gives the traces and summaries it writes per process, and finding them
// again: `profile` writes one pair per process that used CUDA, `merge` and `profile` gather them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attnprof::trace {

// "trace-pid1234.json" / "trace-rank3-pid1234.json" (and "summary-...", and "idle-..." for a
// process that initialised CUDA but launched nothing): one output per process, so every process
// of a job that uses CUDA gets its own.
std::string process_output_name(const std::string& stem, std::uint32_t pid, std::optional<int> rank);

// What a per-process output's name says: trace or summary, the pid, the rank.
struct ProcessOutputName {
  std::string stem;  // "trace", "summary" or "idle"
  std::uint32_t pid = 0;
  std::optional<int> rank;
};
std::optional<ProcessOutputName> parse_process_output_name(const std::string& file_name);

// The rank a file name carries ("trace-rank3-pid12.json", "rank3.json", "run_rank3.json").
std::optional<int> rank_in_file_name(const std::filesystem::path& path);

// The traces attnprof wrote among `inputs`: a file is taken as given; a directory contributes
// trace.json, trace-pid<N>.json and trace-rank<R>-pid<N>.json (gzipped too), not other JSON files
// beside them. `exclude` (a merge's own output) is never an input; the same file named twice
// counts once. Throws UsageError when an input does not exist or a directory holds none.
std::vector<std::filesystem::path> find_process_traces(const std::vector<std::filesystem::path>& inputs,
                                                       const std::filesystem::path& exclude);

}  // namespace attnprof::trace
