// Host launchers of the kernels that give a case its inputs and hand verification the few output
// rows it checks: q, k, v (and bias) drawn on the device from the counter-based generator
// (core/counter_random.hpp), so no host copy of them ever exists, and the checked rows gathered
// into one small buffer so that reading them back is one copy, not one per row.
// Each returns the status of its enqueue (cudaGetLastError after the launch); the caller checks it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/counter_random.hpp"
#include "core/types.hpp"

namespace attnprof::kernels {

// dst[i] = element i of `tensor`'s stream under `seed`, uniform in [low, high), rounded to `dtype`
// (bf16/fp16 round to nearest even, fp32 as drawn), for i in [0, count). Bit-identical to
// round_to_dtype(dtype, uniform_input(input_stream(seed, tensor), i, low, high)) on the host.
cudaError_t fill_uniform(void* dst, DType dtype, std::int64_t count, std::uint64_t seed, InputTensor tensor, float low,
                         float high, cudaStream_t stream);

// dst[n] = row rows[n] of src for n in [0, row_count): rows of `row_bytes` bytes; `rows` in device memory.
cudaError_t gather_rows(const void* src, std::int64_t row_bytes, const std::int64_t* rows, std::int64_t row_count,
                        void* dst, cudaStream_t stream);

// dst row targets[n] = src row n for n in [0, row_count) where targets[n] >= 0 (rows of `row_bytes`
// bytes; `targets` in device memory): puts logically ordered rows into a packed or paged layout.
cudaError_t scatter_rows(const void* src, std::int64_t row_bytes, const std::int64_t* targets, std::int64_t row_count,
                         void* dst, cudaStream_t stream);

// What count_non_finite() found, in device memory.
struct NonFiniteElements {
  unsigned long long count;  // NaN or infinity
  unsigned long long first;  // smallest index of one, ~0ull when none
};

// Counts NaN/inf among data[0, count) of `dtype` into *result (device memory, reset here first).
cudaError_t count_non_finite(const void* data, DType dtype, std::int64_t count, NonFiniteElements* result,
                             cudaStream_t stream);

}  // namespace attnprof::kernels
