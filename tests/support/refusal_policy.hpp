// When a GPU test may accept a backend's refusal (of the device, or of a case) instead of failing.
// Never by the backend's own answer for that case: a refusal is accepted when
//   - it quotes requirements (a compute capability, shared memory, a cuDNN version) and this
//     machine lacks every one of them (the facts come from the device and the loaded library), or
//   - `attnprof backends`' table of that backend (probe_backend_support, lib/commands/inventory)
//     refuses a probe of the case's kind: its dtype/head dim/causal/bias, a workload it uses
//     (grouped heads, windows, ragged, paged, decode ...), or its backward, or
//   - it quotes a documented rule below that the test computes itself from the problem.
// Otherwise the test fails, naming the case and the refusal. Pure: tests/cpu/skip_policy_test.cpp.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "commands/inventory.hpp"
#include "core/types.hpp"
#include "support/skip_reasons.hpp"

namespace attnprof::test {

// What this machine has, to check the requirements a refusal quotes against.
struct MachineFacts {
  int compute_major = 0;
  int compute_minor = 0;
  std::int64_t shared_mem_per_block_optin = 0;
  std::size_t cudnn_version = 0;  // 91400 for 9.14.0
};

// A requirement a refusal states, in the words the backends use.
enum class GateKind {
  compute_capability_at_least,  // "compute capability 8.0 or newer"
  compute_capability_exactly,   // "only compute capability 9.0"
  shared_memory,                // "needs 99328 bytes of shared memory per block"
  cudnn_at_least,               // "cuDNN 9.6.0 or newer", "needs cuDNN 9:"
  cudnn_before,                 // "before cuDNN 9.18.1" (a requirement that a later cuDNN lifts)
};

struct QuotedGate {
  GateKind kind;
  std::int64_t value;  // compute capability major * 10 + minor, bytes, or a cuDNN version number
};

namespace detail {

// Digits at `at` ("9", "9.14", "9.14.1"): the parts read, and where they end.
struct Dotted {
  std::vector<std::int64_t> parts;
  std::size_t end = 0;
};

inline Dotted read_dotted(std::string_view text, std::size_t at) {
  Dotted d;
  std::size_t i = at;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    std::int64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) value = value * 10 + (text[i++] - '0');
    d.parts.push_back(value);
    if (i + 1 < text.size() && text[i] == '.' && std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      ++i;
    } else {
      break;
    }
  }
  d.end = i;
  return d;
}

inline bool follows(std::string_view text, std::size_t at, std::string_view what) {
  return text.substr(at, what.size()) == what;
}

inline bool precedes(std::string_view text, std::size_t at, std::string_view what) {
  return at >= what.size() && text.substr(at - what.size(), what.size()) == what;
}

}  // namespace detail

inline std::vector<QuotedGate> quoted_gates(std::string_view refusal) {
  using detail::follows;
  using detail::precedes;
  std::vector<QuotedGate> gates;
  constexpr std::string_view cc = "compute capability ";
  for (std::size_t at = refusal.find(cc); at != std::string_view::npos; at = refusal.find(cc, at + 1)) {
    const detail::Dotted v = detail::read_dotted(refusal, at + cc.size());
    if (v.parts.size() != 2) continue;  // "9.x": no number
    const std::int64_t value = v.parts[0] * 10 + v.parts[1];
    if (follows(refusal, v.end, " or newer")) gates.push_back({GateKind::compute_capability_at_least, value});
    else if (precedes(refusal, at, "only ")) gates.push_back({GateKind::compute_capability_exactly, value});
  }
  constexpr std::string_view cudnn = "cuDNN ";
  for (std::size_t at = refusal.find(cudnn); at != std::string_view::npos; at = refusal.find(cudnn, at + 1)) {
    const detail::Dotted v = detail::read_dotted(refusal, at + cudnn.size());
    if (v.parts.empty()) continue;
    const std::int64_t number = v.parts[0] * 10000 + (v.parts.size() > 1 ? v.parts[1] * 100 : 0) +
                                (v.parts.size() > 2 ? v.parts[2] : 0);
    if (v.parts.size() == 3 && follows(refusal, v.end, " or newer")) gates.push_back({GateKind::cudnn_at_least, number});
    else if (v.parts.size() == 1 && precedes(refusal, at, "needs ")) gates.push_back({GateKind::cudnn_at_least, number});
    else if (v.parts.size() == 3 && precedes(refusal, at, "before ")) gates.push_back({GateKind::cudnn_before, number});
  }
  constexpr std::string_view bytes = " bytes of shared memory per block";
  for (std::size_t at = refusal.find(bytes); at != std::string_view::npos; at = refusal.find(bytes, at + 1)) {
    std::size_t begin = at;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(refusal[begin - 1]))) --begin;
    if (begin < at && precedes(refusal, begin, "needs "))
      gates.push_back({GateKind::shared_memory, detail::read_dotted(refusal, begin).parts[0]});
  }
  return gates;
}

// True when this machine meets the requirement (so a refusal quoting it is wrong here).
inline bool is_met(const QuotedGate& gate, const MachineFacts& m) {
  const std::int64_t cc = m.compute_major * 10 + m.compute_minor;
  switch (gate.kind) {
    case GateKind::compute_capability_at_least: return cc >= gate.value;
    case GateKind::compute_capability_exactly: return cc == gate.value;
    case GateKind::shared_memory: return m.shared_mem_per_block_optin >= gate.value;
    case GateKind::cudnn_at_least: return static_cast<std::int64_t>(m.cudnn_version) >= gate.value;
    case GateKind::cudnn_before: return static_cast<std::int64_t>(m.cudnn_version) >= gate.value;  // lifted
  }
  return true;
}

// What a test does about a refusal it was given: skip (a listed reason, the refusal accepted) or fail.
struct RefusalVerdict {
  bool accepted = false;
  SkipReason reason = SkipReason::refused_as_documented;
  std::string message;
};

// The workloads of `attnprof backends`' table that a problem uses.
inline std::vector<ProbedWorkload> workloads_of(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  std::vector<ProbedWorkload> used;
  if (s.kv_heads() == 1 && s.heads > 1) used.push_back(ProbedWorkload::one_kv_head);
  else if (s.kv_heads() < s.heads) used.push_back(ProbedWorkload::grouped_heads);
  if (p.is_bottom_right() && (p.causal || p.window.bounded()) && (s.seq_q != s.seq_kv || s.ragged()))
    used.push_back(ProbedWorkload::bottom_right_causal);
  if (p.window.bounded()) used.push_back(ProbedWorkload::sliding_window);
  // The ragged and paged probes are prefills (seq_q 96): one query token is the decode probes'.
  if (s.seq_q == 1) {
    used.push_back(ProbedWorkload::decode);
    if (s.paged()) used.push_back(ProbedWorkload::paged_decode);
  } else {
    if (s.packed_q() || s.packed_kv()) used.push_back(ProbedWorkload::ragged);
    if (s.paged()) used.push_back(ProbedWorkload::paged);
  }
  return used;
}

// Why the table says the backend may refuse `p` ("fp32 d64 causal: <its reason>"), or nothing.
inline std::vector<std::string> table_refusals(const BackendSupport& table, const AttentionProblem& p) {
  std::vector<std::string> why;
  if (p.is_backward() && table.backward) why.push_back("backward: " + *table.backward);
  for (const ProblemProbe& probe : table.problems)
    if (probe.refused && probe.dtype == p.dtype && probe.head_dim == p.shape.head_dim && probe.causal == p.causal &&
        probe.bias == p.has_bias)
      why.push_back(fmt::format("{} d{}{}{}: {}", to_string(probe.dtype), probe.head_dim, probe.causal ? " causal" : "",
                                probe.bias ? " bias" : "", *probe.refused));
  for (ProbedWorkload w : workloads_of(p))
    for (const WorkloadProbe& probe : table.workloads)
      if (probe.workload == w && probe.refused) why.push_back(fmt::format("{}: {}", to_string(w), *probe.refused));
  return why;
}

// A support rule a backend states (and its tests check on the CPU) that the table does not probe,
// computed here from the problem alone. The refusal must quote `quote`.
struct DocumentedRule {
  std::string_view backend_prefix;  // "manual" covers manual:in_place and manual:out_of_place
  std::string_view what;
  bool (*applies)(const AttentionProblem&);
  std::string_view quote;
};

inline bool has_rows_without_keys(const AttentionProblem& p) {
  const AttentionShape& s = p.shape;
  for (int b = 0; b < (s.ragged() ? s.batch : 1); ++b)
    for (int row = 0; row < s.q_len(b); ++row)
      if (visible_keys(p, row, s.q_len(b), s.kv_len(b)).count() == 0) return true;
  return false;
}

inline const std::vector<DocumentedRule>& documented_rules() {
  static const std::vector<DocumentedRule> rules = {
      // cudnn: softmax over an all-masked row is not promised to be zeros; manual: NaN there.
      {"cudnn", "query rows that see no key", has_rows_without_keys, "no key"},
      {"manual", "query rows that see no key", has_rows_without_keys, "no key"},
      // cudnn-frontend refuses a left-bounded or bottom-right band with seq_q > seq_kv (dense).
      {"cudnn", "a left-bounded or bottom-right band with seq_q > seq_kv",
       [](const AttentionProblem& p) {
         const bool band = p.window.left >= 0 || (p.is_bottom_right() && (p.causal || p.window.bounded()));
         return !p.shape.ragged() && !p.shape.paged() && p.shape.seq_q > p.shape.seq_kv && band;
       },
       "> seq_kv"},
      // cudnn's per-sequence graphs follow causal masks only.
      {"cudnn", "a sliding window with per-sequence lengths",
       [](const AttentionProblem& p) { return p.window.bounded() && (p.shape.ragged() || p.shape.paged()); },
       "sliding window with"},
  };
  return rules;
}

inline SkipReason reason_of(const std::vector<QuotedGate>& gates) {
  for (const QuotedGate& g : gates)
    if (g.kind == GateKind::compute_capability_at_least || g.kind == GateKind::compute_capability_exactly)
      return SkipReason::needs_compute_capability;
  for (const QuotedGate& g : gates)
    if (g.kind == GateKind::shared_memory) return SkipReason::needs_shared_memory;
  return SkipReason::needs_newer_cudnn;
}

// A requirement-quoting refusal: accepted when this machine lacks every requirement it quotes.
inline std::optional<RefusalVerdict> judge_gates(std::string_view refusal, const MachineFacts& m) {
  const std::vector<QuotedGate> gates = quoted_gates(refusal);
  if (gates.empty()) return std::nullopt;
  for (const QuotedGate& g : gates)
    if (is_met(g, m))
      return RefusalVerdict{false, SkipReason::refused_as_documented,
                            fmt::format("\"{}\" quotes a requirement this machine meets (compute capability {}.{}, "
                                        "cuDNN {}.{}.{})",
                                        refusal, m.compute_major, m.compute_minor, m.cudnn_version / 10000,
                                        m.cudnn_version % 10000 / 100, m.cudnn_version % 100)};
  return RefusalVerdict{true, reason_of(gates), std::string(refusal)};
}

// A backend's check_device() refusal of this machine's GPU.
inline RefusalVerdict judge_device_refusal(std::string_view backend, std::string_view refusal, const MachineFacts& m) {
  if (std::optional<RefusalVerdict> v = judge_gates(refusal, m)) {
    v->message = fmt::format("{} cannot run here: {}", backend, v->message);
    return *v;
  }
  return {false, SkipReason::refused_as_documented,
          fmt::format("{} refuses this GPU quoting no requirement it lacks: \"{}\"", backend, refusal)};
}

// A backend's refusal of one case (check_problem, check_backward, or its plan build).
inline RefusalVerdict judge_case_refusal(const BackendSupport& table, const AttentionProblem& p,
                                         const std::string& case_label, std::string_view refusal,
                                         const MachineFacts& m) {
  if (std::optional<RefusalVerdict> v = judge_gates(refusal, m)) {
    v->message = fmt::format("{} refused {}: {}", table.backend, case_label, v->message);
    return *v;
  }
  if (const std::vector<std::string> table_says = table_refusals(table, p); !table_says.empty())
    return {true, SkipReason::refused_as_documented,
            fmt::format("{} refused {}: {} (`attnprof backends` table: {})", table.backend, case_label, refusal,
                        table_says.front())};
  for (const DocumentedRule& rule : documented_rules())
    if (table.backend.rfind(rule.backend_prefix, 0) == 0 && rule.applies(p) &&
        refusal.find(rule.quote) != std::string_view::npos)
      return {true, SkipReason::refused_as_documented,
              fmt::format("{} refused {}: {} (documented rule: {})", table.backend, case_label, refusal, rule.what)};
  return {false, SkipReason::refused_as_documented,
          fmt::format("{} refused {}, which `attnprof backends`' table says it runs, quoting no requirement this "
                      "machine lacks and no documented rule: \"{}\"",
                      table.backend, case_label, refusal)};
}

}  // namespace attnprof::test
