#include "gpu/device_info.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

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

GpuAvailability gpu_availability() {
  GpuFacts facts;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  switch (status) {
    case cudaSuccess: facts.status = DeviceCountStatus::success; break;
    case cudaErrorInsufficientDriver: facts.status = DeviceCountStatus::insufficient_driver; break;
    case cudaErrorStubLibrary: facts.status = DeviceCountStatus::stub_library; break;
    case cudaErrorNoDevice: facts.status = DeviceCountStatus::no_device; break;
    default: facts.status = DeviceCountStatus::other; break;
  }
  facts.device_count = status == cudaSuccess ? count : 0;
  facts.status_text = fmt::format("{}: {}", cudaGetErrorName(status), cudaGetErrorString(status));
  facts.runtime_message = fmt::format("the CUDA runtime could not reach a device ({})", facts.status_text);
  if (void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    facts.libcuda_loads = true;
    dlclose(libcuda);
  } else {
    const char* error = dlerror();
    facts.libcuda_error = error != nullptr ? error : "dlopen failed";
  }
  // Without a driver these leave 0 (driver) and still give the runtime's own version.
  if (cudaDriverGetVersion(&facts.driver_version) != cudaSuccess) facts.driver_version = 0;
  if (cudaRuntimeGetVersion(&facts.runtime_version) != cudaSuccess) facts.runtime_version = 0;
  return classify_gpu(facts);
}

int require_devices() {
  const GpuAvailability gpu = gpu_availability();
  if (gpu.verdict != GpuVerdict::usable) throw NoUsableGpuError("no usable GPU: " + gpu.message);
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

}  // namespace attnprof
