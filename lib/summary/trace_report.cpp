#include "summary/trace_report.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "check/expectations.hpp"
#include "config/config.hpp"
#include "core/version.hpp"
#include "summary/findings.hpp"
#include "summary/program_summary.hpp"
#include "trace/annotation_cases.hpp"
#include "trace/chrome_trace_reader.hpp"

namespace attnprof {
namespace {

using Span = std::pair<std::uint64_t, std::uint64_t>;

// GPU records of one case our writer tagged, kept only for its timed iterations.
struct TaggedCase {
  std::string label;
  std::string backend;
  trace::ActivityBatch timed;
  std::map<int, Span> spans;  // iteration -> first start, last end
};

class ReportBuilder {
 public:
  void on_event(const trace::TraceEvent& e, const trace::TraceDocument& doc) {
    if (e.ph == "M") {
      if (!own_trace_ && e.name == "process_name" && e.args.metadata_name &&
          e.args.metadata_name->rfind("attnprof", 0) == 0) {
        own_trace_ = true;
        converter_.compute_missing_occupancy = false;
      }
      return;
    }
    std::optional<trace::Activity> activity = converter_.convert(e, doc);
    if (!activity) return;
    std::visit([&](auto&& a) { take(std::move(a), e); }, std::move(*activity));
  }

  TraceReport finish(const trace::TraceDocument& doc, const TraceReportOptions& options) {
    TraceReport report;
    report.events = doc.events;
    device_ = converter_.device_for(0, doc);
    if (gpu_records_ == 0) report.notes.push_back("the trace holds no GPU activity (kernel, gpu_memcpy or gpu_memset events)");
    if (!tagged_.empty()) build_from_tags(doc, options, report);
    else build_from_annotations(doc, report);
    for (const std::string& note : converter_.notes()) report.notes.push_back(note);
    return report;
  }

 private:
  template <typename Record>
  void take_gpu(Record&& r, const trace::TraceEvent& e, std::vector<std::decay_t<Record>> trace::ActivityBatch::*member) {
    ++gpu_records_;
    if (r.tag.case_index >= 0) {
      TaggedCase& c = tagged_[r.tag.case_index];
      if (c.label.empty() && e.args.case_label) c.label = *e.args.case_label;
      if (c.backend.empty() && e.args.backend) c.backend = *e.args.backend;
      if (r.tag.phase != trace::Phase::iteration) return;  // only timed iterations are counted
      auto [it, inserted] = c.spans.try_emplace(r.tag.iteration, r.start_ns, r.end_ns);
      if (!inserted) {
        it->second.first = std::min(it->second.first, r.start_ns);
        it->second.second = std::max(it->second.second, r.end_ns);
      }
      (c.timed.*member).push_back(std::forward<Record>(r));
    } else {
      (untagged_.*member).push_back(std::forward<Record>(r));
    }
  }
  void take(trace::KernelActivity&& k, const trace::TraceEvent& e) { take_gpu(std::move(k), e, &trace::ActivityBatch::kernels); }
  void take(trace::MemcpyActivity&& m, const trace::TraceEvent& e) { take_gpu(std::move(m), e, &trace::ActivityBatch::memcpys); }
  void take(trace::MemsetActivity&& m, const trace::TraceEvent& e) { take_gpu(std::move(m), e, &trace::ActivityBatch::memsets); }
  void take(trace::ApiCall&& c, const trace::TraceEvent&) {
    // Only where it ran, when and what: enough to join GPU work to the range around its launch.
    auto [name, inserted] = api_ids_.try_emplace(c.name, static_cast<std::uint32_t>(api_names_.size()));
    if (inserted) api_names_.push_back(c.name);
    launch_sites_[c.correlation] = {{c.thread, c.start_ns}, name->second};
  }
  void take(trace::Annotation&& a, const trace::TraceEvent&) {
    if (!a.on_gpu) annotations_.push_back(std::move(a));
  }
  void take(trace::OverheadActivity&&, const trace::TraceEvent&) {}

  std::optional<std::vector<Expectation>> expectations(const trace::TraceDocument& doc, const TraceReportOptions& options,
                                                       TraceReport& report) const {
    if (options.known_backends.empty() || !doc.attnprof.is_object()) return std::nullopt;
    const auto config = doc.attnprof.find("config");
    if (config == doc.attnprof.end() || !config->is_object()) return std::nullopt;
    try {
      return parse_config(config->dump(), doc.attnprof.value("config_source", std::string("trace config")),
                          options.known_backends)
          .expect;
    } catch (const std::exception& e) {
      report.notes.push_back(fmt::format("the config stored in the trace could not be read ({}); surprises are the "
                                         "run's own",
                                         e.what()));
      return std::nullopt;
    }
  }

  void build_from_tags(const trace::TraceDocument& doc, const TraceReportOptions& options, TraceReport& report) {
    const std::string command = doc.attnprof.is_object() ? doc.attnprof.value("command", std::string()) : "";
    report.origin = command.empty() ? "attnprof" : "attnprof " + command;
    std::optional<RunSummary> stored;
    if (doc.attnprof.is_object() && doc.attnprof.contains("summary")) {
      try {
        stored = doc.attnprof.at("summary").get<RunSummary>();
      } catch (const std::exception& e) {
        report.notes.push_back(fmt::format("the summary stored in the trace could not be read ({})", e.what()));
      }
    }
    const trace::ActivityBatch empty;
    if (stored) {
      const std::optional<std::vector<Expectation>> expect = expectations(doc, options, report);
      RunSummary& out = report.summary;
      out = *stored;
      out.cases.clear();
      // summary.json keeps only the device's name and counts; deviceProperties has all of it.
      if (!doc.devices.empty()) out.device = device_;
      for (std::size_t i = 0; i < stored->cases.size(); ++i) {
        const CaseSummary& was = stored->cases[i];
        CaseMeasurements m;
        m.label = was.label;
        m.backend = was.backend;
        m.problem = was.problem;
        m.iterations = was.iterations;
        m.iteration_us = was.iteration_us;
        m.plan_cold_ms = was.plan_cold_ms;
        m.plan_warm_ms = was.plan_warm_ms;
        m.host_enqueue_us_per_iter = was.host_enqueue_us_per_iter;
        m.verified = was.verified;
        m.verify_passed = was.verify_passed;
        m.relative_error = was.relative_error;
        m.error_bound = was.error_bound;
        const auto t = tagged_.find(static_cast<int>(i));
        CaseSummary c = summarize_case(m, t == tagged_.end() ? empty : t->second.timed, device_);
        c.status = was.status;
        c.reason = was.reason;
        c.device = was.device;  // run --devices: the GPU each case ran on
        add_findings(c);
        if (expect) add_surprises(c, *expect);
        else c.surprises = was.surprises;
        out.cases.push_back(std::move(c));
      }
      if (!tagged_.empty() && static_cast<std::size_t>(tagged_.rbegin()->first) >= stored->cases.size())
        report.notes.push_back("GPU events name cases the stored summary does not list; they are left out");
      return;
    }

    // No stored summary (an interrupted run's trace): cases from the events' args alone.
    report.notes.push_back(
        "the trace stores no run summary: iteration times are the GPU span of each iteration (first GPU start to last "
        "GPU end), not CUDA-event times, and verification and plan times are unknown");
    RunSummary& out = report.summary;
    out.tool_version = kToolVersion;
    out.config_name = "report";
    out.config_source = doc.source;
    out.device = device_;
    for (auto& [index, t] : tagged_) {
      CaseMeasurements m;
      m.label = t.label.empty() ? fmt::format("case {}", index) : t.label;
      m.backend = t.backend;
      m.problem = unknown_problem();
      m.iterations = t.spans.empty() ? 0 : t.spans.rbegin()->first + 1;
      for (const auto& [iteration, span] : t.spans) m.iteration_us.push_back((span.second - span.first) / 1000.0);
      CaseSummary c = summarize_case(m, t.timed, device_);
      add_findings(c);
      out.cases.push_back(std::move(c));
    }
  }

  void build_from_annotations(const trace::TraceDocument& doc, TraceReport& report) {
    report.origin = own_trace_ ? "attnprof (untagged)" : "Chrome trace (Kineto schema)";
    trace::AnnotationCaseIndex index(annotations_);
    std::vector<trace::AnnotationCase> cases = index.cases();
    if (index.empty()) {
      report.notes.push_back("the trace has no user_annotation range (record_function / NVTX): the whole trace is one "
                             "case (\"whole run\") of one iteration");
      cases = {{trace::kWholeRunCase, 1}};
    } else {
      bool any_launch = false, any_match = false;
      auto survey = [&](const auto& records) {
        for (const auto& r : records) {
          const auto site = launch_sites_.find(r.correlation);
          if (site == launch_sites_.end()) continue;
          any_launch = true;
          any_match = any_match || index.has_thread(site->second.where.thread);
        }
      };
      survey(untagged_.kernels);
      survey(untagged_.memcpys);
      survey(untagged_.memsets);
      if (any_launch && !any_match) {
        index.match_by_time_only(true);
        report.notes.push_back("no thread that launched GPU work holds a range: work is matched to ranges by time alone");
      }
    }
    std::uint64_t unlaunched = 0;
    auto tag_all = [&](auto& records) {
      for (auto& r : records) {
        const auto site = launch_sites_.find(r.correlation);
        // Kineto's GPU events do not name their launch API; the joined runtime/driver event does.
        if (site != launch_sites_.end() && r.launch_api.empty()) r.launch_api = api_names_[site->second.api];
        if (index.empty()) {
          r.tag = {0, trace::Phase::iteration, 0};
        } else if (site == launch_sites_.end()) {
          ++unlaunched;
          r.tag = {};
        } else {
          r.tag = index.tag_at(site->second.where.thread, site->second.where.start_ns);
        }
      }
    };
    tag_all(untagged_.kernels);
    tag_all(untagged_.memcpys);
    tag_all(untagged_.memsets);
    if (unlaunched > 0)
      report.notes.push_back(fmt::format("{} GPU event(s) have no cuda_runtime/cuda_driver event with their correlation id "
                                         "and belong to no case",
                                         unlaunched));

    RunSummary& out = report.summary;
    out.tool_version = kToolVersion;
    out.config_name = "report";
    out.config_source = doc.source;
    out.device = device_;
    out.cases = summarize_program_cases(cases, untagged_, device_);
  }

  trace::TraceEventConverter converter_;
  bool own_trace_ = false;
  DeviceProperties device_;
  std::uint64_t gpu_records_ = 0;
  std::map<int, TaggedCase> tagged_;
  trace::ActivityBatch untagged_;  // GPU records without our tags, plus nothing else
  struct Site {
    trace::LaunchSite where;
    std::uint32_t api = 0;  // index into api_names_
  };
  std::unordered_map<std::uint32_t, Site> launch_sites_;
  std::unordered_map<std::string, std::uint32_t> api_ids_;
  std::vector<std::string> api_names_;
  std::vector<trace::Annotation> annotations_;
};

}  // namespace

TraceReport report_from_trace(const std::filesystem::path& trace, const TraceReportOptions& options) {
  ReportBuilder builder;
  const trace::TraceDocument doc = trace::read_chrome_trace(
      trace, [&](const trace::TraceEvent& e, const trace::TraceDocument& so_far) { builder.on_event(e, so_far); });
  return builder.finish(doc, options);
}

}  // namespace attnprof
