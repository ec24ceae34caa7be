#include "diff/html_diff.hpp"

#include <string_view>

#include <fmt/format.h>

#include "diff/render_diff.hpp"
#include "html/html_report.hpp"
#include "html/html_text.hpp"
#include "summary/render.hpp"

namespace attnprof {
namespace {

using html::escape_html;

// The report page's Content-Security-Policy and style sheet, taken from the report itself, so
// the two pages share one style (html_report.cpp keeps both private).
struct PageHead {
  std::string policy_meta;
  std::string style_element;
};

std::string element_of(const std::string& page, std::string_view open, std::string_view close) {
  const auto start = page.find(open);
  if (start == std::string::npos) return "";
  const auto end = page.find(close, start);
  return end == std::string::npos ? "" : page.substr(start, end + close.size() - start);
}

const PageHead& report_page_head() {
  static const PageHead head = [] {
    const std::string page = render_html_report(RunSummary{});
    return PageHead{element_of(page, "<meta http-equiv=\"Content-Security-Policy\"", ">"),
                    element_of(page, "<style>", "</style>")};
  }();
  return head;
}

// What the report's style has no class for: a verdict that is neither good nor bad news.
// Kernel names are long unbroken words: the change tables fix their columns and break names anywhere.
constexpr const char* kDiffStyle =
    "<style>.badge.neutral { background: var(--soft); color: var(--muted); } "
    "table.sides th:first-child { width: 160px; } "
    "table.changes { table-layout: fixed; } table.changes th:first-child { width: 150px; } "
    "table.changes th:nth-child(2) { width: 26%; } table.changes td { overflow-wrap: anywhere; }</style>";

const char* verdict_tone(Verdict v) {
  switch (v) {
    case Verdict::faster: return "ok";
    case Verdict::slower: return "bad";
    case Verdict::within_noise: return "neutral";
    case Verdict::unknown: return "other";
  }
  return "other";
}


std::string sides_table(const DiffReport& r) {
  std::string out = "<div class=\"card table-wrap\"><table class=\"sides\"><thead><tr><th></th><th>A</th><th>B</th></tr>"
                    "</thead><tbody>\n";
  auto row = [&](const char* what, const std::string& a, const std::string& b) {
    out += fmt::format("<tr><th>{}</th><td>{}</td><td>{}</td></tr>\n", what, escape_html(a), escape_html(b));
  };
  row("input", r.a.path, r.b.path);
  row("read from", fmt::format("{} ({})", r.a.source, r.a.origin), fmt::format("{} ({})", r.b.source, r.b.origin));
  row("GPU", r.a.device, r.b.device);
  row("attnprof", r.a.tool_version, r.b.tool_version);
  row("driver", r.a.driver_version, r.b.driver_version);
  row("CUDA runtime", r.a.cuda_runtime_version, r.b.cuda_runtime_version);
  row("cuDNN", r.a.cudnn_version, r.b.cudnn_version);
  row("config", r.a.config, r.b.config);
  row("created", r.a.created_at, r.b.created_at);
  row("cases", std::to_string(r.a.cases), std::to_string(r.b.cases));
  row("capture", r.a.capture_complete ? "complete" : "INCOMPLETE", r.b.capture_complete ? "complete" : "INCOMPLETE");
  return out + "</tbody></table></div>\n";
}

std::string header(const DiffReport& r) {
  std::string out = "<header>\n<div class=\"eyebrow\">attnprof diff</div>\n";
  out += fmt::format("<h1>{} \u2192 {}</h1>\n", escape_html(r.a.path), escape_html(r.b.path));
  out += fmt::format("<p class=\"subtitle\">{} paired: {} faster, {} slower, {} within noise, {} unknown · {} only in A, "
                     "{} only in B</p>\n",
                     r.cases.size(), r.count(Verdict::faster), r.count(Verdict::slower), r.count(Verdict::within_noise),
                     r.count(Verdict::unknown), r.only_a.size(), r.only_b.size());
  out += fmt::format("<p class=\"muted\" style=\"margin:8px 0 14px\">{}</p>\n", escape_html(verdict_rule_text(r.options)));
  return out + sides_table(r) + "</header>\n";
}

std::string time_cell(double us, const std::string& status) {
  return us > 0 ? fmt::format("<td class=\"num\">{}</td>", html::microseconds_text(us))
                : fmt::format("<td class=\"muted\">{}</td>", escape_html(status));
}

std::string cases_section(const DiffReport& r) {
  std::string out = "<section id=\"cases\">\n<h2>Cases <span class=\"count\">time B/A with its 95% interval</span></h2>\n";
  if (r.cases.empty()) return out + "<p class=\"muted\">No case of A pairs with a case of B.</p>\n</section>\n";
  out += "<div class=\"card table-wrap\">\n<table class=\"cases\">\n<thead><tr><th>case</th><th class=\"num\">A median</th>"
         "<th class=\"num\">B median</th><th class=\"num\">B/A time</th><th class=\"num\">95% interval</th>"
         "<th class=\"num\">B/A TFLOP/s</th><th>verdict</th></tr></thead>\n<tbody>\n";
  for (const CaseDiff& c : r.cases) {
    const TimeChange& t = c.time;
    const std::string key = c.key == c.label_a ? "" : fmt::format("<span class=\"detail\">key {}</span>", escape_html(c.key));
    out += fmt::format("<tr class=\"case-pair\" data-verdict=\"{}\"><td class=\"label\">{}{}</td>", to_string(t.verdict),
                       escape_html(pair_label(c, "\u2192")), key);
    out += time_cell(t.median_a_us, c.status_a) + time_cell(t.median_b_us, c.status_b);
    out += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                       t.ratio ? ratio_text(*t.ratio) : "", t.interval ? interval_text(*t.interval) : "",
                       t.throughput_ratio ? ratio_text(*t.throughput_ratio) : "");
    out += fmt::format("<td><span class=\"badge {}\">{}</span><span class=\"detail\">{}</span></td></tr>\n",
                       verdict_tone(t.verdict), to_string(t.verdict), escape_html(t.reason));
  }
  return out + "</tbody>\n</table>\n</div>\n</section>\n";
}

std::string activity_cell(const ActivityChange& c, bool side_b, bool memory) {
  if (c.kind != ChangeKind::changed && (c.kind == ChangeKind::added) != side_b) return "<td class=\"muted\">-</td>";
  std::string text = format_count(side_b ? c.per_iter_b : c.per_iter_a) + "/it";
  if (memory) text += fmt::format(" · {}", format_bytes(side_b ? c.bytes_b : c.bytes_a));
  text += fmt::format(" · {}", html::microseconds_text(side_b ? c.us_b : c.us_a));
  std::string names;
  if (c.instances_differ)
    for (const std::string& n : side_b ? c.full_names_b : c.full_names_a) names += fmt::format("<span class=\"detail mono\">{}</span>", escape_html(n));
  return fmt::format("<td>{}{}</td>", escape_html(text), names);
}

std::string change_row(const std::string& change, const std::string& what, const std::string& a_cell,
                       const std::string& b_cell) {
  return fmt::format("<tr class=\"change\"><td>{}</td><td class=\"mono\">{}</td>{}{}</tr>\n", escape_html(change),
                     escape_html(what), a_cell, b_cell);
}

std::string text_cell(const std::string& text) { return fmt::format("<td>{}</td>", escape_html(text)); }

std::string case_changes(const CaseDiff& c) {
  std::string rows;
  if (c.status_a != c.status_b) rows += change_row("status", "", text_cell(c.status_a), text_cell(c.status_b));
  for (const ActivityChange& k : c.kernels)
    rows += change_row(fmt::format("kernel {}", to_string(k.kind)), k.name, activity_cell(k, false, false),
                       activity_cell(k, true, false));
  for (const ActivityChange& m : c.memory_ops)
    rows += change_row(fmt::format("{} {}", m.name, to_string(m.kind)), "", activity_cell(m, false, true),
                       activity_cell(m, true, true));
  for (const FieldChange& f : c.dominant_kernel) rows += change_row("dominant kernel", f.field, text_cell(f.a), text_cell(f.b));
  for (const FieldChange& f : c.counts) rows += change_row("per iteration", f.field, text_cell(f.a), text_cell(f.b));
  for (const FindingChange& f : c.findings) {
    const bool added = f.change == ChangeKind::added;
    rows += change_row(added ? "finding appeared" : "finding gone", f.kind, text_cell(added ? "-" : f.message),
                       text_cell(added ? f.message : "-"));
  }
  return fmt::format("<section class=\"case-changes\">\n<h3 style=\"margin:16px 0 8px\">{}</h3>\n<div class=\"card table-wrap\">"
                     "<table class=\"changes\"><thead><tr><th>change</th><th>what</th><th>A</th><th>B</th></tr></thead>\n<tbody>\n{}"
                     "</tbody></table></div>\n</section>\n",
                     escape_html(pair_label(c, "\u2192")), rows);
}

std::string changes_section(const DiffReport& r) {
  std::string body;
  for (const CaseDiff& c : r.cases)
    if (c.has_changes()) body += case_changes(c);
  if (body.empty()) body = "<p class=\"muted\">No kernel, copy, resource, count or finding changed.</p>\n";
  return fmt::format("<section id=\"changes\">\n<h2>Changes <span class=\"count\">kernels by name without template "
                     "arguments</span></h2>\n{}</section>\n",
                     body);
}

std::string unmatched_section(const DiffReport& r) {
  if (r.only_a.empty() && r.only_b.empty()) return "";
  std::string out = "<section id=\"unmatched\">\n<h2>Cases without a partner</h2>\n<ul class=\"plain notes card\">\n";
  for (const auto& [list, side] : {std::pair{&r.only_a, "A"}, std::pair{&r.only_b, "B"}})
    for (const UnmatchedCase& u : *list)
      out += fmt::format("<li class=\"unmatched\" data-side=\"{}\"><span class=\"kind\">only in {}</span><span "
                         "class=\"subject\">{}</span> <span class=\"muted\">{}{}</span></li>\n",
                         side, side, escape_html(u.label), escape_html(u.status),
                         u.key == u.label ? "" : fmt::format(" · key {}", escape_html(u.key)));
  return out + "</ul>\n</section>\n";
}

std::string notes_section(const DiffReport& r) {
  if (r.notes.empty()) return "";
  std::string out = "<section id=\"notes\">\n<h2>Notes</h2>\n<ul class=\"plain notes card\">\n";
  for (const std::string& note : r.notes) out += fmt::format("<li>{}</li>\n", escape_html(note));
  return out + "</ul>\n</section>\n";
}

}  // namespace

std::string render_diff_html(const DiffReport& r) {
  const PageHead& head = report_page_head();
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += head.policy_meta + "\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += fmt::format("<title>{}</title>\n{}\n{}\n</head>\n<body>\n<main>\n",
                      escape_html(fmt::format("attnprof diff: {} \u2192 {}", r.a.path, r.b.path)), head.style_element,
                      kDiffStyle);
  page += header(r) + cases_section(r) + changes_section(r) + unmatched_section(r) + notes_section(r);
  page += "<footer>attnprof diff · one self-contained page: no script, nothing loaded from the network</footer>\n";
  return page + "</main>\n</body>\n</html>\n";
}

}  // namespace attnprof
