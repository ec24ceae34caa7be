// `attnprof diff`'s report for people (a terminal table within kTableWidth columns, Markdown for a
// pull-request comment) and for tools (CSV, one row per case; JSON, everything).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "diff/diff.hpp"
#include "summary/render.hpp"

namespace attnprof {

std::string render_diff(const DiffReport& report, OutputFormat format);

nlohmann::json diff_to_json(const DiffReport& report);

// The rule a verdict follows, in words, for every format and the page: "faster or slower only when ...".
std::string verdict_rule_text(const DiffOptions& options);

}  // namespace attnprof
