// The story of `attnprof merge`: find the traces attnprof wrote among the inputs, order and
// label them by rank, stream them into one trace (trace/trace_merge.hpp), combine their
// summaries (a trace without one is summarized as `report` would), and write both.
#include "commands/merge.hpp"

#include <iostream>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/version.hpp"
#include "summary/provenance.hpp"
#include "summary/render.hpp"
#include "summary/trace_report.hpp"
#include "trace/json_pull_parser.hpp"
#include "trace/trace_files.hpp"
#include "trace/trace_format.hpp"

namespace attnprof {
namespace {

// What the merged trace says of one input.
nlohmann::json describe_input(const trace::MergedInput& in, const Provenance& provenance) {
  nlohmann::json d = {{"path", in.path.string()},   {"label", in.label},       {"pid", in.host_pid},
                      {"gpu pid base", in.gpu_pid_base}, {"clock shift ns", in.clock_shift_ns},
                      {"first case", in.first_case}, {"cases", in.case_count}, {"events", in.events}};
  if (in.rank) d["rank"] = *in.rank;
  if (in.original_host_pid) d["original pid"] = *in.original_host_pid;
  if (provenance.program) d["program"] = *provenance.program;
  if (provenance.local_rank) d["local_rank"] = *provenance.local_rank;
  if (!provenance.command.empty()) d["command"] = provenance.command;
  return d;
}

}  // namespace

std::filesystem::path merged_summary_path(const std::filesystem::path& trace) {
  std::string name = trace.filename().string();
  if (name.size() > 8 && name.ends_with(".json.gz")) name.resize(name.size() - 3);
  const std::filesystem::path plain = trace.parent_path() / name;
  if (name.rfind("trace", 0) == 0 && name.size() > 5 && (name[5] == '.' || name[5] == '-'))
    return trace.parent_path() / ("summary" + name.substr(5));
  return trace.parent_path() / (plain.stem().string() + "-summary.json");
}

ProfileMerge merge_process_traces(const std::vector<std::filesystem::path>& given, const std::filesystem::path& out,
                                  const std::optional<std::filesystem::path>& summary_out, trace::TraceFormat format) {
  ProfileMerge result;
  result.trace = out;
  result.summary = summary_out.value_or(merged_summary_path(out));
  std::vector<trace::TraceHead> heads;
  for (const std::filesystem::path& p : trace::find_process_traces(given, out)) heads.push_back(trace::read_trace_head(p));
  const std::vector<trace::MergeInput> inputs = trace::plan_rank_merge(std::move(heads));

  auto provenance_of_merge = [&](const trace::MergeResult& merged) {
    std::vector<LabelledSummary> parts;
    nlohmann::json described = nlohmann::json::array();
    for (const trace::MergedInput& in : merged.inputs) {
      std::vector<std::string> unread;
      const Provenance stored = read_provenance(in.attnprof, unread);
      for (const std::string& note : unread) result.notes.push_back(fmt::format("{}: {}", in.path.string(), note));
      LabelledSummary part{in.label, {}};
      if (stored.summary) {
        part.summary = *stored.summary;
      } else {
        // Not an attnprof trace, or an interrupted one: summarized as `attnprof report` would.
        TraceReport report = report_from_trace(in.path);
        part.summary = std::move(report.summary);
        result.notes.push_back(fmt::format("{}: no stored summary; its cases are rebuilt from the trace as `attnprof "
                                           "report` does ({})",
                                           in.path.string(), report.origin));
      }
      parts.push_back(std::move(part));
      described.push_back(describe_input(in, stored));
    }
    result.combined = combine_summaries(parts);
    // summary.json keeps only part of the device; the first trace's deviceProperties hold all of it.
    if (!inputs.empty())
      for (const DeviceProperties& d : inputs.front().head.devices)
        if (d.id == result.combined.device.id) result.combined.device = d;
    for (const std::string& note : merged.notes) result.notes.push_back(note);

    Provenance provenance;
    provenance.version = kToolVersion;
    provenance.command = "merge";
    provenance.inputs = described;
    provenance.clock =
        "every input's timestamps are CUPTI's (CLOCK_REALTIME-based), rebased to the earliest baseTimeNanoseconds: "
        "aligned for processes on one host, as aligned as the hosts' clocks across hosts";
    provenance.capture = result.combined.capture;
    provenance.notes = result.notes;
    provenance.summary = result.combined;
    return nlohmann::json(provenance);
  };
  trace::MergeOptions options;
  options.write.format = format;
  result.merge = trace::merge_traces(inputs, out, options, provenance_of_merge);
  write_json_atomically(result.summary.string(), nlohmann::json(result.combined));
  return result;
}

int merge_command(const MergeRequest& r) {
  const OutputFormat summary_format = output_format_named(r.format);
  std::optional<std::filesystem::path> summary_out;
  if (!r.summary_path.empty()) summary_out = r.summary_path;
  ProfileMerge merged;
  try {
    // The name says the format (readers go by the first bytes, but people and tools by the name).
    const trace::TraceFormat named =
        r.out_path.ends_with(".gz") ? trace::TraceFormat::json_gz : trace::TraceFormat::json;
    const trace::TraceFormat format =
        r.trace_format.empty() ? named : trace::parse_trace_format(r.trace_format).value_or(trace::TraceFormat::json);
    if (format != named)
      throw UsageError(fmt::format("merge: --trace-format {} does not match --out {}: name the output {}",
                                   r.trace_format, r.out_path,
                                   trace::trace_file_name("*", format) +
                                       (format == trace::TraceFormat::json ? " (without .gz)" : "")));
    merged = merge_process_traces(std::vector<std::filesystem::path>(r.inputs.begin(), r.inputs.end()), r.out_path,
                                  summary_out, format);
  } catch (const trace::TraceFormatError& e) {
    std::cerr << "attnprof merge: " << e.what() << "\n";
    return kExitUsage;
  }
  for (const std::string& note : merged.notes) std::cerr << "attnprof merge: note: " << note << "\n";
  std::cout << render_summary(merged.combined, summary_format);
  std::cerr << fmt::format("attnprof merge: {} traces, {} events -> {} (open in ui.perfetto.dev) and {}\n",
                           merged.merge.inputs.size(), merged.merge.events, merged.trace.string(),
                           merged.summary.string());
  for (const trace::MergedInput& in : merged.merge.inputs) {
    // A trace without attnprof's case tags (torch.profiler's) has its cases rebuilt by the summary.
    const std::string cases = in.case_count > 0
                                  ? fmt::format("cases {}..{}", in.first_case, in.first_case + in.case_count - 1)
                                  : std::string("no case tags");
    std::cerr << fmt::format("  {:<12} {}  pid {}, GPU pids {}+, clock {:+.3f} ms, {}\n", in.label, in.path.string(),
                             in.host_pid, in.gpu_pid_base, in.clock_shift_ns / 1e6, cases);
  }
  return kExitOk;
}

}  // namespace attnprof
