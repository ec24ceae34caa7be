// One compiled instantiation of flash's backward kernels (dot(dO, O), dQ dK dV, convert dQ) for
// one dtype and head dim. Defined in flash_bwd_launch.cuh; each flash_bwd_<dtype>_d<dim>.cu
// instantiates exactly one FlashBackward, and flash_bwd.cu dispatches among them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"
#include "flash_bwd/flash_bwd.hpp"

namespace attnprof::kernels {

template <DType kDType, int kHeadDim>
struct FlashBackward {
  // Raises the main kernel's dynamic shared-memory limit (the three-kernel or the fused variant).
  static cudaError_t prepare(bool fused);
  // The three-kernel variant's main-kernel blocks per SM.
  static cudaError_t blocks_per_sm(int* blocks);
  // Enqueues the three kernels.
  static void launch(const FlashBwdParams& params, cudaStream_t stream);
  // The first and the last of them alone (flash:hopper's backward runs its own main kernel
  // between them).
  static void pre_pass(const FlashBwdParams& params, cudaStream_t stream);
  static void convert_dq(const FlashBwdParams& params, cudaStream_t stream);
  // Enqueues the fused variant's memsets and its one kernel.
  // Returns the memsets' error; the kernel's launch error stays in the runtime's last error.
  static cudaError_t launch_fused(const FlashBwdParams& params, bool zero_dq, cudaStream_t stream);
};

}  // namespace attnprof::kernels
