#include "summary/finding_groups.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attnprof {

std::vector<FindingGroup> group_findings(const RunSummary& summary) {
  // The key is (kind, message). The message is the finding as a reader sees it and carries the
  // case's own facts at the precision it states them (counts, bytes, the API, the kernel, times),
  // so two cases with equal messages make the same claim and any fact that differs keeps them
  // apart. The evidence stays out of the key: it holds unrounded times and full template names
  // that differ between shapes where the claim does not. The kind keeps two checks that happen to
  // phrase alike apart.
  std::vector<FindingGroup> groups;
  std::map<std::pair<std::string, std::string>, std::size_t> index_of;
  for (std::size_t c = 0; c < summary.cases.size(); ++c) {
    for (const Finding& f : summary.cases[c].findings) {
      const auto [at, added] = index_of.try_emplace({f.kind, f.message}, groups.size());
      if (added) groups.push_back({f.kind, f.message, {}});
      std::vector<std::size_t>& cases = groups[at->second].cases;
      // A case that reports the same finding twice is one case of the group.
      if (cases.empty() || cases.back() != c) cases.push_back(c);
    }
  }
  return groups;
}

std::string finding_group_subject(const FindingGroup& group, const RunSummary& summary) {
  const std::size_t n = group.cases.size();
  if (n == 1) return summary.cases[group.cases.front()].label;
  if (n == summary.cases.size()) return fmt::format("all {} cases", n);
  std::vector<std::string> backends;
  for (std::size_t c : group.cases) {
    const std::string& backend = summary.cases[c].backend;
    // Cases of a profiled program have no backend: name them by their labels instead.
    if (backend.empty()) {
      backends.clear();
      break;
    }
    if (std::find(backends.begin(), backends.end(), backend) == backends.end()) backends.push_back(backend);
  }
  if (!backends.empty()) return fmt::format("{}, {} cases", fmt::join(backends, ", "), n);
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < n && i < 2; ++i) labels.push_back(summary.cases[group.cases[i]].label);
  if (n > 2) labels.push_back(fmt::format("{} more", n - 2));
  return fmt::format("{} cases ({})", n, fmt::join(labels, ", "));
}

std::string finding_kind_title(const std::string& kind) {
  std::string title = kind;
  std::replace(title.begin(), title.end(), '_', ' ');
  return title;
}

}  // namespace attnprof
