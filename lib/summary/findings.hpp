// Automatic explanations of what a case's trace shows, each with its evidence: copies inside
// the timed loop, dtype conversions, a mask rebuilt every call, low occupancy and its cause,
// registers a kernel re-splits with setmaxnreg (flash:hopper's) beside CUPTI's count, driver-API
// launches, host time exceeding GPU time, collective communication (NCCL) kernels; for a
// backward, its fp32 dQ accumulator, P recomputed or materialised, workspace memsets, and bits that
// differ between two runs (docs/config.md lists them).
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

// Whether the case ran a stream-K tail kernel (a kernel named *_tail_kernel, such as flash's
// backward tail): the main kernel's grid then counts blocks that leave at once.
bool has_stream_k_tail(const CaseSummary& c);

}  // namespace attnprof
