// The float64 CPU reference every backend is checked against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/host_inputs.hpp"

namespace attnprof {

// Largest accepted ||out - ref|| / ||ref|| per input dtype.
double relative_error_bound(DType dtype);

struct Verification {
  double relative_error = 0;     // over the checked rows
  double max_abs_error = 0;
  double bound = 0;
  std::int64_t rows_checked = 0;
  std::int64_t non_finite = 0;   // NaN/inf anywhere in the output: poison never overwritten, or overflow
  double lse_max_abs_error = -1; // < 0 when the backend gave no logsumexp
  bool passed = false;
  std::string detail;            // why it failed, for the summary
};

// One output row (and its natural-log logsumexp) in float64, from the rounded inputs.
void reference_row(const HostInputs& inputs, int batch, int head, int row, std::vector<double>& out,
                   double* lse = nullptr);

// Rows checked for a problem: all of them when there are at most `max_rows`, otherwise an
// even pseudo-random spread plus the last query tile of the last head (the masked tail).
std::vector<std::int64_t> rows_to_check(const AttentionShape& shape, std::int64_t max_rows);

// Compares a backend's output (decoded to float, layout [B, H, Sq, D]) and optionally its
// logsumexp [B, H, Sq] against the reference, on several threads.
Verification verify_attention(const HostInputs& inputs, const std::vector<float>& output,
                              const std::vector<float>* lse = nullptr, std::int64_t max_rows = 1024);

}  // namespace attnprof
