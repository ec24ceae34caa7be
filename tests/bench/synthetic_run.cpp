#include "bench/synthetic_run.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config/config.hpp"
#include "core/device_properties.hpp"
#include "summary/case_accumulator.hpp"
#include "summary/analysis.hpp"
#include "trace/annotate.hpp"
#include "trace/chrome_trace_reader.hpp"

namespace attnprof::bench {
namespace {

constexpr std::uint64_t kBaseNs = 1'764'700'000'000'000'000ull;
constexpr std::uint32_t kPid = 4242;
constexpr std::uint32_t kThread = 4243;
constexpr std::uint32_t kStream = 7;

struct KernelShape {
  trace::KernelActivity record;  // name, resources, occupancy, launch API
  std::uint64_t ns = 0;          // typical duration
};

struct SyntheticCase {
  std::string backend;
  bool causal = false;
  std::vector<KernelShape> kernels;
  bool copies = false;  // one D2D memcpy per iteration (masked_fill out of place)
  AttentionProblem problem;
  std::string label;
};

KernelShape kernel(std::string name, int regs, int threads, int dynamic_smem, std::array<int, 3> grid, std::uint64_t ns,
                   std::string api = "cudaLaunchKernel") {
  KernelShape k;
  trace::KernelActivity& r = k.record;
  r.name = std::move(name);
  r.registers_per_thread = regs;
  r.block = {threads, 1, 1};
  r.grid = grid;
  r.static_shared_bytes = 0;
  r.dynamic_shared_bytes = dynamic_smem;
  r.shared_optin = dynamic_smem > 49152;
  r.shared_memory_executed = 233472;
  r.launch_api = std::move(api);
  r.stream = kStream;
  r.context = 1;
  trace::annotate_occupancy(r, sm90_reference_properties());
  k.ns = ns;
  return k;
}

std::vector<SyntheticCase> synthetic_cases() {
  const std::string gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
  const std::string elementwise =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, "
      "at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)";
  const std::string to_fp32 =
      "void attnprof::kernels::convert_kernel<__nv_bfloat16, float>(__nv_bfloat16 const*, float*, long)";
  const std::string to_bf16 =
      "void attnprof::kernels::convert_kernel<float, __nv_bfloat16>(float const*, __nv_bfloat16*, long)";
  const std::string softmax = "void attnprof::kernels::softmax_rows_kernel<float, 1024>(float*, int, int)";
  const std::string mask = "void attnprof::kernels::build_causal_mask_kernel(bool*, int, int)";
  const std::string masked_fill = "void attnprof::kernels::masked_fill_kernel<__nv_bfloat16>(__nv_bfloat16*, bool const*, float, long)";
  const std::array<int, 3> wide{4096, 1, 1};

  std::vector<SyntheticCase> cases;
  auto math = [&](bool causal) {
    SyntheticCase c{"math", causal, {}, false, {}, {}};
    for (int i = 0; i < 3; ++i) c.kernels.push_back(kernel(to_fp32, 16, 256, 0, wide, 9'000));
    c.kernels.push_back(kernel(gemm, 168, 384, 200'000, {128, 4, 1}, 60'000, "cuLaunchKernelEx"));
    c.kernels.push_back(kernel(elementwise, 20, 128, 0, wide, 12'000));
    if (causal)
      for (int i = 0; i < 6; ++i) c.kernels.push_back(kernel(mask, 18, 256, 0, wide, 3'000 + 500 * i));
    for (int i = 0; i < 4; ++i) c.kernels.push_back(kernel(elementwise, 20, 128, 0, wide, 11'000));
    c.kernels.push_back(kernel(softmax, 40, 1024, 4096, {65536, 1, 1}, 40'000));
    c.kernels.push_back(kernel(gemm, 168, 384, 200'000, {128, 4, 1}, 60'000, "cuLaunchKernelEx"));
    c.kernels.push_back(kernel(elementwise, 20, 128, 0, wide, 8'000));
    c.kernels.push_back(kernel(to_bf16, 16, 256, 0, wide, 5'000));
    c.kernels.push_back(kernel(to_bf16, 16, 256, 0, wide, 5'000));
    return c;  // 14 kernels, 20 causal
  };
  auto manual = [&](const char* variant, bool copies) {
    SyntheticCase c{variant, true, {}, copies, {}, {}};
    c.kernels.push_back(kernel(gemm, 168, 384, 200'000, {128, 4, 1}, 30'000, "cuLaunchKernelEx"));
    c.kernels.push_back(kernel(elementwise, 20, 128, 0, wide, 6'000));
    c.kernels.push_back(kernel(masked_fill, 24, 256, 0, wide, 7'000));
    c.kernels.push_back(kernel(softmax, 40, 1024, 4096, {65536, 1, 1}, 20'000));
    c.kernels.push_back(kernel(gemm, 168, 384, 200'000, {128, 4, 1}, 30'000, "cuLaunchKernelEx"));
    return c;
  };
  auto fused = [&](const char* backend, bool causal, KernelShape k) {
    SyntheticCase c{backend, causal, {std::move(k)}, false, {}, {}};
    return c;
  };
  cases.push_back(math(false));
  cases.push_back(math(true));
  cases.push_back(manual("manual:out_of_place", true));
  cases.push_back(manual("manual:in_place", false));
  cases.push_back(fused("efficient", true,
                        kernel("void attnprof::kernels::efficient_fwd_kernel<attnprof::kernels::EfficientTraits<__nv_bfloat16, 64, 64, 64, true> >(attnprof::kernels::EfficientParams)",
                               96, 128, 36'864, {16, 64, 1}, 53'000)));
  cases.push_back(fused("flash", false,
                        kernel("void attnprof::kernels::flash_fwd_kernel<attnprof::kernels::FlashTraits<__nv_bfloat16, 64, 128, 64, 4, false> >(attnprof::kernels::FlashParams)",
                               255, 128, 49'152, {8, 64, 1}, 64'000)));
  cases.push_back(fused("flash", true,
                        kernel("void attnprof::kernels::flash_fwd_kernel<attnprof::kernels::FlashTraits<__nv_bfloat16, 64, 128, 64, 4, true> >(attnprof::kernels::FlashParams)",
                               255, 128, 49'152, {8, 64, 1}, 54'000)));
  cases.push_back(fused("cudnn", true,
                        kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0",
                               168, 384, 164'096, {8, 16, 4}, 40'000, "cuLaunchKernelEx")));
  for (SyntheticCase& c : cases) {
    c.problem.shape = {4, 16, 1024, 1024, 64};
    c.problem.dtype = DType::bf16;
    c.problem.causal = c.causal;
    c.label = fmt::format("{} bf16 {} 4x16x1024x1024x64", c.backend, c.causal ? "causal" : "non-causal");
  }
  return cases;
}

// A deterministic jitter of a few percent, so that durations are not all equal.
struct Jitter {
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  std::uint64_t operator()(std::uint64_t ns) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return ns + (state >> 33) % (ns / 16 + 1);
  }
};

std::uint64_t events_per_iteration(const SyntheticCase& c) {
  // Per launch: API call, flow start, GPU record, flow end. Per iteration: the range and its projection.
  return 4 * (c.kernels.size() + (c.copies ? 1 : 0)) + 2;
}

Config synthetic_config(int iterations, int warmup) {
  const std::string text = fmt::format(R"json({{
    "name": "synthetic sweep (tests/bench)",
    "backends": ["math", "manual", "efficient", "flash", "cudnn"],
    "dtypes": ["bf16"], "causal": [false, true],
    "shapes": [{{"batch": 4, "heads": 16, "seq_q": 1024, "seq_kv": 1024, "head_dim": 64}}],
    "warmup": {}, "iterations": {},
    "expect": [{{"backend": "flash", "kernels_per_iter": 1, "memcpy_per_iter": 0}},
               {{"backend": "manual:out_of_place", "causal": true, "memcpy_per_iter": 0}}]
  }})json",
                                       warmup, std::clamp(iterations, 1, 100000));
  return parse_config(text, "synthetic.json", synthetic_backend_names());
}

SyntheticRunResult write_run(const std::filesystem::path& path, int iterations, const SyntheticRunOptions& options) {
  const std::vector<SyntheticCase> cases = synthetic_cases();
  const Config config = synthetic_config(iterations, options.warmup);
  SyntheticRunResult result;
  RunSummary& summary = result.summary;
  summary.tool_version = "0.1.0";
  summary.config_name = config.name;
  summary.config_source = config.source;
  summary.created_at = "2026-12-02T12:00:00Z";
  summary.device = sm90_reference_properties();
  summary.driver_version = "580.159.04";
  summary.cuda_runtime_version = "13.0";
  summary.cupti_version = "130001";
  summary.cudnn_version = "9.19.0";

  trace::TraceHeader header;
  header.base_time_ns = kBaseNs;
  header.devices = {sm90_reference_properties()};
  header.host_process = kPid;
  header.host_process_name = fmt::format("attnprof run (pid {})", kPid);
  trace::ChromeTraceWriter writer(path, header, options.write);
  for (const SyntheticCase& c : cases) writer.add_case({c.label, c.backend});

  Jitter jitter;
  std::uint64_t t = kBaseNs + 1'000'000;
  std::uint32_t correlation = 1;
  trace::ActivityBatch batch;  // one iteration at a time: its capacity is all that is kept
  for (std::size_t index = 0; index < cases.size(); ++index) {
    const SyntheticCase& c = cases[index];
    CaseAccumulator accumulator;
    CaseMeasurements m;
    m.label = c.label;
    m.backend = c.backend;
    m.problem = c.problem;
    m.iterations = iterations;
    m.plan_cold_ms = 1.5;
    m.plan_warm_ms = 0.003;
    m.host_enqueue_us_per_iter = 4.25;
    m.verified = m.verify_passed = true;
    m.relative_error = 2e-3;
    m.error_bound = 2e-2;
    for (int i = -options.warmup; i < iterations; ++i) {
      batch.api_calls.clear();
      batch.kernels.clear();
      batch.memcpys.clear();
      batch.annotations.clear();
      const trace::SweepTag tag = i < 0 ? trace::SweepTag{static_cast<int>(index), trace::Phase::warmup, i + options.warmup}
                                        : trace::SweepTag{static_cast<int>(index), trace::Phase::iteration, i};
      const std::uint64_t begin = t;
      auto launch = [&](const std::string& api, std::uint32_t cbid) {
        trace::ApiCall& call = batch.api_calls.emplace_back();
        call.domain = api.rfind("cuda", 0) == 0 ? trace::ApiDomain::runtime : trace::ApiDomain::driver;
        call.name = api;
        call.cbid = cbid;
        call.start_ns = t;
        call.end_ns = t + jitter(2'500);
        call.process = kPid;
        call.thread = kThread;
        call.correlation = correlation++;
        call.launches_work = true;
        call.tag = tag;
        return call;
      };
      std::uint64_t gpu = t + 8'000;
      for (const KernelShape& shape : c.kernels) {
        const trace::ApiCall& call = launch(shape.record.launch_api, shape.record.launch_api == "cudaLaunchKernel" ? 211 : 652);
        trace::KernelActivity& kr = batch.kernels.emplace_back(shape.record);
        kr.correlation = call.correlation;
        kr.start_ns = std::max(gpu, call.end_ns + 1'000);
        kr.end_ns = kr.start_ns + jitter(shape.ns);
        kr.tag = tag;
        gpu = kr.end_ns + 700;
        t = call.end_ns + 300;
      }
      if (c.copies) {
        const trace::ApiCall& call = launch("cudaMemcpyAsync", 41);
        trace::MemcpyActivity& mc = batch.memcpys.emplace_back();
        mc.kind = trace::MemcpyKind::DtoD;
        mc.src_memory = mc.dst_memory = "Device";
        mc.bytes = 4ull * 16 * 1024 * 1024 * 2;
        mc.start_ns = std::max(gpu, call.end_ns + 1'000);
        mc.end_ns = mc.start_ns + jitter(45'000);
        mc.stream = kStream;
        mc.context = 1;
        mc.correlation = call.correlation;
        mc.launch_api = "cudaMemcpyAsync";
        mc.tag = tag;
        gpu = mc.end_ns + 700;
      }
      const std::string range = i < 0 ? fmt::format("warmup {}", i + options.warmup) : fmt::format("iter {}", i);
      trace::Annotation& host = batch.annotations.emplace_back();
      host.name = range;
      host.start_ns = begin;
      host.end_ns = t;
      host.process = kPid;
      host.thread = kThread;
      host.tag = tag;
      trace::Annotation& device = batch.annotations.emplace_back(host);
      device.on_gpu = true;
      device.process = 0;
      device.thread = kStream;
      device.start_ns = batch.kernels.front().start_ns;
      device.end_ns = gpu;
      writer.write(batch);
      accumulator.add(batch);
      result.gpu_records += batch.kernels.size() + batch.memcpys.size();
      if (i >= 0) m.iteration_us.push_back(static_cast<double>(gpu - batch.kernels.front().start_ns) / 1000.0);
      t = std::max(t, gpu) + 5'000;
      if (options.on_iteration) options.on_iteration(writer);
    }
    CaseSummary cs = accumulator.summarize(m);
    analyze_case(cs, &config.expect);
    summary.cases.push_back(std::move(cs));
  }
  analyze_run(summary);
  summary.capture.records = result.gpu_records * 2;
  result.events = writer.events_written();
  const nlohmann::json metadata = {{"tool", "attnprof"},
                                   {"version", summary.tool_version},
                                   {"command", "run"},
                                   {"config_source", config.source},
                                   {"config", config.document},
                                   {"summary", summary}};
  writer.finish(metadata);
  result.bytes = std::filesystem::file_size(path);
  return result;
}

}  // namespace

const std::vector<std::string>& synthetic_backend_names() {
  static const std::vector<std::string> names = {"math",  "manual",    "manual:out_of_place", "manual:in_place", "efficient",
                                                 "flash", "flash:fa2", "flash:hopper",        "cudnn"};
  return names;
}

SyntheticRunResult write_synthetic_run(const std::filesystem::path& path, const SyntheticRunOptions& options) {
  std::uint64_t events_per_round = 0;
  for (const SyntheticCase& c : synthetic_cases()) events_per_round += events_per_iteration(c);
  std::uint64_t target_events = options.target_events;
  if (options.target_bytes > 0) {
    // Bytes per event from a small trace of the same mix, then as many events as that takes.
    SyntheticRunOptions probe_options;
    probe_options.warmup = options.warmup;
    std::filesystem::path probe = path;
    probe += ".probe";
    const SyntheticRunResult probe_result = write_run(probe, 200, probe_options);
    std::filesystem::remove(probe);
    const double bytes_per_event = static_cast<double>(probe_result.bytes) / static_cast<double>(probe_result.events);
    target_events = static_cast<std::uint64_t>(std::ceil(static_cast<double>(options.target_bytes) / bytes_per_event));
  }
  const std::uint64_t rounds = std::max<std::uint64_t>(1, (target_events + events_per_round - 1) / events_per_round);
  const int iterations = static_cast<int>(std::min<std::uint64_t>(rounds, 100000));
  return write_run(path, iterations, options);
}

}  // namespace attnprof::bench
