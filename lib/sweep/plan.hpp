// Which GPUs a run uses and which of its cases each one runs (`attnprof run --devices`). Plain
// functions over the planned sweep: no GPU is touched, so the CPU tests cover them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace attnprof {

struct PlannedCase {
  std::string backend;
  AttentionProblem problem;
  std::string label;
};

// "all" -> 0..device_count-1; "0,2" -> {0, 2}, in the order given. Throws UsageError for text
// that is no list of ordinals, a repeated ordinal (two workers on one GPU would time each
// other), or one that is not below device_count (when the count is known).
std::vector<int> parse_device_list(const std::string& text, std::optional<int> device_count);

// The work a case is expected to be: its attention FLOPs. The host's float64 reference
// (verification) and the GPU both scale with it; the backends' speeds differ, but alike on
// every GPU, so the balance holds.
double estimated_case_cost(const PlannedCase& c);

// Case indices per device slot (slot i runs on the i-th device of the list): the costliest
// case first onto the least-loaded slot (ties: the lowest slot), so the slowest GPU's share is
// as small as a greedy split can make it. Each slot's indices are in sweep order. With one
// slot it is every case, in order.
std::vector<std::vector<int>> shard_cases(const std::vector<PlannedCase>& cases, std::size_t slots);

}  // namespace attnprof
