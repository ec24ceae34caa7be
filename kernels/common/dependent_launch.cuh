// A programmatic dependent launch (sm_90): the kernel may be scheduled before the previous kernel
// on the stream has finished, once every block of that kernel has executed
// griddepcontrol.launch_dependents (or exited); it uses griddepcontrol.wait where it needs the
// previous kernel's writes. The host side enqueues such a launch; the device side is the two
// instructions (no-ops before sm_90, where no launch is programmatic).
#pragma once

#include <cuda_runtime.h>

namespace attnprof::kernels {

// Enqueues kernel<<<grid, block, smem_bytes, stream>>>(params) as a programmatic dependent of the
// stream's previous kernel. A failure stays in the runtime's last error, which the caller checks.
template <typename Params>
void launch_dependent(void (*kernel)(Params), dim3 grid, dim3 block, unsigned smem_bytes, cudaStream_t stream,
                      const Params& params) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  (void)cudaLaunchKernelEx(&config, kernel, params);
}

// This block no longer holds back the stream's next kernel, if that one is a programmatic dependent.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Waits until the grids this one depends on have completed and their writes are visible.
__device__ __forceinline__ void griddepcontrol_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace attnprof::kernels
