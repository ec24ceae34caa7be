#include "html/report_charts.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "core/types.hpp"
#include "html/html_text.hpp"
#include "html/svg_plot.hpp"
#include "summary/findings.hpp"
#include "summary/kernel_category.hpp"
#include "summary/render.hpp"

namespace attnprof::html {
namespace {

constexpr double kWidth = 960;  // every chart's viewBox width: the page's content column

// Category colours: compute in the palette's blue, the memory categories warm (they are the
// ones to notice), communication apart.
const std::array<std::pair<const char*, const char*>, 5> kCategoryColors = {{{kComputeKernel, "#4e79a7"},
                                                                             {kCommunicationKernel, "#b07aa1"},
                                                                             {kMemcpyCategory, "#f28e2b"},
                                                                             {kMemsetCategory, "#e15759"},
                                                                             {kMemoryCategory, "#9c755f"}}};

std::string category_color(const std::string& category) {
  for (const auto& [name, color] : kCategoryColors)
    if (category == name) return color;
  return "#bab0ac";
}

std::string backend_color(const std::vector<std::string>& backends, const std::string& backend) {
  const auto at = std::find(backends.begin(), backends.end(), backend);
  const std::size_t index = at == backends.end() ? 0 : static_cast<std::size_t>(at - backends.begin());
  return palette()[index % palette().size()];
}

std::string tflops_text(double tflops) {
  if (tflops >= 100) return fmt::format("{:.0f}", tflops);
  if (tflops >= 10) return fmt::format("{:.1f}", tflops);
  return fmt::format("{:.2f}", tflops);
}

bool ran(const CaseSummary& c) { return c.status == CaseStatus::ok; }

bool has_flops(const CaseSummary& c) { return ran(c) && attention_flops(c.problem) > 0 && c.tflops > 0; }

std::string svg_open(const char* name, double height, const std::string& description) {
  return fmt::format(
      "<svg class=\"chart\" data-chart=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" "
      "height=\"{}\" role=\"img\" aria-label=\"{}\">\n",
      name, px(kWidth), px(height), px(kWidth), px(height), escape_html(description));
}

// Text that fits `max_px`, shortened by `shorten_fn`, with the whole text as its tooltip.
template <typename Shorten>
std::string fitted_text(double x, double y, const std::string& text, double max_px, const char* css_class,
                        const char* anchor, Shorten shorten_fn) {
  const std::size_t max_chars = static_cast<std::size_t>(std::max(4.0, max_px / text_width("m")));
  const std::string shown = shorten_fn(text, max_chars);
  std::string out = fmt::format("<text class=\"{}\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">", css_class, px(x), px(y),
                                anchor);
  out += escape_html(shown);
  if (shown != text) out += "<title>" + escape_html(text) + "</title>";
  return out + "</text>\n";
}

std::string middle(std::string_view text, std::size_t width) { return shorten_middle(text, width); }
std::string ending(std::string_view text, std::size_t width) { return shorten(text, width); }

// A row of legend entries (text, colour) from x; an entry without a colour shows the dashed
// outline of the median iteration.
std::string legend(double x, double y, const std::vector<std::pair<std::string, std::string>>& entries) {
  double width = 0;
  for (const auto& [text, color] : entries) width += (color.empty() ? 20 : 16) + text_width(text) + 18;
  x = std::max(8.0, std::min(x, kWidth - width));  // moved left rather than cut off
  std::string out = "<g class=\"legend\">\n";
  for (const auto& [text, color] : entries) {
    out += "<g class=\"legend-item\">";
    if (color.empty())
      out += fmt::format("<rect class=\"swatch wall\" x=\"{}\" y=\"{}\" width=\"14\" height=\"10\"/>", px(x), px(y - 5));
    else
      out += fmt::format("<rect class=\"swatch\" x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" rx=\"2\" fill=\"{}\"/>",
                         px(x), px(y - 5), color);
    const double text_x = x + (color.empty() ? 20 : 16);
    out += fmt::format("<text x=\"{}\" y=\"{}\" dominant-baseline=\"central\">{}</text></g>\n", px(text_x), px(y),
                       escape_html(text));
    x = text_x + text_width(text) + 18;
  }
  return out + "</g>\n";
}

// Vertical grid lines and their labels under a horizontal linear axis.
std::string linear_x_axis(const Scale& x, const std::vector<double>& ticks, double top, double bottom,
                          const std::string& title, const char* unit = "") {
  std::string out = "<g class=\"axis\">\n";
  for (double t : ticks) {
    out += fmt::format("<line class=\"grid{}\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", t == 0 ? " zero" : "",
                       px(x(t)), px(x(t)), px(top), px(bottom));
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n", px(x(t)),
                       px(bottom + 16), tick_text(t), unit);
  }
  out += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     px((x.from + x.to) / 2), px(bottom + 36), escape_html(title));
  return out + "</g>\n";
}

std::string kernel_list(const std::vector<const KernelSummary*>& kernels) {
  std::string text;
  for (std::size_t i = 0; i < kernels.size() && i < 4; ++i)
    text += fmt::format("{}{} ({}, {}x)", i ? ", " : "", shorten_name(kernels[i]->name),
                        microseconds_text(kernels[i]->gpu_us_per_iter), format_count(kernels[i]->per_iter));
  if (kernels.size() > 4) text += fmt::format(" and {} more", kernels.size() - 4);
  return text;
}

std::string category_tooltip(const CaseSummary& c, const CategoryTime& t) {
  std::string text = fmt::format("{}: {} of GPU time per iteration", t.category, microseconds_text(t.us_per_iter));
  if (!t.kernels.empty()) {
    double launches = 0;
    for (const KernelSummary* k : t.kernels) launches += k->per_iter;
    text += fmt::format(", {} launches of {} kernels: {}", format_count(launches), t.kernels.size(), kernel_list(t.kernels));
  }
  for (const MemoryOpSummary& op : c.memory_ops)
    if (op.per_iter > 0 && t.kernels.empty())
      text += fmt::format("; {} {} of {} per iteration ({})", format_count(op.per_iter), op.what,
                          format_bytes(op.bytes_per_iter), op.launch_api.empty() ? "unknown API" : op.launch_api);
  return text;
}

}  // namespace

std::vector<CategoryTime> gpu_time_by_category(const CaseSummary& c) {
  std::vector<CategoryTime> times;
  double kernel_us = 0;
  for (const char* category : {kComputeKernel, kCommunicationKernel}) {
    CategoryTime t{category, 0, {}};
    for (const KernelSummary& k : c.kernels)
      if (kernel_category(k.name) == std::string_view(category)) {
        t.us_per_iter += k.gpu_us_per_iter;
        t.kernels.push_back(&k);
      }
    kernel_us += t.us_per_iter;
    if (t.us_per_iter > 0) times.push_back(std::move(t));
  }
  // Busy time is summed kernel, memcpy and memset durations, so what is not in kernels is the
  // memory operations'. Rounding leaves a few 1e-15 us where there are none.
  const double memory_us = c.gpu_busy_us_per_iter - kernel_us;
  const bool copies = c.memcpy_per_iter > 0, fills = c.memset_per_iter > 0;
  if ((copies || fills) && memory_us > 1e-6) {
    const char* category = copies && fills ? kMemoryCategory : copies ? kMemcpyCategory : kMemsetCategory;
    times.push_back({category, memory_us, {}});
  }
  return times;
}

std::vector<std::size_t> cases_that_ran(const RunSummary& s) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < s.cases.size(); ++i)
    if (ran(s.cases[i])) rows.push_back(i);
  return rows;
}

std::vector<ProblemGroup> tflops_groups(const RunSummary& s) {
  std::vector<ProblemGroup> groups;
  std::vector<const AttentionProblem*> problems;
  for (std::size_t i = 0; i < s.cases.size(); ++i) {
    const CaseSummary& c = s.cases[i];
    if (!has_flops(c)) continue;
    std::size_t g = 0;
    while (g < problems.size() && !(*problems[g] == c.problem)) ++g;
    if (g == problems.size()) {
      problems.push_back(&c.problem);
      std::string label = case_label("", c.problem);
      label.erase(0, label.find_first_not_of(' '));
      groups.push_back({label, {}});
    }
    groups[g].cases.push_back(i);
  }
  return groups;
}

double arithmetic_intensity(const AttentionProblem& problem) {
  const double bytes = attention_min_bytes(problem);
  return bytes > 0 ? attention_flops(problem) / bytes : 0;
}

std::vector<std::size_t> roofline_cases(const RunSummary& s) {
  std::vector<std::size_t> points;
  for (std::size_t i = 0; i < s.cases.size(); ++i)
    if (has_flops(s.cases[i]) && arithmetic_intensity(s.cases[i].problem) > 0) points.push_back(i);
  return points;
}

std::vector<OccupancyRow> occupancy_rows(const RunSummary& s) {
  std::vector<OccupancyRow> rows;
  for (std::size_t i = 0; i < s.cases.size(); ++i) {
    if (!ran(s.cases[i])) continue;
    for (std::size_t k = 0; k < s.cases[i].kernels.size(); ++k)
      if (s.cases[i].kernels[k].achieved_occupancy_percent) rows.push_back({i, k});
  }
  return rows;
}

std::vector<std::size_t> memory_cases(const RunSummary& s) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < s.cases.size(); ++i)
    if (ran(s.cases[i]) && s.cases[i].memory) rows.push_back(i);
  return rows;
}

std::vector<std::string> memory_roles(const RunSummary& s) {
  std::vector<std::string> roles;
  for (std::size_t i : memory_cases(s))
    for (const MemoryRole& r : s.cases[i].memory->roles)
      if (r.peak_bytes > 0 && std::find(roles.begin(), roles.end(), r.role) == roles.end()) roles.push_back(r.role);
  return roles;
}

std::vector<std::size_t> memory_scaling_cases(const RunSummary& s) {
  std::vector<std::size_t> points;
  for (std::size_t i : memory_cases(s))
    if (s.cases[i].memory->peak_bytes > 0 && s.cases[i].problem.shape.seq_kv > 0) points.push_back(i);
  return points;
}

std::vector<MemorySeries> memory_series(const RunSummary& s) {
  // The problem without its sequence lengths: what a line holds fixed.
  const auto fixed = [](AttentionProblem p) {
    p.shape.seq_q = p.shape.seq_kv = 0;
    p.shape.seq_lens_q.clear();
    p.shape.seq_lens_kv.clear();
    return p;
  };
  std::vector<MemorySeries> series;
  std::vector<AttentionProblem> problems;
  for (std::size_t i : memory_scaling_cases(s)) {
    const CaseSummary& c = s.cases[i];
    const AttentionProblem p = fixed(c.problem);
    std::size_t k = 0;
    while (k < series.size() && !(series[k].backend == c.backend && problems[k] == p)) ++k;
    if (k == series.size()) {
      const AttentionShape& sh = c.problem.shape;
      std::string heads = sh.kv_heads() == sh.heads ? std::to_string(sh.heads) : fmt::format("{}/{}", sh.heads, sh.kv_heads());
      series.push_back({c.backend,
                        fmt::format("{} {} {} {}x{} d{}{}", c.backend, to_string(c.problem.dtype), mask_label(c.problem),
                                    sh.batch, heads, sh.head_dim, c.problem.is_backward() ? " backward" : ""),
                        {}});
      problems.push_back(p);
    }
    series[k].cases.push_back(i);
  }
  for (MemorySeries& line : series)
    std::stable_sort(line.cases.begin(), line.cases.end(), [&](std::size_t a, std::size_t b) {
      return s.cases[a].problem.shape.seq_kv < s.cases[b].problem.shape.seq_kv;
    });
  return series;
}

std::vector<std::string> backend_order(const RunSummary& s) {
  std::vector<std::string> backends;
  for (const CaseSummary& c : s.cases)
    if (std::find(backends.begin(), backends.end(), c.backend) == backends.end()) backends.push_back(c.backend);
  return backends;
}

// ---- (a) GPU time per iteration by category: a stacked bar per case ----

std::string gpu_time_chart(const RunSummary& s) {
  const std::vector<std::size_t> rows = cases_that_ran(s);
  constexpr double kTop = 44, kRow = 28, kBar = 16, kValueColumn = 200;
  double label_px = 120;
  for (std::size_t i : rows) label_px = std::max(label_px, text_width(s.cases[i].label));
  label_px = std::min(label_px, 340.0);
  const double x0 = label_px + 16, x1 = kWidth - kValueColumn;
  const double bottom = kTop + std::max<double>(rows.size(), 1) * kRow;
  const double height = bottom + 48;

  double max_us = 0;
  std::vector<std::string> present;
  std::vector<std::vector<CategoryTime>> times;
  for (std::size_t i : rows) {
    const CaseSummary& c = s.cases[i];
    max_us = std::max({max_us, c.gpu_busy_us_per_iter, c.median_us});
    times.push_back(gpu_time_by_category(c));
    for (const CategoryTime& t : times.back())
      if (std::find(present.begin(), present.end(), t.category) == present.end()) present.push_back(t.category);
  }
  const std::vector<double> ticks = linear_ticks(max_us, 6);
  const Scale x{0, ticks.back(), x0, x1};

  std::string out = svg_open("gpu-time", height, "GPU time per iteration of each case, split by kernel category");
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [name, color] : kCategoryColors)
    if (std::find(present.begin(), present.end(), name) != present.end()) entries.emplace_back(name, color);
  entries.emplace_back("median iteration (CUDA events)", "");
  out += legend(x0, 16, entries);
  out += linear_x_axis(x, ticks, kTop - 8, bottom, "GPU time per timed iteration (µs): kernels, memcpy and memset summed");
  if (rows.empty())
    out += fmt::format("<text class=\"note\" x=\"{}\" y=\"{}\">no case ran</text>\n", px(x0 + 8), px(kTop + kRow / 2));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CaseSummary& c = s.cases[rows[r]];
    const double y = kTop + r * kRow + (kRow - kBar) / 2;
    out += fmt::format("<g class=\"bar-row\" data-case=\"{}\">\n", rows[r]);
    out += fitted_text(x0 - 8, y + kBar / 2 + 4, c.label, label_px, "row-label", "end", middle);
    if (c.median_us > 0)
      out += fmt::format(
          "<rect class=\"wall\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>median iteration: {} (CUDA events), "
          "GPU busy {}</title></rect>\n",
          px(x0), px(y - 3), px(x(c.median_us) - x0), px(kBar + 6), microseconds_text(c.median_us), microseconds_text(c.gpu_busy_us_per_iter));
    double at = 0;
    for (const CategoryTime& t : times[r]) {
      const double left = x(at), right = x(at + t.us_per_iter);
      out += fmt::format(
          "<rect class=\"mark\" data-category=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
          escape_html(t.category), px(left), px(y), px(std::max(right - left, 1.0)), px(kBar), category_color(t.category),
          escape_html(c.label + "\n" + category_tooltip(c, t)));
      at += t.us_per_iter;
    }
    out += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{} busy of {}</text>\n", px(x1 + 14), px(y + kBar / 2 + 4),
                       microseconds_text(c.gpu_busy_us_per_iter), microseconds_text(c.median_us));
    out += "</g>\n";
  }
  return out + "</svg>\n";
}

// ---- (b) TFLOP/s per backend across problems: grouped bars ----

std::string tflops_chart(const RunSummary& s) {
  const std::vector<ProblemGroup> groups = tflops_groups(s);
  const std::vector<std::string> backends = backend_order(s);
  constexpr double kTop = 44, kHeader = 24, kRow = 20, kBar = 14, kGap = 10;
  double label_px = 80, max_tflops = 0;
  std::vector<std::string> present;
  for (const ProblemGroup& g : groups)
    for (std::size_t i : g.cases) {
      label_px = std::max(label_px, text_width(s.cases[i].backend));
      max_tflops = std::max(max_tflops, s.cases[i].tflops);
      if (std::find(present.begin(), present.end(), s.cases[i].backend) == present.end())
        present.push_back(s.cases[i].backend);
    }
  label_px = std::min(label_px, 260.0);
  const double x0 = label_px + 24, x1 = kWidth - 90;
  double bottom = kTop;
  for (const ProblemGroup& g : groups) bottom += kHeader + g.cases.size() * kRow + kGap;
  if (groups.empty()) bottom += 30;
  const double height = bottom + 48;
  const std::vector<double> ticks = linear_ticks(max_tflops, 6);
  const Scale x{0, ticks.back(), x0, x1};

  std::string out = svg_open("tflops", height, "TFLOP/s of each backend, grouped by problem");
  std::vector<std::pair<std::string, std::string>> entries;
  for (const std::string& b : backends)
    if (std::find(present.begin(), present.end(), b) != present.end()) entries.emplace_back(b, backend_color(backends, b));
  out += legend(x0, 16, entries);
  out += linear_x_axis(x, ticks, kTop - 8, bottom - kGap, "TFLOP/s at the median iteration (exact FLOPs of the problem)");
  if (groups.empty())
    out += fmt::format("<text class=\"note\" x=\"{}\" y=\"{}\">no case with a FLOP count ran</text>\n", px(x0 + 8),
                       px(kTop + 18));
  double y = kTop;
  for (const ProblemGroup& g : groups) {
    out += fmt::format("<g class=\"bar-group\" data-problem=\"{}\">\n", escape_html(g.label));
    out += fitted_text(8, y + 16, g.label, kWidth - 16, "group-label", "start", ending);
    y += kHeader;
    for (std::size_t i : g.cases) {
      const CaseSummary& c = s.cases[i];
      const double top = y + (kRow - kBar) / 2;
      out += fitted_text(x0 - 8, top + kBar / 2 + 4, c.backend, label_px, "row-label", "end", middle);
      out += fmt::format(
          "<rect class=\"mark\" data-case=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
          i, px(x0), px(top), px(std::max(x(c.tflops) - x0, 1.0)), px(kBar), backend_color(backends, c.backend),
          escape_html(fmt::format("{}: {} TFLOP/s, median {}", c.label, tflops_text(c.tflops), microseconds_text(c.median_us))));
      out += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{}</text>\n", px(x(c.tflops) + 6),
                         px(top + kBar / 2 + 4), tflops_text(c.tflops));
      y += kRow;
    }
    y += kGap;
    out += "</g>\n";
  }
  return out + "</svg>\n";
}

// ---- (c) Roofline: achieved TFLOP/s over arithmetic intensity, log-log ----

std::string roofline_chart(const RunSummary& s, const std::optional<DeviceRoofs>& roofs_in) {
  const std::vector<std::size_t> points = roofline_cases(s);
  const std::vector<std::string> backends = backend_order(s);
  std::optional<DeviceRoofs> roofs = roofs_in;
  if (roofs && !(roofs->peak_tflops > 0 && roofs->peak_gbps > 0)) roofs.reset();  // a half-known roof draws nothing
  constexpr double kHeight = 440, kLeft = 78, kRight = 200, kTop = 24, kBottom = 380;
  const double x0 = kLeft, x1 = kWidth - kRight;

  // Both axes span whole decades around the points and, when known, the ridge and the peak.
  std::vector<double> xs, ys;
  for (std::size_t i : points) {
    xs.push_back(arithmetic_intensity(s.cases[i].problem));
    ys.push_back(s.cases[i].tflops);
  }
  const double ridge = roofs ? roofs->peak_tflops * 1e3 / roofs->peak_gbps : 0;  // FLOP/byte where the roofs meet
  if (roofs) {
    xs.push_back(ridge);
    ys.push_back(roofs->peak_tflops);
  }
  if (xs.empty()) xs = {1, 100};
  if (ys.empty()) ys = {0.1, 100};
  double x_lo = decade_floor(*std::min_element(xs.begin(), xs.end()) / 2);
  double x_hi = decade_ceil(*std::max_element(xs.begin(), xs.end()) * 2);
  double y_lo = decade_floor(*std::min_element(ys.begin(), ys.end()) / 2);
  double y_hi = decade_ceil(*std::max_element(ys.begin(), ys.end()) * 2);
  while (x_hi / x_lo < 1e3) (x_hi / x_lo < 1e2 ? x_lo /= 10 : x_hi *= 10);
  if (y_hi / y_lo < 1e2) y_lo /= 10;
  const Scale x{x_lo, x_hi, x0, x1, true};
  const Scale y{y_lo, y_hi, kBottom, kTop, true};

  std::string out = svg_open("roofline", kHeight,
                             "Roofline: achieved TFLOP/s of each case over its arithmetic intensity, log-log");
  out += "<g class=\"axis\">\n";
  for (double d : decade_ticks(x_lo, x_hi)) {
    for (int m = 2; m <= 9 && d * m < x_hi; ++m)
      out += fmt::format("<line class=\"grid minor\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>\n", px(x(d * m)),
                         px(kTop), px(kBottom));
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>\n", px(x(d)), px(kTop), px(kBottom));
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(x(d)),
                       px(kBottom + 16), tick_text(d));
  }
  for (double d : decade_ticks(y_lo, y_hi)) {
    for (int m = 2; m <= 9 && d * m < y_hi; ++m)
      out += fmt::format("<line class=\"grid minor\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>\n", px(x0), px(x1),
                         px(y(d * m)));
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>\n", px(x0), px(x1), px(y(d)));
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", px(x0 - 8),
                       px(y(d) + 4), tick_text(d));
  }
  out += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", px(x0), px(kTop),
                     px(x1 - x0), px(kBottom - kTop));
  out += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte of the "
      "minimum traffic: q, k, v read once, o written once)</text>\n",
      px((x0 + x1) / 2), px(kBottom + 38));
  out += fmt::format(
      "<text class=\"axis-title\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\">achieved TFLOP/s</text>\n",
      px(22), px((kTop + kBottom) / 2));
  out += "</g>\n";

  if (roofs) {
    // Memory roof: TFLOP/s = GB/s x FLOP/byte / 1000, from where it enters the plot to the ridge.
    const double bw_start = std::max(x_lo, y_lo * 1e3 / roofs->peak_gbps);
    const double bw_end = std::min(ridge, x_hi);
    const double ax = x(bw_start), ay = y(roofs->peak_gbps * bw_start / 1e3);
    const double bx = x(bw_end), by = y(roofs->peak_gbps * bw_end / 1e3);
    out += "<g class=\"roofs\">\n";
    out += fmt::format(
        "<line class=\"roof\" data-roof=\"bandwidth\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"><title>memory bandwidth roof: "
        "{:.0f} GB/s</title></line>\n",
        px(ax), px(ay), px(bx), px(by), roofs->peak_gbps);
    out += fmt::format(
        "<line class=\"roof\" data-roof=\"compute\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"><title>compute roof: {} "
        "TFLOP/s</title></line>\n",
        px(bx), px(by), px(x1), px(by), tflops_text(roofs->peak_tflops));
    out += fmt::format("<text class=\"roof-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{} TFLOP/s</text>\n", px(x1 - 6),
                       px(by - 7), tflops_text(roofs->peak_tflops));
    const double angle = std::atan2(by - ay, bx - ax) * 180 / M_PI;
    const double mx = ax + (bx - ax) * 0.45, my = ay + (by - ay) * 0.45;
    out += fmt::format(
        "<text class=\"roof-label\" transform=\"translate({} {}) rotate({:.1f})\" text-anchor=\"middle\" dy=\"-7\">{:.0f} "
        "GB/s</text>\n",
        px(mx), px(my), angle, roofs->peak_gbps);
    out += fmt::format(
        "<text class=\"roof-label ridge\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">ridge {:.0f} FLOP/B</text>\n", px(bx),
        px(by - 7), ridge);
    out += "</g>\n";
  } else {
    out += fmt::format(
        "<text class=\"roofs-unknown\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">compute and bandwidth roofs unknown for "
        "this GPU: the points alone</text>\n",
        px((x0 + x1) / 2), px(kTop + 22));
  }

  std::vector<std::pair<std::string, std::string>> entries;
  std::vector<std::pair<double, double>> placed;
  for (std::size_t i : points) {
    const CaseSummary& c = s.cases[i];
    const double ai = arithmetic_intensity(c.problem);
    // Backends of one problem share an x; a point that would cover another moves sideways
    // (+10, -10, +20 ... px) and keeps its height, which is the measurement.
    const double cy = y(c.tflops);
    double cx = x(ai);
    for (int step = 1; std::any_of(placed.begin(), placed.end(), [&](const auto& p) {
           return std::hypot(p.first - cx, p.second - cy) < 10;
         }); ++step)
      cx = x(ai) + (step % 2 ? 1 : -1) * 10.0 * ((step + 1) / 2);
    placed.emplace_back(cx, cy);
    std::string tip = fmt::format("{}: {:.1f} FLOP/byte, {} TFLOP/s", c.label, ai, tflops_text(c.tflops));
    if (roofs) {
      const double roof = std::min(roofs->peak_tflops, roofs->peak_gbps * ai / 1e3);
      tip += fmt::format(", {:.2g}% of the roof at this intensity ({} TFLOP/s)", 100 * c.tflops / roof, tflops_text(roof));
    }
    out += fmt::format(
        "<circle class=\"mark\" data-case=\"{}\" cx=\"{}\" cy=\"{}\" r=\"5.5\" fill=\"{}\"><title>{}</title></circle>\n", i,
        px(cx), px(cy), backend_color(backends, c.backend), escape_html(tip));
    if (std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == c.backend; }) == entries.end())
      entries.emplace_back(c.backend, backend_color(backends, c.backend));
  }
  if (points.empty())
    out += fmt::format("<text class=\"note\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">no case with a FLOP count ran</text>\n",
                       px((x0 + x1) / 2), px((kTop + kBottom) / 2));
  // The legend stands in a column right of the plot, one backend a line.
  out += "<g class=\"legend\">\n";
  double ly = kTop + 8;
  for (const auto& [text, color] : entries) {
    out += fmt::format(
        "<g class=\"legend-item\"><circle class=\"swatch\" cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/>", px(x1 + 22), px(ly),
        color);
    out += fitted_text(x1 + 34, ly + 4, text, kRight - 40, "legend-text", "start", middle);
    out += "</g>\n";
    ly += 20;
  }
  out += "</g>\n";
  return out + "</svg>\n";
}

// ---- (d) Theoretical beside achieved occupancy, per kernel ----

std::string occupancy_chart(const RunSummary& s) {
  const std::vector<OccupancyRow> rows = occupancy_rows(s);
  if (rows.empty()) return "";
  constexpr double kTop = 44, kHeader = 24, kRow = 30, kBar = 10, kGap = 8, kValueColumn = 70;
  constexpr const char* kTheoretical = "#a0cbe8";
  constexpr const char* kAchieved = "#4e79a7";
  // A group per case (rows come in case order), a row per kernel named by its short name.
  double label_px = 120;
  std::size_t cases = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    cases += r == 0 || rows[r].case_index != rows[r - 1].case_index;
    label_px = std::max(label_px, text_width(shorten_name(s.cases[rows[r].case_index].kernels[rows[r].kernel_index].name)));
  }
  label_px = std::min(label_px, 300.0);
  const double x0 = label_px + 24, x1 = kWidth - kValueColumn;
  const double bottom = kTop + cases * (kHeader + kGap) + rows.size() * kRow;
  const Scale x{0, 100, x0, x1};

  std::string out = svg_open("occupancy", bottom + 48, "Theoretical and achieved occupancy of each measured kernel");
  out += legend(x0, 16, {{"theoretical (registers, shared memory, block size)", kTheoretical},
                         {"achieved (range profiler)", kAchieved}});
  out += linear_x_axis(x, {0, 25, 50, 75, 100}, kTop - 8, bottom - kGap, "occupancy: active warps of the SM's maximum", "%");
  double y = kTop;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CaseSummary& c = s.cases[rows[r].case_index];
    const KernelSummary& k = c.kernels[rows[r].kernel_index];
    if (r == 0 || rows[r].case_index != rows[r - 1].case_index) {
      if (r > 0) out += "</g>\n";
      out += fmt::format("<g class=\"bar-group\" data-case=\"{}\">\n", rows[r].case_index);
      out += fitted_text(8, y + 16, c.label, kWidth - 16, "group-label", "start", ending);
      y += kHeader;
    }
    const double top = y + (kRow - 2 * kBar - 2) / 2;
    out += fmt::format("<g class=\"bar-row\" data-case=\"{}\">\n", rows[r].case_index);
    out += fitted_text(x0 - 8, top + kBar + 5, shorten_name(k.name), label_px, "row-label", "end", ending);
    const double theoretical = k.occupancy_valid ? k.theoretical_occupancy_percent : 0;
    const double achieved = *k.achieved_occupancy_percent;
    const std::string name = escape_html(c.label + "\n" + k.name);
    out += fmt::format(
        "<rect class=\"mark\" data-kind=\"theoretical\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}\n"
        "theoretical {}: {}</title></rect>\n",
        px(x0), px(top), px(std::max(x(theoretical) - x0, 1.0)), px(kBar), kTheoretical, name,
        k.occupancy_valid ? fmt::format("{:.1f}%", theoretical) : "unknown", escape_html(k.occupancy_explanation));
    out += fmt::format(
        "<rect class=\"mark\" data-kind=\"achieved\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}\n"
        "achieved {:.1f}%</title></rect>\n",
        px(x0), px(top + kBar + 2), px(std::max(x(achieved) - x0, 1.0)), px(kBar), kAchieved, name, achieved);
    out += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{}</text>\n", px(x1 + 8), px(top + kBar - 1),
                       k.occupancy_valid ? fmt::format("{:.1f}%", theoretical) : "?");
    out += fmt::format("<text class=\"value strong\" x=\"{}\" y=\"{}\">{:.1f}%</text>\n", px(x1 + 8),
                       px(top + 2 * kBar + 1), achieved);
    out += "</g>\n";
    y += kRow;
    if (r + 1 == rows.size() || rows[r + 1].case_index != rows[r].case_index) y += kGap;
  }
  out += "</g>\n";
  return out + "</svg>\n";
}

// ---- (e) Device memory held at each case's peak, by role: a stacked bar per case ----

namespace {

// Roles in the palette's order, the unnamed ones grey.
std::string role_color(const std::vector<std::string>& roles, const std::string& role) {
  if (role == kUnnamedMemoryRole) return "#bab0ac";
  std::size_t index = 0;
  for (const std::string& r : roles) {
    if (r == role) break;
    if (r != kUnnamedMemoryRole) ++index;
  }
  return palette()[index % (palette().size() - 1)];
}

// The unit a byte axis is labelled in: the largest of KiB, MiB, GiB not above `max`.
std::pair<double, const char*> byte_unit(double max) {
  if (max >= double(1 << 30)) return {double(1 << 30), " GiB"};
  if (max >= double(1 << 20)) return {double(1 << 20), " MiB"};
  if (max >= double(1 << 10)) return {double(1 << 10), " KiB"};
  return {1, " B"};
}

// A decade of bytes on a log axis: "1 MB", "100 MB", "10 GB".
std::string decade_bytes_text(double bytes) {
  for (const auto& [scale, unit] : {std::pair{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}})
    if (bytes >= scale) return fmt::format("{:g} {}", bytes / scale, unit);
  return fmt::format("{:g} B", bytes);
}

}  // namespace

std::string memory_chart(const RunSummary& s) {
  const std::vector<std::size_t> rows = memory_cases(s);
  if (rows.empty()) return "";
  const std::vector<std::string> roles = memory_roles(s);
  constexpr double kTop = 44, kRow = 28, kBar = 16, kValueColumn = 150;
  double label_px = 120, max_bytes = 0;
  for (std::size_t i : rows) {
    label_px = std::max(label_px, text_width(s.cases[i].label));
    max_bytes = std::max(max_bytes, static_cast<double>(s.cases[i].memory->peak_bytes));
  }
  label_px = std::min(label_px, 340.0);
  const double x0 = label_px + 16, x1 = kWidth - kValueColumn;
  const double bottom = kTop + rows.size() * kRow;
  const auto [unit, unit_name] = byte_unit(max_bytes);
  const std::vector<double> ticks = linear_ticks(max_bytes / unit, 6);
  const Scale x{0, ticks.back() * unit, x0, x1};

  std::string out = svg_open("memory", bottom + 48, "Device memory held at each case's peak, split by what holds it");
  std::vector<std::pair<std::string, std::string>> entries;
  for (const std::string& role : roles) entries.emplace_back(role, role_color(roles, role));
  out += legend(x0, 16, entries);
  out += "<g class=\"axis\">\n";
  for (double t : ticks) {
    out += fmt::format("<line class=\"grid{}\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", t == 0 ? " zero" : "",
                       px(x(t * unit)), px(x(t * unit)), px(kTop - 8), px(bottom));
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n", px(x(t * unit)),
                       px(bottom + 16), tick_text(t), unit_name);
  }
  out += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">device memory live at the peak of the timed "
      "iterations (buffers allocated before them included)</text>\n",
      px((x0 + x1) / 2), px(bottom + 36));
  out += "</g>\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const CaseSummary& c = s.cases[rows[r]];
    const CaseMemory& m = *c.memory;
    const double y = kTop + r * kRow + (kRow - kBar) / 2;
    out += fmt::format("<g class=\"bar-row\" data-case=\"{}\">\n", rows[r]);
    out += fitted_text(x0 - 8, y + kBar / 2 + 4, c.label, label_px, "row-label", "end", middle);
    // In the legend's order, so a role sits at the same place in every bar.
    double at = 0;
    for (const std::string& role : roles) {
      const MemoryRole* held = m.role(role);
      if (held == nullptr || held->peak_bytes == 0) continue;
      const double bytes = static_cast<double>(held->peak_bytes);
      const double left = x(at), right = x(at + bytes);
      std::string tip = fmt::format("{}\n{}: {} held at the peak ({:.0f}% of {})", c.label, role, format_bytes(bytes),
                                    m.peak_bytes > 0 ? 100.0 * bytes / static_cast<double>(m.peak_bytes) : 0.0,
                                    format_bytes(static_cast<double>(m.peak_bytes)));
      if (held->plan_bytes > 0)
        tip += fmt::format("; {} allocated with the plan", format_bytes(static_cast<double>(held->plan_bytes)));
      if (held->iteration_bytes_per_iter > 0)
        tip += fmt::format("; {} allocated per iteration", format_bytes(held->iteration_bytes_per_iter));
      if (held->carried_bytes > 0)
        tip += fmt::format("; {} left by earlier cases", format_bytes(static_cast<double>(held->carried_bytes)));
      out += fmt::format(
          "<rect class=\"mark\" data-role=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
          escape_html(role), px(left), px(y), px(std::max(right - left, 1.0)), px(kBar), role_color(roles, role),
          escape_html(tip));
      at += bytes;
    }
    std::string value = format_bytes(static_cast<double>(m.peak_bytes));
    if (m.allocations_per_iter > 0) value += fmt::format(", {} alloc/it", format_count(m.allocations_per_iter));
    out += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{}</text>\n", px(x1 + 10), px(y + kBar / 2 + 4),
                       escape_html(value));
    out += "</g>\n";
  }
  return out + "</svg>\n";
}

// ---- (f) Peak device memory against the sequence length, per backend: log-log ----

std::string memory_scaling_chart(const RunSummary& s) {
  if (memory_cases(s).empty()) return "";
  const std::vector<std::size_t> points = memory_scaling_cases(s);
  const std::vector<MemorySeries> series = memory_series(s);
  const std::vector<std::string> backends = backend_order(s);
  constexpr double kHeight = 400, kLeft = 78, kRight = 220, kTop = 24, kBottom = 340;
  const double x0 = kLeft, x1 = kWidth - kRight;
  const auto seq = [&](std::size_t i) { return static_cast<double>(s.cases[i].problem.shape.seq_kv); };
  const auto peak = [&](std::size_t i) { return static_cast<double>(s.cases[i].memory->peak_bytes); };

  double x_lo = 100, x_hi = 1e4, y_lo = 1e6, y_hi = 1e9;
  if (!points.empty()) {
    double min_x = seq(points[0]), max_x = min_x, min_y = peak(points[0]), max_y = min_y;
    for (std::size_t i : points) {
      min_x = std::min(min_x, seq(i));
      max_x = std::max(max_x, seq(i));
      min_y = std::min(min_y, peak(i));
      max_y = std::max(max_y, peak(i));
    }
    x_lo = decade_floor(min_x / 1.5);
    x_hi = decade_ceil(max_x * 1.5);
    y_lo = decade_floor(min_y / 1.5);
    y_hi = decade_ceil(max_y * 1.5);
    if (x_hi / x_lo < 1e2) x_hi *= 10;
    if (y_hi / y_lo < 1e2) y_hi *= 10;
  }
  const Scale x{x_lo, x_hi, x0, x1, true};
  const Scale y{y_lo, y_hi, kBottom, kTop, true};

  std::string out = svg_open("memory-scaling", kHeight,
                             "Peak device memory of each case over its sequence length, per backend, log-log");
  out += "<g class=\"axis\">\n";
  for (double d : decade_ticks(x_lo, x_hi)) {
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>\n", px(x(d)), px(kTop), px(kBottom));
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(x(d)),
                       px(kBottom + 16), tick_text(d));
  }
  for (double d : decade_ticks(y_lo, y_hi)) {
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>\n", px(x0), px(x1), px(y(d)));
    out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", px(x0 - 8), px(y(d) + 4),
                       decade_bytes_text(d));
  }
  out += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", px(x0), px(kTop),
                     px(x1 - x0), px(kBottom - kTop));
  out += fmt::format(
      "<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">sequence length (seq_kv, tokens)</text>\n",
      px((x0 + x1) / 2), px(kBottom + 38));
  out += fmt::format(
      "<text class=\"axis-title\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\">peak device "
      "memory</text>\n",
      px(18), px((kTop + kBottom) / 2));
  out += "</g>\n";

  if (points.empty()) {
    out += fmt::format(
        "<text class=\"note\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">no case with memory has a sequence length</text>\n",
        px((x0 + x1) / 2), px((kTop + kBottom) / 2));
    return out + "</svg>\n";
  }
  // Slopes 1 and 2 from the lowest point of the shortest sequence: memory growing as S, and as S^2.
  std::size_t anchor = points[0];
  for (std::size_t i : points)
    if (seq(i) < seq(anchor) || (seq(i) == seq(anchor) && peak(i) < peak(anchor))) anchor = i;
  out += "<g class=\"guides\">\n";
  for (const auto& [slope, name] : {std::pair{1.0, "∝ S"}, {2.0, "∝ S²"}}) {
    const double gx = seq(anchor), gy = peak(anchor);
    const double end_x = std::min(x_hi, gx * std::pow(y_hi / gy, 1.0 / slope));
    const double end_y = gy * std::pow(end_x / gx, slope);
    out += fmt::format("<line class=\"guide\" data-slope=\"{:g}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", slope,
                       px(x(gx)), px(y(gy)), px(x(end_x)), px(y(end_y)));
    out += fmt::format("<text class=\"guide-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", px(x(end_x) - 4),
                       px(y(end_y) + (slope > 1 ? 14 : -6)), name);
  }
  out += "</g>\n";

  std::vector<std::pair<std::string, std::string>> entries;
  for (const MemorySeries& line : series) {
    const std::string color = backend_color(backends, line.backend);
    if (line.cases.size() > 1) {
      std::string path;
      for (std::size_t i : line.cases) path += fmt::format("{}{},{}", path.empty() ? "" : " ", px(x(seq(i))), px(y(peak(i))));
      out += fmt::format("<polyline class=\"series\" points=\"{}\" stroke=\"{}\"><title>{}</title></polyline>\n", path,
                         color, escape_html(line.label));
    }
    if (std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == line.backend; }) == entries.end())
      entries.emplace_back(line.backend, color);
  }
  std::vector<std::pair<double, double>> placed;
  for (std::size_t i : points) {
    const CaseSummary& c = s.cases[i];
    const double cy = y(peak(i));
    double cx = x(seq(i));
    // Backends at one length may hold the same: a point that would cover another moves sideways.
    for (int step = 1; std::any_of(placed.begin(), placed.end(), [&](const auto& p) {
           return std::hypot(p.first - cx, p.second - cy) < 8;
         }); ++step)
      cx = x(seq(i)) + (step % 2 ? 1 : -1) * 8.0 * ((step + 1) / 2);
    placed.emplace_back(cx, cy);
    out += fmt::format(
        "<circle class=\"mark\" data-case=\"{}\" cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"><title>{}</title></circle>\n", i,
        px(cx), px(cy), backend_color(backends, c.backend),
        escape_html(fmt::format("{}: peak {} at seq_kv {}", c.label, format_bytes(peak(i)), c.problem.shape.seq_kv)));
  }
  out += "<g class=\"legend\">\n";
  double ly = kTop + 8;
  for (const auto& [text, color] : entries) {
    out += fmt::format("<g class=\"legend-item\"><circle class=\"swatch\" cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/>",
                       px(x1 + 22), px(ly), color);
    out += fitted_text(x1 + 34, ly + 4, text, kRight - 40, "legend-text", "start", middle);
    out += "</g>\n";
    ly += 20;
  }
  out += "</g>\n";
  return out + "</svg>\n";
}

}  // namespace attnprof::html
