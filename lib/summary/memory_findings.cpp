#include "summary/memory_findings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "summary/findings.hpp"
#include "summary/render.hpp"

namespace attnprof {
namespace {

bool any_kernel_named(const CaseSummary& c, std::initializer_list<const char*> needles) {
  return std::any_of(c.kernels.begin(), c.kernels.end(), [&](const KernelSummary& k) {
    std::string name = k.name;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return std::any_of(needles.begin(), needles.end(), [&](const char* n) { return name.find(n) != std::string::npos; });
  });
}

// Kernels that hand [seq_q, seq_kv] matrices to each other through memory (math, manual).
bool has_score_kernels(const CaseSummary& c) { return any_kernel_named(c, {"gemm", "nvjet", "softmax"}); }

// Whether the case itself allocated or released buffers of this role, rather than only holding
// what an earlier case left (the runner carries those in).
bool touched(const MemoryRole& r) {
  return r.max_bytes > r.carried_bytes || r.plan_bytes > 0 || r.iteration_bytes_per_iter > 0;
}

// The most the case held of a role at once: its own buffers, or carried ones where `carried_counts`
// (the kernels say the backend is one that keeps such buffers from case to case).
std::uint64_t held(const CaseMemory& m, const char* role, bool carried_counts) {
  const MemoryRole* r = m.role(role);
  return r != nullptr && (carried_counts || touched(*r)) ? r->max_bytes : 0;
}

double score_elements(const AttentionShape& s) { return static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv; }

std::string matrix_text(const AttentionShape& s) {
  return fmt::format("{}x{}x{}x{}", s.batch, s.heads, s.seq_q, s.seq_kv);
}

// "45% of the 1.2 GiB peak"
std::string of_peak(const CaseMemory& m, double bytes) {
  if (m.peak_bytes == 0) return "of an unknown peak";
  return fmt::format("{:.0f}% of the {} peak", 100.0 * bytes / static_cast<double>(m.peak_bytes),
                     format_bytes(static_cast<double>(m.peak_bytes)));
}

std::string count_text(double per_iter) {
  return std::abs(per_iter - std::round(per_iter)) < 1e-9 ? fmt::format("{:.0f}", per_iter)
                                                         : fmt::format("{:.2f}", per_iter);
}

// (a) The score matrices a dense path keeps: their bytes by role against one matrix at this shape.
void scores_held(CaseSummary& c) {
  const CaseMemory& m = *c.memory;
  const AttentionShape& s = c.problem.shape;
  const double elements = score_elements(s);
  if (elements <= 0) return;
  const bool score_kernels = has_score_kernels(c);
  const double one = elements * dtype_bytes(c.problem.dtype);
  std::vector<std::string> parts;
  nlohmann::json roles = nlohmann::json::object();
  double total = 0;
  for (const char* role : {"scores", "probabilities"}) {
    const std::uint64_t bytes = held(m, role, score_kernels);
    if (bytes == 0) continue;
    parts.push_back(fmt::format("{} {}", role, format_bytes(static_cast<double>(bytes))));
    roles[role] = bytes;
    total += static_cast<double>(bytes);
  }
  const std::string grows = "they grow as seq_q x seq_kv (4x the bytes at twice the length)";
  if (total > 0) {
    c.findings.push_back(
        {"scores_held",
         fmt::format("the score matrices hold {} ({}): {}, {:.3g}x the {} matrix of {} at {}; {}, where a fused kernel "
                     "keeps its score tile on chip",
                     format_bytes(total), of_peak(m, total), fmt::join(parts, ", "), total / one, matrix_text(s),
                     format_bytes(one), to_string(c.problem.dtype), grows),
         {{"roles", roles},
          {"bytes", total},
          {"score_elements", elements},
          {"matrix_bytes", one},
          {"peak_bytes", m.peak_bytes}},
         device_memory_stake(c, total, false)});
    return;
  }
  // No buffer named at all: what the shape says a score matrix would take.
  const bool unnamed = std::all_of(m.roles.begin(), m.roles.end(),
                                   [](const MemoryRole& r) { return r.role == kUnnamedMemoryRole; });
  if (!unnamed || !score_kernels || m.peak_bytes == 0) return;
  c.findings.push_back(
      {"scores_held",
       fmt::format("one {} score matrix is {} at {} ({}), and it grows as seq_q x seq_kv; no buffer is named, so how "
                   "many of the peak's bytes are score matrices cannot be told",
                   matrix_text(s), format_bytes(one), to_string(c.problem.dtype), of_peak(m, one)),
       {{"score_elements", elements}, {"matrix_bytes", one}, {"peak_bytes", m.peak_bytes}, {"roles_named", false}},
       device_memory_stake(c, one, false)});
}

// (b) manual:out_of_place's masked_fill writes a copy: a second score-sized buffer beside the
// D2D memcpy that fills it.
void masked_scores_copy(CaseSummary& c) {
  const CaseMemory& m = *c.memory;
  const AttentionShape& s = c.problem.shape;
  const double one = score_elements(s) * dtype_bytes(c.problem.dtype);
  if (one <= 0) return;
  const auto memcpy = std::find_if(c.memory_ops.begin(), c.memory_ops.end(), [](const MemoryOpSummary& op) {
    return op.what == "memcpy DtoD" && op.per_iter > 0;
  });
  const bool copies = memcpy != c.memory_ops.end();
  const auto score_sized = [&](double bytes) { return bytes >= 0.95 * one && bytes <= 1.3 * one; };
  double bytes = static_cast<double>(held(m, "masked_scores", copies));
  std::string what = "role masked_scores";
  bool every_iteration = false;
  if (bytes == 0 && copies && score_sized(memcpy->bytes_per_iter / memcpy->per_iter)) {
    // Unnamed: an allocation of the scores' size inside the iteration, beside a copy of that size.
    for (const MemoryOperations& op : m.in_iterations) {
      if (op.operation != "allocation" || op.per_iter < 1) continue;
      const auto size = std::find_if(op.sizes.begin(), op.sizes.end(),
                                     [&](std::uint64_t b) { return score_sized(static_cast<double>(b)); });
      if (size == op.sizes.end()) continue;
      bytes = static_cast<double>(*size);
      what = fmt::format("allocated in every iteration by {}", op.api.empty() ? "an unknown API" : op.api);
      every_iteration = true;
      break;
    }
  }
  if (bytes == 0) return;
  std::string beside;
  if (copies)
    beside = fmt::format(", beside {} memcpy DtoD of {} per iteration that copies the scores into it",
                         count_text(memcpy->per_iter), format_bytes(memcpy->bytes_per_iter));
  nlohmann::json evidence = {{"bytes", bytes}, {"matrix_bytes", one}, {"allocated_every_iteration", every_iteration}};
  if (copies) evidence["memcpy"] = {{"per_iter", memcpy->per_iter}, {"bytes_per_iter", memcpy->bytes_per_iter}};
  c.findings.push_back(
      {"masked_scores_copy",
       fmt::format("masked_fill out of place keeps a second score-sized buffer of {} ({}; {}){}; masked_fill_ in place "
                   "needs neither",
                   format_bytes(bytes), what, of_peak(m, bytes), beside),
       std::move(evidence),
       copies ? gpu_time_cost(c, memcpy->gpu_us_per_iter, bytes) : device_memory_stake(c, bytes, every_iteration)});
}

// (c) The allocator inside the timed loop: paid on every call, and cudaFree waits for the device.
void allocations_in_iteration(CaseSummary& c) {
  const CaseMemory& m = *c.memory;
  if (m.allocations_per_iter <= 0 && m.releases_per_iter <= 0) return;
  std::vector<std::string> allocations, releases;
  bool synchronous_free = false;
  nlohmann::json ops = nlohmann::json::array();
  for (const MemoryOperations& op : m.in_iterations) {
    const std::string api = op.api.empty() ? "an unknown API" : op.api;
    const std::string text = fmt::format("{} by {} ({}{})", count_text(op.per_iter), api, format_bytes(op.bytes_per_iter),
                                         op.role == kUnnamedMemoryRole ? "" : ", " + op.role);
    (op.operation == "allocation" ? allocations : releases).push_back(text);
    synchronous_free = synchronous_free || ((op.api.rfind("cudaFree", 0) == 0 || op.api.rfind("cuMemFree", 0) == 0) &&
                                            op.api.find("Async") == std::string::npos);
    ops.push_back({{"operation", op.operation}, {"api", op.api}, {"role", op.role}, {"per_iter", op.per_iter},
                   {"bytes_per_iter", op.bytes_per_iter}});
  }
  std::string message =
      m.allocations_per_iter > 0
          ? fmt::format("{} device allocation(s) per iteration inside the timed loop, {} per iteration ({})",
                        count_text(m.allocations_per_iter), format_bytes(m.allocation_bytes_per_iter),
                        fmt::join(allocations, ", "))
          : fmt::format("{} device release(s) per iteration inside the timed loop, {} per iteration",
                        count_text(m.releases_per_iter), format_bytes(m.release_bytes_per_iter));
  if (!releases.empty()) message += fmt::format("; released: {}", fmt::join(releases, ", "));
  message += synchronous_free ? ": the allocator runs on every call, and cudaFree waits for the device"
                              : ": the allocator runs on every call; allocating once, before the loop, avoids it";
  const double bytes = m.allocations_per_iter > 0 ? m.allocation_bytes_per_iter : m.release_bytes_per_iter;
  c.findings.push_back({"allocation_in_iteration", std::move(message),
                        {{"allocations_per_iter", m.allocations_per_iter},
                         {"allocation_bytes_per_iter", m.allocation_bytes_per_iter},
                         {"releases_per_iter", m.releases_per_iter},
                         {"release_bytes_per_iter", m.release_bytes_per_iter},
                         {"operations", ops},
                         {"synchronous_free", synchronous_free}},
                        device_memory_stake(c, bytes, true)});
}

// (d) A library's workspace (cuDNN's plan asks for one), held for the calls.
void workspace_held(CaseSummary& c) {
  const CaseMemory& m = *c.memory;
  const MemoryRole* r = m.role("workspace");
  if (r == nullptr || !touched(*r) || r->max_bytes == 0) return;
  const double bytes = static_cast<double>(r->max_bytes);
  const std::string when = r->iteration_bytes_per_iter > 0 ? "allocated inside every iteration"
                           : r->plan_bytes > 0          ? "allocated with the plan"
                                                        : "allocated outside the timed loop";
  c.findings.push_back(
      {"workspace_held",
       fmt::format("{} holds {} of workspace ({}), {}", c.backend.empty() ? "the case" : c.backend, format_bytes(bytes),
                   of_peak(m, bytes), when),
       {{"bytes", bytes},
        {"plan_bytes", r->plan_bytes},
        {"iteration_bytes_per_iter", r->iteration_bytes_per_iter},
        {"peak_bytes", m.peak_bytes}},
       device_memory_stake(c, bytes, r->iteration_bytes_per_iter > 0)});
}

// (e) Grouped-query attention done by copying: K and V repeated into every query head, held.
void kv_repeated_held(CaseSummary& c) {
  const CaseMemory& m = *c.memory;
  const AttentionShape& s = c.problem.shape;
  const bool repeat_kernels = any_kernel_named(c, {"repeat"});
  const double bytes = static_cast<double>(held(m, "k_repeated", repeat_kernels) + held(m, "v_repeated", repeat_kernels));
  if (bytes <= 0) return;
  const double kv = 2.0 * s.batch * s.kv_heads() * s.seq_kv * s.head_dim * dtype_bytes(c.problem.dtype);
  const std::string against =
      kv > 0 ? fmt::format(", {:.3g}x the {} of K and V themselves", bytes / kv, format_bytes(kv)) : std::string();
  c.findings.push_back(
      {"kv_repeated_held",
       fmt::format("K and V repeated from {} into {} heads hold {} ({}){}; a grouped-query kernel reads the {} K/V heads "
                   "in place",
                   s.kv_heads(), s.heads, format_bytes(bytes), of_peak(m, bytes), against, s.kv_heads()),
       {{"bytes", bytes}, {"kv_bytes", kv}, {"heads", s.heads}, {"heads_kv", s.kv_heads()}, {"peak_bytes", m.peak_bytes}},
       device_memory_stake(c, bytes, false)});
}

}  // namespace

void add_device_memory_findings(CaseSummary& c) {
  if (!c.memory) return;
  scores_held(c);
  masked_scores_copy(c);
  allocations_in_iteration(c);
  workspace_held(c);
  kv_repeated_held(c);
}

}  // namespace attnprof
