// What attnprof knows about a GPU: plain data, filled from cudaGetDeviceProperties on a live
// device or read back from a saved trace's "deviceProperties".
#pragma once

#include <cstdint>
#include <string>

namespace attnprof {

struct DeviceProperties {
  int id = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int regs_per_block = 0;
  int regs_per_sm = 0;
  int warp_size = 32;
  std::int64_t shared_mem_per_block = 0;
  std::int64_t shared_mem_per_sm = 0;
  std::int64_t shared_mem_per_block_optin = 0;
  std::int64_t reserved_shared_mem_per_block = 0;
  std::int64_t total_global_mem = 0;
  std::int64_t l2_cache_bytes = 0;
  int clock_rate_khz = 0;
  int memory_clock_rate_khz = 0;
  int memory_bus_width_bits = 0;
};

// H200-class properties (sm_90, 132 SMs) for CPU tests of everything that consumes them.
DeviceProperties sm90_reference_properties();

}  // namespace attnprof
