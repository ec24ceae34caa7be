// One compiled instantiation of the Hopper forward. Its entry points are declared here and
// defined in flash_hopper_launch.cuh; each flash_hopper_fwd_<dtype>_d<dim>.cu explicitly
// instantiates exactly one FlashHopperForward, and flash_hopper.cu dispatches among them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"

namespace attnprof::kernels {

namespace hopper {
struct HopperKernelParams;
}

template <DType kDType, int kHeadDim>
struct FlashHopperForward {
  // Raises the kernels' dynamic shared-memory limit.
  static cudaError_t prepare();
  // Enqueues the one kernel launch of `blocks` blocks (persistent: each walks the work tiles
  // blockIdx.x + k * blocks; otherwise one block per work tile); the caller checks it.
  static void launch(const hopper::HopperKernelParams& params, int blocks, bool persistent, cudaStream_t stream);
};

}  // namespace attnprof::kernels
