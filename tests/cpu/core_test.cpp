// Small pure pieces: 16-bit conversions, FLOP counts and labels, sweep tags, API names. The
// float64 reference and the generated inputs are tested in reference_test.cpp.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "collector/sweep_tags.hpp"
#include "core/half_convert.hpp"
#include "core/types.hpp"

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
  // Exact: row i sees i + 1 keys, so 4096 * 4097 / 2 pairs per head (PyTorch's count halves 4096^2).
  EXPECT_DOUBLE_EQ(attention_flops(p), 4.0 * 2 * 16 * 128 * (4096.0 * 4097 / 2));
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), 4.0 * 2 * 16 * 4096 * 128 * 2);
  EXPECT_EQ(case_label("flash", p), "flash bf16 causal 2x16x4096x4096x128");
  p.has_bias = true;
  p.dtype = DType::fp32;
  EXPECT_EQ(case_label("efficient", p), "efficient fp32 causal bias 2x16x4096x4096x128");
  // q, k, v, o in fp32 and the fp32 [seq_q, seq_kv] bias, read once for the whole batch.
  EXPECT_DOUBLE_EQ(attention_min_bytes(p), 4.0 * 2 * 16 * 4096 * 128 * 4 + 4.0 * 4096 * 4096);
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

}  // namespace
}  // namespace attnprof
