// CUDA runtime checking: every failed call becomes a GpuCallError naming the call, file and line.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/errors.hpp"

namespace attnprof {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);

}  // namespace attnprof

#define CUDA_CHECK(call)                                                      \
  do {                                                                        \
    const cudaError_t attnprof_status_ = (call);                              \
    if (attnprof_status_ != cudaSuccess)                                      \
      ::attnprof::throw_cuda_error(attnprof_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a <<<>>> launch: reports a bad configuration at the launch site, not at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
