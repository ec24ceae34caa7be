// The inputs of a case as a function of (problem, seed): q, k, v uniform in [-1, 1), bias in
// [-2, 2), from the counter-based generator (core/counter_random.hpp) the device fills them with.
// The host regenerates any range of elements on demand, so no full host copy is ever needed.
#pragma once

#include <cstdint>
#include <vector>

#include "core/counter_random.hpp"
#include "core/types.hpp"

namespace attnprof {

// The storage type of a tensor: the problem's dtype for q, k, v; bias is always fp32.
DType input_dtype(const AttentionProblem& problem, InputTensor tensor);

// Elements of a tensor: q [B, H, Sq, D], k and v [B, Hkv, Skv, D], bias [Sq, Skv] (0 without bias),
// grad_o [B, H, Sq, D] (0 for a forward problem).
std::int64_t input_element_count(const AttentionProblem& problem, InputTensor tensor);

// Elements [first, first + count) of `tensor` under `seed`, drawn in `range` (a forward's
// input_range when not given) and rounded to `dtype`, as the floats that hold them exactly: the
// values the device fill (kernels::fill_uniform) wrote.
void generate_input(std::uint64_t seed, InputTensor tensor, DType dtype, InputRange range, std::int64_t first,
                    std::int64_t count, float* out);
void generate_input(std::uint64_t seed, InputTensor tensor, DType dtype, std::int64_t first, std::int64_t count,
                    float* out);

// The same for one tensor of a problem, in its own dtype and range (input_range of its pass).
void generate_input(const AttentionProblem& problem, std::uint64_t seed, InputTensor tensor, std::int64_t first,
                    std::int64_t count, float* out);

// Device-format bytes -> float, for outputs read back from the GPU.
std::vector<float> decode_elements(const std::vector<std::uint8_t>& bytes, DType dtype);

// The bit pattern written over outputs before each checked run: an all-ones NaN in every format,
// so an element the kernel never wrote shows up as NaN.
constexpr std::uint8_t kPoisonByte = 0xff;

}  // namespace attnprof
