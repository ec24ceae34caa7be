// Host side of one decode instantiation: the definitions behind DecodeForward, included only
// by the instance files (decode_fwd_<dtype>_d<dim>.cu).
#pragma once

#include <cuda_runtime.h>

#include "common/dependent_launch.cuh"
#include "common/element_type.cuh"
#include "decode/decode_instances.hpp"
#include "decode/decode_kernel.cuh"

namespace attnprof::kernels {

template <DType kDType, int kHeadDim>
cudaError_t DecodeForward<kDType, kHeadDim>::prepare(int* blocks_per_sm) {
  using Traits = decode::DecodeTraitsFor<Element<kDType>, kHeadDim>;
  for (const auto kernel : {&decode::flash_decode_kernel<Traits>, &decode::flash_decode_splitkv_kernel<Traits>}) {
    cudaError_t status =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (status != cudaSuccess) return status;
    status = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared);
    if (status != cudaSuccess) return status;
  }
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, decode::flash_decode_splitkv_kernel<Traits>,
                                                       Traits::kThreads, Traits::kSmemBytes);
}

template <DType kDType, int kHeadDim>
void DecodeForward<kDType, kHeadDim>::launch(const DecodeParams& params, cudaStream_t stream) {
  using Traits = decode::DecodeTraitsFor<Element<kDType>, kHeadDim>;
  // Splits on x (no 65535 limit), K/V heads on y, sequences on z.
  const dim3 grid(static_cast<unsigned>(params.splits), static_cast<unsigned>(params.heads_kv),
                  static_cast<unsigned>(params.batch));
  if (params.splits <= 1) {
    decode::flash_decode_kernel<Traits><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
    return;
  }
  decode::flash_decode_splitkv_kernel<Traits><<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  if (cudaPeekAtLastError() != cudaSuccess) return;  // the caller's check reports the first failure
  // The combine kernel as a programmatic dependent launch (sm_90): its launch overlaps the split
  // kernel's tail; it waits for the split kernel's writes (griddepcontrol.wait) before reading.
  const long long rows = static_cast<long long>(params.batch) * params.heads * params.seq_q;
  launch_dependent(decode::flash_decode_combine_kernel<Element<kDType>, kHeadDim>,
                   dim3(static_cast<unsigned>(rows)),  // one block per (b, h, i) row
                   dim3(decode::kCombineThreads), 0, stream, params);
}

}  // namespace attnprof::kernels
