#include "gpu/cuda_check.hpp"

#include <fmt/format.h>

namespace attnprof {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw GpuCallError(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                 cudaGetErrorString(status), cudaGetErrorName(status)));
}

}  // namespace attnprof
