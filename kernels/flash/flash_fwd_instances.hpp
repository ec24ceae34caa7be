// One compiled instantiation of the flash forward kernel. Its entry points are declared here
// and defined in flash_fwd_launch.cuh; each flash_fwd_<dtype>_d<dim>[_<variant>].cu explicitly
// instantiates exactly one FlashForward, so the kernels compile in parallel, and flash.cu
// (which sees only this declaration) dispatches among them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/types.hpp"
#include "flash/flash.hpp"

namespace attnprof::kernels {

// kMasked: rows see a band of keys (causal and/or a window, either alignment), so tiles outside
// it are skipped and tiles on its edges masked; without it every row sees every key.
// kVarlen: ragged and paged batches (per-sequence lengths and bands; only with kMasked).
template <DType kDType, int kHeadDim, bool kMasked, bool kVarlen = false>
struct FlashForward {
  // Raises the kernel's dynamic shared-memory limit and prefers the shared-memory carveout.
  static cudaError_t prepare();
  // Enqueues the one kernel launch; the caller checks it.
  static void launch(const FlashParams& params, cudaStream_t stream);
};

}  // namespace attnprof::kernels
