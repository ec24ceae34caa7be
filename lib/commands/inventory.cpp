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

namespace {

// The probe problem of one workload: bf16 d128, 32 query heads, seq_q 96 != seq_kv 160.
AttentionProblem workload_problem(ProbedWorkload workload) {
  AttentionProblem p;
  p.shape = {1, 32, 96, 160, 128};
  switch (workload) {
    case ProbedWorkload::grouped_heads: p.shape.heads_kv = 8; break;
    case ProbedWorkload::one_kv_head: p.shape.heads_kv = 1; break;
    case ProbedWorkload::bottom_right_causal: set_causal_mode(p, CausalMode::bottom_right); break;
    case ProbedWorkload::sliding_window:
      set_causal_mode(p, CausalMode::top_left);
      p.window = {64, 0};
      break;
    case ProbedWorkload::ragged:
      p.shape.seq_lens_q = {96};
      p.shape.seq_lens_kv = {160};
      break;
    case ProbedWorkload::paged: p.shape.page_size = 16; break;
    case ProbedWorkload::decode:
      p.shape.seq_q = 1;
      p.shape.heads_kv = 8;
      set_causal_mode(p, CausalMode::bottom_right);
      break;
    case ProbedWorkload::paged_decode:
      p.shape.seq_q = 1;
      p.shape.heads_kv = 8;
      p.shape.page_size = 16;
      set_causal_mode(p, CausalMode::bottom_right);
      break;
  }
  return p;
}

}  // namespace

BackendSupport probe_backend_support(const BackendInfo& info, const std::optional<DeviceProperties>& device,
                                     const std::vector<int>& head_dims) {
  const auto backend = info.make();
  BackendSupport support;
  support.backend = info.name;
  // check_device first: manual and math size their workspace limit from the device it is given.
  if (device) {
    support.device = backend->check_device(*device);
    support.device_checked = true;
  }
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32})
    for (int d : head_dims)
      for (bool is_causal : {false, true})
        for (bool has_bias : {false, true}) {
          AttentionProblem p;
          p.shape = {1, 1, 128, 128, d};
          p.dtype = dtype;
          p.causal = is_causal;
          p.has_bias = has_bias;
          support.problems.push_back({dtype, d, is_causal, has_bias, backend->check_problem(p)});
        }
  for (ProbedWorkload w : kProbedWorkloads) support.workloads.push_back({w, backend->check_problem(workload_problem(w))});
  AttentionProblem backward;
  backward.shape = {1, 32, 96, 160, 128, 8};
  set_causal_mode(backward, CausalMode::top_left);
  backward.pass = AttentionPass::backward;
  const Unsupported forward_refused = backend->check_problem(backward);
  support.backward = forward_refused ? forward_refused : backend->check_backward(backward);
  return support;
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
  for (const BackendInfo& info : backend_registry()) {
    const BackendSupport support = probe_backend_support(info, device);
    std::string status = "runs here";
    if (!support.device_checked) {
      status = "not checked (no GPU)";
    } else if (support.device) {
      status = "cannot run here: " + *support.device;
    }
    std::cout << fmt::format("{:<20} {}\n{:<20} {}\n", info.name, info.description, "", status);
    std::set<std::string> dtypes, dims, reasons;
    bool causal = false, bias = false;
    for (const ProblemProbe& probe : support.problems) {
      if (probe.refused) {
        reasons.insert(*probe.refused);
        continue;
      }
      dtypes.insert(std::string(to_string(probe.dtype)));
      dims.insert(fmt::format("{:03}", probe.head_dim));
      causal = causal || probe.causal;
      bias = bias || probe.bias;
    }
    std::string dim_list;
    for (const std::string& d : dims) {
      if (!dim_list.empty()) dim_list += ' ';
      dim_list += std::to_string(std::stoi(d));
    }
    std::cout << fmt::format("{:<20} dtypes: {}; head dims (of those probed): {}; causal: {}; bias: {}\n", "",
                             dtypes.empty() ? "none" : fmt::format("{}", fmt::join(dtypes, " ")),
                             dim_list.empty() ? "none" : dim_list, causal ? "yes" : "no", bias ? "yes" : "no");
    std::vector<std::string> runs;
    for (const WorkloadProbe& probe : support.workloads) {
      if (probe.refused) {
        reasons.insert(*probe.refused);
      } else {
        runs.push_back(std::string(to_string(probe.workload)));
      }
    }
    std::cout << fmt::format("{:<20} workloads: {}\n", "", runs.empty() ? "dense MHA only" : fmt::format("{}", fmt::join(runs, ", ")));
    std::cout << fmt::format("{:<20} backward: {}\n", "", support.backward ? "no (" + *support.backward + ")" : "yes");
    for (const std::string& why : reasons) std::cout << fmt::format("{:<20} rejects: {}\n", "", why);
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace attnprof
