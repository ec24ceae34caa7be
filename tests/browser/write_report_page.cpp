// Writes the HTML report of a summary.json for the browser test (check_report.py):
//   attnprof_report_page SUMMARY.json OUT.html [--roofs TFLOPS GBPS SOURCE] [--synthetic-achieved-occupancy]
// --synthetic-achieved-occupancy gives every kernel of the cases that ran an achieved occupancy
// (80% of its theoretical one) so the occupancy chart is drawn from a summary recorded without
// --metrics; the page's title says so.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "html/html_report.hpp"
#include "summary/summary.hpp"

int main(int argc, char** argv) {
  using namespace attnprof;
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " SUMMARY.json OUT.html [--roofs TFLOPS GBPS SOURCE] [--synthetic-achieved-occupancy]\n";
    return 2;
  }
  try {
    RunSummary summary = load_summary(argv[1]);
    HtmlReportOptions options;
    for (int i = 3; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--roofs" && i + 3 < argc) {
        options.roofs = DeviceRoofs{std::strtod(argv[i + 1], nullptr), std::strtod(argv[i + 2], nullptr), argv[i + 3]};
        i += 3;
      } else if (arg == "--synthetic-achieved-occupancy") {
        for (CaseSummary& c : summary.cases)
          if (c.status == CaseStatus::ok)
            for (KernelSummary& k : c.kernels) k.achieved_occupancy_percent = 0.8 * k.theoretical_occupancy_percent;
        options.title = "attnprof report (test page: achieved occupancy synthesized)";
      } else {
        std::cerr << "unknown argument: " << arg << "\n";
        return 2;
      }
    }
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out << render_html_report(summary, options);
    if (!out.flush()) {
      std::cerr << "cannot write " << argv[2] << "\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
