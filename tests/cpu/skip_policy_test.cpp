// The GPU suites' skip and refusal policies, without a GPU: which skip messages carry a listed
// reason (support/skip_reasons.hpp), how a missing GPU is told apart (core/gpu_availability.hpp),
// and when a backend's refusal is accepted (support/refusal_policy.hpp), on the backends' own words.
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "core/gpu_availability.hpp"
#include "support/refusal_policy.hpp"
#include "support/skip_reasons.hpp"

namespace attnprof::test {
namespace {

TEST(SkipReasons, EveryListedReasonIsFoundInItsOwnMessage) {
  for (const SkipReasonText& r : kSkipReasons) {
    const std::string message = skip_message(r.reason, "some detail");
    EXPECT_EQ(listed_skip_reason(message), r.reason) << message;
    EXPECT_NE(message.find(r.text), std::string::npos) << message;
  }
}

TEST(SkipReasons, ABareOrUnknownSkipCarriesNoReason) {
  EXPECT_FALSE(listed_skip_reason("").has_value());
  EXPECT_FALSE(listed_skip_reason("needs compute capability 9.0").has_value());  // words alone are not a tag
  EXPECT_FALSE(listed_skip_reason("[skip: because_i_said_so] no").has_value());
  EXPECT_FALSE(listed_skip_reason("[skip: needs_newer_cudnn").has_value());
}

TEST(SkipReasons, TallyCountsListedSkipsAndNamesTheOthers) {
  SkipTally tally;
  EXPECT_EQ(tally.summary_line(), "skipped with reason: 0");
  tally.record("A.one", skip_message(SkipReason::needs_compute_capability, "sm_80"));
  tally.record("A.two", skip_message(SkipReason::needs_compute_capability, "sm_86"));
  tally.record("B.three", skip_message(SkipReason::counters_unavailable, ""));
  tally.record("C.four", "the backend said no");
  EXPECT_EQ(tally.listed(), 3);
  EXPECT_EQ(tally.summary_line(),
            "skipped with reason: 3 (needs a compute capability this GPU lacks: 2; range profiler counters not "
            "available on this device: 1)");
  ASSERT_EQ(tally.unlisted().size(), 1u);
  EXPECT_EQ(tally.unlisted()[0], "C.four: the backend said no");
}

// ---------------------------------------------------------------------------------------------
// No GPU, told apart.

GpuFacts facts(bool libcuda, DeviceCountStatus status, int driver, int runtime, int count = 0) {
  GpuFacts f;
  f.libcuda_loads = libcuda;
  f.libcuda_error = libcuda ? "" : "libcuda.so.1: cannot open shared object file: No such file or directory";
  f.status = status;
  f.status_text = "cudaErrorX: text";
  f.runtime_message = "no usable GPU: the CUDA runtime could not reach a device (cudaErrorX: text)";
  f.driver_version = driver;
  f.runtime_version = runtime;
  f.device_count = count;
  return f;
}

TEST(GpuAvailability, NoDriverIsNotAMismatch) {
  // Without libcuda the runtime says cudaErrorInsufficientDriver and the driver version is 0.
  const GpuAvailability a = classify_gpu(facts(false, DeviceCountStatus::insufficient_driver, 0, 13000));
  EXPECT_EQ(a.verdict, GpuVerdict::no_driver);
  EXPECT_EQ(a.message.rfind("no NVIDIA driver: libcuda.so.1 does not load (", 0), 0u) << a.message;
  const GpuAvailability stub = classify_gpu(facts(true, DeviceCountStatus::stub_library, 0, 13000));
  EXPECT_EQ(stub.verdict, GpuVerdict::no_driver);
  EXPECT_NE(stub.message.find("stub"), std::string::npos) << stub.message;
}

TEST(GpuAvailability, AnOlderDriverIsAMismatchNeverNoGpu) {
  const GpuAvailability a = classify_gpu(facts(true, DeviceCountStatus::insufficient_driver, 12020, 13000));
  EXPECT_EQ(a.verdict, GpuVerdict::driver_runtime_mismatch);
  EXPECT_EQ(a.message.rfind("driver/runtime mismatch: driver supports CUDA 12.2, runtime is 13.0", 0), 0u) << a.message;
  // Another error with a driver older than the runtime: the versions still tell.
  EXPECT_EQ(classify_gpu(facts(true, DeviceCountStatus::other, 12080, 12090)).verdict,
            GpuVerdict::driver_runtime_mismatch);
  // The devices answer (minor version compatibility): usable, with a note.
  const GpuAvailability compatible = classify_gpu(facts(true, DeviceCountStatus::success, 12080, 12090, 1));
  EXPECT_EQ(compatible.verdict, GpuVerdict::usable);
  EXPECT_NE(compatible.message.find("minor version compatibility"), std::string::npos);
}

TEST(GpuAvailability, NoDeviceAndOtherErrors) {
  EXPECT_EQ(classify_gpu(facts(true, DeviceCountStatus::no_device, 13000, 13000)).verdict, GpuVerdict::no_device);
  EXPECT_EQ(classify_gpu(facts(true, DeviceCountStatus::success, 13000, 13000, 0)).verdict, GpuVerdict::no_device);
  const GpuAvailability other = classify_gpu(facts(true, DeviceCountStatus::other, 13000, 13000));
  EXPECT_EQ(other.verdict, GpuVerdict::unusable);
  EXPECT_EQ(other.message, "no usable GPU: the CUDA runtime could not reach a device (cudaErrorX: text)");
  const GpuAvailability usable = classify_gpu(facts(true, DeviceCountStatus::success, 13000, 13000, 2));
  EXPECT_EQ(usable.verdict, GpuVerdict::usable);
  EXPECT_EQ(usable.message, "");
}

// ---------------------------------------------------------------------------------------------
// Refusals: the gates they quote, in the backends' own words.

MachineFacts machine(int major, int minor, std::size_t cudnn, std::int64_t smem = 232448) {
  MachineFacts m;
  m.compute_major = major;
  m.compute_minor = minor;
  m.cudnn_version = cudnn;
  m.shared_mem_per_block_optin = smem;
  return m;
}

TEST(RefusalPolicy, ReadsTheGatesBackendsQuote) {
  using G = GateKind;
  auto gates = [](const std::string& text) {
    std::vector<std::pair<G, std::int64_t>> out;
    for (const QuotedGate& g : quoted_gates(text)) out.emplace_back(g.kind, g.value);
    return out;
  };
  using Gates = std::vector<std::pair<G, std::int64_t>>;
  EXPECT_EQ(gates("flash:fa2 needs compute capability 8.0 or newer (bf16 mma.sync, cp.async, ldmatrix); T4 is 7.5"),
            (Gates{{G::compute_capability_at_least, 80}}));
  EXPECT_EQ(gates("flash:hopper runs sm_90a code (wgmma, TMA, setmaxnreg) that only compute capability 9.0 (Hopper) "
                  "executes; A100 is 8.0 (flash:fa2 runs there)"),
            (Gates{{G::compute_capability_exactly, 90}}));
  EXPECT_EQ(gates("a paged K/V cache (the PAGED_CACHE_LOAD operation) needs cuDNN 9.5.0 or newer (cudnn-frontend's "
                  "SDPA support surface); the loaded cuDNN is 9.4.0"),
            (Gates{{G::cudnn_at_least, 90500}}));
  EXPECT_EQ(gates("the loaded cuDNN is 8.9.7; this backend needs cuDNN 9: older graph APIs have neither ..."),
            (Gates{{G::cudnn_at_least, 90000}}));
  EXPECT_EQ(gates("cuDNN 9.14.0 has a known bug with a non-causal window with a left bound and seq_kv > 1024 "
                  "(cudnn-frontend refuses it); this needs cuDNN 9.14.1 or newer"),
            (Gates{{G::cudnn_at_least, 91401}}));
  EXPECT_EQ(gates("packed (ragged) tensors through cuDNN's ragged offsets need compute capability 9.0 or newer "
                  "before cuDNN 9.18.1; this device is 8.x and the loaded cuDNN is 9.14.0"),
            (Gates{{G::compute_capability_at_least, 90}, {G::cudnn_before, 91801}}));
  EXPECT_EQ(gates("flash:fa2 needs 99328 bytes of shared memory per block; RTX allows 49152"),
            (Gates{{G::shared_memory, 99328}}));
  // Versions and capabilities that are facts, not requirements, are no gates.
  EXPECT_EQ(gates("cuDNN's SDPA backward takes head_dim above 128 on compute capability 9.x only; this device is 8.x"),
            Gates{});
  EXPECT_EQ(gates("cuDNN 9.14.0 (built for CUDA 12.9) built no execution plan for cudnn bf16"), Gates{});
}

TEST(RefusalPolicy, ADeviceRefusalIsASkipOnlyWhereTheGpuLacksWhatItQuotes) {
  const std::string hopper_only =
      "flash:hopper runs sm_90a code (wgmma, TMA, setmaxnreg) that only compute capability 9.0 (Hopper) executes; "
      "A100 is 8.0 (flash:fa2 runs there)";
  const RefusalVerdict on_a100 = judge_device_refusal("flash:hopper", hopper_only, machine(8, 0, 91400));
  EXPECT_TRUE(on_a100.accepted);
  EXPECT_EQ(on_a100.reason, SkipReason::needs_compute_capability);
  EXPECT_FALSE(judge_device_refusal("flash:hopper", hopper_only, machine(9, 0, 91400)).accepted);
  EXPECT_FALSE(judge_device_refusal("flash:fa2", "flash:fa2 needs compute capability 8.0 or newer; H100 is 9.0",
                                    machine(9, 0, 91400))
                   .accepted);
  // A refusal that quotes no requirement (a build without sm_90a code) fails on any GPU.
  const RefusalVerdict no_code =
      judge_device_refusal("flash:hopper", "this build has no sm_90a code for flash:hopper's kernel", machine(9, 0, 0));
  EXPECT_FALSE(no_code.accepted);
  EXPECT_NE(no_code.message.find("quoting no requirement"), std::string::npos) << no_code.message;
  const RefusalVerdict old_cudnn =
      judge_device_refusal("cudnn", "the loaded cuDNN is 8.9.7; this backend needs cuDNN 9: ...", machine(9, 0, 80907));
  EXPECT_TRUE(old_cudnn.accepted);
  EXPECT_EQ(old_cudnn.reason, SkipReason::needs_newer_cudnn);
}

// A table as `attnprof backends` would have it: everything runs but what `refuse` names.
BackendSupport table(const std::string& backend, bool refuse_fp32, std::optional<ProbedWorkload> refused_workload) {
  BackendSupport t;
  t.backend = backend;
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (bool bias : {false, true}) {
          ProblemProbe probe{dtype, d, causal, bias, {}};
          if (refuse_fp32 && dtype == DType::fp32) probe.refused = "no fp32";
          t.problems.push_back(probe);
        }
  for (ProbedWorkload w : kProbedWorkloads) {
    WorkloadProbe probe{w, {}};
    if (refused_workload == w) probe.refused = "not this workload";
    t.workloads.push_back(probe);
  }
  return t;
}

AttentionProblem problem(int heads, int heads_kv, int seq_q, int seq_kv, DType dtype = DType::bf16) {
  AttentionProblem p;
  p.shape = {1, heads, seq_q, seq_kv, 64, heads_kv};
  p.dtype = dtype;
  return p;
}

TEST(RefusalPolicy, ACaseRefusalIsAcceptedOnlyWhereTheTableRefusesItsKind) {
  const MachineFacts h100 = machine(9, 0, 91400);
  const BackendSupport no_fp32 = table("somebackend", true, std::nullopt);
  EXPECT_TRUE(judge_case_refusal(no_fp32, problem(8, 8, 17, 17, DType::fp32), "fp32 case", "fp32 is not for me", h100)
                  .accepted);
  const RefusalVerdict wrong =
      judge_case_refusal(no_fp32, problem(8, 8, 17, 17), "bf16 case", "I feel like refusing today", h100);
  EXPECT_FALSE(wrong.accepted);
  EXPECT_NE(wrong.message.find("bf16 case"), std::string::npos) << wrong.message;
  EXPECT_NE(wrong.message.find("I feel like refusing today"), std::string::npos) << wrong.message;

  const BackendSupport no_gqa = table("somebackend", false, ProbedWorkload::grouped_heads);
  EXPECT_TRUE(judge_case_refusal(no_gqa, problem(8, 2, 17, 17), "GQA", "no groups", h100).accepted);
  EXPECT_FALSE(judge_case_refusal(no_gqa, problem(8, 1, 17, 17), "MQA", "no groups", h100).accepted);
  EXPECT_FALSE(judge_case_refusal(no_gqa, problem(8, 8, 17, 17), "MHA", "no groups", h100).accepted);
}

TEST(RefusalPolicy, AVersionGateIsAcceptedOnlyBelowTheVersionItNames) {
  const BackendSupport everything = table("cudnn", false, std::nullopt);
  const std::string gate = "a paged K/V cache needs cuDNN 9.5.0 or newer (cudnn-frontend's SDPA support surface)";
  const RefusalVerdict below = judge_case_refusal(everything, problem(8, 8, 17, 17), "paged", gate, machine(9, 0, 90400));
  EXPECT_TRUE(below.accepted);
  EXPECT_EQ(below.reason, SkipReason::needs_newer_cudnn);
  EXPECT_FALSE(judge_case_refusal(everything, problem(8, 8, 17, 17), "paged", gate, machine(9, 0, 90500)).accepted);
}

TEST(RefusalPolicy, DocumentedRulesNeedTheirCaseAndTheirWords) {
  const MachineFacts h100 = machine(9, 0, 91400);
  AttentionProblem no_key_rows = problem(8, 8, 255, 33);
  set_causal_mode(no_key_rows, CausalMode::bottom_right);
  const std::string manual_words = "query row 0 sees no key under this mask: the five-line attention's softmax ...";
  EXPECT_TRUE(
      judge_case_refusal(table("manual:in_place", false, std::nullopt), no_key_rows, "rows", manual_words, h100).accepted);
  // The rule is manual's and cudnn's, not flash's; and the case must have such rows.
  EXPECT_FALSE(
      judge_case_refusal(table("flash:fa2", false, std::nullopt), no_key_rows, "rows", manual_words, h100).accepted);
  AttentionProblem every_row_sees_keys = problem(8, 8, 33, 255);
  set_causal_mode(every_row_sees_keys, CausalMode::bottom_right);
  EXPECT_FALSE(judge_case_refusal(table("manual:in_place", false, std::nullopt), every_row_sees_keys, "rows",
                                  manual_words, h100)
                   .accepted);
  // cudnn: a left-bounded band with seq_q > seq_kv, in its words.
  AttentionProblem left_bounded = problem(8, 2, 255, 33);
  left_bounded.window = {230, 0};
  EXPECT_TRUE(judge_case_refusal(table("cudnn", false, std::nullopt), left_bounded, "band",
                                 "a band left 231 with seq_q 255 > seq_kv 33 is outside cuDNN's fused-attention support",
                                 h100)
                  .accepted);
  EXPECT_FALSE(
      judge_case_refusal(table("cudnn", false, std::nullopt), left_bounded, "band", "something else entirely", h100)
          .accepted);
}

TEST(RefusalPolicy, ACaseUsesTheWorkloadsItsShapeHas) {
  using W = ProbedWorkload;
  AttentionProblem paged_decode = problem(32, 8, 1, 4096);
  paged_decode.shape.page_size = 16;
  set_causal_mode(paged_decode, CausalMode::bottom_right);
  EXPECT_EQ(workloads_of(paged_decode),
            (std::vector<W>{W::grouped_heads, W::bottom_right_causal, W::decode, W::paged_decode}));
  AttentionProblem paged_prefill = paged_decode;
  paged_prefill.shape.seq_q = 64;
  EXPECT_EQ(workloads_of(paged_prefill), (std::vector<W>{W::grouped_heads, W::bottom_right_causal, W::paged}));
  AttentionProblem square_bottom_right = problem(8, 8, 17, 17);
  set_causal_mode(square_bottom_right, CausalMode::bottom_right);  // the same band as top-left
  EXPECT_EQ(workloads_of(square_bottom_right), std::vector<W>{});
  AttentionProblem ragged_window = problem(8, 1, 300, 300);
  ragged_window.shape.seq_lens_q = {300};
  ragged_window.window = {64, -1};
  EXPECT_EQ(workloads_of(ragged_window), (std::vector<W>{W::one_kv_head, W::sliding_window, W::ragged}));
}

}  // namespace
}  // namespace attnprof::test
