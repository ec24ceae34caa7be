// A backward case's findings from synthetic summaries shaped like the H200's traces (GPU.md,
// "Backward alone"): the fp32 dQ accumulator, P recomputed or materialised, workspace memsets,
// and the run-to-run check's bitwise comparison, its summary.json round trip and its finding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reference/gradients.hpp"
#include "summary/findings.hpp"
#include "summary/summary.hpp"
#include "sweep/plan.hpp"

namespace attnprof {
namespace {

// 2x16x4096x128 bf16, GPU.md's training shape: the fp32 dQ accumulator is 2*16*4096*128*4 =
// 67.1 MB, the score matrix 2*16*4096*4096 = 536.9 M elements (1.07 GB in bf16, 2.15 GB in fp32).
AttentionProblem training_problem(AttentionPass pass = AttentionPass::backward) {
  AttentionProblem p;
  p.shape = {2, 16, 4096, 4096, 128};
  p.dtype = DType::bf16;
  p.pass = pass;
  return p;
}

constexpr double kAccumulatorBytes = 2.0 * 16 * 4096 * 128 * 4;

KernelSummary kernel(const std::string& name, double us, const std::string& api = "cudaLaunchKernel") {
  KernelSummary k;
  k.name = name;
  k.per_iter = 1;
  k.gpu_us_per_iter = us;
  k.launch_api = api;
  return k;
}

// A case as the accumulator leaves it: kernels largest first, the busy time their sum plus the memsets'.
CaseSummary ran(const std::string& backend, const AttentionProblem& p, std::vector<KernelSummary> kernels,
                std::vector<MemoryOpSummary> ops = {}) {
  CaseSummary c;
  c.backend = backend;
  c.problem = p;
  c.label = case_label(backend, p);
  c.iterations = 3;
  c.kernels = std::move(kernels);
  std::stable_sort(c.kernels.begin(), c.kernels.end(),
                   [](const KernelSummary& x, const KernelSummary& y) { return x.gpu_us_per_iter > y.gpu_us_per_iter; });
  for (const KernelSummary& k : c.kernels) {
    c.kernels_per_iter += k.per_iter;
    c.gpu_busy_us_per_iter += k.gpu_us_per_iter;
  }
  c.memory_ops = std::move(ops);
  for (const MemoryOpSummary& op : c.memory_ops) {
    c.gpu_busy_us_per_iter += op.gpu_us_per_iter;
    if (op.what == "memset") {
      c.memset_per_iter += op.per_iter;
      c.memset_bytes_per_iter += op.bytes_per_iter;
    } else {
      c.memcpy_per_iter += op.per_iter;
      c.memcpy_bytes_per_iter += op.bytes_per_iter;
    }
  }
  c.median_us = c.gpu_busy_us_per_iter;
  return c;
}

const Finding* finding(const CaseSummary& c, const std::string& kind) {
  for (const Finding& f : c.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

bool says(const Finding* f, const std::string& text) { return f != nullptr && f->message.find(text) != std::string::npos; }

// Ours (kernels/flash_bwd): dot(dO, O) zeroes the accumulator, dQ by red.global.add, then convert.
CaseSummary flash_backward() {
  return ran("flash", training_problem(),
             {kernel("void attnprof::kernels::flash_bwd_dq_dk_dv_kernel<Traits>(Params)", 500.0),
              kernel("void attnprof::kernels::flash_bwd_dot_do_o_kernel<Traits>(Params)", 10.0),
              kernel("void attnprof::kernels::flash_bwd_convert_dq_kernel<Traits>(Params)", 6.0)});
}

// cuDNN's composite SDPA backward: a memset, dot(dO, O), the bprop kernel, dQ to 16 bits.
CaseSummary cudnn_backward() {
  return ran("cudnn", training_problem(),
             {kernel("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1", 300.0,
                     "cuLaunchKernelEx"),
              kernel("compute_dot_do_o_specialized", 8.0, "cuLaunchKernelEx"),
              kernel("convert_dq_to_16bits", 5.0, "cuLaunchKernelEx")},
             {{"memset", 1, kAccumulatorBytes, 3.0, "cuMemsetD8Async"}});
}

// flash's backward with its stream-K tail (2x16x4096 non-causal on an H200: the main kernel's last
// 100 blocks walked by 132 blocks in equal runs): the tail and its share are said; without the
// tail kernel nothing is.
TEST(BackwardFindings, TheStreamKTailKernelAndItsShare) {
  KernelSummary tail = kernel("void attnprof::kernels::flash_bwd::flash_bwd_dq_dk_dv_tail_kernel<Traits>(Params)", 250.0);
  tail.grid = {132, 1, 1};
  CaseSummary c = ran("flash", training_problem(),
                      {kernel("void attnprof::kernels::flash_bwd_dq_dk_dv_kernel<Traits>(Params)", 500.0), tail,
                       kernel("void attnprof::kernels::flash_bwd_dot_do_o_kernel<Traits>(Params)", 10.0),
                       kernel("void attnprof::kernels::flash_bwd_convert_dq_kernel<Traits>(Params)", 6.0)});
  add_findings(c);
  const Finding* f = finding(c, "stream_k_tail");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "flash_bwd_dq_dk_dv_kernel's last partial wave of blocks runs as flash_bwd_dq_dk_dv_tail_kernel: "
                      "132 blocks (one per SM)"))
      << f->message;
  EXPECT_TRUE(says(f, "the tail takes 250.0 us of 766.0 us per iteration (33%)")) << f->message;
  EXPECT_EQ(f->evidence["tail_blocks"].get<long long>(), 132);
  CaseSummary plain = flash_backward();
  add_findings(plain);
  EXPECT_EQ(finding(plain, "stream_k_tail"), nullptr);
}

TEST(BackwardFindings, FlashsFp32DqAccumulatorZeroedInDotDoOAndConverted) {
  CaseSummary c = flash_backward();
  add_findings(c);
  const Finding* f = finding(c, "dq_fp32_accumulator");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "dQ is accumulated in an fp32 buffer (67.1 MB = 2x16x4096x128 x 4 bytes)")) << f->message;
  EXPECT_TRUE(says(f, "zeroed every call (inside a kernel, most likely flash_bwd_dot_do_o_kernel beside D = rowsum(dO o "
                      "O): no memset or fill in the iteration)"))
      << f->message;
  EXPECT_TRUE(says(f, "converted to bf16 at the end by flash_bwd_convert_dq_kernel: converting it takes 6.0 us of "
                      "516.0 us per iteration (1.2%)"))
      << f->message;
  EXPECT_DOUBLE_EQ(f->evidence["accumulator_bytes"].get<double>(), kAccumulatorBytes);
  EXPECT_EQ(f->evidence["convert_kernels"].size(), 1u);
  EXPECT_DOUBLE_EQ(f->evidence["convert_us_per_iter"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(f->evidence["zeroing_us_per_iter"].get<double>(), 0.0);
  EXPECT_NE(f->evidence["zeroed_in_kernel"].get<std::string>().find("flash_bwd_dot_do_o_kernel"), std::string::npos);
  EXPECT_EQ(finding(c, "workspace_memset"), nullptr);  // no memset in the iteration
  EXPECT_EQ(finding(c, "backward_nondeterministic"), nullptr);  // no run-to-run check ran

  // A conversion kernel whose name spells both types is still the accumulator's, not an upcast of the inputs.
  CaseSummary typed = flash_backward();
  typed.kernels[2].name = "void attnprof::kernels::flash_bwd_convert_dq_kernel<__nv_bfloat16, 128>(float const*)";
  ASSERT_FALSE(conversion_direction(typed.kernels[2].name).empty());
  add_findings(typed);
  EXPECT_EQ(finding(typed, "dtype_conversion"), nullptr);
  EXPECT_NE(finding(typed, "dq_fp32_accumulator"), nullptr);
}

// What the H200 showed: cuDNN 9.14's backward memsets 4 bytes per call, not the 67 MB accumulator.
TEST(BackwardFindings, AMemsetFarSmallerThanTheAccumulatorIsNotItsZeroing) {
  CaseSummary c = cudnn_backward();
  c.memory_ops[0].bytes_per_iter = 4;
  add_findings(c);
  const Finding* f = finding(c, "dq_fp32_accumulator");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "zeroed every call (inside a kernel, most likely compute_dot_do_o_specialized beside D = "
                      "rowsum(dO o O): its 1 memset(s) of 4 B are too small to be it)"))
      << f->message;
  EXPECT_DOUBLE_EQ(f->evidence["zeroing_us_per_iter"].get<double>(), 0.0);
  const Finding* w = finding(c, "workspace_memset");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(says(w, "4 B in all")) << w->message;
  EXPECT_FALSE(says(w, "the size of the fp32 dQ accumulator")) << w->message;
}

TEST(BackwardFindings, CudnnsMemsetIsTheAccumulatorsZeroingAndAWorkspaceMemset) {
  CaseSummary c = cudnn_backward();
  add_findings(c);
  const Finding* f = finding(c, "dq_fp32_accumulator");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "zeroed every call (1 memset(s) of 67.1 MB in all) and converted to bf16 at the end by "
                      "convert_dq_to_16bits: zeroing and converting it take 8.0 us of 316.0 us per iteration (2.5%)"))
      << f->message;
  EXPECT_DOUBLE_EQ(f->evidence["zeroing_us_per_iter"].get<double>(), 3.0);
  const Finding* w = finding(c, "workspace_memset");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(says(w, "1 memset(s) per iteration inside the backward, 67.1 MB in all (3.0 us), issued by "
                      "cuMemsetD8Async: workspace or accumulator zeroing paid on every call, the size of the fp32 dQ "
                      "accumulator (67.1 MB)"))
      << w->message;
  EXPECT_EQ(w->evidence["launch_api"], "cuMemsetD8Async");
  EXPECT_DOUBLE_EQ(w->evidence["bytes_per_iter"].get<double>(), kAccumulatorBytes);
  // The backward's memset is said once, by workspace_memset, not also as a generic memset.
  EXPECT_EQ(finding(c, "memset_in_iteration"), nullptr);

  // A workspace of another size: zeroing paid every call, no claim about what it holds.
  CaseSummary other = cudnn_backward();
  other.memory_ops[0].bytes_per_iter = 4096;
  add_findings(other);
  const Finding* small = finding(other, "workspace_memset");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->message.find("dQ accumulator"), std::string::npos) << small->message;
}

TEST(BackwardFindings, PRecomputedByFusedBackwardsFromTheLogsumexp) {
  for (CaseSummary c : {flash_backward(), cudnn_backward()}) {
    add_findings(c);
    const Finding* f = finding(c, "p_recomputed");
    ASSERT_NE(f, nullptr) << c.label;
    EXPECT_TRUE(says(f, "recomputes P = exp(QK^T * scale - lse) tile by tile from the forward's saved logsumexp "
                        "(0.5 MB)"))
        << f->message;
    EXPECT_TRUE(says(f, "the 2x16x4096x4096 matrix P never reaches memory, 1.07 GB at bf16 (2.15 GB in fp32)"))
        << f->message;
    EXPECT_DOUBLE_EQ(f->evidence["bytes_avoided"].get<double>(), 2.0 * 16 * 4096 * 4096 * 2);
    EXPECT_EQ(f->evidence["kernel"], c.kernels[0].name);
    EXPECT_EQ(finding(c, "scores_materialised"), nullptr);
  }
  CaseSummary flash = flash_backward();
  add_findings(flash);
  EXPECT_TRUE(says(finding(flash, "p_recomputed"), "flash_bwd_dq_dk_dv_kernel recomputes P"));
}

TEST(BackwardFindings, CutlassBsFillBeforeTheFusedKernel) {
  CaseSummary c = ran("efficient", training_problem(),
                      {kernel("fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel)",
                              700.0),
                       kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1>)",
                              20.0)});
  add_findings(c);
  const Finding* f = finding(c, "dq_fp32_accumulator");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "the fused backward zeroes a buffer every call (1 fill kernel(s), vectorized_elementwise_kernel) "
                      "before fmha_cutlassB_bf16_aligned_64x64_k128_sm80"))
      << f->message;
  EXPECT_TRUE(says(f, "the zeroing takes 20.0 us of 720.0 us per iteration (2.8%)")) << f->message;
  EXPECT_NE(finding(c, "p_recomputed"), nullptr);

  // A fused backward with no zeroing step and no conversion: nothing to say about dQ.
  CaseSummary alone = ran("efficient", training_problem(), {kernel("fmha_cutlassB_bf16_aligned_64x64_k128_sm80", 700.0)});
  add_findings(alone);
  EXPECT_EQ(finding(alone, "dq_fp32_accumulator"), nullptr);
  EXPECT_NE(finding(alone, "p_recomputed"), nullptr);
}

TEST(BackwardFindings, MathMaterialisesTheScoreMatricesInFp32) {
  // PyTorch's math backward: inputs upcast, GEMMs (cuBLAS), softmax backward, fills; no fused kernel.
  CaseSummary c = ran("math", training_problem(),
                      {kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1", 900.0),
                       kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x128x32_warpgroupsize1x1x1", 880.0),
                       kernel("void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float>(...)", 400.0),
                       kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(...)", 30.0),
                       kernel("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda, "
                              "c10::BFloat16 -> float>(...)",
                              20.0)});
  add_findings(c);
  const Finding* f = finding(c, "scores_materialised");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "the backward materialises the 2x16x4096x4096 score matrices: 3 GEMM/softmax kernel(s) per "
                      "iteration (2180.0 us) pass P, dP and dS through memory, 2.15 GB each in fp32"))
      << f->message;
  EXPECT_EQ(f->evidence["kernels"].size(), 3u);
  EXPECT_EQ(finding(c, "p_recomputed"), nullptr);
  EXPECT_EQ(finding(c, "dq_fp32_accumulator"), nullptr);  // its fill is no accumulator's: not fused, no convert_dq

  // The hand-written version in bf16 (no upcast): bf16 matrices.
  CaseSummary manual = ran("manual", training_problem(),
                           {kernel("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", 500.0),
                            kernel("softmax_backward_kernel", 200.0)});
  add_findings(manual);
  EXPECT_TRUE(says(finding(manual, "scores_materialised"), "1.07 GB each in bf16"));
}

TEST(BackwardFindings, ForwardCasesKeepTheirFindingsAndGetNoBackwardOnes) {
  CaseSummary c = cudnn_backward();
  c.problem.pass = AttentionPass::forward;
  c.kernels[0].name = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7";
  add_findings(c);
  EXPECT_NE(finding(c, "memset_in_iteration"), nullptr);
  for (const char* kind : {"dq_fp32_accumulator", "workspace_memset", "p_recomputed", "scores_materialised",
                           "backward_nondeterministic"})
    EXPECT_EQ(finding(c, kind), nullptr) << kind;
  // A backward that failed gets no findings at all, as every case that did not run.
  CaseSummary failed = flash_backward();
  failed.status = CaseStatus::failed;
  add_findings(failed);
  EXPECT_TRUE(failed.findings.empty());
}

GradientRepeatability compared(std::int64_t dq, std::int64_t dk, std::int64_t dv) {
  GradientRepeatability r;
  r.checked = true;
  r.elements = {16'777'216, 16'777'216, 16'777'216};
  r.differing = {dq, dk, dv};
  return r;
}

TEST(BackwardFindings, DifferingBitsBetweenTwoRunsAreAFinding) {
  CaseSummary c = flash_backward();
  c.repeatability = compared(1'234'567, 0, 0);
  add_findings(c);
  const Finding* f = finding(c, "backward_nondeterministic");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(says(f, "dQ differs bitwise between two runs of the backward on the same inputs: 1234567 of 50331648 "
                      "elements (dQ 1234567 of 16777216; identical: dK and dV); it accumulates with atomics whose "
                      "order varies from run to run"))
      << f->message;
  EXPECT_EQ(f->evidence["deterministic"], false);
  EXPECT_EQ(f->evidence["differing_elements"], 1'234'567);
  EXPECT_EQ(f->evidence["tensors"]["dQ"]["differing"], 1'234'567);
  EXPECT_EQ(f->evidence["tensors"]["dV"]["differing"], 0);

  CaseSummary all = cudnn_backward();
  all.repeatability = compared(5, 6, 7);
  add_findings(all);
  EXPECT_TRUE(says(finding(all, "backward_nondeterministic"),
                   "dQ, dK and dV differ bitwise between two runs of the backward on the same inputs: 18 of 50331648 "
                   "elements (dQ 5 of 16777216, dK 6 of 16777216 and dV 7 of 16777216)"));

  // Identical bits, or no check (too large, verification off): nothing said.
  CaseSummary same = flash_backward();
  same.repeatability = compared(0, 0, 0);
  add_findings(same);
  EXPECT_EQ(finding(same, "backward_nondeterministic"), nullptr);
  CaseSummary unchecked = flash_backward();
  unchecked.repeatability = GradientRepeatability{};
  unchecked.repeatability->note = "not checked: a copy of dQ, dK and dV does not fit in free device memory";
  add_findings(unchecked);
  EXPECT_EQ(finding(unchecked, "backward_nondeterministic"), nullptr);
}

TEST(BackwardFindings, TheRunToRunCheckRoundTripsThroughSummaryJson) {
  CaseSummary c = flash_backward();
  c.repeatability = compared(1'234'567, 0, 0);
  nlohmann::json j = c;
  EXPECT_EQ(j["verification"]["backward_deterministic"], false);
  EXPECT_EQ(j["verification"]["run_to_run"]["differing"], 1'234'567);
  EXPECT_EQ(j["verification"]["run_to_run"]["elements"], 50'331'648);
  EXPECT_EQ(j["verification"]["run_to_run"]["tensors"]["dQ"]["differing"], 1'234'567);
  CaseSummary back = j.get<CaseSummary>();
  ASSERT_TRUE(back.repeatability.has_value());
  EXPECT_EQ(back.repeatability->differing, c.repeatability->differing);
  EXPECT_EQ(back.repeatability->elements, c.repeatability->elements);
  EXPECT_EQ(nlohmann::json(back), j);

  c.repeatability = compared(0, 0, 0);
  j = c;
  EXPECT_EQ(j["verification"]["backward_deterministic"], true);
  EXPECT_EQ(j.get<CaseSummary>().repeatability->deterministic(), std::optional<bool>(true));

  c.repeatability = GradientRepeatability{};
  c.repeatability->note = "not checked: a copy of dQ, dK and dV does not fit in free device memory";
  j = c;
  EXPECT_TRUE(j["verification"]["backward_deterministic"].is_null());
  EXPECT_EQ(j["verification"]["run_to_run"]["note"], c.repeatability->note);
  back = j.get<CaseSummary>();
  ASSERT_TRUE(back.repeatability.has_value());
  EXPECT_FALSE(back.repeatability->checked);
  EXPECT_EQ(back.repeatability->note, c.repeatability->note);

  // A forward (or an unverified backward) carries neither key, and reads back without one.
  c.repeatability.reset();
  j = c;
  EXPECT_FALSE(j["verification"].contains("backward_deterministic"));
  EXPECT_FALSE(j["verification"].contains("run_to_run"));
  EXPECT_FALSE(j.get<CaseSummary>().repeatability.has_value());
}

TEST(BackwardFindings, MemoryOpTimeRoundTripsThroughSummaryJson) {
  const CaseSummary c = cudnn_backward();
  const nlohmann::json j = c;
  EXPECT_EQ(j["memory_ops"][0]["gpu_us_per_iter"], 3.0);
  EXPECT_DOUBLE_EQ(j.get<CaseSummary>().memory_ops[0].gpu_us_per_iter, 3.0);
  nlohmann::json old = j;  // summaries written before the field: 0
  old["memory_ops"][0].erase("gpu_us_per_iter");
  EXPECT_EQ(old.get<CaseSummary>().memory_ops[0].gpu_us_per_iter, 0.0);
}

TEST(RunToRun, BitwiseDifferencesCountElementsNotBytes) {
  std::vector<std::uint16_t> a(10'000, 0x3f80), b = a;  // bf16 1.0
  EXPECT_EQ(count_bitwise_differences(a.data(), b.data(), 10'000, 2), 0);
  b[0] = 0x3f81;     // one ulp
  b[4095] = 0x3f00;  // the last element of the first block
  b[4096] = 0xbf80;  // the first of the second
  b[9999] ^= 0x0101;  // two bytes of one element: still one element
  EXPECT_EQ(count_bitwise_differences(a.data(), b.data(), 10'000, 2), 4);
  EXPECT_EQ(count_bitwise_differences(a.data(), b.data(), 4095, 2), 1);  // a prefix only
  // +0 and -0 are different bits; a NaN equals itself bit for bit.
  std::vector<float> x = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  std::vector<float> y = {-0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  EXPECT_EQ(count_bitwise_differences(x.data(), y.data(), 3, 4), 1);
  EXPECT_EQ(count_bitwise_differences(x.data(), y.data(), 0, 4), 0);
  EXPECT_THROW(count_bitwise_differences(x.data(), y.data(), 3, 0), std::invalid_argument);
}

}  // namespace
}  // namespace attnprof
