// Rendering a run summary for people (table, Markdown) and for tools (CSV, JSON).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "summary/finding_groups.hpp"
#include "summary/summary.hpp"

namespace attnprof {

enum class OutputFormat { table, md, csv, json };

// What is rendered: a run summary (run, report, profile, merge), or check's comparison of two
// summaries, which has no CSV form.
enum class RenderedReport { summary, check };

// Each format's name, as --format takes it, and whether check renders it: the one place a
// format name is spelled. The CLI's choices, its help text and the parser all read it.
struct OutputFormatName {
  OutputFormat format;
  std::string_view name;
  bool check_renders;
};
inline constexpr std::array<OutputFormatName, 4> kOutputFormats = {{
    {OutputFormat::table, "table", true},
    {OutputFormat::md, "md", true},
    {OutputFormat::csv, "csv", false},
    {OutputFormat::json, "json", true},
}};

std::string_view to_string(OutputFormat format);
// The names `report` is rendered in, for CLI11's IsMember: {"table", "md", "csv", "json"}.
std::vector<std::string> output_format_names(RenderedReport report = RenderedReport::summary);
// The format named `text`, if `report` is rendered in it.
std::optional<OutputFormat> parse_output_format(std::string_view text,
                                                RenderedReport report = RenderedReport::summary);
// The same, or a UsageError that lists the choices: "unknown format 'x': use table, md, csv or json".
OutputFormat output_format_named(std::string_view text, RenderedReport report = RenderedReport::summary);

// Choices as help text and errors list them: "table, md, csv or json".
std::string choice_list(const std::vector<std::string>& names);

struct RenderOptions {
  // The table format fits kTableWidth columns: the wide details (relative error, p90, plan time,
  // block, grid, launch API, untruncated names) are in md, csv, json, and in the table with `wide`.
  bool wide = false;
  // Which findings the table and md print (summary/finding_groups.hpp); csv counts and json keeps all.
  FindingsView findings;
};

inline constexpr std::size_t kTableWidth = 120;

std::string render_summary(const RunSummary& summary, OutputFormat format, const RenderOptions& options = {});

// Short forms used in tables: "4.2 ms", "412.3 us"; "[128,1,1]"; "3", "0.50"; "256.0 KiB".
std::string format_microseconds(double us);
std::string format_dims(const std::array<int, 3>& dims);
std::string format_count(double per_iter);
std::string format_bytes(double bytes);
// A CSV field: quoted (quotes doubled) where it holds a comma, a quote or a newline (RFC 4180).
std::string csv_cell(const std::string& text);
// At most `width` characters: the end replaced by "..." (shorten), or the middle, which keeps
// both a case label's backend and its shape (shorten_middle).
std::string shorten(std::string_view text, std::size_t width);
std::string shorten_middle(std::string_view text, std::size_t width);
// Words of `text` on lines of at most `width` characters, the first starting with `first`, the
// others with `rest`; a word longer than a line stands alone on its line.
std::string wrap_text(std::string_view text, std::size_t width, std::string_view first, std::string_view rest);

}  // namespace attnprof
