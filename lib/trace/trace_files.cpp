#include "trace/trace_files.hpp"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace attnprof::trace {
namespace {

// A run's or a single process's trace, or one of `profile`'s per-process traces.
const std::regex& process_trace_name() {
  static const std::regex pattern(R"(^trace(?:-rank(\d+))?(?:-pid(\d+))?\.json(?:\.gz)?$)");
  return pattern;
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec);
}

}  // namespace

std::string process_output_name(const std::string& stem, std::uint32_t pid, std::optional<int> rank) {
  return rank ? fmt::format("{}-rank{}-pid{}.json", stem, *rank, pid) : fmt::format("{}-pid{}.json", stem, pid);
}

std::optional<ProcessOutputName> parse_process_output_name(const std::string& file_name) {
  static const std::regex pattern(R"(^(trace|summary|idle)-(?:rank(\d+)-)?pid(\d+)\.json(?:\.gz)?$)");
  std::smatch m;
  if (!std::regex_match(file_name, m, pattern)) return std::nullopt;
  ProcessOutputName name;
  name.stem = m[1].str();
  name.pid = static_cast<std::uint32_t>(std::stoul(m[3].str()));
  if (m[2].matched) name.rank = std::stoi(m[2].str());
  return name;
}

std::optional<int> rank_in_file_name(const std::filesystem::path& path) {
  static const std::regex pattern(R"((?:^|[-_.])rank(\d+)(?:[-_.]|$))");
  std::smatch m;
  const std::string name = path.filename().string();
  if (std::regex_search(name, m, pattern)) return std::stoi(m[1].str());
  return std::nullopt;
}

std::vector<std::filesystem::path> find_process_traces(const std::vector<std::filesystem::path>& inputs,
                                                       const std::filesystem::path& exclude) {
  std::vector<std::filesystem::path> found;
  for (const std::filesystem::path& input : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      std::vector<std::filesystem::path> in_dir;
      for (const auto& entry : std::filesystem::directory_iterator(input)) {
        if (!entry.is_regular_file()) continue;
        if (!std::regex_match(entry.path().filename().string(), process_trace_name())) continue;
        if (!exclude.empty() && same_file(entry.path(), exclude)) continue;
        in_dir.push_back(entry.path());
      }
      if (in_dir.empty())
        throw UsageError(fmt::format("merge: {} holds no trace attnprof wrote (trace.json, trace-pid<N>.json, "
                                     "trace-rank<R>-pid<N>.json)",
                                     input.string()));
      std::sort(in_dir.begin(), in_dir.end());
      found.insert(found.end(), in_dir.begin(), in_dir.end());
    } else if (std::filesystem::is_regular_file(input, ec)) {
      if (!exclude.empty() && same_file(input, exclude))
        throw UsageError(fmt::format("merge: {} is both an input and the output", input.string()));
      found.push_back(input);
    } else {
      throw UsageError(fmt::format("merge: {} does not exist", input.string()));
    }
  }
  std::vector<std::filesystem::path> unique;
  for (const std::filesystem::path& p : found)
    if (std::none_of(unique.begin(), unique.end(), [&](const auto& u) { return same_file(u, p); })) unique.push_back(p);
  return unique;
}

}  // namespace attnprof::trace
