// The GPU's two roofs (peak dense math and device-memory bandwidth) and where a case sits under
// them. The roofs come from the device's properties: SMs x clock x the architecture's FLOPs per
// clock per SM, and 2 (double data rate) x memory clock x bus width. They are datasheet-style
// peaks; what a kernel can reach is lower (on the H200 a bf16 GEMM reaches ~762 of 1070 TFLOP/s,
// a device copy ~4.2 of 4.8 TB/s; ../docs/perf/NOTES.md).
#pragma once

#include <optional>
#include <string>

#include "core/device_properties.hpp"
#include "core/types.hpp"

namespace attnprof {

struct Roofs {
  double tensor_tflops = 0;  // dense fp16/bf16 on tensor cores (fp32 accumulate)
  double fp32_tflops = 0;    // fp32 FMA on the CUDA cores
  double gbps = 0;           // device memory, 10^9 bytes per second
  std::string source;        // how the numbers were obtained, for the summary and the report

  // The compute roof a case of `dtype` is held to: tensor cores for fp16/bf16, CUDA cores for fp32.
  double tflops_for(DType dtype) const { return dtype == DType::fp32 ? fp32_tflops : tensor_tflops; }
};

// From the device's SM count, clocks and memory bus; nullopt for an architecture whose FLOPs per
// clock this table does not know, or when the clocks are missing.
std::optional<Roofs> roofs_from_device(const DeviceProperties& device);

// Where one measured case sits: its exact FLOPs and minimum bytes, what it achieved, its
// arithmetic intensity, and (with roofs) which roof bounds it and how close it came.
struct RooflinePoint {
  double flops = 0;
  double min_bytes = 0;
  double tflops = 0;      // achieved: flops / median time
  double gbps = 0;        // achieved: min_bytes / median time
  double intensity = 0;   // flops / min_bytes, FLOP per byte
  // With roofs:
  std::optional<double> compute_percent;    // tflops / compute roof
  std::optional<double> bandwidth_percent;  // gbps / bandwidth roof
  std::optional<double> roof_percent;       // tflops / min(compute roof, intensity x bandwidth roof)
  std::string bound;                        // "memory" or "compute": which roof is lower at this intensity
};

RooflinePoint roofline_point(const AttentionProblem& problem, double median_us, const std::optional<Roofs>& roofs);

}  // namespace attnprof
