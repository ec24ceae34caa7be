// Host side of one efficient forward instantiation: the definitions behind EfficientForward
// (maps (dtype, head-dim bucket) to its traits and kernels, sets the dynamic shared-memory limit,
// launches the grid of query blocks x heads x batch), included only by the instance files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "efficient/efficient.hpp"
#include "efficient/efficient_fwd_fp32_kernel.cuh"
#include "efficient/efficient_fwd_kernel.cuh"

namespace attnprof::kernels::efficient {

template <DType kDType, int kHeadDim>
struct InstanceKernels;

template <int kHeadDim>
struct InstanceKernels<DType::bf16, kHeadDim> {
  using Traits = MmaTraits<__nv_bfloat16, kHeadDim>;
  static constexpr auto kernel = efficient_fwd_kernel<Traits, false>;
  static constexpr auto bias_kernel = efficient_fwd_kernel<Traits, true>;
};
template <int kHeadDim>
struct InstanceKernels<DType::fp16, kHeadDim> {
  using Traits = MmaTraits<__half, kHeadDim>;
  static constexpr auto kernel = efficient_fwd_kernel<Traits, false>;
  static constexpr auto bias_kernel = efficient_fwd_kernel<Traits, true>;
};
template <int kHeadDim>
struct InstanceKernels<DType::fp32, kHeadDim> {
  using Traits = SimtTraits<kHeadDim>;
  static constexpr auto kernel = efficient_fwd_fp32_kernel<Traits>;  // bias is a run-time branch here
  static constexpr auto bias_kernel = kernel;
};

template <typename Kernel>
cudaError_t allow_shared_memory(Kernel kernel, int bytes) {
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess) return status;
  // The largest carve-out, so that the 2 blocks per SM the registers allow also fit in shared memory.
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}

template <DType kDType, int kHeadDim>
int EfficientForward<kDType, kHeadDim>::smem_bytes() {
  return InstanceKernels<kDType, kHeadDim>::Traits::kSmemBytes;
}

template <DType kDType, int kHeadDim>
cudaError_t EfficientForward<kDType, kHeadDim>::prepare() {
  using I = InstanceKernels<kDType, kHeadDim>;
  const cudaError_t status = allow_shared_memory(I::kernel, I::Traits::kSmemBytes);
  if (status != cudaSuccess) return status;
  return allow_shared_memory(I::bias_kernel, I::Traits::kSmemBytes);
}

template <DType kDType, int kHeadDim>
void EfficientForward<kDType, kHeadDim>::launch(const ForwardParams& params, cudaStream_t stream) {
  using I = InstanceKernels<kDType, kHeadDim>;
  const dim3 grid((params.seq_q + I::Traits::kBlockM - 1) / I::Traits::kBlockM, params.heads, params.batch);
  const auto kernel = params.bias != nullptr ? I::bias_kernel : I::kernel;
  kernel<<<grid, I::Traits::kThreads, I::Traits::kSmemBytes, stream>>>(params);
}

}  // namespace attnprof::kernels::efficient
