// Counter-based inputs: element `index` of one input tensor of a case is a pure function of
// (seed, tensor, index), with the same bits on the CPU and on the GPU. The device fills q, k, v
// from it (kernels/inputs) and the float64 verifier regenerates only the rows it checks
// (reference/). One definition for both sides: nvcc compiles it as host and device code, a plain
// C++ compiler as host code. Nothing here may depend on floating-point contraction (nvcc fuses
// a*b+c into an FMA by default) or on a math library: integer mixing, then explicitly rounded
// float operations.
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "core/types.hpp"

#if defined(__CUDACC__)
#define ATTNPROF_RANDOM_INLINE __host__ __device__ __forceinline__
#else
#define ATTNPROF_RANDOM_INLINE inline
#endif

// The host path below relies on float arithmetic being done in float or exactly rounded from double.
#if !defined(__CUDA_ARCH__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 1
#error "counter_random.hpp needs FLT_EVAL_METHOD 0 or 1 (no x87 extended precision)"
#endif

namespace attnprof {

// Each input tensor of a case has its own stream of values; grad_o is a backward case's upstream
// gradient dO ([B, H, Sq, D], like q).
enum class InputTensor : std::uint32_t { q = 0, k = 1, v = 2, bias = 3, grad_o = 4 };

struct InputRange {
  float low;
  float high;
};

// q, k, v (and dO) uniform in [-1, 1), bias in [-2, 2); a backward case's v in [0, 1). With v of
// mean 0 the outputs are near 0, so D = rowsum(dO * O) is too, and a backward that forgot to
// subtract it from dP passed; with v of mean 1/2, dP and D share a large term that only the
// subtraction removes. Every range is exact in float (every draw is low + j * 2^-24 * width), so
// only the rounding to bf16/fp16 can reach `high`.
constexpr InputRange input_range(InputTensor tensor, AttentionPass pass = AttentionPass::forward) {
  if (tensor == InputTensor::bias) return {-2.f, 2.f};
  if (tensor == InputTensor::v && pass == AttentionPass::backward) return {0.f, 1.f};
  return {-1.f, 1.f};
}

namespace counter_random {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;      // 2^64 / golden ratio, odd
constexpr std::uint64_t kTensorSalt = 0x6a09e667f3bcc909ull;  // fraction of sqrt(2), odd

// Stafford's Mix13, the SplitMix64 output function: a bijection of 64-bit words in which every
// output bit depends on every input bit.
ATTNPROF_RANDOM_INLINE std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

ATTNPROF_RANDOM_INLINE std::uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
#endif
}

ATTNPROF_RANDOM_INLINE float bits_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
#endif
}

// Correctly rounded float multiply and add, never contracted. On the host the double product
// of two floats is exact, and a double sum rounded to float is correctly rounded because
// 53 >= 2*24 + 2 (double rounding is innocuous); the conversion to float between the steps
// stops any compiler from fusing them.
ATTNPROF_RANDOM_INLINE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
#endif
}

ATTNPROF_RANDOM_INLINE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return static_cast<float>(static_cast<double>(a) + static_cast<double>(b));
#endif
}

ATTNPROF_RANDOM_INLINE float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return static_cast<float>(static_cast<double>(a) - static_cast<double>(b));
#endif
}

}  // namespace counter_random

// The key of one tensor's stream under `seed`.
ATTNPROF_RANDOM_INLINE std::uint64_t input_stream(std::uint64_t seed, InputTensor tensor) {
  using namespace counter_random;
  return mix64(seed ^ ((static_cast<std::uint64_t>(tensor) + 1) * kTensorSalt));
}

// 64 random bits for the element pair (2 * pair, 2 * pair + 1) of a stream: SplitMix64's output
// at position `pair`. One hash serves two elements, halving the integer work of a fill.
ATTNPROF_RANDOM_INLINE std::uint64_t pair_bits(std::uint64_t stream, std::uint64_t pair) {
  return counter_random::mix64(stream + pair * counter_random::kGolden);
}

// The 32 bits of element `index` out of its pair's 64: the even element takes the high half.
ATTNPROF_RANDOM_INLINE std::uint32_t element_bits(std::uint64_t pair_hash, std::uint64_t index) {
  return static_cast<std::uint32_t>((index & 1u) != 0 ? pair_hash : pair_hash >> 32);
}

// Uniform in [low, high) from 32 random bits (their top 24): low + (high - low) * j * 2^-24.
ATTNPROF_RANDOM_INLINE float uniform_from_bits(std::uint32_t bits, float low, float high) {
  using namespace counter_random;
  const float unit = mul_rn(static_cast<float>(bits >> 8), 0x1p-24f);  // exact
  return add_rn(low, mul_rn(sub_rn(high, low), unit));
}

// Element `index` of a stream, uniform in [low, high), before rounding to the tensor's dtype.
ATTNPROF_RANDOM_INLINE float uniform_input(std::uint64_t stream, std::uint64_t index, float low, float high) {
  return uniform_from_bits(element_bits(pair_bits(stream, index >> 1), index), low, high);
}

// float -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
ATTNPROF_RANDOM_INLINE std::uint16_t round_to_bf16_bits(float value) {
  const std::uint32_t bits = counter_random::float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// float -> fp16 bits, round to nearest even, with subnormals, overflow to infinity and NaN,
// in integers only.
ATTNPROF_RANDOM_INLINE std::uint16_t round_to_fp16_bits(float value) {
  const std::uint32_t bits = counter_random::float_bits(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (magnitude >= 0x38800000u) {  // normal in fp16: rebias the exponent (-112) and round 13 bits away
    const std::uint32_t rounded = magnitude - 0x38000000u + 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal in fp16: the value in units of 2^-24 is the 24-bit significand shifted right by
  // 126 - exponent (at least 14); a carry into 0x400 correctly gives the smallest normal.
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return static_cast<std::uint16_t>(sign);  // below 2^-25: rounds to zero
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  const std::uint32_t round_up = (rest > half || (rest == half && (kept & 1u) != 0)) ? 1u : 0u;
  return static_cast<std::uint16_t>(sign | (kept + round_up));
}

ATTNPROF_RANDOM_INLINE float bf16_bits_value(std::uint16_t bits) {
  return counter_random::bits_float(static_cast<std::uint32_t>(bits) << 16);
}

ATTNPROF_RANDOM_INLINE float fp16_bits_value(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {  // subnormal: mantissa * 2^-24, exact
    const float magnitude = counter_random::mul_rn(static_cast<float>(mantissa), 0x1p-24f);
    return counter_random::bits_float(sign | counter_random::float_bits(magnitude));
  }
  if (exponent == 31) return counter_random::bits_float(sign | 0x7f800000u | (mantissa << 13));
  return counter_random::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The 16-bit storage of `value` in a half-width dtype (bf16 or fp16).
ATTNPROF_RANDOM_INLINE std::uint16_t round_to_half_bits(DType dtype, float value) {
  return dtype == DType::bf16 ? round_to_bf16_bits(value) : round_to_fp16_bits(value);
}

ATTNPROF_RANDOM_INLINE float half_bits_value(DType dtype, std::uint16_t bits) {
  return dtype == DType::bf16 ? bf16_bits_value(bits) : fp16_bits_value(bits);
}

// `value` rounded to `dtype` (round to nearest even), as the float that holds it exactly.
ATTNPROF_RANDOM_INLINE float round_to_dtype(DType dtype, float value) {
  return dtype == DType::fp32 ? value : half_bits_value(dtype, round_to_half_bits(dtype, value));
}

}  // namespace attnprof
