// attnprof_trace_synth OUT.json (--size-mb N | --events N): writes the trace of a synthetic
// sweep with our writer, for measuring `attnprof report` on large traces (docs/perf/NOTES.md).
// OUT.json.gz writes it gzip-compressed (--size-mb then counts the JSON, not the file).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/synthetic_run.hpp"

int main(int argc, char** argv) {
  if (argc != 4 || (std::string(argv[2]) != "--size-mb" && std::string(argv[2]) != "--events")) {
    std::fprintf(stderr, "usage: %s OUT.json (--size-mb N | --events N)\n", argv[0]);
    return 2;
  }
  attnprof::bench::SyntheticRunOptions options;
  if (std::string(argv[1]).ends_with(".gz")) options.write.format = attnprof::trace::TraceFormat::json_gz;
  const std::uint64_t n = std::strtoull(argv[3], nullptr, 10);
  if (std::string(argv[2]) == "--size-mb") options.target_bytes = n << 20;
  else options.target_events = n;
  const auto start = std::chrono::steady_clock::now();
  const attnprof::bench::SyntheticRunResult r = attnprof::bench::write_synthetic_run(argv[1], options);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %llu events (%llu GPU records), %.1f MB, %zu cases, written in %.2f s\n", argv[1],
              static_cast<unsigned long long>(r.events), static_cast<unsigned long long>(r.gpu_records),
              static_cast<double>(r.bytes) / (1 << 20), r.summary.cases.size(), s);
  return 0;
}
