#include "summary/finding_groups.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "summary/findings.hpp"
#include "summary/render.hpp"

namespace attnprof {
namespace {

// The order of the tiers the groups are ranked in (rank_findings).
enum class Tier { cost, correctness, scope, memory, unweighed };

Tier tier_of(const Stake& s) {
  if (s.basis == StakeBasis::correctness) return Tier::correctness;
  if (is_memory_stake(s)) return Tier::memory;
  if (s.basis == StakeBasis::none) return Tier::unweighed;
  return s.cost ? Tier::cost : Tier::scope;
}

// Larger first: the tier, then the share, then the time (bytes, for memory).
bool more_at_stake(const Stake& a, const Stake& b) {
  if (tier_of(a) != tier_of(b)) return tier_of(a) < tier_of(b);
  if (a.share_percent != b.share_percent) return a.share_percent > b.share_percent;
  if (tier_of(a) == Tier::memory) return a.bytes > b.bytes;
  return a.us > b.us;
}

double total_us(const FindingGroup& g) {
  return std::accumulate(g.stakes.begin(), g.stakes.end(), 0.0, [](double sum, const Stake& s) { return sum + s.us; });
}

bool shown_by_default(const FindingGroup& g) {
  switch (tier_of(g.lead())) {
    case Tier::cost: return g.lead().share_percent >= kShownSharePercent;
    case Tier::correctness: return true;
    case Tier::scope: return g.lead().share_percent >= kShownScopePercent;
    case Tier::memory: return g.lead().cost || g.lead().share_percent >= kShownMemorySharePercent;
    case Tier::unweighed: return false;
  }
  return false;
}

std::string percent_text(double percent) {
  return percent >= 10 || percent == 0 ? fmt::format("{:.0f}%", percent) : fmt::format("{:.1f}%", percent);
}

// A case's figure beside its label: its share, or the bytes of a memory stake without a peak.
std::string figure_text(const Stake& stake) {
  return is_memory_stake(stake) && stake.share_percent <= 0 ? format_bytes(stake.bytes) : percent_text(stake.share_percent);
}

}  // namespace

std::vector<FindingGroup> rank_findings(const RunSummary& summary) {
  struct Member {
    std::size_t case_index;
    const Finding* finding;
  };
  std::map<std::string, std::vector<Member>> by_kind;
  for (std::size_t c = 0; c < summary.cases.size(); ++c)
    for (const Finding& f : summary.cases[c].findings) {
      std::vector<Member>& members = by_kind[f.kind];
      // A case's two findings of one kind: the larger stake speaks for the case.
      const auto same_case = std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.case_index == c; });
      if (same_case == members.end()) members.push_back({c, &f});
      else if (more_at_stake(f.stake, same_case->finding->stake)) same_case->finding = &f;
    }

  std::vector<FindingGroup> groups;
  for (auto& [kind, members] : by_kind) {
    // Equal stakes keep the run's case order.
    std::stable_sort(members.begin(), members.end(),
                     [](const Member& a, const Member& b) { return more_at_stake(a.finding->stake, b.finding->stake); });
    FindingGroup g{kind, members.front().finding->message, {}, {}};
    for (const Member& m : members) {
      g.cases.push_back(m.case_index);
      g.stakes.push_back(m.finding->stake);
    }
    groups.push_back(std::move(g));
  }
  std::stable_sort(groups.begin(), groups.end(), [](const FindingGroup& a, const FindingGroup& b) {
    if (more_at_stake(a.lead(), b.lead())) return true;
    if (more_at_stake(b.lead(), a.lead())) return false;
    return total_us(a) > total_us(b);
  });
  return groups;
}

FindingsView findings_view_named(const std::vector<std::string>& words) {
  const auto bad = [&] {
    return UsageError(fmt::format("--findings '{}': use all, default, or top N (N at least 1)", fmt::join(words, " ")));
  };
  if (words.empty()) return {};
  if (words.size() == 1 && words[0] == "all") return {FindingsView::Mode::all, 0};
  if (words.size() == 1 && words[0] == "default") return {};
  if (words.size() != 2 || words[0] != "top") throw bad();
  std::size_t n = 0;
  const std::string& text = words[1];
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || end != text.data() + text.size() || n == 0) throw bad();
  return {FindingsView::Mode::top, n};
}

SelectedFindings select_findings(std::vector<FindingGroup> ranked, const FindingsView& view) {
  SelectedFindings selected;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const bool show = view.mode == FindingsView::Mode::all ||
                      (view.mode == FindingsView::Mode::top && i < view.top) ||
                      (view.mode == FindingsView::Mode::standard && shown_by_default(ranked[i]));
    if (show) {
      selected.shown.push_back(std::move(ranked[i]));
    } else {
      ++selected.folded_groups;
      selected.folded_findings += ranked[i].cases.size();
    }
  }
  return selected;
}

std::string stake_text(const Stake& stake) {
  switch (stake.basis) {
    case StakeBasis::gpu_time: return percent_text(stake.share_percent) + " GPU";
    case StakeBasis::host_time: return percent_text(stake.share_percent) + " host";
    case StakeBasis::first_call: return percent_text(stake.share_percent) + " 1st call";
    case StakeBasis::correctness: return "differs";
    case StakeBasis::none:
      if (!is_memory_stake(stake)) return "";
      return stake.share_percent > 0 ? percent_text(stake.share_percent) + " mem" : format_bytes(stake.bytes);
  }
  return "";
}

std::string finding_group_cases(const FindingGroup& group, const RunSummary& summary, std::size_t listed) {
  const std::size_t n = group.cases.size();
  const bool figures = n > 1 && !stake_text(group.lead()).empty() && group.lead().basis != StakeBasis::correctness;
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < n && i < listed; ++i) {
    std::string part = summary.cases[group.cases[i]].label;
    if (figures) part += " " + figure_text(group.stakes[i]);
    parts.push_back(std::move(part));
  }
  std::string text = fmt::format("{}", fmt::join(parts, ", "));
  if (n <= listed) return text;
  text += fmt::format(" and {} more", n - listed);
  if (figures) {
    const std::string high = figure_text(group.stakes[listed]), low = figure_text(group.stakes.back());
    text += high == low ? fmt::format(" ({})", high) : fmt::format(" ({}-{})", low, high);
  }
  return text;
}

std::string finding_group_subject(const FindingGroup& group, const RunSummary& summary, std::size_t max_width) {
  const std::size_t n = group.cases.size();
  if (n == 1) return summary.cases[group.cases.front()].label;
  if (n == summary.cases.size()) return fmt::format("all {} cases", n);
  // The backends in the run's case order, whatever order the stakes put the cases in.
  std::vector<std::size_t> in_run_order = group.cases;
  std::sort(in_run_order.begin(), in_run_order.end());
  std::vector<std::string> backends;
  for (std::size_t c : in_run_order) {
    const std::string& backend = summary.cases[c].backend;
    // Cases of a profiled program have no backend: name them by their labels instead.
    if (backend.empty()) {
      backends.clear();
      break;
    }
    if (std::find(backends.begin(), backends.end(), backend) == backends.end()) backends.push_back(backend);
  }
  if (!backends.empty()) {
    std::string text = fmt::format("{}, {} cases", fmt::join(backends, ", "), n);
    // Too wide: the first backend and how many others.
    if (text.size() > max_width && backends.size() > 1)
      text = fmt::format("{} +{}, {} cases", backends.front(), backends.size() - 1, n);
    return text;
  }
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < n && i < 2; ++i) labels.push_back(summary.cases[in_run_order[i]].label);
  if (n > 2) labels.push_back(fmt::format("{} more", n - 2));
  return fmt::format("{} cases ({})", n, fmt::join(labels, ", "));
}

std::string finding_kind_title(const std::string& kind) {
  std::string title = kind;
  std::replace(title.begin(), title.end(), '_', ' ');
  return title;
}

}  // namespace attnprof
