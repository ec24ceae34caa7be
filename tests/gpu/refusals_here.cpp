#include "refusals_here.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "backends/cudnn_info.hpp"
#include "gpu/device_info.hpp"

namespace attnprof::test {

const MachineFacts& machine_here() {
  static const MachineFacts facts = [] {
    const DeviceProperties d = query_device_properties(0);
    MachineFacts m;
    m.compute_major = d.compute_major;
    m.compute_minor = d.compute_minor;
    m.shared_mem_per_block_optin = d.shared_mem_per_block_optin;
    m.cudnn_version = cudnn_runtime_version_number();
    return m;
  }();
  return facts;
}

const BackendSupport& support_here(const std::string& name, int head_dim) {
  static std::map<std::string, BackendSupport> tables;
  const BackendInfo* info = find_backend(name);
  if (info == nullptr) throw std::invalid_argument("no registered backend named " + name);
  const DeviceProperties device = query_device_properties(0);
  auto found = tables.find(name);
  if (found == tables.end()) found = tables.emplace(name, probe_backend_support(*info, device)).first;
  BackendSupport& table = found->second;
  // A head dim the inventory does not list (a case's d36): its probes, asked the same way.
  const bool probed = std::any_of(table.problems.begin(), table.problems.end(),
                                  [&](const ProblemProbe& p) { return p.head_dim == head_dim; });
  if (!probed) {
    const BackendSupport more = probe_backend_support(*info, device, {head_dim});
    table.problems.insert(table.problems.end(), more.problems.begin(), more.problems.end());
  }
  return table;
}

std::optional<RefusalVerdict> device_refusal_here(const std::string& name, const AttentionBackend& backend) {
  const Unsupported refusal = backend.check_device(query_device_properties(0));
  if (!refusal) return std::nullopt;
  return judge_device_refusal(name, *refusal, machine_here());
}

std::optional<RefusalVerdict> case_refusal_here(const std::string& name, const AttentionProblem& problem,
                                                const std::string& case_label, const Unsupported& refusal) {
  if (!refusal) return std::nullopt;
  return judge_case_refusal(support_here(name, problem.shape.head_dim), problem, case_label, *refusal,
                            machine_here());
}

}  // namespace attnprof::test
