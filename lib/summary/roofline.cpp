#include "summary/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "summary/findings.hpp"

namespace attnprof {

IdleSms idle_sms_of(const CaseSummary& c, const DeviceProperties& device) {
  IdleSms idle;
  const KernelSummary* k = c.dominant_kernel();
  if (k == nullptr || device.sm_count <= 0 || !k->occupancy_valid || k->active_blocks_per_sm <= 0) return idle;
  idle.blocks = static_cast<double>(k->grid[0]) * k->grid[1] * k->grid[2];
  if (idle.blocks <= 0) return idle;
  idle.known = true;
  idle.per_wave = static_cast<double>(device.sm_count) * k->active_blocks_per_sm;
  idle.waves = idle.blocks / idle.per_wave;
  // The last wave's blocks, and the SMs none of them lands on.
  const double last = idle.blocks - std::floor((idle.blocks - 1) / idle.per_wave) * idle.per_wave;
  idle.last_wave_idle = device.sm_count - std::min<double>(device.sm_count, std::ceil(last / k->active_blocks_per_sm));
  idle.idle_share = 1 - idle.waves / std::ceil(idle.waves);
  return idle;
}

namespace {

// At or above this share of the bandwidth roof, a memory-bound case's idle SMs are not what bounds it.
constexpr double kBusyDramPercent = 80.0;

// The dominant kernel's grid against the SMs, as a finding where it costs what it seems to (the
// kernels table's "idle SMs" column says it for every case):
// - fewer blocks than half the SMs, at a realistic size: most SMs idle for the whole kernel. Not
//   where the case runs near the bandwidth roof: flash decode (docs/perf/NOTES.md, "v5") ran 96
//   blocks on 132 SMs at 86% of the H200's roof, 6% faster than the split that filled the idle
//   SMs, so there the busy SMs already keep DRAM near its limit.
// - a last partial wave of one block per SM, compute-bound, no mask band and no ragged batch
//   (blocks of equal work): there a block takes about as long in a partial wave as in a full one
//   (H200, flash's backward: 100 blocks in the eighth wave cost 96% of a full wave, NOTES "v7"),
//   so the wave's empty slots are that share of the SMs' time.
// Not where a stream-K tail kernel (*_tail_kernel, the stream_k_tail finding) walks that last
// wave: the grid then counts blocks that leave at once.
void idle_sm_finding(CaseSummary& c, const DeviceProperties& device) {
  const IdleSms idle = idle_sms_of(c, device);
  if (!idle.known || has_stream_k_tail(c)) return;
  const KernelSummary& k = *c.dominant_kernel();
  const bool near_bandwidth_roof = c.roofline.bound == "memory" && c.roofline.bandwidth_percent &&
                                   *c.roofline.bandwidth_percent >= kBusyDramPercent;
  std::string message;
  double idle_fraction = 0;
  if (idle.blocks < 0.5 * device.sm_count && at_realistic_size(c.problem) && !near_bandwidth_roof) {
    idle_fraction = 1 - idle.blocks / device.sm_count;
    message = fmt::format("{}: {:.0f} blocks on {} SMs: one partial wave, {:.0f} SMs ({:.0f}%) idle for the whole kernel",
                          shorten_name(k.name), idle.blocks, device.sm_count, device.sm_count - idle.blocks,
                          100.0 * idle_fraction);
  } else if (idle.waves > 1 && idle.idle_share >= 0.02 && k.active_blocks_per_sm == 1 && c.roofline.bound == "compute" &&
             !c.problem.causal && !c.problem.window.bounded() && !c.problem.shape.ragged()) {
    idle_fraction = idle.idle_share;
    message = fmt::format("{}: {:.0f} blocks in {:.2f} waves of {:.0f} (one block per SM): blocks of equal work take "
                          "about as long in a partial last wave as in a full one, so its {:.0f} empty slots idle {:.1f}% "
                          "of the SMs' time",
                          shorten_name(k.name), idle.blocks, idle.waves, idle.per_wave,
                          std::ceil(idle.waves) * idle.per_wave - idle.blocks, 100.0 * idle.idle_share);
  } else {
    return;
  }
  c.findings.push_back({"idle_sms",
                        message,
                        {{"kernel", k.name},
                         {"blocks", idle.blocks},
                         {"sm_count", device.sm_count},
                         {"blocks_per_sm", k.active_blocks_per_sm},
                         {"waves", idle.waves},
                         {"idle_fraction", idle_fraction}},
                        gpu_time_cost(c, k.gpu_us_per_iter * idle_fraction)});
}

}  // namespace

void place_on_roofline(RunSummary& summary) {
  if (!summary.roofs) summary.roofs = roofs_from_device(summary.device);
  for (CaseSummary& c : summary.cases) {
    // Placed again (a combined or merged summary): its findings are replaced, not repeated. A
    // summary written before the roofline became columns has "roofline" findings: gone too.
    std::erase_if(c.findings, [](const Finding& f) { return f.kind == "roofline" || f.kind == "idle_sms"; });
    c.roofline = roofline_point(c.problem, c.median_us, summary.roofs);
    if (c.status != CaseStatus::ok) continue;
    idle_sm_finding(c, summary.device);
  }
}

}  // namespace attnprof
