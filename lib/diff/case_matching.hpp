// Which case of run A is which case of run B. By default two cases pair when they solve the same
// problem with the same backend on the same GPU ordinal: backend, dtype, mask (causal, alignment,
// window), bias, scale, pass and every shape and workload field (GQA heads, ragged lengths, page
// size), compared as fields, not as labels. Cases of a profiled program or a torch.profiler trace
// have no problem we know: they pair by their NVTX range or op name. `--match` rules relax the
// key where the two runs differ on purpose.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "summary/summary.hpp"

namespace attnprof {

enum class MatchRule { backend, variant, device, dtype, label, order };

// Each rule's name, as --match takes it, and what it does: the one place a rule is spelled. The
// CLI's help text and the parser read it.
struct MatchRuleName {
  MatchRule rule;
  std::string_view name;
  std::string_view meaning;
};
inline constexpr std::array<MatchRuleName, 6> kMatchRules = {{
    {MatchRule::backend, "backend", "ignore the backend: flash:fa2 pairs with flash:hopper or cudnn"},
    {MatchRule::variant, "variant", "ignore the variant only: flash:fa2 pairs with flash:hopper, not cudnn"},
    {MatchRule::device, "device", "ignore each case's GPU ordinal (run --devices shared the cases out anew)"},
    {MatchRule::dtype, "dtype", "ignore the dtype: a bf16 case pairs with its fp16 twin"},
    {MatchRule::label, "label", "pair by case label alone, as check does"},
    {MatchRule::order, "order", "pair the i-th case of A with the i-th of B (a program's renamed ranges)"},
}};

std::vector<std::string> match_rule_names();  // {"backend", "variant", ...}, for CLI11's IsMember and help
// One line per rule, "  backend  ignore the backend: ...", for --help (no newline after the last).
std::string match_rules_help();

struct CaseMatching {
  std::vector<MatchRule> rules;  // as given, each once
  bool has(MatchRule rule) const;
};

// The rules named in `words` ("backend", "device"). Throws UsageError for an unknown rule, and
// for label or order beside another rule (each replaces the key the others relax).
CaseMatching parse_match_rules(const std::vector<std::string>& words);

// What a case is matched by, as the report shows it: "flash:* bf16 causal 1x2x256x256x64",
// "range \"sdpa flash\"", with " on GPU 1" where the ordinal is part of the key and not 0.
std::string match_key_text(const CaseSummary& c, const CaseMatching& matching);

// Whether the two cases pair under `matching`'s key (label and order aside).
bool same_match_key(const CaseSummary& a, const CaseSummary& b, const CaseMatching& matching);

struct CasePairing {
  std::vector<std::pair<std::size_t, std::size_t>> pairs;  // (index in A, index in B), in A's order
  std::vector<std::size_t> only_a;
  std::vector<std::size_t> only_b;
  std::vector<std::string> notes;  // keys several cases of one side share, and how they were paired
};

// Pairs each case of `a`, in order, with a case of `b` that shares its key and is not taken yet:
// the one with the same label first, then one of the same backend, then the first. Cases left
// over on either side are listed, never dropped.
CasePairing pair_cases(const std::vector<CaseSummary>& a, const std::vector<CaseSummary>& b, const CaseMatching& matching);

}  // namespace attnprof
