// The terminal table: fits 120 columns (the wide details move to md/csv/json or `wide`), and
// findings grouped across cases.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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
  const std::string wide = render_summary(s, OutputFormat::table, {.wide = true});
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
  const std::string wide = render_summary(s, OutputFormat::table, {.wide = true});
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

Finding memset_finding(int bytes) {
  return {"memset_in_iteration",
          "1 memset per iteration moving " + std::to_string(bytes) + " bytes, issued by cudaMemsetAsync: a fill inside the timed loop",
          {{"bytes_per_iter", bytes}}};
}

TEST(FindingGroups, IdenticalFindingsMergeAndDifferentOnesDoNot) {
  RunSummary s;
  Finding host_fast{"host_bound", "enqueueing one call takes 20.3 us of host time, more than the 17.1 us of GPU time", {}};
  Finding host_slow{"host_bound", "enqueueing one call takes 90.0 us of host time, more than the 80.0 us of GPU time", {}};
  s.cases = {case_with("manual", "1x1x64x64x64", {memset_finding(4), host_fast}),
             case_with("manual", "1x1x128x128x64", {memset_finding(4), host_slow}),
             case_with("manual", "1x1x256x256x64", {memset_finding(4), memset_finding(4)}),
             case_with("flash", "1x1x64x64x64", {memset_finding(8)}),
             case_with("flash", "1x1x128x128x64", {})};
  // The same evidence under a different kind is a different finding.
  s.cases[4].findings.push_back({"memcpy_in_iteration", memset_finding(4).message, {}});

  const std::vector<FindingGroup> groups = group_findings(s);
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups[0].kind, "memset_in_iteration");
  EXPECT_EQ(groups[0].cases, (std::vector<std::size_t>{0, 1, 2}));  // a case that says it twice counts once
  EXPECT_EQ(groups[1].message, host_fast.message);
  EXPECT_EQ(groups[2].message, host_slow.message);
  EXPECT_EQ(groups[3].cases, (std::vector<std::size_t>{3}));  // 8 bytes, not 4
  EXPECT_EQ(groups[4].kind, "memcpy_in_iteration");

  EXPECT_EQ(finding_group_subject(groups[0], s), "manual, 3 cases");
  EXPECT_EQ(finding_group_subject(groups[3], s), "flash bf16 full 1x1x64x64x64");
  FindingGroup everywhere{"x", "y", {0, 1, 2, 3, 4}};
  EXPECT_EQ(finding_group_subject(everywhere, s), "all 5 cases");
  FindingGroup across{"x", "y", {2, 3}};
  EXPECT_EQ(finding_group_subject(across, s), "manual, flash, 2 cases");

  const std::string table = render_summary(s, OutputFormat::table);
  EXPECT_NE(table.find("- manual, 3 cases: 1 memset per iteration moving 4 bytes"), std::string::npos) << table;
  EXPECT_EQ(table.find("1x1x256x256x64: 1 memset"), std::string::npos) << table;
}

TEST(FindingGroups, CasesWithoutABackendAreNamedByLabel) {
  RunSummary s;
  for (const char* name : {"step", "forward", "backward"}) {
    CaseSummary c;
    c.label = name;
    c.findings = {memset_finding(4)};
    s.cases.push_back(c);
  }
  s.cases.push_back(CaseSummary{});
  const std::vector<FindingGroup> groups = group_findings(s);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(finding_group_subject(groups[0], s), "3 cases (step, forward, 1 more)");
}

TEST(FindingGroups, TheSampleSaysTheMaskFindingOnce) {
  const RunSummary s = sample_summary();
  const std::string table = render_summary(s, OutputFormat::table);
  std::size_t count = 0;
  for (std::size_t at = table.find("causal mask is rebuilt"); at != std::string::npos;
       at = table.find("causal mask is rebuilt", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << table;
  EXPECT_NE(table.find("- math, manual:out_of_place, manual:in_place, 3 cases: the causal mask"), std::string::npos) << table;
}

}  // namespace
}  // namespace attnprof
