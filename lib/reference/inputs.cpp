#include "reference/inputs.hpp"

#include <cstring>
#include <stdexcept>

#include "core/half_convert.hpp"

namespace attnprof {

DType input_dtype(const AttentionProblem& problem, InputTensor tensor) {
  return tensor == InputTensor::bias ? DType::fp32 : problem.dtype;
}

std::int64_t input_element_count(const AttentionProblem& problem, InputTensor tensor) {
  const AttentionShape& s = problem.shape;
  switch (tensor) {
    case InputTensor::q: return element_count_q(s);
    case InputTensor::grad_o: return problem.is_backward() ? element_count_q(s) : 0;
    case InputTensor::k:
    case InputTensor::v: return element_count_kv(s);
    case InputTensor::bias: return problem.has_bias ? static_cast<std::int64_t>(s.seq_q) * s.seq_kv : 0;
  }
  return 0;
}

void generate_input(std::uint64_t seed, InputTensor tensor, DType dtype, std::int64_t first, std::int64_t count,
                    float* out) {
  generate_input(seed, tensor, dtype, input_range(tensor), first, count, out);
}

void generate_input(std::uint64_t seed, InputTensor tensor, DType dtype, InputRange range, std::int64_t first,
                    std::int64_t count, float* out) {
  if (first < 0 || count < 0) throw std::invalid_argument("generate_input: negative range");
  const std::uint64_t stream = input_stream(seed, tensor);
  std::int64_t i = first;
  const std::int64_t end = first + count;
  if (i < end && (i & 1) != 0) {  // odd start: the second half of a pair
    *out++ = round_to_dtype(dtype, uniform_input(stream, static_cast<std::uint64_t>(i), range.low, range.high));
    ++i;
  }
  for (; i + 1 < end; i += 2) {  // one hash per pair, as on the device
    const std::uint64_t hash = pair_bits(stream, static_cast<std::uint64_t>(i) >> 1);
    *out++ = round_to_dtype(dtype, uniform_from_bits(element_bits(hash, 0), range.low, range.high));
    *out++ = round_to_dtype(dtype, uniform_from_bits(element_bits(hash, 1), range.low, range.high));
  }
  if (i < end) *out = round_to_dtype(dtype, uniform_input(stream, static_cast<std::uint64_t>(i), range.low, range.high));
}

void generate_input(const AttentionProblem& problem, std::uint64_t seed, InputTensor tensor, std::int64_t first,
                    std::int64_t count, float* out) {
  if (first + count > input_element_count(problem, tensor))
    throw std::out_of_range("generate_input: range past the end of the tensor");
  generate_input(seed, tensor, input_dtype(problem, tensor), input_range(tensor, problem.pass), first, count, out);
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
