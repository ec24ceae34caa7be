// Host-side conversion between float and the 16-bit storage formats, round-to-nearest-even.
// Written out here so the CPU side (inputs, reference, trace tests) needs no CUDA headers.
#pragma once

#include <cstdint>
#include <cstring>

namespace attnprof {

inline std::uint16_t float_to_bf16_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float bf16_bits_to_float(std::uint16_t half) {
  const std::uint32_t bits = static_cast<std::uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

std::uint16_t float_to_fp16_bits(float value);
float fp16_bits_to_float(std::uint16_t half);

}  // namespace attnprof
