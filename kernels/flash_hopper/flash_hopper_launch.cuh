// Host side of one Hopper forward instantiation: the definitions behind FlashHopperForward,
// included only by the instance files (flash_hopper_fwd_<dtype>_d<dim>.cu).
#pragma once

#include <cuda_runtime.h>

#include "common/element_type.cuh"
#include "flash_hopper/flash_hopper_instances.hpp"
#include "flash_hopper/flash_hopper_kernel.cuh"

namespace attnprof::kernels {

template <DType kDType, int kHeadDim>
cudaError_t FlashHopperForward<kDType, kHeadDim>::prepare() {
  using Traits = hopper::HopperTraits<Element<kDType>, kHeadDim>;
  for (const auto kernel : {&hopper::flash_hopper_fwd_kernel<Traits, true>, &hopper::flash_hopper_fwd_kernel<Traits, false>}) {
    const cudaError_t status =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

template <DType kDType, int kHeadDim>
void FlashHopperForward<kDType, kHeadDim>::launch(const hopper::HopperKernelParams& params, int blocks, bool persistent,
                                                  cudaStream_t stream) {
  using Traits = hopper::HopperTraits<Element<kDType>, kHeadDim>;
  const auto kernel =
      persistent ? &hopper::flash_hopper_fwd_kernel<Traits, true> : &hopper::flash_hopper_fwd_kernel<Traits, false>;
  kernel<<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
}

}  // namespace attnprof::kernels
