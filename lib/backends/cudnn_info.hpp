// What cuDNN this process actually loaded (not the headers it was built against), for the trace
// metadata and for the cudnn backend's own version gates.
#pragma once

#include <cstddef>
#include <string>

namespace attnprof {

// cudnnGetVersion() of the loaded library, e.g. 91400.
std::size_t cudnn_runtime_version_number();

// "9.14.0" for 91400 (major = v / 10000, minor = v % 10000 / 100, patch = v % 100).
std::string format_cudnn_version(std::size_t version);

// The loaded library's version, e.g. "9.14.0".
std::string cudnn_runtime_version();

// "9.14.0 (built for CUDA 12.9)": the loaded library and the CUDA runtime it was built with.
std::string cudnn_runtime_description();

}  // namespace attnprof
