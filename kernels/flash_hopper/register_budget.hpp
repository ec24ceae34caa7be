// How flash:hopper's kernel splits the register file, in plain C++ so that the findings (which
// see only what CUPTI records: the launch's registers per thread) can say what the warpgroups
// really run with. The kernel's traits (flash_hopper_kernel.cuh) take their numbers from here.
#pragma once

namespace attnprof::kernels::hopper {

// The kernel's name as CUPTI records it (templates and arguments stripped).
inline constexpr const char* kHopperKernelName = "flash_hopper_fwd_kernel";

inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kConsumerWarpgroups = 2;
inline constexpr int kHopperThreads = kWarpgroupThreads * (1 + kConsumerWarpgroups);
// setmaxnreg: the producer gives registers back, the consumers take them (multiples of 8; their
// sum over the block stays within the 65536 of an SM).
inline constexpr int kProducerRegisters = 32;
inline constexpr int kConsumerRegisters = 232;
static_assert(kWarpgroupThreads * (kProducerRegisters + kConsumerWarpgroups * kConsumerRegisters) <= 65536);

}  // namespace attnprof::kernels::hopper
