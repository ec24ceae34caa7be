// The plan of a sweep: its cases in order, the inputs each one draws, which GPUs run it and
// which cases each GPU runs (`attnprof run --devices`). Plain functions: no GPU is touched, so
// the CPU tests cover them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/types.hpp"

namespace attnprof {

struct PlannedCase {
  std::string backend;
  AttentionProblem problem;
  std::string label;
  std::uint64_t seed = 0;  // of the case's inputs: the same for every backend of one problem
};

// The cases a config asks for, in sweep order: backend, then shape, dtype, causal, pass.
std::vector<PlannedCase> plan_cases(const Config& config, const std::vector<std::string>& backends);

// The seed of a problem's inputs under the config's seed: from the problem's name, so inputs do
// not change when cases are added or reordered, and every backend and both passes of a problem
// see the same.
std::uint64_t case_seed(std::uint64_t seed, const AttentionProblem& problem);

// Why a backward case of this problem is out of scope for every backend, before any backend is
// asked: ragged batches, paged caches and decode steps (seq_q <= 16 against a longer K/V) are
// inference workloads here. nullopt for a forward problem or a backward that is in scope.
std::optional<std::string> backward_out_of_scope(const AttentionProblem& problem);

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
