// The HTML report: a row per case, each chart's marks, escaping, nothing external, findings grouped.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "html/html_report.hpp"
#include "html/html_text.hpp"
#include "html/report_charts.hpp"
#include "html/svg_plot.hpp"
#include "summary/finding_groups.hpp"
#include "summary/summary.hpp"

namespace attnprof {
namespace {

RunSummary sample_summary() { return load_summary(std::string(ATTNPROF_SOURCE_DIR) + "/traces/samples/sample_summary.json"); }

const DeviceRoofs kH200{989, 4800, "NVIDIA H200 SXM datasheet"};

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// The markup of one chart, "" when the page has none.
std::string chart(const std::string& page, const std::string& name) {
  const auto start = page.find("<svg class=\"chart\" data-chart=\"" + name + "\"");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</svg>", start) - start);
}

std::size_t marks(const std::string& page, const std::string& name) { return count(chart(page, name), "class=\"mark\""); }

TEST(HtmlReport, ARowPerCaseAndEachChartsMarksForTheSample) {
  const RunSummary s = sample_summary();
  const std::string page = render_html_report(s, {kH200, ""});
  // Five cases: math, manual:out_of_place, manual:in_place, flash:fa2, flash:hopper.
  EXPECT_EQ(count(page, "<tr class=\"case\""), 5u);
  // gpu-time: compute for each case, plus the out-of-place case's memcpy.
  EXPECT_EQ(count(chart(page, "gpu-time"), "class=\"bar-row\""), 5u);
  EXPECT_EQ(marks(page, "gpu-time"), 6u);
  EXPECT_EQ(count(chart(page, "gpu-time"), "data-category=\"memcpy\""), 1u);
  // tflops: one problem, five backends.
  EXPECT_EQ(count(chart(page, "tflops"), "class=\"bar-group\""), 1u);
  EXPECT_EQ(marks(page, "tflops"), 5u);
  EXPECT_EQ(count(chart(page, "tflops"), "class=\"legend-item\""), 5u);
  // roofline: a point per case under two roofs.
  EXPECT_EQ(marks(page, "roofline"), 5u);
  EXPECT_EQ(count(chart(page, "roofline"), "class=\"roof\""), 2u);
  EXPECT_EQ(count(chart(page, "roofline"), "roofs-unknown"), 0u);
  // occupancy: recorded without --metrics, so no chart.
  EXPECT_EQ(chart(page, "occupancy"), "");
  // Tags the charts open are closed.
  EXPECT_EQ(count(page, "<svg"), count(page, "</svg>"));
  EXPECT_EQ(count(page, "<g ") + count(page, "<g>"), count(page, "</g>"));
  EXPECT_EQ(count(page, "<text"), count(page, "</text>"));
}

TEST(HtmlReport, MarkCountsFollowTheChartData) {
  RunSummary s = sample_summary();
  s.cases.push_back(s.cases[3]);  // flash:fa2 on a second shape
  s.cases.back().problem.shape.seq_q = s.cases.back().problem.shape.seq_kv = 1024;
  s.cases.back().label = "flash:fa2 bf16 causal 1x2x1024x1024x64";
  s.cases.push_back(s.cases[0]);  // a case that did not run: no bar, no point
  s.cases.back().status = CaseStatus::failed;
  s.cases.back().reason = "out of memory";
  s.cases[0].kernels[0].achieved_occupancy_percent = 30.0;
  s.cases[3].kernels[0].achieved_occupancy_percent = 11.0;
  s.roofs.reset();  // the recording carries the H200's roofs; this page is drawn without any
  const std::string page = render_html_report(s, {});

  std::size_t categories = 0;
  for (std::size_t i : html::cases_that_ran(s)) categories += html::gpu_time_by_category(s.cases[i]).size();
  EXPECT_EQ(html::cases_that_ran(s).size(), 6u);
  EXPECT_EQ(marks(page, "gpu-time"), categories);
  ASSERT_EQ(html::tflops_groups(s).size(), 2u);
  EXPECT_EQ(html::tflops_groups(s)[0].label, "bf16 causal 1x2x256x256x64");
  EXPECT_EQ(html::tflops_groups(s)[1].cases, (std::vector<std::size_t>{5}));
  EXPECT_EQ(count(chart(page, "tflops"), "class=\"bar-group\""), 2u);
  EXPECT_EQ(marks(page, "tflops"), 6u);
  EXPECT_EQ(marks(page, "roofline"), 6u);
  EXPECT_EQ(count(chart(page, "roofline"), "class=\"roof\""), 0u);
  EXPECT_EQ(count(chart(page, "roofline"), "class=\"roofs-unknown\""), 1u);
  EXPECT_EQ(html::occupancy_rows(s).size(), 2u);
  EXPECT_EQ(marks(page, "occupancy"), 4u);
  EXPECT_EQ(count(page, "<tr class=\"case\""), 7u);
  EXPECT_NE(page.find("out of memory"), std::string::npos);
}

TEST(HtmlReport, MemoryTimeIsTheBusyTimeOutsideKernels) {
  CaseSummary c;
  c.kernels.resize(2);
  c.kernels[0].name = "gemm";
  c.kernels[0].gpu_us_per_iter = 8;
  c.kernels[1].name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
  c.kernels[1].gpu_us_per_iter = 4;
  c.gpu_busy_us_per_iter = 13;
  c.memset_per_iter = 1;
  std::vector<html::CategoryTime> t = html::gpu_time_by_category(c);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].category, "compute");
  EXPECT_EQ(t[1].category, "communication");
  EXPECT_EQ(t[2].category, html::kMemsetCategory);
  EXPECT_DOUBLE_EQ(t[2].us_per_iter, 1.0);
  c.memcpy_per_iter = 2;
  EXPECT_EQ(html::gpu_time_by_category(c)[2].category, html::kMemoryCategory);
  c.memcpy_per_iter = c.memset_per_iter = 0;  // busy time beyond kernels with no memory operation is not invented
  EXPECT_EQ(html::gpu_time_by_category(c).size(), 2u);
}

TEST(HtmlReport, EveryTextIsEscaped) {
  RunSummary s = sample_summary();
  s.config_name = "<b>config</b>";
  s.cases[0].label = "math <script>alert(1)</script> & \"quoted\" 'single'";
  s.cases[0].kernels[0].name = "void attnprof::kernels::f<__nv_bfloat16, float>(float const*, int&)";
  s.cases[0].findings[0].message = "a <i>finding</i> & more";
  s.cases[0].surprises[0].note = "<img src=x>";
  s.cases[1].status = CaseStatus::failed;
  s.cases[1].reason = "</td><td>broken";
  const std::string page = render_html_report(s, {DeviceRoofs{989, 4800, "<datasheet>"}, ""});
  for (const char* raw : {"<script", "<b>config", "<i>finding", "<img", "</td><td>broken", "<__nv_bfloat16", "<datasheet>",
                          "\"quoted\"", "'single'"})
    EXPECT_EQ(page.find(raw), std::string::npos) << raw;
  for (const char* escaped : {"&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot; &#39;single&#39;",
                              "&lt;b&gt;config&lt;/b&gt;", "f&lt;__nv_bfloat16, float&gt;(float const*, int&amp;)",
                              "a &lt;i&gt;finding&lt;/i&gt; &amp; more", "&lt;img src=x&gt;", "&lt;datasheet&gt;"})
    EXPECT_NE(page.find(escaped), std::string::npos) << escaped;
  EXPECT_EQ(html::escape_html("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
}

TEST(HtmlReport, NothingExternal) {
  RunSummary s = sample_summary();
  s.config_source = "https://example.com/config.json";  // text from the summary is shown, never referenced
  for (const std::optional<DeviceRoofs>& roofs : {std::optional<DeviceRoofs>{}, std::optional<DeviceRoofs>{kH200}}) {
    const std::string page = render_html_report(s, {roofs, ""});
    std::string markup = page;
    const std::string shown = "https://example.com/config.json";
    for (auto at = markup.find(shown); at != std::string::npos; at = markup.find(shown)) markup.erase(at, shown.size());
    for (const char* external : {"http://", "https://", "src=", "href=", "<script", "<link", "<img", "<iframe", "<object",
                                 "<embed", "url(", "@import", "xlink:", "//"})
      EXPECT_EQ(markup.find(external), std::string::npos) << external;
    EXPECT_NE(page.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"), std::string::npos);
  }
}

TEST(HtmlReport, FindingsAreEachKindOnceRankedWithTheFoldedOnesBelow) {
  const RunSummary s = sample_summary();
  const std::string page = render_html_report(s, {});
  const std::vector<FindingGroup> ranked = rank_findings(s);
  const SelectedFindings shown = select_findings(ranked, {});
  EXPECT_EQ(count(page, "<li class=\"finding-group\""), ranked.size());
  EXPECT_EQ(count(page, "the causal mask is rebuilt every iteration"), 1u);
  // The surprises come before the findings, the folded ones inside a closed <details> at the end.
  EXPECT_LT(page.find("Surprises: your guesses"), page.find("<li class=\"finding-group\""));
  if (shown.folded_groups > 0) {
    const std::size_t folded = page.find("<details class=\"folded\">");
    ASSERT_NE(folded, std::string::npos);
    EXPECT_EQ(count(page.substr(folded), "<li class=\"finding-group\""), shown.folded_groups);
  }
  // The shown groups in the ranked order.
  std::size_t previous = 0;
  for (const FindingGroup& g : shown.shown) {
    const std::size_t at = page.find(fmt::format("data-kind=\"{}\"", g.kind));
    ASSERT_NE(at, std::string::npos) << g.kind;
    EXPECT_GT(at, previous) << g.kind;
    previous = at;
  }
  EXPECT_NE(page.find("<span class=\"subject\">math, manual:out_of_place, manual:in_place, 3 cases</span>"), std::string::npos);
}

TEST(HtmlReport, HeaderNamesDeviceVersionsConfigCaptureAndTime) {
  RunSummary s = sample_summary();
  s.capture.dropped_records = 5;
  s.interrupted = true;
  const std::string page = render_html_report(s, {});
  for (const char* fact : {"NVIDIA H200 · sm_90 · 132 SMs", "driver 580.159.04", "cuDNN 9.14.0", "configs/sample.json",
                           "INCOMPLETE", "5 dropped", "2026-12-04T17:31:10Z", "interrupted"})
    EXPECT_NE(page.find(fact), std::string::npos) << fact;
}

TEST(HtmlReport, AnEmptyRunStillMakesAPage) {
  const std::string page = render_html_report(RunSummary{}, {});
  EXPECT_EQ(marks(page, "gpu-time") + marks(page, "tflops") + marks(page, "roofline"), 0u);
  EXPECT_NE(page.find("</html>"), std::string::npos);
}

TEST(SvgPlot, TicksAndScales) {
  EXPECT_EQ(html::linear_ticks(131.3, 6), (std::vector<double>{0, 50, 100, 150}));
  const std::vector<double> fifths = html::linear_ticks(0.98, 6);
  ASSERT_EQ(fifths.size(), 6u);
  EXPECT_NEAR(fifths[1], 0.2, 1e-12);
  EXPECT_NEAR(fifths.back(), 1.0, 1e-12);
  EXPECT_EQ(html::linear_ticks(0, 6), (std::vector<double>{0, 1}));
  EXPECT_DOUBLE_EQ(html::decade_floor(64), 10);
  EXPECT_DOUBLE_EQ(html::decade_ceil(64), 100);
  EXPECT_DOUBLE_EQ(html::decade_ceil(100), 100);
  EXPECT_EQ(html::decade_ticks(0.01, 100).size(), 5u);
  const html::Scale log{1, 1000, 0, 300, true};
  EXPECT_DOUBLE_EQ(log(10), 100);
  EXPECT_EQ(html::tick_text(1e5), "1e+05");
  EXPECT_EQ(html::tick_text(0.25), "0.25");
}

}  // namespace
}  // namespace attnprof
