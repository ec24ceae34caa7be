// What a kernel is for, from its name: collective communication (NCCL) or compute. A rank's
// iteration that holds an all_reduce shows both, and the two read differently: a communication
// kernel's GPU time includes waiting for the other ranks, so it measures skew as much as bandwidth.
// Derived from the name wherever it is needed, so summaries written before it read the same.
#pragma once

#include <string_view>

#include "summary/summary.hpp"

namespace attnprof {

inline constexpr const char* kComputeKernel = "compute";
inline constexpr const char* kCommunicationKernel = "communication";

// kCommunicationKernel for NCCL's kernels (ncclKernel_*, ncclDevKernel_*, any name containing
// "nccl", in any case), kComputeKernel for everything else.
const char* kernel_category(std::string_view kernel_name);
bool is_communication_kernel(std::string_view kernel_name);

// Launches and GPU time per timed iteration of the case's communication kernels.
double communication_kernels_per_iter(const CaseSummary& c);
double communication_us_per_iter(const CaseSummary& c);

}  // namespace attnprof
