// flash forward: bf16, head dim 128, causal.
#include "flash/flash_fwd_instances.hpp"
#include "flash/flash_fwd_kernel.cuh"

namespace attnprof::kernels {

template <>
cudaError_t prepare_flash_fwd<DType::bf16, 128, true>() {
  return flash::prepare_kernel<flash::TraitsFor<DType::bf16, 128>, true>();
}

template <>
void run_flash_fwd<DType::bf16, 128, true>(const FlashParams& params, cudaStream_t stream) {
  flash::launch_kernel<flash::TraitsFor<DType::bf16, 128>, true>(params, stream);
}

}  // namespace attnprof::kernels
