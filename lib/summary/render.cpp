#include "summary/render.hpp"

#include "core/errors.hpp"
#include "summary/finding_groups.hpp"
#include "summary/findings.hpp"
#include "summary/kernel_category.hpp"
#include "summary/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

namespace attnprof {

namespace {

bool renders(const OutputFormatName& f, RenderedReport report) {
  return report == RenderedReport::summary || f.check_renders;
}

}  // namespace

std::string_view to_string(OutputFormat format) {
  for (const OutputFormatName& f : kOutputFormats)
    if (f.format == format) return f.name;
  return kOutputFormats.front().name;
}

std::vector<std::string> output_format_names(RenderedReport report) {
  std::vector<std::string> names;
  for (const OutputFormatName& f : kOutputFormats)
    if (renders(f, report)) names.emplace_back(f.name);
  return names;
}

std::optional<OutputFormat> parse_output_format(std::string_view text, RenderedReport report) {
  for (const OutputFormatName& f : kOutputFormats)
    if (f.name == text && renders(f, report)) return f.format;
  return std::nullopt;
}

OutputFormat output_format_named(std::string_view text, RenderedReport report) {
  const std::optional<OutputFormat> format = parse_output_format(text, report);
  if (!format)
    throw UsageError(fmt::format("unknown format '{}': use {}", text, choice_list(output_format_names(report))));
  return *format;
}

std::string choice_list(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

std::string format_microseconds(double us) {
  if (us >= 10000) return fmt::format("{:.2f} ms", us / 1000);
  return fmt::format("{:.1f} us", us);
}

std::string format_dims(const std::array<int, 3>& d) { return fmt::format("[{},{},{}]", d[0], d[1], d[2]); }

std::string format_count(double per_iter) {
  if (std::abs(per_iter - std::round(per_iter)) < 1e-9) return fmt::format("{:.0f}", per_iter);
  return fmt::format("{:.2f}", per_iter);
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) {
    if (ch == '"') quoted += '"';
    quoted += ch;
  }
  return quoted + "\"";
}

std::string format_bytes(double bytes) {
  if (bytes >= 1 << 30) return fmt::format("{:.2f} GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:.1f} KiB", bytes / (1 << 10));
  return fmt::format("{:.0f} B", bytes);
}

namespace {

bool is_utf8_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The first `bytes` of `text`, fewer where that would split a UTF-8 character.
std::string_view head_of(std::string_view text, std::size_t bytes) {
  while (bytes > 0 && bytes < text.size() && is_utf8_continuation_byte(text[bytes])) --bytes;
  return text.substr(0, bytes);
}

// The last `bytes` of `text`, fewer where that would split a UTF-8 character.
std::string_view tail_of(std::string_view text, std::size_t bytes) {
  std::size_t start = text.size() - bytes;
  while (start < text.size() && is_utf8_continuation_byte(text[start])) ++start;
  return text.substr(start);
}

}  // namespace

std::string shorten(std::string_view text, std::size_t width) {
  if (text.size() <= width) return std::string(text);
  if (width <= 3) return std::string(head_of(text, width));
  return std::string(head_of(text, width - 3)) + "...";
}

std::string shorten_middle(std::string_view text, std::size_t width) {
  if (text.size() <= width) return std::string(text);
  if (width <= 3) return std::string(head_of(text, width));
  const std::size_t tail = (width - 3) / 2;
  const std::size_t head = width - 3 - tail;
  return std::string(head_of(text, head)) + "..." + std::string(tail_of(text, tail));
}

std::string wrap_text(std::string_view text, std::size_t width, std::string_view first, std::string_view rest) {
  std::string out(first);
  std::size_t line_start = 0;  // where the current line begins in `out`
  bool line_has_words = false;
  std::size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ' ') {
      ++at;
      continue;
    }
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(at, end - at);
    at = end;
    while (!word.empty()) {
      const std::size_t used = out.size() - line_start;
      const std::size_t needed = word.size() + (line_has_words ? 1 : 0);
      if (used + needed <= width) {
        if (line_has_words) out += ' ';
        out += word;
        line_has_words = true;
        break;
      }
      if (line_has_words) {  // the word goes on the next line
        out += '\n';
        line_start = out.size();
        out += rest;
        line_has_words = false;
        continue;
      }
      // A word longer than a whole line (a kernel name) is cut where the line ends.
      // Never inside a UTF-8 character; at least one whole character, so the loop moves on.
      const std::size_t room = width > used ? width - used : 1;
      std::string_view piece = head_of(word, room);
      if (piece.empty()) {
        std::size_t one = 1;
        while (one < word.size() && is_utf8_continuation_byte(word[one])) ++one;
        piece = word.substr(0, one);
      }
      out += piece;
      word.remove_prefix(piece.size());
      line_has_words = true;
    }
  }
  return out;
}

namespace {

std::string status_text(const CaseSummary& c) {
  if (c.status == CaseStatus::ok && c.verified && !c.verify_passed) return "WRONG";
  return to_string(c.status);
}

// How a column gives way when the table is wider than its limit.
enum class Shrink { never, end, middle };

struct Column {
  std::string title;
  bool right_aligned = false;
  Shrink shrink = Shrink::never;
  std::size_t min_width = 0;  // the narrowest a shrinking column may get
  int give_way_order = 0;     // among shrinking columns, the lower gives way first
};

// Rows of cells -> aligned text (table) or a pipe table (md). A text table wider than
// `max_width` narrows its shrinking columns, in their give-way order, down to their minimum.
std::string layout(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows, bool markdown,
                   std::size_t max_width = 0) {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t i = 0; i < columns.size(); ++i) width[i] = columns[i].title.size();
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  if (!markdown && max_width > 0) {
    std::size_t total = std::accumulate(width.begin(), width.end(), std::size_t{0}) + 2 * (columns.size() - 1);
    std::vector<std::size_t> order(columns.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return columns[a].give_way_order < columns[b].give_way_order;
    });
    for (std::size_t i : order) {
      if (columns[i].shrink == Shrink::never || total <= max_width) continue;
      const std::size_t floor = std::max(columns[i].min_width, columns[i].title.size());
      const std::size_t give = std::min(total - max_width, width[i] > floor ? width[i] - floor : 0);
      width[i] -= give;
      total -= give;
    }
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    if (markdown) out += "| ";
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string cell = cells[i];
      if (columns[i].shrink == Shrink::end) cell = shorten(cell, width[i]);
      if (columns[i].shrink == Shrink::middle) cell = shorten_middle(cell, width[i]);
      if (markdown && i > 0) out += " | ";
      else if (i > 0) out += "  ";
      out += columns[i].right_aligned ? fmt::format("{:>{}}", cell, width[i]) : fmt::format("{:<{}}", cell, width[i]);
    }
    if (markdown) out += " |";
    while (!markdown && !out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  std::vector<std::string> titles;
  for (const Column& c : columns) titles.push_back(c.title);
  line(titles);
  std::vector<std::string> rule;
  for (std::size_t i = 0; i < columns.size(); ++i)
    rule.push_back(markdown ? (columns[i].right_aligned ? std::string(width[i] - 1, '-') + ":" : std::string(width[i], '-'))
                            : std::string(width[i], '-'));
  line(rule);
  for (const auto& row : rows) line(row);
  return out;
}

// "registers+smem" for "registers and shared memory": the narrow table's limiter column.
std::string short_limiter(std::string limiter) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"shared memory", "smem"}, {" and ", "+"}})
    for (auto at = limiter.find(from); at != std::string::npos; at = limiter.find(from, at + to.size()))
      limiter.replace(at, from.size(), to);
  return limiter;
}

std::string count_and_bytes(double per_iter, double bytes_per_iter) {
  std::string text = format_count(per_iter);
  if (per_iter > 0) text += " (" + format_bytes(bytes_per_iter) + ")";
  return text;
}

// How the human formats lay out: a Markdown document, a table of any width (wide), or a table
// that fits kTableWidth columns, prose wrapped to it.
struct HumanStyle {
  bool markdown = false;
  bool wide = false;
  bool narrow() const { return !markdown && !wide; }
  std::size_t max_width() const { return narrow() ? kTableWidth : 0; }
  std::string paragraph(const std::string& text) const {
    return (narrow() ? wrap_text(text, kTableWidth, "", "") : text) + "\n";
  }
  std::string bullet(const std::string& text) const {
    return (narrow() ? wrap_text(text, kTableWidth, "- ", "  ") : "- " + text) + "\n";
  }
};

std::string cases_table(const RunSummary& s, const HumanStyle& style) {
  // A device column when the cases ran on several GPUs (run --devices), a communication column
  // when some case launched NCCL kernels; a one-GPU run without collectives reads as it always did.
  bool several_devices = false, any_communication = false, any_memory = false;
  for (const CaseSummary& c : s.cases) {
    several_devices = several_devices || c.device != s.cases.front().device;
    any_communication = any_communication || communication_kernels_per_iter(c) > 0;
    any_memory = any_memory || c.memory.has_value();
  }
  const bool wide = !style.narrow();
  std::vector<Column> columns = {{"case", false, Shrink::middle, 18}, {"status", false}};
  if (several_devices) columns.push_back({"GPU", true});
  if (wide) columns.push_back({"rel.err", true});
  columns.push_back({"median", true});
  if (wide) columns.push_back({"p90", true});
  columns.push_back({"TFLOP/s", true});
  if (wide) columns.insert(columns.end(), {{"GB/s", true}, {"FLOP/B", true}, {"bound", false}});
  bool any_roof = false;
  for (const CaseSummary& c : s.cases) any_roof = any_roof || c.roofline.roof_percent.has_value();
  if (any_roof) columns.push_back({"roof", true});
  columns.push_back({"host", true});  // per call
  columns.push_back({"kernels/it", true});
  if (any_communication) columns.push_back({"nccl/it", true});
  columns.insert(columns.end(), {{"memcpy/it", true}, {"memset/it", true}});
  // Device memory at the peak of the timed iterations (CUPTI's memory records), when recorded.
  if (any_memory) columns.push_back({"peak mem", true});
  if (wide) columns.push_back({"plan cold/warm", true});

  std::vector<std::vector<std::string>> rows;
  for (const CaseSummary& c : s.cases) {
    const bool ran = c.status == CaseStatus::ok;
    std::vector<std::string> row = {c.label, status_text(c)};
    if (several_devices) row.push_back(std::to_string(c.device));
    if (wide) row.push_back(c.verified ? fmt::format("{:.1e}", c.relative_error) : "-");
    row.push_back(ran ? format_microseconds(c.median_us) : "");
    if (wide) row.push_back(ran ? format_microseconds(c.p90_us) : "");
    row.push_back(ran ? fmt::format("{:.1f}", c.tflops) : "");
    const RooflinePoint& r = c.roofline;
    if (wide) {
      row.push_back(ran && r.gbps > 0 ? fmt::format("{:.0f}", r.gbps) : "");
      row.push_back(r.intensity > 0 ? fmt::format("{:.0f}", r.intensity) : "");
      row.push_back(r.bound);
    }
    // Of the roof that bounds the case at its intensity (compute, or bandwidth x intensity), and
    // which roof that is where the bound column is not beside it.
    if (any_roof) {
      std::string roof;
      if (ran && r.roof_percent) roof = fmt::format("{:.0f}%", *r.roof_percent);
      if (!roof.empty() && !wide && !r.bound.empty()) roof += r.bound == "memory" ? " mem" : " cmp";
      row.push_back(roof);
    }
    // Host time enqueueing one call, beside the GPU's median: above it, the CPU sets the pace.
    row.push_back(ran && c.host_enqueue_us_per_iter > 0 ? format_microseconds(c.host_enqueue_us_per_iter) : "");
    row.push_back(ran ? format_count(c.kernels_per_iter) : "");
    if (any_communication) row.push_back(ran ? format_count(communication_kernels_per_iter(c)) : "");
    row.push_back(ran ? count_and_bytes(c.memcpy_per_iter, c.memcpy_bytes_per_iter) : "");
    row.push_back(ran ? count_and_bytes(c.memset_per_iter, c.memset_bytes_per_iter) : "");
    if (any_memory) row.push_back(ran && c.memory ? format_bytes(static_cast<double>(c.memory->peak_bytes)) : "");
    if (wide) {
      std::string plan;
      if (ran && c.plan_cold_ms) plan = fmt::format("{:.2f}/{:.3f} ms", *c.plan_cold_ms, c.plan_warm_ms.value_or(0));
      row.push_back(plan);
    }
    rows.push_back(std::move(row));
  }
  return layout(columns, rows, style.markdown, style.max_width());
}

std::string kernels_table(const RunSummary& s, const HumanStyle& style) {
  const bool wide = !style.narrow();
  // Columns for --metrics dram / tensor only when some kernel has them.
  bool any_achieved = false, any_dram = false, any_tensor = false;
  for (const CaseSummary& c : s.cases)
    if (const KernelSummary* k = c.dominant_kernel()) {
      any_achieved = any_achieved || k->achieved_occupancy_percent.has_value();
      any_dram = any_dram || k->dram_throughput_percent.has_value();
      any_tensor = any_tensor || k->tensor_pipe_percent.has_value();
    }
  // The kernel name gives way first, then the limiter, then the case label, which says which row
  // this is. The narrow table gives achieved occupancy its own column and leaves out the DRAM GB/s.
  std::vector<Column> columns = {{"case", false, Shrink::middle, 20, 2}, {"dominant kernel", false, Shrink::end, 16, 0},
                                 {"regs", true}};
  if (wide) columns.insert(columns.end(), {{"block", true}, {"grid", true}});
  columns.insert(columns.end(), {{"smem", true}, {"occupancy", true}});
  if (!wide && any_achieved) columns.push_back({"achieved", true});
  columns.push_back({"idle SMs", true});
  columns.push_back({"limited by", false, wide ? Shrink::never : Shrink::end, 10, 1});
  if (wide) columns.push_back({"launch api", false});
  if (any_dram) columns.push_back({"dram", true});
  if (any_tensor) columns.push_back({"tensor pipe", true});

  std::vector<std::vector<std::string>> rows;
  for (const CaseSummary& c : s.cases) {
    const KernelSummary* k = c.dominant_kernel();
    if (c.status != CaseStatus::ok || k == nullptr) continue;
    const std::string achieved =
        k->achieved_occupancy_percent ? fmt::format("{:.1f}%", *k->achieved_occupancy_percent) : "";
    std::string occupancy = k->occupancy_valid ? fmt::format("{:.1f}%", k->theoretical_occupancy_percent) : "?";
    if (wide && !achieved.empty()) occupancy += fmt::format(" ({} achieved)", achieved);
    std::vector<std::string> row = {c.label, shorten_name(k->name), std::to_string(k->registers_per_thread)};
    if (wide) row.insert(row.end(), {format_dims(k->block), format_dims(k->grid)});
    // SMs the last wave of blocks leaves without one (all but the grid's in a single partial wave).
    const IdleSms idle = idle_sms_of(c, s.device);
    row.insert(row.end(), {format_bytes(k->shared_bytes), occupancy});
    if (!wide && any_achieved) row.push_back(achieved);
    row.push_back(idle.known ? fmt::format("{:.0f}", idle.last_wave_idle) : "");
    row.push_back(wide ? k->occupancy_limiter : short_limiter(k->occupancy_limiter));
    if (wide) row.push_back(k->launch_api);
    if (any_dram) {
      std::string dram;
      if (k->dram_throughput_percent) dram = fmt::format("{:.1f}%", *k->dram_throughput_percent);
      if (wide && k->dram_bytes_per_second) dram += fmt::format(" ({:.0f} GB/s)", *k->dram_bytes_per_second / 1e9);
      row.push_back(dram);
    }
    if (any_tensor) row.push_back(k->tensor_pipe_percent ? fmt::format("{:.1f}%", *k->tensor_pipe_percent) : "");
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return "";
  return layout(columns, rows, style.markdown, style.max_width());
}

// "scores 128.0 MiB, probabilities 128.0 MiB, other 1.0 MiB": what a case held at its peak, by role.
std::string roles_text(const CaseMemory& m) {
  std::string text;
  for (const MemoryRole& r : m.roles) {
    if (r.peak_bytes == 0) continue;
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", r.role, format_bytes(static_cast<double>(r.peak_bytes)));
  }
  return text;
}

// Device memory per case, for md and the wide table: the peak and what held it, what the plan
// allocated, and what the timed loop allocated and released per iteration.
std::string memory_table(const RunSummary& s, const HumanStyle& style) {
  std::vector<std::vector<std::string>> rows;
  for (const CaseSummary& c : s.cases) {
    if (c.status != CaseStatus::ok || !c.memory) continue;
    const CaseMemory& m = *c.memory;
    std::vector<std::string> apis;
    for (const MemoryOperations& op : m.in_iterations)
      if (!op.api.empty() && std::find(apis.begin(), apis.end(), op.api) == apis.end()) apis.push_back(op.api);
    std::string api_text;
    for (const std::string& api : apis) api_text += (api_text.empty() ? "" : ", ") + api;
    std::string notes;
    if (m.carried_bytes > 0) notes = format_bytes(static_cast<double>(m.carried_bytes)) + " from earlier cases";
    if (m.unmatched_releases > 0)
      notes += fmt::format("{}{} release(s) without allocation", notes.empty() ? "" : "; ", m.unmatched_releases);
    rows.push_back({c.label, format_bytes(static_cast<double>(m.peak_bytes)),
                    count_and_bytes(static_cast<double>(m.plan_allocations), static_cast<double>(m.plan_bytes)),
                    count_and_bytes(m.allocations_per_iter, m.allocation_bytes_per_iter),
                    count_and_bytes(m.releases_per_iter, m.release_bytes_per_iter), api_text, roles_text(m), notes});
  }
  if (rows.empty()) return "";
  return layout({{"case", false},
                 {"peak mem", true},
                 {"plan allocs", true},
                 {"allocs/it", true},
                 {"frees/it", true},
                 {"alloc api", false},
                 {"held at peak, by role", false},
                 {"notes", false}},
                rows, style.markdown);
}

// Surprises first (the user's guesses the trace contradicts), then the findings ranked by what is
// at stake, each kind once with its cases, and a line saying what was folded.
std::string findings_text(const RunSummary& s, const HumanStyle& style, const FindingsView& view) {
  std::string out;
  std::string surprises;
  for (const CaseSummary& c : s.cases)
    for (const Surprise& x : c.surprises)
      surprises += style.bullet(fmt::format("{}: {} expected {}, trace shows {} ({}{})", c.label, x.field, x.expected,
                                            x.observed, x.expectation, x.note.empty() ? "" : ": " + x.note));
  if (!surprises.empty())
    out += (style.markdown ? "\n**Surprises** (your guesses the trace contradicts)\n\n"
                           : "\nsurprises (guesses the trace contradicts):\n") +
           surprises;

  const SelectedFindings selected = select_findings(rank_findings(s), view);
  std::string findings;
  if (style.narrow()) {
    // One line per kind, within kTableWidth: what it says gives way first (--wide, md and the HTML
    // report print it whole), then who it holds for.
    constexpr std::size_t kCasesWidth = 24;
    std::vector<std::vector<std::string>> rows;
    for (const FindingGroup& g : selected.shown)
      rows.push_back({stake_text(g.lead()), finding_kind_title(g.kind), finding_group_subject(g, s, kCasesWidth),
                      g.message});
    if (!rows.empty())
      findings = layout({{"at stake", true}, {"finding", false}, {"cases", false, Shrink::middle, kCasesWidth, 0},
                         {"what it says", false, Shrink::end, 30, 1}},
                        rows, false, kTableWidth);
  } else {
    for (const FindingGroup& g : selected.shown) {
      const std::string stake = stake_text(g.lead());
      findings += style.bullet(fmt::format("{}{} ({}): {}", stake.empty() ? "" : "[" + stake + "] ",
                                           finding_kind_title(g.kind), finding_group_cases(g, s), g.message));
    }
  }
  if (selected.folded_groups > 0) {
    const std::string folded =
        fmt::format("{} more kind(s) of finding ({} in all) {}: --findings all", selected.folded_groups,
                    selected.folded_findings,
                    view.mode == FindingsView::Mode::top ? "below the top ones"
                                                         : fmt::format("explain less than {:.0f}% of their case's time",
                                                                       kShownSharePercent));
    findings += style.markdown ? "\n_" + folded + "_\n" : style.paragraph(folded);
  }
  if (!findings.empty())
    out += (style.markdown ? "\n**Findings**, by what is at stake\n\n" : "\nfindings, by what is at stake:\n") + findings;
  return out;
}

std::string render_human(const RunSummary& s, const HumanStyle& style, const FindingsView& view) {
  std::string out;
  const std::string heading =
      fmt::format("attnprof {} on {} (sm_{}{}, {} SMs), config: {}{}", s.tool_version, s.device.name,
                  s.device.compute_major, s.device.compute_minor, s.device.sm_count,
                  s.config_name.empty() ? s.config_source : s.config_name,
                  s.config_name.empty() ? "" : fmt::format(" ({})", s.config_source));
  out += style.markdown ? "### " + heading + "\n\n" : style.paragraph(heading) + "\n";
  out += cases_table(s, style);
  const std::string kernels = kernels_table(s, style);
  if (!kernels.empty()) out += '\n' + kernels;
  if (!style.narrow()) {
    const std::string memory = memory_table(s, style);
    if (!memory.empty()) out += '\n' + memory;
  }

  if (std::any_of(s.cases.begin(), s.cases.end(), [](const CaseSummary& c) { return c.problem.is_backward(); }))
    out += '\n' + style.paragraph(fmt::format("TFLOP/s of a backward case: {}", kBackwardFlopsNote));

  std::string notes;
  for (const CaseSummary& c : s.cases) {
    if (c.status != CaseStatus::ok && !c.reason.empty())
      notes += style.bullet(fmt::format("{} {}: {}", c.label, to_string(c.status), c.reason));
    else if (c.verified && !c.verify_passed)
      notes += style.bullet(fmt::format("{} WRONG: {}", c.label, c.reason));
  }
  if (!notes.empty()) out += (style.markdown ? "\n**Not run or wrong**\n\n" : "\nnot run or wrong:\n") + notes;

  out += findings_text(s, style, view);

  std::string capture = fmt::format("capture: {} records, {} dropped, {} buffer requests declined, {} with invalid timestamps",
                                    s.capture.records, s.capture.dropped_records, s.capture.buffers_declined,
                                    s.capture.invalid_timestamps);
  if (!s.capture.complete()) capture += "  <-- INCOMPLETE: counts above may be low";
  out += '\n';
  out += style.paragraph(capture);
  if (s.interrupted) out += style.paragraph("the run was interrupted; cases not reached are marked interrupted");
  return out;
}

std::string render_csv(const RunSummary& s) {
  std::string out =
      "case,backend,dtype,causal,batch,heads,seq_q,seq_kv,head_dim,status,reason,verified,relative_error,"
      "median_us,p90_us,tflops,kernels_per_iter,memcpy_per_iter,memcpy_bytes_per_iter,memset_per_iter,"
      "plan_cold_ms,plan_warm_ms,dominant_kernel,registers,block,grid,shared_bytes,theoretical_occupancy,"
      "occupancy_limiter,launch_api,findings,surprises,device,communication_kernels_per_iter,"
      "heads_kv,causal_alignment,window_left,window_right,flops,min_bytes,gbps,intensity,bound,compute_roof_percent,"
      "bandwidth_roof_percent,roof_percent,peak_memory_bytes,plan_allocations,plan_allocation_bytes,"
      "allocations_per_iter,allocation_bytes_per_iter,releases_per_iter,release_bytes_per_iter,memory_roles,"
      "unmatched_releases,pass\n";
  for (const CaseSummary& c : s.cases) {
    const KernelSummary* k = c.dominant_kernel();
    const AttentionShape& sh = c.problem.shape;
    std::vector<std::string> cells = {
        c.label, c.backend, std::string(to_string(c.problem.dtype)), c.problem.causal ? "true" : "false",
        std::to_string(sh.batch), std::to_string(sh.heads), std::to_string(sh.seq_q), std::to_string(sh.seq_kv),
        std::to_string(sh.head_dim), to_string(c.status), c.reason, c.verified ? (c.verify_passed ? "passed" : "failed") : "no",
        fmt::format("{:.3e}", c.relative_error), fmt::format("{:.3f}", c.median_us), fmt::format("{:.3f}", c.p90_us),
        fmt::format("{:.2f}", c.tflops), fmt::format("{:.3g}", c.kernels_per_iter),
        fmt::format("{:.3g}", c.memcpy_per_iter), fmt::format("{:.0f}", c.memcpy_bytes_per_iter),
        fmt::format("{:.3g}", c.memset_per_iter),
        c.plan_cold_ms ? fmt::format("{:.3f}", *c.plan_cold_ms) : "", c.plan_warm_ms ? fmt::format("{:.3f}", *c.plan_warm_ms) : "",
        k ? k->name : "", k ? std::to_string(k->registers_per_thread) : "", k ? format_dims(k->block) : "",
        k ? format_dims(k->grid) : "", k ? std::to_string(k->shared_bytes) : "",
        k ? fmt::format("{:.2f}", k->theoretical_occupancy_percent) : "", k ? k->occupancy_limiter : "",
        k ? k->launch_api : "", std::to_string(c.findings.size()), std::to_string(c.surprises.size()),
        std::to_string(c.device), fmt::format("{:.3g}", communication_kernels_per_iter(c)),
        std::to_string(sh.kv_heads()), c.problem.is_bottom_right() ? "bottom_right" : "top_left",
        std::to_string(c.problem.window.left), std::to_string(c.problem.window.right),
        fmt::format("{:.6g}", c.roofline.flops), fmt::format("{:.6g}", c.roofline.min_bytes),
        fmt::format("{:.2f}", c.roofline.gbps), fmt::format("{:.2f}", c.roofline.intensity), c.roofline.bound,
        c.roofline.compute_percent ? fmt::format("{:.2f}", *c.roofline.compute_percent) : "",
        c.roofline.bandwidth_percent ? fmt::format("{:.2f}", *c.roofline.bandwidth_percent) : "",
        c.roofline.roof_percent ? fmt::format("{:.2f}", *c.roofline.roof_percent) : ""};
    // Device memory, empty where none was recorded; roles as role=bytes held at the peak. The pass stays last.
    const CaseMemory* m = c.memory ? &*c.memory : nullptr;
    std::string roles;
    if (m)
      for (const MemoryRole& r : m->roles)
        if (r.peak_bytes > 0) roles += fmt::format("{}{}={}", roles.empty() ? "" : ";", r.role, r.peak_bytes);
    cells.insert(cells.end(),
                 {m ? std::to_string(m->peak_bytes) : "", m ? std::to_string(m->plan_allocations) : "",
                  m ? std::to_string(m->plan_bytes) : "", m ? fmt::format("{:.3g}", m->allocations_per_iter) : "",
                  m ? fmt::format("{:.0f}", m->allocation_bytes_per_iter) : "",
                  m ? fmt::format("{:.3g}", m->releases_per_iter) : "",
                  m ? fmt::format("{:.0f}", m->release_bytes_per_iter) : "", roles,
                  m ? std::to_string(m->unmatched_releases) : "", std::string(to_string(c.problem.pass))});
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_cell(cells[i]);
    }
    out += '\n';
  }
  return out;
}


}  // namespace

std::string render_summary(const RunSummary& summary, OutputFormat format, const RenderOptions& options) {
  switch (format) {
    case OutputFormat::table: return render_human(summary, {false, options.wide}, options.findings);
    case OutputFormat::md: return render_human(summary, {true, true}, options.findings);
    case OutputFormat::csv: return render_csv(summary);
    case OutputFormat::json: return nlohmann::json(summary).dump(2) + "\n";
  }
  return {};
}

}  // namespace attnprof
