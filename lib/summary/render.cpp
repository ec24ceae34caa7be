#include "summary/render.hpp"

#include "summary/findings.hpp"
#include "summary/kernel_category.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace attnprof {

std::optional<OutputFormat> parse_output_format(std::string_view text) {
  if (text == "table") return OutputFormat::table;
  if (text == "md") return OutputFormat::md;
  if (text == "csv") return OutputFormat::csv;
  if (text == "json") return OutputFormat::json;
  return std::nullopt;
}

std::string format_microseconds(double us) {
  if (us >= 10000) return fmt::format("{:.2f} ms", us / 1000);
  return fmt::format("{:.1f} us", us);
}

std::string format_dims(const std::array<int, 3>& d) { return fmt::format("[{},{},{}]", d[0], d[1], d[2]); }

std::string shorten(std::string_view text, std::size_t width) {
  if (text.size() <= width) return std::string(text);
  if (width <= 3) return std::string(text.substr(0, width));
  return std::string(text.substr(0, width - 3)) + "...";
}

namespace {

std::string count_text(double per_iter) {
  if (std::abs(per_iter - std::round(per_iter)) < 1e-9) return fmt::format("{:.0f}", per_iter);
  return fmt::format("{:.2f}", per_iter);
}

std::string bytes_text(double bytes) {
  if (bytes >= 1 << 30) return fmt::format("{:.2f} GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:.1f} KiB", bytes / (1 << 10));
  return fmt::format("{:.0f} B", bytes);
}

std::string status_text(const CaseSummary& c) {
  if (c.status == CaseStatus::ok && c.verified && !c.verify_passed) return "WRONG";
  return to_string(c.status);
}

struct Column {
  std::string title;
  bool right_aligned;
};

// Rows of cells -> aligned text (table) or a pipe table (md).
std::string layout(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows, bool markdown) {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t i = 0; i < columns.size(); ++i) width[i] = columns[i].title.size();
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    if (markdown) out += "| ";
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string& cell = cells[i];
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

std::string render_human(const RunSummary& s, bool markdown) {
  std::string out;
  const std::string heading =
      fmt::format("attnprof {} on {} (sm_{}{}, {} SMs), config: {}{}", s.tool_version, s.device.name,
                  s.device.compute_major, s.device.compute_minor, s.device.sm_count,
                  s.config_name.empty() ? s.config_source : s.config_name,
                  s.config_name.empty() ? "" : fmt::format(" ({})", s.config_source));
  out += markdown ? "### " + heading + "\n\n" : heading + "\n\n";

  // A device column when the cases ran on several GPUs (run --devices), a communication column
  // when some case launched NCCL kernels; a one-GPU run without collectives reads as it always did.
  bool several_devices = false, any_communication = false;
  for (const CaseSummary& c : s.cases) {
    several_devices = several_devices || c.device != s.cases.front().device;
    any_communication = any_communication || communication_kernels_per_iter(c) > 0;
  }
  std::vector<Column> main_columns = {
      {"case", false},      {"status", false},   {"rel.err", true},   {"median", true},  {"p90", true},
      {"TFLOP/s", true},    {"kernels/it", true}, {"memcpy/it", true}, {"memset/it", true}, {"plan cold/warm", true}};
  if (any_communication) main_columns.insert(main_columns.begin() + 7, {"nccl/it", true});
  if (several_devices) main_columns.insert(main_columns.begin() + 1, {"GPU", true});
  std::vector<std::vector<std::string>> rows;
  for (const CaseSummary& c : s.cases) {
    const bool ran = c.status == CaseStatus::ok;
    std::string memcpy = ran ? count_text(c.memcpy_per_iter) : "";
    if (ran && c.memcpy_per_iter > 0) memcpy += " (" + bytes_text(c.memcpy_bytes_per_iter) + ")";
    std::string plan;
    if (c.plan_cold_ms) plan = fmt::format("{:.2f}/{:.3f} ms", *c.plan_cold_ms, c.plan_warm_ms.value_or(0));
    rows.push_back({c.label, status_text(c), c.verified ? fmt::format("{:.1e}", c.relative_error) : "-",
                    ran ? format_microseconds(c.median_us) : "", ran ? format_microseconds(c.p90_us) : "",
                    ran ? fmt::format("{:.1f}", c.tflops) : "", ran ? count_text(c.kernels_per_iter) : "", memcpy,
                    ran ? count_text(c.memset_per_iter) : "", ran ? plan : ""});
    if (any_communication) rows.back().insert(rows.back().begin() + 7, ran ? count_text(communication_kernels_per_iter(c)) : "");
    if (several_devices) rows.back().insert(rows.back().begin() + 1, std::to_string(c.device));
  }
  out += layout(main_columns, rows, markdown);

  std::vector<Column> kernel_columns = {{"case", false},     {"dominant kernel", false}, {"regs", true},
                                        {"block", true},     {"grid", true},             {"smem", true},
                                        {"occupancy", true}, {"limited by", false},      {"launch api", false}};
  // Columns for --metrics dram / tensor only when some kernel has them.
  bool any_dram = false, any_tensor = false;
  for (const CaseSummary& c : s.cases)
    if (const KernelSummary* k = c.dominant_kernel()) {
      any_dram = any_dram || k->dram_throughput_percent.has_value();
      any_tensor = any_tensor || k->tensor_pipe_percent.has_value();
    }
  if (any_dram) kernel_columns.push_back({"dram", true});
  if (any_tensor) kernel_columns.push_back({"tensor pipe", true});
  rows.clear();
  for (const CaseSummary& c : s.cases) {
    const KernelSummary* k = c.dominant_kernel();
    if (c.status != CaseStatus::ok || k == nullptr) continue;
    std::string occupancy = k->occupancy_valid ? fmt::format("{:.1f}%", k->theoretical_occupancy_percent) : "?";
    if (k->achieved_occupancy_percent) occupancy += fmt::format(" ({:.1f}% achieved)", *k->achieved_occupancy_percent);
    rows.push_back({c.label, shorten(shorten_name(k->name), markdown ? 120 : 48), std::to_string(k->registers_per_thread),
                    format_dims(k->block), format_dims(k->grid), bytes_text(k->shared_bytes), occupancy,
                    k->occupancy_limiter, k->launch_api});
    if (any_dram) {
      std::string dram;
      if (k->dram_throughput_percent) dram = fmt::format("{:.1f}%", *k->dram_throughput_percent);
      if (k->dram_bytes_per_second) dram += fmt::format(" ({:.0f} GB/s)", *k->dram_bytes_per_second / 1e9);
      rows.back().push_back(dram);
    }
    if (any_tensor)
      rows.back().push_back(k->tensor_pipe_percent ? fmt::format("{:.1f}%", *k->tensor_pipe_percent) : "");
  }
  if (!rows.empty()) {
    out += markdown ? "\n" : "\n";
    out += layout(kernel_columns, rows, markdown);
  }

  std::string notes;
  for (const CaseSummary& c : s.cases) {
    if (c.status != CaseStatus::ok && !c.reason.empty())
      notes += fmt::format("- {} {}: {}\n", c.label, to_string(c.status), c.reason);
    else if (c.verified && !c.verify_passed)
      notes += fmt::format("- {} WRONG: {}\n", c.label, c.reason);
  }
  if (!notes.empty()) out += (markdown ? "\n**Not run or wrong**\n\n" : "\nnot run or wrong:\n") + notes;

  std::string findings;
  for (const CaseSummary& c : s.cases)
    for (const Finding& f : c.findings) findings += fmt::format("- {}: {}\n", c.label, f.message);
  if (!findings.empty()) out += (markdown ? "\n**Findings**\n\n" : "\nfindings:\n") + findings;

  std::string surprises;
  for (const CaseSummary& c : s.cases)
    for (const Surprise& x : c.surprises)
      surprises += fmt::format("- {}: {} expected {}, trace shows {} ({}{})\n", c.label, x.field, x.expected,
                               x.observed, x.expectation, x.note.empty() ? "" : ": " + x.note);
  if (!surprises.empty()) out += (markdown ? "\n**Surprises** (your guesses the trace contradicts)\n\n" : "\nsurprises (guesses the trace contradicts):\n") + surprises;

  std::string capture = fmt::format("capture: {} records, {} dropped, {} buffer requests declined, {} with invalid timestamps",
                                    s.capture.records, s.capture.dropped_records, s.capture.buffers_declined,
                                    s.capture.invalid_timestamps);
  if (!s.capture.complete()) capture += "  <-- INCOMPLETE: counts above may be low";
  if (s.interrupted) capture += "\nthe run was interrupted; cases not reached are marked interrupted";
  out += "\n" + capture + "\n";
  return out;
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

std::string render_csv(const RunSummary& s) {
  std::string out =
      "case,backend,dtype,causal,batch,heads,seq_q,seq_kv,head_dim,status,reason,verified,relative_error,"
      "median_us,p90_us,tflops,kernels_per_iter,memcpy_per_iter,memcpy_bytes_per_iter,memset_per_iter,"
      "plan_cold_ms,plan_warm_ms,dominant_kernel,registers,block,grid,shared_bytes,theoretical_occupancy,"
      "occupancy_limiter,launch_api,findings,surprises,device,communication_kernels_per_iter\n";
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
        std::to_string(c.device), fmt::format("{:.3g}", communication_kernels_per_iter(c))};
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_cell(cells[i]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace

std::string render_summary(const RunSummary& summary, OutputFormat format) {
  switch (format) {
    case OutputFormat::table: return render_human(summary, false);
    case OutputFormat::md: return render_human(summary, true);
    case OutputFormat::csv: return render_csv(summary);
    case OutputFormat::json: return nlohmann::json(summary).dump(2) + "\n";
  }
  return {};
}

}  // namespace attnprof
