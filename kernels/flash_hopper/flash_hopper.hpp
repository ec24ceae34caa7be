// Host launchers of the Hopper-native fused forward (flash:hopper): wgmma, TMA, a producer
// warpgroup feeding two consumer warpgroups through an mbarrier ring, setmaxnreg. Plain C++:
// callable from g++-compiled code (lib/backends/flash.cpp); no CUDA device types appear here.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"
#include "flash/flash.hpp"
#include "flash_bwd/flash_bwd.hpp"

namespace attnprof::kernels {

// False when this build has no sm_90a code for the kernel (it is compiled for sm_90a only).
bool flash_hopper_compiled();

// Dynamic shared memory one block needs for this head dim (bytes).
int flash_hopper_smem_bytes(int head_dim);

// One-time set-up of one instantiation: raises its dynamic shared-memory limit.
cudaError_t flash_hopper_prepare(DType dtype, int head_dim);

// Dense problems only (FlashParams' dense fields and mask; no varlen arrays). Encodes the TMA
// descriptors of q, k and v (cuTensorMapEncodeTiled; a failure throws std::runtime_error naming
// the call and the tensor) and enqueues exactly one kernel launch on `stream`; the caller checks
// the launch.
void flash_hopper_forward(const FlashParams& params, DType dtype, int head_dim, cudaStream_t stream);

// The backward: flash_bwd's pre-pass (D, lse in log2 units, the fp32 dQ accumulator zeroed), the
// wgmma main kernel (flash_hopper_bwd_kernel.cuh) and flash_bwd's dQ conversion. bf16 and fp16 at
// head dim 128 (flash_hopper_bwd_has_kernel); dense layouts as FlashBwdParams says, GQA, any mask.
bool flash_hopper_bwd_has_kernel(DType dtype, int head_dim);
cudaError_t flash_hopper_bwd_prepare(DType dtype, int head_dim);
// Encodes the TMA descriptors of q, dO, k and v (a failure throws std::runtime_error naming the
// call and the tensor) and enqueues the three kernels; params needs dq_accum, d_sum and lse_log2
// (flash_bwd_workspace_floats, no tail). The caller checks the launches.
void flash_hopper_backward(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream);

}  // namespace attnprof::kernels
