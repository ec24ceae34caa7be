#include "html/html_report.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "html/html_text.hpp"
#include "html/report_charts.hpp"
#include "summary/finding_groups.hpp"
#include "summary/findings.hpp"
#include "summary/kernel_category.hpp"
#include "summary/render.hpp"

namespace attnprof {
namespace {

using html::escape_html;

// No script, no font, no image: the style is inline and the charts are inline SVG, so the
// policy allows inline style and nothing else; a reference that slipped in is refused, not fetched.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; font-src 'none'; connect-src 'none'; "
    "base-uri 'none'; form-action 'none'";

constexpr const char* kStyle = R"css(
:root { --fg: #1f2328; --muted: #59636e; --line: #d8dee4; --soft: #eef1f4; --bg: #f6f8fa; --card: #fff;
        --accent: #4e79a7; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 28px 24px 32px; }
.eyebrow { text-transform: uppercase; letter-spacing: .08em; font-size: 12px; color: var(--accent); font-weight: 700; }
h1 { font-size: 26px; line-height: 1.25; margin: 4px 0 2px; }
h2 { font-size: 18px; margin: 30px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
h2 .count { color: var(--muted); font-weight: 400; font-size: 14px; }
h3 { font-size: 15px; margin: 0; }
p { margin: 0; }
.subtitle, .muted, figcaption p { color: var(--muted); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
.mono { font-family: ui-monospace, SFMono-Regular, "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace;
        font-size: 12px; }
dl.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(330px, 1fr)); gap: 10px 28px;
           margin: 16px 0 0; padding: 14px 18px; }
dl.facts dt { font-size: 12px; color: var(--muted); }
dl.facts dd { margin: 0; }
.banner { margin-top: 12px; padding: 10px 14px; border-radius: 8px; background: #fff8c5; border: 1px solid #d4a72c; }
.badge { display: inline-block; padding: 0 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
         white-space: nowrap; }
.badge.ok { background: #dafbe1; color: var(--ok); }
.badge.bad { background: #ffebe9; color: var(--bad); }
.badge.other { background: #fff8c5; color: var(--warn); }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 7px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--soft); font-size: 12px; font-weight: 600; color: var(--muted); white-space: nowrap; }
tbody tr:last-child td { border-bottom: none; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.label { font-weight: 600; }
td .detail { display: block; color: var(--muted); font-size: 12px; }
td.occupancy { white-space: normal; min-width: 96px; }
td.label { min-width: 170px; }
ul.plain { list-style: none; margin: 0; padding: 0; }
li.finding-group { padding: 12px 16px; border-bottom: 1px solid var(--line); }
li.finding-group:last-child { border-bottom: none; }
.kind { display: inline-block; font-size: 11px; font-weight: 700; text-transform: uppercase; letter-spacing: .05em;
        color: var(--accent); margin-right: 8px; }
.subject { font-weight: 600; }
.stake { display: inline-block; font-size: 12px; font-weight: 700; font-variant-numeric: tabular-nums; min-width: 72px;
         margin-right: 8px; }
details.folded { margin-top: 12px; }
details.folded summary { cursor: pointer; color: var(--muted); margin-bottom: 8px; }
.message { margin-top: 2px; }
.chips { margin-top: 6px; display: flex; flex-wrap: wrap; gap: 4px; }
.chip { background: var(--soft); border-radius: 4px; padding: 0 6px; font-size: 12px; color: var(--muted); }
.notes li { padding: 8px 16px; border-bottom: 1px solid var(--line); }
.notes li:last-child { border-bottom: none; }
figure.chart-card { margin: 0 0 18px; padding: 16px 18px 10px; }
figcaption p { font-size: 13px; margin-top: 2px; }
svg.chart { display: block; width: 100%; height: auto; margin-top: 10px; overflow: visible; }
svg.chart text { font-size: 12px; fill: var(--fg); }
svg.chart .tick { fill: var(--muted); font-size: 11px; }
svg.chart .axis-title, svg.chart .value, svg.chart .note { fill: var(--muted); }
svg.chart .value { font-variant-numeric: tabular-nums; }
svg.chart .value.strong { fill: var(--fg); font-weight: 600; }
svg.chart .group-label { font-weight: 600; }
svg.chart .grid { stroke: #e3e7eb; stroke-width: 1; }
svg.chart .grid.minor { stroke: #f1f3f5; }
svg.chart .grid.zero { stroke: #8c959f; }
svg.chart .frame { fill: none; stroke: #c9d1d9; }
svg.chart .wall { fill: none; stroke: #8c959f; stroke-dasharray: 3 2; }
svg.chart rect.mark { stroke: #fff; stroke-width: .5; }
svg.chart circle.mark { stroke: #fff; stroke-width: 1.5; }
svg.chart .mark:hover { opacity: .8; }
svg.chart .roof { stroke: #1f2328; stroke-width: 2.5; stroke-linecap: round; }
svg.chart .roof-label { font-weight: 600; }
svg.chart .roof-label.ridge { fill: var(--muted); font-weight: 400; font-size: 11px; }
svg.chart .roofs-unknown { fill: var(--warn); font-weight: 600; }
svg.chart .series { fill: none; stroke-width: 1.5; }
svg.chart .guide { stroke: #8c959f; stroke-width: 1; stroke-dasharray: 4 3; }
svg.chart .guide-label { fill: var(--muted); font-size: 11px; }
footer { margin-top: 26px; color: var(--muted); font-size: 12px; text-align: center; }
@media print { body { background: #fff; } .card { border-color: #bbb; } figure.chart-card { break-inside: avoid; } }
)css";

std::string status_badge(const CaseSummary& c) {
  if (c.status == CaseStatus::ok && c.verified && !c.verify_passed) return "<span class=\"badge bad\">WRONG</span>";
  if (c.status == CaseStatus::ok) return "<span class=\"badge ok\">ok</span>";
  const char* tone = c.status == CaseStatus::failed ? "bad" : "other";
  return fmt::format("<span class=\"badge {}\" title=\"{}\">{}</span>", tone, escape_html(c.reason), to_string(c.status));
}

std::string device_text(const RunSummary& s) {
  std::string text = s.device.name.empty() ? "unknown GPU" : s.device.name;
  if (s.device.compute_major > 0) text += fmt::format(" · sm_{}{}", s.device.compute_major, s.device.compute_minor);
  if (s.device.sm_count > 0) text += fmt::format(" · {} SMs", s.device.sm_count);
  return text;
}

std::string config_text(const RunSummary& s) { return s.config_name.empty() ? s.config_source : s.config_name; }

std::string header(const RunSummary& s) {
  std::size_t ran = 0;
  for (const CaseSummary& c : s.cases) ran += c.status == CaseStatus::ok;
  std::string out = "<header>\n<div class=\"eyebrow\">attnprof report</div>\n";
  out += fmt::format("<h1>{}</h1>\n", escape_html(config_text(s).empty() ? "attnprof run" : config_text(s)));
  out += fmt::format("<p class=\"subtitle\">{} · {} case{}, {} ran</p>\n", escape_html(device_text(s)), s.cases.size(),
                     s.cases.size() == 1 ? "" : "s", ran);
  out += "<dl class=\"facts card\">\n";
  auto fact = [&](const char* term, const std::string& value_html) {
    out += fmt::format("<div><dt>{}</dt><dd>{}</dd></div>\n", term, value_html);
  };
  fact("Device", escape_html(device_text(s)));
  std::string config = escape_html(config_text(s));
  if (!s.config_name.empty() && !s.config_source.empty())
    config += " <span class=\"muted mono\">" + escape_html(s.config_source) + "</span>";
  fact("Config", config);
  std::vector<std::string> versions;
  auto version = [&](const char* what, const std::string& value) {
    if (!value.empty()) versions.push_back(escape_html(fmt::format("{} {}", what, value)));
  };
  version("attnprof", s.tool_version);
  version("driver", s.driver_version);
  version("CUDA runtime", s.cuda_runtime_version);
  version("CUPTI", s.cupti_version);
  version("cuDNN", s.cudnn_version);
  fact("Versions", versions.empty() ? "unknown" : fmt::format("{}", fmt::join(versions, " · ")));
  fact("Capture",
       fmt::format("<span class=\"badge {}\">{}</span> {} records, {} dropped, {} buffer requests declined, {} with invalid "
                   "timestamps",
                   s.capture.complete() ? "ok" : "bad", s.capture.complete() ? "complete" : "INCOMPLETE: counts may be low",
                   s.capture.records, s.capture.dropped_records, s.capture.buffers_declined, s.capture.invalid_timestamps));
  fact("Created", escape_html(s.created_at.empty() ? "unknown" : s.created_at));
  out += "</dl>\n";
  if (s.interrupted)
    out += "<p class=\"banner\">The run was interrupted: cases it did not reach are marked interrupted.</p>\n";
  return out + "</header>\n";
}

std::string case_table(const RunSummary& s) {
  bool several_devices = false, any_memory = false;
  for (const CaseSummary& c : s.cases) {
    several_devices = several_devices || c.device != s.cases.front().device;
    any_memory = any_memory || c.memory.has_value();
  }
  std::string out = "<section id=\"cases\">\n<h2>Cases</h2>\n<div class=\"card table-wrap\">\n<table class=\"cases\">\n<thead><tr>";
  out += "<th>case</th>";
  if (several_devices) out += "<th class=\"num\">GPU</th>";
  out += "<th>status</th><th class=\"num\">median</th><th class=\"num\">TFLOP/s</th><th class=\"num\">kernels/it</th>"
         "<th class=\"num\">memcpy/it</th><th class=\"num\">memset/it</th>";
  if (any_memory) out += "<th class=\"num\">peak mem</th>";
  out += "<th>dominant kernel</th><th class=\"num\">regs</th><th class=\"num\">occupancy</th></tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < s.cases.size(); ++i) {
    const CaseSummary& c = s.cases[i];
    const bool ran = c.status == CaseStatus::ok;
    out += fmt::format("<tr class=\"case\" data-case=\"{}\" data-status=\"{}\">", i, to_string(c.status));
    out += fmt::format("<td class=\"label\">{}</td>", escape_html(c.label));
    if (several_devices) out += fmt::format("<td class=\"num\">{}</td>", c.device);
    out += fmt::format("<td>{}</td>", status_badge(c));
    if (!ran) {
      out += fmt::format("<td colspan=\"{}\" class=\"muted\">{}</td></tr>\n", any_memory ? 9 : 8, escape_html(c.reason));
      continue;
    }
    auto count_cell = [](double per_iter, double bytes) {
      std::string cell = format_count(per_iter);
      if (per_iter > 0) cell += "<span class=\"detail\">" + escape_html(format_bytes(bytes)) + "</span>";
      return "<td class=\"num\">" + cell + "</td>";
    };
    out += fmt::format("<td class=\"num\">{}<span class=\"detail\">p90 {}</span></td>", html::microseconds_text(c.median_us),
                       html::microseconds_text(c.p90_us));
    out += fmt::format("<td class=\"num\">{:.2f}</td><td class=\"num\">{}</td>", c.tflops, format_count(c.kernels_per_iter));
    out += count_cell(c.memcpy_per_iter, c.memcpy_bytes_per_iter) + count_cell(c.memset_per_iter, c.memset_bytes_per_iter);
    if (any_memory) {
      std::string cell;
      if (c.memory) {
        cell = escape_html(format_bytes(static_cast<double>(c.memory->peak_bytes)));
        if (c.memory->allocations_per_iter > 0)
          cell += fmt::format("<span class=\"detail\">{} alloc/it</span>", format_count(c.memory->allocations_per_iter));
      }
      out += "<td class=\"num\">" + cell + "</td>";
    }
    if (const KernelSummary* k = c.dominant_kernel()) {
      out += fmt::format(
          "<td><span class=\"mono\" title=\"{}\">{}</span><span class=\"detail\">{} · block {} · grid {} · {} smem</span></td>",
          escape_html(k->name), escape_html(shorten(shorten_name(k->name), 36)),
          escape_html(k->launch_api.empty() ? "unknown API" : k->launch_api), format_dims(k->block), format_dims(k->grid),
          escape_html(format_bytes(k->shared_bytes)));
      out += fmt::format("<td class=\"num\">{}</td>", k->registers_per_thread);
      std::string occupancy = k->occupancy_valid ? fmt::format("{:.1f}%", k->theoretical_occupancy_percent) : "?";
      if (k->achieved_occupancy_percent)
        occupancy += fmt::format("<span class=\"detail\">{:.1f}% achieved</span>", *k->achieved_occupancy_percent);
      if (!k->occupancy_limiter.empty())
        occupancy += "<span class=\"detail\">" + escape_html(k->occupancy_limiter) + "</span>";
      out += fmt::format("<td class=\"num occupancy\" title=\"{}\">{}</td>", escape_html(k->occupancy_explanation), occupancy);
    } else {
      out += "<td class=\"muted\">no kernel</td><td></td><td></td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n</div>\n";

  std::string notes;
  for (const CaseSummary& c : s.cases) {
    const bool wrong = c.status == CaseStatus::ok && c.verified && !c.verify_passed;
    if ((c.status != CaseStatus::ok && !c.reason.empty()) || wrong)
      notes += fmt::format("<li><span class=\"subject\">{}</span> {}: {}</li>\n", escape_html(c.label),
                           wrong ? "WRONG" : to_string(c.status), escape_html(c.reason));
  }
  if (!notes.empty()) out += "<h3 style=\"margin:16px 0 8px\">Not run or wrong</h3>\n<ul class=\"plain notes card\">\n" + notes + "</ul>\n";
  return out + "</section>\n";
}

std::string surprises_html(const RunSummary& s) {
  std::size_t surprises = 0;
  for (const CaseSummary& c : s.cases) surprises += c.surprises.size();
  if (surprises == 0) return "";
  std::string out =
      "<h3 style=\"margin:0 0 8px\">Surprises: your guesses the trace contradicts</h3>\n<div class=\"card table-wrap\">"
      "<table class=\"surprises\"><thead><tr><th>case</th><th>field</th><th class=\"num\">expected</th>"
      "<th class=\"num\">trace shows</th><th>expectation</th></tr></thead>\n<tbody>\n";
  for (const CaseSummary& c : s.cases)
    for (const Surprise& x : c.surprises)
      out += fmt::format("<tr class=\"surprise\"><td class=\"label\">{}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\">{}</td><td><span class=\"mono\">{}</span>{}</td></tr>\n",
                         escape_html(c.label), escape_html(x.field), escape_html(x.expected), escape_html(x.observed),
                         escape_html(x.expectation),
                         x.note.empty() ? "" : "<span class=\"detail\">" + escape_html(x.note) + "</span>");
  return out + "</tbody></table></div>\n";
}

std::string finding_group_html(const FindingGroup& g, const RunSummary& s) {
  std::string out = fmt::format("<li class=\"finding-group\" data-kind=\"{}\" data-cases=\"{}\" data-stake=\"{:.2f}\">",
                                escape_html(g.kind), g.cases.size(), g.lead().share_percent);
  const std::string stake = stake_text(g.lead());
  if (!stake.empty()) out += fmt::format("<span class=\"stake\">{}</span>", escape_html(stake));
  out += fmt::format("<span class=\"kind\">{}</span><span class=\"subject\">{}</span>", escape_html(finding_kind_title(g.kind)),
                     escape_html(finding_group_subject(g, s)));
  out += fmt::format("<p class=\"message\">{}</p>", escape_html(g.message));
  if (g.cases.size() > 1) {
    // Each case with its own figure, the most at stake first.
    out += "<div class=\"chips\">";
    for (std::size_t i = 0; i < g.cases.size(); ++i) {
      const std::string figure = stake.empty() || g.lead().basis == StakeBasis::correctness
                                     ? ""
                                     : " " + escape_html(stake_text(g.stakes[i]));
      out += fmt::format("<span class=\"chip\">{}{}</span>", escape_html(s.cases[g.cases[i]].label), figure);
    }
    out += "</div>";
  }
  return out + "</li>\n";
}

// Surprises first, then the findings ranked by what is at stake (finding_groups.hpp); those the
// terminal folds by default are in a closed <details> below.
std::string findings_section(const RunSummary& s) {
  const std::vector<FindingGroup> ranked = rank_findings(s);
  const std::size_t total = ranked.size();
  const SelectedFindings shown = select_findings(ranked, {});
  const SelectedFindings all = select_findings(ranked, {FindingsView::Mode::all, 0});
  std::string out = fmt::format("<section id=\"findings\">\n<h2>Findings <span class=\"count\">{} kinds, ranked by the "
                                "share of their case's time they explain</span></h2>\n",
                                total);
  out += surprises_html(s);
  if (total == 0) return out + "<p class=\"muted\">No findings.</p>\n</section>\n";
  out += "<ul class=\"plain card findings\">\n";
  for (const FindingGroup& g : shown.shown) out += finding_group_html(g, s);
  out += "</ul>\n";
  if (shown.folded_groups > 0) {
    out += fmt::format("<details class=\"folded\"><summary>{} more kind(s) of finding ({} in all) that explain less "
                       "than {:.0f}% of their case's time</summary>\n<ul class=\"plain card findings\">\n",
                       shown.folded_groups, shown.folded_findings, kShownSharePercent);
    for (const FindingGroup& g : all.shown)
      if (std::none_of(shown.shown.begin(), shown.shown.end(), [&](const FindingGroup& x) { return x.kind == g.kind; }))
        out += finding_group_html(g, s);
    out += "</ul></details>\n";
  }
  return out + "</section>\n";
}

std::string figure(const char* title, const std::string& caption_html, const std::string& svg) {
  return fmt::format("<figure class=\"card chart-card\">\n<figcaption><h3>{}</h3><p>{}</p></figcaption>\n{}</figure>\n", title,
                     caption_html, svg);
}

std::string charts_section(const RunSummary& s, const HtmlReportOptions& options) {
  std::string out = "<section id=\"charts\">\n<h2>Charts</h2>\n";
  out += figure("GPU time per iteration, by kernel category",
                "Summed GPU time of each case's timed iteration, split into compute kernels, communication (NCCL) "
                "kernels, memcpy and memset. The dashed outline is the median iteration as CUDA events timed it: where it "
                "runs past the bar, the GPU waited on the host.",
                html::gpu_time_chart(s));
  out += figure("TFLOP/s per backend, by problem",
                "One group per problem (dtype, masking, batch × heads × seq_q × seq_kv × head_dim), one bar per backend; "
                "exact attention FLOPs over the median iteration.",
                html::tflops_chart(s));
  std::string roofline_caption =
      "Each case at its arithmetic intensity (attention FLOPs over the minimum bytes: q, k and v read once, o written "
      "once) and its achieved TFLOP/s, under the GPU's memory-bandwidth and compute roofs; points that would cover "
      "each other are moved sideways.";
  if (options.roofs && options.roofs->peak_tflops > 0 && options.roofs->peak_gbps > 0)
    roofline_caption += fmt::format(" Roofs: {} TFLOP/s, {:.0f} GB/s ({}).", fmt::format("{:.0f}", options.roofs->peak_tflops),
                                    options.roofs->peak_gbps,
                                    escape_html(options.roofs->source.empty() ? "source not given" : options.roofs->source));
  else
    roofline_caption += " The roofs of this GPU are not known to this report, so only the points are drawn.";
  out += figure("Roofline", roofline_caption, html::roofline_chart(s, options.roofs));
  const std::string occupancy = html::occupancy_chart(s);
  if (!occupancy.empty())
    out += figure("Occupancy: theoretical beside achieved",
                  "Theoretical occupancy from each kernel's registers, shared memory and block size; achieved occupancy "
                  "measured by the CUPTI range profiler on a replayed forward (--metrics occupancy).",
                  occupancy);
  else
    out += "<p class=\"muted\">No achieved occupancy was measured (run with <span class=\"mono\">--metrics "
           "occupancy</span>), so the occupancy chart is left out.</p>\n";
  const std::string memory = html::memory_chart(s);
  if (!memory.empty()) {
    out += figure("Device memory at the peak, by what holds it",
                  "Device memory live at each case's peak during its timed iterations, from CUPTI's memory records: "
                  "the buffers allocated before them (the plan's) and those allocated inside, split by the name the "
                  "backend gives each buffer (other: unnamed). Pinned host memory is not counted.",
                  memory);
    out += figure("Peak device memory against sequence length",
                  "Each case's peak over its sequence length (seq_kv), one line per backend and problem, log-log: the "
                  "dashed guides rise as S and as S²; a backend that stores the score matrix climbs with the second.",
                  html::memory_scaling_chart(s));
  }
  return out + "</section>\n";
}

}  // namespace

// The roofs the page draws: the caller's, else the summary's (for the dtype the first case that
// ran computes in; the tensor-core roof for mixed runs).
std::optional<DeviceRoofs> roofs_to_draw(const RunSummary& s, const HtmlReportOptions& options) {
  if (options.roofs) return options.roofs;
  if (!s.roofs) return std::nullopt;
  DType dtype = DType::bf16;
  for (const CaseSummary& c : s.cases)
    if (c.status == CaseStatus::ok) {
      dtype = c.problem.dtype;
      break;
    }
  return DeviceRoofs{s.roofs->tflops_for(dtype), s.roofs->gbps, s.roofs->source};
}

std::string render_html_report(const RunSummary& summary, const HtmlReportOptions& given) {
  HtmlReportOptions options = given;
  options.roofs = roofs_to_draw(summary, given);
  const std::string title =
      options.title.empty() ? fmt::format("attnprof report: {} on {}", config_text(summary), device_text(summary)) : options.title;
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += fmt::format("<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n", kContentSecurityPolicy);
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += fmt::format("<meta name=\"generator\" content=\"attnprof {}\">\n", escape_html(summary.tool_version));
  page += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n", escape_html(title), kStyle);
  page += header(summary);
  page += case_table(summary);
  page += findings_section(summary);
  page += charts_section(summary, options);
  page += fmt::format(
      "<footer>attnprof {} · {} · one self-contained page: no script, nothing loaded from the network</footer>\n",
      escape_html(summary.tool_version), escape_html(summary.created_at));
  page += "</main>\n</body>\n</html>\n";
  return page;
}

}  // namespace attnprof
