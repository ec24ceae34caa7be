// Each case under the GPU's roofs, and what only the device explains: which roof bounds a case
// and how far below it the case stays, and a dominant kernel whose grid leaves SMs idle. Run on a
// finished summary (the run's, the report's, a profiled program's), after the case findings.
#pragma once

#include "summary/summary.hpp"

namespace attnprof {

// Sets summary.roofs from its device when unset, each case's roof fractions (the table's bound and
// roof columns), and adds the "idle_sms" finding where the idle SMs cost time (replacing those a
// previous call added).
// One step of analyze_run (summary/analysis.hpp): commands call that, not this.
void place_on_roofline(RunSummary& summary);

// The dominant kernel's blocks against the SMs: how many waves, and the SMs its last wave leaves
// idle (all but the grid's when it has fewer blocks than SMs). Unknown without an occupancy.
struct IdleSms {
  bool known = false;
  double blocks = 0;
  double per_wave = 0;        // SMs x blocks per SM
  double waves = 0;           // blocks / per_wave
  double last_wave_idle = 0;  // SMs without a block in the last wave
  double idle_share = 0;      // of the slots of all waves, the empty ones (the last wave's)
};
IdleSms idle_sms_of(const CaseSummary& c, const DeviceProperties& device);

}  // namespace attnprof
