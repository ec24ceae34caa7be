// Small pure pieces: 16-bit conversions, FLOP counts and labels, sweep tags, API names, and the
// float64 reference on problems whose answer is known by hand.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "collector/sweep_tags.hpp"
#include "core/half_convert.hpp"
#include "core/types.hpp"
#include "runner/reference.hpp"

namespace attnprof {
namespace {

TEST(HalfConvert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(bf16_bits_to_float(0xc040), -3.0f);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_bits_to_float(float_to_bf16_bits(INFINITY)), INFINITY);
}

TEST(HalfConvert, Fp16RoundTripsEveryFiniteValue) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = fp16_bits_to_float(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_fp16_bits(f), h) << std::hex << bits;
  }
}

TEST(HalfConvert, Fp16RoundsToNearestEvenIncludingSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_fp16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(float_to_fp16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000);             // half the smallest subnormal: tie -> 0
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xc000);
}

TEST(Types, FlopsBytesAndLabels) {
  AttentionProblem p;
  p.shape = {2, 16, 4096, 4096, 128};
  EXPECT_DOUBLE_EQ(attention_flops(p), 4.0 * 2 * 16 * 4096.0 * 4096 * 128);
  p.causal = true;
  EXPECT_DOUBLE_EQ(attention_flops(p), 2.0 * 2 * 16 * 4096.0 * 4096 * 128);
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), 4.0 * 2 * 16 * 4096 * 128 * 2);
  EXPECT_EQ(case_label("flash", p), "flash bf16 causal 2x16x4096x4096x128");
  p.has_bias = true;
  p.dtype = DType::fp32;
  EXPECT_EQ(case_label("efficient", p), "efficient fp32 causal bias 2x16x4096x4096x128");
  EXPECT_FLOAT_EQ(p.softmax_scale(), 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(parse_dtype("fp16"), DType::fp16);
  EXPECT_FALSE(parse_dtype("float16").has_value());
}

TEST(SweepTags, RoundTripThroughTheExternalId) {
  for (const trace::SweepTag& tag : {trace::SweepTag{0, trace::Phase::iteration, 0}, trace::SweepTag{41, trace::Phase::warmup, -1},
                                     trace::SweepTag{-1, trace::Phase::none, -1}, trace::SweepTag{7, trace::Phase::plan, 1},
                                     trace::SweepTag{100000, trace::Phase::iteration, 99999}}) {
    const trace::SweepTag back = decode_tag(encode_tag(tag));
    EXPECT_EQ(back.case_index, tag.case_index);
    EXPECT_EQ(back.phase, tag.phase);
    EXPECT_EQ(back.iteration, tag.iteration);
  }
}

TEST(SweepTags, ApiNamesAndDemangling) {
  EXPECT_EQ(strip_api_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(strip_api_version("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(strip_api_version("cuLaunchKernelEx"), "cuLaunchKernelEx");
  EXPECT_EQ(strip_api_version("cuMemcpyDtoD_v2"), "cuMemcpyDtoD");
  EXPECT_EQ(strip_api_version("cudaMemcpy_v3020"), "cudaMemcpy");
  EXPECT_EQ(demangle("_Z6kernelPfi"), "kernel(float*, int)");
  EXPECT_EQ(demangle("flash_fwd_kernel"), "flash_fwd_kernel");
  EXPECT_EQ(demangle(nullptr), "<unnamed>");
}

HostInputs tiny_inputs(int seq_q, int seq_kv, int d, bool causal) {
  AttentionProblem p;
  p.shape = {1, 1, seq_q, seq_kv, d};
  p.dtype = DType::fp32;
  p.causal = causal;
  return make_host_inputs(p, 1234);
}

TEST(Reference, OneKeyGivesItsValueRow) {
  const HostInputs in = tiny_inputs(3, 1, 4, false);
  std::vector<double> out;
  double lse = 0;
  reference_row(in, 0, 0, 2, out, &lse);
  for (int c = 0; c < 4; ++c) EXPECT_DOUBLE_EQ(out[c], in.v[c]);
  double dot = 0;
  for (int c = 0; c < 4; ++c) dot += static_cast<double>(in.q[2 * 4 + c]) * in.k[c];
  EXPECT_NEAR(lse, dot * 0.5, 1e-12);  // scale 1/sqrt(4); a single term: lse is the scaled score
}

TEST(Reference, CausalRowZeroSeesOnlyKeyZero) {
  const HostInputs in = tiny_inputs(4, 4, 8, true);
  std::vector<double> out;
  reference_row(in, 0, 0, 0, out);
  for (int c = 0; c < 8; ++c) EXPECT_DOUBLE_EQ(out[c], in.v[c]);
}

TEST(Reference, EqualScoresAverageTheValues) {
  HostInputs in = tiny_inputs(1, 3, 2, false);
  std::fill(in.q.begin(), in.q.end(), 0.f);  // every score 0: uniform weights
  std::vector<double> out;
  reference_row(in, 0, 0, 0, out);
  for (int c = 0; c < 2; ++c) EXPECT_NEAR(out[c], (in.v[c] + in.v[2 + c] + in.v[4 + c]) / 3.0, 1e-12);
}

TEST(Reference, VerifyCatchesPoisonAndWrongValues) {
  const HostInputs in = tiny_inputs(5, 7, 8, true);
  std::vector<float> good(5 * 8);
  std::vector<double> row;
  for (int i = 0; i < 5; ++i) {
    reference_row(in, 0, 0, i, row);
    for (int c = 0; c < 8; ++c) good[i * 8 + c] = static_cast<float>(row[c]);
  }
  EXPECT_TRUE(verify_attention(in, good).passed);
  std::vector<float> poisoned = good;
  poisoned[13] = std::numeric_limits<float>::quiet_NaN();
  const Verification p = verify_attention(in, poisoned);
  EXPECT_FALSE(p.passed);
  EXPECT_EQ(p.non_finite, 1);
  EXPECT_NE(p.detail.find("row 1, column 5"), std::string::npos) << p.detail;
  std::vector<float> wrong = good;
  for (float& v : wrong) v *= 1.01f;
  EXPECT_FALSE(verify_attention(in, wrong).passed);  // 1% off is far above the fp32 bound
}

TEST(Reference, RowsToCheckCoverTheTailAndStayInRange) {
  const AttentionShape s{2, 16, 4097, 4097, 64};
  const std::vector<std::int64_t> rows = rows_to_check(s, 1024);
  EXPECT_EQ(rows.size(), 1024u);
  const std::int64_t total = 2LL * 16 * 4097;
  EXPECT_EQ(rows.back(), total - 1);
  for (std::int64_t r : rows) {
    EXPECT_GE(r, 0);
    EXPECT_LT(r, total);
  }
  EXPECT_EQ(rows_to_check({1, 1, 10, 10, 8}, 1024).size(), 10u);
}

}  // namespace
}  // namespace attnprof
