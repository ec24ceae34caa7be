#include "diff/diff.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "diff/kernel_names.hpp"
#include "summary/render.hpp"

namespace attnprof {
namespace {

// A time change smaller than this share of the case's median time is no row of its own, whatever
// its relative size: a 1 us kernel that takes 1.3 us moves nothing.
constexpr double kNegligibleShareOfCase = 0.01;

// Counts and bytes per iteration are exact quotients: one more kernel in two million is a change.
bool differs(double a, double b) { return std::abs(a - b) > 1e-6; }

std::string status_text(const CaseSummary& c) {
  if (c.status == CaseStatus::ok && c.verified && !c.verify_passed) return "WRONG";
  return to_string(c.status);
}

std::string percent_change(double ratio) { return fmt::format("{:+.1f}%", 100.0 * (ratio - 1.0)); }

// ---- time ----

struct SideTiming {
  std::vector<double> samples;
  double median_us = 0;
};

// The timed iterations, or the stored median alone for a summary written without them.
SideTiming timing_of(const CaseSummary& c) {
  SideTiming t;
  for (double us : c.iteration_us)
    if (us > 0) t.samples.push_back(us);
  t.median_us = t.samples.empty() ? c.median_us : median(t.samples);
  return t;
}

// TFLOP/s is exact FLOPs over the median, so its ratio is the FLOP ratio over the time ratio; the
// FLOP ratio is 1 unless a --match rule paired different problems. Cases without a FLOP count (a
// program's ranges) have no throughput.
void add_throughput(const CaseSummary& a, const CaseSummary& b, TimeChange& t) {
  const double flops_a = attention_flops(a.problem), flops_b = attention_flops(b.problem);
  if (!(flops_a > 0 && flops_b > 0) || !t.ratio) return;
  const double flop_ratio = flops_b / flops_a;
  t.throughput_ratio = flop_ratio / *t.ratio;
  if (t.interval) t.throughput_interval = RatioInterval{flop_ratio / t.interval->high, flop_ratio / t.interval->low};
}

void judge(TimeChange& t, double noise_percent) {
  if (!t.interval) {
    const bool a_short = t.iterations_a < 2;
    t.verdict = Verdict::unknown;
    t.reason = fmt::format("{} has {} timed iteration{}: no interval", a_short ? "A" : "B",
                           a_short ? t.iterations_a : t.iterations_b,
                           (a_short ? t.iterations_a : t.iterations_b) == 1 ? "" : "s");
    return;
  }
  const double change_percent = 100.0 * (*t.ratio - 1.0);
  if (!t.interval->excludes(1.0)) {
    t.verdict = Verdict::within_noise;
    t.reason = fmt::format("{}: interval {} includes 1", percent_change(*t.ratio), interval_text(*t.interval));
  } else if (std::abs(change_percent) <= noise_percent) {
    t.verdict = Verdict::within_noise;
    t.reason = fmt::format("{}: inside the {:g}% drift floor (--noise)", percent_change(*t.ratio), noise_percent);
  } else {
    t.verdict = change_percent < 0 ? Verdict::faster : Verdict::slower;
    t.reason = fmt::format("{}: interval {} excludes 1, beyond the {:g}% drift floor", percent_change(*t.ratio),
                           interval_text(*t.interval), noise_percent);
  }
}

// ---- kernels and memory operations ----

struct Activity {
  double per_iter = 0;
  double us = 0;
  double bytes = 0;
  std::set<std::string> full_names;
};

std::map<std::string, Activity> kernels_by_name(const CaseSummary& c) {
  std::map<std::string, Activity> out;
  for (const KernelSummary& k : c.kernels) {
    Activity& a = out[normalize_kernel_name(k.name)];
    a.per_iter += k.per_iter;
    a.us += k.gpu_us_per_iter;
    a.full_names.insert(k.name);
  }
  return out;
}

std::map<std::string, Activity> memory_ops_by_name(const CaseSummary& c) {
  std::map<std::string, Activity> out;
  for (const MemoryOpSummary& op : c.memory_ops) {
    Activity& a = out[op.what];
    a.per_iter += op.per_iter;
    a.us += op.gpu_us_per_iter;
    a.bytes += op.bytes_per_iter;
  }
  return out;
}

struct ChangeThresholds {
  double noise_percent = kDefaultNoisePercent;
  double negligible_us = 0;  // time changes below this are not changes
};

bool time_moved(double us_a, double us_b, const ChangeThresholds& t) {
  if (std::abs(us_b - us_a) < t.negligible_us || !(us_a > 0)) return false;
  return 100.0 * std::abs(us_b / us_a - 1.0) > t.noise_percent;
}

std::vector<ActivityChange> activity_changes(const std::map<std::string, Activity>& a,
                                             const std::map<std::string, Activity>& b, const ChangeThresholds& t) {
  std::set<std::string> names;
  for (const auto& [name, _] : a) names.insert(name);
  for (const auto& [name, _] : b) names.insert(name);
  std::vector<ActivityChange> out;
  const Activity none;
  for (const std::string& name : names) {
    const auto in_a = a.find(name), in_b = b.find(name);
    const Activity& x = in_a == a.end() ? none : in_a->second;
    const Activity& y = in_b == b.end() ? none : in_b->second;
    ActivityChange c{name, ChangeKind::changed, x.per_iter, y.per_iter, x.us, y.us, x.bytes, y.bytes,
                     in_a != a.end() && in_b != b.end() && x.full_names != y.full_names,
                     {x.full_names.begin(), x.full_names.end()}, {y.full_names.begin(), y.full_names.end()}};
    if (in_a == a.end()) c.kind = ChangeKind::added;
    else if (in_b == b.end()) c.kind = ChangeKind::removed;
    else if (!differs(x.per_iter, y.per_iter) && !differs(x.bytes, y.bytes) && !c.instances_differ &&
             !time_moved(x.us, y.us, t))
      continue;
    out.push_back(std::move(c));
  }
  // The largest first: what a reader looks at before the rest.
  std::stable_sort(out.begin(), out.end(), [](const ActivityChange& l, const ActivityChange& r) {
    return std::max(l.us_a, l.us_b) > std::max(r.us_a, r.us_b);
  });
  return out;
}

// ---- fields ----

void add_field(std::vector<FieldChange>& out, std::string field, std::string a, std::string b) {
  if (a != b) out.push_back({std::move(field), std::move(a), std::move(b)});
}

std::string occupancy_text(const KernelSummary& k) {
  return k.occupancy_valid ? fmt::format("{:.1f}%", k.theoretical_occupancy_percent) : "?";
}

std::vector<FieldChange> dominant_kernel_changes(const CaseSummary& a, const CaseSummary& b) {
  std::vector<FieldChange> out;
  const KernelSummary* x = a.dominant_kernel();
  const KernelSummary* y = b.dominant_kernel();
  if (x == nullptr || y == nullptr) {
    if (x != y) add_field(out, "kernel", x ? normalize_kernel_name(x->name) : "-", y ? normalize_kernel_name(y->name) : "-");
    return out;
  }
  add_field(out, "kernel", normalize_kernel_name(x->name), normalize_kernel_name(y->name));
  add_field(out, "registers per thread", std::to_string(x->registers_per_thread), std::to_string(y->registers_per_thread));
  add_field(out, "shared memory", format_bytes(x->shared_bytes), format_bytes(y->shared_bytes));
  add_field(out, "local memory per thread", format_bytes(x->local_bytes_per_thread), format_bytes(y->local_bytes_per_thread));
  add_field(out, "block", format_dims(x->block), format_dims(y->block));
  add_field(out, "grid", format_dims(x->grid), format_dims(y->grid));
  add_field(out, "theoretical occupancy", occupancy_text(*x), occupancy_text(*y));
  add_field(out, "occupancy limiter", x->occupancy_limiter, y->occupancy_limiter);
  add_field(out, "launch api", x->launch_api, y->launch_api);
  return out;
}

// The per-iteration facts compared exactly, one row each. Peak device memory joins this table
// (as bytes) once the summary carries it.
struct CaseCount {
  const char* field;
  double (*read)(const CaseSummary&);
  bool bytes;
};
constexpr CaseCount kCaseCounts[] = {
    {"kernels/it", [](const CaseSummary& c) { return c.kernels_per_iter; }, false},
    {"memcpy/it", [](const CaseSummary& c) { return c.memcpy_per_iter; }, false},
    {"memcpy bytes/it", [](const CaseSummary& c) { return c.memcpy_bytes_per_iter; }, true},
    {"memset/it", [](const CaseSummary& c) { return c.memset_per_iter; }, false},
    {"memset bytes/it", [](const CaseSummary& c) { return c.memset_bytes_per_iter; }, true},
};

std::vector<FieldChange> count_changes(const CaseSummary& a, const CaseSummary& b) {
  std::vector<FieldChange> out;
  for (const CaseCount& count : kCaseCounts) {
    const double x = count.read(a), y = count.read(b);
    if (!differs(x, y)) continue;
    out.push_back({count.field, count.bytes ? format_bytes(x) : format_count(x), count.bytes ? format_bytes(y) : format_count(y)});
  }
  add_field(out, "launch apis", fmt::format("{}", fmt::join(a.launch_apis, ", ")), fmt::format("{}", fmt::join(b.launch_apis, ", ")));
  return out;
}

// By kind: a kind on one side only, once, with that side's first message of it.
std::vector<FindingChange> finding_changes(const CaseSummary& a, const CaseSummary& b) {
  auto kinds = [](const CaseSummary& c) {
    std::set<std::string> out;
    for (const Finding& f : c.findings) out.insert(f.kind);
    return out;
  };
  std::vector<FindingChange> out;
  auto add_missing = [&](const CaseSummary& side, const std::set<std::string>& other, ChangeKind change) {
    std::set<std::string> listed;
    for (const Finding& f : side.findings)
      if (!other.count(f.kind) && listed.insert(f.kind).second) out.push_back({f.kind, change, f.message});
  };
  add_missing(b, kinds(a), ChangeKind::added);
  add_missing(a, kinds(b), ChangeKind::removed);
  return out;
}

// ---- the run ----

RunHeader header_of(const DiffInput& input) {
  const RunSummary& s = input.summary;
  RunHeader h;
  h.path = input.path;
  h.source = input.source;
  h.origin = input.origin;
  h.device = s.device.name.empty() ? "unknown GPU" : s.device.name;
  if (s.device.compute_major > 0)
    h.device += fmt::format(" (sm_{}{}, {} SMs)", s.device.compute_major, s.device.compute_minor, s.device.sm_count);
  h.tool_version = s.tool_version;
  h.driver_version = s.driver_version;
  h.cuda_runtime_version = s.cuda_runtime_version;
  h.cudnn_version = s.cudnn_version;
  h.config = s.config_name.empty() ? s.config_source : s.config_name;
  h.created_at = s.created_at;
  h.cases = s.cases.size();
  h.capture_complete = s.capture.complete();
  return h;
}

std::vector<std::string> run_notes(const DiffInput& a, const DiffInput& b) {
  std::vector<std::string> notes;
  for (const auto& [input, side] : {std::pair{&a, "A"}, std::pair{&b, "B"}}) {
    for (const std::string& note : input->notes) notes.push_back(fmt::format("{}: {}", side, note));
    if (!input->summary.capture.complete())
      notes.push_back(fmt::format("{} lost records ({} dropped, {} buffer requests declined): its counts may be low", side,
                                  input->summary.capture.dropped_records, input->summary.capture.buffers_declined));
  }
  const RunSummary &x = a.summary, &y = b.summary;
  if (x.device.name != y.device.name)
    notes.push_back(fmt::format("A ran on {}, B on {}: every ratio includes the change of GPU",
                                x.device.name.empty() ? "an unknown GPU" : x.device.name,
                                y.device.name.empty() ? "an unknown GPU" : y.device.name));
  for (const auto& [what, va, vb] : {std::tuple{"driver", x.driver_version, y.driver_version},
                                     std::tuple{"CUDA runtime", x.cuda_runtime_version, y.cuda_runtime_version},
                                     std::tuple{"cuDNN", x.cudnn_version, y.cudnn_version},
                                     std::tuple{"attnprof", x.tool_version, y.tool_version}})
    if (!va.empty() && !vb.empty() && va != vb) notes.push_back(fmt::format("{} {} in A, {} in B", what, va, vb));
  return notes;
}

UnmatchedCase unmatched(const CaseSummary& c, const CaseMatching& m) { return {c.label, match_key_text(c, m), status_text(c)}; }

}  // namespace

double parse_noise_percent(std::string_view text) {
  std::string number(text);
  while (!number.empty() && number.back() == ' ') number.pop_back();
  if (!number.empty() && number.back() == '%') number.pop_back();
  errno = 0;
  char* end = nullptr;
  const double value = number.empty() ? NAN : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || errno != 0 || !std::isfinite(value) || value < 0 ||
      value > 1000)
    throw UsageError(fmt::format("--noise '{}': expected a percent from 0 to 1000, such as 10 or 10%", text));
  return value;
}

std::string pair_label(const CaseDiff& c, std::string_view arrow) {
  const std::string &a = c.label_a, &b = c.label_b;
  if (a == b) return a;
  // The shared tail, cut back to a word boundary so "fa2" and "hopper" stay whole.
  std::size_t shared = 0;
  while (shared < a.size() && shared < b.size() && a[a.size() - 1 - shared] == b[b.size() - 1 - shared]) ++shared;
  while (shared > 0 && a[a.size() - shared] != ' ') --shared;
  if (shared == 0 || shared == a.size() || shared == b.size()) return fmt::format("{} {} {}", a, arrow, b);
  return fmt::format("{} {} {}{}", a.substr(0, a.size() - shared), arrow, b.substr(0, b.size() - shared),
                     a.substr(a.size() - shared));
}

std::string ratio_text(double ratio) { return fmt::format("{:.3f}x", ratio); }

std::string interval_text(const RatioInterval& r) { return fmt::format("[{:.3f}, {:.3f}]", r.low, r.high); }

std::string_view to_string(Verdict verdict) {
  for (const VerdictName& v : kVerdictNames)
    if (v.verdict == verdict) return v.name;
  return "unknown";
}

std::string_view to_string(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::added: return "added";
    case ChangeKind::removed: return "removed";
    case ChangeKind::changed: return "changed";
  }
  return "changed";
}

bool CaseDiff::has_changes() const {
  return status_a != status_b || !kernels.empty() || !memory_ops.empty() || !dominant_kernel.empty() || !counts.empty() ||
         !findings.empty();
}

int DiffReport::count(Verdict verdict) const {
  return static_cast<int>(
      std::count_if(cases.begin(), cases.end(), [&](const CaseDiff& c) { return c.time.verdict == verdict; }));
}

TimeChange compare_times(const CaseSummary& a, const CaseSummary& b, const DiffOptions& options) {
  TimeChange t;
  if (a.status != CaseStatus::ok || b.status != CaseStatus::ok) {
    const bool a_ran = a.status == CaseStatus::ok;
    t.reason = fmt::format("{} did not run ({})", a_ran ? "B" : "A", to_string(a_ran ? b.status : a.status));
    return t;
  }
  const SideTiming x = timing_of(a), y = timing_of(b);
  t.iterations_a = static_cast<int>(x.samples.size());
  t.iterations_b = static_cast<int>(y.samples.size());
  t.median_a_us = x.median_us;
  t.median_b_us = y.median_us;
  if (!(x.median_us > 0 && y.median_us > 0)) {
    t.reason = fmt::format("{} has no time", x.median_us > 0 ? "B" : "A");
    return t;
  }
  t.ratio = y.median_us / x.median_us;
  t.interval = bootstrap_median_ratio(x.samples, y.samples, options.bootstrap);
  add_throughput(a, b, t);
  judge(t, options.noise_percent);
  return t;
}

CaseDiff diff_cases(const CaseSummary& a, const CaseSummary& b, const DiffOptions& options) {
  CaseDiff d;
  d.label_a = a.label;
  d.label_b = b.label;
  d.status_a = status_text(a);
  d.status_b = status_text(b);
  d.time = compare_times(a, b, options);
  if (a.status != CaseStatus::ok || b.status != CaseStatus::ok) return d;
  const ChangeThresholds thresholds{options.noise_percent, kNegligibleShareOfCase * d.time.median_a_us};
  d.kernels = activity_changes(kernels_by_name(a), kernels_by_name(b), thresholds);
  d.memory_ops = activity_changes(memory_ops_by_name(a), memory_ops_by_name(b), thresholds);
  d.dominant_kernel = dominant_kernel_changes(a, b);
  d.counts = count_changes(a, b);
  d.findings = finding_changes(a, b);
  return d;
}

DiffReport diff_runs(const DiffInput& a, const DiffInput& b, const DiffOptions& options) {
  DiffReport report;
  report.a = header_of(a);
  report.b = header_of(b);
  report.options = options;
  const std::vector<CaseSummary>&x = a.summary.cases, &y = b.summary.cases;
  const CasePairing pairing = pair_cases(x, y, options.matching);
  for (const auto& [i, j] : pairing.pairs) {
    CaseDiff d = diff_cases(x[i], y[j], options);
    d.key = match_key_text(x[i], options.matching);
    report.cases.push_back(std::move(d));
  }
  for (std::size_t i : pairing.only_a) report.only_a.push_back(unmatched(x[i], options.matching));
  for (std::size_t j : pairing.only_b) report.only_b.push_back(unmatched(y[j], options.matching));
  report.notes = run_notes(a, b);
  report.notes.insert(report.notes.end(), pairing.notes.begin(), pairing.notes.end());
  return report;
}

}  // namespace attnprof
