#include "inject/driver_devices.hpp"

#include <cuda.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace attnprof {
namespace {

void check(CUresult status, const char* call) {
  if (status == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (cuGetErrorString(status, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown driver error";
  throw std::runtime_error(fmt::format("{} failed: {} (CUresult {})", call, text, static_cast<int>(status)));
}

int attribute(CUdevice device, CUdevice_attribute what, const char* name) {
  int value = 0;
  check(cuDeviceGetAttribute(&value, what, device), name);
  return value;
}

}  // namespace

DeviceProperties driver_device_properties(int ordinal) {
  CUdevice device = 0;
  check(cuDeviceGet(&device, ordinal), "cuDeviceGet");
  DeviceProperties p;
  p.id = ordinal;
  char name[256] = {};
  check(cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
  p.name = name;
  size_t total = 0;
  check(cuDeviceTotalMem(&total, device), "cuDeviceTotalMem");
  p.total_global_mem = static_cast<std::int64_t>(total);
#define ATTR(field, what) p.field = attribute(device, what, #what)
  ATTR(compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  ATTR(compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  ATTR(sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  ATTR(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  ATTR(max_threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  ATTR(max_blocks_per_sm, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  ATTR(regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  ATTR(regs_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  ATTR(warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  ATTR(shared_mem_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  ATTR(shared_mem_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  ATTR(shared_mem_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  ATTR(reserved_shared_mem_per_block, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  ATTR(l2_cache_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  ATTR(clock_rate_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  ATTR(memory_clock_rate_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  ATTR(memory_bus_width_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
#undef ATTR
  return p;
}

std::string driver_version_text() {
  std::string text;
  // The kernel module's own version, e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 ...".
  std::ifstream proc("/proc/driver/nvidia/version");
  std::string line, word;
  if (std::getline(proc, line)) {
    std::istringstream words(line);
    while (words >> word)
      if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos) {
        text = word;
        break;
      }
  }
  int version = 0;
  if (cuDriverGetVersion(&version) == CUDA_SUCCESS) {
    const std::string cuda = fmt::format("CUDA {}.{}", version / 1000, (version % 1000) / 10);
    text = text.empty() ? cuda : fmt::format("{} ({})", text, cuda);
  }
  return text;
}

}  // namespace attnprof
