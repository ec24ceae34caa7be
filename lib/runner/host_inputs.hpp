// Inputs of one case on the host: random values drawn from a seeded RNG, rounded to the case's
// dtype, kept both as device-ready bytes and as the exact values the reference must use.
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.hpp"

namespace attnprof {

struct HostInputs {
  AttentionProblem problem;
  // Values after rounding to problem.dtype, as float (exact for bf16/fp16/fp32).
  std::vector<float> q, k, v;
  std::vector<float> bias;  // [seq_q, seq_kv] when problem.has_bias, else empty
  // The same values in the device's storage format (2 or 4 bytes per element).
  std::vector<std::uint8_t> q_bytes, k_bytes, v_bytes;
};

// Draws q, k, v uniformly in [-1, 1) (bias in [-2, 2)) from a generator seeded with `seed`.
HostInputs make_host_inputs(const AttentionProblem& problem, std::uint64_t seed);

// Device-format bytes -> float, for outputs read back from the GPU.
std::vector<float> decode_elements(const std::vector<std::uint8_t>& bytes, DType dtype);

// The bit pattern written over outputs before each checked run: an all-ones NaN in every format,
// so an element the kernel never wrote shows up as NaN.
constexpr std::uint8_t kPoisonByte = 0xff;

}  // namespace attnprof
