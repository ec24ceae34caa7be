// Host side of one efficient forward instantiation: the definitions behind EfficientForward
// (maps (dtype, head-dim bucket) to its traits and kernels, sets the dynamic shared-memory limit,
// launches the grid of query blocks x heads x batch), included only by the instance files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>

#include "efficient/efficient.hpp"
#include "efficient/efficient_fwd_fp32_kernel.cuh"
#include "efficient/efficient_fwd_kernel.cuh"

namespace attnprof::kernels::efficient {

// A ragged instance compiles no bias kernel (bias_kernel is the plain one; the backend rejects
// a bias on a ragged batch and launch() checks it).
template <DType kDType, int kHeadDim, bool kRagged>
struct InstanceKernels;

template <int kHeadDim, bool kRagged>
struct InstanceKernels<DType::bf16, kHeadDim, kRagged> {
  using Traits = MmaTraits<__nv_bfloat16, kHeadDim>;
  static constexpr auto kernel = efficient_fwd_kernel<Traits, false, kRagged>;
  static constexpr auto bias_kernel = efficient_fwd_kernel<Traits, !kRagged, kRagged>;
};
template <int kHeadDim, bool kRagged>
struct InstanceKernels<DType::fp16, kHeadDim, kRagged> {
  using Traits = MmaTraits<__half, kHeadDim>;
  static constexpr auto kernel = efficient_fwd_kernel<Traits, false, kRagged>;
  static constexpr auto bias_kernel = efficient_fwd_kernel<Traits, !kRagged, kRagged>;
};
template <int kHeadDim, bool kRagged>
struct InstanceKernels<DType::fp32, kHeadDim, kRagged> {
  using Traits = SimtTraits<kHeadDim>;
  static constexpr auto kernel = efficient_fwd_fp32_kernel<Traits, kRagged>;  // bias: a run-time branch here
  static constexpr auto bias_kernel = kernel;
};

template <typename Kernel>
cudaError_t allow_shared_memory(Kernel kernel, int bytes) {
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess) return status;
  // The largest carve-out, so that the 2 blocks per SM the registers allow also fit in shared memory.
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}

template <DType kDType, int kHeadDim, bool kRagged>
int EfficientForward<kDType, kHeadDim, kRagged>::smem_bytes() {
  return InstanceKernels<kDType, kHeadDim, kRagged>::Traits::kSmemBytes;
}

template <DType kDType, int kHeadDim, bool kRagged>
cudaError_t EfficientForward<kDType, kHeadDim, kRagged>::prepare() {
  using I = InstanceKernels<kDType, kHeadDim, kRagged>;
  const cudaError_t status = allow_shared_memory(I::kernel, I::Traits::kSmemBytes);
  if (status != cudaSuccess) return status;
  return allow_shared_memory(I::bias_kernel, I::Traits::kSmemBytes);
}

template <DType kDType, int kHeadDim, bool kRagged>
void EfficientForward<kDType, kHeadDim, kRagged>::launch(const ForwardParams& params, cudaStream_t stream) {
  using I = InstanceKernels<kDType, kHeadDim, kRagged>;
  const dim3 grid((params.seq_q + I::Traits::kBlockM - 1) / I::Traits::kBlockM, params.heads, params.batch);
  if (kRagged && kDType != DType::fp32 && params.bias != nullptr)
    throw std::invalid_argument("efficient: the ragged kernels are compiled without a bias");
  const auto kernel = params.bias != nullptr ? I::bias_kernel : I::kernel;
  kernel<<<grid, I::Traits::kThreads, I::Traits::kSmemBytes, stream>>>(params);
}

}  // namespace attnprof::kernels::efficient
