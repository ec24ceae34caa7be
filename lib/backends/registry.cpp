#include <algorithm>

#include <fmt/format.h>

#include "backends/backend.hpp"
#include "backends/factories.hpp"
#include "config/config.hpp"
#include "core/errors.hpp"

namespace attnprof {

const std::vector<BackendInfo>& backend_registry() {
  static const std::vector<BackendInfo> registry = {
      {"math",
       "PyTorch's math SDPA: fp32 upcast, K/V repeated for GQA and mask rebuilt per call, FFMA GEMMs, safe softmax",
       make_math_backend},
      {"manual:out_of_place", "five-line attention on cuBLAS; masked_fill copies the scores first",
       [] { return make_manual_backend(MaskedFill::out_of_place); }},
      {"manual:in_place", "five-line attention on cuBLAS; masked_fill_ writes in place",
       [] { return make_manual_backend(MaskedFill::in_place); }},
      {"efficient",
       "memory-efficient tiled attention: one kernel, fp32/bf16/fp16, head dims 8..256, bias, GQA, windows",
       make_efficient_backend},
      {"flash:fa2",
       "FlashAttention-2-style fused kernel: mma.sync, cp.async, online softmax in registers, GQA, windows, ragged and "
       "paged; decode with split-KV and a combine kernel",
       make_flash_backend},
      {"flash:hopper",
       "Hopper-native fused forward (sm_90a): wgmma, TMA into an mbarrier ring, a producer and two consumer "
       "warpgroups with setmaxnreg; dense, GQA, windows; decode (dense, ragged, paged) on flash:fa2's split-KV kernel",
       make_flash_hopper_backend},
      {"cudnn", "cuDNN fused SDPA through the graph API, per-shape plan cache, GQA, windows, bottom-right causal", make_cudnn_backend},
  };
  return registry;
}

const BackendInfo* find_backend(std::string_view name) {
  for (const BackendInfo& info : backend_registry())
    if (info.name == name) return &info;
  return nullptr;
}

namespace {
std::string_view family_of(std::string_view name) { return name.substr(0, name.find(':')); }
}  // namespace

std::vector<std::string> accepted_backend_names() {
  std::vector<std::string> names;
  for (const BackendInfo& info : backend_registry()) {
    const std::string family(family_of(info.name));
    if (std::find(names.begin(), names.end(), family) == names.end()) names.push_back(family);
    if (family != info.name) names.push_back(info.name);
  }
  return names;
}

std::vector<std::string> expand_backend_names(const std::vector<std::string>& names) {
  std::vector<std::string> expanded;
  auto add = [&](const std::string& name) {
    if (std::find(expanded.begin(), expanded.end(), name) == expanded.end()) expanded.push_back(name);
  };
  for (const std::string& name : names) {
    bool matched = false;
    for (const BackendInfo& info : backend_registry()) {
      if (info.name == name || family_of(info.name) == name) {
        add(info.name);
        matched = true;
      }
    }
    if (!matched) {
      const auto hint = closest_match(name, accepted_backend_names());
      throw UsageError(fmt::format("unknown backend '{}'{}; known: {}", name,
                                   hint ? fmt::format(" (did you mean '{}'?)", *hint) : "",
                                   fmt::join(accepted_backend_names(), ", ")));
    }
  }
  return expanded;
}

}  // namespace attnprof
