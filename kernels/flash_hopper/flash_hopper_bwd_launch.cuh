// Host side of one Hopper backward instantiation: the definitions behind FlashHopperBackward,
// included only by the instance files (flash_hopper_bwd_<dtype>_d<dim>.cu).
#pragma once

#include <cuda_runtime.h>

#include "common/element_type.cuh"
#include "flash_hopper/flash_hopper_bwd_kernel.cuh"
#include "flash_hopper/flash_hopper_instances.hpp"

namespace attnprof::kernels {

template <DType kDType, int kHeadDim>
cudaError_t FlashHopperBackward<kDType, kHeadDim>::prepare() {
  using Traits = hopper::HopperBwdTraits<Element<kDType>, kHeadDim>;
  return cudaFuncSetAttribute(&hopper::flash_hopper_bwd_kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              Traits::kSmemBytes);
}

template <DType kDType, int kHeadDim>
void FlashHopperBackward<kDType, kHeadDim>::launch(const hopper::HopperBwdParams& params, dim3 grid,
                                                   cudaStream_t stream) {
  using Traits = hopper::HopperBwdTraits<Element<kDType>, kHeadDim>;
  hopper::flash_hopper_bwd_kernel<Traits><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
}

}  // namespace attnprof::kernels
