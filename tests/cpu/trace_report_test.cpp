// `attnprof report`: a summary rebuilt from a saved trace. For our own trace it must equal, in
// every field, the summary the run (or the profiled program) wrote; for a Kineto trace the
// cases come from record_function ranges and GPU work joins them through correlation ids.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "core/occupancy.hpp"
#include "summary/analysis.hpp"
#include "summary/findings.hpp"
#include "summary/program_summary.hpp"
#include "summary/surprises.hpp"
#include "summary/trace_report.hpp"
#include "trace/annotate.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/projection.hpp"
#include "trace/trace_files.hpp"

namespace attnprof {
namespace {

using trace::Phase;
using trace::SweepTag;

constexpr std::uint64_t kBase = 1'764'700'000'000'000'000ull;

std::filesystem::path temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnprof_report_test" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A call that launched GPU work, and the work: the shape the collector's drain() produces.
struct Recorder {
  trace::ActivityBatch batch;
  std::uint32_t next_correlation = 100;
  std::uint32_t thread = 77;

  std::uint32_t call(const std::string& api, std::uint64_t t, SweepTag tag, bool launches = true) {
    trace::ApiCall c;
    c.name = api;
    c.cbid = api == "cudaLaunchKernel" ? 211 : 41;
    c.domain = api.rfind("cu", 0) == 0 && api.rfind("cuda", 0) != 0 ? trace::ApiDomain::driver : trace::ApiDomain::runtime;
    c.start_ns = t;
    c.end_ns = t + 2'500;
    c.process = 4242;
    c.thread = thread;
    c.correlation = next_correlation++;
    c.launches_work = launches;
    c.tag = tag;
    batch.api_calls.push_back(c);
    return c.correlation;
  }

  void kernel(const std::string& name, std::uint64_t t, std::uint64_t dur, SweepTag tag, int regs, int threads,
              int dynamic_smem, const std::string& api = "cudaLaunchKernel") {
    trace::KernelActivity k;
    k.name = name;
    k.correlation = call(api, t - 5'000, tag);
    k.start_ns = t;
    k.end_ns = t + dur;
    k.stream = 7;
    k.context = 1;
    k.grid = {264, 2, 1};
    k.block = {threads, 1, 1};
    k.registers_per_thread = regs;
    k.static_shared_bytes = 1024;
    k.dynamic_shared_bytes = dynamic_smem;
    k.local_bytes_per_thread = 16;
    k.shared_memory_executed = 233472;
    k.shared_optin = k.static_shared_bytes + k.dynamic_shared_bytes > 49152;
    k.cluster = {2, 1, 1};
    k.launch_api = api;
    k.tag = tag;
    trace::annotate_occupancy(k, sm90_reference_properties());
    batch.kernels.push_back(k);
  }

  void memcpy(std::uint64_t t, std::uint64_t bytes, SweepTag tag) {
    trace::MemcpyActivity m;
    m.kind = trace::MemcpyKind::DtoD;
    m.src_memory = m.dst_memory = "Device";
    m.bytes = bytes;
    m.correlation = call("cudaMemcpyAsync", t - 3'000, tag);
    m.start_ns = t;
    m.end_ns = t + 1'337;
    m.stream = 7;
    m.launch_api = "cudaMemcpyAsync";
    m.tag = tag;
    batch.memcpys.push_back(m);
  }

  void memset(std::uint64_t t, SweepTag tag) {
    trace::MemsetActivity m;
    m.bytes = 4096;
    m.memory = "Device";
    m.correlation = call("cudaMemsetAsync", t - 3'000, tag);
    m.start_ns = t;
    m.end_ns = t + 777;
    m.stream = 7;
    m.launch_api = "cudaMemsetAsync";
    m.tag = tag;
    batch.memsets.push_back(m);
  }

  void range(const std::string& name, std::uint64_t start, std::uint64_t end, SweepTag tag = {}) {
    trace::Annotation a;
    a.name = name;
    a.start_ns = start;
    a.end_ns = end;
    a.process = 4242;  // the collector names a range's process as it names its API calls'
    a.thread = thread;
    a.tag = tag;
    batch.annotations.push_back(a);
  }
};

struct RunCase {
  CaseMeasurements measured;
  trace::ActivityBatch batch;
};

// Two cases written the way runner.cpp writes them: per-case batches, summaries from
// summarize_case, the summary (and config) in the trace's attnprof object.
struct RunTrace {
  std::filesystem::path path;
  RunSummary summary;
};

RunTrace write_run_trace(const std::filesystem::path& dir, bool with_summary, bool with_backward = false) {
  const char* config_text = R"({
    "backends": ["flash", "manual"], "dtypes": ["bf16"], "causal": [true],
    "shapes": [{"batch": 1, "heads": 2, "seq_q": 128, "seq_kv": 128, "head_dim": 64}],
    "warmup": 1, "iterations": 3,
    "expect": [{"backend": "manual:out_of_place", "memcpy_per_iter": 0, "note": "copies are free"},
               {"backend": "flash", "kernels_per_iter": 1}]
  })";
  const std::vector<std::string> backends = {"flash", "manual", "manual:out_of_place", "manual:in_place"};
  const Config config = parse_config(config_text, "report_test.json", backends);

  std::vector<RunCase> cases(with_backward ? 3 : 2);
  {
    Recorder r;
    std::uint64_t t = kBase + 1'000'000;
    r.kernel("flash_fwd_kernel<64>", t, 9'000, {0, Phase::plan, 0}, 255, 128, 65536);
    r.kernel("flash_fwd_kernel<64>", t + 20'000, 9'000, {0, Phase::warmup, -1}, 255, 128, 65536);
    for (int i = 0; i < 3; ++i) {
      t += 100'000;
      r.range(fmt::format("iter {}", i), t - 10'000, t + 60'000, {0, Phase::iteration, i});
      r.kernel("flash_fwd_kernel<64>", t, 12'345 + 1'000 * i, {0, Phase::iteration, i}, 255, 128, 65536);
      // One warp per block, two blocks per SM for shared memory: 3.125%, which the trace rounds.
      r.kernel("tiny_kernel", t + 13'000, 1'111, {0, Phase::iteration, i}, 20, 32, 100000);
      if (i == 1) r.memcpy(t + 20'000, 12345, {0, Phase::iteration, i});
    }
    cases[0].batch = std::move(r.batch);
    CaseMeasurements& m = cases[0].measured;
    m.label = "flash bf16 causal 1x2x128x128x64";
    m.backend = "flash";
    m.problem.shape = {1, 2, 128, 128, 64};
    m.problem.causal = true;
    m.iterations = 3;
    m.iteration_us = {13.456789012345, 14.5, 15.25};
    m.plan_cold_ms = 1.25;
    m.plan_warm_ms = 0.0031;
    m.host_enqueue_us_per_iter = 4.75;
    m.verified = m.verify_passed = true;
    m.relative_error = 1.2e-3;
    m.error_bound = 2e-2;
  }
  {
    Recorder r;
    std::uint64_t t = kBase + 5'000'000;
    for (int i = 0; i < 3; ++i) {
      t += 100'000;
      const SweepTag tag{1, Phase::iteration, i};
      r.range(fmt::format("iter {}", i), t - 10'000, t + 80'000, tag);
      r.kernel("gemm_kernel", t, 20'000, tag, 168, 384, 200000, "cuLaunchKernelEx");
      r.kernel("void at::native::tril_kernel<bool>(bool*)", t + 21'000, 2'000, tag, 32, 256, 0);
      r.memcpy(t + 24'000, 65536, tag);
      r.memset(t + 26'000, tag);
      r.kernel("softmax_kernel", t + 30'000, 5'000, tag, 40, 256, 4096);
    }
    r.kernel("gemm_kernel", t + 500'000, 20'000, {1, Phase::verify, -1}, 168, 384, 200000, "cuLaunchKernelEx");
    cases[1].batch = std::move(r.batch);
    CaseMeasurements& m = cases[1].measured;
    m.label = "manual:out_of_place bf16 causal 1x2x128x128x64";
    m.backend = "manual:out_of_place";
    m.problem = cases[0].measured.problem;
    m.iterations = 3;
    m.iteration_us = {31.5, 30.25, 33.0};
    m.plan_cold_ms = 0.5;
    m.plan_warm_ms = 0.002;
    m.verified = m.verify_passed = true;
  }

  if (with_backward) {
    // cuDNN's backward: a memset, dot(dO, O), the bprop kernel, dQ to 16 bits; its run-to-run
    // check (measured on the GPU, kept only in the summary) found dQ's bits differing.
    Recorder r;
    std::uint64_t t = kBase + 9'000'000;
    for (int i = 0; i < 3; ++i) {
      t += 100'000;
      const SweepTag tag{2, Phase::iteration, i};
      r.range(fmt::format("iter {}", i), t - 10'000, t + 80'000, tag);
      r.memset(t, tag);
      r.kernel("compute_dot_do_o_specialized", t + 2'000, 3'000, tag, 32, 256, 0, "cuLaunchKernelEx");
      r.kernel("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3", t + 6'000, 40'000, tag, 168, 384,
               200000, "cuLaunchKernelEx");
      r.kernel("convert_dq_to_16bits", t + 47'000, 2'000, tag, 32, 256, 0, "cuLaunchKernelEx");
    }
    cases[2].batch = std::move(r.batch);
    CaseMeasurements& m = cases[2].measured;
    m.backend = "cudnn";
    m.problem = cases[0].measured.problem;
    m.problem.pass = AttentionPass::backward;
    m.label = "cudnn backward bf16 causal 1x2x128x128x64";
    m.iterations = 3;
    m.iteration_us = {50.5, 51.0, 50.75};
    m.verified = m.verify_passed = true;
    GradientRepeatability repeat;
    repeat.checked = true;
    repeat.elements = {16384, 16384, 16384};
    repeat.differing = {321, 0, 0};
    m.repeatability = repeat;
  }

  RunTrace out;
  out.path = dir / "trace.json";
  RunSummary& summary = out.summary;
  summary.tool_version = "0.1.0";
  summary.config_name = "report test";
  summary.config_source = "report_test.json";
  summary.created_at = "2026-12-02T10:00:00Z";
  // With its clocks, so that the run-level analysis places the cases under the roofs.
  DeviceProperties device = sm90_reference_properties();
  device.clock_rate_khz = 1'980'000;
  device.memory_clock_rate_khz = 2'619'000;
  device.memory_bus_width_bits = 5120;
  summary.device = device;
  summary.driver_version = "580.159.04";
  summary.cuda_runtime_version = "13.0";
  summary.cupti_version = "130001";
  summary.cudnn_version = "9.19.0";
  summary.capture.records = 1234;

  trace::TraceHeader header;
  header.base_time_ns = kBase;
  header.devices = {device};
  header.host_process = 4242;
  header.host_process_name = "attnprof run (pid 4242)";
  trace::ChromeTraceWriter writer(out.path, header);
  for (const RunCase& c : cases) writer.add_case({c.measured.label, c.measured.backend});
  for (RunCase& c : cases) {
    std::vector<trace::Annotation> on_gpu = trace::project_annotations_to_gpu(c.batch);
    c.batch.annotations.insert(c.batch.annotations.end(), on_gpu.begin(), on_gpu.end());
    writer.write(c.batch);
    CaseSummary cs = summarize_case(c.measured, c.batch);
    analyze_case(cs, &config.expect);  // what the sweep does with each case (runner/sweep.cpp)
    summary.cases.push_back(std::move(cs));
  }
  analyze_run(summary);  // and run.cpp with the finished run
  nlohmann::json metadata = {{"tool", "attnprof"}, {"command", "run"}, {"config_source", config.source},
                             {"config", config.document}};
  if (with_summary) metadata["summary"] = summary;
  writer.finish(metadata);
  return out;
}

TEST(TraceReport, OurRunTraceGivesBackTheRunsSummaryExactly) {
  const RunTrace run = write_run_trace(temp_dir("run"), true);
  TraceReportOptions options;
  options.known_backends = {"flash", "manual", "manual:out_of_place", "manual:in_place"};
  const TraceReport report = report_from_trace(run.path, options);
  EXPECT_EQ(report.origin, "attnprof run");
  EXPECT_TRUE(report.notes.empty()) << report.notes.front();
  const nlohmann::json want = run.summary;
  const nlohmann::json got = report.summary;
  EXPECT_EQ(got, want) << "diff: " << nlohmann::json::diff(want, got).dump(1);

  // The counts this test exists for, spelled out.
  ASSERT_EQ(report.summary.cases.size(), 2u);
  const CaseSummary& flash = report.summary.cases[0];
  EXPECT_EQ(flash.kernels_per_iter, 2.0);
  EXPECT_DOUBLE_EQ(flash.memcpy_per_iter, 1.0 / 3.0);
  EXPECT_EQ(flash.kernels[1].theoretical_occupancy_percent, 3.125);  // written as 3.12, exact again
  const CaseSummary& manual = report.summary.cases[1];
  EXPECT_EQ(manual.kernels_per_iter, 3.0);
  EXPECT_EQ(manual.memcpy_per_iter, 1.0);
  EXPECT_EQ(manual.memset_per_iter, 1.0);
  ASSERT_EQ(manual.surprises.size(), 1u);
  EXPECT_EQ(manual.surprises[0].field, "memcpy_per_iter");
  // The run-level step ran too (one pipeline: summary/analysis.hpp): each case under the roofs.
  EXPECT_TRUE(flash.roofline.roof_percent.has_value());
  EXPECT_FALSE(flash.roofline.bound.empty());
}

TEST(TraceReport, ABackwardKeepsItsRunToRunCheckAndItsFindings) {
  const RunTrace run = write_run_trace(temp_dir("backward"), true, true);
  TraceReportOptions options;
  options.known_backends = {"flash", "manual", "manual:out_of_place", "manual:in_place", "cudnn"};
  const TraceReport report = report_from_trace(run.path, options);
  const nlohmann::json want = run.summary;
  const nlohmann::json got = report.summary;
  EXPECT_EQ(got, want) << "diff: " << nlohmann::json::diff(want, got).dump(1);
  ASSERT_EQ(report.summary.cases.size(), 3u);
  const CaseSummary& backward = report.summary.cases[2];
  ASSERT_TRUE(backward.repeatability.has_value());
  EXPECT_EQ(backward.repeatability->differing[0], 321);
  std::set<std::string> kinds;
  for (const Finding& f : backward.findings) kinds.insert(f.kind);
  for (const char* kind : {"backward_nondeterministic", "dq_fp32_accumulator", "workspace_memset", "p_recomputed"})
    EXPECT_TRUE(kinds.count(kind)) << kind;
  EXPECT_FALSE(kinds.count("memset_in_iteration"));
}

TEST(TraceReport, WithoutExpectationsTheRunsSurprisesAreKept) {
  const RunTrace run = write_run_trace(temp_dir("run_kept"), true);
  const TraceReport report = report_from_trace(run.path);
  EXPECT_EQ(nlohmann::json(report.summary), nlohmann::json(run.summary));
}

TEST(TraceReport, AnInterruptedRunsTraceStillCountsEverything) {
  const RunTrace run = write_run_trace(temp_dir("no_summary"), false);
  const TraceReport report = report_from_trace(run.path);
  ASSERT_EQ(report.summary.cases.size(), 2u);
  EXPECT_FALSE(report.notes.empty());
  for (std::size_t i = 0; i < 2; ++i) {
    const CaseSummary& got = report.summary.cases[i];
    const CaseSummary& want = run.summary.cases[i];
    EXPECT_EQ(got.label, want.label);
    EXPECT_EQ(got.backend, want.backend);
    EXPECT_EQ(got.iterations, 3);
    EXPECT_EQ(got.kernels_per_iter, want.kernels_per_iter);
    EXPECT_EQ(got.memcpy_per_iter, want.memcpy_per_iter);
    EXPECT_EQ(got.memcpy_bytes_per_iter, want.memcpy_bytes_per_iter);
    EXPECT_EQ(got.memset_per_iter, want.memset_per_iter);
    EXPECT_EQ(got.gpu_busy_us_per_iter, want.gpu_busy_us_per_iter);
    ASSERT_EQ(got.kernels.size(), want.kernels.size());
    for (std::size_t k = 0; k < got.kernels.size(); ++k) {
      EXPECT_EQ(got.kernels[k].name, want.kernels[k].name);
      EXPECT_EQ(got.kernels[k].per_iter, want.kernels[k].per_iter);
      EXPECT_EQ(got.kernels[k].occupancy_explanation, want.kernels[k].occupancy_explanation);
    }
  }
  // Timing falls back to the GPU span of each iteration: first kernel start to last end.
  EXPECT_EQ(report.summary.cases[0].iteration_us, (std::vector<double>{14.111, 21.337, 14.345}));
}

// A program under `attnprof profile`: NVTX ranges, no tags, the injection's post-processing.
trace::ActivityBatch profiled_program_batch() {
  Recorder r;
  std::uint64_t t = kBase + 1'000'000;
  r.kernel("warmup_kernel", t, 1'000, {}, 16, 128, 0);  // before any range: not counted
  for (int i = 0; i < 4; ++i) {
    t += 100'000;
    r.range("sdpa flash", t - 10'000, t + 50'000);
    r.kernel("flash_fwd_kernel", t, 30'000 + i, {}, 255, 128, 32768);
  }
  t += 100'000;
  r.range("manual causal", t - 10'000, t + 90'000);
  r.range("scores", t - 9'000, t + 1'000);  // nested: part of "manual causal"
  r.kernel("gemm", t, 10'000, {}, 168, 384, 200000, "cuLaunchKernelEx");
  r.memcpy(t + 20'000, 1 << 20, {});
  r.kernel("softmax", t + 30'000, 4'000, {}, 32, 256, 0);
  r.range("ProfilerStep#3", kBase, t + 1'000'000);  // transparent
  r.memset(t + 200'000, {});                         // after every range: not counted
  return std::move(r.batch);
}

TEST(ProgramSummary, NvtxRangesBecomeCasesAndOccurrencesIterations) {
  trace::ActivityBatch batch = profiled_program_batch();
  ProgramInfo info;
  info.command = "python3 sdpa_backends.py";
  info.pid = 4242;
  std::vector<std::string> notes;
  const RunSummary s = summarize_program(batch, {sm90_reference_properties()}, info, {}, notes);
  ASSERT_EQ(s.cases.size(), 2u);
  EXPECT_EQ(s.cases[0].label, "sdpa flash");
  EXPECT_EQ(s.cases[0].iterations, 4);
  EXPECT_EQ(s.cases[0].kernels_per_iter, 1.0);
  EXPECT_EQ(s.cases[0].iteration_us, (std::vector<double>{30.0, 30.001, 30.002, 30.003}));
  EXPECT_EQ(s.cases[0].tflops, 0.0);
  EXPECT_EQ(s.cases[1].label, "manual causal");
  EXPECT_EQ(s.cases[1].iterations, 1);
  EXPECT_EQ(s.cases[1].kernels_per_iter, 2.0);
  EXPECT_EQ(s.cases[1].memcpy_per_iter, 1.0);
  EXPECT_EQ(s.cases[1].memset_per_iter, 0.0);
  EXPECT_EQ(s.cases[1].launch_apis, (std::vector<std::string>{"cuLaunchKernelEx", "cudaLaunchKernel", "cudaMemcpyAsync"}));
  EXPECT_TRUE(notes.empty());
  // The top-level ranges are projected onto the stream, as Kineto's gpu_user_annotation.
  int on_gpu = 0;
  for (const trace::Annotation& a : batch.annotations) on_gpu += a.on_gpu ? 1 : 0;
  EXPECT_EQ(on_gpu, 5);
}

TEST(ProgramSummary, AProgramWithoutRangesIsOneCase) {
  trace::ActivityBatch batch = profiled_program_batch();
  batch.annotations.clear();
  std::vector<std::string> notes;
  const RunSummary s = summarize_program(batch, {}, {}, {}, notes);
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_EQ(s.cases[0].label, trace::kWholeRunCase);
  EXPECT_EQ(s.cases[0].iterations, 1);
  EXPECT_EQ(s.cases[0].kernels_per_iter, 7.0);
  EXPECT_EQ(s.cases[0].memcpy_per_iter, 1.0);
  EXPECT_EQ(s.cases[0].memset_per_iter, 1.0);
  EXPECT_EQ(notes.size(), 2u);  // no ranges; no device properties
}

TEST(ProgramSummary, TheProfileTraceGivesBackTheProfileSummaryExactly) {
  const std::filesystem::path dir = temp_dir("program");
  trace::ActivityBatch batch = profiled_program_batch();
  ProgramInfo info;
  info.command = "python3 sdpa_backends.py --iterations 4";
  info.pid = 4242;
  info.rank = 3;
  std::vector<std::string> notes;
  trace::CaptureHealth capture;
  capture.records = 99;
  const RunSummary s = summarize_program(batch, {sm90_reference_properties()}, info, capture, notes);
  const std::filesystem::path trace_path = dir / trace::process_output_name("trace", info.pid, info.rank);
  const std::filesystem::path summary_path = dir / trace::process_output_name("summary", info.pid, info.rank);
  EXPECT_EQ(trace_path.filename(), "trace-rank3-pid4242.json");
  {
    // What the injection writes when the program ends (inject/injection.cpp).
    trace::ChromeTraceWriter writer(trace_path, program_trace_header(batch, {sm90_reference_properties()}, info));
    for (const CaseSummary& c : s.cases) writer.add_case({c.label, c.backend});
    writer.write(batch);
    writer.finish(nlohmann::json(program_provenance(s, info, notes)));
    write_json_atomically(summary_path.string(), nlohmann::json(s));
  }

  // (summary.json keeps the device's name and SM count only; the trace keeps all of it.)
  EXPECT_EQ(nlohmann::json(load_summary(summary_path.string()))["cases"], nlohmann::json(s)["cases"]);
  const TraceReport report = report_from_trace(trace_path);
  EXPECT_EQ(report.origin, "attnprof profile");
  EXPECT_EQ(nlohmann::json(report.summary), nlohmann::json(s))
      << nlohmann::json::diff(nlohmann::json(s), nlohmann::json(report.summary)).dump(1);
}

TEST(TraceReport, KinetoTraceCasesComeFromRecordFunctionRanges) {
  const TraceReport report = report_from_trace(std::filesystem::path(ATTNPROF_GOLDEN_DIR) / "kineto_small_trace.json");
  EXPECT_EQ(report.origin, "Chrome trace (Kineto schema)");
  EXPECT_EQ(report.events, 32u);
  const RunSummary& s = report.summary;
  EXPECT_EQ(s.device.name, "NVIDIA H200");
  ASSERT_EQ(s.cases.size(), 2u);  // "scores" is nested, ProfilerStep#1 is transparent

  const CaseSummary& flash = s.cases[0];
  EXPECT_EQ(flash.label, "sdpa flash");
  EXPECT_EQ(flash.iterations, 2);
  EXPECT_EQ(flash.kernels_per_iter, 1.0);
  EXPECT_EQ(flash.memcpy_per_iter, 0.0);
  EXPECT_EQ(flash.iteration_us, (std::vector<double>{30.0, 29.5}));
  EXPECT_EQ(flash.median_us, 29.75);
  ASSERT_EQ(flash.kernels.size(), 1u);
  EXPECT_EQ(flash.kernels[0].registers_per_thread, 255);
  EXPECT_EQ(flash.kernels[0].theoretical_occupancy_percent, 12.5);
  EXPECT_EQ(flash.kernels[0].occupancy_limiter, "registers");
  EXPECT_EQ(flash.kernels[0].launch_api, "cudaLaunchKernel");

  const CaseSummary& manual = s.cases[1];
  EXPECT_EQ(manual.label, "manual causal");
  EXPECT_EQ(manual.iterations, 1);
  EXPECT_EQ(manual.kernels_per_iter, 2.0);
  EXPECT_EQ(manual.memcpy_per_iter, 1.0);
  EXPECT_EQ(manual.memcpy_bytes_per_iter, 2097152.0);
  EXPECT_EQ(manual.memset_per_iter, 0.0);  // the memset ran after the range
  EXPECT_EQ(manual.iteration_us, (std::vector<double>{60.0}));
  EXPECT_EQ(manual.launch_apis, (std::vector<std::string>{"cudaLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync"}));
  bool driver_launch = false, memcpy_finding = false;
  for (const Finding& f : manual.findings) {
    driver_launch = driver_launch || f.kind == "driver_launch";
    memcpy_finding = memcpy_finding || f.kind == "memcpy_in_iteration";
  }
  EXPECT_TRUE(driver_launch);
  EXPECT_TRUE(memcpy_finding);
}

TEST(TraceReport, AKinetoTraceWithoutRangesIsOneCase) {
  const std::filesystem::path dir = temp_dir("kineto_plain");
  std::ifstream in(std::string(ATTNPROF_GOLDEN_DIR) + "/kineto_small_trace.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  nlohmann::json kept = nlohmann::json::array();
  for (const nlohmann::json& e : doc["traceEvents"])
    if (e.value("cat", "") != "user_annotation") kept.push_back(e);
  doc["traceEvents"] = kept;
  doc.erase("deviceProperties");
  std::ofstream(dir / "plain.json") << doc.dump();
  const TraceReport report = report_from_trace(dir / "plain.json");
  ASSERT_EQ(report.summary.cases.size(), 1u);
  EXPECT_EQ(report.summary.cases[0].label, trace::kWholeRunCase);
  EXPECT_EQ(report.summary.cases[0].kernels_per_iter, 5.0);
  EXPECT_EQ(report.summary.cases[0].memcpy_per_iter, 1.0);
  EXPECT_EQ(report.summary.cases[0].memset_per_iter, 1.0);
  EXPECT_EQ(report.notes.size(), 2u);  // no ranges; no deviceProperties (H200 assumed)
}

// Found by tests/fuzz/trace_fuzz.cpp: a stored summary whose numbers do not fit, or a command
// that is not a string, is a note, never undefined behaviour or a stray exception.
TEST(TraceReport, AStoredSummaryThatCannotBeReadIsANote) {
  const std::filesystem::path dir = temp_dir("odd_summary");
  std::ofstream(dir / "odd.json") << R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
     "args": {"case index": 0, "phase": "iter", "iteration": 0}}],
    "attnprof": {"command": 7, "summary": {"schema": "attnprof-summary", "cases": [{"label": "a", "backend": "b",
      "problem": {"batch": 1e20, "heads": 1, "seq_q": 1, "seq_kv": 1, "head_dim": 1, "dtype": "bf16", "causal": false}}]}}})";
  const TraceReport report = report_from_trace(dir / "odd.json");
  EXPECT_EQ(report.origin, "attnprof");
  ASSERT_FALSE(report.notes.empty());
  EXPECT_NE(report.notes.front().find("\"batch\": expected an integer that fits"), std::string::npos) << report.notes.front();
  ASSERT_EQ(report.summary.cases.size(), 1u);
  EXPECT_EQ(report.summary.cases[0].kernels_per_iter, 1.0);
}

TEST(TraceReport, ForeignAndMalformedFilesThrowTheirKind) {
  const std::filesystem::path dir = temp_dir("bad");
  RunSummary summary;
  write_json_atomically((dir / "summary.json").string(), nlohmann::json(summary));
  try {
    report_from_trace(dir / "summary.json");
    FAIL() << "a summary.json was read as a trace";
  } catch (const trace::TraceFormatError& e) {
    EXPECT_EQ(e.kind(), trace::TraceFormatError::Kind::foreign);
  }
  std::ofstream(dir / "cut.json") << R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k)";
  EXPECT_THROW(report_from_trace(dir / "cut.json"), trace::TraceFormatError);
  EXPECT_THROW(report_from_trace(dir / "missing.json"), trace::TraceFormatError);
}

}  // namespace
}  // namespace attnprof
