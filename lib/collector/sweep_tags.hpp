// Small pure helpers of the collector, kept apart from CUPTI so CPU tests can reach them.
#pragma once

#include <cstdint>
#include <string>

#include "trace/model.hpp"

namespace attnprof {

// A SweepTag as a CUPTI external correlation id and back:
// bits 63..32 case index + 1, 31..24 phase, 23..0 iteration + 1.
std::uint64_t encode_tag(const trace::SweepTag& tag);
trace::SweepTag decode_tag(std::uint64_t id);

// "cudaLaunchKernel" from CUPTI's "cudaLaunchKernel_v7000" or "cudaLaunchKernel_ptsz_v7000".
std::string strip_api_version(std::string name);

// Demangled C++ name, or the input when it is not a mangled name.
std::string demangle(const char* name);

}  // namespace attnprof
