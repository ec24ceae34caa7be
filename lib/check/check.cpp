#include "check/check.hpp"

#include "summary/findings.hpp"
#include "summary/render.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace attnprof {

const char* to_string(DifferenceKind kind) {
  switch (kind) {
    case DifferenceKind::regression: return "regression";
    case DifferenceKind::improvement: return "improvement";
    case DifferenceKind::added_case: return "added case";
    case DifferenceKind::missing_case: return "missing case";
    case DifferenceKind::info: return "info";
  }
  return "info";
}

int CheckReport::failures() const {
  return static_cast<int>(std::count_if(differences.begin(), differences.end(), [](const Difference& d) { return d.fails; }));
}

namespace {

// Six significant digits: 20.05 against 20.1 must not both print as "20.1".
std::string count_text(double value) {
  return std::abs(value - std::round(value)) < 1e-9 ? fmt::format("{:.0f}", value) : fmt::format("{:.6g}", value);
}

// Counts and bytes per iteration are exact quotients: one more kernel in two million is a change.
bool differs(double a, double b) { return std::abs(a - b) > 1e-6; }

class CaseComparer {
 public:
  CaseComparer(const CaseSummary& base, const CaseSummary& cur, const CheckOptions& options, CheckReport& report)
      : base_(base), cur_(cur), options_(options), report_(report) {}

  void compare() {
    if (base_.status == CaseStatus::skipped && cur_.status == CaseStatus::skipped) return;
    if (cur_.status != base_.status || (base_.verify_passed && cur_.verified && !cur_.verify_passed)) {
      // A case that now fails is worse whatever it was (skipped included); one that no longer runs
      // (skipped, interrupted) is worse than one that ran.
      const bool worse = cur_.status == CaseStatus::failed ||
                         (base_.status == CaseStatus::ok && cur_.status != CaseStatus::ok);
      add("status", status_text(base_), status_text(cur_) + (cur_.reason.empty() ? "" : ": " + cur_.reason),
          worse ? DifferenceKind::regression : DifferenceKind::info, worse);
    }
    if (base_.status != CaseStatus::ok || cur_.status != CaseStatus::ok) return;
    count("kernels_per_iter", base_.kernels_per_iter, cur_.kernels_per_iter);
    count("memcpy_per_iter", base_.memcpy_per_iter, cur_.memcpy_per_iter);
    count("memcpy_bytes_per_iter", base_.memcpy_bytes_per_iter, cur_.memcpy_bytes_per_iter);
    count("memset_per_iter", base_.memset_per_iter, cur_.memset_per_iter);
    kernels();
    timing();
    throughput();
    memory();
    if (options_.expectations)
      for (const Surprise& s : cur_.surprises)
        add("surprise " + s.field, s.expected, s.observed + " (" + s.expectation + ")", DifferenceKind::regression, true);
  }

 private:
  static std::string status_text(const CaseSummary& c) {
    if (c.status == CaseStatus::ok && c.verified && !c.verify_passed) return "wrong result";
    return to_string(c.status);
  }

  void add(std::string field, std::string base, std::string cur, DifferenceKind kind, bool fails) {
    report_.differences.push_back({base_.label, std::move(field), std::move(base), std::move(cur), kind, fails});
  }

  // More is a regression (an added kernel, a new copy); fewer is reported as an improvement.
  void count(const char* field, double base, double cur) {
    if (!differs(base, cur)) return;
    const bool more = cur > base;
    add(field, count_text(base), count_text(cur), more ? DifferenceKind::regression : DifferenceKind::improvement, more);
  }

  void kernels() {
    std::map<std::string, const KernelSummary*> base, cur;
    for (const KernelSummary& k : base_.kernels) base[k.name] = &k;
    for (const KernelSummary& k : cur_.kernels) cur[k.name] = &k;
    for (const auto& [name, k] : cur)
      if (!base.count(name)) add("new kernel", "-", name, DifferenceKind::regression, true);
    for (const auto& [name, k] : base)
      if (!cur.count(name)) add("kernel gone", name, "-", DifferenceKind::info, false);
    for (const auto& [name, b] : base) {
      auto it = cur.find(name);
      if (it == cur.end()) continue;
      const KernelSummary* c = it->second;
      if (b->registers_per_thread != c->registers_per_thread)
        add("registers per thread: " + shorten_name(name), std::to_string(b->registers_per_thread),
            std::to_string(c->registers_per_thread), DifferenceKind::regression, true);
      if (b->launch_api != c->launch_api)
        add("launch api: " + shorten_name(name), b->launch_api, c->launch_api, DifferenceKind::regression, true);
      if (differs(b->per_iter, c->per_iter)) count(("launches per iter: " + shorten_name(name)).c_str(), b->per_iter, c->per_iter);
    }
  }

  void timing() {
    if (!options_.time_tolerance_percent || base_.median_us <= 0) return;
    const double change = 100.0 * (cur_.median_us - base_.median_us) / base_.median_us;
    if (std::abs(change) <= *options_.time_tolerance_percent) return;
    const bool slower = change > 0;
    add("median time", fmt::format("{:.1f} us", base_.median_us),
        fmt::format("{:.1f} us ({:+.1f}%, tolerance {:.1f}%)", cur_.median_us, change, *options_.time_tolerance_percent),
        slower ? DifferenceKind::regression : DifferenceKind::improvement, slower);
  }

  void throughput() {
    if (!options_.throughput_tolerance_percent) return;
    const bool memory_bound = cur_.roofline.bound == "memory";
    const double was = memory_bound ? base_.roofline.gbps : base_.tflops;
    const double now = memory_bound ? cur_.roofline.gbps : cur_.tflops;
    if (was <= 0 || now <= 0) return;
    const double change = 100.0 * (now - was) / was;
    if (std::abs(change) <= *options_.throughput_tolerance_percent) return;
    const bool slower = change < 0;
    const char* unit = memory_bound ? "GB/s" : "TFLOP/s";
    add(memory_bound ? "GB/s" : "TFLOP/s", fmt::format("{:.1f} {}", was, unit),
        fmt::format("{:.1f} {} ({:+.1f}%, tolerance {:.1f}%)", now, unit, change, *options_.throughput_tolerance_percent),
        slower ? DifferenceKind::regression : DifferenceKind::improvement, slower);
  }

  // The peak device memory of the timed iterations; a side without memory records is said, not judged.
  void memory() {
    if (!options_.memory_tolerance_percent || (!base_.memory && !cur_.memory)) return;
    const auto text = [](const std::optional<CaseMemory>& m) {
      return m ? fmt::format("{} bytes ({})", m->peak_bytes, format_bytes(static_cast<double>(m->peak_bytes)))
               : std::string("not recorded");
    };
    if (!base_.memory || !cur_.memory) {
      add("peak memory", text(base_.memory), text(cur_.memory), DifferenceKind::info, false);
      return;
    }
    const double was = static_cast<double>(base_.memory->peak_bytes), now = static_cast<double>(cur_.memory->peak_bytes);
    if (was == now) return;
    // From nothing held to something is growth beyond any tolerance.
    const double change = was > 0 ? 100.0 * (now - was) / was : INFINITY;
    if (std::abs(change) <= *options_.memory_tolerance_percent) return;
    const bool more = now > was;
    add("peak memory", text(base_.memory),
        fmt::format("{} ({:+.1f}%, tolerance {:.1f}%)", text(cur_.memory), change, *options_.memory_tolerance_percent),
        more ? DifferenceKind::regression : DifferenceKind::improvement, more);
  }

  const CaseSummary& base_;
  const CaseSummary& cur_;
  const CheckOptions& options_;
  CheckReport& report_;
};

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters even when escaped.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') out += '?';
        else out += ch;
    }
  }
  return out;
}

}  // namespace

CheckReport compare_summaries(const RunSummary& baseline, const RunSummary& current, const CheckOptions& options) {
  CheckReport report;
  // Cases are matched by label: two cases of one label in either summary cannot be told apart.
  const auto refuse_shared_labels = [&](const RunSummary& summary, const char* which) {
    std::set<std::string> labels;
    for (const CaseSummary& c : summary.cases)
      if (!labels.insert(c.label).second)
        report.differences.push_back({c.label, "case", fmt::format("label given to two cases of the {}", which),
                                      "cannot be compared", DifferenceKind::regression, true});
  };
  refuse_shared_labels(baseline, "baseline");
  refuse_shared_labels(current, "summary");
  std::map<std::string, const CaseSummary*> base_cases;
  for (const CaseSummary& c : baseline.cases) base_cases[c.label] = &c;
  std::set<std::string> seen;
  for (const CaseSummary& c : current.cases) {
    seen.insert(c.label);
    auto it = base_cases.find(c.label);
    if (it == base_cases.end()) {
      report.differences.push_back({c.label, "case", "-", to_string(c.status), DifferenceKind::added_case, false});
      continue;
    }
    report.cases_compared.push_back(c.label);
    CaseComparer(*it->second, c, options, report).compare();
  }
  // A case that vanished could hide any regression: it fails until the baseline is updated.
  for (const CaseSummary& c : baseline.cases)
    if (!seen.count(c.label))
      report.differences.push_back({c.label, "case", to_string(c.status), "-", DifferenceKind::missing_case, true});
  if (!current.capture.complete())
    report.differences.push_back({"", "capture", "complete",
                                  fmt::format("{} records dropped, {} buffer requests declined: counts may be low",
                                              current.capture.dropped_records, current.capture.buffers_declined),
                                  DifferenceKind::regression, true});
  return report;
}

std::string render_check_table(const CheckReport& report, bool markdown) {
  std::string out;
  if (report.differences.empty()) {
    return fmt::format("check passed: {} cases compared, no differences\n", report.cases_compared.size());
  }
  std::size_t w_case = 4, w_field = 5, w_base = 8, w_cur = 7;
  for (const Difference& d : report.differences) {
    w_case = std::max(w_case, d.case_label.size());
    w_field = std::max(w_field, d.field.size());
    w_base = std::max(w_base, d.baseline.size());
    w_cur = std::max(w_cur, d.current.size());
  }
  w_field = std::min<std::size_t>(w_field, 70);
  const char* sep = markdown ? " | " : "  ";
  auto row = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d, const std::string& e,
                 const std::string& f) {
    out += fmt::format("{}{:<{}}{}{:<{}}{}{:<{}}{}{:<{}}{}{:<12}{}{}{}\n", markdown ? "| " : "", a, w_case, sep, b, w_field,
                       sep, c, w_base, sep, d, w_cur, sep, e, sep, f, markdown ? " |" : "");
  };
  row("case", "field", "baseline", "current", "kind", "verdict");
  row(std::string(w_case, '-'), std::string(w_field, '-'), std::string(w_base, '-'), std::string(w_cur, '-'),
      std::string(12, '-'), "-------");
  for (const Difference& d : report.differences)
    row(d.case_label.empty() ? "(run)" : d.case_label, d.field.substr(0, w_field), d.baseline, d.current,
        to_string(d.kind), d.fails ? "FAIL" : "ok");
  out += fmt::format("\ncheck {}: {} failing difference(s) over {} compared case(s)\n", report.passed() ? "passed" : "FAILED",
                     report.failures(), report.cases_compared.size());
  return out;
}

std::string render_check_json(const CheckReport& report) {
  nlohmann::json j = {{"passed", report.passed()}, {"failures", report.failures()}, {"cases_compared", report.cases_compared}};
  nlohmann::json diffs = nlohmann::json::array();
  for (const Difference& d : report.differences)
    diffs.push_back({{"case", d.case_label}, {"field", d.field}, {"baseline", d.baseline}, {"current", d.current},
                     {"kind", to_string(d.kind)}, {"fails", d.fails}});
  j["differences"] = std::move(diffs);
  return j.dump(2) + "\n";
}

std::string render_junit(const CheckReport& report) {
  std::map<std::string, std::vector<const Difference*>> by_case;
  std::vector<std::string> order = report.cases_compared;
  for (const Difference& d : report.differences) {
    const std::string key = d.case_label.empty() ? "(run)" : d.case_label;
    if (!by_case.count(key) && std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
    by_case[key].push_back(&d);
  }
  std::string body;
  for (const std::string& name : order) {
    body += fmt::format("    <testcase classname=\"attnprof.check\" name=\"{}\">\n", xml_escape(name));
    std::string failures;
    for (const Difference* d : by_case[name])
      if (d->fails)
        failures += fmt::format("{}: baseline {}, current {} ({})\n", d->field, d->baseline, d->current, to_string(d->kind));
    if (!failures.empty())
      body += fmt::format("      <failure message=\"{}\">{}</failure>\n",
                          xml_escape(failures.substr(0, failures.find('\n'))), xml_escape(failures));
    body += "    </testcase>\n";
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"attnprof check\" tests=\"{}\" "
      "failures=\"{}\">\n{}  </testsuite>\n</testsuites>\n",
      order.size(), std::count_if(order.begin(), order.end(), [&](const std::string& n) {
        return std::any_of(by_case[n].begin(), by_case[n].end(), [](const Difference* d) { return d->fails; });
      }),
      body);
}

}  // namespace attnprof
