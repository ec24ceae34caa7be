#include "runner/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>

namespace attnprof {

double relative_error_bound(DType dtype) {
  switch (dtype) {
    case DType::bf16: return 1e-2;
    case DType::fp16: return 5e-3;
    case DType::fp32: return 1e-4;
  }
  return 0;
}

void reference_row(const HostInputs& inputs, int b, int h, int i, std::vector<double>& out, double* lse) {
  const AttentionProblem& p = inputs.problem;
  const AttentionShape& s = p.shape;
  const int d = s.head_dim;
  const double scale = p.softmax_scale();
  const std::int64_t head = static_cast<std::int64_t>(b) * s.heads + h;
  const float* q = inputs.q.data() + (head * s.seq_q + i) * d;
  const float* k = inputs.k.data() + head * s.seq_kv * d;
  const float* v = inputs.v.data() + head * s.seq_kv * d;
  const int keys = p.causal ? std::min(i + 1, s.seq_kv) : s.seq_kv;

  std::vector<double> scores(static_cast<std::size_t>(keys));
  double row_max = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < keys; ++j) {
    double dot = 0;
    for (int c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[static_cast<std::int64_t>(j) * d + c];
    dot *= scale;
    if (p.has_bias) dot += inputs.bias[static_cast<std::int64_t>(i) * s.seq_kv + j];
    scores[j] = dot;
    row_max = std::max(row_max, dot);
  }
  double sum = 0;
  for (double& score : scores) {
    score = std::exp(score - row_max);
    sum += score;
  }
  out.assign(static_cast<std::size_t>(d), 0.0);
  for (int j = 0; j < keys; ++j) {
    const double weight = scores[j] / sum;
    const float* vj = v + static_cast<std::int64_t>(j) * d;
    for (int c = 0; c < d; ++c) out[c] += weight * vj[c];
  }
  if (lse != nullptr) *lse = row_max + std::log(sum);
}

std::vector<std::int64_t> rows_to_check(const AttentionShape& s, std::int64_t max_rows) {
  const std::int64_t total = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  std::vector<std::int64_t> rows;
  if (total <= max_rows) {
    rows.resize(static_cast<std::size_t>(total));
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  }
  const std::int64_t tail = std::min<std::int64_t>({128, s.seq_q, max_rows / 4});
  for (std::int64_t r = total - tail; r < total; ++r) rows.push_back(r);
  // A large odd multiplier spreads samples over heads, tiles and in-tile positions alike.
  const std::uint64_t multiplier = 2654435761u;
  for (std::int64_t k = 0; static_cast<std::int64_t>(rows.size()) < max_rows; ++k)
    rows.push_back(static_cast<std::int64_t>((static_cast<std::uint64_t>(k) * multiplier) % total));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

Verification verify_attention(const HostInputs& inputs, const std::vector<float>& output,
                              const std::vector<float>* lse, std::int64_t max_rows) {
  const AttentionProblem& p = inputs.problem;
  const AttentionShape& s = p.shape;
  Verification result;
  result.bound = relative_error_bound(p.dtype);
  const auto expected = static_cast<std::size_t>(element_count_q(s));
  if (output.size() != expected) {
    result.detail = fmt::format("output has {} elements, expected {}", output.size(), expected);
    return result;
  }
  std::int64_t first_bad = -1;
  for (std::size_t idx = 0; idx < output.size(); ++idx) {
    if (!std::isfinite(output[idx])) {
      if (first_bad < 0) first_bad = static_cast<std::int64_t>(idx);
      ++result.non_finite;
    }
  }

  const std::vector<std::int64_t> rows = rows_to_check(s, max_rows);
  result.rows_checked = static_cast<std::int64_t>(rows.size());
  double diff_sq = 0, ref_sq = 0, max_abs = 0, lse_max = lse != nullptr ? 0.0 : -1.0;
  std::mutex merge;
  const unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32u));
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      double local_diff = 0, local_ref = 0, local_max = 0, local_lse = 0;
      std::vector<double> ref;
      for (std::size_t n = w; n < rows.size(); n += workers) {
        const std::int64_t r = rows[n];
        const int i = static_cast<int>(r % s.seq_q);
        const std::int64_t head = r / s.seq_q;
        double ref_lse = 0;
        reference_row(inputs, static_cast<int>(head / s.heads), static_cast<int>(head % s.heads), i, ref,
                      &ref_lse);
        const float* got = output.data() + r * s.head_dim;
        for (int c = 0; c < s.head_dim; ++c) {
          const double diff = static_cast<double>(got[c]) - ref[c];
          local_diff += std::isfinite(diff) ? diff * diff : std::numeric_limits<double>::infinity();
          local_ref += ref[c] * ref[c];
          local_max = std::max(local_max, std::abs(diff));
        }
        if (lse != nullptr) local_lse = std::max(local_lse, std::abs((*lse)[r] - ref_lse));
      }
      std::lock_guard<std::mutex> lock(merge);
      diff_sq += local_diff;
      ref_sq += local_ref;
      max_abs = std::max(max_abs, local_max);
      if (lse != nullptr) lse_max = std::max(lse_max, local_lse);
    });
  }
  for (std::thread& t : threads) t.join();

  result.relative_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  result.max_abs_error = max_abs;
  result.lse_max_abs_error = lse_max;
  // fp32 logsumexp from a bf16/fp16 kernel carries the input rounding; 1e-2 absolute is ample
  // for a value of order log(seq_kv), and tight enough to catch a wrong scale or base.
  const double lse_bound = p.dtype == DType::fp32 ? 1e-4 : 1e-2;
  if (result.non_finite > 0) {
    const std::int64_t row = first_bad / s.head_dim;
    result.detail = fmt::format("{} output elements are NaN/inf (first at row {}, column {}): unwritten or overflowed",
                                result.non_finite, row, first_bad % s.head_dim);
  } else if (!(result.relative_error <= result.bound)) {
    result.detail = fmt::format("relative error {:.3e} exceeds the {} bound {:.0e}", result.relative_error,
                                to_string(p.dtype), result.bound);
  } else if (lse != nullptr && !(lse_max <= lse_bound)) {
    result.detail = fmt::format("logsumexp max abs error {:.3e} exceeds {:.0e}", lse_max, lse_bound);
  } else {
    result.passed = true;
  }
  return result;
}

}  // namespace attnprof
