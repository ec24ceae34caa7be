// Findings about a case's device memory (CaseMemory, from CUPTI's memory records): score matrices
// held (math, manual), the out-of-place masked_fill's second score-sized buffer, allocations inside
// the timed loop, a workspace, K/V repeated for grouped heads. add_findings (findings.hpp) calls it;
// docs/report.md lists the kinds.
#pragma once

#include "summary/summary.hpp"

namespace attnprof {

// Appends the memory findings of a case with memory (none without c.memory).
void add_device_memory_findings(CaseSummary& c);

}  // namespace attnprof
