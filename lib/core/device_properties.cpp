#include "core/device_properties.hpp"

namespace attnprof {

DeviceProperties sm90_reference_properties() {
  // Values as cudaGetDeviceProperties reports them for an H200 (sm_90).
  DeviceProperties p;
  p.name = "NVIDIA H200";
  p.compute_major = 9;
  p.compute_minor = 0;
  p.sm_count = 132;
  p.max_threads_per_block = 1024;
  p.max_threads_per_sm = 2048;
  p.max_blocks_per_sm = 32;
  p.regs_per_block = 65536;
  p.regs_per_sm = 65536;
  p.warp_size = 32;
  p.shared_mem_per_block = 49152;
  p.shared_mem_per_sm = 233472;
  p.shared_mem_per_block_optin = 232448;
  p.reserved_shared_mem_per_block = 1024;
  p.total_global_mem = 150754820096;
  p.l2_cache_bytes = 62914560;
  return p;
}

}  // namespace attnprof
