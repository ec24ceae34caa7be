#include "summary/kernel_category.hpp"

#include <cctype>

namespace attnprof {

bool is_communication_kernel(std::string_view name) {
  // ncclKernel_AllReduce_RING_LL_Sum_float (NCCL < 2.19), ncclDevKernel_AllReduce_Sum_bf16_RING_LL,
  // ncclDevKernel_Generic, and the same inside namespaces or templates.
  constexpr std::string_view kNeedle = "nccl";
  for (std::size_t i = 0; i + kNeedle.size() <= name.size(); ++i) {
    std::size_t j = 0;
    while (j < kNeedle.size() && std::tolower(static_cast<unsigned char>(name[i + j])) == kNeedle[j]) ++j;
    if (j == kNeedle.size()) return true;
  }
  return false;
}

const char* kernel_category(std::string_view name) {
  return is_communication_kernel(name) ? kCommunicationKernel : kComputeKernel;
}

double communication_kernels_per_iter(const CaseSummary& c) {
  double total = 0;
  for (const KernelSummary& k : c.kernels)
    if (is_communication_kernel(k.name)) total += k.per_iter;
  return total;
}

double communication_us_per_iter(const CaseSummary& c) {
  double total = 0;
  for (const KernelSummary& k : c.kernels)
    if (is_communication_kernel(k.name)) total += k.gpu_us_per_iter;
  return total;
}

}  // namespace attnprof
