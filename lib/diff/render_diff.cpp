#include "diff/render_diff.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "summary/findings.hpp"

namespace attnprof {
namespace {

// ---- a table: aligned text within a width, or a Markdown pipe table ----

enum class Shrink { never, end, middle };

struct Column {
  std::string title;
  bool right_aligned = false;
  Shrink shrink = Shrink::never;
  std::size_t min_width = 0;
  int give_way_order = 0;  // among shrinking columns, the lower gives way first
};

using Rows = std::vector<std::vector<std::string>>;

std::vector<std::size_t> natural_widths(const std::vector<Column>& columns, const Rows& rows) {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t i = 0; i < columns.size(); ++i) width[i] = columns[i].title.size();
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  return width;
}

// Narrows the shrinking columns until the line fits `max_width`: those of the lowest give-way order
// first, and within one order the widest first, so columns that give way together end up alike.
void fit_widths(const std::vector<Column>& columns, std::size_t indent, std::size_t max_width,
                std::vector<std::size_t>& width) {
  std::size_t total = indent + std::accumulate(width.begin(), width.end(), std::size_t{0}) + 2 * (columns.size() - 1);
  auto floor = [&](std::size_t i) { return std::max(columns[i].min_width, columns[i].title.size()); };
  std::vector<int> orders;
  for (const Column& c : columns)
    if (c.shrink != Shrink::never) orders.push_back(c.give_way_order);
  std::sort(orders.begin(), orders.end());
  orders.erase(std::unique(orders.begin(), orders.end()), orders.end());
  for (int order : orders) {
    while (total > max_width) {
      std::size_t widest = columns.size();
      for (std::size_t i = 0; i < columns.size(); ++i)
        if (columns[i].shrink != Shrink::never && columns[i].give_way_order == order && width[i] > floor(i) &&
            (widest == columns.size() || width[i] > width[widest]))
          widest = i;
      if (widest == columns.size()) break;
      --width[widest];
      --total;
    }
  }
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string layout(const std::vector<Column>& columns, const Rows& rows, bool markdown, std::size_t indent = 0) {
  std::vector<std::size_t> width = natural_widths(columns, rows);
  if (!markdown) fit_widths(columns, indent, kTableWidth, width);
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    out += markdown ? "| " : std::string(indent, ' ');
    for (std::size_t i = 0; i < columns.size(); ++i) {
      std::string cell = i < cells.size() ? cells[i] : "";
      if (markdown) {
        if (i > 0) out += " | ";
        out += markdown_cell(cell);
        continue;
      }
      if (columns[i].shrink == Shrink::end) cell = shorten(cell, width[i]);
      if (columns[i].shrink == Shrink::middle) cell = shorten_middle(cell, width[i]);
      if (i > 0) out += "  ";
      out += columns[i].right_aligned ? fmt::format("{:>{}}", cell, width[i]) : fmt::format("{:<{}}", cell, width[i]);
    }
    if (markdown) out += " |";
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  std::vector<std::string> titles, rule;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    titles.push_back(columns[i].title);
    rule.push_back(markdown ? (columns[i].right_aligned ? "--:" : "---") : std::string(width[i], '-'));
  }
  line(titles);
  line(rule);
  for (const auto& row : rows) line(row);
  return out;
}

// ---- shared wording ----

struct Style {
  bool markdown = false;
  std::string heading(const std::string& text) const {
    return markdown ? fmt::format("#### {}\n\n", text) : fmt::format("{}:\n", text);
  }
  std::string paragraph(const std::string& text) const {
    return (markdown ? text : wrap_text(text, kTableWidth, "", "")) + "\n";
  }
  std::string bullet(const std::string& text) const {
    return fmt::format("{}\n", markdown ? fmt::format("- {}", markdown_cell(text)) : wrap_text(text, kTableWidth, "- ", "  "));
  }
};


std::string side_text(const RunHeader& h) {
  std::string text = fmt::format("{}: {}", h.path, h.device);
  if (h.source != h.path) text = fmt::format("{} ({}): {}", h.path, h.source, h.device);
  if (!h.tool_version.empty()) text += fmt::format(", attnprof {}", h.tool_version);
  if (!h.config.empty()) text += fmt::format(", config {}", h.config);
  if (!h.created_at.empty()) text += fmt::format(", {}", h.created_at);
  return text + fmt::format(", {} cases from {}", h.cases, h.origin);
}

std::string matching_text(const DiffOptions& o) {
  if (o.matching.rules.empty()) return "Cases paired by backend, problem and GPU ordinal (ranges by name)";
  std::vector<std::string> names;
  for (MatchRule r : o.matching.rules)
    for (const MatchRuleName& n : kMatchRules)
      if (n.rule == r) names.emplace_back(n.name);
  return fmt::format("Cases paired by problem with --match {}", fmt::join(names, ","));
}

std::string verdict_counts(const DiffReport& r) {
  return fmt::format("{} paired: {} faster, {} slower, {} within noise, {} unknown; {} only in A, {} only in B",
                     r.cases.size(), r.count(Verdict::faster), r.count(Verdict::slower), r.count(Verdict::within_noise),
                     r.count(Verdict::unknown), r.only_a.size(), r.only_b.size());
}

std::string activity_text(const ActivityChange& c, bool side_b, bool memory) {
  const double per_iter = side_b ? c.per_iter_b : c.per_iter_a;
  const bool present = c.kind == ChangeKind::changed || (c.kind == ChangeKind::added) == side_b;
  if (!present) return "-";
  std::string text = format_count(per_iter) + "/it";
  if (memory) text += fmt::format(" ({})", format_bytes(side_b ? c.bytes_b : c.bytes_a));
  return fmt::format("{}, {}", text, format_microseconds(side_b ? c.us_b : c.us_a));
}

// ---- the human formats ----

std::string summary_table(const DiffReport& r, const Style& style) {
  const std::vector<Column> columns = {{"case", false, Shrink::middle, 24}, {"A median", true}, {"B median", true},
                                       {"B/A time", true}, {"95% interval", true}, {"B/A TFLOP/s", true},
                                       {"verdict", false}};
  Rows rows;
  for (const CaseDiff& c : r.cases) {
    const TimeChange& t = c.time;
    rows.push_back({pair_label(c), t.median_a_us > 0 ? format_microseconds(t.median_a_us) : c.status_a,
                    t.median_b_us > 0 ? format_microseconds(t.median_b_us) : c.status_b,
                    t.ratio ? ratio_text(*t.ratio) : "", t.interval ? interval_text(*t.interval) : "",
                    t.throughput_ratio ? ratio_text(*t.throughput_ratio) : "", std::string(to_string(t.verdict))});
  }
  return layout(columns, rows, style.markdown);
}

// The terminal names a kernel without its namespaces, which a narrow column would cut first.
Rows change_rows(const CaseDiff& c, const Style& style, bool& any_instances) {
  Rows rows;
  if (c.status_a != c.status_b) rows.push_back({"status", "", c.status_a, c.status_b});
  for (const ActivityChange& k : c.kernels) {
    any_instances = any_instances || k.instances_differ;
    const std::string name = style.markdown ? k.name : shorten_name(k.name);
    rows.push_back({fmt::format("kernel {}", to_string(k.kind)), name + (k.instances_differ ? " *" : ""),
                    activity_text(k, false, false), activity_text(k, true, false)});
  }
  for (const ActivityChange& m : c.memory_ops)
    rows.push_back({fmt::format("{} {}", m.name, to_string(m.kind)), "", activity_text(m, false, true),
                    activity_text(m, true, true)});
  for (const FieldChange& f : c.dominant_kernel) {
    const bool name = f.field == "kernel" && !style.markdown;
    rows.push_back({"dominant kernel", f.field, name ? shorten_name(f.a) : f.a, name ? shorten_name(f.b) : f.b});
  }
  for (const FieldChange& f : c.counts) rows.push_back({"per iteration", f.field, f.a, f.b});
  for (const FindingChange& f : c.findings) {
    const bool added = f.change == ChangeKind::added;
    rows.push_back({added ? "finding appeared" : "finding gone", f.kind, added ? "-" : f.message, added ? f.message : "-"});
  }
  return rows;
}

std::string changes_section(const DiffReport& r, const Style& style) {
  // A's and B's cells (a finding's message) give way together, then the name of what changed.
  const std::vector<Column> columns = {{"change", false}, {"what", false, Shrink::end, 24, 1},
                                       {"A", false, Shrink::end, 16, 0}, {"B", false, Shrink::end, 16, 0}};
  std::string out;
  bool any_instances = false;
  std::size_t cases_with_changes = 0;
  for (const CaseDiff& c : r.cases) {
    if (!c.has_changes()) continue;
    ++cases_with_changes;
    const Rows rows = change_rows(c, style, any_instances);
    out += style.markdown ? fmt::format("**{}**\n\n", markdown_cell(pair_label(c))) : style.paragraph(pair_label(c));
    out += layout(columns, rows, style.markdown, 2) + "\n";
  }
  if (cases_with_changes == 0) return style.paragraph("No kernel, copy, resource, count or finding changed.");
  if (any_instances)
    out += style.paragraph(fmt::format("{}* the kernel's full names differ (template arguments, decorations): --format json "
                                       "lists them",
                                       style.markdown ? "\\" : ""));
  if (!style.markdown) return style.heading("changes") + out;
  return fmt::format("<details><summary>Changes in {} of {} cases</summary>\n\n{}</details>\n", cases_with_changes,
                     r.cases.size(), out);
}

std::string unmatched_section(const DiffReport& r, const Style& style) {
  std::string out;
  for (const auto& [list, title] : {std::pair{&r.only_a, "only in A (no case of B pairs with them)"},
                                    std::pair{&r.only_b, "only in B (no case of A pairs with them)"}}) {
    if (list->empty()) continue;
    out += '\n';
    out += style.heading(title);
    for (const UnmatchedCase& u : *list)
      out += style.bullet(u.key == u.label ? fmt::format("{} ({})", u.label, u.status)
                                           : fmt::format("{} ({}; key {})", u.label, u.status, u.key));
  }
  return out;
}

std::string render_human(const DiffReport& r, const Style& style) {
  std::string out = style.markdown ? "### attnprof diff: A -> B\n\n" : "attnprof diff: A -> B\n";
  out += style.markdown
             ? fmt::format("- **A** {}\n- **B** {}\n\n", markdown_cell(side_text(r.a)), markdown_cell(side_text(r.b)))
             : style.bullet(fmt::format("A {}", side_text(r.a))) + style.bullet(fmt::format("B {}", side_text(r.b)));
  out += style.paragraph(fmt::format("{}; {}.", matching_text(r.options), verdict_counts(r)));
  out += style.paragraph(verdict_rule_text(r.options)) + "\n";
  out += r.cases.empty() ? style.paragraph("No case of A pairs with a case of B.") : summary_table(r, style);
  out += '\n';
  out += changes_section(r, style);
  out += unmatched_section(r, style);
  if (!r.notes.empty()) {
    out += '\n';
    out += style.heading("notes");
    for (const std::string& note : r.notes) out += style.bullet(note);
  }
  return out;
}

// ---- CSV ----

std::string optional_number(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : ""; }

std::string render_csv(const DiffReport& r) {
  std::string out =
      "case_a,case_b,key,status_a,status_b,iterations_a,iterations_b,median_a_us,median_b_us,time_ratio,"
      "time_ratio_low,time_ratio_high,throughput_ratio,throughput_ratio_low,throughput_ratio_high,verdict,reason,"
      "kernels_added,kernels_removed,kernels_changed,memory_ops_changed,dominant_kernel_changes,count_changes,"
      "findings_appeared,findings_gone\n";
  auto row = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_cell(cells[i]);
    }
    out += '\n';
  };
  auto kinds = [](const auto& list, ChangeKind kind) {
    return std::to_string(std::count_if(list.begin(), list.end(), [&](const auto& c) {
      if constexpr (requires { c.change; }) return c.change == kind;
      else return c.kind == kind;
    }));
  };
  for (const CaseDiff& c : r.cases) {
    const TimeChange& t = c.time;
    row({c.label_a, c.label_b, c.key, c.status_a, c.status_b, std::to_string(t.iterations_a), std::to_string(t.iterations_b),
         fmt::format("{:.3f}", t.median_a_us), fmt::format("{:.3f}", t.median_b_us), optional_number(t.ratio),
         t.interval ? fmt::format("{:.6g}", t.interval->low) : "", t.interval ? fmt::format("{:.6g}", t.interval->high) : "",
         optional_number(t.throughput_ratio),
         t.throughput_interval ? fmt::format("{:.6g}", t.throughput_interval->low) : "",
         t.throughput_interval ? fmt::format("{:.6g}", t.throughput_interval->high) : "", std::string(to_string(t.verdict)),
         t.reason, kinds(c.kernels, ChangeKind::added), kinds(c.kernels, ChangeKind::removed),
         kinds(c.kernels, ChangeKind::changed), std::to_string(c.memory_ops.size()), std::to_string(c.dominant_kernel.size()),
         std::to_string(c.counts.size()), kinds(c.findings, ChangeKind::added), kinds(c.findings, ChangeKind::removed)});
  }
  for (const auto& [list, side] : {std::pair{&r.only_a, "A"}, std::pair{&r.only_b, "B"}})
    for (const UnmatchedCase& u : *list) {
      const bool in_a = std::string_view(side) == "A";
      std::vector<std::string> cells(25);
      cells[in_a ? 0 : 1] = u.label;
      cells[2] = u.key;
      cells[in_a ? 3 : 4] = u.status;
      cells[15] = fmt::format("only in {}", side);
      row(cells);
    }
  return out;
}

// ---- JSON ----

nlohmann::json interval_json(const std::optional<RatioInterval>& r) {
  return r ? nlohmann::json::array({r->low, r->high}) : nlohmann::json();
}

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json header_json(const RunHeader& h) {
  return {{"path", h.path},
          {"source", h.source},
          {"origin", h.origin},
          {"device", h.device},
          {"versions",
           {{"attnprof", h.tool_version}, {"driver", h.driver_version}, {"cuda_runtime", h.cuda_runtime_version},
            {"cudnn", h.cudnn_version}}},
          {"config", h.config},
          {"created_at", h.created_at},
          {"cases", h.cases},
          {"capture_complete", h.capture_complete}};
}

nlohmann::json time_json(const TimeChange& t) {
  return {{"iterations_a", t.iterations_a},
          {"iterations_b", t.iterations_b},
          {"median_a_us", t.median_a_us},
          {"median_b_us", t.median_b_us},
          {"ratio", optional_json(t.ratio)},
          {"interval", interval_json(t.interval)},
          {"throughput_ratio", optional_json(t.throughput_ratio)},
          {"throughput_interval", interval_json(t.throughput_interval)},
          {"verdict", to_string(t.verdict)},
          {"reason", t.reason}};
}

nlohmann::json activity_json(const std::vector<ActivityChange>& list, bool memory) {
  nlohmann::json out = nlohmann::json::array();
  for (const ActivityChange& c : list) {
    nlohmann::json j = {{"name", c.name},         {"change", to_string(c.kind)}, {"per_iter_a", c.per_iter_a},
                        {"per_iter_b", c.per_iter_b}, {"gpu_us_per_iter_a", c.us_a}, {"gpu_us_per_iter_b", c.us_b}};
    if (memory) j.update({{"bytes_per_iter_a", c.bytes_a}, {"bytes_per_iter_b", c.bytes_b}});
    else j.update({{"instances_differ", c.instances_differ}, {"full_names_a", c.full_names_a}, {"full_names_b", c.full_names_b}});
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json fields_json(const std::vector<FieldChange>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const FieldChange& f : list) out.push_back({{"field", f.field}, {"a", f.a}, {"b", f.b}});
  return out;
}

nlohmann::json case_json(const CaseDiff& c) {
  nlohmann::json findings = nlohmann::json::array();
  for (const FindingChange& f : c.findings)
    findings.push_back({{"kind", f.kind}, {"change", f.change == ChangeKind::added ? "appeared" : "gone"}, {"message", f.message}});
  return {{"label_a", c.label_a},
          {"label_b", c.label_b},
          {"key", c.key},
          {"status_a", c.status_a},
          {"status_b", c.status_b},
          {"time", time_json(c.time)},
          {"kernels", activity_json(c.kernels, false)},
          {"memory_ops", activity_json(c.memory_ops, true)},
          {"dominant_kernel", fields_json(c.dominant_kernel)},
          {"counts", fields_json(c.counts)},
          {"findings", std::move(findings)}};
}

nlohmann::json unmatched_json(const std::vector<UnmatchedCase>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const UnmatchedCase& u : list) out.push_back({{"label", u.label}, {"key", u.key}, {"status", u.status}});
  return out;
}

}  // namespace

std::string verdict_rule_text(const DiffOptions& o) {
  return fmt::format(
      "A case is faster or slower only when the {:g}% interval of its B/A median-time ratio ({} seeded bootstrap "
      "resamples of each side's timed iterations) excludes 1 and the median moved by more than {:g}% (--noise): runs "
      "drift 10-30% between them, so a smaller change is within noise however tight its interval.",
      100.0 * o.bootstrap.confidence, o.bootstrap.resamples, o.noise_percent);
}

nlohmann::json diff_to_json(const DiffReport& r) {
  nlohmann::json match = nlohmann::json::array();
  for (MatchRule rule : r.options.matching.rules)
    for (const MatchRuleName& n : kMatchRules)
      if (n.rule == rule) match.push_back(n.name);
  nlohmann::json verdicts = nlohmann::json::object();
  for (const VerdictName& v : kVerdictNames) verdicts[std::string(v.name)] = r.count(v.verdict);
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseDiff& c : r.cases) cases.push_back(case_json(c));
  return {{"schema", "attnprof-diff"},
          {"a", header_json(r.a)},
          {"b", header_json(r.b)},
          {"options",
           {{"match", std::move(match)},
            {"noise_percent", r.options.noise_percent},
            {"resamples", r.options.bootstrap.resamples},
            {"confidence", r.options.bootstrap.confidence},
            {"seed", r.options.bootstrap.seed}}},
          {"verdicts", std::move(verdicts)},
          {"cases", std::move(cases)},
          {"only_a", unmatched_json(r.only_a)},
          {"only_b", unmatched_json(r.only_b)},
          {"notes", r.notes}};
}

std::string render_diff(const DiffReport& report, OutputFormat format) {
  switch (format) {
    case OutputFormat::table: return render_human(report, {false});
    case OutputFormat::md: return render_human(report, {true});
    case OutputFormat::csv: return render_csv(report);
    case OutputFormat::json:
      return diff_to_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return {};
}

}  // namespace attnprof
