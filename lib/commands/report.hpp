// `attnprof report TRACE`: the summary rebuilt from a saved trace, attnprof's or torch.profiler's;
// `attnprof report summary.json`: a saved summary's findings computed again by this version.
#pragma once

#include <string>

#include "summary/render.hpp"

namespace attnprof {

struct ReportRequest {
  std::string trace_path;
  std::string format{to_string(OutputFormat::table)};
  std::string summary_out;  // also write the rebuilt summary.json here
  std::string html_path;    // also write the HTML report here
  bool wide = false;
  std::vector<std::string> findings;  // --findings: all, default, top N (summary/finding_groups.hpp)
};

int report_command(const ReportRequest& request);

}  // namespace attnprof
