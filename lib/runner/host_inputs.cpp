#include "runner/host_inputs.hpp"

#include <cstring>
#include <random>
#include <stdexcept>

#include "core/half_convert.hpp"

namespace attnprof {
namespace {

// Rounds each value to `dtype` in place and appends its storage bytes to `bytes`.
void round_and_encode(std::vector<float>& values, DType dtype, std::vector<std::uint8_t>& bytes) {
  bytes.resize(values.size() * dtype_bytes(dtype));
  std::uint8_t* out = bytes.data();
  for (float& value : values) {
    if (dtype == DType::fp32) {
      std::memcpy(out, &value, 4);
      out += 4;
      continue;
    }
    const std::uint16_t bits =
        dtype == DType::bf16 ? float_to_bf16_bits(value) : float_to_fp16_bits(value);
    value = dtype == DType::bf16 ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
    std::memcpy(out, &bits, 2);
    out += 2;
  }
}

std::vector<float> draw(std::mt19937_64& rng, std::int64_t count, float low, float high) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& value : values) value = dist(rng);
  return values;
}

}  // namespace

HostInputs make_host_inputs(const AttentionProblem& problem, std::uint64_t seed) {
  HostInputs inputs;
  inputs.problem = problem;
  std::mt19937_64 rng(seed);
  const AttentionShape& s = problem.shape;
  inputs.q = draw(rng, element_count_q(s), -1.f, 1.f);
  inputs.k = draw(rng, element_count_kv(s), -1.f, 1.f);
  inputs.v = draw(rng, element_count_kv(s), -1.f, 1.f);
  round_and_encode(inputs.q, problem.dtype, inputs.q_bytes);
  round_and_encode(inputs.k, problem.dtype, inputs.k_bytes);
  round_and_encode(inputs.v, problem.dtype, inputs.v_bytes);
  if (problem.has_bias) inputs.bias = draw(rng, static_cast<std::int64_t>(s.seq_q) * s.seq_kv, -2.f, 2.f);
  return inputs;
}

std::vector<float> decode_elements(const std::vector<std::uint8_t>& bytes, DType dtype) {
  const std::size_t width = static_cast<std::size_t>(dtype_bytes(dtype));
  if (bytes.size() % width != 0) throw std::invalid_argument("decode_elements: partial element");
  std::vector<float> values(bytes.size() / width);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::fp32) {
      std::memcpy(&values[i], &bytes[i * 4], 4);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      values[i] = dtype == DType::bf16 ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
    }
  }
  return values;
}

}  // namespace attnprof
