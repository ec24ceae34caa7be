#include "backends/cudnn_info.hpp"

#include <cudnn_graph.h>

#include <fmt/format.h>

namespace attnprof {

std::size_t cudnn_runtime_version_number() { return cudnnGetVersion(); }

std::string format_cudnn_version(std::size_t version) {
  return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
}

std::string cudnn_runtime_version() { return format_cudnn_version(cudnn_runtime_version_number()); }

std::string cudnn_runtime_description() {
  const std::size_t cudart = cudnnGetCudartVersion();  // e.g. 12090 for CUDA 12.9
  return fmt::format("{} (built for CUDA {}.{})", cudnn_runtime_version(), cudart / 1000, cudart % 1000 / 10);
}

}  // namespace attnprof
