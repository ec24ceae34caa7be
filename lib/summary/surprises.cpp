#include "summary/surprises.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace attnprof {
namespace {

std::string number_text(double value) {
  return std::abs(value - std::round(value)) < 1e-9 ? fmt::format("{:.0f}", value) : fmt::format("{:.3g}", value);
}

// An expectation's shape names the sizes; a ragged batch's lengths and a page size narrow it
// further only where the expectation gives them.
bool expected_shape_matches(const AttentionShape& expected, const AttentionShape& actual) {
  return expected.batch == actual.batch && expected.heads == actual.heads && expected.seq_q == actual.seq_q &&
         expected.seq_kv == actual.seq_kv && expected.head_dim == actual.head_dim &&
         expected.kv_heads() == actual.kv_heads() &&
         (expected.seq_lens_q.empty() || expected.seq_lens_q == actual.seq_lens_q) &&
         (expected.seq_lens_kv.empty() || expected.seq_lens_kv == actual.seq_lens_kv) &&
         (expected.page_size == 0 || expected.page_size == actual.page_size);
}

}  // namespace

bool expectation_applies(const Expectation& e, const CaseSummary& c) {
  const std::string family = c.backend.substr(0, c.backend.find(':'));
  if (e.backend != c.backend && e.backend != family) return false;
  if (e.dtype && *e.dtype != c.problem.dtype) return false;
  if (e.causal && *e.causal != causal_mode(c.problem)) return false;
  if (e.pass != c.problem.pass) return false;
  if (e.shape && !expected_shape_matches(*e.shape, c.problem.shape)) return false;
  return true;
}

void add_surprises(CaseSummary& c, const std::vector<Expectation>& expectations) {
  if (c.status != CaseStatus::ok) return;
  const KernelSummary* dominant = c.dominant_kernel();
  for (std::size_t i = 0; i < expectations.size(); ++i) {
    const Expectation& e = expectations[i];
    if (!expectation_applies(e, c)) continue;
    const std::string where = e.pointer.value_or(fmt::format("/expect/{}", i));
    const std::string note = e.note.value_or("");
    auto surprise = [&](const char* field, std::string expected, std::string observed) {
      c.surprises.push_back({where, field, std::move(expected), std::move(observed), note});
    };
    auto count = [&](const char* field, const std::optional<double>& expected, double observed) {
      if (expected && std::abs(*expected - observed) > 1e-6) surprise(field, number_text(*expected), number_text(observed));
    };
    count("kernels_per_iter", e.kernels_per_iter, c.kernels_per_iter);
    count("memcpy_per_iter", e.memcpy_per_iter, c.memcpy_per_iter);
    count("memset_per_iter", e.memset_per_iter, c.memset_per_iter);
    if (e.max_registers) {
      int most = 0;
      std::string which;
      for (const KernelSummary& k : c.kernels)
        if (k.registers_per_thread > most) {
          most = k.registers_per_thread;
          which = k.name;
        }
      if (most > *e.max_registers)
        surprise("max_registers", fmt::format("<= {}", number_text(*e.max_registers)),
                 fmt::format("{} ({})", most, which));
    }
    if (dominant != nullptr && dominant->occupancy_valid) {
      if (e.min_theoretical_occupancy && dominant->theoretical_occupancy_percent + 1e-9 < *e.min_theoretical_occupancy)
        surprise("min_theoretical_occupancy", fmt::format(">= {}%", number_text(*e.min_theoretical_occupancy)),
                 fmt::format("{:.1f}% ({})", dominant->theoretical_occupancy_percent, dominant->occupancy_limiter));
      if (e.max_theoretical_occupancy && dominant->theoretical_occupancy_percent - 1e-9 > *e.max_theoretical_occupancy)
        surprise("max_theoretical_occupancy", fmt::format("<= {}%", number_text(*e.max_theoretical_occupancy)),
                 fmt::format("{:.1f}%", dominant->theoretical_occupancy_percent));
    }
    if (e.launch_api) {
      const std::string observed = dominant != nullptr ? dominant->launch_api : "(no kernel)";
      if (observed != *e.launch_api) surprise("launch_api", *e.launch_api, observed);
    }
  }
}

}  // namespace attnprof
