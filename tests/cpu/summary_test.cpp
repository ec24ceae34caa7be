// Aggregation of a case's records into per-iteration counts, the dominant kernel, findings and
// surprises; JSON round trip; rendering.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "flash_hopper/register_budget.hpp"
#include "summary/findings.hpp"
#include "summary/render.hpp"
#include "summary/summary.hpp"
#include "summary/surprises.hpp"
#include "trace/annotate.hpp"

namespace attnprof {
namespace {

using trace::Phase;

trace::KernelActivity kernel(const std::string& name, std::uint64_t start, std::uint64_t dur, Phase phase, int iter,
                             int regs = 32, const std::string& api = "cudaLaunchKernel") {
  trace::KernelActivity k;
  k.name = name;
  k.start_ns = start;
  k.end_ns = start + dur;
  k.block = {128, 1, 1};
  k.grid = {264, 1, 1};
  k.registers_per_thread = regs;
  k.occupancy.valid = true;
  k.occupancy.active_blocks_per_sm = 2;
  k.occupancy.theoretical_percent = 12.5;
  k.occupancy.limiter = "registers";
  k.occupancy.block_limit_registers = 2;
  k.occupancy.block_limit_shared_memory = 3;
  k.occupancy.block_limit_warps = 16;
  k.occupancy.block_limit_blocks = 32;
  k.launch_api = api;
  k.tag = {0, phase, iter};
  return k;
}

// Three timed iterations of a manual-like causal case: gemm, softmax, and a D2D memcpy each;
// warm-up and verify records that must not count.
trace::ActivityBatch manual_like_batch() {
  trace::ActivityBatch b;
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t t = 1000000ull * (i + 1);
    b.kernels.push_back(kernel("gemm_kernel", t, 40000, Phase::iteration, i, 168, "cuLaunchKernelEx"));
    b.kernels.push_back(kernel("softmax_kernel", t + 50000, 10000, Phase::iteration, i));
    b.kernels.push_back(kernel("void tril_kernel(bool const*, bool*, int, int)", t + 60000, 1000, Phase::iteration, i));
    trace::MemcpyActivity m;
    m.kind = trace::MemcpyKind::DtoD;
    m.bytes = 1000;
    m.start_ns = t + 70000;
    m.end_ns = t + 71000;
    m.launch_api = "cudaMemcpyAsync";
    m.tag = {0, Phase::iteration, i};
    b.memcpys.push_back(m);
  }
  b.kernels.push_back(kernel("gemm_kernel", 10, 40000, Phase::warmup, 0));
  b.kernels.push_back(kernel("softmax_kernel", 20, 10000, Phase::verify, -1));
  return b;
}

CaseMeasurements measurements() {
  CaseMeasurements m;
  m.label = "manual:out_of_place bf16 causal 1x1x128x128x64";
  m.backend = "manual:out_of_place";
  m.problem.shape = {1, 1, 128, 128, 64};
  m.problem.causal = true;
  m.iterations = 3;
  m.iteration_us = {60, 50, 70};
  m.verified = true;
  m.verify_passed = true;
  m.relative_error = 2e-3;
  m.error_bound = 1e-2;
  m.plan_cold_ms = 900;
  m.plan_warm_ms = 0.003;
  return m;
}

TEST(Summary, CountsOnlyTimedIterationsExactly) {
  const CaseSummary c = summarize_case(measurements(), manual_like_batch());
  EXPECT_EQ(c.kernels_per_iter, 3.0);
  EXPECT_EQ(c.memcpy_per_iter, 1.0);
  EXPECT_EQ(c.memcpy_bytes_per_iter, 1000.0);
  EXPECT_EQ(c.memset_per_iter, 0.0);
  EXPECT_EQ(c.median_us, 60.0);
  EXPECT_EQ(c.p90_us, 70.0);
  EXPECT_EQ(c.min_us, 50.0);
  EXPECT_NEAR(c.tflops, attention_flops(c.problem) / 60e-6 / 1e12, 1e-9);
  ASSERT_EQ(c.kernels.size(), 3u);
  EXPECT_EQ(c.dominant_kernel()->name, "gemm_kernel");
  EXPECT_EQ(c.dominant_kernel()->per_iter, 1.0);
  EXPECT_DOUBLE_EQ(c.dominant_kernel()->gpu_us_per_iter, 40.0);
  EXPECT_EQ(c.dominant_kernel()->registers_per_thread, 168);
  EXPECT_EQ(c.launch_apis, (std::vector<std::string>{"cuLaunchKernelEx", "cudaLaunchKernel", "cudaMemcpyAsync"}));
}

TEST(Summary, CountsStayExactOverManyIterations) {
  trace::ActivityBatch b;
  for (int i = 0; i < 7; ++i) b.kernels.push_back(kernel("k", 100 * i + 1, 10, Phase::iteration, i));
  CaseMeasurements m = measurements();
  m.iterations = 7;
  EXPECT_EQ(summarize_case(m, b).kernels_per_iter, 1.0);  // not 0.99999...
}

TEST(Summary, MedianAndPercentile) {
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_EQ(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90), 9.0);
  EXPECT_EQ(percentile({5}, 90), 5.0);
}

TEST(Summary, JsonRoundTripKeepsEveryField) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  add_findings(c);
  c.surprises.push_back({"/expect/0", "memcpy_per_iter", "0", "1", "a guess"});
  RunSummary run;
  run.tool_version = "0.1.0";
  run.device = sm90_reference_properties();
  run.capture.dropped_records = 3;
  run.cases.push_back(c);
  const RunSummary back = nlohmann::json(run).get<RunSummary>();
  ASSERT_EQ(back.cases.size(), 1u);
  const CaseSummary& d = back.cases[0];
  EXPECT_EQ(nlohmann::json(d), nlohmann::json(c));
  EXPECT_EQ(back.capture.dropped_records, 3u);
  EXPECT_FALSE(back.capture.complete());
  EXPECT_EQ(back.device.compute_major, 9);
  EXPECT_EQ(back.device.compute_minor, 0);
  EXPECT_EQ(back.device.sm_count, 132);
}

// A kernel that wrote NaN gives a relative error of inf or NaN; the summary stays readable and the
// error stays above the bound.
TEST(Summary, ANonFiniteRelativeErrorSurvivesTheRoundTrip) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  c.status = CaseStatus::failed;
  c.verified = true;
  c.verify_passed = false;
  c.error_bound = 0.02;
  for (const double error : {INFINITY, NAN}) {
    c.relative_error = error;
    RunSummary run;
    run.cases.push_back(c);
    const RunSummary back = nlohmann::json::parse(nlohmann::json(run).dump()).get<RunSummary>();
    ASSERT_EQ(back.cases.size(), 1u);
    EXPECT_EQ(back.cases[0].relative_error, INFINITY);
    EXPECT_EQ(back.cases[0].status, CaseStatus::failed);
  }
}

TEST(Summary, RejectsDocumentsThatAreNotSummaries) {
  EXPECT_THROW(nlohmann::json({{"traceEvents", nlohmann::json::array()}}).get<RunSummary>(), std::runtime_error);
}

TEST(Findings, NameTheMemcpyTheMaskAndTheDriverLaunchAndTheHostCost) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  add_findings(c);
  std::set<std::string> kinds;
  for (const Finding& f : c.findings) kinds.insert(f.kind);
  EXPECT_TRUE(kinds.count("memcpy_in_iteration"));
  EXPECT_TRUE(kinds.count("mask_rebuilt"));
  EXPECT_TRUE(kinds.count("driver_launch"));
  EXPECT_TRUE(kinds.count("host_plan"));
  EXPECT_TRUE(kinds.count("low_occupancy"));
  // A toy size: enqueueing is the table's host column, not a finding.
  EXPECT_FALSE(kinds.count("host_bound"));
  for (const Finding& f : c.findings) {
    if (f.kind == "memcpy_in_iteration") {
      EXPECT_NE(f.message.find("cudaMemcpyAsync"), std::string::npos) << f.message;
      EXPECT_EQ(f.evidence.at("bytes_per_iter"), 1000.0);
      // What is at stake: the copy's own GPU time, of the iteration's.
      EXPECT_EQ(f.stake.basis, StakeBasis::gpu_time);
      EXPECT_TRUE(f.stake.cost);
      EXPECT_EQ(f.stake.bytes, 1000.0);
      ASSERT_GT(c.gpu_busy_us_per_iter, 0);
      EXPECT_NEAR(f.stake.share_percent, 100.0 * f.stake.us / c.gpu_busy_us_per_iter, 1e-9);
      EXPECT_GT(f.stake.us, 0);
    }
    if (f.kind == "host_plan") {
      // 900 ms of host time before a first call whose GPU part takes 60 us.
      EXPECT_EQ(f.stake.basis, StakeBasis::first_call);
      EXPECT_EQ(f.stake.us, 900e3);
      EXPECT_NEAR(f.stake.share_percent, 100.0 * 900e3 / (900e3 + c.median_us), 1e-9);
    }
    if (f.kind == "low_occupancy") {
      EXPECT_FALSE(f.stake.cost);  // a fact about the kernel, weighed by its time
      EXPECT_EQ(f.stake.us, c.dominant_kernel()->gpu_us_per_iter);
    }
    if (f.kind == "mask_rebuilt") {
      EXPECT_NE(f.message.find("tril_kernel per iteration"), std::string::npos) << f.message;
    }
    if (f.kind == "low_occupancy") {
      EXPECT_EQ(f.message.find("price of keeping"), std::string::npos);  // not one fused kernel
    }
  }
}

TEST(Findings, HostTimeAboveTheGpusIsAFindingAtARealisticSize) {
  CaseMeasurements m = measurements();
  m.plan_cold_ms = std::nullopt;
  m.host_enqueue_us_per_iter = 80;  // above the 60 us median
  m.problem.shape = {1, 16, 1024, 1024, 64};  // 4.3 GFLOP dense, 2.1 causal
  ASSERT_TRUE(at_realistic_size(m.problem));
  CaseSummary c = summarize_case(m, manual_like_batch());
  add_findings(c);
  const auto host = std::find_if(c.findings.begin(), c.findings.end(), [](const Finding& f) { return f.kind == "host_bound"; });
  ASSERT_NE(host, c.findings.end());
  EXPECT_EQ(host->stake.basis, StakeBasis::host_time);
  EXPECT_EQ(host->stake.us, 80 - c.median_us);
  EXPECT_NEAR(host->stake.share_percent, 100.0 * (80 - c.median_us) / 80, 1e-9);
}

TEST(Findings, StakesSurviveSummaryJson) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  add_findings(c);
  RunSummary run;
  run.cases = {c};
  const RunSummary back = nlohmann::json(run).get<RunSummary>();
  ASSERT_EQ(back.cases[0].findings.size(), c.findings.size());
  for (std::size_t i = 0; i < c.findings.size(); ++i) {
    const Stake& a = c.findings[i].stake;
    const Stake& b = back.cases[0].findings[i].stake;
    EXPECT_EQ(a.basis, b.basis);
    EXPECT_EQ(a.cost, b.cost);
    EXPECT_EQ(a.us, b.us);
    EXPECT_EQ(a.share_percent, b.share_percent);
    EXPECT_EQ(a.bytes, b.bytes);
  }
  // A summary written before findings had stakes reads them as unweighed.
  nlohmann::json old = run;
  for (nlohmann::json& f : old["cases"][0]["findings"]) f.erase("stake");
  EXPECT_EQ(old.get<RunSummary>().cases[0].findings[0].stake.basis, StakeBasis::none);
}

TEST(Findings, FusedRegisterLimitedKernelIsExplainedAsDesign) {
  trace::ActivityBatch b;
  for (int i = 0; i < 2; ++i) b.kernels.push_back(kernel("void flash_fwd_kernel<Traits>(Params)", 1000 * (i + 1), 500, Phase::iteration, i, 255));
  CaseMeasurements m = measurements();
  m.iterations = 2;
  m.plan_cold_ms = std::nullopt;
  CaseSummary c = summarize_case(m, b);
  add_findings(c);
  ASSERT_EQ(c.findings.size(), 1u);
  EXPECT_EQ(c.findings[0].kind, "low_occupancy");
  EXPECT_NE(c.findings[0].message.find("flash_fwd_kernel: 255 registers x 128 threads"), std::string::npos)
      << c.findings[0].message;
  EXPECT_NE(c.findings[0].message.find("12.5%, limited by registers"), std::string::npos);
  EXPECT_NE(c.findings[0].message.find("price of keeping the score matrix on chip"), std::string::npos);
}

// A forward kernel's two timed launches as CUPTI records them (168 registers, ~161 KB of dynamic
// shared memory as flash:hopper's launch with 128-key tiles at head dim 128 asks), with the
// occupancy the run computes.
CaseSummary fused_case(const std::string& backend, const std::string& kernel_name, int block_threads) {
  trace::ActivityBatch b;
  for (int i = 0; i < 2; ++i) {
    trace::KernelActivity k = kernel(kernel_name, 1000 * (i + 1), 500, Phase::iteration, i, 168);
    k.block = {block_threads, 1, 1};
    k.grid = {8, 16, 4};
    k.dynamic_shared_bytes = 164'936;
    k.shared_optin = true;
    trace::annotate_occupancy(k, sm90_reference_properties());
    b.kernels.push_back(k);
  }
  CaseMeasurements m = measurements();
  m.backend = backend;
  m.label = backend + " bf16 causal 1x1x128x128x64";
  m.iterations = 2;
  m.plan_cold_ms = std::nullopt;
  CaseSummary c = summarize_case(m, b);
  add_findings(c);
  return c;
}

const Finding* finding_of(const CaseSummary& c, const std::string& kind) {
  for (const Finding& f : c.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

constexpr const char* kHopperKernel =
    "void attnprof::kernels::hopper::flash_hopper_fwd_kernel<attnprof::kernels::hopper::HopperTraits<__nv_bfloat16, "
    "128> >(attnprof::kernels::hopper::HopperKernelParams)";

TEST(Findings, HopperKernelsRegisterSplitIsSaidBesideTheLaunchCount) {
  namespace hopper = kernels::hopper;
  const CaseSummary c = fused_case("flash:hopper", kHopperKernel, hopper::kHopperThreads);
  const Finding* f = finding_of(c, "register_reallocation");
  ASSERT_NE(f, nullptr);
  const KernelSummary& k = *c.dominant_kernel();
  ASSERT_TRUE(k.occupancy_valid);
  // The calculator, not the test, says what limits 168 x 384 registers: the launch's count must be among it.
  EXPECT_NE(k.occupancy_limiter.find("registers"), std::string::npos) << k.occupancy_limiter;
  EXPECT_EQ(k.active_blocks_per_sm, 1);
  const std::string& m = f->message;
  EXPECT_NE(m.find("flash_hopper_fwd_kernel: CUPTI reports the launch's 168 registers per thread x 384 threads "
                   "(64512 per block)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(fmt::format("the producer warpgroup ({} threads) runs with {} registers", hopper::kWarpgroupThreads,
                               hopper::kProducerRegisters)),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(fmt::format("each of the {} consumer warpgroups ({} threads each) with {}",
                               hopper::kConsumerWarpgroups, hopper::kWarpgroupThreads, hopper::kConsumerRegisters)),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(fmt::format("1 block/SM, limited by {}) is computed from the launch's count", k.occupancy_limiter)),
            std::string::npos)
      << m;
  ASSERT_GT(hopper::kConsumerRegisters, 168);
  EXPECT_NE(m.find(fmt::format("the consumers compute with {} registers per thread, {} more than the trace's 168",
                               hopper::kConsumerRegisters, hopper::kConsumerRegisters - 168)),
            std::string::npos)
      << m;
  const nlohmann::json& e = f->evidence;
  EXPECT_EQ(e.at("kernel"), kHopperKernel);
  EXPECT_EQ(e.at("registers_per_thread"), 168);
  EXPECT_EQ(e.at("block_threads"), 384);
  EXPECT_EQ(e.at("launch_registers_per_block"), 168 * 384);
  EXPECT_EQ(e.at("producer_threads"), hopper::kWarpgroupThreads);
  EXPECT_EQ(e.at("producer_registers"), hopper::kProducerRegisters);
  EXPECT_EQ(e.at("consumer_warpgroups"), hopper::kConsumerWarpgroups);
  EXPECT_EQ(e.at("consumer_threads"), hopper::kConsumerWarpgroups * hopper::kWarpgroupThreads);
  EXPECT_EQ(e.at("consumer_registers"), hopper::kConsumerRegisters);
  EXPECT_EQ(e.at("split_registers_per_block"),
            hopper::kWarpgroupThreads * (hopper::kProducerRegisters + hopper::kConsumerWarpgroups * hopper::kConsumerRegisters));
  EXPECT_EQ(e.at("active_blocks_per_sm"), 1);
  EXPECT_EQ(e.at("limiter"), k.occupancy_limiter);
  EXPECT_EQ(e.at("theoretical_occupancy_percent"), k.theoretical_occupancy_percent);
  // Its occupancy is said once, here, not also by the generic low-occupancy reading (which would
  // call the launch count's limit the kernel's).
  ASSERT_LT(k.theoretical_occupancy_percent, 25.0);
  EXPECT_EQ(finding_of(c, "low_occupancy"), nullptr);
}

TEST(Findings, NoRegisterReallocationForTheFa2Kernel) {
  // The same launch resources under FA2's kernel name: nothing re-splits its registers.
  const CaseSummary c = fused_case("flash:fa2", "void flash_fwd_kernel<Traits>(Params)", 384);
  EXPECT_EQ(finding_of(c, "register_reallocation"), nullptr);
  EXPECT_NE(finding_of(c, "low_occupancy"), nullptr);
}

TEST(Findings, NoRegisterReallocationForABlockTheHeaderDoesNotDescribe) {
  const CaseSummary c = fused_case("flash:hopper", kHopperKernel, 256);
  ASSERT_FALSE(c.kernels.empty());
  EXPECT_EQ(shorten_name(c.kernels[0].name), kernels::hopper::kHopperKernelName);
  EXPECT_EQ(finding_of(c, "register_reallocation"), nullptr);
  EXPECT_NE(finding_of(c, "low_occupancy"), nullptr);
}

TEST(Findings, ConversionDirectionFromKernelNames) {
  EXPECT_EQ(conversion_direction("void attnprof::kernels::(anonymous namespace)::convert_kernel<__nv_bfloat16, float>(__nv_bfloat16 const*, float*, long)"), "bf16->fp32");
  EXPECT_EQ(conversion_direction("void attnprof::kernels::(anonymous namespace)::convert_kernel<float, __nv_bfloat16>(float const*, __nv_bfloat16*, long)"), "fp32->bf16");
  EXPECT_EQ(conversion_direction("void convert_kernel<__half, float>(__half const*, float*, long)"), "fp16->fp32");
  EXPECT_EQ(conversion_direction("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, float, std::array<char*, 2ul>)"), "bf16->fp32");
  EXPECT_EQ(conversion_direction("void softmax_rows_kernel<float>(float const*, float*, int)"), "");
  EXPECT_EQ(conversion_direction("void scale_kernel<__nv_bfloat16>(__nv_bfloat16 const*, __nv_bfloat16*, float, long)"), "");
}

TEST(Findings, ShortNames) {
  EXPECT_EQ(shorten_name("void attnprof::kernels::(anonymous namespace)::tril_kernel(bool const*, bool*, int, int)"), "tril_kernel");
  EXPECT_EQ(shorten_name("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7"), "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7");
  EXPECT_EQ(shorten_name("void flash::flash_fwd_kernel<Traits<128>, true>(Params)"), "flash_fwd_kernel");
}

Expectation expect_for(const std::string& backend) {
  Expectation e;
  e.backend = backend;
  e.pointer = "/expect/0";
  return e;
}

TEST(Expectations, EveryCheckedFieldCanSurprise) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  Expectation e = expect_for("manual");  // the family matches the variant
  e.kernels_per_iter = 1;
  e.memcpy_per_iter = 0;
  e.memset_per_iter = 0;  // true: no surprise
  e.max_registers = 128;
  e.min_theoretical_occupancy = 25;
  e.max_theoretical_occupancy = 50;  // true: no surprise
  e.launch_api = "cudaLaunchKernel";
  e.note = "guess";
  add_surprises(c, {e});
  std::map<std::string, Surprise> by_field;
  for (const Surprise& s : c.surprises) by_field[s.field] = s;
  EXPECT_EQ(by_field.size(), 5u);
  EXPECT_EQ(by_field.at("kernels_per_iter").observed, "3");
  EXPECT_EQ(by_field.at("memcpy_per_iter").observed, "1");
  EXPECT_EQ(by_field.at("max_registers").observed, "168 (gemm_kernel)");
  EXPECT_EQ(by_field.at("min_theoretical_occupancy").expected, ">= 25%");
  EXPECT_EQ(by_field.at("launch_api").observed, "cuLaunchKernelEx");
  EXPECT_EQ(by_field.at("launch_api").note, "guess");
}

TEST(Expectations, FiltersNarrowWhichCasesAreJudged) {
  const CaseSummary c = summarize_case(measurements(), manual_like_batch());
  EXPECT_TRUE(expectation_applies(expect_for("manual:out_of_place"), c));
  EXPECT_FALSE(expectation_applies(expect_for("manual:in_place"), c));
  EXPECT_FALSE(expectation_applies(expect_for("flash"), c));
  Expectation causal_only = expect_for("manual");
  causal_only.causal = CausalMode::none;
  EXPECT_FALSE(expectation_applies(causal_only, c));
  Expectation dtype = expect_for("manual");
  dtype.dtype = DType::fp16;
  EXPECT_FALSE(expectation_applies(dtype, c));
  Expectation shape = expect_for("manual");
  shape.shape = AttentionShape{1, 1, 128, 128, 64};
  EXPECT_TRUE(expectation_applies(shape, c));
  shape.shape->head_dim = 128;
  EXPECT_FALSE(expectation_applies(shape, c));
}

TEST(Expectations, AShapeWithoutLengthsOrPagesHoldsForRaggedAndPagedCasesOfItsSizes) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  c.problem.shape.page_size = 16;
  c.problem.shape.seq_lens_kv = {128};
  Expectation sizes = expect_for("manual");
  sizes.shape = AttentionShape{1, 1, 128, 128, 64};
  EXPECT_TRUE(expectation_applies(sizes, c));
  Expectation paged = sizes;
  paged.shape->page_size = 16;
  EXPECT_TRUE(expectation_applies(paged, c));
  paged.shape->page_size = 64;
  EXPECT_FALSE(expectation_applies(paged, c));
  Expectation ragged = sizes;
  ragged.shape->seq_lens_kv = {127};
  EXPECT_FALSE(expectation_applies(ragged, c));
  ragged.shape->seq_lens_kv = {128};
  EXPECT_TRUE(expectation_applies(ragged, c));
}

TEST(Expectations, CasesThatDidNotRunAreNotJudged) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  c.status = CaseStatus::skipped;
  Expectation e = expect_for("manual");
  e.kernels_per_iter = 99;
  add_surprises(c, {e});
  EXPECT_TRUE(c.surprises.empty());
}

TEST(Render, EveryFormatNamesTheCases) {
  CaseSummary c = summarize_case(measurements(), manual_like_batch());
  add_findings(c);
  RunSummary run;
  run.device = sm90_reference_properties();
  run.cases = {c};
  for (OutputFormat f : {OutputFormat::table, OutputFormat::md, OutputFormat::csv, OutputFormat::json}) {
    const std::string text = render_summary(run, f);
    EXPECT_NE(text.find("manual:out_of_place bf16 causal 1x1x128x128x64"), std::string::npos) << static_cast<int>(f);
  }
  const std::string csv = render_summary(run, OutputFormat::csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2);
  EXPECT_NE(render_summary(run, OutputFormat::table).find("findings, by what is at stake:"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(render_summary(run, OutputFormat::json)).at("cases").size(), 1u);
}

}  // namespace
}  // namespace attnprof
