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
  return cudaFuncSetAttribute(&hopper::flash_hopper_fwd_kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              Traits::kSmemBytes);
}

template <DType kDType, int kHeadDim>
void FlashHopperForward<kDType, kHeadDim>::launch(const hopper::HopperKernelParams& params, int batch,
                                                  cudaStream_t stream) {
  using Traits = hopper::HopperTraits<Element<kDType>, kHeadDim>;
  const dim3 grid(static_cast<unsigned>((params.seq_q + Traits::kBlockM - 1) / Traits::kBlockM),
                  static_cast<unsigned>(params.heads), static_cast<unsigned>(batch));
  hopper::flash_hopper_fwd_kernel<Traits><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
}

}  // namespace attnprof::kernels
