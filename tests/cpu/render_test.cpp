// The terminal table: fits 120 columns (the wide details move to md/csv/json or `wide`), and
// findings grouped across cases.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "summary/finding_groups.hpp"
#include "summary/render.hpp"
#include "summary/summary.hpp"

namespace attnprof {
namespace {

RunSummary sample_summary() { return load_summary(std::string(ATTNPROF_SOURCE_DIR) + "/traces/samples/sample_summary.json"); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void expect_fits(const std::string& text) {
  for (const std::string& line : lines_of(text)) EXPECT_LE(line.size(), kTableWidth) << line;
}

TEST(RenderTable, EveryLineOfTheSampleTableFits120Columns) {
  const std::string table = render_summary(sample_summary(), OutputFormat::table);
  expect_fits(table);
  EXPECT_NE(table.find("manual:out_of_place bf16 causal 1x2x256x256x64"), std::string::npos) << table;
  EXPECT_NE(table.find("1 (256.0 KiB)"), std::string::npos) << table;  // the hidden memcpy stays in sight
  EXPECT_NE(table.find("flash_fwd_kernel"), std::string::npos) << table;
}

// A summary placed under the GPU's roofs (the golden report of the sample trace) adds the roof
// column, and still fits; the wide table and the CSV carry GB/s, intensity and the bound.
TEST(RenderTable, TheRoofColumnFitsAndTheWideTableNamesTheBound) {
  const RunSummary s = load_summary(std::string(ATTNPROF_GOLDEN_DIR) + "/reports/sample_trace.summary.json");
  ASSERT_TRUE(s.roofs.has_value());
  const std::string table = render_summary(s, OutputFormat::table);
  expect_fits(table);
  EXPECT_NE(table.find(" roof"), std::string::npos) << table;
  const std::string wide = render_summary(s, OutputFormat::table, {.wide = true, .findings = {}});
  EXPECT_NE(wide.find("FLOP/B"), std::string::npos);
  EXPECT_NE(wide.find("memory"), std::string::npos) << wide;  // 256-token cases sit under the bandwidth roof
  const std::string csv = render_summary(s, OutputFormat::csv);
  EXPECT_NE(csv.find(",gbps,intensity,bound,"), std::string::npos);
}

TEST(RenderTable, WideDetailsMoveToWideAndMarkdown) {
  const RunSummary s = sample_summary();
  const std::string table = render_summary(s, OutputFormat::table);
  // (cuLaunchKernelEx stays in the driver_launch finding; the launch api column goes.)
  for (const char* detail : {"launch api", "cudaLaunchKernelExC", "[384,1,1]", "p90", "plan cold/warm", "rel.err"})
    EXPECT_EQ(table.find(detail), std::string::npos) << detail;
  const std::string wide = render_summary(s, OutputFormat::table, {.wide = true, .findings = {}});
  const std::string md = render_summary(s, OutputFormat::md);
  for (const std::string& text : {wide, md})
    for (const char* detail : {"launch api", "cudaLaunchKernelExC", "[384,1,1]", "p90", "plan cold/warm", "rel.err",
                               "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_"
                               "alignc4_execute_kernel__5x_cublas"})
      EXPECT_NE(text.find(detail), std::string::npos) << detail << "\n" << text;
  // Markdown table rows are never wrapped: one row per case.
  std::size_t rows = 0;
  for (const std::string& line : lines_of(md)) rows += line.rfind("| math bf16 causal", 0) == 0;
  EXPECT_EQ(rows, 2u);
}

TEST(RenderTable, LongLabelsSeveralGpusCollectivesAndMetricsStillFit) {
  RunSummary s = sample_summary();
  s.config_name = std::string(150, 'c');
  for (std::size_t i = 0; i < s.cases.size(); ++i) {
    CaseSummary& c = s.cases[i];
    c.label = "manual:out_of_place bf16 causal bias 16x128x32768x32768x256 " + std::string(40, 'x') + std::to_string(i);
    c.device = static_cast<int>(i);
    c.status = i == 3 ? CaseStatus::interrupted : c.status;
    c.reason = std::string(200, 'r');
    KernelSummary& k = c.kernels.front();
    k.name = std::string(300, 'k');
    k.achieved_occupancy_percent = 11.5;
    k.dram_throughput_percent = 45.5;
    k.dram_bytes_per_second = 2.2e12;
    k.tensor_pipe_percent = 63.0;
    k.occupancy_limiter = "registers and shared memory and warps and blocks";
  }
  KernelSummary nccl;
  nccl.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
  nccl.per_iter = 1;
  s.cases[0].kernels.push_back(nccl);
  s.cases[0].memset_per_iter = 1;
  s.cases[0].memset_bytes_per_iter = 4;
  s.capture.dropped_records = 12;
  const std::string table = render_summary(s, OutputFormat::table);
  expect_fits(table);
  EXPECT_NE(table.find("nccl/it"), std::string::npos) << table;
  EXPECT_NE(table.find("tensor pipe"), std::string::npos) << table;
  EXPECT_NE(table.find("INCOMPLETE"), std::string::npos) << table;
  // A shortened label keeps its backend and its tail.
  EXPECT_NE(table.find("manual:out_of_place"), std::string::npos) << table;
  EXPECT_NE(table.find("xxx0 "), std::string::npos) << table;
}

TEST(RenderText, ShortenAndWrap) {
  EXPECT_EQ(shorten_middle("manual:out_of_place bf16 causal 1x2x256x256x64", 20), "manual:ou...6x256x64");
  EXPECT_EQ(shorten_middle("short", 20), "short");
  EXPECT_EQ(wrap_text("one two three four", 9, "- ", "  "), "- one two\n  three\n  four");
  EXPECT_EQ(wrap_text("abcdefghijkl", 5, "", ""), "abcde\nfghij\nkl");
  EXPECT_EQ(wrap_text("", 5, "- ", "  "), "- ");
}

// Widths count bytes, but a cut never splits a UTF-8 character: the HTML report must stay UTF-8.
TEST(RenderText, ShortenNeverSplitsAUtf8Character) {
  std::string e_acute;
  for (int i = 0; i < 60; ++i) e_acute += "\xc3\xa9";
  auto repeat = [](const std::string& piece, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += piece;
    return out;
  };
  EXPECT_EQ(shorten(e_acute, 40), repeat("\xc3\xa9", 18) + "...");
  EXPECT_EQ(shorten_middle(e_acute, 40), repeat("\xc3\xa9", 9) + "..." + repeat("\xc3\xa9", 9));
  EXPECT_EQ(shorten_middle("a" + e_acute, 40), "a" + repeat("\xc3\xa9", 9) + "..." + repeat("\xc3\xa9", 9));
  EXPECT_EQ(shorten(e_acute, 3), "\xc3\xa9");
}

TEST(RenderText, WrapNeverSplitsAUtf8Character) {
  std::string e_acute;
  for (int i = 0; i < 30; ++i) e_acute += "\xc3\xa9";  // one word of 60 bytes
  const std::string wrapped = wrap_text("x " + e_acute, 7, "", "");
  std::size_t start = 0;
  while (start < wrapped.size()) {
    std::size_t end = wrapped.find('\n', start);
    if (end == std::string::npos) end = wrapped.size();
    const std::string line = wrapped.substr(start, end - start);
    EXPECT_LE(line.size(), 7u) << line;
    // Every line starts and ends on a character boundary.
    ASSERT_FALSE(line.empty());
    EXPECT_NE(static_cast<unsigned char>(line.front()) & 0xC0, 0x80) << line;
    EXPECT_NE(static_cast<unsigned char>(line.back()), 0xC3) << line;
    start = end + 1;
  }
  // Narrower than one character: the character still goes out whole, and the loop ends.
  EXPECT_EQ(wrap_text("\xc3\xa9\xc3\xa9", 1, "", ""), "\xc3\xa9\n\xc3\xa9");
}

CaseSummary case_with(const std::string& backend, const std::string& shape, std::vector<Finding> findings) {
  CaseSummary c;
  c.backend = backend;
  c.label = backend + " bf16 full " + shape;
  c.findings = std::move(findings);
  return c;
}

Finding finding(const std::string& kind, const std::string& message, double share, bool cost = true,
                StakeBasis basis = StakeBasis::gpu_time) {
  return {kind, message, {}, Stake{basis, cost, share, share, 0}};
}

Finding memset_finding(double share) {
  return finding("memset_in_iteration", "1 memset per iteration moving 4 bytes: a fill inside the timed loop", share);
}

// Five cases, findings of every tier: costs, a scope, an unweighed one.
RunSummary ranked_run() {
  RunSummary s;
  s.cases = {case_with("manual", "1x1x64x64x64", {memset_finding(5), finding("host_bound", "host 20", 4, true, StakeBasis::host_time)}),
             case_with("manual", "1x1x128x128x64", {memset_finding(9), finding("host_bound", "host 90", 2, true, StakeBasis::host_time)}),
             case_with("manual", "1x1x256x256x64", {memset_finding(2), memset_finding(12)}),
             case_with("flash", "1x1x64x64x64", {finding("low_occupancy", "12.5% theoretical occupancy", 100, false),
                                                 finding("memcpy_in_iteration", "1 memcpy", 1)}),
             case_with("flash", "1x1x128x128x64", {finding("backward_forward_ratio", "2.5x", 0, false, StakeBasis::none)})};
  return s;
}

TEST(FindingGroups, EachKindOnceItsCasesByStakeTheKindsByTier) {
  const RunSummary s = ranked_run();
  const std::vector<FindingGroup> groups = rank_findings(s);
  ASSERT_EQ(groups.size(), 5u);
  // Costs by their largest share (memset 12% > host 4% > memcpy 1%), then the scope, then the unweighed.
  EXPECT_EQ(groups[0].kind, "memset_in_iteration");
  EXPECT_EQ(groups[1].kind, "host_bound");
  EXPECT_EQ(groups[2].kind, "memcpy_in_iteration");
  EXPECT_EQ(groups[3].kind, "low_occupancy");
  EXPECT_EQ(groups[4].kind, "backward_forward_ratio");
  // A case that says a kind twice counts once, with its larger stake; the cases most at stake first.
  EXPECT_EQ(groups[0].cases, (std::vector<std::size_t>{2, 1, 0}));
  ASSERT_EQ(groups[0].stakes.size(), 3u);
  EXPECT_EQ(groups[0].stakes[0].share_percent, 12);
  EXPECT_EQ(groups[0].lead().share_percent, 12);
  // The group speaks with its lead case's message.
  EXPECT_EQ(groups[1].message, "host 20");
  EXPECT_EQ(groups[1].cases, (std::vector<std::size_t>{0, 1}));
}

TEST(FindingGroups, TheDefaultViewFoldsSmallCostsAndUnweighedFacts) {
  const SelectedFindings standard = select_findings(rank_findings(ranked_run()), {});
  std::vector<std::string> kinds;
  for (const FindingGroup& g : standard.shown) kinds.push_back(g.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"memset_in_iteration", "host_bound", "low_occupancy"}));
  EXPECT_EQ(standard.folded_groups, 2u);    // the 1% memcpy, the ratio
  EXPECT_EQ(standard.folded_findings, 2u);
  const SelectedFindings all = select_findings(rank_findings(ranked_run()), {FindingsView::Mode::all, 0});
  EXPECT_EQ(all.shown.size(), 5u);
  EXPECT_EQ(all.folded_groups, 0u);
  const SelectedFindings top = select_findings(rank_findings(ranked_run()), {FindingsView::Mode::top, 2});
  ASSERT_EQ(top.shown.size(), 2u);
  EXPECT_EQ(top.shown[1].kind, "host_bound");
  EXPECT_EQ(top.folded_groups, 3u);
}

TEST(FindingGroups, FindingsViewWords) {
  EXPECT_EQ(findings_view_named({}).mode, FindingsView::Mode::standard);
  EXPECT_EQ(findings_view_named({"default"}).mode, FindingsView::Mode::standard);
  EXPECT_EQ(findings_view_named({"all"}).mode, FindingsView::Mode::all);
  const FindingsView top = findings_view_named({"top", "7"});
  EXPECT_EQ(top.mode, FindingsView::Mode::top);
  EXPECT_EQ(top.top, 7u);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"top"}, {"top", "0"}, {"top", "-1"}, {"top", "3x"}, {"some"}, {"all", "3"}, {"top", "2", "3"}})
    EXPECT_THROW(findings_view_named(bad), UsageError) << bad.size();
}

TEST(FindingGroups, TheTablePrintsOneLinePerKindWithinTheWidthAndSaysWhatItFolded) {
  const RunSummary s = ranked_run();
  const std::string table = render_summary(s, OutputFormat::table);
  const std::string findings = table.substr(table.find("findings, by what is at stake"));
  EXPECT_NE(findings.find("12% GPU  memset in iteration"), std::string::npos) << findings;
  EXPECT_NE(findings.find("4.0% host  host bound"), std::string::npos) << findings;
  EXPECT_EQ(findings.find("1 memcpy"), std::string::npos) << findings;  // folded
  EXPECT_NE(findings.find("2 more kind(s) of finding (2 in all)"), std::string::npos) << findings;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), kTableWidth) << line;
  // md lists each case with its figure; --findings all prints the folded ones too.
  RenderOptions all;
  all.findings.mode = FindingsView::Mode::all;
  const std::string md = render_summary(s, OutputFormat::md, all);
  EXPECT_NE(md.find("- [12% GPU] memset in iteration (manual bf16 full 1x1x256x256x64 12%, manual bf16 full "
                    "1x1x128x128x64 9.0% and 1 more (5.0%))"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("1 memcpy"), std::string::npos) << md;
}

TEST(FindingGroups, SubjectsNameBackendsOrLabels) {
  RunSummary s = ranked_run();
  const std::vector<FindingGroup> groups = rank_findings(s);
  EXPECT_EQ(finding_group_subject(groups[0], s), "manual, 3 cases");
  EXPECT_EQ(finding_group_subject(groups[3], s), "flash bf16 full 1x1x64x64x64");
  FindingGroup everywhere{"x", "y", {0, 1, 2, 3, 4}, {}};
  EXPECT_EQ(finding_group_subject(everywhere, s), "all 5 cases");
  FindingGroup across{"x", "y", {3, 2}, {}};  // named in the run's order
  EXPECT_EQ(finding_group_subject(across, s), "manual, flash, 2 cases");
  EXPECT_EQ(finding_group_subject(across, s, 12), "manual +1, 2 cases");
  for (CaseSummary& c : s.cases) c.backend.clear();
  s.cases[0].label = "step";
  s.cases[1].label = "forward";
  s.cases[2].label = "backward";
  EXPECT_EQ(finding_group_subject(groups[0], s), "3 cases (step, forward, 1 more)");
}

TEST(FindingGroups, TheSampleOpensWithItsSurprisesThenItsCostsLargestFirst) {
  const RunSummary s = sample_summary();
  const std::string table = render_summary(s, OutputFormat::table);
  std::size_t count = 0;
  for (std::size_t at = table.find("causal mask is rebuilt"); at != std::string::npos;
       at = table.find("causal mask is rebuilt", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << table;
  EXPECT_LT(table.find("surprises (guesses the trace contradicts)"), table.find("findings, by what is at stake")) << table;
  // The sample's findings carry their stakes, and the costs come in decreasing share.
  const std::vector<FindingGroup> shown = select_findings(rank_findings(s), {}).shown;
  ASSERT_GE(shown.size(), 4u);
  std::size_t previous_at = 0;
  double previous_share = 101;
  for (const FindingGroup& g : shown) {
    if (!g.lead().cost) continue;
    EXPECT_EQ(g.lead().basis == StakeBasis::none, false) << g.kind;
    EXPECT_LE(g.lead().share_percent, previous_share) << g.kind;
    previous_share = g.lead().share_percent;
    const std::size_t at = table.find(finding_kind_title(g.kind), table.find("findings, by what is at stake"));
    ASSERT_NE(at, std::string::npos) << g.kind;
    EXPECT_GT(at, previous_at) << g.kind;
    previous_at = at;
  }
}

}  // namespace
}  // namespace attnprof
