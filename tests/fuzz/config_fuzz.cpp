// parse_config on arbitrary bytes. Rejection is a ConfigError naming at least one issue, each
// with a message; any other exception, a crash or undefined behaviour is a bug. What it accepts
// must hold what validation promises.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace {

// The names the backend registry accepts (lib/backends/registry.cpp, not in the CPU library).
const std::vector<std::string> kBackends = {"math",  "manual",    "manual:out_of_place", "manual:in_place", "efficient",
                                            "flash", "flash:fa2", "flash:hopper",        "cudnn"};

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "config_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const attnprof::Config config = attnprof::parse_config(text, "fuzz.json", kBackends);
    if (config.backends.empty() || config.shapes.empty() || config.dtypes.empty() || config.causal.empty())
      bug("an accepted config has nothing to run");
    if (config.iterations < 1 || config.warmup < 0) bug("an accepted config has a negative count");
  } catch (const attnprof::ConfigError& e) {
    if (e.issues().empty()) bug("a ConfigError without issues");
    for (const attnprof::ConfigIssue& issue : e.issues())
      if (issue.message.empty()) bug("a ConfigError issue without a message");
    if (std::string_view(e.what()).empty()) bug("a ConfigError without a message");
  }
  return 0;
}
