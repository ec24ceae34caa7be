// Each case under the GPU's roofs, and what only the device explains: which roof bounds a case
// and how far below it the case stays, and a dominant kernel whose grid leaves SMs idle. Run on a
// finished summary (the run's, the report's, a profiled program's), after the case findings.
#pragma once

#include "summary/summary.hpp"

namespace attnprof {

// Sets summary.roofs from its device when unset, each case's roof fractions, and adds the
// "roofline" and "idle_sms" findings to the cases that ran (replacing those a previous call added).
// One step of analyze_run (summary/analysis.hpp): commands call that, not this.
void place_on_roofline(RunSummary& summary);

}  // namespace attnprof
