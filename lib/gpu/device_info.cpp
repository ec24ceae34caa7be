#include "gpu/device_info.hpp"

#include <cuda_runtime_api.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "gpu/cuda_check.hpp"

namespace attnprof {

DeviceProperties query_device_properties(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceProperties p;
  p.id = device;
  p.name = prop.name;
  p.compute_major = prop.major;
  p.compute_minor = prop.minor;
  p.sm_count = prop.multiProcessorCount;
  p.max_threads_per_block = prop.maxThreadsPerBlock;
  p.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  p.max_blocks_per_sm = prop.maxBlocksPerMultiProcessor;
  p.regs_per_block = prop.regsPerBlock;
  p.regs_per_sm = prop.regsPerMultiprocessor;
  p.warp_size = prop.warpSize;
  p.shared_mem_per_block = static_cast<std::int64_t>(prop.sharedMemPerBlock);
  p.shared_mem_per_sm = static_cast<std::int64_t>(prop.sharedMemPerMultiprocessor);
  p.shared_mem_per_block_optin = static_cast<std::int64_t>(prop.sharedMemPerBlockOptin);
  p.reserved_shared_mem_per_block = static_cast<std::int64_t>(prop.reservedSharedMemPerBlock);
  p.total_global_mem = static_cast<std::int64_t>(prop.totalGlobalMem);
  p.l2_cache_bytes = prop.l2CacheSize;
  CUDA_CHECK(cudaDeviceGetAttribute(&p.clock_rate_khz, cudaDevAttrClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&p.memory_clock_rate_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&p.memory_bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  return p;
}

std::string cuda_version_text(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

SoftwareVersions query_software_versions() {
  SoftwareVersions v;
  CUDA_CHECK(cudaDriverGetVersion(&v.driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&v.runtime));
  // The kernel module's own version string, e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 ...".
  std::ifstream proc("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(proc, line)) {
    std::istringstream words(line);
    std::string word;
    while (words >> word)
      if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos) {
        v.driver_text = word;
        break;
      }
  }
  return v;
}

int require_devices() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    throw NoUsableGpuError(fmt::format("no usable GPU: the CUDA runtime could not reach a device ({}: {})",
                                       cudaGetErrorName(status), cudaGetErrorString(status)));
  if (count == 0) throw NoUsableGpuError("no usable GPU: the CUDA driver reports no devices");
  return count;
}

}  // namespace attnprof
