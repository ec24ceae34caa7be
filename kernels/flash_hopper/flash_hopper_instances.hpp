// One compiled instantiation of the Hopper forward. Its entry points are declared here and
// defined in flash_hopper_launch.cuh; each flash_hopper_fwd_<dtype>_d<dim>.cu explicitly
// instantiates exactly one FlashHopperForward, and flash_hopper.cu dispatches among them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"

namespace attnprof::kernels {

namespace hopper {
struct HopperKernelParams;
struct HopperBwdParams;
}

template <DType kDType, int kHeadDim>
struct FlashHopperForward {
  // Raises the kernels' dynamic shared-memory limit.
  static cudaError_t prepare();
  // Keys per K/V tile of the kernel that runs a problem with (masked) or without a mask band:
  // the row count of the K and V TMA boxes.
  static int block_keys(bool masked);
  // Enqueues the one kernel launch of `blocks` persistent blocks (each walks its share of the
  // work tiles); the caller checks it.
  static void launch(const hopper::HopperKernelParams& params, int blocks, bool masked, cudaStream_t stream);
};

// One compiled instantiation of the Hopper backward's main kernel (flash_hopper_bwd_launch.cuh;
// flash_hopper_bwd_<dtype>_d<dim>.cu instantiate it).
template <DType kDType, int kHeadDim>
struct FlashHopperBackward {
  // Raises the kernel's dynamic shared-memory limit.
  static cudaError_t prepare();
  // Enqueues the main kernel on `grid` (flash_bwd_grid's); the caller checks it.
  static void launch(const hopper::HopperBwdParams& params, dim3 grid, cudaStream_t stream);
};

}  // namespace attnprof::kernels
