#include "core/roofline.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace attnprof {
namespace {

// Dense FLOPs per clock per SM (an FMA counts 2): {tensor fp16/bf16 with fp32 accumulate, fp32 FMA}.
// From the architecture whitepapers: A100 (sm_80) 312 TFLOP/s = 108 SMs x 1.41 GHz x 2048; H100/H200
// (sm_90) 989 TFLOP/s = 132 SMs x 1.83 GHz x 4096; sm_86/sm_89 tensor 512 (fp32 accumulate);
// 64 (sm_80) or 128 (sm_86+) fp32 cores per SM.
struct PerClock {
  int major, minor;
  double tensor, fp32;
};
constexpr PerClock kPerClock[] = {
    {8, 0, 2048, 128}, {8, 6, 512, 256}, {8, 7, 2048, 256}, {8, 9, 512, 256}, {9, 0, 4096, 256},
};

}  // namespace

std::optional<Roofs> roofs_from_device(const DeviceProperties& d) {
  const auto it = std::find_if(std::begin(kPerClock), std::end(kPerClock), [&](const PerClock& p) {
    return p.major == d.compute_major && p.minor == d.compute_minor;
  });
  if (it == std::end(kPerClock) || d.sm_count <= 0 || d.clock_rate_khz <= 0 || d.memory_clock_rate_khz <= 0 ||
      d.memory_bus_width_bits <= 0)
    return std::nullopt;
  Roofs r;
  const double clock_hz = d.clock_rate_khz * 1e3;
  r.tensor_tflops = d.sm_count * clock_hz * it->tensor / 1e12;
  r.fp32_tflops = d.sm_count * clock_hz * it->fp32 / 1e12;
  r.gbps = 2.0 * d.memory_clock_rate_khz * 1e3 * d.memory_bus_width_bits / 8 / 1e9;
  r.source = fmt::format(
      "device properties: {} SMs x {:.0f} MHz x {:.0f} (tensor fp16/bf16) or {:.0f} (fp32) FLOP per clock per SM; "
      "2 x {:.0f} MHz x {}-bit memory bus",
      d.sm_count, clock_hz / 1e6, it->tensor, it->fp32, d.memory_clock_rate_khz / 1e3, d.memory_bus_width_bits);
  return r;
}

RooflinePoint roofline_point(const AttentionProblem& problem, double median_us, const std::optional<Roofs>& roofs) {
  RooflinePoint p;
  p.flops = attention_flops(problem);
  p.min_bytes = attention_min_bytes(problem);
  p.intensity = p.min_bytes > 0 ? p.flops / p.min_bytes : 0;
  if (median_us > 0) {
    p.tflops = p.flops / (median_us * 1e-6) / 1e12;
    p.gbps = p.min_bytes / (median_us * 1e-6) / 1e9;
  }
  if (!roofs || p.min_bytes <= 0) return p;
  const double compute = roofs->tflops_for(problem.dtype);
  const double bandwidth_bound = p.intensity * roofs->gbps / 1e3;  // TFLOP/s the bandwidth allows
  if (compute <= 0 || roofs->gbps <= 0) return p;
  p.bound = bandwidth_bound < compute ? "memory" : "compute";
  if (median_us > 0) {
    p.compute_percent = 100.0 * p.tflops / compute;
    p.bandwidth_percent = 100.0 * p.gbps / roofs->gbps;
    p.roof_percent = 100.0 * p.tflops / std::min(compute, bandwidth_bound);
  }
  return p;
}

}  // namespace attnprof
