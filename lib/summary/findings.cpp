#include "summary/findings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "summary/kernel_category.hpp"

namespace attnprof {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return text;
}

bool contains(const std::string& haystack, const char* needle) { return haystack.find(needle) != std::string::npos; }

std::string count_text(double per_iter) {
  return std::abs(per_iter - std::round(per_iter)) < 1e-9 ? fmt::format("{:.0f}", per_iter)
                                                         : fmt::format("{:.2f}", per_iter);
}

// The 16-bit type a conversion kernel's name mentions, as our dtype names.
std::string half_type_in(const std::string& name) {
  if (contains(name, "bfloat16")) return "bf16";
  if (contains(name, "half") || contains(name, "__half")) return "fp16";
  return "";
}

void memory_findings(CaseSummary& c) {
  for (const MemoryOpSummary& op : c.memory_ops) {
    if (op.per_iter <= 0) continue;
    const bool is_memset = op.what == "memset";
    c.findings.push_back(
        {is_memset ? "memset_in_iteration" : "memcpy_in_iteration",
         fmt::format("{} {} per iteration moving {:.0f} bytes, issued by {}: {} inside the timed loop", count_text(op.per_iter),
                     op.what, op.bytes_per_iter, op.launch_api.empty() ? "an unknown API call" : op.launch_api,
                     is_memset ? "a fill" : "a copy"),
         {{"what", op.what}, {"per_iter", op.per_iter}, {"bytes_per_iter", op.bytes_per_iter}, {"launch_api", op.launch_api}}});
  }
}

void conversion_findings(CaseSummary& c) {
  double up = 0, down = 0;
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSummary& k : c.kernels) {
    const std::string direction = conversion_direction(k.name);
    if (direction.empty()) continue;
    (direction.rfind("fp32", 0) == 0 ? down : up) += k.per_iter;
    kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}, {"direction", direction}});
  }
  if (kernels.empty()) return;
  c.findings.push_back({"dtype_conversion",
                        fmt::format("{} upcast and {} downcast kernel(s) per iteration: the inputs are converted to fp32 "
                                    "and the results back, every call",
                                    count_text(up), count_text(down)),
                        {{"kernels", kernels}}});
}

void mask_findings(CaseSummary& c) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSummary& k : c.kernels) {
    const std::string name = lower(k.name);
    if (contains(name, "tril") || contains(name, "triu")) kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}});
  }
  if (kernels.empty()) return;
  c.findings.push_back({"mask_rebuilt",
                        fmt::format("the causal mask is rebuilt every iteration ({} per iteration); it depends only on "
                                    "the shape and could be built once",
                                    shorten_name(kernels[0]["name"].get<std::string>())),
                        {{"kernels", kernels}}});
}

void occupancy_findings(CaseSummary& c) {
  const KernelSummary* k = c.dominant_kernel();
  if (k == nullptr || !k->occupancy_valid || k->theoretical_occupancy_percent >= 25.0) return;
  const bool fused = c.kernels.size() == 1 && c.memcpy_per_iter == 0;
  const bool register_limited = contains(k->occupancy_limiter, "registers");
  std::string why;
  if (fused && register_limited)
    why = "; one fused kernel keeps its score tile and output accumulator in registers, so few blocks fit: the price of "
          "keeping the score matrix on chip, not a flaw";
  else if (fused)
    why = "; one fused kernel with large tiles trades occupancy for on-chip reuse";
  c.findings.push_back({"low_occupancy",
                        fmt::format("{}: {}{}", shorten_name(k->name), k->occupancy_explanation, why),
                        {{"kernel", k->name},
                         {"registers_per_thread", k->registers_per_thread},
                         {"block", k->block},
                         {"shared_bytes", k->shared_bytes},
                         {"active_blocks_per_sm", k->active_blocks_per_sm},
                         {"theoretical_occupancy_percent", k->theoretical_occupancy_percent},
                         {"limiter", k->occupancy_limiter}}});
}

void launch_findings(CaseSummary& c) {
  nlohmann::json kernels = nlohmann::json::array();
  std::string api;
  for (const KernelSummary& k : c.kernels) {
    if (k.launch_api.rfind("cu", 0) != 0 || k.launch_api.rfind("cuda", 0) == 0) continue;
    kernels.push_back({{"name", k.name}, {"launch_api", k.launch_api}});
    api = k.launch_api;
  }
  if (kernels.empty()) return;
  c.findings.push_back({"driver_launch",
                        fmt::format("{} kernel(s) launched through the driver API ({}), bypassing the CUDA runtime, "
                                    "as libraries with their own module loading do",
                                    kernels.size(), api),
                        {{"kernels", kernels}}});
}

void host_findings(CaseSummary& c) {
  // An order of magnitude, so a first cudaMalloc of workspace is not reported as a plan cost.
  // The floor keeps a one-off cudaFuncSetAttribute before a 17 us kernel from being called a plan cost.
  constexpr double kHostBoundFactor = 10.0;
  constexpr double kHostBoundFloorMs = 1.0;
  if (c.plan_cold_ms && c.median_us > 0 && *c.plan_cold_ms >= kHostBoundFloorMs &&
      *c.plan_cold_ms * 1000.0 > kHostBoundFactor * c.median_us) {
    c.findings.push_back(
        {"host_bound",
         fmt::format("preparing the first call (plan, handles, workspace) took {:.2f} ms of host time on the first call ({:.3f} ms cached), {:.0f}x the "
                     "{:.1f} us the GPU needs per call: the cost moved to the CPU",
                     *c.plan_cold_ms, c.plan_warm_ms.value_or(0), *c.plan_cold_ms * 1000.0 / c.median_us, c.median_us),
         {{"plan_cold_ms", *c.plan_cold_ms}, {"plan_warm_ms", c.plan_warm_ms.value_or(0)}, {"median_us", c.median_us}}});
  }
  if (c.host_enqueue_us_per_iter > c.median_us && c.median_us > 0) {
    c.findings.push_back({"host_bound",
                          fmt::format("enqueueing one call takes {:.1f} us of host time, more than the {:.1f} us of GPU "
                                      "time: at this size the CPU sets the pace",
                                      c.host_enqueue_us_per_iter, c.median_us),
                          {{"host_enqueue_us_per_iter", c.host_enqueue_us_per_iter}, {"median_us", c.median_us}}});
  }
}

// Collectives in the iteration (NCCL): how many, and how much of the GPU time they hold. A
// collective's kernel waits on the GPU for the slowest rank, so its time is skew plus transfer.
void communication_findings(CaseSummary& c) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSummary& k : c.kernels)
    if (is_communication_kernel(k.name))
      kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}, {"gpu_us_per_iter", k.gpu_us_per_iter}});
  if (kernels.empty()) return;
  const double count = communication_kernels_per_iter(c);
  const double us = communication_us_per_iter(c);
  const double share = c.gpu_busy_us_per_iter > 0 ? 100.0 * us / c.gpu_busy_us_per_iter : 0;
  c.findings.push_back({"communication",
                        fmt::format("{} communication (NCCL) kernel(s) per iteration ({}) take {:.1f} us, {:.0f}% of the "
                                    "iteration's GPU busy time; a collective's kernel also waits for the slowest rank, "
                                    "so compare its time across ranks before calling it bandwidth",
                                    count_text(count), shorten_name(kernels[0]["name"].get<std::string>()), us, share),
                        {{"kernels", kernels},
                         {"communication_kernels_per_iter", count},
                         {"communication_us_per_iter", us},
                         {"gpu_busy_us_per_iter", c.gpu_busy_us_per_iter}}});
}

// Grouped-query attention done by copying: K and V repeated into every query head each call
// (PyTorch's enable_gqa math path, the hand-written version), where a GQA kernel reads them in place.
void grouped_heads_findings(CaseSummary& c) {
  if (c.problem.shape.kv_heads() == c.problem.shape.heads) return;
  double copies = 0, us = 0;
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSummary& k : c.kernels) {
    const std::string name = lower(k.name);
    if (!contains(name, "repeat_interleave") && !contains(name, "repeat")) continue;
    copies += k.per_iter;
    us += k.gpu_us_per_iter;
    kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}, {"gpu_us_per_iter", k.gpu_us_per_iter}});
  }
  if (kernels.empty()) return;
  const AttentionShape& s = c.problem.shape;
  const double elements = 2.0 * s.batch * s.heads * s.seq_kv * s.head_dim;  // K and V, one copy per query head
  c.findings.push_back(
      {"kv_materialised",
       fmt::format("K and V are repeated from {} into {} heads every call: {} copy kernel(s) per iteration writing {:.3g} "
                   "M elements ({:.1f} us); a grouped-query kernel reads the {} K/V heads in place",
                   s.kv_heads(), s.heads, count_text(copies), elements / 1e6, us, s.kv_heads()),
       {{"kernels", kernels}, {"elements_written", elements}, {"heads", s.heads}, {"heads_kv", s.kv_heads()}}});
}

// A mask applied after dense score GEMMs: the GEMMs compute every (row, key) pair, the mask then
// throws away those outside it (math and the hand-written version; fused kernels skip the tiles).
void masked_dense_findings(CaseSummary& c) {
  if (!c.problem.causal && !c.problem.window.bounded()) return;
  bool dense_gemm = false;
  for (const KernelSummary& k : c.kernels) {
    const std::string name = lower(k.name);
    dense_gemm = dense_gemm || contains(name, "gemm") || contains(name, "nvjet");
  }
  if (!dense_gemm) return;
  AttentionProblem dense = c.problem;
  dense.causal = false;
  dense.window = {};
  const double exact = attention_flops(c.problem), computed = attention_flops(dense);
  if (computed <= 0 || exact / computed > 0.9) return;
  c.findings.push_back(
      {"flops_outside_mask",
       fmt::format("the score GEMMs are dense: {:.0f}% of the FLOPs they compute fall outside the {} mask and are "
                   "masked away afterwards ({:.3g} of {:.3g} GFLOP kept)",
                   100.0 * (1 - exact / computed), mask_label(c.problem), exact / 1e9, computed / 1e9),
       {{"exact_flops", exact}, {"dense_flops", computed}}});
}

// Kernels of the case whose lower-cased name holds `needle`: how many per iteration and their time.
struct NamedKernels {
  double per_iter = 0;
  double us = 0;
  nlohmann::json kernels = nlohmann::json::array();
};

NamedKernels kernels_named(const CaseSummary& c, std::initializer_list<const char*> needles) {
  NamedKernels found;
  for (const KernelSummary& k : c.kernels) {
    const std::string name = lower(k.name);
    if (std::none_of(needles.begin(), needles.end(), [&](const char* n) { return contains(name, n); })) continue;
    found.per_iter += k.per_iter;
    found.us += k.gpu_us_per_iter;
    found.kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}, {"gpu_us_per_iter", k.gpu_us_per_iter}});
  }
  return found;
}

// A ragged batch padded to its longest sequence before a dense path (what a plain PyTorch
// program does): every sequence is computed at the maximum lengths.
void padded_batch_findings(CaseSummary& c) {
  if (!c.problem.shape.ragged()) return;
  const NamedKernels pads = kernels_named(c, {"pad_ragged"});
  if (pads.kernels.empty()) return;
  const double exact = attention_flops(c.problem), padded = attention_padded_flops(c.problem);
  if (padded <= 0) return;
  c.findings.push_back(
      {"padded_batch",
       fmt::format("the ragged batch is padded to its longest sequence ({} pad/unpad kernel(s) per iteration, {:.1f} us): "
                   "{:.0f}% of the attention FLOPs go to padding ({:.3g} of {:.3g} GFLOP are the sequences' own); a "
                   "packed kernel computes only the real tokens",
                   count_text(pads.per_iter), pads.us, 100.0 * (1 - exact / padded), exact / 1e9, padded / 1e9),
       {{"kernels", pads.kernels}, {"exact_flops", exact}, {"padded_flops", padded},
        {"padding_percent", 100.0 * (1 - exact / padded)}}});
}

// A paged cache copied into a contiguous K and V before attention, every call.
void gathered_pages_findings(CaseSummary& c) {
  const AttentionShape& s = c.problem.shape;
  if (!s.paged()) return;
  const NamedKernels gathers = kernels_named(c, {"gather_paged_kv"});
  if (gathers.kernels.empty()) return;
  const double bytes = 2.0 * s.batch * s.kv_heads() * s.seq_kv * s.head_dim * dtype_bytes(c.problem.dtype);
  c.findings.push_back(
      {"pages_gathered",
       fmt::format("the paged K/V cache (pages of {} tokens) is gathered into a contiguous copy before attention every "
                   "call: {} kernel(s) per iteration writing {:.1f} MB ({:.1f} us); a paged kernel reads the pages in "
                   "place through the block table",
                   s.page_size, count_text(gathers.per_iter), bytes / 1e6, gathers.us),
       {{"kernels", gathers.kernels}, {"bytes_written_per_iter", bytes}, {"page_size", s.page_size}}});
}

// Split-KV decode: the keys of each K/V head spread over several blocks, then a combine kernel
// merges their partial outputs; its share of the time is what the split costs.
void split_kv_findings(CaseSummary& c) {
  const NamedKernels combine = kernels_named(c, {"combine"});
  const NamedKernels split = kernels_named(c, {"splitkv", "split_kv"});
  if (combine.kernels.empty() || split.kernels.empty()) return;
  const double total = c.gpu_busy_us_per_iter > 0 ? c.gpu_busy_us_per_iter : combine.us + split.us;
  const double share = total > 0 ? 100.0 * combine.us / total : 0;
  const std::string split_name = split.kernels[0]["name"].get<std::string>();
  int splits = 0;
  for (const KernelSummary& k : c.kernels)
    if (k.name == split_name) splits = k.grid[0];
  c.findings.push_back(
      {"split_kv_combine",
       fmt::format("split-KV decode: {} spreads each K/V head's keys over {} blocks{} and {} merges their partial "
                   "outputs: the combine takes {:.1f} us of {:.1f} us per iteration ({:.0f}%)",
                   shorten_name(split_name), splits > 0 ? std::to_string(splits) : std::string("several"),
                   splits > 0 ? " (grid.x)" : "", shorten_name(combine.kernels[0]["name"].get<std::string>()), combine.us,
                   total, share),
       {{"split_kernels", split.kernels}, {"combine_kernels", combine.kernels}, {"combine_percent", share},
        {"splits", splits}}});
}

}  // namespace

std::string shorten_name(const std::string& name) {
  std::string text = name;
  for (const std::string noise : {"(anonymous namespace)::", "void "})
    for (auto at = text.find(noise); at != std::string::npos; at = text.find(noise)) text.erase(at, noise.size());
  // Kernel names carry long template argument lists; the part before '<' or '(' names it.
  text = text.substr(0, text.find_first_of("<("));
  const auto scope = text.rfind("::");
  return scope == std::string::npos ? text : text.substr(scope + 2);
}

std::string conversion_direction(const std::string& kernel_name) {
  const std::string name = lower(kernel_name);
  const bool conversion_kernel = contains(name, "convert") || contains(name, "direct_copy") ||
                                 contains(name, "bfloat16_copy") || contains(name, "half_copy");
  if (!conversion_kernel) return "";
  const std::string half = half_type_in(name);
  if (half.empty()) return "";
  // Our kernels: convert_kernel<In, Out>; the first type listed is the source.
  const auto half_at = std::min(name.find("bfloat16"), name.find("half"));
  // "float" as a type, not the tail of "bfloat16".
  auto float_at = name.find("float");
  while (float_at != std::string::npos && float_at > 0 && name[float_at - 1] == 'b') float_at = name.find("float", float_at + 1);
  if (float_at == std::string::npos) return "";
  return half_at < float_at ? half + "->fp32" : "fp32->" + half;
}

void add_findings(CaseSummary& c) {
  if (c.status != CaseStatus::ok) return;
  memory_findings(c);
  conversion_findings(c);
  grouped_heads_findings(c);
  masked_dense_findings(c);
  padded_batch_findings(c);
  gathered_pages_findings(c);
  split_kv_findings(c);
  mask_findings(c);
  occupancy_findings(c);
  launch_findings(c);
  host_findings(c);
  communication_findings(c);
}

void add_run_findings(RunSummary& summary) {
  constexpr const char* kRatio = "backward_forward_ratio";
  for (CaseSummary& c : summary.cases)
    std::erase_if(c.findings, [&](const Finding& f) { return f.kind == kRatio; });
  auto timed = [](const CaseSummary& c) { return c.status == CaseStatus::ok && c.median_us > 0; };
  for (CaseSummary& backward : summary.cases) {
    if (!backward.problem.is_backward() || !timed(backward)) continue;
    AttentionProblem forward_problem = backward.problem;
    forward_problem.pass = AttentionPass::forward;
    const auto forward = std::find_if(summary.cases.begin(), summary.cases.end(), [&](const CaseSummary& c) {
      return timed(c) && c.backend == backward.backend && c.problem == forward_problem;
    });
    if (forward == summary.cases.end()) continue;
    const double ratio = backward.median_us / forward->median_us;
    backward.findings.push_back(
        {kRatio,
         fmt::format("the backward takes {:.2f}x the forward's time ({:.1f} us against {:.1f} us; it counts {:.1f}x "
                     "the FLOPs)",
                     ratio, backward.median_us, forward->median_us, pass_flop_factor(AttentionPass::backward)),
         {{"forward_case", forward->label},
          {"forward_median_us", forward->median_us},
          {"backward_median_us", backward.median_us},
          {"ratio", ratio}}});
  }
}

}  // namespace attnprof
