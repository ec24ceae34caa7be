// Rendering a run summary for people (table, Markdown) and for tools (CSV, JSON).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "summary/summary.hpp"

namespace attnprof {

enum class OutputFormat { table, md, csv, json };

std::optional<OutputFormat> parse_output_format(std::string_view text);

std::string render_summary(const RunSummary& summary, OutputFormat format);

// Short forms used in tables: "4.2 ms", "412.3 us"; "[128,1,1]".
std::string format_microseconds(double us);
std::string format_dims(const std::array<int, 3>& dims);
std::string shorten(std::string_view text, std::size_t width);

}  // namespace attnprof
