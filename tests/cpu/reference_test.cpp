// The counter-based inputs and the float64 reference: the generator's determinism, range,
// streams and rounding (against core/half_convert); reference rows against a brute-force float64
// attention over full arrays (MHA, GQA, windows, both mask alignments, causal or not, odd and
// unequal lengths, bias); the rows chosen; what verification reports; interruption.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/counter_random.hpp"
#include "core/half_convert.hpp"
#include "core/types.hpp"
#include "reference/inputs.hpp"
#include "reference/verification.hpp"

namespace attnprof {
namespace {

std::vector<float> whole(const AttentionProblem& p, std::uint64_t seed, InputTensor tensor) {
  std::vector<float> values(static_cast<std::size_t>(input_element_count(p, tensor)));
  generate_input(p, seed, tensor, 0, static_cast<std::int64_t>(values.size()), values.data());
  return values;
}

AttentionProblem make_problem(AttentionShape shape, DType dtype = DType::fp32, bool causal = false) {
  AttentionProblem p;
  p.shape = shape;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

// ---- the generator ----

TEST(CounterRandom, SameSeedSameValuesAndAnyRangeMatchesTheWhole) {
  const AttentionProblem p = make_problem({2, 3, 17, 33, 7}, DType::bf16);
  const std::vector<float> k = whole(p, 42, InputTensor::k);
  EXPECT_EQ(k, whole(p, 42, InputTensor::k));
  // Odd starts and odd lengths take the other half of a pair: still the same elements.
  for (std::int64_t first : {0, 1, 2, 5, 100, 1001})
    for (std::int64_t count : {0, 1, 2, 3, 8, 99}) {
      std::vector<float> part(static_cast<std::size_t>(count));
      generate_input(p, 42, InputTensor::k, first, count, part.data());
      for (std::int64_t n = 0; n < count; ++n) ASSERT_EQ(part[n], k[first + n]) << first << "+" << n;
    }
  EXPECT_THROW(generate_input(p, 42, InputTensor::k, static_cast<std::int64_t>(k.size()) - 1, 2, nullptr),
               std::out_of_range);
}

TEST(CounterRandom, DrawsAreExactAndInRange) {
  // Every 24-bit draw j lands exactly on low + (high - low) * j / 2^24: no rounding at all.
  for (InputTensor tensor : {InputTensor::q, InputTensor::bias}) {
    const InputRange range = input_range(tensor);
    for (std::uint32_t j = 0; j < (1u << 24); ++j) {
      const float value = uniform_from_bits(j << 8, range.low, range.high);
      const double exact = range.low + (static_cast<double>(range.high) - range.low) * j / 16777216.0;
      if (value != exact) FAIL() << "draw " << j << ": " << value << " != " << exact;
    }
    EXPECT_EQ(uniform_from_bits(0xffffffffu, range.low, range.high), range.high - (range.high - range.low) / 16777216.f);
  }
  // Rounded to a half type, values may reach `high` but never leave [low, high].
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
    for (InputTensor tensor : {InputTensor::q, InputTensor::k, InputTensor::v, InputTensor::bias}) {
      const InputRange range = input_range(tensor);
      std::vector<float> values(1 << 20);
      generate_input(7, tensor, dtype, 0, static_cast<std::int64_t>(values.size()), values.data());
      double sum = 0, sum_sq = 0;
      for (float v : values) {
        ASSERT_GE(v, range.low);
        ASSERT_LE(v, range.high);
        if (dtype == DType::fp32) {
          ASSERT_LT(v, range.high);
        }
        EXPECT_EQ(v, round_to_dtype(dtype, v));  // already rounded
        sum += v;
        sum_sq += static_cast<double>(v) * v;
      }
      const double width = range.high - range.low;
      const double mean = sum / values.size(), variance = sum_sq / values.size() - mean * mean;
      EXPECT_NEAR(mean, (range.low + range.high) / 2, 0.005 * width) << to_string(dtype);
      EXPECT_NEAR(variance, width * width / 12, 0.01 * width * width / 12) << to_string(dtype);
    }
}

TEST(CounterRandom, EachTensorAndSeedHasItsOwnStream) {
  const std::int64_t n = 1 << 16;
  auto draw = [&](std::uint64_t seed, InputTensor tensor) {
    std::vector<float> values(static_cast<std::size_t>(n));
    generate_input(seed, tensor, DType::fp32, 0, n, values.data());
    return values;
  };
  const std::vector<std::vector<float>> streams = {draw(1, InputTensor::q),    draw(1, InputTensor::k),
                                                   draw(1, InputTensor::v),    draw(1, InputTensor::bias),
                                                   draw(2, InputTensor::q),    draw(0, InputTensor::q),
                                                   draw(1ull << 63, InputTensor::q)};
  for (std::size_t a = 0; a < streams.size(); ++a)
    for (std::size_t b = a + 1; b < streams.size(); ++b) {
      int same = 0;
      double dot = 0, norm_a = 0, norm_b = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        same += streams[a][i] == streams[b][i];
        dot += static_cast<double>(streams[a][i]) * streams[b][i];
        norm_a += static_cast<double>(streams[a][i]) * streams[a][i];
        norm_b += static_cast<double>(streams[b][i]) * streams[b][i];
      }
      EXPECT_LT(same, 10) << a << " vs " << b;
      EXPECT_LT(std::abs(dot / std::sqrt(norm_a * norm_b)), 0.02) << a << " vs " << b;  // uncorrelated
    }
  // Neither is one stream a shifted copy of another (the failure mode of a badly keyed counter).
  const std::vector<float>& q = streams[0];
  const std::vector<float>& k = streams[1];
  for (std::int64_t i = 0; i + 4 <= n; ++i)
    EXPECT_FALSE(k[i] == q[0] && k[i + 1] == q[1] && k[i + 2] == q[2] && k[i + 3] == q[3]) << i;
}

TEST(CounterRandom, RoundingMatchesHalfConvert) {
  // Every value the generator can draw, in both ranges.
  for (InputTensor tensor : {InputTensor::q, InputTensor::bias}) {
    const InputRange range = input_range(tensor);
    for (std::uint32_t j = 0; j < (1u << 24); ++j) {
      const float value = uniform_from_bits(j << 8, range.low, range.high);
      if (round_to_bf16_bits(value) != float_to_bf16_bits(value) ||
          round_to_fp16_bits(value) != float_to_fp16_bits(value))
        FAIL() << "draw " << j << " (" << value << ") rounds differently";
    }
  }
  // A spread over every float bit pattern: subnormals, overflow, infinities, NaN.
  for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 4093) {
    const float value = counter_random::bits_float(static_cast<std::uint32_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(bf16_bits_value(round_to_bf16_bits(value))));
      EXPECT_TRUE(std::isnan(fp16_bits_value(round_to_fp16_bits(value))));
      continue;
    }
    ASSERT_EQ(round_to_bf16_bits(value), float_to_bf16_bits(value)) << std::hexfloat << value;
    ASSERT_EQ(round_to_fp16_bits(value), float_to_fp16_bits(value)) << std::hexfloat << value;
  }
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const float ours = fp16_bits_value(half), theirs = fp16_bits_to_float(half);
    if (std::isnan(theirs)) {
      EXPECT_TRUE(std::isnan(ours));
    } else {
      ASSERT_EQ(ours, theirs) << std::hex << h;
    }
    if (!std::isnan(bf16_bits_to_float(half))) {
      ASSERT_EQ(bf16_bits_value(half), bf16_bits_to_float(half));
    }
  }
  // fp16's subnormal ties: half the smallest subnormal goes to zero, 1.5x of it to 2 units.
  EXPECT_EQ(round_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(round_to_fp16_bits(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(round_to_fp16_bits(std::ldexp(1023.5f, -24)), 0x0400);  // carries into the smallest normal
}

// ---- the reference against brute force ----

// Which keys row i sees, written per element and independently of visible_keys().
bool key_visible(const AttentionProblem& p, int i, int j, int sq, int skv) {
  const long diagonal = i + (p.alignment == MaskAlignment::bottom_right ? static_cast<long>(skv) - sq : 0L);
  if (p.causal && j > diagonal) return false;
  if (p.window.right >= 0 && j > diagonal + p.window.right) return false;
  if (p.window.left >= 0 && j < diagonal - p.window.left) return false;
  return true;
}

struct BruteForce {
  std::vector<double> out;  // [B, H, Sq, D]
  std::vector<double> lse;  // [B, H, Sq]; -inf where a row sees no key
};

BruteForce brute_force(const AttentionProblem& p, std::uint64_t seed) {
  const AttentionShape& s = p.shape;
  const int d = s.head_dim;
  const std::vector<float> q = whole(p, seed, InputTensor::q), k = whole(p, seed, InputTensor::k),
                           v = whole(p, seed, InputTensor::v), bias = whole(p, seed, InputTensor::bias);
  BruteForce result;
  result.out.assign(q.size(), 0.0);
  result.lse.assign(static_cast<std::size_t>(s.batch) * s.heads * s.seq_q, -INFINITY);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t kv = (static_cast<std::size_t>(b) * s.kv_heads() + h / s.group_size()) * s.seq_kv * d;
      for (int i = 0; i < s.q_len(b); ++i) {  // a ragged sequence at its own lengths
        const std::size_t row = (static_cast<std::size_t>(b) * s.heads + h) * s.seq_q + i;
        std::vector<double> scores(static_cast<std::size_t>(s.seq_kv), -INFINITY);
        double top = -INFINITY;
        for (int j = 0; j < s.kv_len(b); ++j) {
          if (!key_visible(p, i, j, s.q_len(b), s.kv_len(b))) continue;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += static_cast<double>(q[row * d + c]) * k[kv + j * d + c];
          scores[j] = dot * p.softmax_scale() + (p.has_bias ? bias[static_cast<std::size_t>(i) * s.seq_kv + j] : 0.0);
          top = std::max(top, scores[j]);
        }
        if (top == -INFINITY) continue;
        double sum = 0;
        for (double& score : scores) sum += score = std::exp(score - top);
        for (int j = 0; j < s.seq_kv; ++j)
          for (int c = 0; c < d; ++c) result.out[row * d + c] += scores[j] / sum * v[kv + j * d + c];
        result.lse[row] = top + std::log(sum);
      }
    }
  return result;
}

std::string describe(const AttentionProblem& p) {
  return fmt::format("{} heads_kv {} window [{}, {}] {} {}", case_label("ref", p), p.shape.kv_heads(), p.window.left,
                     p.window.right, p.is_bottom_right() ? "bottom_right" : "top_left", p.has_bias ? "bias" : "");
}

OutputRows rows_from(const AttentionProblem& p, const BruteForce& truth, const std::vector<std::int64_t>& rows) {
  OutputRows got;
  got.rows = rows;
  const int d = p.shape.head_dim;
  for (std::int64_t r : rows) {
    for (int c = 0; c < d; ++c) got.output.push_back(static_cast<float>(truth.out[r * d + c]));
    got.lse.push_back(static_cast<float>(truth.lse[r]));
  }
  return got;
}

TEST(ReferenceRows, MatchBruteForceOverFullArrays) {
  const std::vector<std::pair<int, int>> lengths = {{1, 1}, {1, 17}, {17, 1}, {17, 17}, {17, 33}, {33, 17}, {33, 33}};
  const std::vector<std::pair<int, int>> heads = {{2, 2}, {8, 2}, {8, 1}};
  const std::vector<AttentionWindow> windows = {{-1, -1}, {3, 0}, {5, 2}, {-1, 4}};
  int problems = 0, fully_masked = 0;
  for (const auto& [seq_q, seq_kv] : lengths)
    for (const auto& [h, h_kv] : heads)
      for (const AttentionWindow& window : windows)
        for (MaskAlignment alignment : {MaskAlignment::top_left, MaskAlignment::bottom_right})
          for (bool causal : {false, true})
            for (bool bias : {false, true}) {
              AttentionProblem p = make_problem({2, h, seq_q, seq_kv, problems % 2 == 0 ? 8 : 5, h_kv},
                                                static_cast<DType>(problems % 3), causal);
              p.window = window;
              p.alignment = alignment;
              p.has_bias = bias;
              const std::uint64_t seed = 1000 + problems++;
              SCOPED_TRACE(describe(p));
              const BruteForce truth = brute_force(p, seed);
              const std::vector<std::int64_t> rows = rows_to_check(p.shape, 1 << 20);  // all of them
              ASSERT_EQ(rows.size(), truth.lse.size());
              const ReferenceRows ref = reference_rows(p, seed, rows);
              ASSERT_FALSE(ref.interrupted);
              ASSERT_EQ(ref.rows_done, static_cast<std::int64_t>(rows.size()));
              for (std::size_t n = 0; n < rows.size(); ++n) {
                ASSERT_EQ(std::isinf(ref.lse[n]), std::isinf(truth.lse[n])) << "row " << rows[n];
                fully_masked += std::isinf(truth.lse[n]);
                if (!std::isinf(truth.lse[n])) {
                  ASSERT_NEAR(ref.lse[n], truth.lse[n], 1e-12) << "row " << rows[n];
                }
                for (int c = 0; c < p.shape.head_dim; ++c)
                  ASSERT_NEAR(ref.output[n * p.shape.head_dim + c], truth.out[n * p.shape.head_dim + c], 1e-12)
                      << "row " << rows[n] << " column " << c;
              }
              // The brute force's rows, rounded to float, pass verification, logsumexp included.
              const Verification v = verify_attention(p, seed, rows_from(p, truth, rows), {.compare_lse = true});
              EXPECT_TRUE(v.passed) << v.detail;
              EXPECT_LT(v.relative_error, 1e-6);
            }
  EXPECT_EQ(problems, 7 * 3 * 4 * 2 * 2 * 2);
  EXPECT_GT(fully_masked, 0) << "no problem had a row that sees no key";
}

// A ragged batch: each sequence at its own lengths (a bottom-right diagonal per sequence), padding
// rows never checked; lengths 1, 17 and the maximum.
TEST(ReferenceRows, RaggedBatchesMatchBruteForcePerSequence) {
  int problems = 0;
  for (CausalMode mode : {CausalMode::none, CausalMode::top_left, CausalMode::bottom_right})
    for (const AttentionWindow& window : {AttentionWindow{}, AttentionWindow{3, 0}})
      for (bool ragged_q : {false, true}) {
        AttentionProblem p = make_problem({3, 4, 33, 40, 8, 2}, static_cast<DType>(problems % 3), false);
        set_causal_mode(p, mode);
        p.window = window;
        p.shape.seq_lens_kv = {40, 17, 1};
        if (ragged_q) p.shape.seq_lens_q = {1, 17, 33};
        const std::uint64_t seed = 500 + problems++;
        SCOPED_TRACE(describe(p));
        const BruteForce truth = brute_force(p, seed);
        const std::vector<std::int64_t> rows = rows_to_check(p.shape, 1 << 20);
        ASSERT_EQ(static_cast<std::int64_t>(rows.size()), p.shape.total_q() * p.shape.heads);
        const ReferenceRows ref = reference_rows(p, seed, rows);
        for (std::size_t n = 0; n < rows.size(); ++n) {
          ASSERT_EQ(std::isinf(ref.lse[n]), std::isinf(truth.lse[rows[n]])) << "row " << rows[n];
          for (int c = 0; c < 8; ++c) ASSERT_NEAR(ref.output[n * 8 + c], truth.out[rows[n] * 8 + c], 1e-12);
        }
        EXPECT_TRUE(verify_attention(p, seed, rows_from(p, truth, rows), {.compare_lse = true}).passed);
        if (ragged_q) {  // a padding row is refused, not silently checked
          EXPECT_THROW(reference_rows(p, seed, {1}), std::invalid_argument);
        }
      }
}

// A subset spread over several (batch, K/V head) groups: each group's K/V span is the union of
// what its rows see.
TEST(ReferenceRows, ChosenRowsMatchBruteForce) {
  for (bool causal : {false, true})
    for (MaskAlignment alignment : {MaskAlignment::top_left, MaskAlignment::bottom_right}) {
      AttentionProblem p = make_problem({3, 8, 33, 17, 8, 2}, DType::bf16, causal);
      p.alignment = alignment;
      p.window = {5, 2};
      p.has_bias = true;
      SCOPED_TRACE(describe(p));
      const BruteForce truth = brute_force(p, 99);
      const std::vector<std::int64_t> rows = rows_to_check(p.shape, 100);
      ASSERT_EQ(rows.size(), 100u);
      const ReferenceRows ref = reference_rows(p, 99, rows, nullptr, 3);
      for (std::size_t n = 0; n < rows.size(); ++n)
        for (int c = 0; c < 8; ++c) ASSERT_NEAR(ref.output[n * 8 + c], truth.out[rows[n] * 8 + c], 1e-12);
      EXPECT_TRUE(verify_attention(p, 99, rows_from(p, truth, rows)).passed);
    }
}

TEST(ReferenceRows, OneKeyGivesItsValueRow) {
  const AttentionProblem p = make_problem({1, 1, 3, 1, 4});
  const ReferenceRows ref = reference_rows(p, 1234, {2});
  const std::vector<float> q = whole(p, 1234, InputTensor::q), k = whole(p, 1234, InputTensor::k),
                           v = whole(p, 1234, InputTensor::v);
  for (int c = 0; c < 4; ++c) EXPECT_DOUBLE_EQ(ref.output[c], v[c]);
  double dot = 0;
  for (int c = 0; c < 4; ++c) dot += static_cast<double>(q[2 * 4 + c]) * k[c];
  EXPECT_NEAR(ref.lse[0], dot * 0.5, 1e-12);  // scale 1/sqrt(4); a single term: lse is the scaled score
}

TEST(ReferenceRows, CausalRowZeroSeesOnlyKeyZero) {
  const AttentionProblem p = make_problem({1, 1, 4, 4, 8}, DType::fp32, true);
  const ReferenceRows ref = reference_rows(p, 1234, {0});
  const std::vector<float> v = whole(p, 1234, InputTensor::v);
  for (int c = 0; c < 8; ++c) EXPECT_DOUBLE_EQ(ref.output[c], v[c]);
}

TEST(ReferenceRows, EqualScoresAverageTheValues) {
  AttentionProblem p = make_problem({1, 1, 1, 3, 2});
  p.scale = 1e-30f;  // every score 0 to double precision: uniform weights
  const ReferenceRows ref = reference_rows(p, 1234, {0});
  const std::vector<float> v = whole(p, 1234, InputTensor::v);
  for (int c = 0; c < 2; ++c) EXPECT_NEAR(ref.output[c], (v[c] + v[2 + c] + v[4 + c]) / 3.0, 1e-12);
}

TEST(ReferenceRows, RejectsRowsOutOfOrderOrRange) {
  const AttentionProblem p = make_problem({1, 2, 4, 4, 8});
  EXPECT_THROW(reference_rows(p, 1, {3, 2}), std::invalid_argument);
  EXPECT_THROW(reference_rows(p, 1, {1, 1}), std::invalid_argument);
  EXPECT_THROW(reference_rows(p, 1, {8}), std::invalid_argument);
  EXPECT_THROW(reference_rows(p, 1, {-1}), std::invalid_argument);
}

// ---- verification ----

TEST(Verify, CatchesPoisonWrongValuesAndWrongLogsumexp) {
  const AttentionProblem p = make_problem({1, 1, 5, 7, 8}, DType::fp32, true);
  const BruteForce truth = brute_force(p, 5);
  const std::vector<std::int64_t> rows = rows_to_check(p.shape);
  const OutputRows good = rows_from(p, truth, rows);
  EXPECT_TRUE(verify_attention(p, 5, good).passed);

  OutputRows poisoned = good;
  poisoned.output[13] = std::numeric_limits<float>::quiet_NaN();
  const Verification v = verify_attention(p, 5, poisoned);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.non_finite, 1);
  EXPECT_NE(v.detail.find("row 1, column 5"), std::string::npos) << v.detail;

  // The device's scan of the whole output counts what lies outside the checked rows too.
  OutputRows scanned = good;
  scanned.non_finite = 3;
  scanned.first_non_finite = 4 * 8 + 2;
  const Verification s = verify_attention(p, 5, scanned);
  EXPECT_FALSE(s.passed);
  EXPECT_EQ(s.non_finite, 3);
  EXPECT_NE(s.detail.find("row 4, column 2"), std::string::npos) << s.detail;

  OutputRows wrong = good;
  for (float& value : wrong.output) value *= 1.01f;
  EXPECT_FALSE(verify_attention(p, 5, wrong).passed);  // 1% off is far above the fp32 bound

  OutputRows wrong_lse = good;
  wrong_lse.lse[2] += 0.01f;
  EXPECT_TRUE(verify_attention(p, 5, wrong_lse).passed);  // not compared unless asked
  const Verification l = verify_attention(p, 5, wrong_lse, {.compare_lse = true});
  EXPECT_FALSE(l.passed);
  EXPECT_NE(l.detail.find("logsumexp"), std::string::npos) << l.detail;

  OutputRows short_rows = good;
  short_rows.output.pop_back();
  EXPECT_NE(verify_attention(p, 5, short_rows).detail.find("expected"), std::string::npos);
}

TEST(Verify, RowsThatSeeNoKeyMustBeZeroWithALogsumexpOfMinusInfinity) {
  AttentionProblem p = make_problem({1, 2, 9, 4, 8}, DType::bf16, true);
  p.alignment = MaskAlignment::bottom_right;  // rows 0..4 of each head see no key
  const BruteForce truth = brute_force(p, 8);
  const std::vector<std::int64_t> rows = rows_to_check(p.shape);
  OutputRows got = rows_from(p, truth, rows);
  for (std::size_t n = 0; n < rows.size(); ++n)
    if (rows[n] % 9 < 5) got.lse[n] = -std::numeric_limits<float>::infinity();  // the kernels' contract
  const Verification ok = verify_attention(p, 8, got, {.compare_lse = true});
  EXPECT_TRUE(ok.passed) << ok.detail;
  EXPECT_GE(ok.lse_max_abs_error, 0.0);
  // The poison left in place (no logsumexp written) fails, on those rows as on the others.
  OutputRows unwritten = got;
  unwritten.lse[0] = std::numeric_limits<float>::quiet_NaN();
  const Verification poisoned = verify_attention(p, 8, unwritten, {.compare_lse = true});
  EXPECT_FALSE(poisoned.passed);
  EXPECT_NE(poisoned.detail.find("logsumexp"), std::string::npos) << poisoned.detail;

  got.output[9 * 8 + 3] = 1e-3f;  // row 9 = head 1, row 0: sees no key
  const Verification bad = verify_attention(p, 8, got);
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.detail.find("row 9 sees no key"), std::string::npos) << bad.detail;
}

// A NaN logsumexp where a row sees keys (never written) fails; max() would have skipped it.
TEST(Verify, AnUnwrittenLogsumexpFails) {
  const AttentionProblem p = make_problem({1, 2, 64, 64, 32}, DType::fp32, true);
  const BruteForce truth = brute_force(p, 3);
  OutputRows got = rows_from(p, truth, rows_to_check(p.shape));
  for (float& lse : got.lse) lse = std::numeric_limits<float>::quiet_NaN();
  const Verification v = verify_attention(p, 3, got, {.compare_lse = true});
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(std::isinf(v.lse_max_abs_error));
}

// A logsumexp off by 1e-3 (a few keys lost at a sequence's edge do that) fails in bf16 too.
TEST(Verify, TheLogsumexpBoundIsTheKernelsArithmeticNotTheInputRounding) {
  const AttentionProblem p = make_problem({1, 2, 64, 64, 32}, DType::bf16, false);
  const BruteForce truth = brute_force(p, 3);
  OutputRows got = rows_from(p, truth, rows_to_check(p.shape));
  EXPECT_TRUE(verify_attention(p, 3, got, {.compare_lse = true}).passed);
  got.lse[5] += 1e-3f;
  EXPECT_FALSE(verify_attention(p, 3, got, {.compare_lse = true}).passed);
}

// One row 10% off among many right ones: the error over all rows stays under the bound, the
// row's own does not.
TEST(Verify, OneWrongRowFailsThoughTheErrorOverAllRowsPasses) {
  const AttentionProblem p = make_problem({1, 4, 256, 256, 64}, DType::bf16, true);
  const BruteForce truth = brute_force(p, 5);
  OutputRows got = rows_from(p, truth, rows_to_check(p.shape));
  const std::size_t d = 64, wrong = got.rows.size() - 1;  // the last row: sees every key
  for (std::size_t c = 0; c < d; ++c) got.output[wrong * d + c] *= 1.1f;
  const Verification v = verify_attention(p, 5, got);
  EXPECT_LT(v.relative_error, v.bound);
  EXPECT_FALSE(v.passed);
  EXPECT_NEAR(v.worst_row_error, 0.1, 0.01);
  EXPECT_NE(v.detail.find("row " + std::to_string(got.rows[wrong])), std::string::npos) << v.detail;
}

TEST(Verify, RowsToCheckCoverTheEdgesGroupedByKvHead) {
  AttentionShape s{2, 16, 4097, 4097, 64, 4};
  const std::vector<std::int64_t> rows = rows_to_check(s, 1024);
  EXPECT_EQ(rows.size(), 1024u);
  const std::int64_t total = 2LL * 16 * 4097;
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end());
  EXPECT_EQ(rows.front() >= 0, true);
  EXPECT_EQ(rows.back(), total - 1);
  for (std::int64_t r = total - 128; r < total; ++r)  // the last query tile of the last head
    EXPECT_TRUE(std::binary_search(rows.begin(), rows.end(), r)) << r;
  for (std::int64_t r = total - 4097; r < total - 4097 + 64; ++r)  // and its first
    EXPECT_TRUE(std::binary_search(rows.begin(), rows.end(), r)) << r;
  std::set<std::int64_t> groups, heads, tiles;
  for (std::int64_t r : rows) {
    groups.insert(r / 4097 / 4);  // (batch, K/V head): 4 query heads each
    heads.insert(r / 4097);
    tiles.insert(r % 4097 / 128);
  }
  EXPECT_EQ(groups.size(), 8u);  // every one of the 2 x 4 groups: 1024 rows want 16
  EXPECT_EQ(heads.size(), 32u);
  EXPECT_GE(tiles.size(), 30u);

  const AttentionShape big{4, 32, 32768, 32768, 128};
  std::set<std::int64_t> big_groups;
  for (std::int64_t r : rows_to_check(big, 1024)) big_groups.insert(r / 32768);
  EXPECT_EQ(big_groups.size(), 16u);  // 16 of the 128 K/V heads, each regenerated once
  EXPECT_EQ(rows_to_check({1, 1, 10, 10, 8}, 1024).size(), 10u);
  EXPECT_EQ(rows_to_check({1, 1, 10, 10, 8}, 4).size(), 4u);
}

TEST(Verify, HostBytesStayFarBelowTheTensors) {
  AttentionProblem p = make_problem({4, 32, 32768, 32768, 128}, DType::bf16, true);
  const std::uint64_t bytes = verification_host_bytes(p, kDefaultRowsChecked, 32);
  EXPECT_GT(bytes, 2ull * 32768 * 128 * 4);  // at least one K/V head in float
  EXPECT_LT(bytes, 100ull << 20);            // q, k, v alone are 3 GiB
}

TEST(Verify, AnInterruptStopsItEarlyAndSaysSo) {
  const AttentionProblem p = make_problem({1, 1, 16, 16, 8});
  const BruteForce truth = brute_force(p, 3);
  const OutputRows got = rows_from(p, truth, rows_to_check(p.shape));
  std::atomic<bool> stop{true};
  const Verification already = verify_attention(p, 3, got, {.interrupted = &stop});
  EXPECT_TRUE(already.interrupted);
  EXPECT_FALSE(already.passed);
  EXPECT_EQ(already.rows_checked, 0);
  EXPECT_NE(already.detail.find("interrupted after 0 of 16 rows"), std::string::npos) << already.detail;

  // A verification that would take many seconds (1024 rows x 65536 keys x 128) stops within
  // ~100 ms of the flag; the bound here is loose for shared build machines.
  AttentionProblem large = make_problem({1, 2, 1024, 65536, 128}, DType::bf16, false);
  const std::vector<std::int64_t> rows = rows_to_check(large.shape);
  OutputRows zeros;
  zeros.rows = rows;
  zeros.output.assign(rows.size() * 128, 0.f);
  std::atomic<bool> flag{false};
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    flag = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const Verification v = verify_attention(large, 3, zeros, {.interrupted = &flag});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  interrupter.join();
  EXPECT_TRUE(v.interrupted);
  EXPECT_FALSE(v.passed);
  EXPECT_LT(v.rows_checked, static_cast<std::int64_t>(rows.size()));
  EXPECT_LT(seconds, 0.3 + 1.0) << "took " << seconds << " s to stop";
  std::printf("  stopped %.0f ms after the flag, %lld of %zu rows done\n", (seconds - 0.3) * 1e3,
              static_cast<long long>(v.rows_checked), rows.size());
}

}  // namespace
}  // namespace attnprof
