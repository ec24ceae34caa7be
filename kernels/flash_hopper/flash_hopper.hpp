// Host launchers of the Hopper-native fused forward (flash:hopper): wgmma, TMA, a producer
// warpgroup feeding two consumer warpgroups through an mbarrier ring, setmaxnreg. Plain C++:
// callable from g++-compiled code (lib/backends/flash.cpp); no CUDA device types appear here.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"
#include "flash/flash.hpp"

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

}  // namespace attnprof::kernels
