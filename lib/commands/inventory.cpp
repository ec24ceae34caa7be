// The stories of `attnprof devices` and `attnprof backends`: query, then print.
#include "commands/inventory.hpp"

#include <iostream>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/backend.hpp"
#include "backends/cudnn_info.hpp"
#include "collector/activity_collector.hpp"
#include "core/errors.hpp"
#include "gpu/device_info.hpp"

namespace attnprof {

int devices_command() {
  const int count = require_devices();
  const SoftwareVersions v = query_software_versions();
  std::cout << fmt::format("driver {} (CUDA {}), CUDA runtime {}, CUPTI API {}, cuDNN {}\n",
                           v.driver_text.empty() ? "?" : v.driver_text, cuda_version_text(v.driver),
                           cuda_version_text(v.runtime), ActivityCollector::cupti_version_text(),
                           cudnn_runtime_description());
  for (int d = 0; d < count; ++d) {
    const DeviceProperties p = query_device_properties(d);
    std::cout << fmt::format(
        "GPU {}: {} (sm_{}{}), {} SMs, {:.1f} GiB, L2 {:.0f} MiB, {} regs/SM, {} KiB shared/SM ({} KiB opt-in per "
        "block), max {} threads/SM\n",
        d, p.name, p.compute_major, p.compute_minor, p.sm_count, static_cast<double>(p.total_global_mem) / (1 << 30),
        static_cast<double>(p.l2_cache_bytes) / (1 << 20), p.regs_per_sm, p.shared_mem_per_sm / 1024,
        p.shared_mem_per_block_optin / 1024, p.max_threads_per_sm);
  }
  return kExitOk;
}

int backends_command(const BackendsRequest& o) {
  std::optional<DeviceProperties> device;
  std::string no_device_reason;
  try {
    require_devices();
    device = query_device_properties(o.device);
    std::cout << fmt::format("GPU {}: {} (sm_{}{}), cuDNN {}\n\n", o.device, device->name, device->compute_major,
                             device->compute_minor, cudnn_runtime_description());
  } catch (const NoUsableGpuError& e) {
    no_device_reason = e.what();
    std::cout << "no GPU here (" << no_device_reason << "): device checks skipped, problem support shown\n\n";
  }
  const std::vector<int> head_dims = {32, 40, 64, 80, 96, 128, 160, 192, 256};
  for (const BackendInfo& info : backend_registry()) {
    const auto backend = info.make();
    std::string status = "runs here";
    if (device) {
      if (auto why = backend->check_device(*device)) status = "cannot run here: " + *why;
    } else {
      status = "not checked (no GPU)";
    }
    std::cout << fmt::format("{:<20} {}\n{:<20} {}\n", info.name, info.description, "", status);
    std::set<std::string> dtypes, dims, reasons;
    bool causal = false, bias = false;
    for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
      for (int d : head_dims)
        for (bool is_causal : {false, true})
          for (bool has_bias : {false, true}) {
            AttentionProblem p;
            p.shape = {1, 1, 128, 128, d};
            p.dtype = dtype;
            p.causal = is_causal;
            p.has_bias = has_bias;
            if (auto why = backend->check_problem(p)) {
              reasons.insert(*why);
              continue;
            }
            dtypes.insert(std::string(to_string(dtype)));
            dims.insert(fmt::format("{:03}", d));
            causal = causal || is_causal;
            bias = bias || has_bias;
          }
    std::string dim_list;
    for (const std::string& d : dims) {
      if (!dim_list.empty()) dim_list += ' ';
      dim_list += std::to_string(std::stoi(d));
    }
    std::cout << fmt::format("{:<20} dtypes: {}; head dims (of those probed): {}; causal: {}; bias: {}\n", "",
                             dtypes.empty() ? "none" : fmt::format("{}", fmt::join(dtypes, " ")),
                             dim_list.empty() ? "none" : dim_list, causal ? "yes" : "no", bias ? "yes" : "no");
    // The workloads of LLM attention, each probed on a bf16 d128 problem (seq_q != seq_kv).
    struct Workload {
      const char* name;
      void (*shape)(AttentionProblem&);
    };
    const Workload workloads[] = {
        {"grouped K/V heads (GQA 32/8)", [](AttentionProblem& p) { p.shape.heads_kv = 8; }},
        {"one K/V head (MQA)", [](AttentionProblem& p) { p.shape.heads_kv = 1; }},
        {"bottom-right causal", [](AttentionProblem& p) { set_causal_mode(p, CausalMode::bottom_right); }},
        {"sliding window", [](AttentionProblem& p) {
           set_causal_mode(p, CausalMode::top_left);
           p.window = {64, 0};
         }},
        {"ragged batch (packed)", [](AttentionProblem& p) {
           p.shape.seq_lens_q = {96};
           p.shape.seq_lens_kv = {160};
         }},
        {"paged K/V (pages of 16)", [](AttentionProblem& p) { p.shape.page_size = 16; }},
        {"decode (1 query token, GQA 32/8)", [](AttentionProblem& p) {
           p.shape.seq_q = 1;
           p.shape.heads_kv = 8;
           set_causal_mode(p, CausalMode::bottom_right);
         }},
        {"paged decode (pages of 16)", [](AttentionProblem& p) {
           p.shape.seq_q = 1;
           p.shape.heads_kv = 8;
           p.shape.page_size = 16;
           set_causal_mode(p, CausalMode::bottom_right);
         }},
    };
    std::vector<std::string> runs, rejected;
    for (const Workload& w : workloads) {
      AttentionProblem p;
      p.shape = {1, 32, 96, 160, 128};
      w.shape(p);
      if (auto why = backend->check_problem(p)) {
        rejected.push_back(fmt::format("{}: {}", w.name, *why));
        reasons.insert(*why);
      } else {
        runs.push_back(w.name);
      }
    }
    std::cout << fmt::format("{:<20} workloads: {}\n", "", runs.empty() ? "dense MHA only" : fmt::format("{}", fmt::join(runs, ", ")));
    // The backward (passes: ["backward"]), probed on a dense bf16 d128 causal problem.
    AttentionProblem backward;
    backward.shape = {1, 32, 96, 160, 128, 8};
    set_causal_mode(backward, CausalMode::top_left);
    backward.pass = AttentionPass::backward;
    const Unsupported no_backward = backend->check_problem(backward) ? backend->check_problem(backward)
                                                                     : backend->check_backward(backward);
    std::cout << fmt::format("{:<20} backward: {}\n", "", no_backward ? "no (" + *no_backward + ")" : "yes");
    for (const std::string& why : reasons) std::cout << fmt::format("{:<20} rejects: {}\n", "", why);
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace attnprof
