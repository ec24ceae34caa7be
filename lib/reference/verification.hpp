// The float64 CPU reference every backend is checked against. A problem is (AttentionProblem,
// seed): the checked rows' q, the K and V of their K/V heads and their bias rows are regenerated
// on demand (reference/inputs.hpp), so host memory stays O(rows x head_dim + seq_kv x head_dim),
// whatever the size of the tensors on the device.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/types.hpp"

namespace attnprof {

// Rows a verification checks unless told otherwise.
constexpr std::int64_t kDefaultRowsChecked = 1024;

// Largest accepted ||out - ref|| / ||ref|| per input dtype.
double relative_error_bound(DType dtype);

// Largest accepted |lse - ref| per input dtype. The reference reads the same dtype-rounded inputs,
// so what is left is the kernel's fp32 arithmetic (exp2, a running max and sum over the keys):
// about 1e-5 at 32k keys. A key skipped or read twice moves it by ~1/seq_kv and more.
double lse_error_bound(DType dtype);

// A single row may be this many times the bound off: the error over all checked rows together
// lets a few wrong rows hide behind rows with large outputs (the first rows under a causal mask).
constexpr double kRowErrorFactor = 3.0;

struct Verification {
  double relative_error = 0;     // over the checked rows
  double worst_row_error = 0;    // the largest ||out - ref|| / ||ref|| of one row (forward)
  double max_abs_error = 0;
  double bound = 0;
  std::int64_t rows_checked = 0;
  std::int64_t non_finite = 0;   // NaN/inf in the output: poison never overwritten, or overflow
  double lse_max_abs_error = -1; // < 0 when no logsumexp was compared
  // A backward's per-gradient relative errors (relative_error is the largest); < 0 for a forward.
  double dq_relative_error = -1;
  double dk_relative_error = -1;
  double dv_relative_error = -1;
  bool interrupted = false;      // stopped by the interrupt flag before every row was checked
  bool passed = false;
  std::string detail;            // why it failed, for the summary
};

// Output rows are numbered by their flat index over [batch, heads, seq_q] (padded: a ragged
// sequence b has rows i < q_len(b) only, and only those are checked).
//
// The rows checked: all of them when there are at most `max_rows`, otherwise at most `max_rows`
// rows from a few (batch, K/V head) groups, so each group's K and V are regenerated once for
// many rows: the last group always, with the first and the last query tile of the last head
// (the masked edges), the others spread over batches and heads, and inside each group rows
// spread over its query heads, tiles and in-tile positions. Ascending, so grouped.
std::vector<std::int64_t> rows_to_check(const AttentionShape& shape, std::int64_t max_rows = kDefaultRowsChecked);

// What a backend wrote for some rows, as read back from the device.
struct OutputRows {
  std::vector<std::int64_t> rows;    // ascending flat row indices
  std::vector<float> output;         // rows.size() x head_dim, decoded to float
  std::vector<float> lse;            // rows.size() natural-log logsumexp values, or empty
  std::int64_t non_finite = 0;       // NaN/inf elements in the whole output (a device-side scan)
  std::int64_t first_non_finite = -1;  // flat element index of the first of them, -1 when none
};

// Reference rows in float64.
struct ReferenceRows {
  std::vector<std::int64_t> rows;
  std::vector<double> output;       // rows.size() x head_dim; zeros for a row that sees no key
  std::vector<double> lse;          // natural log; -inf for a row that sees no key
  std::vector<std::uint8_t> done;   // 1 where the row was computed: all of them unless interrupted
  std::int64_t rows_done = 0;
  bool interrupted = false;
};

// Computes `rows` (ascending, in range; throws std::invalid_argument otherwise) on `threads`
// threads (0: one per hardware thread, at most 32). `interrupted` is polled every few
// milliseconds of work; once set, the call returns within about that with the rows it finished.
ReferenceRows reference_rows(const AttentionProblem& problem, std::uint64_t seed, const std::vector<std::int64_t>& rows,
                             const std::atomic<bool>* interrupted = nullptr, unsigned threads = 0);

struct VerifyOptions {
  bool compare_lse = false;                        // compare got.lse (-inf expected on rows that see no key)
  const std::atomic<bool>* interrupted = nullptr;  // stops early; the result says so and does not pass
  unsigned threads = 0;                            // 0: one per hardware thread, at most 32
};

// Compares a backend's rows with the reference. A row that sees no key must be all zeros.
Verification verify_attention(const AttentionProblem& problem, std::uint64_t seed, const OutputRows& got,
                              const VerifyOptions& options = {});

// Host bytes that reading back and verifying `max_rows` rows of `problem` needs at most
// (rows, one K/V head's K and V, per-thread scratch), for a check against available memory.
std::uint64_t verification_host_bytes(const AttentionProblem& problem, std::int64_t max_rows = kDefaultRowsChecked,
                                      unsigned threads = 0);

}  // namespace attnprof
