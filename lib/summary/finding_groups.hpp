// Findings as a reader takes them: each kind once across the run, with the cases it holds for,
// ranked by what is at stake (Stake, summary.hpp), and the few worth reading first picked out.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "summary/summary.hpp"

namespace attnprof {

struct FindingGroup {
  std::string kind;                // Finding::kind
  std::string message;             // the finding of the case with the most at stake
  std::vector<std::size_t> cases;  // indexes into RunSummary::cases, the most at stake first
  std::vector<Stake> stakes;       // each case's stake, beside `cases`
  const Stake& lead() const { return stakes.front(); }
};

// Each kind once, its cases ordered by stake (a case with two findings of a kind counts with its
// larger one). The groups ranked: costs by the largest share of a case's time they explain, then
// results that differ between runs, then facts that explain a kernel (by the share of the time
// that kernel runs), then device memory (by the share of its case's peak: findings.hpp's
// device_memory_stake), then the rest; ties by the time at stake, then by kind.
std::vector<FindingGroup> rank_findings(const RunSummary& summary);

// Which groups a reader sees: the default (every cost of at least kShownSharePercent of a case's
// time, results that differ, facts about a kernel that holds at least kShownScopePercent of its
// case's time, device memory allocated inside the timed loop, and device memory held that is at
// least kShownMemorySharePercent of its case's peak), all of them, or the first N.
inline constexpr double kShownSharePercent = 3.0;
inline constexpr double kShownScopePercent = 50.0;
inline constexpr double kShownMemorySharePercent = 10.0;
struct FindingsView {
  enum class Mode { standard, all, top } mode = Mode::standard;
  std::size_t top = 0;
};
// "all", "default" or "top N" (the words of --findings; none: the default); a UsageError otherwise.
FindingsView findings_view_named(const std::vector<std::string>& words);

struct SelectedFindings {
  std::vector<FindingGroup> shown;
  std::size_t folded_groups = 0;    // ranked, not shown
  std::size_t folded_findings = 0;  // the findings of those groups, case by case
};
SelectedFindings select_findings(std::vector<FindingGroup> ranked, const FindingsView& view);

// The stake as a table cell: the share of the case's GPU time ("31% GPU"), of a call's host time
// ("15% host"), of the first call ("99% 1st call"), of the case's peak device memory ("45% mem",
// or the bytes where the peak is unknown); "differs" (results); "" (not weighed).
std::string stake_text(const Stake& stake);

// Who a group holds for, each case with its figure where there are several: the label for one
// case; "math bf16 full 1x8x512x512x64 31%, math bf16 causal ... 28%"; beyond `listed` cases,
// "and 6 more (4-12%)".
std::string finding_group_cases(const FindingGroup& group, const RunSummary& summary, std::size_t listed = 2);

// Who a group applies to, in a word: the case label for one case, "all 8 cases", or the backends
// and a count ("manual:out_of_place, manual:in_place, 2 cases"; "math +2, 3 cases" where the
// backends would not fit `max_width`).
std::string finding_group_subject(const FindingGroup& group, const RunSummary& summary,
                                  std::size_t max_width = std::string::npos);

// "memcpy in iteration" from "memcpy_in_iteration".
std::string finding_kind_title(const std::string& kind);

}  // namespace attnprof
