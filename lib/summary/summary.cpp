#include "summary/summary.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/document_file.hpp"
#include "core/errors.hpp"
#include "core/json_numbers.hpp"
#include "summary/case_accumulator.hpp"
#include "summary/kernel_category.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof {

const char* to_string(CaseStatus status) {
  switch (status) {
    case CaseStatus::ok: return "ok";
    case CaseStatus::failed: return "failed";
    case CaseStatus::skipped: return "skipped";
    case CaseStatus::interrupted: return "interrupted";
  }
  return "failed";
}

std::optional<CaseStatus> parse_case_status(const std::string& text) {
  for (CaseStatus s : {CaseStatus::ok, CaseStatus::failed, CaseStatus::skipped, CaseStatus::interrupted})
    if (text == to_string(s)) return s;
  return std::nullopt;
}

const char* to_string(StakeBasis basis) {
  switch (basis) {
    case StakeBasis::none: return "none";
    case StakeBasis::gpu_time: return "gpu_time";
    case StakeBasis::host_time: return "host_time";
    case StakeBasis::first_call: return "first_call";
    case StakeBasis::correctness: return "correctness";
  }
  return "none";
}

std::optional<StakeBasis> parse_stake_basis(const std::string& text) {
  for (StakeBasis b : {StakeBasis::none, StakeBasis::gpu_time, StakeBasis::host_time, StakeBasis::first_call,
                       StakeBasis::correctness})
    if (text == to_string(b)) return b;
  return std::nullopt;
}

namespace {

nlohmann::json stake_json(const Stake& s) {
  return {{"basis", to_string(s.basis)},
          {"cost", s.cost},
          {"us", s.us},
          {"share_percent", s.share_percent},
          {"bytes", s.bytes}};
}

// Summaries written before findings had stakes read as stake-less findings.
Stake stake_from_json(const nlohmann::json& j) {
  Stake s;
  if (!j.is_object()) return s;
  s.basis = parse_stake_basis(j.value("basis", "none")).value_or(StakeBasis::none);
  s.cost = j.value("cost", true);
  s.us = j.value("us", 0.0);
  s.share_percent = j.value("share_percent", 0.0);
  s.bytes = j.value("bytes", 0.0);
  return s;
}

}  // namespace

double median(std::vector<double> values) { return percentile(std::move(values), 50); }

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  if (p == 50) {
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  }
  // Nearest rank: the smallest value with at least p% of the sample at or below it.
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * values.size()));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

CaseSummary summarize_case(const CaseMeasurements& m, const trace::ActivityBatch& a) {
  CaseAccumulator accumulator;
  accumulator.add(a);
  return accumulator.summarize(m);
}

// ---- JSON ----

namespace {

// Dense MHA problems keep the fields summaries always had; grouped heads, bottom-right alignment
// and windows add theirs only where they apply.
nlohmann::json problem_json(const AttentionProblem& p) {
  nlohmann::json j = {{"batch", p.shape.batch},   {"heads", p.shape.heads},       {"seq_q", p.shape.seq_q},
                      {"seq_kv", p.shape.seq_kv}, {"head_dim", p.shape.head_dim}, {"dtype", std::string(to_string(p.dtype))},
                      {"causal", p.causal},       {"bias", p.has_bias}};
  if (p.shape.kv_heads() != p.shape.heads) j["heads_kv"] = p.shape.kv_heads();
  if (p.is_bottom_right()) j["alignment"] = "bottom_right";
  if (p.window.bounded()) j["window"] = {p.window.left, p.window.right};
  if (!p.shape.seq_lens_q.empty()) j["seq_lens_q"] = p.shape.seq_lens_q;
  if (!p.shape.seq_lens_kv.empty()) j["seq_lens_kv"] = p.shape.seq_lens_kv;
  if (p.shape.paged()) j["page_size"] = p.shape.page_size;
  if (p.is_backward()) j["pass"] = std::string(to_string(p.pass));
  return j;
}

AttentionProblem problem_from_json(const nlohmann::json& j) {
  AttentionProblem p;
  p.shape.batch = json_integer<int>(j.at("batch"), "batch");
  p.shape.heads = json_integer<int>(j.at("heads"), "heads");
  p.shape.seq_q = json_integer<int>(j.at("seq_q"), "seq_q");
  p.shape.seq_kv = json_integer<int>(j.at("seq_kv"), "seq_kv");
  p.shape.head_dim = json_integer<int>(j.at("head_dim"), "head_dim");
  const auto dtype = parse_dtype(j.at("dtype").get<std::string>());
  if (!dtype) throw std::runtime_error("unknown dtype " + j.at("dtype").dump());
  p.dtype = *dtype;
  p.causal = j.at("causal").get<bool>();
  p.has_bias = j.value("bias", false);
  p.shape.heads_kv = json_integer_or(j, "heads_kv", 0);
  if (p.shape.heads_kv < 0 || (p.shape.heads_kv > 0 && p.shape.heads % p.shape.heads_kv != 0))
    throw std::runtime_error("\"heads_kv\" must divide \"heads\", found " + std::to_string(p.shape.heads_kv));
  const std::string alignment = j.value("alignment", "top_left");
  if (alignment != "top_left" && alignment != "bottom_right")
    throw std::runtime_error("unknown alignment " + nlohmann::json(alignment).dump());
  p.alignment = alignment == "bottom_right" ? MaskAlignment::bottom_right : MaskAlignment::top_left;
  if (const auto w = j.find("window"); w != j.end()) {
    if (!w->is_array() || w->size() != 2) throw std::runtime_error("\"window\": expected [left, right]");
    p.window = {json_integer<int>((*w)[0], "window"), json_integer<int>((*w)[1], "window")};
  }
  auto lengths = [&](const char* key, int maximum) {
    std::vector<int> lens;
    const auto it = j.find(key);
    if (it == j.end()) return lens;
    if (!it->is_array() || it->size() != static_cast<std::size_t>(p.shape.batch))
      throw std::runtime_error(fmt::format("\"{}\": expected {} lengths, found {}", key, p.shape.batch, it->dump()));
    for (const nlohmann::json& len : *it) {
      lens.push_back(json_integer<int>(len, key));
      if (lens.back() < 0 || lens.back() > maximum)
        throw std::runtime_error(fmt::format("\"{}\": a length of {} is outside [0, {}]", key, lens.back(), maximum));
    }
    return lens;
  };
  p.shape.seq_lens_q = lengths("seq_lens_q", p.shape.seq_q);
  p.shape.seq_lens_kv = lengths("seq_lens_kv", p.shape.seq_kv);
  p.shape.page_size = json_integer_or(j, "page_size", 0);
  if (p.shape.page_size < 0) throw std::runtime_error("\"page_size\" must be positive");
  const std::string pass = j.value("pass", "forward");
  const std::optional<AttentionPass> parsed = parse_pass(pass);
  if (!parsed) throw std::runtime_error("unknown pass " + nlohmann::json(pass).dump());
  p.pass = *parsed;
  return p;
}

// [x, y, z] of a kernel summary; all zero when absent.
std::array<int, 3> dims_or_zero(const nlohmann::json& j, const char* key) {
  std::array<int, 3> dims{};
  const auto it = j.find(key);
  if (it == j.end()) return dims;
  if (!it->is_array() || it->size() != 3)
    throw std::runtime_error(fmt::format("\"{}\": expected [x, y, z], found {}", key, it->dump()));
  for (std::size_t i = 0; i < 3; ++i) dims[i] = json_integer<int>((*it)[i], key);
  return dims;
}

template <typename T>
void put_optional(nlohmann::json& j, const char* key, const std::optional<T>& value) {
  j[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

template <typename T>
std::optional<T> get_optional(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

// verification's "run_to_run" object: per gradient its elements and how many differed.
nlohmann::json repeatability_json(const GradientRepeatability& r) {
  nlohmann::json j = {{"checked", r.checked}};
  if (!r.note.empty()) j["note"] = r.note;
  if (!r.checked) return j;
  j["elements"] = r.total_elements();
  j["differing"] = r.total_differing();
  for (std::size_t t = 0; t < kGradientNames.size(); ++t)
    j["tensors"][kGradientNames[t]] = {{"elements", r.elements[t]}, {"differing", r.differing[t]}};
  return j;
}

GradientRepeatability repeatability_from_json(const nlohmann::json& j) {
  GradientRepeatability r;
  r.checked = j.value("checked", false);
  r.note = j.value("note", "");
  const nlohmann::json tensors = j.value("tensors", nlohmann::json::object());
  for (std::size_t t = 0; t < kGradientNames.size(); ++t) {
    const nlohmann::json one = tensors.value(kGradientNames[t], nlohmann::json::object());
    r.elements[t] = json_integer_or(one, "elements", std::int64_t{0});
    r.differing[t] = json_integer_or(one, "differing", std::int64_t{0});
  }
  return r;
}

nlohmann::json kernel_json(const KernelSummary& k) {
  nlohmann::json j = {{"name", k.name},
                      {"per_iter", k.per_iter},
                      {"gpu_us_per_iter", k.gpu_us_per_iter},
                      {"registers_per_thread", k.registers_per_thread},
                      {"grid", k.grid},
                      {"block", k.block},
                      {"shared_bytes", k.shared_bytes},
                      {"local_bytes_per_thread", k.local_bytes_per_thread},
                      {"occupancy_valid", k.occupancy_valid},
                      {"active_blocks_per_sm", k.active_blocks_per_sm},
                      {"theoretical_occupancy_percent", k.theoretical_occupancy_percent},
                      {"occupancy_limiter", k.occupancy_limiter},
                      {"occupancy_explanation", k.occupancy_explanation},
                      {"launch_api", k.launch_api},
                      {"category", kernel_category(k.name)}};
  put_optional(j, "achieved_occupancy_percent", k.achieved_occupancy_percent);
  put_optional(j, "dram_throughput_percent", k.dram_throughput_percent);
  put_optional(j, "dram_bytes_per_second", k.dram_bytes_per_second);
  put_optional(j, "tensor_pipe_percent", k.tensor_pipe_percent);
  return j;
}

KernelSummary kernel_from_json(const nlohmann::json& j) {
  KernelSummary k;
  k.name = j.at("name").get<std::string>();
  k.per_iter = j.at("per_iter").get<double>();
  k.gpu_us_per_iter = j.value("gpu_us_per_iter", 0.0);
  k.registers_per_thread = json_integer<int>(j.at("registers_per_thread"), "registers_per_thread");
  k.grid = dims_or_zero(j, "grid");
  k.block = dims_or_zero(j, "block");
  k.shared_bytes = json_integer_or(j, "shared_bytes", 0);
  k.local_bytes_per_thread = json_integer_or(j, "local_bytes_per_thread", 0);
  k.occupancy_valid = j.value("occupancy_valid", false);
  k.active_blocks_per_sm = json_integer_or(j, "active_blocks_per_sm", 0);
  k.theoretical_occupancy_percent = j.value("theoretical_occupancy_percent", 0.0);
  k.occupancy_limiter = j.value("occupancy_limiter", "");
  k.occupancy_explanation = j.value("occupancy_explanation", "");
  k.achieved_occupancy_percent = get_optional<double>(j, "achieved_occupancy_percent");
  k.dram_throughput_percent = get_optional<double>(j, "dram_throughput_percent");
  k.dram_bytes_per_second = get_optional<double>(j, "dram_bytes_per_second");
  k.tensor_pipe_percent = get_optional<double>(j, "tensor_pipe_percent");
  k.launch_api = j.value("launch_api", "");
  return k;
}

// summary.json's "memory" (docs/report.md lists the keys).
nlohmann::json memory_json(const CaseMemory& m) {
  nlohmann::json roles = nlohmann::json::array();
  for (const MemoryRole& r : m.roles)
    roles.push_back({{"role", r.role},
                     {"peak_bytes", r.peak_bytes},
                     {"max_bytes", r.max_bytes},
                     {"plan_bytes", r.plan_bytes},
                     {"iteration_bytes_per_iter", r.iteration_bytes_per_iter},
                     {"carried_bytes", r.carried_bytes}});
  nlohmann::json ops = nlohmann::json::array();
  for (const MemoryOperations& op : m.in_iterations)
    ops.push_back({{"operation", op.operation},
                   {"api", op.api},
                   {"role", op.role},
                   {"per_iter", op.per_iter},
                   {"bytes_per_iter", op.bytes_per_iter},
                   {"largest_bytes", op.largest_bytes},
                   {"sizes", op.sizes}});
  return {{"peak_bytes", m.peak_bytes},
          {"carried_bytes", m.carried_bytes},
          {"plan", {{"allocations", m.plan_allocations}, {"bytes", m.plan_bytes}}},
          {"per_iter",
           {{"allocations", m.allocations_per_iter},
            {"allocation_bytes", m.allocation_bytes_per_iter},
            {"releases", m.releases_per_iter},
            {"release_bytes", m.release_bytes_per_iter}}},
          {"roles", std::move(roles)},
          {"in_iterations", std::move(ops)},
          {"unmatched_releases", m.unmatched_releases},
          {"unmatched_release_bytes", m.unmatched_release_bytes},
          {"other_kind_records", m.other_kind_records}};
}

CaseMemory memory_from_json(const nlohmann::json& j) {
  CaseMemory m;
  m.peak_bytes = json_integer_or(j, "peak_bytes", std::uint64_t{0});
  m.carried_bytes = json_integer_or(j, "carried_bytes", std::uint64_t{0});
  const nlohmann::json plan = j.value("plan", nlohmann::json::object());
  m.plan_allocations = json_integer_or(plan, "allocations", std::uint64_t{0});
  m.plan_bytes = json_integer_or(plan, "bytes", std::uint64_t{0});
  const nlohmann::json per_iter = j.value("per_iter", nlohmann::json::object());
  m.allocations_per_iter = per_iter.value("allocations", 0.0);
  m.allocation_bytes_per_iter = per_iter.value("allocation_bytes", 0.0);
  m.releases_per_iter = per_iter.value("releases", 0.0);
  m.release_bytes_per_iter = per_iter.value("release_bytes", 0.0);
  for (const nlohmann::json& r : j.value("roles", nlohmann::json::array()))
    m.roles.push_back({r.at("role").get<std::string>(), json_integer_or(r, "peak_bytes", std::uint64_t{0}),
                       json_integer_or(r, "max_bytes", std::uint64_t{0}), json_integer_or(r, "plan_bytes", std::uint64_t{0}),
                       r.value("iteration_bytes_per_iter", 0.0), json_integer_or(r, "carried_bytes", std::uint64_t{0})});
  for (const nlohmann::json& op : j.value("in_iterations", nlohmann::json::array())) {
    m.in_iterations.push_back({op.at("operation").get<std::string>(), op.value("api", ""), op.value("role", ""),
                               op.value("per_iter", 0.0), op.value("bytes_per_iter", 0.0),
                               json_integer_or(op, "largest_bytes", std::uint64_t{0}), {}});
    for (const nlohmann::json& size : op.value("sizes", nlohmann::json::array()))
      m.in_iterations.back().sizes.push_back(json_integer<std::uint64_t>(size, "sizes"));
  }
  m.unmatched_releases = json_integer_or(j, "unmatched_releases", std::uint64_t{0});
  m.unmatched_release_bytes = json_integer_or(j, "unmatched_release_bytes", std::uint64_t{0});
  m.other_kind_records = json_integer_or(j, "other_kind_records", std::uint64_t{0});
  return m;
}

}  // namespace

namespace trace {

void to_json(nlohmann::json& j, const CaptureHealth& c) {
  j = {{"records", c.records},
       {"dropped_records", c.dropped_records},
       {"buffers_declined", c.buffers_declined},
       {"invalid_timestamps", c.invalid_timestamps},
       {"complete", c.complete()}};
}

void from_json(const nlohmann::json& j, CaptureHealth& c) {
  c.records = json_integer_or(j, "records", std::uint64_t{0});
  c.dropped_records = json_integer_or(j, "dropped_records", std::uint64_t{0});
  c.buffers_declined = json_integer_or(j, "buffers_declined", std::uint64_t{0});
  c.invalid_timestamps = json_integer_or(j, "invalid_timestamps", std::uint64_t{0});
}

}  // namespace trace

void to_json(nlohmann::json& j, const CaseSummary& c) {
  j = nlohmann::json::object();
  j["label"] = c.label;
  j["backend"] = c.backend;
  j["device"] = c.device;
  j["problem"] = problem_json(c.problem);
  j["status"] = to_string(c.status);
  j["reason"] = c.reason;
  j["verification"] = {{"checked", c.verified},
                       {"passed", c.verify_passed},
                       {"relative_error", c.relative_error},
                       {"bound", c.error_bound}};
  if (c.rows_verified > 0) j["verification"]["rows"] = c.rows_verified;
  if (c.repeatability) {
    // true or false once compared, null when not (the note says why).
    put_optional(j["verification"], "backward_deterministic", c.repeatability->deterministic());
    j["verification"]["run_to_run"] = repeatability_json(*c.repeatability);
  }
  j["timing"] = {{"iterations", c.iterations}, {"median_us", c.median_us}, {"p90_us", c.p90_us},
                 {"min_us", c.min_us},         {"tflops", c.tflops},       {"iteration_us", c.iteration_us}};
  const RooflinePoint& r = c.roofline;
  if (r.flops > 0) {
    nlohmann::json roofline = {{"flops", r.flops},         {"min_bytes", r.min_bytes}, {"gbps", r.gbps},
                               {"intensity", r.intensity}, {"bound", r.bound}};
    put_optional(roofline, "compute_roof_percent", r.compute_percent);
    put_optional(roofline, "bandwidth_roof_percent", r.bandwidth_percent);
    put_optional(roofline, "roof_percent", r.roof_percent);
    if (c.problem.is_backward()) roofline["flops_counted"] = kBackwardFlopsNote;
    j["roofline"] = std::move(roofline);
  }
  j["per_iter"] = {{"kernels", c.kernels_per_iter},
                   {"memcpy", c.memcpy_per_iter},
                   {"memcpy_bytes", c.memcpy_bytes_per_iter},
                   {"memset", c.memset_per_iter},
                   {"memset_bytes", c.memset_bytes_per_iter},
                   {"gpu_busy_us", c.gpu_busy_us_per_iter},
                   {"communication_kernels", communication_kernels_per_iter(c)},
                   {"communication_us", communication_us_per_iter(c)}};
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSummary& k : c.kernels) kernels.push_back(kernel_json(k));
  j["kernels"] = std::move(kernels);
  nlohmann::json ops = nlohmann::json::array();
  for (const MemoryOpSummary& op : c.memory_ops)
    ops.push_back({{"what", op.what}, {"per_iter", op.per_iter}, {"bytes_per_iter", op.bytes_per_iter},
                   {"gpu_us_per_iter", op.gpu_us_per_iter}, {"launch_api", op.launch_api}});
  j["memory_ops"] = std::move(ops);
  j["launch_apis"] = c.launch_apis;
  nlohmann::json host = {{"enqueue_us_per_iter", c.host_enqueue_us_per_iter}};
  put_optional(host, "plan_cold_ms", c.plan_cold_ms);
  put_optional(host, "plan_warm_ms", c.plan_warm_ms);
  j["host"] = std::move(host);
  if (c.memory) j["memory"] = memory_json(*c.memory);  // absent: no memory record (older summaries too)
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : c.findings)
    findings.push_back({{"kind", f.kind}, {"message", f.message}, {"evidence", f.evidence}, {"stake", stake_json(f.stake)}});
  j["findings"] = std::move(findings);
  nlohmann::json surprises = nlohmann::json::array();
  for (const Surprise& s : c.surprises)
    surprises.push_back({{"expectation", s.expectation}, {"field", s.field}, {"expected", s.expected},
                         {"observed", s.observed}, {"note", s.note}});
  j["surprises"] = std::move(surprises);
}

void from_json(const nlohmann::json& j, CaseSummary& c) {
  c.label = j.at("label").get<std::string>();
  c.backend = j.at("backend").get<std::string>();
  c.device = json_integer_or(j, "device", 0);  // summaries from before `run --devices`: one device, 0
  c.problem = problem_from_json(j.at("problem"));
  const auto status = parse_case_status(j.at("status").get<std::string>());
  if (!status) throw std::runtime_error("unknown case status " + j.at("status").dump());
  c.status = *status;
  c.reason = j.value("reason", "");
  const nlohmann::json& v = j.at("verification");
  c.verified = v.value("checked", false);
  c.verify_passed = v.value("passed", false);
  // nlohmann writes a non-finite double as null: an error that was inf or NaN (a kernel that wrote
  // NaN) reads back as +inf, still above every bound.
  const auto error = v.find("relative_error");
  c.relative_error = error == v.end() ? 0.0 : error->is_null() ? INFINITY : error->get<double>();
  c.error_bound = v.value("bound", 0.0);
  c.rows_verified = json_integer_or(v, "rows", std::int64_t{0});
  c.repeatability.reset();
  if (const auto r = v.find("run_to_run"); r != v.end() && r->is_object()) c.repeatability = repeatability_from_json(*r);
  const nlohmann::json& t = j.at("timing");
  c.iterations = json_integer_or(t, "iterations", 0);
  c.median_us = t.value("median_us", 0.0);
  c.p90_us = t.value("p90_us", 0.0);
  c.min_us = t.value("min_us", 0.0);
  c.tflops = t.value("tflops", 0.0);
  c.iteration_us = t.value("iteration_us", std::vector<double>{});
  if (const auto r = j.find("roofline"); r != j.end() && r->is_object()) {
    c.roofline.flops = r->value("flops", 0.0);
    c.roofline.min_bytes = r->value("min_bytes", 0.0);
    c.roofline.tflops = c.tflops;
    c.roofline.gbps = r->value("gbps", 0.0);
    c.roofline.intensity = r->value("intensity", 0.0);
    c.roofline.bound = r->value("bound", "");
    c.roofline.compute_percent = get_optional<double>(*r, "compute_roof_percent");
    c.roofline.bandwidth_percent = get_optional<double>(*r, "bandwidth_roof_percent");
    c.roofline.roof_percent = get_optional<double>(*r, "roof_percent");
  }
  const nlohmann::json& p = j.at("per_iter");
  c.kernels_per_iter = p.at("kernels").get<double>();
  c.memcpy_per_iter = p.at("memcpy").get<double>();
  c.memcpy_bytes_per_iter = p.value("memcpy_bytes", 0.0);
  c.memset_per_iter = p.at("memset").get<double>();
  c.memset_bytes_per_iter = p.value("memset_bytes", 0.0);
  c.gpu_busy_us_per_iter = p.value("gpu_busy_us", 0.0);
  c.kernels.clear();
  for (const nlohmann::json& k : j.at("kernels")) c.kernels.push_back(kernel_from_json(k));
  c.memory_ops.clear();
  for (const nlohmann::json& op : j.value("memory_ops", nlohmann::json::array()))
    c.memory_ops.push_back({op.at("what").get<std::string>(), op.at("per_iter").get<double>(),
                            op.value("bytes_per_iter", 0.0), op.value("gpu_us_per_iter", 0.0),
                            op.value("launch_api", "")});
  c.launch_apis = j.value("launch_apis", std::vector<std::string>{});
  const nlohmann::json host = j.value("host", nlohmann::json::object());
  c.host_enqueue_us_per_iter = host.value("enqueue_us_per_iter", 0.0);
  c.plan_cold_ms = get_optional<double>(host, "plan_cold_ms");
  c.plan_warm_ms = get_optional<double>(host, "plan_warm_ms");
  c.memory.reset();
  if (const auto memory = j.find("memory"); memory != j.end() && memory->is_object()) c.memory = memory_from_json(*memory);
  c.findings.clear();
  for (const nlohmann::json& f : j.value("findings", nlohmann::json::array()))
    c.findings.push_back({f.at("kind").get<std::string>(), f.at("message").get<std::string>(),
                          f.value("evidence", nlohmann::json()), stake_from_json(f.value("stake", nlohmann::json()))});
  c.surprises.clear();
  for (const nlohmann::json& s : j.value("surprises", nlohmann::json::array()))
    c.surprises.push_back({s.value("expectation", ""), s.at("field").get<std::string>(),
                           s.at("expected").get<std::string>(), s.at("observed").get<std::string>(),
                           s.value("note", "")});
}

void to_json(nlohmann::json& j, const RunSummary& r) {
  j = nlohmann::json::object();
  j[trace::summary_document::kSchemaKey] = trace::summary_document::kSchema;
  j["schema_version"] = 1;
  j["tool_version"] = r.tool_version;
  j["config"] = {{"name", r.config_name}, {"source", r.config_source}};
  j["created_at"] = r.created_at;
  j["device"] = {{"id", r.device.id},
                 {"name", r.device.name},
                 {"compute_capability", fmt::format("{}.{}", r.device.compute_major, r.device.compute_minor)},
                 {"sm_count", r.device.sm_count}};
  j["versions"] = {{"driver", r.driver_version},
                   {"cuda_runtime", r.cuda_runtime_version},
                   {"cupti", r.cupti_version},
                   {"cudnn", r.cudnn_version}};
  j["capture"] = r.capture;
  if (r.roofs)
    j["roofs"] = {{"tensor_tflops", r.roofs->tensor_tflops},
                  {"fp32_tflops", r.roofs->fp32_tflops},
                  {"gbps", r.roofs->gbps},
                  {"source", r.roofs->source}};
  j["interrupted"] = r.interrupted;
  j["cases"] = r.cases;
}

void from_json(const nlohmann::json& j, RunSummary& r) {
  if (j.value(trace::summary_document::kSchemaKey, std::string()) != trace::summary_document::kSchema)
    throw std::runtime_error("not an attnprof summary (missing \"schema\": \"attnprof-summary\")");
  r.tool_version = j.value("tool_version", "");
  const nlohmann::json config = j.value("config", nlohmann::json::object());
  r.config_name = config.value("name", "");
  r.config_source = config.value("source", "");
  r.created_at = j.value("created_at", "");
  const nlohmann::json device = j.value("device", nlohmann::json::object());
  r.device.id = json_integer_or(device, "id", 0);
  r.device.name = device.value("name", "");
  r.device.sm_count = json_integer_or(device, "sm_count", 0);
  // "9.0", as to_json writes it; anything else leaves the capability unknown (0.0).
  const std::string capability = device.value("compute_capability", "");
  if (int major = 0, minor = 0; std::sscanf(capability.c_str(), "%d.%d", &major, &minor) == 2) {
    r.device.compute_major = major;
    r.device.compute_minor = minor;
  }
  const nlohmann::json versions = j.value("versions", nlohmann::json::object());
  r.driver_version = versions.value("driver", "");
  r.cuda_runtime_version = versions.value("cuda_runtime", "");
  r.cupti_version = versions.value("cupti", "");
  r.cudnn_version = versions.value("cudnn", "");
  r.capture = j.value("capture", nlohmann::json::object()).get<trace::CaptureHealth>();
  if (const auto roofs = j.find("roofs"); roofs != j.end() && roofs->is_object())
    r.roofs = Roofs{roofs->value("tensor_tflops", 0.0), roofs->value("fp32_tflops", 0.0), roofs->value("gbps", 0.0),
                    roofs->value("source", "")};
  r.interrupted = j.value("interrupted", false);
  r.cases = j.at("cases").get<std::vector<CaseSummary>>();
}

RunSummary combine_summaries(const std::vector<LabelledSummary>& parts) {
  RunSummary combined;
  if (!parts.empty()) {
    combined = parts.front().summary;
    combined.cases.clear();
    combined.capture = {};
    combined.interrupted = false;
  }
  for (const LabelledSummary& part : parts) {
    combined.capture += part.summary.capture;
    combined.interrupted = combined.interrupted || part.summary.interrupted;
    for (CaseSummary c : part.summary.cases) {
      if (!part.label.empty()) c.label = "[" + part.label + "] " + c.label;
      combined.cases.push_back(std::move(c));
    }
  }
  return combined;
}

int run_exit_code(const RunSummary& summary, bool outputs_complete) {
  bool ok = outputs_complete && !summary.interrupted;
  for (const CaseSummary& c : summary.cases) ok = ok && (c.status == CaseStatus::ok || c.status == CaseStatus::skipped);
  return ok ? kExitOk : kExitPartialFailure;
}

RunSummary load_summary(const std::string& path) {
  const std::string text = read_file_text(path);  // plain or gzip; a DocumentReadError names the file
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    return j.get<RunSummary>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{} is not a valid attnprof summary: {}", path, e.what()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
}

void write_json_atomically(const std::string& path, const nlohmann::json& document) {
  write_text_atomically(path, document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void write_text_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) throw OutputFileError(fmt::format("cannot create the folder of {}: {}", path, ec.message()));
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw OutputFileError(fmt::format("cannot write {}: {}", temp, std::strerror(errno)));
    out << text;
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("writing {} failed: {}", temp, std::strerror(errno)));
  }
  std::filesystem::rename(temp, target);
}

}  // namespace attnprof
