// Device properties and versions through the CUDA driver API alone: the injection library runs
// inside someone else's process, whose CUDA runtime (static or shared, any version) it must not
// touch.
#pragma once

#include <string>

#include "core/device_properties.hpp"

namespace attnprof {

// Properties of device `ordinal` as the profiled process sees it; throws std::runtime_error
// naming the failed driver call.
DeviceProperties driver_device_properties(int ordinal);

// "580.159.04 (CUDA 13.0)", or what of it is known.
std::string driver_version_text();

}  // namespace attnprof
