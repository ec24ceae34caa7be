// The trace writer and reader at scale, on synthetic records (CPU only). Not a ctest test: it
// measures. docs/perf/NOTES.md ("trace writer and reader at scale", "gzip traces") has the
// figures and the commands. Memory is the resident set (/proc/self/statm) before, during and
// after: a streamed writer and reader keep it flat however many events pass. Each benchmark's
// second argument is the format: 0 plain JSON, N > 0 gzip at zlib level N (json.gz).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <benchmark/benchmark.h>

#include "bench/synthetic_run.hpp"
#include "core/occupancy.hpp"
#include "summary/trace_report.hpp"
#include "trace/annotate.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/trace_format.hpp"

namespace attnprof::bench {
namespace {

// The second benchmark argument: 0 plain JSON, N > 0 gzip at level N.
trace::TraceWriteOptions format_of(std::int64_t arg) {
  trace::TraceWriteOptions options;
  if (arg > 0) {
    options.format = trace::TraceFormat::json_gz;
    options.gzip_level = static_cast<int>(arg);
  }
  return options;
}

std::string label_of(const trace::TraceWriteOptions& options) {
  if (options.format == trace::TraceFormat::json) return "json";
  return "json.gz level " + std::to_string(options.gzip_level);
}

std::string extension_of(const trace::TraceWriteOptions& options) {
  return options.format == trace::TraceFormat::json ? ".json" : ".json.gz";
}

double resident_mb() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

std::filesystem::path scratch_dir() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnprof_trace_bench";
  std::filesystem::create_directories(dir);
  return dir;
}

// The records a timed iteration of a manual-like case writes: launch call + kernel (with their
// ac2g flow events), a D2D copy, an NVTX range. Only times and ids change from one to the next.
struct RecordMix {
  trace::ApiCall call;
  trace::ApiCall copy_call;
  trace::KernelActivity gemm;
  trace::KernelActivity softmax;
  trace::MemcpyActivity copy;
  trace::Annotation range;

  RecordMix() {
    call.name = "cudaLaunchKernel";
    call.cbid = 211;
    call.thread = 4243;
    call.launches_work = true;
    copy_call = call;
    copy_call.name = "cudaMemcpyAsync";
    copy_call.cbid = 41;
    gemm.name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
    gemm.grid = {128, 4, 1};
    gemm.block = {384, 1, 1};
    gemm.registers_per_thread = 168;
    gemm.dynamic_shared_bytes = 200'000;
    gemm.shared_optin = true;
    gemm.stream = 7;
    gemm.launch_api = "cuLaunchKernelEx";
    trace::annotate_occupancy(gemm, sm90_reference_properties());
    softmax = gemm;
    softmax.name = "void attnprof::kernels::softmax_rows_kernel<float, 1024>(float*, int, int)";
    softmax.block = {1024, 1, 1};
    softmax.grid = {65536, 1, 1};
    softmax.registers_per_thread = 40;
    softmax.dynamic_shared_bytes = 4096;
    softmax.shared_optin = false;
    softmax.launch_api = "cudaLaunchKernel";
    trace::annotate_occupancy(softmax, sm90_reference_properties());
    copy.kind = trace::MemcpyKind::DtoD;
    copy.src_memory = copy.dst_memory = "Device";
    copy.bytes = 134'217'728;
    copy.stream = 7;
    copy.launch_api = "cudaMemcpyAsync";
    range.thread = 4243;
  }
};

trace::TraceHeader bench_header() {
  trace::TraceHeader header;
  header.base_time_ns = 1'764'700'000'000'000'000ull;
  header.devices = {sm90_reference_properties()};
  header.host_process = 4242;
  header.host_process_name = "attnprof run (pid 4242)";
  return header;
}

// Writes at least `events` events; returns the size of the file. Samples the resident set.
std::uint64_t write_mix(const std::filesystem::path& path, std::uint64_t events, const trace::TraceWriteOptions& format,
                        double& peak_mb) {
  trace::ChromeTraceWriter writer(path, bench_header(), format);
  writer.add_case({"manual:out_of_place bf16 causal 4x16x1024x1024x64", "manual:out_of_place"});
  RecordMix mix;
  std::uint64_t t = bench_header().base_time_ns + 1'000'000;
  std::uint32_t correlation = 1;
  int iteration = 0;
  auto launch = [&](trace::ApiCall& call, auto& gpu) {
    call.start_ns = t;
    call.end_ns = t + 2'500 + (correlation % 7) * 100;
    call.correlation = gpu.correlation = correlation++;
    call.tag = gpu.tag;
    gpu.start_ns = call.end_ns + 4'000;
    gpu.end_ns = gpu.start_ns + 20'000 + (correlation % 13) * 250;
    writer.write(call);
    writer.write(gpu);
    t = call.end_ns + 300;
  };
  while (writer.events_written() < events) {
    const trace::SweepTag tag{0, trace::Phase::iteration, iteration++};
    mix.gemm.tag = mix.softmax.tag = mix.copy.tag = mix.range.tag = tag;
    mix.range.start_ns = t;
    launch(mix.call, mix.gemm);
    launch(mix.call, mix.softmax);
    launch(mix.copy_call, mix.copy);
    launch(mix.call, mix.gemm);
    mix.range.end_ns = t;
    writer.write(mix.range);
    if ((iteration & 1023) == 0) peak_mb = std::max(peak_mb, resident_mb());
  }
  writer.finish({{"tool", "attnprof"}, {"command", "bench"}});
  return std::filesystem::file_size(path);
}

void BM_WriteTrace(benchmark::State& state) {
  const auto events = static_cast<std::uint64_t>(state.range(0));
  const trace::TraceWriteOptions format = format_of(state.range(1));
  const std::filesystem::path path = scratch_dir() / ("write" + extension_of(format));
  // Once untimed first: a file's first pages cost this VM far more than the writer does (a fresh
  // dd writes 0.7 GB/s, a second one 8 GB/s); after it, the page cache reuses what it freed.
  double peak = 0;
  write_mix(path, events, format, peak);
  std::filesystem::remove(path);
  const double before = resident_mb();
  peak = before;
  std::uint64_t bytes = 0;
  for (auto _ : state) bytes = write_mix(path, events, format, peak);
  const double after = resident_mb();
  std::filesystem::remove(path);
  state.SetLabel(label_of(format));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(state.iterations() * events), benchmark::Counter::kIsRate);
  state.counters["file_MB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["bytes/event"] = static_cast<double>(bytes) / static_cast<double>(events);
  state.counters["rss_before_MB"] = before;
  state.counters["rss_peak_MB"] = peak;
  state.counters["rss_after_MB"] = after;
}
BENCHMARK(BM_WriteTrace)
    ->Args({100'000, 0})->Args({1'000'000, 0})->Args({10'000'000, 0})
    ->Args({100'000, 1})->Args({1'000'000, 1})->Args({1'000'000, 6})->Args({10'000'000, trace::kTraceGzipLevel})
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// A synthetic run's trace of about `events` events in `format`, written once per size and
// format and kept for the reading benchmarks.
const std::filesystem::path& run_trace(std::uint64_t events, const trace::TraceWriteOptions& format) {
  static std::map<std::pair<std::uint64_t, std::string>, std::filesystem::path> written;
  const auto key = std::pair{events, label_of(format)};
  auto it = written.find(key);
  if (it == written.end()) {
    const std::filesystem::path path = scratch_dir() / ("run-" + std::to_string(events) + extension_of(format));
    SyntheticRunOptions options;
    options.target_events = events;
    options.write = format;
    write_synthetic_run(path, options);
    it = written.emplace(key, path).first;
  }
  return it->second;
}

void BM_ReadTrace(benchmark::State& state) {
  const trace::TraceWriteOptions format = format_of(state.range(1));
  const std::filesystem::path& path = run_trace(static_cast<std::uint64_t>(state.range(0)), format);
  const double before = resident_mb();
  double peak = before;
  std::uint64_t events = 0;
  for (auto _ : state) {
    events = 0;
    trace::read_chrome_trace(path, [&](const trace::TraceEvent&, const trace::TraceDocument&) {
      if ((++events & 0xffff) == 0) peak = std::max(peak, resident_mb());
    });
  }
  const auto bytes = std::filesystem::file_size(path);
  state.SetLabel(label_of(format));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(state.iterations() * events), benchmark::Counter::kIsRate);
  state.counters["bytes/event"] = static_cast<double>(bytes) / static_cast<double>(events);
  state.counters["rss_before_MB"] = before;
  state.counters["rss_peak_MB"] = peak;
  state.counters["rss_after_MB"] = resident_mb();
}
BENCHMARK(BM_ReadTrace)
    ->Args({100'000, 0})->Args({1'000'000, 0})->Args({100'000, 1})->Args({1'000'000, 1})->Args({1'000'000, 6})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// `attnprof report`'s whole pass: read, convert, aggregate per case, rebuild the summary.
void BM_ReportTrace(benchmark::State& state) {
  const trace::TraceWriteOptions format = format_of(state.range(1));
  const std::filesystem::path& path = run_trace(static_cast<std::uint64_t>(state.range(0)), format);
  TraceReportOptions options;
  options.known_backends = synthetic_backend_names();
  const double before = resident_mb();
  std::uint64_t events = 0;
  for (auto _ : state) events = report_from_trace(path, options).events;
  state.SetLabel(label_of(format));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * std::filesystem::file_size(path)));
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(state.iterations() * events), benchmark::Counter::kIsRate);
  state.counters["rss_before_MB"] = before;
  state.counters["rss_after_MB"] = resident_mb();
}
BENCHMARK(BM_ReportTrace)
    ->Args({100'000, 0})->Args({1'000'000, 0})->Args({100'000, trace::kTraceGzipLevel})->Args({1'000'000, trace::kTraceGzipLevel})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace attnprof::bench

BENCHMARK_MAIN();
