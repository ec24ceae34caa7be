// The story of `attnprof report`: stream the trace once (summary/trace_report.hpp rebuilds the
// cases from our tags or from the program's ranges), say what had to be assumed, print the
// table, and write the summary when asked. A file that is no trace is a usage error.
#include "commands/report.hpp"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "backends/backend.hpp"
#include "core/errors.hpp"
#include "html/html_report.hpp"
#include "summary/analysis.hpp"
#include "summary/render.hpp"
#include "summary/trace_report.hpp"
#include "trace/json_pull_parser.hpp"

namespace attnprof {
namespace {

// A summary.json (or .json.gz) rather than a trace: its name says so.
bool is_summary_file(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  return name.ends_with("summary.json") || name.ends_with("summary.json.gz");
}

// A saved summary analysed again by this version: its findings recomputed from the facts it holds
// (older summaries gain the stakes findings are ranked by); its surprises kept, since the guesses
// they test are not in it.
TraceReport report_from_summary(const std::string& path) {
  TraceReport report;
  report.summary = load_summary(path);
  for (CaseSummary& c : report.summary.cases) {
    c.findings.clear();
    analyze_case(c, nullptr);
  }
  analyze_run(report.summary);
  report.origin = "attnprof summary, findings recomputed";
  return report;
}

}  // namespace

int report_command(const ReportRequest& r) {
  const OutputFormat format = output_format_named(r.format);
  const FindingsView findings = findings_view_named(r.findings);
  TraceReport report;
  try {
    if (is_summary_file(r.trace_path)) {
      report = report_from_summary(r.trace_path);
    } else {
      TraceReportOptions options;
      options.known_backends = accepted_backend_names();  // to re-read the stored config's guesses
      report = report_from_trace(r.trace_path, options);
    }
  } catch (const trace::TraceFormatError& e) {
    std::cerr << "attnprof report: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::runtime_error& e) {  // load_summary's: the file and the problem
    std::cerr << "attnprof report: " << e.what() << "\n";
    return kExitUsage;
  }
  for (const std::string& note : report.notes) std::cerr << "attnprof report: note: " << note << "\n";
  std::cout << render_summary(report.summary, format, {.wide = r.wide, .findings = findings});
  if (!r.html_path.empty()) {
    write_text_atomically(r.html_path, render_html_report(report.summary));
    std::cerr << fmt::format("attnprof report: wrote {}\n", r.html_path);
  }
  if (!r.summary_out.empty()) {
    write_json_atomically(r.summary_out, nlohmann::json(report.summary));
    std::cerr << fmt::format("attnprof report: {} ({} events, {}) -> {}\n", r.trace_path, report.events, report.origin,
                             r.summary_out);
  }
  return kExitOk;
}

}  // namespace attnprof
