#include "core/occupancy.hpp"

#include <cuda_occupancy.h>

#include <vector>

#include <fmt/format.h>

namespace attnprof {
namespace {

cudaOccDeviceProp to_occ(const DeviceProperties& d) {
  cudaOccDeviceProp p;
  p.computeMajor = d.compute_major;
  p.computeMinor = d.compute_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.shared_mem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.shared_mem_per_sm);
  p.numSms = d.sm_count;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.shared_mem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_shared_mem_per_block);
  return p;
}

const char* occ_error_text(cudaOccError status) {
  switch (status) {
    case CUDA_OCC_ERROR_INVALID_INPUT: return "invalid input to the occupancy calculator";
    case CUDA_OCC_ERROR_UNKNOWN_DEVICE: return "compute capability unknown to cuda_occupancy.h";
    default: return "occupancy calculator error";
  }
}

}  // namespace

Occupancy theoretical_occupancy(const DeviceProperties& device, const KernelResources& kernel) {
  Occupancy out;
  const cudaOccDeviceProp prop = to_occ(device);

  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = device.max_threads_per_block;
  attr.numRegs = kernel.registers_per_thread;
  attr.sharedSizeBytes = static_cast<size_t>(kernel.static_shared_bytes);
  attr.partitionedGCConfig = PARTITIONED_GC_OFF;
  attr.shmemLimitConfig = kernel.shared_optin ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
  // The record does not carry the function's dynamic limit; a launch that ran had at least
  // the dynamic size it used, and at most what the device allows to opt in.
  attr.maxDynamicSharedSizeBytes =
      kernel.shared_optin
          ? static_cast<size_t>(device.shared_mem_per_block_optin - kernel.static_shared_bytes)
          : static_cast<size_t>(device.shared_mem_per_block - kernel.static_shared_bytes);
  attr.numBlockBarriers = 1;
  attr.virtualResourceCount = 0;

  cudaOccDeviceState state;
  state.carveoutConfig = kernel.carveout_percent;

  cudaOccResult result;
  const cudaOccError status = cudaOccMaxActiveBlocksPerMultiprocessor(
      &result, &prop, &attr, &state, kernel.block_threads, static_cast<size_t>(kernel.dynamic_shared_bytes));
  if (status != CUDA_OCC_SUCCESS) {
    out.error = occ_error_text(status);
    return out;
  }
  const int warps_per_block = (kernel.block_threads + device.warp_size - 1) / device.warp_size;
  out.valid = true;
  out.active_blocks_per_sm = result.activeBlocksPerMultiprocessor;
  out.active_warps_per_sm = result.activeBlocksPerMultiprocessor * warps_per_block;
  out.max_warps_per_sm = device.max_threads_per_sm / device.warp_size;
  out.theoretical_percent = out.max_warps_per_sm > 0 ? 100.0 * out.active_warps_per_sm / out.max_warps_per_sm : 0;
  out.block_limit_registers = result.blockLimitRegs;
  out.block_limit_shared_memory = result.blockLimitSharedMem;
  out.block_limit_warps = result.blockLimitWarps;
  out.block_limit_blocks = result.blockLimitBlocks;
  out.allocated_registers_per_block = result.allocatedRegistersPerBlock;
  out.allocated_shared_bytes_per_block = static_cast<int>(result.allocatedSharedMemPerBlock);
  out.registers_per_sm = device.regs_per_sm;

  std::vector<std::string> limits;
  if (result.limitingFactors & OCC_LIMIT_REGISTERS) limits.emplace_back("registers");
  if (result.limitingFactors & OCC_LIMIT_SHARED_MEMORY) limits.emplace_back("shared memory");
  if (result.limitingFactors & OCC_LIMIT_WARPS) limits.emplace_back("warps");
  if (result.limitingFactors & OCC_LIMIT_BLOCKS) limits.emplace_back("blocks");
  if (result.limitingFactors & OCC_LIMIT_BARRIERS) limits.emplace_back("barriers");
  out.limiter = limits.empty() ? "none" : fmt::format("{}", fmt::join(limits, " and "));
  if (out.active_blocks_per_sm == 0) out.limiter = "cannot launch: " + out.limiter;
  return out;
}

std::string explain_occupancy(const KernelResources& kernel, const Occupancy& e) {
  if (!e.valid) return "occupancy unknown: " + e.error;
  std::string cause;
  if (e.limiter.find("registers") != std::string::npos) {
    // Registers are allocated per warp in fixed units, so a block may hold more than it asked for.
    const bool rounded = kernel.block_threads > 0 &&
                         e.allocated_registers_per_block > kernel.registers_per_thread * kernel.block_threads;
    const std::string per_thread =
        rounded ? fmt::format("{} registers (allocated as {})", kernel.registers_per_thread,
                              e.allocated_registers_per_block / kernel.block_threads)
                : fmt::format("{} registers", kernel.registers_per_thread);
    cause = fmt::format("{} x {} threads = {} registers per block of {} per SM", per_thread, kernel.block_threads,
                        e.allocated_registers_per_block, e.registers_per_sm);
  }
  else if (e.limiter.find("shared memory") != std::string::npos)
    cause = fmt::format("{} B shared memory per block", e.allocated_shared_bytes_per_block);
  else
    cause = fmt::format("{} threads per block", kernel.block_threads);
  return fmt::format("{} -> {} blocks/SM ({} of {} warps) -> {:.1f}%, limited by {}", cause,
                     e.active_blocks_per_sm, e.active_warps_per_sm, e.max_warps_per_sm, e.theoretical_percent,
                     e.limiter);
}

}  // namespace attnprof
