// Reading what the machine has: devices, driver and library versions.
#pragma once

#include <string>
#include <vector>

#include "core/device_properties.hpp"

namespace attnprof {

DeviceProperties query_device_properties(int device);

struct SoftwareVersions {
  int driver = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime = 0;  // cudaRuntimeGetVersion
  std::string driver_text;  // "580.159.04" from NVML-free sources when known, else empty
};
SoftwareVersions query_software_versions();

// Number of usable devices; throws NoUsableGpuError with the driver's reason when there are none.
int require_devices();

// "13.0" from 13000.
std::string cuda_version_text(int version);

}  // namespace attnprof
