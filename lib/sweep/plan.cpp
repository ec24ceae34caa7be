#include "sweep/plan.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace attnprof {

std::uint64_t case_seed(std::uint64_t seed, const AttentionProblem& problem) {
  // FNV-1a of the problem's name, backend and pass left out: both passes see the same q, k, v.
  AttentionProblem forward = problem;
  forward.pass = AttentionPass::forward;
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char ch : case_label("", forward)) hash = (hash ^ ch) * 1099511628211ull;
  return seed ^ hash;
}

std::vector<PlannedCase> plan_cases(const Config& config, const std::vector<std::string>& backends) {
  std::vector<PlannedCase> cases;
  for (const std::string& backend : backends)
    for (const ShapeSpec& shape : config.shapes)
      for (DType dtype : config.dtypes)
        for (CausalMode causal : shape.causal.empty() ? config.causal : shape.causal)
          for (AttentionPass pass : config.passes) {
            PlannedCase c;
            c.backend = backend;
            c.problem.shape = shape.shape;
            c.problem.dtype = dtype;
            set_causal_mode(c.problem, causal);
            c.problem.window = shape.window;
            c.problem.has_bias = shape.bias;
            c.problem.pass = pass;
            c.label = case_label(backend, c.problem);
            c.seed = case_seed(config.seed, c.problem);
            cases.push_back(std::move(c));
          }
  return cases;
}

std::optional<std::string> backward_out_of_scope(const AttentionProblem& p) {
  if (!p.is_backward()) return std::nullopt;
  const AttentionShape& s = p.shape;
  if (s.paged()) return std::string("a paged K/V cache is an inference layout: its backward is out of scope");
  if (s.ragged()) return std::string("the backward of a ragged batch is out of scope (dense batches only)");
  if (s.seq_q <= 16 && s.seq_kv > s.seq_q)
    return fmt::format("a decode step (seq_q {} against seq_kv {}) has no backward here: out of scope", s.seq_q,
                       s.seq_kv);
  return std::nullopt;
}

std::vector<int> parse_device_list(const std::string& text, std::optional<int> device_count) {
  if (text == "all") {
    if (!device_count) throw UsageError("--devices all: the number of GPUs is not known here");
    std::vector<int> all(static_cast<std::size_t>(*device_count));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  std::vector<int> devices;
  std::set<int> seen;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const bool digits = !item.empty() && item.size() <= 6 &&
                        std::all_of(item.begin(), item.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; });
    if (!digits)
      throw UsageError(fmt::format("--devices '{}': expected all, or device ordinals separated by commas (0,1,3); "
                                   "found '{}'",
                                   text, item));
    const int ordinal = std::stoi(item);
    if (!seen.insert(ordinal).second)
      throw UsageError(fmt::format("--devices '{}': GPU {} is listed twice; one worker per GPU", text, ordinal));
    if (device_count && ordinal >= *device_count)
      throw UsageError(fmt::format("--devices '{}': there is no GPU {} (this machine has {}: 0..{})", text, ordinal,
                                   *device_count, *device_count - 1));
    devices.push_back(ordinal);
    start = comma + 1;
  }
  return devices;
}

double estimated_case_cost(const PlannedCase& c) { return attention_flops(c.problem); }

std::vector<std::vector<int>> shard_cases(const std::vector<PlannedCase>& cases, std::size_t slots) {
  std::vector<std::vector<int>> shards(std::max<std::size_t>(slots, 1));
  std::vector<int> order(cases.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return estimated_case_cost(cases[static_cast<std::size_t>(a)]) > estimated_case_cost(cases[static_cast<std::size_t>(b)]);
  });
  std::vector<double> load(shards.size(), 0.0);
  for (int index : order) {
    const auto lightest = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    // Every case costs something, so zero-cost cases (unknown shapes) still spread out.
    load[lightest] += std::max(estimated_case_cost(cases[static_cast<std::size_t>(index)]), 1.0);
    shards[lightest].push_back(index);
  }
  for (std::vector<int>& shard : shards) std::sort(shard.begin(), shard.end());
  return shards;
}

}  // namespace attnprof
