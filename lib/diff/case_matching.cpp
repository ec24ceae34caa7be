#include "diff/case_matching.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "summary/program_summary.hpp"
#include "summary/render.hpp"

namespace attnprof {
namespace {

// A case of a program nobody tagged: no backend, and the problem `report` gives such cases.
bool is_program_case(const CaseSummary& c) { return c.backend.empty() && c.problem == unknown_problem(); }

std::string_view rule_name(MatchRule rule) {
  for (const MatchRuleName& r : kMatchRules)
    if (r.rule == rule) return r.name;
  return "";
}

std::string backend_family(const std::string& backend) { return backend.substr(0, backend.find(':')); }

std::string backend_in_key(const CaseSummary& c, const CaseMatching& m) {
  if (m.has(MatchRule::backend)) return "*";
  if (m.has(MatchRule::variant)) return backend_family(c.backend) + ":*";
  return c.backend;
}

AttentionProblem problem_in_key(const CaseSummary& c, const CaseMatching& m) {
  AttentionProblem p = c.problem;
  if (m.has(MatchRule::dtype)) p.dtype = DType::bf16;  // any one value: the dtype no longer tells cases apart
  return p;
}

bool device_in_key(const CaseMatching& m) { return !m.has(MatchRule::device); }

std::string key_without_device(const CaseSummary& c, const CaseMatching& m) {
  if (m.has(MatchRule::label)) return fmt::format("label \"{}\"", c.label);
  if (is_program_case(c)) return fmt::format("range \"{}\"", c.label);
  AttentionProblem p = problem_in_key(c, m);
  std::string text = case_label(backend_in_key(c, m), p);
  if (m.has(MatchRule::dtype)) {
    const std::string dtype(to_string(p.dtype));
    if (const auto at = text.find(fmt::format(" {} ", dtype)); at != std::string::npos)
      text = fmt::format("{}*{}", text.substr(0, at + 1), text.substr(at + 1 + dtype.size()));
  }
  if (p.scale != 0.f) text += fmt::format(" scale {}", p.scale);
  return text;
}

int label_and_backend_score(const CaseSummary& a, const CaseSummary& b) {
  return (a.label == b.label ? 2 : 0) + (a.backend == b.backend ? 1 : 0);
}

std::vector<std::string> shared_key_notes(const std::vector<CaseSummary>& cases, const CaseMatching& m, const char* side) {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (const CaseSummary& c : cases)
    if (count[match_key_text(c, m)]++ == 0) order.push_back(match_key_text(c, m));
  std::vector<std::string> notes;
  for (const std::string& key : order)
    if (count[key] > 1)
      notes.push_back(fmt::format("{} cases of {} share the key {}: paired by label, then backend, then order",
                                  count[key], side, key));
  return notes;
}

CasePairing pair_in_order(std::size_t a_count, std::size_t b_count) {
  CasePairing pairing;
  for (std::size_t i = 0; i < std::min(a_count, b_count); ++i) pairing.pairs.emplace_back(i, i);
  for (std::size_t i = b_count; i < a_count; ++i) pairing.only_a.push_back(i);
  for (std::size_t i = a_count; i < b_count; ++i) pairing.only_b.push_back(i);
  return pairing;
}

}  // namespace

std::vector<std::string> match_rule_names() {
  std::vector<std::string> names;
  for (const MatchRuleName& r : kMatchRules) names.emplace_back(r.name);
  return names;
}

std::string match_rules_help() {
  std::string text;
  for (const MatchRuleName& r : kMatchRules)
    text += fmt::format("{}  {:<8} {}", text.empty() ? "" : "\n", r.name, r.meaning);
  return text;
}

bool CaseMatching::has(MatchRule rule) const { return std::find(rules.begin(), rules.end(), rule) != rules.end(); }

CaseMatching parse_match_rules(const std::vector<std::string>& words) {
  CaseMatching matching;
  for (const std::string& word : words) {
    const auto known = std::find_if(kMatchRules.begin(), kMatchRules.end(),
                                    [&](const MatchRuleName& r) { return r.name == word; });
    if (known == kMatchRules.end())
      throw UsageError(fmt::format("unknown --match rule '{}': use {}", word, choice_list(match_rule_names())));
    if (!matching.has(known->rule)) matching.rules.push_back(known->rule);
  }
  for (MatchRule alone : {MatchRule::label, MatchRule::order})
    if (matching.has(alone) && matching.rules.size() > 1)
      throw UsageError(fmt::format("--match {} pairs cases by itself and cannot be combined with other rules ({})",
                                   rule_name(alone), fmt::join(words, ",")));
  return matching;
}

std::string match_key_text(const CaseSummary& c, const CaseMatching& m) {
  std::string text = key_without_device(c, m);
  if (device_in_key(m) && c.device != 0) text += fmt::format(" on GPU {}", c.device);
  return text;
}

bool same_match_key(const CaseSummary& a, const CaseSummary& b, const CaseMatching& m) {
  if (device_in_key(m) && a.device != b.device) return false;
  if (m.has(MatchRule::label)) return a.label == b.label;
  if (is_program_case(a) || is_program_case(b)) return is_program_case(a) && is_program_case(b) && a.label == b.label;
  return backend_in_key(a, m) == backend_in_key(b, m) && problem_in_key(a, m) == problem_in_key(b, m);
}

CasePairing pair_cases(const std::vector<CaseSummary>& a, const std::vector<CaseSummary>& b, const CaseMatching& m) {
  if (m.has(MatchRule::order)) return pair_in_order(a.size(), b.size());
  CasePairing pairing;
  std::vector<bool> taken(b.size(), false);
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::size_t best = b.size();
    for (std::size_t j = 0; j < b.size(); ++j)
      if (!taken[j] && same_match_key(a[i], b[j], m) &&
          (best == b.size() || label_and_backend_score(a[i], b[j]) > label_and_backend_score(a[i], b[best])))
        best = j;
    if (best == b.size()) {
      pairing.only_a.push_back(i);
      continue;
    }
    taken[best] = true;
    pairing.pairs.emplace_back(i, best);
  }
  for (std::size_t j = 0; j < b.size(); ++j)
    if (!taken[j]) pairing.only_b.push_back(j);
  for (const auto& [cases, side] : {std::pair{&a, "A"}, std::pair{&b, "B"}})
    for (std::string& note : shared_key_notes(*cases, m, side)) pairing.notes.push_back(std::move(note));
  return pairing;
}

}  // namespace attnprof
