// Host side of one Hopper forward instantiation: the definitions behind FlashHopperForward,
// included only by the instance files (flash_hopper_fwd_<dtype>_d<dim>.cu).
#pragma once

#include <cuda_runtime.h>

#include "common/element_type.cuh"
#include "flash_hopper/flash_hopper_instances.hpp"
#include "flash_hopper/flash_hopper_kernel.cuh"

namespace attnprof::kernels {

namespace hopper {
// The kernel for a problem: 176-key tiles at head dim 128 without a mask band, else 128.
template <DType kDType, int kHeadDim, typename F>
decltype(auto) with_traits(bool masked, F&& f) {
  if constexpr (kHeadDim == 128) {
    if (!masked) return f(HopperTraits<Element<kDType>, 128, 176>{});
  }
  return f(HopperTraits<Element<kDType>, kHeadDim, 128>{});
}
}  // namespace hopper

template <DType kDType, int kHeadDim>
cudaError_t FlashHopperForward<kDType, kHeadDim>::prepare() {
  for (const bool masked : {false, true}) {
    const cudaError_t status = hopper::with_traits<kDType, kHeadDim>(masked, [](auto traits) {
      using Traits = decltype(traits);
      return cudaFuncSetAttribute(&hopper::flash_hopper_fwd_kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  Traits::kSmemBytes);
    });
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

template <DType kDType, int kHeadDim>
int FlashHopperForward<kDType, kHeadDim>::block_keys(bool masked) {
  return hopper::with_traits<kDType, kHeadDim>(masked, [](auto traits) { return decltype(traits)::kBlockN; });
}

template <DType kDType, int kHeadDim>
void FlashHopperForward<kDType, kHeadDim>::launch(const hopper::HopperKernelParams& params, int blocks, bool masked,
                                                  cudaStream_t stream) {
  hopper::with_traits<kDType, kHeadDim>(masked, [&](auto traits) {
    using Traits = decltype(traits);
    hopper::flash_hopper_fwd_kernel<Traits>
        <<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  });
}

}  // namespace attnprof::kernels
