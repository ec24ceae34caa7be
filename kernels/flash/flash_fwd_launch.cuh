// Host side of one flash forward instantiation: the definitions behind FlashForward, included
// only by the instance files (flash_fwd_<dtype>_d<dim>[_<variant>].cu).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "common/element_type.cuh"
#include "flash/flash_fwd_instances.hpp"
#include "flash/flash_fwd_kernel.cuh"
#include "flash/kernel_traits.cuh"

namespace attnprof::kernels {

namespace flash {
template <DType kDType, int kHeadDim>
using TraitsFor =
    std::conditional_t<kHeadDim == 64, FlashFwdTraitsD64<Element<kDType>>, FlashFwdTraitsD128<Element<kDType>>>;
}  // namespace flash

template <DType kDType, int kHeadDim, bool kMasked, bool kVarlen>
cudaError_t FlashForward<kDType, kHeadDim, kMasked, kVarlen>::prepare() {
  using Traits = flash::TraitsFor<kDType, kHeadDim>;
  const auto kernel = &flash::flash_fwd_kernel<Traits, kMasked, kVarlen>;
  cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (status != cudaSuccess) return status;
  // Two blocks per SM need 2 x (smem + 1 KB reserved) of the unified L1/shared storage.
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}

template <DType kDType, int kHeadDim, bool kMasked, bool kVarlen>
void FlashForward<kDType, kHeadDim, kMasked, kVarlen>::launch(const FlashParams& params, cudaStream_t stream) {
  using Traits = flash::TraitsFor<kDType, kHeadDim>;
  // Query tiles on x (no 65535 limit), heads on y, batch on z. Ragged: tiles of the longest
  // sequence; a shorter sequence's surplus blocks return at once.
  const dim3 grid(static_cast<unsigned>((params.seq_q + Traits::kBlockM - 1) / Traits::kBlockM),
                  static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch));
  flash::flash_fwd_kernel<Traits, kMasked, kVarlen><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
}

}  // namespace attnprof::kernels
