// Why there is no GPU to run on, told apart: no NVIDIA driver, the toolkit's stub driver, a driver
// older than the runtime, no device, or another error. Pure: gpu/device_info.cpp gathers the facts
// with the CUDA runtime and dlopen (gpu_availability()), and require_devices(), the GPU tests' main
// and `attnprof devices` say what it concludes; tests/cpu/skip_policy_test.cpp checks it.
#pragma once

#include <string>

#include <fmt/format.h>

namespace attnprof {

// cudaGetDeviceCount's answer, as far as the verdict needs it.
enum class DeviceCountStatus { success, insufficient_driver, stub_library, no_device, other };

struct GpuFacts {
  bool libcuda_loads = false;  // dlopen("libcuda.so.1") succeeded
  std::string libcuda_error;   // dlerror() when it did not
  DeviceCountStatus status = DeviceCountStatus::other;
  std::string status_text;  // "cudaErrorInsufficientDriver: CUDA driver version is insufficient ..."
  std::string runtime_message;  // what the runtime said, when nothing above tells more
  int device_count = 0;
  int driver_version = 0;   // cudaDriverGetVersion: 0 without a driver
  int runtime_version = 0;  // cudaRuntimeGetVersion
};

enum class GpuVerdict { usable, no_driver, driver_runtime_mismatch, no_device, unusable };

struct GpuAvailability {
  GpuVerdict verdict = GpuVerdict::unusable;
  std::string message;  // why not usable; a note when usable (may be empty)
};

// "13.0" from 13000.
inline std::string cuda_version_number_text(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

inline GpuAvailability classify_gpu(const GpuFacts& f) {
  const bool driver_older = f.driver_version > 0 && f.driver_version < f.runtime_version;
  const std::string mismatch = fmt::format("driver/runtime mismatch: driver supports CUDA {}, runtime is {}",
                                           cuda_version_number_text(f.driver_version),
                                           cuda_version_number_text(f.runtime_version));
  if (f.status == DeviceCountStatus::success && f.device_count > 0)
    // CUDA's minor version compatibility runs a newer 12.x/13.x runtime on an older driver.
    return {GpuVerdict::usable, driver_older ? mismatch + " (the devices answer: minor version compatibility)" : ""};
  if (!f.libcuda_loads)
    return {GpuVerdict::no_driver, fmt::format("no NVIDIA driver: libcuda.so.1 does not load ({})", f.libcuda_error)};
  if (f.status == DeviceCountStatus::stub_library)
    return {GpuVerdict::no_driver,
            fmt::format("no NVIDIA driver: the libcuda.so.1 found is the CUDA toolkit's stub ({})", f.status_text)};
  if (f.status == DeviceCountStatus::insufficient_driver || driver_older)
    return {GpuVerdict::driver_runtime_mismatch, fmt::format("{} ({})", mismatch, f.status_text)};
  if (f.status == DeviceCountStatus::no_device || (f.status == DeviceCountStatus::success && f.device_count == 0))
    return {GpuVerdict::no_device,
            fmt::format("no CUDA device: the driver (CUDA {}) reports none{}", cuda_version_number_text(f.driver_version),
                        f.status == DeviceCountStatus::success ? "" : " (" + f.status_text + ")")};
  return {GpuVerdict::unusable, f.runtime_message};
}

}  // namespace attnprof
