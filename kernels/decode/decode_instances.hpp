// One compiled instantiation of the decode kernels (decode, decode split-KV, combine) for one
// dtype and head dim. Defined in decode_launch.cuh; each decode_fwd_<dtype>_d<dim>.cu
// instantiates exactly one DecodeForward, and decode.cu dispatches among them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"
#include "decode/decode.hpp"

namespace attnprof::kernels {

template <DType kDType, int kHeadDim>
struct DecodeForward {
  // Raises both decode kernels' dynamic shared-memory limits; reports blocks per SM.
  static cudaError_t prepare(int* blocks_per_sm);
  // Enqueues the decode kernel, or the split-KV kernel and the combine kernel.
  static void launch(const DecodeParams& params, cudaStream_t stream);
};

}  // namespace attnprof::kernels
