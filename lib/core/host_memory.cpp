#include "core/host_memory.hpp"

#include <fstream>
#include <sstream>

namespace attnprof {

std::optional<std::uint64_t> parse_mem_available(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::uint64_t kib = 0;
    std::string unit;
    if (!(fields >> kib >> unit) || unit != "kB") return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> available_host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace attnprof
