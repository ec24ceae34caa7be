#include "gpu/device_memory.hpp"

namespace attnprof {

float elapsed_ms(const CudaEvent& start, const CudaEvent& stop) {
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

}  // namespace attnprof
