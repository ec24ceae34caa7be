// The one analysis pipeline: every command that turns activity into a summary (run, run
// --devices, profile, report, merge) calls these three steps, in this order, and nothing else
// of the analysis. Adding a step here adds it everywhere; no entry point wires steps by hand.
//
//   prepare_batch   recorded activity, before it is written: each kernel's theoretical occupancy
//                   and limiter for its device, host NVTX ranges projected onto their GPU streams
//   analyze_case    one case's summary: its findings, then its surprises against the user's guesses
//   analyze_run     the finished run: each case under the device's roofs (and SMs its dominant
//                   kernel leaves idle), then the findings that compare cases (backward / forward)
#pragma once

#include <vector>

#include "config/config.hpp"
#include "core/device_properties.hpp"
#include "summary/summary.hpp"
#include "trace/model.hpp"

namespace attnprof {

// Occupancy per kernel record (devices: by ordinal; a kernel whose device is not listed keeps
// none), then a gpu_user_annotation on each stream for every host range that launched work there.
// Call once per batch, after its records carry their case tags.
void prepare_batch(trace::ActivityBatch& batch, const std::vector<DeviceProperties>& devices);

// The same for one kernel read back from a saved trace (report): its occupancy on `device`.
// (A saved trace already holds its GPU-projected ranges.)
void prepare_kernel(trace::KernelActivity& kernel, const DeviceProperties& device);

// Appends the case's findings and, with the user's expectations, its surprises (a null
// `expectations` leaves c.surprises as they are: a report without the run's config keeps the
// run's own). Cases that did not run get neither.
void analyze_case(CaseSummary& c, const std::vector<Expectation>* expectations);

// Places every case under summary.roofs (set from summary.device when unset) and adds the
// run-level findings. Idempotent: the findings it owns are replaced, not added twice, so a
// merged or combined summary can be analysed again.
void analyze_run(RunSummary& summary);

}  // namespace attnprof
