// Host side of one flash backward instantiation: the definitions behind FlashBackward, included
// only by the instance files (flash_bwd_<dtype>_d<dim>.cu).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "common/dependent_launch.cuh"
#include "common/element_type.cuh"
#include "flash_bwd/flash_bwd_instances.hpp"
#include "flash_bwd/flash_bwd_kernel.cuh"

namespace attnprof::kernels {

// The main kernel's grid: key blocks, K/V heads and sequences, in flash_bwd_grid's order.
inline dim3 main_grid(const FlashBwdParams& params) {
  const FlashBwdGrid g = flash_bwd_grid(params.mask, params.seq_kv, params.heads_kv, params.batch);
  return dim3(g.x, g.y, g.z);
}

template <DType kDType, int kHeadDim>
cudaError_t FlashBackward<kDType, kHeadDim>::prepare(bool fused) {
  if (fused) {
    using Traits = flash_bwd::FlashBwdTraits<Element<kDType>, kHeadDim, true>;
    return cudaFuncSetAttribute(flash_bwd::efficient_bwd_fused_kernel<Traits>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  }
  using Traits = flash_bwd::FlashBwdTraits<Element<kDType>, kHeadDim, false>;
  for (const auto kernel : {&flash_bwd::flash_bwd_dq_dk_dv_kernel<Traits>, &flash_bwd::flash_bwd_dq_dk_dv_tail_kernel<Traits>})
    if (const cudaError_t status =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
        status != cudaSuccess)
      return status;
  return cudaSuccess;
}

template <DType kDType, int kHeadDim>
cudaError_t FlashBackward<kDType, kHeadDim>::blocks_per_sm(int* blocks) {
  using Traits = flash_bwd::FlashBwdTraits<Element<kDType>, kHeadDim, false>;
  static_assert(Traits::kThreads == kFlashBwdThreads);
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, flash_bwd::flash_bwd_dq_dk_dv_kernel<Traits>,
                                                       Traits::kThreads, Traits::kSmemBytes);
}

template <DType kDType, int kHeadDim>
cudaError_t FlashBackward<kDType, kHeadDim>::launch_fused(const FlashBwdParams& params, bool zero_dq, cudaStream_t stream) {
  using Traits = flash_bwd::FlashBwdTraits<Element<kDType>, kHeadDim, true>;
  const long long rows = static_cast<long long>(params.batch) * params.heads * params.seq_q;
  // The accumulator and the counters are one zeroed region.
  const auto bytes =
      static_cast<std::size_t>(flash_bwd_fused_workspace_bytes(params.batch, params.heads, params.seq_q, kHeadDim));
  cudaError_t status = cudaMemsetAsync(params.dq_accum, 0, bytes, stream);
  if (status == cudaSuccess && zero_dq)
    status = cudaMemsetAsync(params.dq, 0, static_cast<std::size_t>(rows * kHeadDim) * sizeof(Element<kDType>), stream);
  if (status != cudaSuccess) return status;
  const dim3 grid(main_grid(params));
  flash_bwd::efficient_bwd_fused_kernel<Traits><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  return cudaSuccess;
}

template <DType kDType, int kHeadDim>
void FlashBackward<kDType, kHeadDim>::pre_pass(const FlashBwdParams& params, cudaStream_t stream) {
  const long long rows = static_cast<long long>(params.batch) * params.heads * params.seq_q;
  flash_bwd::flash_bwd_dot_do_o_kernel<Element<kDType>, kHeadDim>
      <<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(params);
}

template <DType kDType, int kHeadDim>
void FlashBackward<kDType, kHeadDim>::convert_dq(const FlashBwdParams& params, cudaStream_t stream) {
  const long long rows = static_cast<long long>(params.batch) * params.heads * params.seq_q;
  const long long quads = rows * kHeadDim / 4;
  const unsigned blocks = static_cast<unsigned>(std::min<long long>((quads + 255) / 256, 132LL * 16));
  flash_bwd::flash_bwd_convert_dq_kernel<Element<kDType>, kHeadDim><<<blocks, 256, 0, stream>>>(params);
}

template <DType kDType, int kHeadDim>
void FlashBackward<kDType, kHeadDim>::launch(const FlashBwdParams& params, cudaStream_t stream) {
  using Traits = flash_bwd::FlashBwdTraits<Element<kDType>, kHeadDim, false>;
  pre_pass(params, stream);
  if (cudaPeekAtLastError() != cudaSuccess) return;  // the caller's check reports the first failure
  const dim3 grid(main_grid(params));
  flash_bwd::flash_bwd_dq_dk_dv_kernel<Traits><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  if (cudaPeekAtLastError() != cudaSuccess) return;
  if (params.tail.blocks > 0) {
    // The tail as a programmatic dependent launch (sm_90): its blocks start as the main grid's
    // last blocks finish, not after all of them.
    launch_dependent(flash_bwd::flash_bwd_dq_dk_dv_tail_kernel<Traits>, dim3(static_cast<unsigned>(params.tail.ctas)),
                     dim3(Traits::kThreads), Traits::kSmemBytes, stream, params);
    if (cudaPeekAtLastError() != cudaSuccess) return;
  }
  convert_dq(params, stream);
}

}  // namespace attnprof::kernels
