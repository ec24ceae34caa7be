// The per-instantiation entry points. Each is specialised in its own .cu file
// (flash_fwd_d{64,128}_{bf16,fp16}[_causal].cu) so the eight kernels compile in parallel;
// flash.cu dispatches among them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"
#include "flash/flash.hpp"

namespace attnprof::kernels {

template <DType kDType, int kHeadDim, bool kCausal>
cudaError_t prepare_flash_fwd();

template <DType kDType, int kHeadDim, bool kCausal>
void run_flash_fwd(const FlashParams& params, cudaStream_t stream);

}  // namespace attnprof::kernels
