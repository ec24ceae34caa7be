#include "summary/roofline.hpp"

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "summary/findings.hpp"

namespace attnprof {
namespace {

void roofline_finding(CaseSummary& c, const Roofs& roofs) {
  const RooflinePoint& r = c.roofline;
  if (!r.roof_percent || r.bound.empty()) return;
  const double compute = roofs.tflops_for(c.problem.dtype);
  std::string message;
  if (r.bound == "memory") {
    message = fmt::format("memory-bound ({:.1f} FLOP/byte, below the ridge at {:.0f}): {:.0f} GB/s of the {:.0f} GB/s "
                          "bandwidth roof ({:.0f}%), {:.0f} GB/s from it",
                          r.intensity, compute * 1e3 / roofs.gbps, r.gbps, roofs.gbps, *r.bandwidth_percent,
                          roofs.gbps - r.gbps);
  } else {
    message = fmt::format("compute-bound ({:.0f} FLOP/byte, above the ridge at {:.0f}): {:.0f} of the {:.0f} {} TFLOP/s "
                          "compute roof ({:.0f}%), {:.0f} TFLOP/s from it",
                          r.intensity, compute * 1e3 / roofs.gbps, r.tflops, compute,
                          c.problem.dtype == DType::fp32 ? "fp32" : "tensor-core", *r.compute_percent, compute - r.tflops);
  }
  c.findings.push_back({"roofline",
                        message,
                        {{"bound", r.bound},
                         {"intensity", r.intensity},
                         {"tflops", r.tflops},
                         {"gbps", r.gbps},
                         {"compute_roof_tflops", compute},
                         {"bandwidth_roof_gbps", roofs.gbps},
                         {"roof_percent", *r.roof_percent}}});
}

// At or above this share of the bandwidth roof, a memory-bound case's idle SMs are not what bounds it.
constexpr double kBusyDramPercent = 80.0;

// The dominant kernel's grid against the SMs: fewer blocks than SMs leaves SMs idle for the whole
// kernel; a last partial wave leaves them idle at its end. Beyond a few waves that is said only
// where it was measured to cost what it seems to: one block per SM, a compute-bound case, no mask
// band and no ragged batch (blocks of equal work). There a block takes about as long in a partial
// last wave as in a full one (H200, flash's backward: 100 blocks in the eighth wave cost 96% of a
// full wave, docs/perf/NOTES.md "v7"), so the wave's empty slots are that share of the SMs' time.
// Not where a stream-K tail kernel (*_tail_kernel, the stream_k_tail finding) walks that last
// wave: the grid then counts blocks that leave at once.
void idle_sm_finding(CaseSummary& c, const DeviceProperties& device) {
  const KernelSummary* k = c.dominant_kernel();
  if (k == nullptr || device.sm_count <= 0 || !k->occupancy_valid || k->active_blocks_per_sm <= 0) return;
  if (has_stream_k_tail(c)) return;
  const double blocks = static_cast<double>(k->grid[0]) * k->grid[1] * k->grid[2];
  if (blocks <= 0) return;
  const double per_wave = static_cast<double>(device.sm_count) * k->active_blocks_per_sm;
  const double waves = blocks / per_wave;
  std::string message;
  if (blocks < device.sm_count) {
    message = fmt::format("{}: {:.0f} blocks on {} SMs: one partial wave, {:.0f} SMs idle for the whole kernel",
                          shorten_name(k->name), blocks, device.sm_count, device.sm_count - blocks);
    // Memory-bound near the bandwidth roof: the busy SMs already keep DRAM near its limit. Measured
    // for flash decode (docs/perf/NOTES.md, "v5"): 96 blocks on 132 SMs ran at 86% of the H200's
    // roof and 6% faster than the split that filled the idle SMs; 64 blocks ran at 73%, 27% slower.
    if (c.roofline.bound == "memory" && c.roofline.bandwidth_percent &&
        *c.roofline.bandwidth_percent >= kBusyDramPercent)
      message += fmt::format("; the case runs at {:.0f}% of the bandwidth roof, so DRAM, not the idle SMs, bounds it",
                             *c.roofline.bandwidth_percent);
  } else if (waves > 1 && waves < 4 && waves - std::floor(waves) > 0 && waves - std::floor(waves) <= 0.5) {
    message = fmt::format("{}: {:.0f} blocks in {:.2f} waves of {:.0f} ({} SMs x {} blocks): the last wave keeps {:.0f}% "
                          "of the slots busy",
                          shorten_name(k->name), blocks, waves, per_wave, device.sm_count, k->active_blocks_per_sm,
                          100.0 * (waves - std::floor(waves)));
  } else if (const double idle = 1 - waves / std::ceil(waves);
             waves > 1 && idle >= 0.02 && k->active_blocks_per_sm == 1 && c.roofline.bound == "compute" &&
             !c.problem.causal && !c.problem.window.bounded() && !c.problem.shape.ragged()) {
    message = fmt::format("{}: {:.0f} blocks in {:.2f} waves of {:.0f} (one block per SM): blocks of equal work take "
                          "about as long in a partial last wave as in a full one, so its {:.0f} empty slots idle {:.1f}% "
                          "of the SMs' time",
                          shorten_name(k->name), blocks, waves, per_wave, std::ceil(waves) * per_wave - blocks,
                          100.0 * idle);
  } else {
    return;
  }
  c.findings.push_back({"idle_sms",
                        message,
                        {{"kernel", k->name},
                         {"blocks", blocks},
                         {"sm_count", device.sm_count},
                         {"blocks_per_sm", k->active_blocks_per_sm},
                         {"waves", waves}}});
}

}  // namespace

void place_on_roofline(RunSummary& summary) {
  if (!summary.roofs) summary.roofs = roofs_from_device(summary.device);
  for (CaseSummary& c : summary.cases) {
    // Placed again (a combined or merged summary): its findings are replaced, not repeated.
    std::erase_if(c.findings, [](const Finding& f) { return f.kind == "roofline" || f.kind == "idle_sms"; });
    c.roofline = roofline_point(c.problem, c.median_us, summary.roofs);
    if (c.status != CaseStatus::ok) continue;
    if (summary.roofs) roofline_finding(c, *summary.roofs);
    idle_sm_finding(c, summary.device);
  }
}

}  // namespace attnprof
