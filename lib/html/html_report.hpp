// attnprof's shareable report: one self-contained HTML page (inline CSS, inline SVG drawn here,
// no script, no font, no image, nothing fetched; a Content-Security-Policy forbids every load)
// with the run's header, the case table, the findings grouped across cases, and the charts.
//
// What tests (and anyone scripting the page) can rely on in the DOM:
//   <tr class="case"> per case in the summary table;
//   <svg class="chart" data-chart="NAME"> per chart, each datum drawn as an element of class "mark":
//     gpu-time   a <g class="bar-row"> per case that ran; a mark per category with GPU time
//     tflops     a <g class="bar-group"> per problem (shape, dtype, causal...); a mark per case in it
//     roofline   a mark per case with a FLOP count and a TFLOP/s; two class="roof" lines when the
//                roofs are known, else a class="roofs-unknown" text
//     occupancy  drawn only when some kernel has an achieved occupancy: a <g class="bar-group"> per
//                case, a <g class="bar-row"> per such kernel, a mark for its achieved and one for its
//                theoretical occupancy
//     memory     drawn only when some case has device memory recorded: a <g class="bar-row"> per case
//                that ran with memory; a mark (data-role) per role it held at its peak
//     memory-scaling  drawn with memory: a mark per case with memory, a peak and a sequence length;
//                a class="series" line per backend and problem with two or more of them
//   <li class="finding-group" data-kind data-cases data-stake> per kind of finding, ranked
//   (summary/finding_groups.hpp); those folded by default inside <details class="folded">.
#pragma once

#include <optional>
#include <string>

#include "summary/summary.hpp"

namespace attnprof {

// The GPU's compute and memory-bandwidth roofs for the roofline chart.
struct DeviceRoofs {
  double peak_tflops = 0;  // dense, for the dtype the cases compute in
  double peak_gbps = 0;    // device memory, GB/s (10^9 bytes per second)
  std::string source;      // where the two numbers come from, shown under the chart
};

struct HtmlReportOptions {
  // Absent (until the summary carries them): the roofline draws the points and says the roofs are unknown.
  std::optional<DeviceRoofs> roofs;
  std::string title;  // the page's <title>; empty: "attnprof report: <config> on <device>"
};

std::string render_html_report(const RunSummary& summary, const HtmlReportOptions& options = {});

}  // namespace attnprof
