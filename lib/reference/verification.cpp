#include "reference/verification.hpp"

#include <algorithm>
#include <barrier>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "reference/inputs.hpp"

namespace attnprof {
namespace {

// Rows per (batch, K/V head) group aimed at: regenerating a group's K and V costs about what
// computing a dozen of its rows costs, so a few dozen rows per group keep that a small share.
constexpr std::int64_t kRowsPerGroup = 64;
// Work between two looks at the interrupt flag: a few milliseconds at most.
constexpr int kKeysPerChunk = 256;   // keys of K and V regenerated per work item
constexpr int kKeysBetweenPolls = 1024;

unsigned worker_count(unsigned threads) {
  if (threads > 0) return threads;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// k * stride mod n visits every residue of n once for k < n, in the evenly spread order of the
// golden-ratio (Weyl) sequence: the stride nearest n / phi that is coprime with n. Over a
// group's rows that spreads the samples over its heads, tiles and in-tile positions alike.
std::uint64_t golden_stride(std::uint64_t n) {
  if (n <= 2) return 1;
  const auto near = static_cast<std::uint64_t>(static_cast<double>(n) * 0.6180339887498949);
  for (std::uint64_t d = 0;; ++d) {
    if (near + d < n && std::gcd(near + d, n) == 1) return near + d;
    if (near > d && std::gcd(near - d, n) == 1) return near - d;
  }
}

// Checked rows that share one (batch, K/V head): [begin, end) of the row list.
struct RowGroup {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::int64_t kv_head = 0;  // flat over [batch, heads_kv]
  KeyRange span;             // union of the keys its rows see
  std::int64_t chunks() const { return ceil_div(span.count(), kKeysPerChunk); }
};

std::vector<RowGroup> group_rows(const AttentionProblem& p, const std::vector<std::int64_t>& rows) {
  const AttentionShape& s = p.shape;
  const std::int64_t total = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  std::vector<RowGroup> groups;
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::int64_t r = rows[n];
    if (r < 0 || r >= total) throw std::invalid_argument(fmt::format("row {} is outside [0, {})", r, total));
    if (n > 0 && r <= rows[n - 1]) throw std::invalid_argument("rows to check must be ascending and distinct");
    const std::int64_t head = r / s.seq_q;
    const int b = static_cast<int>(head / s.heads);
    if (r % s.seq_q >= s.q_len(b))
      throw std::invalid_argument(fmt::format("row {} is padding: sequence {} has {} query rows", r, b, s.q_len(b)));
    const std::int64_t kv_head = head / s.heads * s.kv_heads() + head % s.heads / s.group_size();
    if (groups.empty() || groups.back().kv_head != kv_head) groups.push_back({n, n, kv_head, KeyRange{}});
    RowGroup& g = groups.back();
    g.end = n + 1;
    const KeyRange keys = visible_keys(p, static_cast<int>(r % s.seq_q), s.q_len(b), s.kv_len(b));
    if (keys.count() == 0) continue;
    if (g.span.count() == 0) {
      g.span = keys;
    } else {
      g.span.first = std::min(g.span.first, keys.first);
      g.span.last = std::max(g.span.last, keys.last);
    }
  }
  return groups;
}

// One worker's scratch, allocated before the workers start.
struct RowScratch {
  std::vector<float> q, bias;
  std::vector<double> scores;
};

class RowComputer {
 public:
  RowComputer(const AttentionProblem& p, std::uint64_t seed, const std::vector<float>& k, const std::vector<float>& v,
              const std::atomic<bool>* interrupted)
      : p_(p), seed_(seed), k_(k), v_(v), interrupted_(interrupted), scale_(p.softmax_scale()) {}

  bool stop_requested() const { return interrupted_ != nullptr && interrupted_->load(std::memory_order_relaxed); }

  // Rows [r] of the reference into out (head_dim values) and *lse; false when interrupted.
  bool compute(std::int64_t r, const RowGroup& g, RowScratch& scratch, double* out, double* lse) const {
    const AttentionShape& s = p_.shape;
    const int d = s.head_dim;
    const int i = static_cast<int>(r % s.seq_q);
    const int b = static_cast<int>(r / (static_cast<std::int64_t>(s.seq_q) * s.heads));
    const KeyRange keys = visible_keys(p_, i, s.q_len(b), s.kv_len(b));
    std::fill(out, out + d, 0.0);
    if (keys.count() == 0) {
      *lse = -std::numeric_limits<double>::infinity();
      return true;
    }
    generate_input(p_, seed_, InputTensor::q, r * d, d, scratch.q.data());
    if (p_.has_bias)
      generate_input(p_, seed_, InputTensor::bias, static_cast<std::int64_t>(i) * s.seq_kv + keys.first, keys.count(),
                     scratch.bias.data());
    double row_max = -std::numeric_limits<double>::infinity();
    for (int j = keys.first; j <= keys.last; ++j) {
      if ((j - keys.first) % kKeysBetweenPolls == 0 && stop_requested()) return false;
      const float* kj = k_.data() + static_cast<std::int64_t>(j - g.span.first) * d;
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += static_cast<double>(scratch.q[c]) * kj[c];
      dot *= scale_;
      if (p_.has_bias) dot += scratch.bias[j - keys.first];
      scratch.scores[j - keys.first] = dot;
      row_max = std::max(row_max, dot);
    }
    double sum = 0;
    for (int j = 0; j < keys.count(); ++j) {
      scratch.scores[j] = std::exp(scratch.scores[j] - row_max);
      sum += scratch.scores[j];
    }
    for (int j = keys.first; j <= keys.last; ++j) {
      if ((j - keys.first) % kKeysBetweenPolls == 0 && stop_requested()) return false;
      const double weight = scratch.scores[j - keys.first] / sum;
      const float* vj = v_.data() + static_cast<std::int64_t>(j - g.span.first) * d;
      for (int c = 0; c < d; ++c) out[c] += weight * vj[c];
    }
    *lse = row_max + std::log(sum);
    return true;
  }

  // Keys [span.first + chunk * kKeysPerChunk, ...) of the group's K and V head.
  void regenerate(const RowGroup& g, std::int64_t chunk, std::vector<float>& k, std::vector<float>& v) const {
    const AttentionShape& s = p_.shape;
    const std::int64_t d = s.head_dim;
    const std::int64_t offset = chunk * kKeysPerChunk;
    const std::int64_t keys = std::min<std::int64_t>(kKeysPerChunk, g.span.count() - offset);
    const std::int64_t first = (g.kv_head * s.seq_kv + g.span.first + offset) * d;
    generate_input(p_, seed_, InputTensor::k, first, keys * d, k.data() + offset * d);
    generate_input(p_, seed_, InputTensor::v, first, keys * d, v.data() + offset * d);
  }

 private:
  const AttentionProblem& p_;
  std::uint64_t seed_;
  const std::vector<float>& k_;
  const std::vector<float>& v_;
  const std::atomic<bool>* interrupted_;
  double scale_;
};

}  // namespace

double relative_error_bound(DType dtype) {
  switch (dtype) {
    case DType::bf16: return 1e-2;
    case DType::fp16: return 5e-3;
    case DType::fp32: return 1e-4;
  }
  return 0;
}

double lse_error_bound(DType) { return 1e-4; }

namespace {

// A ragged batch: every row of every sequence when they are few; otherwise each sequence's first
// and last rows of its last head (where its own mask edges and its length live), then the other
// rows round-robin over the (sequence, K/V head) groups, each walked in spread order. Padding
// rows (past q_len) are never chosen.
std::vector<std::int64_t> ragged_rows_to_check(const AttentionShape& s, std::int64_t max_rows) {
  auto row_of = [&](std::int64_t b, std::int64_t head, std::int64_t i) { return (b * s.heads + head) * s.seq_q + i; };
  std::vector<std::int64_t> rows;
  if (s.total_q() * s.heads <= max_rows) {
    for (int b = 0; b < s.batch; ++b)
      for (int head = 0; head < s.heads; ++head)
        for (int i = 0; i < s.q_len(b); ++i) rows.push_back(row_of(b, head, i));
    return rows;
  }
  const std::int64_t edge = std::max<std::int64_t>(1, max_rows / (8 * std::max(1, s.batch)));
  for (int b = 0; b < s.batch; ++b) {
    const std::int64_t len = s.q_len(b);
    for (std::int64_t i = 0; i < len; ++i)
      if (i < edge || i >= len - edge) rows.push_back(row_of(b, s.heads - 1, i));
  }
  struct Group {
    int b;
    int kv_head;
    std::int64_t rows;
    std::uint64_t stride;
    std::uint64_t walked = 0;
  };
  std::vector<Group> groups;
  for (int b = 0; b < s.batch; ++b) {
    const std::int64_t group_rows = static_cast<std::int64_t>(s.group_size()) * s.q_len(b);
    if (group_rows == 0) continue;
    for (int h = 0; h < s.kv_heads(); ++h)
      groups.push_back({b, h, group_rows, golden_stride(static_cast<std::uint64_t>(group_rows))});
  }
  // Few groups, many rows each: at most about max_rows / kRowsPerGroup groups are visited.
  const std::size_t wanted = static_cast<std::size_t>(std::clamp<std::int64_t>(
      ceil_div(max_rows, kRowsPerGroup), 1, static_cast<std::int64_t>(groups.size())));
  std::vector<Group> chosen;
  const std::uint64_t pick = golden_stride(groups.size());
  for (std::uint64_t k = 0; chosen.size() < wanted; ++k) chosen.push_back(groups[k * pick % groups.size()]);
  bool any_left = true;
  while (static_cast<std::int64_t>(rows.size()) < max_rows && any_left) {
    any_left = false;
    for (Group& g : chosen) {
      if (static_cast<std::int64_t>(rows.size()) >= max_rows) break;
      if (g.walked >= static_cast<std::uint64_t>(g.rows)) continue;
      any_left = true;
      const auto local = static_cast<std::int64_t>(g.walked++ * g.stride % static_cast<std::uint64_t>(g.rows));
      const std::int64_t len = s.q_len(g.b);
      rows.push_back(row_of(g.b, static_cast<std::int64_t>(g.kv_head) * s.group_size() + local / len, local % len));
    }
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace

std::vector<std::int64_t> rows_to_check(const AttentionShape& s, std::int64_t max_rows) {
  const std::int64_t total = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  std::vector<std::int64_t> rows;
  if (max_rows <= 0) return rows;
  if (!s.seq_lens_q.empty()) return ragged_rows_to_check(s, max_rows);
  if (total <= max_rows) {
    rows.resize(static_cast<std::size_t>(total));
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  }
  const std::int64_t group_rows = static_cast<std::int64_t>(s.group_size()) * s.seq_q;
  const std::int64_t group_count = static_cast<std::int64_t>(s.batch) * s.kv_heads();
  const std::int64_t wanted =
      std::clamp(std::max(ceil_div(max_rows, kRowsPerGroup), ceil_div(max_rows, group_rows)), std::int64_t{1}, group_count);
  std::vector<std::int64_t> groups = {group_count - 1};  // holds the last head's edges
  const std::uint64_t group_stride = golden_stride(static_cast<std::uint64_t>(group_count));
  for (std::uint64_t k = 0; static_cast<std::int64_t>(groups.size()) < wanted; ++k) {
    const auto g = static_cast<std::int64_t>(k * group_stride % static_cast<std::uint64_t>(group_count));
    if (g != group_count - 1) groups.push_back(g);
  }

  // The first and the last query tile of the last head: where causal, bottom-right and window
  // masks leave rows with few or no keys, and where a ragged last tile lives.
  const std::int64_t last_head = total - s.seq_q;
  const std::int64_t head_rows = std::min<std::int64_t>({64, s.seq_q, max_rows / 8});
  const std::int64_t tail_rows = std::min<std::int64_t>({128, s.seq_q, max_rows / 4});
  auto is_edge = [&](std::int64_t r) { return (r >= last_head && r < last_head + head_rows) || r >= total - tail_rows; };
  for (std::int64_t r = last_head; r < total; ++r)
    if (is_edge(r)) rows.push_back(r);

  // The rest round-robin over the groups, each walking its own rows in spread order.
  std::vector<std::uint64_t> walked(groups.size(), 0);
  const std::uint64_t row_stride = golden_stride(static_cast<std::uint64_t>(group_rows));
  bool any_left = true;
  while (static_cast<std::int64_t>(rows.size()) < max_rows && any_left) {
    any_left = false;
    for (std::size_t n = 0; n < groups.size() && static_cast<std::int64_t>(rows.size()) < max_rows; ++n) {
      if (walked[n] >= static_cast<std::uint64_t>(group_rows)) continue;
      any_left = true;
      const auto local = static_cast<std::int64_t>(walked[n]++ * row_stride % static_cast<std::uint64_t>(group_rows));
      const std::int64_t batch = groups[n] / s.kv_heads();
      const std::int64_t head = groups[n] % s.kv_heads() * s.group_size() + local / s.seq_q;
      const std::int64_t r = (batch * s.heads + head) * s.seq_q + local % s.seq_q;
      if (!is_edge(r)) rows.push_back(r);
    }
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

ReferenceRows reference_rows(const AttentionProblem& p, std::uint64_t seed, const std::vector<std::int64_t>& rows,
                             const std::atomic<bool>* interrupted, unsigned threads) {
  const AttentionShape& s = p.shape;
  const int d = s.head_dim;
  const std::vector<RowGroup> groups = group_rows(p, rows);
  ReferenceRows result;
  result.rows = rows;
  result.output.assign(rows.size() * static_cast<std::size_t>(d), 0.0);
  result.lse.assign(rows.size(), -std::numeric_limits<double>::infinity());
  result.done.assign(rows.size(), 0);
  if (rows.empty()) return result;

  std::int64_t widest = 0;
  for (const RowGroup& g : groups) widest = std::max<std::int64_t>(widest, g.span.count());
  std::vector<float> k(static_cast<std::size_t>(widest * d)), v(k.size());
  const unsigned workers = worker_count(threads);
  std::vector<RowScratch> scratch(workers);
  for (RowScratch& w : scratch) {
    w.q.resize(static_cast<std::size_t>(d));
    w.bias.resize(p.has_bias ? static_cast<std::size_t>(s.seq_kv) : 0);
    w.scores.resize(static_cast<std::size_t>(s.seq_kv));
  }
  const RowComputer computer(p, seed, k, v, interrupted);

  // The workers go through the groups in step: all regenerate a group's K and V, then all
  // compute its rows. Only the barrier's completion step changes the shared position, and it
  // runs before any worker goes on, so every worker sees the same one.
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> rows_done{0};
  std::size_t group = 0;
  bool regenerating = true;
  bool stop = computer.stop_requested();
  auto step_done = [&]() noexcept {
    next.store(0, std::memory_order_relaxed);
    if (!regenerating) ++group;
    regenerating = !regenerating;
    stop = computer.stop_requested();
  };
  std::barrier sync(static_cast<std::ptrdiff_t>(workers), step_done);
  auto work = [&](unsigned worker) {
    while (!stop && group < groups.size()) {
      const RowGroup& g = groups[group];
      if (regenerating) {
        for (std::int64_t chunk; (chunk = next.fetch_add(1)) < g.chunks() && !computer.stop_requested();)
          computer.regenerate(g, chunk, k, v);
      } else {
        for (std::int64_t n; (n = static_cast<std::int64_t>(g.begin) + next.fetch_add(1)) < static_cast<std::int64_t>(g.end) &&
                             !computer.stop_requested();) {
          if (computer.compute(rows[n], g, scratch[worker], result.output.data() + n * d, &result.lse[n])) {
            result.done[n] = 1;
            rows_done.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {
      sync.arrive_and_drop();  // one worker fewer: the others do its share
    }
  }
  work(0);
  for (std::thread& t : pool) t.join();

  result.rows_done = rows_done.load();
  result.interrupted = result.rows_done < static_cast<std::int64_t>(rows.size());
  return result;
}

Verification verify_attention(const AttentionProblem& p, std::uint64_t seed, const OutputRows& got,
                              const VerifyOptions& options) {
  const AttentionShape& s = p.shape;
  const std::size_t d = static_cast<std::size_t>(s.head_dim);
  const std::size_t n_rows = got.rows.size();
  Verification result;
  result.bound = relative_error_bound(p.dtype);
  if (got.output.size() != n_rows * d) {
    result.detail = fmt::format("{} output values read back for {} rows of {}: expected {}", got.output.size(), n_rows,
                                d, n_rows * d);
    return result;
  }
  if (options.compare_lse && got.lse.size() != n_rows) {
    result.detail = fmt::format("{} logsumexp values read back for {} rows", got.lse.size(), n_rows);
    return result;
  }

  // NaN/inf: the device scan covers the whole output; the checked rows are counted here too,
  // for rows that did not come from a device.
  std::int64_t in_rows = 0, first_bad = -1;
  for (std::size_t idx = 0; idx < got.output.size(); ++idx) {
    if (std::isfinite(got.output[idx])) continue;
    if (first_bad < 0) first_bad = got.rows[idx / d] * static_cast<std::int64_t>(d) + static_cast<std::int64_t>(idx % d);
    ++in_rows;
  }
  result.non_finite = std::max(got.non_finite, in_rows);
  if (got.first_non_finite >= 0) first_bad = got.first_non_finite;

  const ReferenceRows ref = reference_rows(p, seed, got.rows, options.interrupted, options.threads);
  double diff_sq = 0, ref_sq = 0, max_abs = 0, lse_max = options.compare_lse ? 0.0 : -1.0, worst_row = 0;
  std::int64_t first_unmasked_zero_row = -1, worst_row_index = -1;
  // Raises `largest` to `error`, a NaN counting as infinite (max() would skip it); true if raised.
  const auto raise_to = [](double& largest, double error) {
    if (error <= largest) return false;
    largest = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
    return true;
  };
  for (std::size_t n = 0; n < n_rows; ++n) {
    if (ref.done[n] == 0) continue;
    const bool sees_no_key = std::isinf(ref.lse[n]);
    double row_diff_sq = 0, row_ref_sq = 0;
    for (std::size_t c = 0; c < d; ++c) {
      const double value = got.output[n * d + c];
      const double expected = ref.output[n * d + c];
      const double diff = value - expected;
      row_diff_sq += std::isfinite(diff) ? diff * diff : std::numeric_limits<double>::infinity();
      row_ref_sq += expected * expected;
      max_abs = std::max(max_abs, std::abs(diff));
      if (sees_no_key && value != 0.0 && first_unmasked_zero_row < 0) first_unmasked_zero_row = got.rows[n];
    }
    diff_sq += row_diff_sq;
    ref_sq += row_ref_sq;
    if (row_ref_sq > 0) {
      if (raise_to(worst_row, std::sqrt(row_diff_sq / row_ref_sq))) worst_row_index = got.rows[n];
    }
    if (options.compare_lse) {
      // A NaN (the poison: never written) is an infinite error; a row that sees no key says -inf.
      const double error = sees_no_key ? (got.lse[n] == -std::numeric_limits<float>::infinity()
                                              ? 0.0
                                              : std::numeric_limits<double>::infinity())
                                       : std::abs(static_cast<double>(got.lse[n]) - ref.lse[n]);
      raise_to(lse_max, error);
    }
  }
  result.rows_checked = ref.rows_done;
  result.interrupted = ref.interrupted;
  result.relative_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  result.max_abs_error = max_abs;
  result.worst_row_error = worst_row;
  result.lse_max_abs_error = lse_max;
  const double lse_bound = lse_error_bound(p.dtype);
  if (result.interrupted) {
    result.detail = fmt::format("verification interrupted after {} of {} rows", ref.rows_done, n_rows);
  } else if (result.non_finite > 0) {
    result.detail = fmt::format("{} output elements are NaN/inf (first at row {}, column {}): unwritten or overflowed",
                                result.non_finite, first_bad / static_cast<std::int64_t>(d),
                                first_bad % static_cast<std::int64_t>(d));
  } else if (first_unmasked_zero_row >= 0) {
    result.detail = fmt::format("row {} sees no key, so it must be all zeros, but is not", first_unmasked_zero_row);
  } else if (!(result.relative_error <= result.bound)) {
    result.detail = fmt::format("relative error {:.3e} exceeds the {} bound {:.0e}", result.relative_error,
                                to_string(p.dtype), result.bound);
  } else if (!(worst_row <= kRowErrorFactor * result.bound)) {
    result.detail = fmt::format("row {} has a relative error of {:.3e}, above {} x the {} bound {:.0e} (all checked "
                                "rows together: {:.3e})",
                                worst_row_index, worst_row, kRowErrorFactor, to_string(p.dtype), result.bound,
                                result.relative_error);
  } else if (options.compare_lse && !(lse_max <= lse_bound)) {
    result.detail = fmt::format("logsumexp max abs error {:.3e} exceeds {:.0e}", lse_max, lse_bound);
  } else {
    result.passed = true;
  }
  return result;
}

std::uint64_t verification_host_bytes(const AttentionProblem& p, std::int64_t max_rows, unsigned threads) {
  const AttentionShape& s = p.shape;
  const std::uint64_t total = static_cast<std::uint64_t>(s.batch) * s.heads * s.seq_q;
  const std::uint64_t rows = std::min<std::uint64_t>(total, static_cast<std::uint64_t>(std::max<std::int64_t>(max_rows, 0)));
  const std::uint64_t d = static_cast<std::uint64_t>(s.head_dim);
  const std::uint64_t seq_kv = static_cast<std::uint64_t>(s.seq_kv);
  // Per row: its index, the bytes read back and their float copy, the lse, the float64 reference.
  const std::uint64_t per_row = 8 + d * (static_cast<std::uint64_t>(dtype_bytes(p.dtype)) + 4 + 8) + 4 + 8 + 1;
  const std::uint64_t kv = 2 * seq_kv * d * sizeof(float);  // the widest group's K and V
  const std::uint64_t per_thread = seq_kv * (sizeof(double) + sizeof(float)) + d * sizeof(float);
  return rows * per_row + kv + worker_count(threads) * per_thread;
}

}  // namespace attnprof
