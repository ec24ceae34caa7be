// Findings grouped across cases: a sweep of eight shapes that each copy 4 bytes per iteration
// says so once, with the cases it applies to, instead of eight times.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "summary/summary.hpp"

namespace attnprof {

struct FindingGroup {
  std::string kind;                // Finding::kind
  std::string message;             // Finding::message, the same for every case of the group
  std::vector<std::size_t> cases;  // indexes into RunSummary::cases, in run order
};

// Groups in order of first appearance (case order, then each case's own order).
std::vector<FindingGroup> group_findings(const RunSummary& summary);

// Who a group applies to, for a line that starts with it: the case label for one case,
// "all 8 cases", or the backends and a count ("manual:out_of_place, manual:in_place, 2 cases").
std::string finding_group_subject(const FindingGroup& group, const RunSummary& summary);

// "memcpy in iteration" from "memcpy_in_iteration".
std::string finding_kind_title(const std::string& kind);

}  // namespace attnprof
