// Facts derived from a record and the device it ran on, computed once per record by the one step
// every flow calls after its records arrive: `run` after each case's drain, `profile` when the
// program ends, `report` as each event is read. Never on CUPTI's buffer thread.
#pragma once

#include <vector>

#include "core/device_properties.hpp"
#include "core/occupancy.hpp"
#include "trace/model.hpp"

namespace attnprof::trace {

// What a kernel record asks of an SM.
KernelResources resources_of(const KernelActivity& kernel);

// Theoretical occupancy of the kernel's launch configuration on `device`.
void annotate_occupancy(KernelActivity& kernel, const DeviceProperties& device);

// Every kernel of the batch against the device it ran on (matched by ordinal); a kernel whose
// device is not among `devices` keeps an occupancy that says so.
void annotate_occupancy(ActivityBatch& batch, const std::vector<DeviceProperties>& devices);

}  // namespace attnprof::trace
