#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "config/config.hpp"

namespace attnprof {

namespace {

// "file.json:3:17: ..." for a place in the text, "file.json: /shapes/1/batch: ..." for a value.
std::string issue_line(const std::string& source, const ConfigIssue& issue) {
  if (issue.line > 0) return fmt::format("{}:{}:{}: {}", source, issue.line, issue.column, issue.message);
  const std::string_view pointer = issue.pointer.empty() ? "(document)" : std::string_view(issue.pointer);
  return fmt::format("{}: {}: {}", source, pointer, issue.message);
}

std::string issue_lines(const std::string& source, const std::vector<ConfigIssue>& issues) {
  std::string text;
  for (const ConfigIssue& issue : issues) {
    if (!text.empty()) text += '\n';
    text += issue_line(source, issue);
  }
  return text;
}

}  // namespace

ConfigError::ConfigError(std::string source, std::vector<ConfigIssue> issues)
    : std::runtime_error(issue_lines(source, issues)),
      source_(std::move(source)),
      issues_(std::move(issues)) {}

}  // namespace attnprof
