#include "diff/diff_input.hpp"

#include <array>
#include <system_error>

#include <fmt/format.h>

#include "core/document_file.hpp"
#include "core/errors.hpp"
#include "summary/trace_report.hpp"
#include "trace/json_pull_parser.hpp"
#include "trace/trace_keys.hpp"
#include "trace/trace_files.hpp"

namespace attnprof {
namespace {

constexpr std::array<const char*, 2> kSummaryNames = {"summary.json", "summary.json.gz"};

DiffInput from_summary(const std::filesystem::path& file, RunSummary summary) {
  DiffInput input;
  input.source = file.string();
  input.origin = "summary.json";
  input.summary = std::move(summary);
  return input;
}

DiffInput from_trace(const std::filesystem::path& file, TraceReport report) {
  DiffInput input;
  input.source = file.string();
  input.origin = report.origin;
  input.summary = std::move(report.summary);
  input.notes = std::move(report.notes);
  return input;
}

std::string without_prefix(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

// A document that is no trace: a summary when it says so by its schema, else neither.
DiffInput read_summary(const std::filesystem::path& file, const trace::TraceFormatError& as_trace) {
  std::string text;
  try {
    text = read_file_text(file);
  } catch (const DocumentReadError& e) {
    throw UsageError(e.what());
  }
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  if (!document.is_object() ||
      document.value(trace::summary_document::kSchemaKey, std::string()) != trace::summary_document::kSchema)
    throw UsageError(fmt::format("{} is neither an attnprof summary nor a trace: {}", file.string(),
                                 without_prefix(as_trace.what(), file.string() + " is ")));
  try {
    return from_summary(file, document.get<RunSummary>());
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("{} is an attnprof summary that cannot be read: {}", file.string(), e.what()));
  }
}

// A file is read as a trace first: the reader streams, so a large trace is never held whole, and
// it stops at a summary's top-level keys, which is when the summary reader takes over.
DiffInput read_file(const std::filesystem::path& file) {
  try {
    return from_trace(file, report_from_trace(file));
  } catch (const trace::TraceFormatError& e) {
    if (e.kind() == trace::TraceFormatError::Kind::malformed) throw UsageError(e.what());
    return read_summary(file, e);
  } catch (const DocumentReadError& e) {
    throw UsageError(e.what());
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    // Whatever else stops the reader (a stored config it cannot take) is still this file's fault.
    throw UsageError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

DiffInput read_folder(const std::filesystem::path& folder) {
  for (const char* name : kSummaryNames)
    if (std::filesystem::is_regular_file(folder / name)) return read_file(folder / name);
  std::vector<std::filesystem::path> traces;
  try {
    traces = trace::find_process_traces({folder}, {});
  } catch (const UsageError&) {
    throw UsageError(fmt::format("{} is a folder without summary.json, summary.json.gz, trace.json or trace.json.gz",
                                 folder.string()));
  }
  if (traces.size() > 1)
    throw UsageError(fmt::format("{} holds {} per-process traces and no summary.json: name one of them, or merge them "
                                 "first (attnprof merge)",
                                 folder.string(), traces.size()));
  return read_file(traces.front());
}

}  // namespace

DiffInput load_diff_input(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw UsageError(fmt::format("{}: no such file or folder", path.string()));
  DiffInput input = std::filesystem::is_directory(status) ? read_folder(path) : read_file(path);
  input.path = path.string();
  return input;
}

}  // namespace attnprof
