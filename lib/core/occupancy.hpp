// Theoretical occupancy of a kernel launch, from what a kernel record carries (block size,
// registers, shared memory) and the device's properties, computed with the toolkit's
// cuda_occupancy.h calculator. One type carries the result and everything its explanation
// needs; trace/annotate.hpp computes it once per kernel record.
#pragma once

#include <string>

#include "core/device_properties.hpp"

namespace attnprof {

struct KernelResources {
  int block_threads = 0;
  int registers_per_thread = 0;
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  bool shared_optin = false;        // the kernel opted in above 48 KiB of dynamic shared memory
  int carveout_percent = -1;        // an explicitly requested carveout, -1 for the driver default
};

struct Occupancy {
  bool valid = false;                // false: `error` says why it could not be computed
  int active_blocks_per_sm = 0;
  double theoretical_percent = 0;
  std::string limiter;               // "registers", "shared memory", "warps", "blocks", "barriers", joined with " and " on ties
  int block_limit_registers = 0;     // blocks per SM each resource alone would allow
  int block_limit_shared_memory = 0;
  int block_limit_warps = 0;
  int block_limit_blocks = 0;
  std::string error;
  // What the explanation quotes.
  int active_warps_per_sm = 0;
  int max_warps_per_sm = 0;
  int allocated_registers_per_block = 0;
  int allocated_shared_bytes_per_block = 0;
  int registers_per_sm = 0;

  bool operator==(const Occupancy&) const = default;
};

Occupancy theoretical_occupancy(const DeviceProperties& device, const KernelResources& kernel);

// One line a human reads: "255 registers (allocated as 256) x 128 threads = 32768 registers per
// block of 65536 per SM -> 2 blocks/SM (8 of 64 warps) -> 12.5%, limited by registers".
std::string explain_occupancy(const KernelResources& kernel, const Occupancy& occupancy);

}  // namespace attnprof
