#include "summary/merged_summary.hpp"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"
#include "core/version.hpp"
#include "summary/trace_report.hpp"

namespace attnprof {
namespace {

// The names attnprof gives per-process traces (`profile`), and a run's or a single process's trace.
const std::regex& process_trace_name() {
  static const std::regex pattern(R"(^trace(?:-rank(\d+))?(?:-pid(\d+))?\.json$)");
  return pattern;
}

std::optional<int> rank_in_file_name(const std::filesystem::path& path) {
  static const std::regex pattern(R"((?:^|[-_.])rank(\d+)(?:[-_.]|$))");
  std::smatch m;
  const std::string name = path.filename().string();
  if (std::regex_search(name, m, pattern)) return std::stoi(m[1].str());
  return std::nullopt;
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

}  // namespace

RunSummary combine_summaries(const std::vector<LabelledSummary>& parts) {
  RunSummary combined;
  bool first = true;
  for (const LabelledSummary& part : parts) {
    const RunSummary& s = part.summary;
    if (first) {
      combined = s;
      combined.cases.clear();
      combined.capture = {};
      combined.interrupted = false;
      first = false;
    }
    combined.capture += s.capture;
    combined.interrupted = combined.interrupted || s.interrupted;
    for (CaseSummary c : s.cases) {
      if (!part.label.empty()) c.label = "[" + part.label + "] " + c.label;
      combined.cases.push_back(std::move(c));
    }
  }
  return combined;
}

std::vector<std::filesystem::path> find_process_traces(const std::vector<std::filesystem::path>& inputs,
                                                       const std::filesystem::path& exclude) {
  std::vector<std::filesystem::path> found;
  for (const std::filesystem::path& input : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      std::vector<std::filesystem::path> in_dir;
      for (const auto& entry : std::filesystem::directory_iterator(input)) {
        if (!entry.is_regular_file()) continue;
        if (!std::regex_match(entry.path().filename().string(), process_trace_name())) continue;
        if (!exclude.empty() && same_file(entry.path(), exclude)) continue;
        in_dir.push_back(entry.path());
      }
      if (in_dir.empty())
        throw UsageError(fmt::format("merge: {} holds no trace attnprof wrote (trace.json, trace-pid<N>.json, "
                                     "trace-rank<R>-pid<N>.json)",
                                     input.string()));
      std::sort(in_dir.begin(), in_dir.end());
      found.insert(found.end(), in_dir.begin(), in_dir.end());
    } else if (std::filesystem::is_regular_file(input, ec)) {
      if (!exclude.empty() && same_file(input, exclude))
        throw UsageError(fmt::format("merge: {} is both an input and the output", input.string()));
      found.push_back(input);
    } else {
      throw UsageError(fmt::format("merge: {} does not exist", input.string()));
    }
  }
  // The same file named twice (a directory and a file in it) is merged once.
  std::vector<std::filesystem::path> unique;
  for (const std::filesystem::path& p : found)
    if (std::none_of(unique.begin(), unique.end(), [&](const auto& u) { return same_file(u, p); })) unique.push_back(p);
  return unique;
}

std::vector<trace::MergeInput> plan_rank_merge(std::vector<trace::TraceHead> heads) {
  for (trace::TraceHead& h : heads)
    if (!h.rank) h.rank = rank_in_file_name(h.path);
  std::stable_sort(heads.begin(), heads.end(), [](const trace::TraceHead& a, const trace::TraceHead& b) {
    if (a.rank.has_value() != b.rank.has_value()) return a.rank.has_value();
    if (a.rank != b.rank) return *a.rank < *b.rank;
    return a.host_process.value_or(0) < b.host_process.value_or(0);
  });
  std::set<std::uint32_t> slots;
  for (const trace::TraceHead& h : heads)
    if (h.rank && *h.rank >= 0) slots.insert(static_cast<std::uint32_t>(*h.rank));
  std::uint32_t next_free = 0;
  auto fresh_slot = [&] {
    while (slots.count(next_free) > 0) ++next_free;
    slots.insert(next_free);
    return next_free;
  };
  std::vector<trace::MergeInput> inputs;
  std::set<std::uint32_t> claimed;
  std::map<std::string, int> label_uses;
  for (trace::TraceHead& h : heads) {
    trace::MergeInput in;
    if (h.rank) {
      in.label = fmt::format("rank {}", *h.rank);
      const auto wanted = static_cast<std::uint32_t>(std::max(*h.rank, 0));
      in.slot = claimed.insert(wanted).second ? wanted : fresh_slot();  // two traces of one rank: two jobs
    } else {
      in.label = h.host_process ? fmt::format("pid {}", *h.host_process) : h.path.stem().string();
      in.slot = fresh_slot();
    }
    claimed.insert(in.slot);
    if (const int uses = ++label_uses[in.label]; uses > 1) in.label += fmt::format(" ({})", uses);
    in.head = std::move(h);
    inputs.push_back(std::move(in));
  }
  return inputs;
}

std::filesystem::path merged_summary_path(const std::filesystem::path& trace) {
  const std::string name = trace.filename().string();
  if (name.rfind("trace", 0) == 0 && name.size() > 5 && (name[5] == '.' || name[5] == '-'))
    return trace.parent_path() / ("summary" + name.substr(5));
  return trace.parent_path() / (trace.stem().string() + "-summary.json");
}

ProfileMerge merge_process_traces(const std::vector<std::filesystem::path>& given, const std::filesystem::path& out,
                                  const std::optional<std::filesystem::path>& summary_out) {
  ProfileMerge result;
  result.trace = out;
  result.summary = summary_out.value_or(merged_summary_path(out));
  const std::vector<std::filesystem::path> paths = find_process_traces(given, out);
  std::vector<trace::TraceHead> heads;
  for (const std::filesystem::path& p : paths) heads.push_back(trace::read_trace_head(p));
  const std::vector<trace::MergeInput> inputs = plan_rank_merge(std::move(heads));

  auto metadata = [&](const trace::MergeResult& merged) {
    std::vector<LabelledSummary> parts;
    nlohmann::json described = nlohmann::json::array();
    for (const trace::MergedInput& in : merged.inputs) {
      LabelledSummary part{in.label, {}};
      bool stored = false;
      if (in.attnprof.is_object() && in.attnprof.contains("summary")) {
        try {
          part.summary = in.attnprof.at("summary").get<RunSummary>();
          stored = true;
        } catch (const std::exception& e) {
          result.notes.push_back(fmt::format("{}: its stored summary could not be read ({})", in.path.string(), e.what()));
        }
      }
      if (!stored) {
        // Not an attnprof trace, or an interrupted one: summarized as `attnprof report` would.
        TraceReport report = report_from_trace(in.path);
        part.summary = std::move(report.summary);
        result.notes.push_back(fmt::format("{}: no stored summary; its cases are rebuilt from the trace as `attnprof "
                                           "report` does ({})",
                                           in.path.string(), report.origin));
      }
      parts.push_back(std::move(part));
      nlohmann::json d = {{"path", in.path.string()},
                          {"label", in.label},
                          {"pid", in.host_pid},
                          {"gpu pid base", in.gpu_pid_base},
                          {"clock shift ns", in.clock_shift_ns},
                          {"first case", in.first_case},
                          {"cases", in.case_count},
                          {"events", in.events}};
      if (in.rank) d["rank"] = *in.rank;
      if (in.original_host_pid) d["original pid"] = *in.original_host_pid;
      if (in.attnprof.is_object()) {
        if (in.attnprof.contains("program")) d["program"] = in.attnprof["program"];
        if (in.attnprof.contains("local_rank")) d["local_rank"] = in.attnprof["local_rank"];
        if (in.attnprof.contains("command")) d["command"] = in.attnprof["command"];
      }
      described.push_back(std::move(d));
    }
    result.combined = combine_summaries(parts);
    // summary.json keeps only part of the device; the first trace's deviceProperties hold all of it.
    if (!inputs.empty())
      for (const DeviceProperties& d : inputs.front().head.devices)
        if (d.id == result.combined.device.id) result.combined.device = d;
    for (const std::string& note : merged.notes) result.notes.push_back(note);
    return nlohmann::json{{"tool", "attnprof"},
                          {"version", kToolVersion},
                          {"command", "merge"},
                          {"inputs", described},
                          {"clock",
                           "every input's timestamps are CUPTI's (CLOCK_REALTIME-based), rebased to the earliest "
                           "baseTimeNanoseconds: aligned for processes on one host, as aligned as the hosts' clocks "
                           "across hosts"},
                          {"capture",
                           {{"records", result.combined.capture.records},
                            {"dropped_records", result.combined.capture.dropped_records},
                            {"buffers_declined", result.combined.capture.buffers_declined},
                            {"invalid_timestamps", result.combined.capture.invalid_timestamps}}},
                          {"notes", result.notes},
                          {"summary", result.combined}};
  };
  result.merge = trace::merge_traces(inputs, out, {}, metadata);
  write_json_atomically(result.summary.string(), nlohmann::json(result.combined));
  return result;
}

}  // namespace attnprof
