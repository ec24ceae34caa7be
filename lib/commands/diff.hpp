// `attnprof diff A B`: what changed between two runs, each change stated with its noise.
#pragma once

#include <string>
#include <vector>

#include "summary/render.hpp"

namespace attnprof {

struct DiffRequest {
  std::string a_path;  // run folder, summary.json(.gz) or trace (ours or torch.profiler's, .json or .json.gz)
  std::string b_path;
  std::vector<std::string> match;  // --match rules (diff/case_matching.hpp)
  std::string noise = "10";        // --noise: the drift floor in percent, parsed here for its message
  std::string format{to_string(OutputFormat::table)};
  std::string html_path;           // also write the side-by-side page here
};

// kExitOk on every valid comparison, however much changed (`check` is the gate); kExitUsage for
// bad input: an unreadable file, one that is no summary or trace, an unknown rule, a bad --noise.
int diff_command(const DiffRequest& request);

}  // namespace attnprof
