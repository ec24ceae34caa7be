// flash forward: fp16, head dim 64, causal.
#include "flash/flash_fwd_instances.hpp"
#include "flash/flash_fwd_kernel.cuh"

namespace attnprof::kernels {

template <>
cudaError_t prepare_flash_fwd<DType::fp16, 64, true>() {
  return flash::prepare_kernel<flash::TraitsFor<DType::fp16, 64>, true>();
}

template <>
void run_flash_fwd<DType::fp16, 64, true>(const FlashParams& params, cudaStream_t stream) {
  flash::launch_kernel<flash::TraitsFor<DType::fp16, 64>, true>(params, stream);
}

}  // namespace attnprof::kernels
