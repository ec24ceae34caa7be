// Automatic explanations of what a case's trace shows, each with its evidence: copies inside
// the timed loop, dtype conversions, a mask rebuilt every call, low occupancy and its cause,
// registers a kernel re-splits with setmaxnreg (flash:hopper's) beside CUPTI's count, driver-API
// launches, host time exceeding GPU time, collective communication (NCCL) kernels; device memory
// (score matrices held, a masked copy of them, allocations in the timed loop, workspace, K/V
// repeated for grouped heads); for a backward, its fp32 dQ accumulator, P recomputed or
// materialised, workspace memsets, and bits that differ between two runs (docs/config.md lists them).
#pragma once

#include "summary/summary.hpp"

namespace attnprof {

// Appends findings to c.findings (cases that did not run get none).
void add_findings(CaseSummary& c);

// Findings that compare cases of one run: a backward case's time against the forward of the same
// backend and problem ("backward_forward_ratio", on the backward case) when both ran. Replaces
// the ones a previous call added, so a merged summary can be given them again.
void add_run_findings(RunSummary& summary);

// What a kernel name says about dtype conversion: "bf16->fp32", "fp32->bf16", or "" if none.
std::string conversion_direction(const std::string& kernel_name);

// "flash_forward_kernel" from "void attnprof::flash_forward_kernel<...>(...)": the name without templates and arguments.
std::string shorten_name(const std::string& name);

// ---- What a finding is worth (Stake, summary.hpp) ----

// The GPU time of one iteration (its kernels, copies and fills; the median where the trace has
// none): what a GPU-time stake is a share of.
double iteration_gpu_us(const CaseSummary& c);
// `us` of the case's GPU time per iteration, spent on what a finding names (a cost) or the time of
// the kernel a fact explains (a scope).
Stake gpu_time_cost(const CaseSummary& c, double us, double bytes = 0);
Stake gpu_time_scope(const CaseSummary& c, double us, double bytes = 0);
// Host time per call above the GPU's, of `host_us` per call.
Stake host_time_cost(double above_gpu_us, double host_us);
// Host time preparing the first call (a plan), of the first call's time (that and one GPU call).
Stake first_call_cost(const CaseSummary& c, double host_us);

// Device memory held or allocated (CaseMemory), where no time is measured: basis none, `bytes`,
// `share_percent` of the case's peak device memory (0 without one); `cost` true for what is paid
// every iteration (an allocation inside the timed loop), false for what is held.
Stake device_memory_stake(const CaseSummary& c, double bytes, bool cost);
// Whether a stake weighs bytes of device memory (basis none, bytes > 0): finding_groups ranks them apart.
bool is_memory_stake(const Stake& stake);

// Whether a problem is large enough that the host's time per call matters next to the GPU's: at
// least a GFLOP (a short prompt: 1x16x512x512x64), or 16 MB to read (a decode step's K/V cache).
// Below it every backend's call is shorter than its enqueueing.
bool at_realistic_size(const AttentionProblem& problem);

// Whether the case ran a stream-K tail kernel (a kernel named *_tail_kernel, such as flash's
// backward tail): the main kernel's grid then counts blocks that leave at once.
bool has_stream_k_tail(const CaseSummary& c);

}  // namespace attnprof
