#include "core/half_convert.hpp"

#include <cmath>

namespace attnprof {

std::uint16_t float_to_fp16_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // rounds to inf
  if (magnitude < 0x38800000u) {
    // Subnormal in fp16 (or zero): scale into the 10-bit mantissa with round-to-nearest-even,
    // which the FPU does for us when adding 0.5 (2^-1) as the magic constant.
    float f;
    std::uint32_t m = magnitude;
    std::memcpy(&f, &m, 4);
    f += 0.5f;
    std::uint32_t r;
    std::memcpy(&r, &f, 4);
    return static_cast<std::uint16_t>(sign | (r - 0x3f000000u));
  }
  const std::uint32_t mantissa_odd = (magnitude >> 13) & 1u;
  std::uint32_t rounded = magnitude + 0xc8000fffu + mantissa_odd;  // rebias exponent (-112<<23) and round
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float fp16_bits_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else {
    const std::uint32_t bits = ((exponent + 112u) << 23) | (mantissa << 13);
    std::memcpy(&value, &bits, 4);
  }
  return (sign != 0) ? -value : value;
}

}  // namespace attnprof
