#include "summary/trace_report.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "config/config.hpp"
#include "core/version.hpp"
#include "summary/case_accumulator.hpp"
#include "summary/analysis.hpp"
#include "summary/program_summary.hpp"
#include "summary/provenance.hpp"
#include "trace/annotation_cases.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof {
namespace {

bool is_gpu_category(const std::string& cat) {
  return cat == trace::category::kKernel || cat == trace::category::kGpuMemcpy || cat == trace::category::kGpuMemset;
}

// GPU records of one case our writer tagged, aggregated as they stream past.
struct TaggedCase {
  std::string label;
  std::string backend;
  CaseAccumulator timed;
};

// GPU records without our tags (Kineto's, or an untagged trace of ours), kept until every
// annotation range and launch site is known: the per-record values in a small struct, the
// attributes many launches share (a kernel's name, resources and occupancy; a copy's kind)
// interned once.
class PendingGpuRecords {
 public:
  enum class Kind : std::uint8_t { kernel, memcpy, memset };
  struct Record {
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint64_t bytes = 0;
    std::uint32_t correlation = 0;
    std::uint32_t shape = 0;  // index into the kind's shapes
    Kind kind = Kind::kernel;
  };

  void add(const trace::KernelActivity& k) {
    // Everything the summary reads of a kernel but its times: launches that agree share a shape.
    // Occupancy follows from the device and the resources, so it needs no place in the key.
    start_key(Kind::kernel);
    auto out = std::back_inserter(key_);
    fmt::format_to(out, "{}\n{}\n", k.name, k.launch_api);
    for (int v : {static_cast<int>(k.device), k.registers_per_thread, k.grid[0], k.grid[1], k.grid[2], k.block[0],
                  k.block[1], k.block[2], k.static_shared_bytes, k.dynamic_shared_bytes, k.local_bytes_per_thread,
                  int{k.shared_optin}, k.carveout_percent})
      fmt::format_to(out, "{} ", v);
    for (const std::optional<double>& v : {k.achieved_occupancy_percent, k.dram_throughput_percent,
                                           k.dram_bytes_per_second, k.tensor_pipe_percent}) {
      if (v) fmt::format_to(out, "{} ", *v);
      else key_ += "- ";
    }
    push(k, Kind::kernel, 0, kernels_);
  }
  void add(const trace::MemcpyActivity& m) {
    start_key(Kind::memcpy);
    fmt::format_to(std::back_inserter(key_), "{}\n{}\n{}\n{}", to_string(m.kind), m.src_memory, m.dst_memory,
                   m.launch_api);
    push(m, Kind::memcpy, m.bytes, memcpys_);
  }
  void add(const trace::MemsetActivity& m) {
    start_key(Kind::memset);
    fmt::format_to(std::back_inserter(key_), "{}\n{}\n{}", m.memory, m.value, m.launch_api);
    push(m, Kind::memset, m.bytes, memsets_);
  }

  const std::vector<Record>& records() const { return records_; }
  bool empty() const { return records_.empty(); }
  void clear() { *this = PendingGpuRecords(); }

  // Calls visit(activity) with each record rebuilt (in a scratch activity, reused).
  template <typename Visit>
  void for_each(Visit&& visit) const {
    trace::KernelActivity kernel;
    trace::MemcpyActivity memcpy;
    trace::MemsetActivity memset;
    auto fill = [](auto& scratch, const auto& shape, const Record& r) {
      scratch = shape;
      scratch.start_ns = r.start_ns;
      scratch.end_ns = r.end_ns;
      scratch.correlation = r.correlation;
    };
    for (const Record& r : records_) {
      switch (r.kind) {
        case Kind::kernel:
          fill(kernel, kernels_[r.shape], r);
          visit(kernel);
          break;
        case Kind::memcpy:
          fill(memcpy, memcpys_[r.shape], r);
          memcpy.bytes = r.bytes;
          visit(memcpy);
          break;
        case Kind::memset:
          fill(memset, memsets_[r.shape], r);
          memset.bytes = r.bytes;
          visit(memset);
          break;
      }
    }
  }

 private:
  void start_key(Kind kind) {
    key_.clear();
    key_.push_back(static_cast<char>('0' + static_cast<int>(kind)));
  }

  template <typename Activity>
  void push(const Activity& a, Kind kind, std::uint64_t bytes, std::vector<Activity>& shapes) {
    auto it = shape_ids_.find(key_);
    if (it == shape_ids_.end()) {
      it = shape_ids_.emplace(key_, static_cast<std::uint32_t>(shapes.size())).first;
      Activity& shape = shapes.emplace_back(a);
      shape.start_ns = shape.end_ns = 0;
      shape.correlation = 0;
      shape.tag = {};
    }
    records_.push_back({a.start_ns, a.end_ns, bytes, a.correlation, it->second, kind});
  }

  std::string key_;  // reused, so a shape already seen costs no allocation
  std::unordered_map<std::string, std::uint32_t> shape_ids_;
  std::vector<trace::KernelActivity> kernels_;
  std::vector<trace::MemcpyActivity> memcpys_;
  std::vector<trace::MemsetActivity> memsets_;
  std::vector<Record> records_;
};

// Where each API call ran, by correlation id: enough to join GPU work to the range around its
// launch. A sorted vector, not a hash map: a Kineto trace holds millions of calls.
class LaunchSites {
 public:
  struct Site {
    std::uint32_t correlation = 0;
    std::uint32_t api = 0;  // index into names()
    trace::LaunchSite where;
  };

  void add(const trace::ApiCall& c) {
    auto [name, inserted] = api_ids_.try_emplace(c.name, static_cast<std::uint32_t>(api_names_.size()));
    if (inserted) api_names_.push_back(c.name);
    sites_.push_back({c.correlation, name->second, {c.process, c.thread, c.start_ns}});
  }
  // Sorts once all calls are in; for a correlation id seen twice the later call wins.
  void seal() {
    std::stable_sort(sites_.begin(), sites_.end(),
                     [](const Site& x, const Site& y) { return x.correlation < y.correlation; });
    std::vector<Site> unique;
    unique.reserve(sites_.size());
    for (const Site& s : sites_) {
      if (!unique.empty() && unique.back().correlation == s.correlation) unique.back() = s;
      else unique.push_back(s);
    }
    sites_ = std::move(unique);
  }
  const Site* find(std::uint32_t correlation) const {
    auto it = std::lower_bound(sites_.begin(), sites_.end(), correlation,
                               [](const Site& s, std::uint32_t c) { return s.correlation < c; });
    return it != sites_.end() && it->correlation == correlation ? &*it : nullptr;
  }
  const std::string& api_name(const Site& site) const { return api_names_[site.api]; }
  void clear() { *this = LaunchSites(); }

 private:
  std::vector<Site> sites_;
  std::unordered_map<std::string, std::uint32_t> api_ids_;
  std::vector<std::string> api_names_;
};

class ReportBuilder {
 public:
  void on_event(const trace::TraceEvent& e, const trace::TraceDocument& doc) {
    if (e.ph == trace::ph::kMetadata) {
      if (!own_trace_ && e.name == trace::metadata::kProcessName && e.args.metadata_name &&
          e.args.metadata_name->rfind("attnprof", 0) == 0)
        own_trace_ = true;
      return;
    }
    // Once our tags show, the cases come from them: host events are no longer needed, except the
    // memory records, which sit on the host thread that allocated (as Kineto puts them).
    if (!tagged_.empty() && !is_gpu_category(e.cat) && e.cat != trace::category::kCpuInstantEvent) return;
    std::optional<trace::Activity> activity = converter_.convert(e, doc);
    if (!activity) return;
    if (auto* kernel = std::get_if<trace::KernelActivity>(&*activity))
      prepare_kernel(*kernel, converter_.device_for(kernel->device, doc));
    std::visit([&](auto&& a) { take(a, e); }, *activity);
  }

  TraceReport finish(const trace::TraceDocument& doc, const TraceReportOptions& options) {
    TraceReport report;
    report.events = doc.events;
    device_ = converter_.device_for(0, doc);
    if (gpu_records_ == 0) report.notes.push_back("the trace holds no GPU activity (kernel, gpu_memcpy or gpu_memset events)");
    if (!tagged_.empty()) build_from_tags(doc, options, report);
    else build_from_annotations(doc, report);
    analyze_run(report.summary);
    for (const std::string& note : converter_.notes()) report.notes.push_back(note);
    return report;
  }

 private:
  template <typename Record>
  void take_gpu(const Record& r, const trace::TraceEvent& e) {
    ++gpu_records_;
    if (r.tag.case_index >= 0) {
      if (tagged_.empty()) {
        // Our tags make the joins unnecessary: what was kept for them goes.
        untagged_.clear();
        launch_sites_.clear();
        annotations_ = {};
      }
      TaggedCase& c = tagged_[r.tag.case_index];
      if (c.label.empty() && e.args.case_label) c.label = *e.args.case_label;
      if (c.backend.empty() && e.args.backend) c.backend = *e.args.backend;
      c.timed.add(r);  // only timed iterations are counted
    } else if (tagged_.empty()) {
      untagged_.add(r);
    }
  }
  void take(const trace::KernelActivity& k, const trace::TraceEvent& e) { take_gpu(k, e); }
  void take(const trace::MemcpyActivity& m, const trace::TraceEvent& e) { take_gpu(m, e); }
  void take(const trace::MemsetActivity& m, const trace::TraceEvent& e) { take_gpu(m, e); }
  void take(const trace::ApiCall& c, const trace::TraceEvent&) { launch_sites_.add(c); }
  void take(const trace::Annotation& a, const trace::TraceEvent&) {
    // Only top-level host ranges can be cases; transparent ones never are.
    if (!a.on_gpu && !trace::is_transparent_range(a.name)) annotations_.push_back(a);
  }
  void take(const trace::OverheadActivity&, const trace::TraceEvent&) {}
  // Memory records of our tagged cases join their case like its GPU records (all phases: what
  // the plan allocated is held in the iterations); untagged ones (Kineto's) are not joined yet.
  void take(const trace::MemoryActivity& m, const trace::TraceEvent& e) {
    if (m.tag.case_index < 0) return;
    TaggedCase& c = tagged_[m.tag.case_index];
    if (c.label.empty() && e.args.case_label) c.label = *e.args.case_label;
    if (c.backend.empty() && e.args.backend) c.backend = *e.args.backend;
    c.timed.add(m);
  }

  std::optional<std::vector<Expectation>> expectations(const Provenance& provenance, const TraceReportOptions& options,
                                                       TraceReport& report) const {
    if (options.known_backends.empty() || !provenance.config.is_object()) return std::nullopt;
    try {
      return parse_config(provenance.config.dump(),
                          provenance.config_source.empty() ? "trace config" : provenance.config_source,
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
    const Provenance provenance = read_provenance(doc.attnprof, report.notes);
    report.origin = provenance.command.empty() ? "attnprof" : "attnprof " + provenance.command;
    const std::optional<RunSummary>& stored = provenance.summary;
    const CaseAccumulator empty;
    if (stored) {
      const std::optional<std::vector<Expectation>> expect = expectations(provenance, options, report);
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
        m.rows_verified = was.rows_verified;
        m.repeatability = was.repeatability;  // measured on the GPU once; the trace does not hold it
        const auto t = tagged_.find(static_cast<int>(i));
        CaseSummary c = (t == tagged_.end() ? empty : t->second.timed).summarize(m);
        c.status = was.status;
        c.reason = was.reason;
        c.device = was.device;  // run --devices: the GPU each case ran on
        if (!expect) c.surprises = was.surprises;  // without the run's config, its own surprises stand
        analyze_case(c, expect ? &*expect : nullptr);
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
      const auto& spans = t.timed.iteration_spans();
      m.iterations = spans.empty() ? 0 : spans.rbegin()->first + 1;
      m.iteration_us = t.timed.span_us();
      CaseSummary c = t.timed.summarize(m);
      analyze_case(c, nullptr);
      out.cases.push_back(std::move(c));
    }
  }

  void build_from_annotations(const trace::TraceDocument& doc, TraceReport& report) {
    report.origin = own_trace_ ? "attnprof (untagged)" : "Chrome trace (Kineto schema)";
    launch_sites_.seal();
    trace::AnnotationCaseIndex index(annotations_);
    std::vector<trace::AnnotationCase> cases = index.cases();
    if (index.empty()) {
      report.notes.push_back("the trace has no user_annotation range (record_function / NVTX): the whole trace is one "
                             "case (\"whole run\") of one iteration");
      cases = {{trace::kWholeRunCase, 1}};
    } else {
      bool any_launch = false, any_match = false;
      for (const PendingGpuRecords::Record& r : untagged_.records()) {
        const LaunchSites::Site* site = launch_sites_.find(r.correlation);
        if (site == nullptr) continue;
        any_launch = true;
        any_match = any_match || index.has_thread(site->where.process, site->where.thread);
      }
      if (any_launch && !any_match) {
        index.match_by_time_only(true);
        report.notes.push_back("no thread that launched GPU work holds a range: work is matched to ranges by time alone");
      }
    }
    std::vector<CaseAccumulator> per_case(cases.size());
    std::uint64_t unlaunched = 0;
    untagged_.for_each([&](auto& r) {
      const LaunchSites::Site* site = launch_sites_.find(r.correlation);
      // Kineto's GPU events do not name their launch API; the joined runtime/driver event does.
      if (site != nullptr && r.launch_api.empty()) r.launch_api = launch_sites_.api_name(*site);
      if (index.empty()) {
        r.tag = {0, trace::Phase::iteration, 0};
      } else if (site == nullptr) {
        ++unlaunched;
        return;
      } else {
        r.tag = index.tag_at(site->where.process, site->where.thread, site->where.start_ns);
      }
      if (r.tag.case_index >= 0 && static_cast<std::size_t>(r.tag.case_index) < per_case.size())
        per_case[static_cast<std::size_t>(r.tag.case_index)].add(r);
    });
    if (unlaunched > 0)
      report.notes.push_back(fmt::format("{} GPU event(s) have no cuda_runtime/cuda_driver event with their correlation id "
                                         "and belong to no case",
                                         unlaunched));

    RunSummary& out = report.summary;
    out.tool_version = kToolVersion;
    out.config_name = "report";
    out.config_source = doc.source;
    out.device = device_;
    out.cases = summarize_program_cases(cases, per_case);
  }

  trace::TraceEventConverter converter_;
  bool own_trace_ = false;
  DeviceProperties device_;
  std::uint64_t gpu_records_ = 0;
  std::map<int, TaggedCase> tagged_;
  // Kept only while no GPU record carries our tags (a Kineto trace, an untagged one of ours).
  PendingGpuRecords untagged_;
  LaunchSites launch_sites_;
  std::vector<trace::Annotation> annotations_;  // top-level candidates: host, not transparent
};

}  // namespace

TraceReport report_from_trace(const std::filesystem::path& trace, const TraceReportOptions& options) {
  trace::JsonPullParser parser(trace);
  return report_from_trace(parser, options);
}

TraceReport report_from_trace(trace::JsonPullParser& parser, const TraceReportOptions& options) {
  ReportBuilder builder;
  const trace::TraceDocument doc = trace::read_chrome_trace(
      parser, [&](const trace::TraceEvent& e, const trace::TraceDocument& so_far) { builder.on_event(e, so_far); });
  return builder.finish(doc, options);
}

}  // namespace attnprof
