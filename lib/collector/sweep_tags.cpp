#include "collector/sweep_tags.hpp"

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>

namespace attnprof {

std::uint64_t encode_tag(const trace::SweepTag& tag) {
  const auto case_bits = static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag.case_index + 1)) << 32;
  const auto phase_bits = static_cast<std::uint64_t>(tag.phase) << 24;
  const auto iteration_bits = static_cast<std::uint64_t>(tag.iteration + 1) & 0xffffffu;
  return case_bits | phase_bits | iteration_bits;
}

trace::SweepTag decode_tag(std::uint64_t id) {
  trace::SweepTag tag;
  tag.case_index = static_cast<int>(static_cast<std::uint32_t>(id >> 32)) - 1;
  const auto phase = static_cast<std::uint8_t>((id >> 24) & 0xffu);
  tag.phase = phase <= static_cast<std::uint8_t>(trace::Phase::metrics) ? static_cast<trace::Phase>(phase)
                                                                         : trace::Phase::none;
  tag.iteration = static_cast<int>(id & 0xffffffu) - 1;
  return tag;
}

std::string strip_api_version(std::string name) {
  // Trailing "_v<digits>" is CUPTI's version suffix; "_ptsz"/"_ptds" mark per-thread streams.
  const auto v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size()) {
    bool digits = true;
    for (std::size_t i = v + 2; i < name.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
    if (digits) name.erase(v);
  }
  for (const char* suffix : {"_ptsz", "_ptds"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) name.erase(name.size() - s.size());
  }
  return name;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed>";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

}  // namespace attnprof
