#include "trace/annotate.hpp"

#include <fmt/format.h>

namespace attnprof::trace {

KernelResources resources_of(const KernelActivity& k) {
  KernelResources r;
  r.block_threads = k.block[0] * k.block[1] * k.block[2];
  r.registers_per_thread = k.registers_per_thread;
  r.static_shared_bytes = k.static_shared_bytes;
  r.dynamic_shared_bytes = k.dynamic_shared_bytes;
  r.shared_optin = k.shared_optin;
  r.carveout_percent = k.carveout_percent;
  return r;
}

void annotate_occupancy(KernelActivity& kernel, const DeviceProperties& device) {
  kernel.occupancy = theoretical_occupancy(device, resources_of(kernel));
}

void annotate_occupancy(ActivityBatch& batch, const std::vector<DeviceProperties>& devices) {
  for (KernelActivity& k : batch.kernels) {
    const DeviceProperties* device = nullptr;
    for (const DeviceProperties& d : devices)
      if (static_cast<std::uint32_t>(d.id) == k.device) device = &d;
    if (device != nullptr) {
      annotate_occupancy(k, *device);
    } else {
      k.occupancy = {};
      k.occupancy.error = fmt::format("no properties of device {}", k.device);
    }
  }
}

}  // namespace attnprof::trace
