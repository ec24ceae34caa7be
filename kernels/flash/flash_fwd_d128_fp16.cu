// flash forward: fp16, head dim 128, non-causal.
#include "flash/flash_fwd_instances.hpp"
#include "flash/flash_fwd_kernel.cuh"

namespace attnprof::kernels {

template <>
cudaError_t prepare_flash_fwd<DType::fp16, 128, false>() {
  return flash::prepare_kernel<flash::TraitsFor<DType::fp16, 128>, false>();
}

template <>
void run_flash_fwd<DType::fp16, 128, false>(const FlashParams& params, cudaStream_t stream) {
  flash::launch_kernel<flash::TraitsFor<DType::fp16, 128>, false>(params, stream);
}

}  // namespace attnprof::kernels
