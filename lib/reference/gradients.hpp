// The float64 CPU reference of attention's backward: dQ, dK, dV for sampled rows, from q, k, v and
// the upstream gradient dO regenerated on demand (reference/inputs.hpp), as the forward's
// reference does. With S = scale * Q K^T (+ bias, masked), P = softmax(S), O = P V:
//   dV = P^T dO,  dP = dO V^T,  D_i = rowsum(dO o O) = sum_j P_ij dP_ij,  dS = P o (dP - D),
//   dQ = scale * dS K,  dK = scale * dS^T Q.
// A K/V head's dK and dV sum over the query heads of its group (GQA). A row that sees no key has
// zero dQ and adds nothing; a key no row sees has zero dK and dV. Dense batches only: backward
// cases of ragged or paged problems are refused before they get here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "reference/verification.hpp"

namespace attnprof {

// Largest accepted ||got - ref|| / ||ref|| of each gradient per input dtype. Looser than the
// forward's: a 16-bit backward rounds P and dS to the input type before its matmuls, takes the
// forward's rounded O into D = rowsum(dO o O), and dP - D cancels, which amplifies those roundings.
double gradient_error_bound(DType dtype);

// The rows a backward verification checks: dQ rows flat over [batch, heads, seq_q] (the forward's
// rows_to_check), and dK/dV rows flat over [batch, heads_kv, seq_kv] from the last (batch, K/V
// head) group (the masked edges live there: its first and last keys, the rest spread), and from
// one more group when there are several. Each dK/dV group costs one pass over every query row of
// its heads, so they are few. Ascending.
struct GradientRows {
  std::vector<std::int64_t> q_rows;
  std::vector<std::int64_t> kv_rows;
};
GradientRows gradient_rows_to_check(const AttentionShape& shape, std::int64_t max_rows = kDefaultRowsChecked);

struct ReferenceGradients {
  std::vector<double> dq;  // q_rows x head_dim
  std::vector<double> dk;  // kv_rows x head_dim
  std::vector<double> dv;  // kv_rows x head_dim
  bool interrupted = false;
};

// Computes the rows on `threads` threads (0: one per hardware thread, at most 32). Throws
// std::invalid_argument for rows out of range or not ascending, and for ragged or paged shapes.
ReferenceGradients reference_gradients(const AttentionProblem& problem, std::uint64_t seed, const GradientRows& rows,
                                       const std::atomic<bool>* interrupted = nullptr, unsigned threads = 0);

// What a backend wrote, as read back: the rows named, decoded to float.
struct GradientOutputs {
  GradientRows rows;
  std::vector<float> dq, dk, dv;    // rows x head_dim each
  std::int64_t non_finite = 0;      // NaN/inf elements over the whole of dQ, dK and dV (device scan)
  std::string first_non_finite;     // "dK element 1234", empty when none
};

// Compares with the reference; relative_error is the largest of the three tensors', each of which
// the result names (dq/dk/dv_relative_error), and the detail says which one failed.
Verification verify_gradients(const AttentionProblem& problem, std::uint64_t seed, const GradientOutputs& got,
                              const VerifyOptions& options = {});

// The run-to-run check of a backward case's verification: the backward run a second time on the same
// inputs (gradients poisoned again) and dQ, dK, dV compared bitwise with the first run's. Atomic
// accumulation (dQ by red.global.add) makes the order of fp32 additions, so the bits, vary.
struct GradientRepeatability {
  bool checked = false;                      // false: `note` says why not
  std::array<std::int64_t, 3> elements{};    // dQ, dK, dV elements compared
  std::array<std::int64_t, 3> differing{};   // of those, bitwise different between the two runs
  std::string note;

  std::int64_t total_elements() const { return elements[0] + elements[1] + elements[2]; }
  std::int64_t total_differing() const { return differing[0] + differing[1] + differing[2]; }
  // true / false once checked; nullopt when not.
  std::optional<bool> deterministic() const {
    return checked ? std::optional<bool>(total_differing() == 0) : std::nullopt;
  }
};
inline constexpr std::array<const char*, 3> kGradientNames = {"dQ", "dK", "dV"};

// Elements of `element_bytes` bytes each that differ bitwise between `a` and `b` (the run-to-run
// check: a NaN equals itself when its bits do, +0 and -0 differ).
std::int64_t count_bitwise_differences(const void* a, const void* b, std::int64_t elements, int element_bytes);

// Host bytes verify_gradients needs at most for `max_rows` rows (for the check against available memory).
std::uint64_t gradient_verification_host_bytes(const AttentionProblem& problem,
                                               std::int64_t max_rows = kDefaultRowsChecked, unsigned threads = 0);

}  // namespace attnprof
