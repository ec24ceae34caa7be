// Kernels with a known achieved occupancy for the range-profiler test: a grid-stride loop of
// dependent FMAs, so each warp stays resident for the whole kernel and occupancy is set by the grid.
#include <cuda_runtime_api.h>

namespace attnprof::testing {

__global__ void busy_kernel(float* out, int n, int rounds) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float x = static_cast<float>(i);
    for (int r = 0; r < rounds; ++r) x = x * 0.999f + 1.0f;
    out[i] = x;
  }
}

void launch_busy_kernel(float* out, int n, int grid, int block, int rounds, cudaStream_t stream) {
  busy_kernel<<<grid, block, 0, stream>>>(out, n, rounds);
}

}  // namespace attnprof::testing
