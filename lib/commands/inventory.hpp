// `attnprof devices` and `attnprof backends`: what is here, and what each backend runs on it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "core/device_properties.hpp"
#include "core/types.hpp"

namespace attnprof {

int devices_command();

struct BackendsRequest {
  int device = 0;
};

// Each backend's description, whether it runs on this GPU (and why not), and the problems it
// accepts; without a GPU, the problems alone.
int backends_command(const BackendsRequest& request);

// The table `attnprof backends` prints, one backend's row of it as data: what the backend was
// asked and what it answered. Tests read it to tell a documented refusal from a new one.

// A dense 1 x 1 x 128 x 128 problem of one dtype, head dim, causal setting and bias.
struct ProblemProbe {
  DType dtype = DType::bf16;
  int head_dim = 0;
  bool causal = false;
  bool bias = false;
  Unsupported refused;
};

// The workloads of LLM attention, each probed on a bf16 d128 problem of 32 query heads, seq_q 96,
// seq_kv 160 (to_string says what each is).
enum class ProbedWorkload { grouped_heads, one_kv_head, bottom_right_causal, sliding_window, ragged, paged, decode,
                            paged_decode };
inline constexpr ProbedWorkload kProbedWorkloads[] = {
    ProbedWorkload::grouped_heads,  ProbedWorkload::one_kv_head, ProbedWorkload::bottom_right_causal,
    ProbedWorkload::sliding_window, ProbedWorkload::ragged,      ProbedWorkload::paged,
    ProbedWorkload::decode,         ProbedWorkload::paged_decode};
inline std::string_view to_string(ProbedWorkload workload) {
  switch (workload) {
    case ProbedWorkload::grouped_heads: return "grouped K/V heads (GQA 32/8)";
    case ProbedWorkload::one_kv_head: return "one K/V head (MQA)";
    case ProbedWorkload::bottom_right_causal: return "bottom-right causal";
    case ProbedWorkload::sliding_window: return "sliding window";
    case ProbedWorkload::ragged: return "ragged batch (packed)";
    case ProbedWorkload::paged: return "paged K/V (pages of 16)";
    case ProbedWorkload::decode: return "decode (1 query token, GQA 32/8)";
    case ProbedWorkload::paged_decode: return "paged decode (pages of 16)";
  }
  return "?";
}

struct WorkloadProbe {
  ProbedWorkload workload = ProbedWorkload::grouped_heads;
  Unsupported refused;
};

struct BackendSupport {
  std::string backend;
  Unsupported device;  // check_device's answer; nullopt also when there was no device to check
  bool device_checked = false;
  std::vector<ProblemProbe> problems;  // dtype x head dim x causal x bias, in that nesting
  std::vector<WorkloadProbe> workloads;  // kProbedWorkloads' order
  Unsupported backward;  // check_problem, then check_backward, of a dense bf16 d128 causal GQA 32/8 backward
};

// The head dims `attnprof backends` probes.
inline const std::vector<int> kProbedHeadDims = {32, 40, 64, 80, 96, 128, 160, 192, 256};

// One backend's row, with the device checks only when `device` is given. `head_dims`: the head
// dims of the problem probes (a test may ask for the ones its cases use).
BackendSupport probe_backend_support(const BackendInfo& backend, const std::optional<DeviceProperties>& device,
                                     const std::vector<int>& head_dims = kProbedHeadDims);

}  // namespace attnprof
