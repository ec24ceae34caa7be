// Rendering a run summary for people (table, Markdown) and for tools (CSV, JSON).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "summary/summary.hpp"

namespace attnprof {

enum class OutputFormat { table, md, csv, json };

std::optional<OutputFormat> parse_output_format(std::string_view text);

struct RenderOptions {
  // The table format fits kTableWidth columns: the wide details (relative error, p90, plan time,
  // block, grid, launch API, untruncated names) are in md, csv, json, and in the table with `wide`.
  bool wide = false;
};

inline constexpr std::size_t kTableWidth = 120;

std::string render_summary(const RunSummary& summary, OutputFormat format, const RenderOptions& options = {});

// Short forms used in tables: "4.2 ms", "412.3 us"; "[128,1,1]"; "3", "0.50"; "256.0 KiB".
std::string format_microseconds(double us);
std::string format_dims(const std::array<int, 3>& dims);
std::string format_count(double per_iter);
std::string format_bytes(double bytes);
// At most `width` characters: the end replaced by "..." (shorten), or the middle, which keeps
// both a case label's backend and its shape (shorten_middle).
std::string shorten(std::string_view text, std::size_t width);
std::string shorten_middle(std::string_view text, std::size_t width);
// Words of `text` on lines of at most `width` characters, the first starting with `first`, the
// others with `rest`; a word longer than a line stands alone on its line.
std::string wrap_text(std::string_view text, std::size_t width, std::string_view first, std::string_view rest);

}  // namespace attnprof
