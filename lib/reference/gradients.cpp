#include "reference/gradients.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "reference/inputs.hpp"

namespace attnprof {
namespace {

unsigned worker_count(unsigned threads) {
  if (threads > 0) return threads;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
}

// Keys of a dK/dV group always checked at each end: the first keys see every row under a causal
// top-left mask, the last ones the fewest (or none).
constexpr std::int64_t kEdgeKeys = 32;

void require_dense(const AttentionShape& s) {
  if (s.ragged() || s.paged())
    throw std::invalid_argument("reference gradients: ragged and paged problems have no backward here");
}

void require_ascending(const std::vector<std::int64_t>& rows, std::int64_t total, const char* what) {
  for (std::size_t n = 0; n < rows.size(); ++n) {
    if (rows[n] < 0 || rows[n] >= total)
      throw std::invalid_argument(fmt::format("{} row {} is outside [0, {})", what, rows[n], total));
    if (n > 0 && rows[n] <= rows[n - 1]) throw std::invalid_argument(fmt::format("{} rows must be ascending", what));
  }
}

// Runs fn(worker, index) for index in [0, count) on up to `workers` threads; stops handing out
// work once `stop` says so. Thread creation failing leaves the work to fewer threads.
template <typename Fn, typename Stop>
void parallel_for(std::int64_t count, unsigned workers, Fn fn, Stop stop) {
  std::atomic<std::int64_t> next{0};
  auto work = [&](unsigned worker) {
    for (std::int64_t i; (i = next.fetch_add(1)) < count && !stop();) fn(worker, i);
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers && static_cast<std::int64_t>(w) < count; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {
      break;
    }
  }
  work(0);
  for (std::thread& t : pool) t.join();
}

// One query row's softmax and the terms of its gradients, in float64.
struct RowTerms {
  KeyRange keys;
  std::vector<double> p;   // P_ij over keys
  std::vector<double> dp;  // dP_ij = dO_i . V_j
  double d = 0;            // D_i = sum_j P_ij dP_ij = dO_i . O_i
};

// Everything one (batch, K/V head) group's rows read: its K and V, whole.
class GroupComputer {
 public:
  GroupComputer(const AttentionProblem& p, std::uint64_t seed, std::int64_t group)
      : p_(p), seed_(seed), scale_(p.softmax_scale()) {
    const AttentionShape& s = p.shape;
    const std::int64_t d = s.head_dim, first = group * s.seq_kv * d, count = static_cast<std::int64_t>(s.seq_kv) * d;
    k_.resize(static_cast<std::size_t>(count));
    v_.resize(k_.size());
    generate_input(p, seed, InputTensor::k, first, count, k_.data());
    generate_input(p, seed, InputTensor::v, first, count, v_.data());
  }

  const float* k_row(int j) const { return k_.data() + static_cast<std::int64_t>(j) * p_.shape.head_dim; }
  const float* v_row(int j) const { return v_.data() + static_cast<std::int64_t>(j) * p_.shape.head_dim; }
  double scale() const { return scale_; }

  // Row r (flat over [batch, heads, seq_q]) into terms; q and d_o receive its q and dO.
  void row_terms(std::int64_t r, std::vector<float>& q, std::vector<float>& d_o, std::vector<float>& bias,
                 RowTerms& t) const {
    const AttentionShape& s = p_.shape;
    const int d = s.head_dim;
    const int i = static_cast<int>(r % s.seq_q);
    t.keys = visible_keys(p_, i, s.seq_q, s.seq_kv);
    t.p.assign(static_cast<std::size_t>(t.keys.count()), 0.0);
    t.dp.assign(t.p.size(), 0.0);
    t.d = 0;
    if (t.keys.count() == 0) return;
    generate_input(p_, seed_, InputTensor::q, r * d, d, q.data());
    generate_input(p_, seed_, InputTensor::grad_o, r * d, d, d_o.data());
    if (p_.has_bias)
      generate_input(p_, seed_, InputTensor::bias, static_cast<std::int64_t>(i) * s.seq_kv + t.keys.first,
                     t.keys.count(), bias.data());
    double row_max = -std::numeric_limits<double>::infinity();
    for (int j = t.keys.first; j <= t.keys.last; ++j) {
      const float* kj = k_row(j);
      const float* vj = v_row(j);
      double dot = 0, dp = 0;
      for (int c = 0; c < d; ++c) {
        dot += static_cast<double>(q[c]) * kj[c];
        dp += static_cast<double>(d_o[c]) * vj[c];
      }
      dot *= scale_;
      if (p_.has_bias) dot += bias[static_cast<std::size_t>(j - t.keys.first)];
      t.p[static_cast<std::size_t>(j - t.keys.first)] = dot;
      t.dp[static_cast<std::size_t>(j - t.keys.first)] = dp;
      row_max = std::max(row_max, dot);
    }
    double sum = 0;
    for (double& x : t.p) sum += (x = std::exp(x - row_max));
    for (std::size_t n = 0; n < t.p.size(); ++n) {
      t.p[n] /= sum;
      t.d += t.p[n] * t.dp[n];
    }
  }

 private:
  const AttentionProblem& p_;
  std::uint64_t seed_;
  double scale_;
  std::vector<float> k_, v_;
};

struct Scratch {
  std::vector<float> q, d_o, bias;
  RowTerms terms;
  std::vector<double> dk, dv;  // the group's checked keys x head_dim, this worker's share
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

double gradient_error_bound(DType dtype) {
  switch (dtype) {
    case DType::bf16: return 3e-2;
    case DType::fp16: return 1e-2;
    case DType::fp32: return 1e-4;
  }
  return 0;
}

GradientRows gradient_rows_to_check(const AttentionShape& s, std::int64_t max_rows) {
  GradientRows rows;
  rows.q_rows = rows_to_check(s, max_rows);
  if (max_rows <= 0) return rows;
  const std::int64_t groups = static_cast<std::int64_t>(s.batch) * s.kv_heads();
  std::vector<std::int64_t> chosen = {groups - 1};
  if (groups > 1) chosen.insert(chosen.begin(), 0);  // the first and the last: batch 0 is checked too
  const std::int64_t per_group = std::max<std::int64_t>(1, max_rows / 4);
  for (std::int64_t g : chosen) {
    const std::int64_t base = g * s.seq_kv;
    if (s.seq_kv <= per_group) {
      for (std::int64_t j = 0; j < s.seq_kv; ++j) rows.kv_rows.push_back(base + j);
      continue;
    }
    std::vector<std::int64_t> keys;
    const std::int64_t edge = std::min(kEdgeKeys, per_group / 4);
    for (std::int64_t j = 0; j < edge; ++j) keys.insert(keys.end(), {j, s.seq_kv - 1 - j});
    // The rest evenly spread between the edges.
    const std::int64_t middle = per_group - static_cast<std::int64_t>(keys.size());
    const std::int64_t span = s.seq_kv - 2 * edge;
    for (std::int64_t n = 0; n < middle; ++n) keys.push_back(edge + n * span / std::max<std::int64_t>(middle, 1));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (std::int64_t j : keys) rows.kv_rows.push_back(base + j);
  }
  return rows;
}

ReferenceGradients reference_gradients(const AttentionProblem& p, std::uint64_t seed, const GradientRows& rows,
                                       const std::atomic<bool>* interrupted, unsigned threads) {
  const AttentionShape& s = p.shape;
  require_dense(s);
  const std::int64_t d = s.head_dim;
  const std::int64_t total_q = static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q;
  const std::int64_t total_kv = static_cast<std::int64_t>(s.batch) * s.kv_heads() * s.seq_kv;
  require_ascending(rows.q_rows, total_q, "dQ");
  require_ascending(rows.kv_rows, total_kv, "dK/dV");
  ReferenceGradients out;
  out.dq.assign(rows.q_rows.size() * static_cast<std::size_t>(d), 0.0);
  out.dk.assign(rows.kv_rows.size() * static_cast<std::size_t>(d), 0.0);
  out.dv.assign(out.dk.size(), 0.0);

  // The (batch, K/V head) group of a query row and of a key row; both lists are ascending, so
  // their groups are too.
  auto group_of_q = [&](std::int64_t r) {
    const std::int64_t head = r / s.seq_q;
    return head / s.heads * s.kv_heads() + head % s.heads / s.group_size();
  };
  std::vector<std::int64_t> groups;
  for (std::int64_t r : rows.q_rows) groups.push_back(group_of_q(r));
  for (std::int64_t r : rows.kv_rows) groups.push_back(r / s.seq_kv);
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());

  auto stop = [&] { return interrupted != nullptr && interrupted->load(std::memory_order_relaxed); };
  const unsigned workers = worker_count(threads);
  std::vector<Scratch> scratch(workers);
  for (Scratch& w : scratch) {
    w.q.resize(static_cast<std::size_t>(d));
    w.d_o.resize(static_cast<std::size_t>(d));
    w.bias.resize(p.has_bias ? static_cast<std::size_t>(s.seq_kv) : 0);
  }

  for (std::int64_t group : groups) {
    if (stop()) break;
    const GroupComputer computer(p, seed, group);
    // This group's dQ rows: [q_begin, q_end) of rows.q_rows; its checked keys: [kv_begin, kv_end).
    const auto q_begin = std::find_if(rows.q_rows.begin(), rows.q_rows.end(),
                                      [&](std::int64_t r) { return group_of_q(r) == group; }) - rows.q_rows.begin();
    auto q_end = q_begin;
    while (q_end < static_cast<std::ptrdiff_t>(rows.q_rows.size()) && group_of_q(rows.q_rows[q_end]) == group) ++q_end;
    const auto kv_begin = std::lower_bound(rows.kv_rows.begin(), rows.kv_rows.end(), group * s.seq_kv) - rows.kv_rows.begin();
    const auto kv_end =
        std::lower_bound(rows.kv_rows.begin(), rows.kv_rows.end(), (group + 1) * s.seq_kv) - rows.kv_rows.begin();
    const std::int64_t keys_checked = kv_end - kv_begin;
    std::vector<int> slot_of_key(keys_checked > 0 ? static_cast<std::size_t>(s.seq_kv) : 0, -1);
    for (std::int64_t n = 0; n < keys_checked; ++n)
      slot_of_key[static_cast<std::size_t>(rows.kv_rows[kv_begin + n] - group * s.seq_kv)] = static_cast<int>(n);
    for (Scratch& w : scratch) {
      w.dk.assign(static_cast<std::size_t>(keys_checked * d), 0.0);
      w.dv.assign(w.dk.size(), 0.0);
    }

    // With checked keys every query row of the group's heads contributes; otherwise only the dQ rows.
    const std::int64_t b = group / s.kv_heads(), first_head = group % s.kv_heads() * s.group_size();
    const std::int64_t first_row = (b * s.heads + first_head) * s.seq_q;
    const std::int64_t task_count = keys_checked > 0 ? static_cast<std::int64_t>(s.group_size()) * s.seq_q : q_end - q_begin;
    parallel_for(
        task_count, workers,
        [&](unsigned worker, std::int64_t task) {
          Scratch& w = scratch[worker];
          const std::int64_t r = keys_checked > 0 ? first_row + task : rows.q_rows[q_begin + task];
          computer.row_terms(r, w.q, w.d_o, w.bias, w.terms);
          const RowTerms& t = w.terms;
          const auto at = std::lower_bound(rows.q_rows.begin() + q_begin, rows.q_rows.begin() + q_end, r);
          if (at != rows.q_rows.begin() + q_end && *at == r) {
            double* dq = out.dq.data() + (at - rows.q_rows.begin()) * d;
            for (int j = t.keys.first; j <= t.keys.last; ++j) {
              const std::size_t n = static_cast<std::size_t>(j - t.keys.first);
              const double ds = t.p[n] * (t.dp[n] - t.d) * computer.scale();
              const float* kj = computer.k_row(j);
              for (std::int64_t c = 0; c < d; ++c) dq[c] += ds * kj[c];
            }
          }
          if (keys_checked == 0) return;
          for (int j = t.keys.first; j <= t.keys.last; ++j) {
            const int slot = slot_of_key[static_cast<std::size_t>(j)];
            if (slot < 0) continue;
            const std::size_t n = static_cast<std::size_t>(j - t.keys.first);
            const double ds = t.p[n] * (t.dp[n] - t.d) * computer.scale();
            double* dk = w.dk.data() + slot * d;
            double* dv = w.dv.data() + slot * d;
            for (std::int64_t c = 0; c < d; ++c) {
              dk[c] += ds * w.q[static_cast<std::size_t>(c)];
              dv[c] += t.p[n] * w.d_o[static_cast<std::size_t>(c)];
            }
          }
        },
        stop);
    for (const Scratch& w : scratch)
      for (std::int64_t n = 0; n < keys_checked * d; ++n) {
        out.dk[static_cast<std::size_t>(kv_begin * d + n)] += w.dk[static_cast<std::size_t>(n)];
        out.dv[static_cast<std::size_t>(kv_begin * d + n)] += w.dv[static_cast<std::size_t>(n)];
      }
  }
  out.interrupted = stop();
  return out;
}

namespace {

struct TensorError {
  double relative = 0;
  double max_abs = 0;
};

TensorError compare(const std::vector<float>& got, const std::vector<double>& ref) {
  double diff_sq = 0, ref_sq = 0;
  TensorError e;
  for (std::size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    const double diff = static_cast<double>(got[i]) - ref[i];
    diff_sq += std::isfinite(diff) ? diff * diff : std::numeric_limits<double>::infinity();
    ref_sq += ref[i] * ref[i];
    e.max_abs = std::max(e.max_abs, std::abs(diff));
  }
  e.relative = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  return e;
}

}  // namespace

Verification verify_gradients(const AttentionProblem& p, std::uint64_t seed, const GradientOutputs& got,
                              const VerifyOptions& options) {
  const std::size_t d = static_cast<std::size_t>(p.shape.head_dim);
  Verification result;
  result.bound = gradient_error_bound(p.dtype);
  const std::size_t q_values = got.rows.q_rows.size() * d, kv_values = got.rows.kv_rows.size() * d;
  if (got.dq.size() != q_values || got.dk.size() != kv_values || got.dv.size() != kv_values) {
    result.detail = fmt::format("{} dQ, {} dK, {} dV values read back for {} dQ and {} dK/dV rows of {}", got.dq.size(),
                                got.dk.size(), got.dv.size(), got.rows.q_rows.size(), got.rows.kv_rows.size(), d);
    return result;
  }
  std::int64_t in_rows = 0;
  for (const std::vector<float>* values : {&got.dq, &got.dk, &got.dv})
    in_rows += std::count_if(values->begin(), values->end(), [](float x) { return !std::isfinite(x); });
  result.non_finite = std::max(got.non_finite, in_rows);

  const ReferenceGradients ref = reference_gradients(p, seed, got.rows, options.interrupted, options.threads);
  const TensorError dq = compare(got.dq, ref.dq), dk = compare(got.dk, ref.dk), dv = compare(got.dv, ref.dv);
  result.dq_relative_error = dq.relative;
  result.dk_relative_error = dk.relative;
  result.dv_relative_error = dv.relative;
  result.relative_error = std::max({dq.relative, dk.relative, dv.relative});
  result.max_abs_error = std::max({dq.max_abs, dk.max_abs, dv.max_abs});
  result.rows_checked = static_cast<std::int64_t>(got.rows.q_rows.size() + got.rows.kv_rows.size());
  result.interrupted = ref.interrupted;
  const std::string errors =
      fmt::format("dQ {:.3e}, dK {:.3e}, dV {:.3e}", dq.relative, dk.relative, dv.relative);
  if (result.interrupted) {
    result.detail = "verification of the gradients interrupted";
  } else if (result.non_finite > 0) {
    result.detail = fmt::format("{} gradient elements are NaN/inf{}: unwritten or overflowed", result.non_finite,
                                got.first_non_finite.empty() ? "" : " (first: " + got.first_non_finite + ")");
  } else if (!(result.relative_error <= result.bound)) {
    const char* worst = dq.relative >= dk.relative && dq.relative >= dv.relative ? "dQ"
                        : dk.relative >= dv.relative                               ? "dK"
                                                                                   : "dV";
    result.detail = fmt::format("{} relative error {:.3e} exceeds the {} backward bound {:.0e} ({})", worst,
                                result.relative_error, to_string(p.dtype), result.bound, errors);
  } else {
    result.passed = true;
  }
  return result;
}

std::uint64_t gradient_verification_host_bytes(const AttentionProblem& p, std::int64_t max_rows, unsigned threads) {
  const AttentionShape& s = p.shape;
  const std::uint64_t d = static_cast<std::uint64_t>(s.head_dim), seq_kv = static_cast<std::uint64_t>(s.seq_kv);
  const std::uint64_t rows = static_cast<std::uint64_t>(std::max<std::int64_t>(max_rows, 0));
  const std::uint64_t kv_rows = static_cast<std::uint64_t>(ceil_div(std::max<std::int64_t>(max_rows, 0), 2));
  // Per checked row: index, bytes read back, floats, float64 reference; per thread: a row's terms,
  // and its share of the checked keys' dK and dV.
  const std::uint64_t per_row = 8 + d * (static_cast<std::uint64_t>(dtype_bytes(p.dtype)) + 4 + 8);
  const std::uint64_t per_thread = seq_kv * (2 * sizeof(double) + sizeof(float)) + 2 * kv_rows * d * sizeof(double);
  const std::uint64_t kv = 2 * seq_kv * d * sizeof(float) + seq_kv * sizeof(int);
  return (rows + 2 * kv_rows) * per_row + kv + worker_count(threads) * per_thread;
}

std::int64_t count_bitwise_differences(const void* a, const void* b, std::int64_t elements, int element_bytes) {
  if (elements < 0 || element_bytes <= 0)
    throw std::invalid_argument(fmt::format("count_bitwise_differences: {} elements of {} bytes", elements, element_bytes));
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  const auto width = static_cast<std::size_t>(element_bytes);
  // Whole blocks first: identical runs (the common case) cost one memcmp per block.
  constexpr std::int64_t kBlock = 4096;
  std::int64_t differing = 0;
  for (std::int64_t first = 0; first < elements; first += kBlock) {
    const std::int64_t count = std::min(kBlock, elements - first);
    const std::size_t at = static_cast<std::size_t>(first) * width;
    if (std::memcmp(x + at, y + at, static_cast<std::size_t>(count) * width) == 0) continue;
    for (std::size_t byte = at; byte < at + static_cast<std::size_t>(count) * width; byte += width)
      differing += std::memcmp(x + byte, y + byte, width) != 0;
  }
  return differing;
}

}  // namespace attnprof
