#include "summary/case_accumulator.hpp"

#include <algorithm>

#include "trace/annotate.hpp"

namespace attnprof {
namespace {

bool in_timed_iteration(const trace::SweepTag& tag) { return tag.phase == trace::Phase::iteration; }

template <typename Record>
std::uint64_t duration_ns(const Record& r) {
  return r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
}

void add_launch_api(std::vector<std::string>& apis, const std::string& api) {
  if (!api.empty() && std::find(apis.begin(), apis.end(), api) == apis.end()) apis.push_back(api);
}

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

void CaseAccumulator::extend_span(const trace::SweepTag& tag, std::uint64_t start_ns, std::uint64_t end_ns) {
  auto [it, inserted] = spans_.try_emplace(tag.iteration, start_ns, end_ns);
  if (!inserted) {
    it->second.first = std::min(it->second.first, start_ns);
    it->second.second = std::max(it->second.second, end_ns);
  }
}

void CaseAccumulator::add(const trace::KernelActivity& k) {
  if (!in_timed_iteration(k.tag)) return;
  extend_span(k.tag, k.start_ns, k.end_ns);
  auto [it, inserted] = kernel_index_.try_emplace(k.name, kernels_.size());
  if (inserted) {
    KernelTotals& t = kernels_.emplace_back();
    KernelSummary& s = t.first;
    s.name = k.name;
    s.registers_per_thread = k.registers_per_thread;
    s.grid = k.grid;
    s.block = k.block;
    s.shared_bytes = k.static_shared_bytes + k.dynamic_shared_bytes;
    s.local_bytes_per_thread = k.local_bytes_per_thread;
    s.occupancy_valid = k.occupancy.valid;
    s.active_blocks_per_sm = k.occupancy.active_blocks_per_sm;
    s.theoretical_occupancy_percent = k.occupancy.theoretical_percent;
    s.occupancy_limiter = k.occupancy.valid ? k.occupancy.limiter : k.occupancy.error;
    s.occupancy_explanation = explain_occupancy(trace::resources_of(k), k.occupancy);
    s.achieved_occupancy_percent = k.achieved_occupancy_percent;
    s.dram_throughput_percent = k.dram_throughput_percent;
    s.dram_bytes_per_second = k.dram_bytes_per_second;
    s.tensor_pipe_percent = k.tensor_pipe_percent;
    s.launch_api = k.launch_api;
  }
  KernelTotals& t = kernels_[it->second];
  const std::uint64_t ns = duration_ns(k);
  t.launches += 1;
  t.ns += ns;
  kernel_count_ += 1;
  busy_ns_ += ns;
  add_launch_api(kernel_apis_, k.launch_api);
}

template <typename Transfer>
void CaseAccumulator::add_transfer(const Transfer& t, const std::string& op_name, std::uint64_t& count,
                                   std::uint64_t& bytes, std::vector<std::string>& apis) {
  extend_span(t.tag, t.start_ns, t.end_ns);
  OpTotals& op = ops_[op_name];
  op.count += 1;
  op.bytes += t.bytes;
  op.ns += duration_ns(t);
  op.launch_api = t.launch_api;
  count += 1;
  bytes += t.bytes;
  busy_ns_ += duration_ns(t);
  add_launch_api(apis, t.launch_api);
}

void CaseAccumulator::add(const trace::MemcpyActivity& m) {
  if (!in_timed_iteration(m.tag)) return;
  add_transfer(m, std::string("memcpy ") + to_string(m.kind), memcpy_count_, memcpy_bytes_, memcpy_apis_);
}

void CaseAccumulator::add(const trace::MemsetActivity& m) {
  if (!in_timed_iteration(m.tag)) return;
  add_transfer(m, "memset", memset_count_, memset_bytes_, memset_apis_);
}

void CaseAccumulator::add(const trace::MemoryActivity& m) { memory_.add(m); }

void CaseAccumulator::add(const trace::ActivityBatch& batch) {
  for (const trace::KernelActivity& k : batch.kernels) add(k);
  for (const trace::MemcpyActivity& m : batch.memcpys) add(m);
  for (const trace::MemsetActivity& m : batch.memsets) add(m);
  for (const trace::MemoryActivity& m : batch.memory) add(m);
}

std::vector<double> CaseAccumulator::span_us() const {
  std::vector<double> out;
  out.reserve(spans_.size());
  for (const auto& [iteration, span] : spans_) out.push_back(us(span.second - span.first));
  return out;
}

CaseSummary CaseAccumulator::summarize(const CaseMeasurements& m) const {
  CaseSummary c;
  c.label = m.label;
  c.backend = m.backend;
  c.problem = m.problem;
  c.iterations = m.iterations;
  c.iteration_us = m.iteration_us;
  c.median_us = median(m.iteration_us);
  c.p90_us = percentile(m.iteration_us, 90);
  c.min_us = m.iteration_us.empty() ? 0 : *std::min_element(m.iteration_us.begin(), m.iteration_us.end());
  c.roofline = roofline_point(m.problem, c.median_us, std::nullopt);  // the roofs: summary/roofline.hpp
  c.tflops = c.roofline.tflops;
  c.plan_cold_ms = m.plan_cold_ms;
  c.plan_warm_ms = m.plan_warm_ms;
  c.host_enqueue_us_per_iter = m.host_enqueue_us_per_iter;
  c.verified = m.verified;
  c.verify_passed = m.verify_passed;
  c.relative_error = m.relative_error;
  c.error_bound = m.error_bound;
  c.rows_verified = m.rows_verified;
  c.repeatability = m.repeatability;

  const double iters = m.iterations > 0 ? m.iterations : 1;
  for (const KernelTotals& t : kernels_) {
    KernelSummary s = t.first;
    s.per_iter = static_cast<double>(t.launches) / iters;
    s.gpu_us_per_iter = us(t.ns) / iters;
    c.kernels.push_back(std::move(s));
  }
  // Largest GPU time first; ties keep the order of first launch.
  std::stable_sort(c.kernels.begin(), c.kernels.end(),
                   [](const KernelSummary& x, const KernelSummary& y) { return x.gpu_us_per_iter > y.gpu_us_per_iter; });
  for (const auto& [what, op] : ops_)
    c.memory_ops.push_back({what, static_cast<double>(op.count) / iters, static_cast<double>(op.bytes) / iters,
                            us(op.ns) / iters, op.launch_api});

  c.kernels_per_iter = static_cast<double>(kernel_count_) / iters;
  c.memcpy_per_iter = static_cast<double>(memcpy_count_) / iters;
  c.memcpy_bytes_per_iter = static_cast<double>(memcpy_bytes_) / iters;
  c.memset_per_iter = static_cast<double>(memset_count_) / iters;
  c.memset_bytes_per_iter = static_cast<double>(memset_bytes_) / iters;
  c.gpu_busy_us_per_iter = us(busy_ns_) / iters;
  c.launch_apis = kernel_apis_;
  for (const std::string& api : memcpy_apis_) add_launch_api(c.launch_apis, api);
  for (const std::string& api : memset_apis_) add_launch_api(c.launch_apis, api);

  std::optional<Span> timed;
  for (const auto& [iteration, span] : spans_)
    timed = timed ? Span{std::min(timed->first, span.first), std::max(timed->second, span.second)} : span;
  c.memory = memory_.summarize(m.iterations, timed);
  return c;
}

}  // namespace attnprof
