// The device's roofs, each case under them, the findings only the device explains (bound and
// gap, idle SMs), the findings of grouped heads and dense masked GEMMs, `check`'s throughput
// gate, and the host memory a case may take.
#include <array>

#include <gtest/gtest.h>

#include "check/check.hpp"
#include "core/host_memory.hpp"
#include "core/roofline.hpp"
#include "summary/findings.hpp"
#include "summary/roofline.hpp"

namespace attnprof {
namespace {

DeviceProperties h200() {
  DeviceProperties d = sm90_reference_properties();
  d.clock_rate_khz = 1980000;
  d.memory_clock_rate_khz = 3201000;
  d.memory_bus_width_bits = 6016;
  return d;
}

const Finding* finding(const CaseSummary& c, const std::string& kind) {
  for (const Finding& f : c.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

TEST(Roofs, FromTheDevicesSmsClocksAndBus) {
  const std::optional<Roofs> r = roofs_from_device(h200());
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(r->tensor_tflops, 132 * 1.98e9 * 4096 / 1e12, 1e-9);  // 1070.5
  EXPECT_NEAR(r->fp32_tflops, 132 * 1.98e9 * 256 / 1e12, 1e-9);
  EXPECT_NEAR(r->gbps, 2 * 3.201e9 * 6016 / 8 / 1e9, 1e-9);  // 4814
  EXPECT_NE(r->source.find("132 SMs"), std::string::npos) << r->source;
  DeviceProperties unknown = h200();
  unknown.compute_major = 12;  // an architecture the table does not know: no roofs, not wrong ones
  EXPECT_FALSE(roofs_from_device(unknown).has_value());
  DeviceProperties no_clock = h200();
  no_clock.clock_rate_khz = 0;
  EXPECT_FALSE(roofs_from_device(no_clock).has_value());
}

TEST(Roofs, ACaseIsBoundByTheLowerRoofAtItsIntensity) {
  const Roofs roofs = *roofs_from_device(h200());
  AttentionProblem prefill;  // 1x32/8x8192x8192x128 causal: ~6500 FLOP/byte, far above the ridge
  prefill.shape = {1, 32, 8192, 8192, 128, 8};
  prefill.causal = true;
  const RooflinePoint p = roofline_point(prefill, 1622.5, roofs);
  EXPECT_EQ(p.bound, "compute");
  EXPECT_NEAR(p.tflops, attention_flops(prefill) / 1622.5e-6 / 1e12, 1e-9);
  EXPECT_NEAR(*p.compute_percent, 100 * p.tflops / roofs.tensor_tflops, 1e-9);
  EXPECT_DOUBLE_EQ(*p.roof_percent, *p.compute_percent);
  AttentionProblem decode;  // one query token against 32k cached keys: ~1 FLOP/byte
  decode.shape = {8, 32, 1, 32768, 128, 8};
  const RooflinePoint q = roofline_point(decode, 300.0, roofs);
  EXPECT_EQ(q.bound, "memory");
  EXPECT_NEAR(q.gbps, attention_min_bytes(decode) / 300e-6 / 1e9, 1e-9);
  EXPECT_NEAR(*q.roof_percent, *q.bandwidth_percent, 1e-9);  // under the bandwidth roof, the same share
}

RunSummary one_case_summary(CaseSummary c) {
  RunSummary s;
  s.device = h200();
  s.cases = {std::move(c)};
  return s;
}

CaseSummary ran(const AttentionProblem& p, double median_us) {
  CaseSummary c;
  c.label = case_label("flash", p);
  c.backend = "flash";
  c.problem = p;
  c.median_us = median_us;
  c.iterations = 3;
  return c;
}

TEST(Roofline, PlacesEveryCaseAndSaysWhichRoofAndHowFar) {
  AttentionProblem p;
  p.shape = {1, 32, 8192, 8192, 128, 8};
  p.causal = true;
  RunSummary s = one_case_summary(ran(p, 1622.5));
  place_on_roofline(s);
  ASSERT_TRUE(s.roofs.has_value());
  // Which roof and how far are the table's bound and roof columns, not a finding.
  EXPECT_EQ(s.cases[0].roofline.bound, "compute");
  ASSERT_TRUE(s.cases[0].roofline.roof_percent.has_value());
  EXPECT_GT(*s.cases[0].roofline.roof_percent, 0);
  EXPECT_EQ(finding(s.cases[0], "roofline"), nullptr);
  // A summary written when it was a finding loses it when analysed again.
  s.cases[0].findings.push_back({"roofline", "compute-bound", {}});
  place_on_roofline(s);
  EXPECT_EQ(finding(s.cases[0], "roofline"), nullptr);
}

KernelSummary kernel(const char* name, double us, std::array<int, 3> grid = {1, 1, 1}) {
  KernelSummary k;
  k.name = name;
  k.per_iter = 1;
  k.gpu_us_per_iter = us;
  k.grid = grid;
  return k;
}

// k with its occupancy known: blocks_per_sm of its blocks fit on an SM.
KernelSummary resident(KernelSummary k, int blocks_per_sm) {
  k.occupancy_valid = true;
  k.active_blocks_per_sm = blocks_per_sm;
  return k;
}

TEST(Roofline, AGridOfFewerThanHalfTheSmsAtARealisticSizeLeavesThemIdle) {
  AttentionProblem p;
  p.shape = {1, 2, 4096, 4096, 64};  // 8.6 GFLOP
  ASSERT_TRUE(at_realistic_size(p));
  CaseSummary c = ran(p, 300);
  c.kernels = {resident(kernel("flash_fwd_kernel", 300, {2, 2, 1}), 2)};
  RunSummary s = one_case_summary(c);
  place_on_roofline(s);
  const Finding* f = finding(s.cases[0], "idle_sms");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->message,
            "flash_fwd_kernel: 4 blocks on 132 SMs: one partial wave, 128 SMs (97%) idle for the whole kernel");
  // The stake: the idle SMs' share of the kernel's time, of the case's GPU time.
  EXPECT_EQ(f->stake.basis, StakeBasis::gpu_time);
  EXPECT_TRUE(f->stake.cost);
  EXPECT_NEAR(f->stake.share_percent, 100.0 * 128 / 132, 1e-9);
  const IdleSms idle = idle_sms_of(s.cases[0], s.device);
  EXPECT_EQ(idle.last_wave_idle, 130);  // 4 blocks, two per SM: 2 SMs busy
  s.cases[0].kernels[0].grid = {264, 1, 1};  // two blocks on every SM: one full wave
  place_on_roofline(s);
  EXPECT_EQ(finding(s.cases[0], "idle_sms"), nullptr);
  EXPECT_EQ(idle_sms_of(s.cases[0], s.device).last_wave_idle, 0);
  s.cases[0].kernels[0].grid = {100, 1, 1};  // more than half the SMs: the column says it, no finding
  place_on_roofline(s);
  EXPECT_EQ(finding(s.cases[0], "idle_sms"), nullptr);
  EXPECT_EQ(idle_sms_of(s.cases[0], s.device).last_wave_idle, 82);
}

TEST(Roofline, IdleSmsAtAToySizeAreAColumnNotAFinding) {
  AttentionProblem p;
  p.shape = {1, 2, 256, 256, 64};
  ASSERT_FALSE(at_realistic_size(p));
  CaseSummary c = ran(p, 14.5);
  c.kernels = {resident(kernel("flash_fwd_kernel", 10, {2, 2, 1}), 2)};
  RunSummary s = one_case_summary(c);
  place_on_roofline(s);
  EXPECT_EQ(finding(s.cases[0], "idle_sms"), nullptr);
  EXPECT_EQ(idle_sms_of(s.cases[0], s.device).last_wave_idle, 130);
}

// A memory-bound grid of fewer than half the SMs: a finding far from the bandwidth roof, none
// near it, where DRAM, not the idle SMs, bounds the case.
TEST(Roofline, IdleSmsOfAMemoryBoundCaseNearTheBandwidthRoof) {
  AttentionProblem p;  // 6 x 32/8 x 1 x 16384 x 128 decode: 48 blocks (two per sequence and K/V head)
  p.shape = {6, 32, 1, 16384, 128, 8};
  ASSERT_TRUE(at_realistic_size(p));
  const double roof_gbps = roofs_from_device(h200())->gbps;
  auto idle = [&](double percent_of_roof) {
    const double us = attention_min_bytes(p) / (percent_of_roof / 100 * roof_gbps * 1e9) * 1e6;
    CaseSummary c = ran(p, us);
    c.kernels = {resident(kernel("flash_decode_kernel", us, {2, 4, 6}), 2)};
    RunSummary s = one_case_summary(c);
    place_on_roofline(s);
    const Finding* f = finding(s.cases[0], "idle_sms");
    return f == nullptr ? std::string() : f->message;
  };
  EXPECT_EQ(idle(87), "");
  EXPECT_EQ(idle(73), "flash_decode_kernel: 48 blocks on 132 SMs: one partial wave, 84 SMs (64%) idle for the whole kernel");
}

// Many waves: said for one block per SM in a compute-bound case without a mask band (what was
// measured to cost a whole wave), with the empty slots' share of the SMs' time.
TEST(Roofline, APartialLastWaveOfEqualBlocksIdlesItsEmptySlots) {
  AttentionProblem p;
  p.shape = {2, 16, 4096, 4096, 128};
  p.pass = AttentionPass::backward;
  auto idle = [&](const AttentionProblem& problem, std::array<int, 3> grid, int blocks_per_sm) {
    CaseSummary c = ran(problem, 3150.0);
    c.kernels = {resident(kernel("void attnprof::kernels::flash_bwd::efficient_bwd_fused_kernel<Traits>(Params)", 3150.0,
                                 grid),
                          blocks_per_sm)};
    RunSummary s = one_case_summary(c);
    place_on_roofline(s);
    const Finding* f = finding(s.cases[0], "idle_sms");
    return f == nullptr ? std::string() : f->message;
  };
  EXPECT_EQ(idle(p, {32, 16, 2}, 1),
            "efficient_bwd_fused_kernel: 1024 blocks in 7.76 waves of 132 (one block per SM): blocks of equal work take "
            "about as long in a partial last wave as in a full one, so its 32 empty slots idle 3.0% of the SMs' time");
  EXPECT_EQ(idle(p, {33, 16, 2}, 1), "");  // 1056 blocks: eight whole waves
  EXPECT_EQ(idle(p, {32, 16, 2}, 2), "");  // two blocks per SM: not what was measured
  AttentionProblem causal = p;
  causal.causal = true;  // blocks of unequal work
  EXPECT_EQ(idle(causal, {32, 16, 2}, 1), "");
}

// A last partial wave (320 blocks: 2.42 waves of 132) is idle SMs, unless a stream-K tail kernel
// walks it: the main grid then counts blocks that leave at once.
TEST(Roofline, NoIdleLastWaveWhereATailKernelWalksIt) {
  AttentionProblem p;
  p.shape = {1, 5, 8192, 8192, 128};
  p.pass = AttentionPass::backward;
  CaseSummary c = ran(p, 7000.0);
  c.kernels = {resident(kernel("void attnprof::kernels::flash_bwd::flash_bwd_dq_dk_dv_kernel<Traits>(Params)", 6000.0,
                               {64, 5, 1}),
                        1)};
  RunSummary s = one_case_summary(c);
  place_on_roofline(s);
  ASSERT_NE(finding(s.cases[0], "idle_sms"), nullptr);
  s.cases[0].kernels.push_back(resident(
      kernel("void attnprof::kernels::flash_bwd::flash_bwd_dq_dk_dv_tail_kernel<Traits>(Params)", 900.0, {132, 1, 1}), 1));
  s.cases[0].findings.clear();
  place_on_roofline(s);
  EXPECT_EQ(finding(s.cases[0], "idle_sms"), nullptr);
}

TEST(Findings, KvRepeatedForGroupedHeadsAndFlopsOutsideTheMask) {
  AttentionProblem p;
  p.shape = {1, 32, 2048, 2048, 128, 8};
  p.causal = true;
  CaseSummary c = ran(p, 3015.8);
  c.backend = "math";
  for (const char* name : {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_kernel",
                           "void attnprof::kernels::(anonymous namespace)::repeat_interleave_kernel<float>(...)"}) {
    KernelSummary k;
    k.name = name;
    k.per_iter = 1;
    k.gpu_us_per_iter = 13.0;
    c.kernels.push_back(k);
  }
  add_findings(c);
  const Finding* kv = finding(c, "kv_materialised");
  ASSERT_NE(kv, nullptr);
  EXPECT_NE(kv->message.find("K and V are repeated from 8 into 32 heads every call"), std::string::npos) << kv->message;
  const Finding* dense = finding(c, "flops_outside_mask");
  ASSERT_NE(dense, nullptr);
  EXPECT_NE(dense->message.find("50% of the FLOPs"), std::string::npos) << dense->message;
  // A fused kernel skips the masked tiles: no GEMM, no finding; MHA: no repeat to find.
  CaseSummary fused = ran(p, 159.0);
  fused.problem.shape.heads_kv = 32;
  KernelSummary flash;
  flash.name = "flash_fwd_kernel";
  flash.per_iter = 1;
  fused.kernels = {flash};
  add_findings(fused);
  EXPECT_EQ(finding(fused, "flops_outside_mask"), nullptr);
  EXPECT_EQ(finding(fused, "kv_materialised"), nullptr);
}

TEST(Findings, PaddingOfARaggedBatchAndPagesGatheredBeforeAttention) {
  AttentionProblem p;
  p.shape = {4, 32, 8192, 8192, 128, 8};
  p.shape.seq_lens_q = p.shape.seq_lens_kv = {8192, 4096, 2048, 2048};
  p.shape.page_size = 64;
  CaseSummary c = ran(p, 9000.0);
  c.backend = "manual:in_place";
  c.kernels = {kernel("void attnprof::kernels::pad_ragged_kernel<__nv_bfloat16>(...)", 30.0),
               kernel("void attnprof::kernels::unpad_ragged_kernel<__nv_bfloat16>(...)", 10.0),
               kernel("void attnprof::kernels::gather_paged_kv_kernel<__nv_bfloat16>(...)", 50.0),
               kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel", 4000.0)};
  add_findings(c);
  const Finding* padded = finding(c, "padded_batch");
  ASSERT_NE(padded, nullptr);
  // Useful: 8192^2 + 4096^2 + 2 x 2048^2 = 88 Mi pairs of 4 x 8192^2 = 256 Mi: 65.625% is padding.
  EXPECT_NE(padded->message.find("2 pad/unpad kernel(s) per iteration, 40.0 us"), std::string::npos) << padded->message;
  EXPECT_NE(padded->message.find("66% of the attention FLOPs go to padding"), std::string::npos) << padded->message;
  EXPECT_NEAR(padded->evidence["padding_percent"].get<double>(), 65.625, 1e-9);
  const Finding* pages = finding(c, "pages_gathered");
  ASSERT_NE(pages, nullptr);
  // K and V of 4 x 8 heads x 8192 x 128 bf16: 2 x 67.1 MB.
  EXPECT_NE(pages->message.find("1 kernel(s) per iteration writing 134.2 MB (50.0 us)"), std::string::npos)
      << pages->message;
  // A packed, paged kernel: nothing to say.
  CaseSummary fused = ran(p, 2000.0);
  fused.kernels = {kernel("flash_fwd_kernel", 2000.0)};
  add_findings(fused);
  EXPECT_EQ(finding(fused, "padded_batch"), nullptr);
  EXPECT_EQ(finding(fused, "pages_gathered"), nullptr);
}

TEST(Findings, TheSplitKvCombineShareOfADecode) {
  AttentionProblem p;
  p.shape = {1, 32, 1, 131072, 128, 8};
  set_causal_mode(p, CausalMode::bottom_right);
  CaseSummary c = ran(p, 80.0);
  c.kernels = {kernel("void attnprof::kernels::decode::flash_decode_splitkv_kernel<...>(...)", 72.0, {16, 8, 1}),
               kernel("void attnprof::kernels::decode::flash_decode_combine_kernel<...>(...)", 8.0, {8, 1, 1})};
  c.gpu_busy_us_per_iter = 80.0;
  add_findings(c);
  const Finding* split = finding(c, "split_kv_combine");
  ASSERT_NE(split, nullptr);
  EXPECT_NE(split->message.find("over 16 blocks (grid.x)"), std::string::npos) << split->message;
  EXPECT_NE(split->message.find("the combine takes 8.0 us of 80.0 us per iteration (10%)"), std::string::npos)
      << split->message;
  CaseSummary unsplit = ran(p, 80.0);
  unsplit.kernels = {kernel("flash_decode_kernel", 80.0, {1, 8, 64})};
  add_findings(unsplit);
  EXPECT_EQ(finding(unsplit, "split_kv_combine"), nullptr);
}

TEST(Check, ThroughputGatesOnTflopsOrOnGbpsWhenMemoryBound) {
  auto summary_with = [](double tflops, double gbps, const char* bound) {
    CaseSummary c;
    c.label = "flash bf16 causal 1x32/8x8192x8192x128";
    c.backend = "flash";
    c.status = CaseStatus::ok;
    c.tflops = tflops;
    c.roofline.tflops = tflops;
    c.roofline.gbps = gbps;
    c.roofline.bound = bound;
    RunSummary s;
    s.cases = {c};
    return s;
  };
  CheckOptions options;
  options.throughput_tolerance_percent = 5;
  EXPECT_TRUE(compare_summaries(summary_with(340, 200, "compute"), summary_with(330, 200, "compute"), options).passed());
  EXPECT_FALSE(compare_summaries(summary_with(340, 200, "compute"), summary_with(300, 200, "compute"), options).passed());
  // Memory-bound: GB/s is what counts.
  EXPECT_FALSE(compare_summaries(summary_with(1, 4000, "memory"), summary_with(1, 3000, "memory"), options).passed());
  EXPECT_TRUE(compare_summaries(summary_with(1, 4000, "memory"), summary_with(0.5, 3990, "memory"), options).passed());
  options.throughput_tolerance_percent.reset();  // not asked: no gate
  EXPECT_TRUE(compare_summaries(summary_with(340, 200, "compute"), summary_with(100, 200, "compute"), options).passed());
}

TEST(HostMemory, MemAvailableIsReadFromMeminfo) {
  EXPECT_EQ(parse_mem_available("MemTotal:       131072000 kB\nMemFree:  1000 kB\nMemAvailable:   65536000 kB\n"),
            std::uint64_t{65536000} * 1024);
  EXPECT_FALSE(parse_mem_available("MemTotal: 1 kB\n").has_value());
  EXPECT_FALSE(parse_mem_available("MemAvailable: lots\n").has_value());
}

}  // namespace
}  // namespace attnprof
