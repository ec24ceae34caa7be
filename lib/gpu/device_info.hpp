// Reading what the machine has: devices, driver and library versions.
#pragma once

#include <string>
#include <vector>

#include "core/device_properties.hpp"
#include "core/gpu_availability.hpp"

namespace attnprof {

DeviceProperties query_device_properties(int device);

struct SoftwareVersions {
  int driver = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime = 0;  // cudaRuntimeGetVersion
  std::string driver_text;  // "580.159.04" from NVML-free sources when known, else empty
};
SoftwareVersions query_software_versions();

// Whether a GPU can be used here and, if not, why (core/gpu_availability.hpp): no driver, the
// toolkit's stub driver, a driver older than the runtime, no device. Usable with a note when the
// driver is older but the devices answer (minor version compatibility).
GpuAvailability gpu_availability();

// Number of usable devices; throws NoUsableGpuError ("no usable GPU: " and gpu_availability()'s
// reason) when there are none.
int require_devices();

// "13.0" from 13000.
std::string cuda_version_text(int version);

}  // namespace attnprof
