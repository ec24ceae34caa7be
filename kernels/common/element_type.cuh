// The device element type of each DType, for the tags the static switches hand out.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/types.hpp"

namespace attnprof::kernels {

template <DType kDType>
struct ElementOf;
template <>
struct ElementOf<DType::bf16> {
  using type = __nv_bfloat16;
};
template <>
struct ElementOf<DType::fp16> {
  using type = __half;
};
template <>
struct ElementOf<DType::fp32> {
  using type = float;
};

template <DType kDType>
using Element = typename ElementOf<kDType>::type;

}  // namespace attnprof::kernels
