#include "summary/findings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "flash_hopper/register_budget.hpp"
#include "summary/kernel_category.hpp"
#include "summary/memory_findings.hpp"

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

// The GPU time of kernels whose lower-cased name holds one of `needles`, per iteration.
double kernels_us(const CaseSummary& c, std::initializer_list<const char*> needles) {
  double us = 0;
  for (const KernelSummary& k : c.kernels) {
    const std::string name = lower(k.name);
    if (std::any_of(needles.begin(), needles.end(), [&](const char* n) { return contains(name, n); }))
      us += k.gpu_us_per_iter;
  }
  return us;
}

void memory_findings(CaseSummary& c) {
  for (const MemoryOpSummary& op : c.memory_ops) {
    if (op.per_iter <= 0) continue;
    const bool is_memset = op.what == "memset";
    if (is_memset && c.problem.is_backward()) continue;  // workspace_memset says what a backward's are
    c.findings.push_back(
        {is_memset ? "memset_in_iteration" : "memcpy_in_iteration",
         fmt::format("{} {} per iteration moving {:.0f} bytes, issued by {}: {} inside the timed loop", count_text(op.per_iter),
                     op.what, op.bytes_per_iter, op.launch_api.empty() ? "an unknown API call" : op.launch_api,
                     is_memset ? "a fill" : "a copy"),
         {{"what", op.what}, {"per_iter", op.per_iter}, {"bytes_per_iter", op.bytes_per_iter}, {"launch_api", op.launch_api}},
         gpu_time_cost(c, op.gpu_us_per_iter, op.bytes_per_iter)});
  }
}

void conversion_findings(CaseSummary& c) {
  double up = 0, down = 0, us = 0;
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSummary& k : c.kernels) {
    const std::string direction = conversion_direction(k.name);
    // A backward's dQ conversion is its accumulator's (dq_fp32_accumulator), not an upcast of the inputs.
    if (direction.empty() || contains(lower(k.name), "convert_dq")) continue;
    (direction.rfind("fp32", 0) == 0 ? down : up) += k.per_iter;
    us += k.gpu_us_per_iter;
    kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}, {"direction", direction}});
  }
  if (kernels.empty()) return;
  c.findings.push_back({"dtype_conversion",
                        fmt::format("{} upcast and {} downcast kernel(s) per iteration: the inputs are converted to fp32 "
                                    "and the results back, every call",
                                    count_text(up), count_text(down)),
                        {{"kernels", kernels}},
                        gpu_time_cost(c, us)});
}

void mask_findings(CaseSummary& c) {
  nlohmann::json kernels = nlohmann::json::array();
  double us = 0;
  for (const KernelSummary& k : c.kernels) {
    const std::string name = lower(k.name);
    if (!contains(name, "tril") && !contains(name, "triu")) continue;
    kernels.push_back({{"name", k.name}, {"per_iter", k.per_iter}});
    us += k.gpu_us_per_iter;
  }
  if (kernels.empty()) return;
  c.findings.push_back({"mask_rebuilt",
                        fmt::format("the causal mask is rebuilt every iteration ({} per iteration); it depends only on "
                                    "the shape and could be built once",
                                    shorten_name(kernels[0]["name"].get<std::string>())),
                        {{"kernels", kernels}},
                        gpu_time_cost(c, us)});
}

// flash:hopper's kernel in the launch register_budget.hpp describes: it re-splits its registers
// between warpgroups with setmaxnreg after launch, so CUPTI's count is not what its warps run with.
bool reallocates_registers(const KernelSummary& k) {
  return shorten_name(k.name) == kernels::hopper::kHopperKernelName &&
         k.block[0] * k.block[1] * k.block[2] == kernels::hopper::kHopperThreads;
}

void occupancy_findings(CaseSummary& c) {
  const KernelSummary* k = c.dominant_kernel();
  if (k == nullptr || !k->occupancy_valid || k->theoretical_occupancy_percent >= 25.0) return;
  // register_reallocation gives this kernel's occupancy with the count it comes from.
  if (reallocates_registers(*k)) return;
  const bool fused = c.kernels.size() == 1 && c.memcpy_per_iter == 0;
  const bool register_limited = contains(k->occupancy_limiter, "registers");
  // The point first (the terminal prints a finding's start), the arithmetic after it.
  std::string why;
  if (fused && register_limited)
    why = ", the price of keeping the score matrix on chip, not a flaw: one fused kernel keeps its score tile and "
          "output accumulator in registers, so few blocks fit";
  else if (fused)
    why = ": one fused kernel with large tiles trades occupancy for on-chip reuse";
  c.findings.push_back({"low_occupancy",
                        fmt::format("{:.1f}% theoretical occupancy{} ({}: {})", k->theoretical_occupancy_percent, why,
                                    shorten_name(k->name), k->occupancy_explanation),
                        {{"kernel", k->name},
                         {"registers_per_thread", k->registers_per_thread},
                         {"block", k->block},
                         {"shared_bytes", k->shared_bytes},
                         {"active_blocks_per_sm", k->active_blocks_per_sm},
                         {"theoretical_occupancy_percent", k->theoretical_occupancy_percent},
                         {"limiter", k->occupancy_limiter}},
                        gpu_time_scope(c, k->gpu_us_per_iter)});
}

// CUPTI records only the launch's register count, which is what the occupancy is computed from;
// said for the kernel that re-splits its registers (instead of low_occupancy's reading).
void register_reallocation_findings(CaseSummary& c) {
  namespace hopper = kernels::hopper;
  const auto k = std::find_if(c.kernels.begin(), c.kernels.end(), reallocates_registers);
  if (k == c.kernels.end()) return;
  const int threads = k->block[0] * k->block[1] * k->block[2];
  const int consumer_threads = hopper::kConsumerWarpgroups * hopper::kWarpgroupThreads;
  const int launch_per_block = k->registers_per_thread * threads;
  const int split_per_block =
      hopper::kWarpgroupThreads * hopper::kProducerRegisters + consumer_threads * hopper::kConsumerRegisters;
  const int extra = hopper::kConsumerRegisters - k->registers_per_thread;
  const std::string against_trace = extra > 0   ? fmt::format("{} more than", extra)
                                    : extra < 0 ? fmt::format("{} fewer than", -extra)
                                                : std::string("as many as");
  const std::string occupancy =
      k->occupancy_valid
          ? fmt::format("the occupancy shown ({:.1f}%, {} {}/SM, limited by {}) is computed from the launch's count",
                        k->theoretical_occupancy_percent, k->active_blocks_per_sm,
                        k->active_blocks_per_sm == 1 ? "block" : "blocks", k->occupancy_limiter)
          : std::string("an occupancy computed from the trace starts from the launch's count");
  nlohmann::json evidence = {{"kernel", k->name},
                             {"registers_per_thread", k->registers_per_thread},
                             {"block_threads", threads},
                             {"launch_registers_per_block", launch_per_block},
                             {"producer_threads", hopper::kWarpgroupThreads},
                             {"producer_registers", hopper::kProducerRegisters},
                             {"consumer_warpgroups", hopper::kConsumerWarpgroups},
                             {"consumer_threads", consumer_threads},
                             {"consumer_registers", hopper::kConsumerRegisters},
                             {"split_registers_per_block", split_per_block}};
  if (k->occupancy_valid) {
    evidence["active_blocks_per_sm"] = k->active_blocks_per_sm;
    evidence["theoretical_occupancy_percent"] = k->theoretical_occupancy_percent;
    evidence["limiter"] = k->occupancy_limiter;
  }
  c.findings.push_back(
      {"register_reallocation",
       // The point first (the terminal prints a finding's start), then how it comes about.
       fmt::format("the consumers compute with {} registers per thread, {} the trace's {}: {}: CUPTI reports the "
                   "launch's {} registers per thread x {} threads ({} per block), but the kernel re-splits them with "
                   "setmaxnreg: the producer warpgroup ({} threads) runs with {} registers and each of the {} consumer "
                   "warpgroups ({} threads each) with {} ({} per block); {}",
                   hopper::kConsumerRegisters, against_trace, k->registers_per_thread, shorten_name(k->name),
                   k->registers_per_thread, threads, launch_per_block, hopper::kWarpgroupThreads,
                   hopper::kProducerRegisters, hopper::kConsumerWarpgroups, hopper::kWarpgroupThreads,
                   hopper::kConsumerRegisters, split_per_block, occupancy),
       std::move(evidence), gpu_time_scope(c, k->gpu_us_per_iter)});
}

void launch_findings(CaseSummary& c) {
  nlohmann::json kernels = nlohmann::json::array();
  std::string api;
  double us = 0;
  for (const KernelSummary& k : c.kernels) {
    if (k.launch_api.rfind("cu", 0) != 0 || k.launch_api.rfind("cuda", 0) == 0) continue;
    kernels.push_back({{"name", k.name}, {"launch_api", k.launch_api}});
    api = k.launch_api;
    us += k.gpu_us_per_iter;
  }
  if (kernels.empty()) return;
  c.findings.push_back({"driver_launch",
                        fmt::format("{} kernel(s) launched through the driver API ({}), bypassing the CUDA runtime, "
                                    "as libraries with their own module loading do",
                                    kernels.size(), api),
                        {{"kernels", kernels}},
                        gpu_time_scope(c, us)});
}

void host_findings(CaseSummary& c) {
  // An order of magnitude, so a first cudaMalloc of workspace is not reported as a plan cost.
  // The floor keeps a one-off cudaFuncSetAttribute before a 17 us kernel from being called a plan cost.
  constexpr double kHostBoundFactor = 10.0;
  constexpr double kHostBoundFloorMs = 1.0;
  if (c.plan_cold_ms && c.median_us > 0 && *c.plan_cold_ms >= kHostBoundFloorMs &&
      *c.plan_cold_ms * 1000.0 > kHostBoundFactor * c.median_us) {
    c.findings.push_back(
        {"host_plan",
         fmt::format("preparing the first call (plan, handles, workspace) took {:.2f} ms of host time on the first call ({:.3f} ms cached), {:.0f}x the "
                     "{:.1f} us the GPU needs per call: the cost moved to the CPU",
                     *c.plan_cold_ms, c.plan_warm_ms.value_or(0), *c.plan_cold_ms * 1000.0 / c.median_us, c.median_us),
         {{"plan_cold_ms", *c.plan_cold_ms}, {"plan_warm_ms", c.plan_warm_ms.value_or(0)}, {"median_us", c.median_us}},
         first_call_cost(c, *c.plan_cold_ms * 1000.0)});
  }
  // At a toy size every backend's call is shorter than its enqueueing (the table's host column
  // says so for every case); it is a finding where the work is large enough to matter.
  if (c.host_enqueue_us_per_iter > c.median_us && c.median_us > 0 && at_realistic_size(c.problem)) {
    c.findings.push_back({"host_bound",
                          fmt::format("enqueueing one call takes {:.1f} us of host time, more than the {:.1f} us of GPU "
                                      "time: at this size the CPU sets the pace",
                                      c.host_enqueue_us_per_iter, c.median_us),
                          {{"host_enqueue_us_per_iter", c.host_enqueue_us_per_iter}, {"median_us", c.median_us}},
                          host_time_cost(c.host_enqueue_us_per_iter - c.median_us, c.host_enqueue_us_per_iter)});
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
                         {"gpu_busy_us_per_iter", c.gpu_busy_us_per_iter}},
                        gpu_time_cost(c, us)});
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
       {{"kernels", kernels}, {"elements_written", elements}, {"heads", s.heads}, {"heads_kv", s.kv_heads()}},
       gpu_time_cost(c, us, elements * dtype_bytes(c.problem.dtype))});
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
  // The share of the score GEMMs' time spent on the pairs the mask discards.
  const double wasted_us = kernels_us(c, {"gemm", "nvjet"}) * (1 - exact / computed);
  c.findings.push_back(
      {"flops_outside_mask",
       fmt::format("the score GEMMs are dense: {:.0f}% of the FLOPs they compute fall outside the {} mask and are "
                   "masked away afterwards ({:.3g} of {:.3g} GFLOP kept)",
                   100.0 * (1 - exact / computed), mask_label(c.problem), exact / 1e9, computed / 1e9),
       {{"exact_flops", exact}, {"dense_flops", computed}, {"wasted_gemm_us_per_iter", wasted_us}},
       gpu_time_cost(c, wasted_us)});
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
        {"padding_percent", 100.0 * (1 - exact / padded)}},
       // The pad and unpad kernels, and the padding's share of the attention after them.
       gpu_time_cost(c, pads.us + (iteration_gpu_us(c) - pads.us) * (1 - exact / padded))});
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
       {{"kernels", gathers.kernels}, {"bytes_written_per_iter", bytes}, {"page_size", s.page_size}},
       gpu_time_cost(c, gathers.us, bytes)});
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
        {"splits", splits}},
       gpu_time_cost(c, combine.us)});
}

// A stream-K tail (flash's backward, kernels/flash_bwd): a second kernel of one block per SM
// walks the main kernel's last partial wave in equal runs of steps, so that no SM waits a whole
// block time at the end; its share of the time is what the tail costs. Kernels named
// *_tail_kernel are such tails (the idle_sms finding skips their cases).
constexpr const char* kTailKernel = "_tail_kernel";

void stream_k_tail_findings(CaseSummary& c) {
  const NamedKernels tails = kernels_named(c, {kTailKernel});
  const KernelSummary* main = c.dominant_kernel();
  if (tails.kernels.empty() || main == nullptr || contains(lower(main->name), kTailKernel)) return;
  const std::string tail_name = tails.kernels[0]["name"].get<std::string>();
  long long ctas = 0;
  for (const KernelSummary& k : c.kernels)
    if (k.name == tail_name) ctas = static_cast<long long>(k.grid[0]) * k.grid[1] * k.grid[2];
  const double total = c.gpu_busy_us_per_iter > 0 ? c.gpu_busy_us_per_iter : c.median_us;
  const double share = total > 0 ? 100.0 * tails.us / total : 0;
  c.findings.push_back(
      {"stream_k_tail",
       fmt::format("{}'s last partial wave of blocks runs as {}: {} blocks (one per SM) walk those blocks' steps in "
                   "equal runs (stream-K), so no SM waits a whole block time at the end; the tail takes {:.1f} us of "
                   "{:.1f} us per iteration ({:.0f}%)",
                   shorten_name(main->name), shorten_name(tail_name), ctas > 0 ? std::to_string(ctas) : "its",
                   tails.us, total, share),
       {{"main_kernel", main->name}, {"tail_kernels", tails.kernels}, {"tail_blocks", ctas}, {"tail_percent", share}},
       // The tail is the cure for idle SMs, not a cost: its time is what the fact is about.
       gpu_time_scope(c, tails.us)});
}

// ---- A backward's findings: how dQ is accumulated, whether P is stored, what it zeroes ----

// Megabytes, or bytes when fewer than 0.1 MB (a 4-byte memset is not "0.0 MB").
std::string mb_text(double bytes) {
  return bytes < 1e5 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} MB", bytes / 1e6);
}

std::string names_text(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return text;
}

// The memsets of the timed iteration, all together (the accumulator keeps one op for them).
struct Memsets {
  double per_iter = 0, bytes = 0, us = 0;
  std::string launch_api;
};

Memsets memsets_of(const CaseSummary& c) {
  Memsets m;
  for (const MemoryOpSummary& op : c.memory_ops) {
    if (op.what != "memset" || op.per_iter <= 0) continue;
    m.per_iter += op.per_iter;
    m.bytes += op.bytes_per_iter;
    m.us += op.gpu_us_per_iter;
    m.launch_api = op.launch_api;
  }
  return m;
}

// The fp32 buffer a backward that adds partial dQ sums from several key blocks accumulates into:
// batch x heads x seq_q x head_dim x 4 bytes.
double dq_accumulator_bytes(const AttentionShape& s) {
  return 4.0 * s.batch * s.heads * s.seq_q * s.head_dim;
}

// Kernels that hand [seq_q, seq_kv] matrices to each other through memory: score GEMMs and softmax.
NamedKernels score_matrix_kernels(const CaseSummary& c) { return kernels_named(c, {"gemm", "nvjet", "softmax"}); }

// A fused backward: its largest kernel is an attention backward (FlashAttention's bwd, cuDNN's
// bprop, CUTLASS's fmha_cutlassB) and no GEMM, softmax or copy runs beside it, so no
// [seq_q, seq_kv] buffer goes through memory.
bool is_fused_backward(const CaseSummary& c) {
  const KernelSummary* k = c.dominant_kernel();
  if (!c.problem.is_backward() || k == nullptr || c.memcpy_per_iter > 0) return false;
  const std::string name = lower(k->name);
  const bool attention_backward = contains(name, "bwd") || contains(name, "bprop") || contains(name, "cutlassb");
  return attention_backward && score_matrix_kernels(c).kernels.empty();
}

// dQ accumulated in fp32 across key blocks: a buffer zeroed every call and converted at the end
// (FlashAttention-2's and cuDNN's convert_dq kernels), or zeroed before a fused kernel that writes
// dQ itself (CUTLASS's cutlassB and its fill).
void dq_accumulator_findings(CaseSummary& c) {
  if (!c.problem.is_backward()) return;
  const NamedKernels converts = kernels_named(c, {"convert_dq"});
  if (converts.kernels.empty() && !is_fused_backward(c)) return;
  const Memsets all_memsets = memsets_of(c);
  const NamedKernels fills = kernels_named(c, {"fill", "zero"});
  const NamedKernels dot = kernels_named(c, {"dot_do_o"});
  // Memsets far smaller than the accumulator (cuDNN's 4-byte one) are not its zeroing.
  const bool memsets_zero_it = all_memsets.bytes >= 0.5 * dq_accumulator_bytes(c.problem.shape);
  const Memsets memsets = memsets_zero_it ? all_memsets : Memsets{};
  std::vector<std::string> steps;
  if (memsets.per_iter > 0)
    steps.push_back(fmt::format("{} memset(s) of {} in all", count_text(memsets.per_iter), mb_text(memsets.bytes)));
  if (!fills.kernels.empty())
    steps.push_back(fmt::format("{} fill kernel(s), {}", count_text(fills.per_iter),
                                shorten_name(fills.kernels[0]["name"].get<std::string>())));
  const double zeroing_us = memsets.us + fills.us;
  const double total = iteration_gpu_us(c);
  const double bytes = dq_accumulator_bytes(c.problem.shape);
  const AttentionShape& s = c.problem.shape;
  const std::string size = fmt::format("{} = {}x{}x{}x{} x 4 bytes", mb_text(bytes), s.batch, s.heads, s.seq_q, s.head_dim);
  nlohmann::json evidence = {{"accumulator_bytes", bytes},
                             {"convert_kernels", converts.kernels},
                             {"fill_kernels", fills.kernels},
                             {"memsets_per_iter", memsets.per_iter},
                             {"memset_bytes_per_iter", memsets.bytes},
                             {"zeroing_us_per_iter", zeroing_us},
                             {"convert_us_per_iter", converts.us},
                             {"gpu_us_per_iter", total}};
  if (converts.kernels.empty()) {
    // A fused kernel that writes dQ itself: only an explicit zeroing step says it accumulates.
    if (steps.empty()) return;
    const double share = total > 0 ? 100.0 * zeroing_us / total : 0;
    evidence["share_percent"] = share;
    c.findings.push_back(
        {"dq_fp32_accumulator",
         fmt::format("the fused backward zeroes a buffer every call ({}) before {}: most likely the fp32 accumulator its "
                     "key blocks add partial dQ sums into ({}), which the last one writes out in {}; the zeroing takes "
                     "{:.1f} us of {:.1f} us per iteration ({:.1f}%)",
                     names_text(steps), shorten_name(c.dominant_kernel()->name), size, to_string(c.problem.dtype),
                     zeroing_us, total, share),
         std::move(evidence), gpu_time_cost(c, zeroing_us, memsets.bytes)});
    return;
  }
  std::string zeroing = names_text(steps);
  const std::string no_step = all_memsets.per_iter > 0
                                  ? fmt::format("its {} memset(s) of {} are too small to be it",
                                                count_text(all_memsets.per_iter), mb_text(all_memsets.bytes))
                                  : std::string("no memset or fill in the iteration");
  if (steps.empty() && !dot.kernels.empty()) {
    zeroing = fmt::format("inside a kernel, most likely {} beside D = rowsum(dO o O): {}",
                          shorten_name(dot.kernels[0]["name"].get<std::string>()), no_step);
    evidence["zeroed_in_kernel"] = dot.kernels[0]["name"];
  } else if (steps.empty()) {
    zeroing = "inside a kernel: " + no_step;
  }
  const double us = converts.us + zeroing_us;
  const double share = total > 0 ? 100.0 * us / total : 0;
  evidence["share_percent"] = share;
  c.findings.push_back(
      {"dq_fp32_accumulator",
       fmt::format("dQ is accumulated in an fp32 buffer ({}), zeroed every call ({}) and converted to {} at the end by "
                   "{}: {} {:.1f} us of {:.1f} us per iteration ({:.1f}%)",
                   size, zeroing, to_string(c.problem.dtype), shorten_name(converts.kernels[0]["name"].get<std::string>()),
                   zeroing_us > 0 ? "zeroing and converting it take" : "converting it takes", us, total, share),
       std::move(evidence), gpu_time_cost(c, us, bytes)});
}

// The run-to-run check of the verification (GradientRepeatability): said only when bits differ.
void repeatability_findings(CaseSummary& c) {
  if (!c.repeatability || c.repeatability->deterministic().value_or(true)) return;
  const GradientRepeatability& r = *c.repeatability;
  std::vector<std::string> differing, identical, counts;
  nlohmann::json tensors = nlohmann::json::object();
  for (std::size_t t = 0; t < kGradientNames.size(); ++t) {
    (r.differing[t] > 0 ? differing : identical).push_back(kGradientNames[t]);
    if (r.differing[t] > 0) counts.push_back(fmt::format("{} {} of {}", kGradientNames[t], r.differing[t], r.elements[t]));
    tensors[kGradientNames[t]] = {{"elements", r.elements[t]}, {"differing", r.differing[t]}};
  }
  c.findings.push_back(
      {"backward_nondeterministic",
       fmt::format("{} {} bitwise between two runs of the backward on the same inputs: {} of {} elements ({}{}{}); it "
                   "accumulates with atomics whose order varies from run to run, so its gradients are not reproducible "
                   "bit for bit",
                   names_text(differing), differing.size() == 1 ? "differs" : "differ", r.total_differing(),
                   r.total_elements(), names_text(counts), identical.empty() ? "" : "; identical: ", names_text(identical)),
       {{"deterministic", false},
        {"differing_elements", r.total_differing()},
        {"elements", r.total_elements()},
        {"tensors", tensors}},
       Stake{StakeBasis::correctness, true, 0, 0, 0}});
}

// P in the backward: recomputed from the forward's logsumexp by a fused kernel, or passed through
// memory as full [seq_q, seq_kv] matrices by GEMMs and softmax kernels.
void score_matrix_findings(CaseSummary& c) {
  if (!c.problem.is_backward()) return;
  const AttentionShape& s = c.problem.shape;
  const double elements = static_cast<double>(s.batch) * s.heads * s.seq_q * s.seq_kv;
  const std::string matrix = fmt::format("{}x{}x{}x{}", s.batch, s.heads, s.seq_q, s.seq_kv);
  if (is_fused_backward(c)) {
    const double bytes = elements * dtype_bytes(c.problem.dtype), fp32_bytes = elements * 4.0;
    const double lse_bytes = 4.0 * s.batch * s.heads * s.seq_q;
    const std::string kernel = c.dominant_kernel()->name;
    c.findings.push_back(
        {"p_recomputed",
         fmt::format("{} recomputes P = exp(QK^T * scale - lse) tile by tile from the forward's saved logsumexp ({}) "
                     "instead of storing it: the {} matrix P never reaches memory, {:.2f} GB at {} ({:.2f} GB in fp32) "
                     "not written by the forward nor read back here, for the price of the QK^T matmul done again",
                     shorten_name(kernel), mb_text(lse_bytes), matrix, bytes / 1e9, to_string(c.problem.dtype),
                     fp32_bytes / 1e9),
         {{"kernel", kernel},
          {"score_elements", elements},
          {"bytes_avoided", bytes},
          {"bytes_avoided_fp32", fp32_bytes},
          {"lse_bytes", lse_bytes}},
         // Bytes avoided at no time measured here: a fact about the kernel, weighed by its time.
         gpu_time_scope(c, c.dominant_kernel()->gpu_us_per_iter, bytes)});
    return;
  }
  const NamedKernels kernels = score_matrix_kernels(c);
  if (kernels.kernels.empty()) return;
  // Inputs upcast to fp32 (math): its matrices are fp32 too.
  const bool upcast = std::any_of(c.kernels.begin(), c.kernels.end(), [](const KernelSummary& k) {
    return conversion_direction(k.name).ends_with("->fp32");
  });
  const int width = upcast ? 4 : dtype_bytes(c.problem.dtype);
  const double bytes = elements * width;
  c.findings.push_back(
      {"scores_materialised",
       fmt::format("the backward materialises the {} score matrices: {} GEMM/softmax kernel(s) per iteration ({:.1f} "
                   "us) pass P, dP and dS through memory, {:.2f} GB each in {}; a fused backward recomputes P from the "
                   "logsumexp and keeps them on chip",
                   matrix, count_text(kernels.per_iter), kernels.us, bytes / 1e9, upcast ? "fp32" : to_string(c.problem.dtype)),
       {{"kernels", kernels.kernels}, {"score_elements", elements}, {"bytes_per_matrix", bytes}},
       gpu_time_cost(c, kernels.us, bytes)});
}

// Memsets inside a backward's iteration: workspace or accumulator zeroing, paid on every call.
void workspace_memset_findings(CaseSummary& c) {
  if (!c.problem.is_backward()) return;
  const Memsets memsets = memsets_of(c);
  if (memsets.per_iter <= 0) return;
  const double accumulator = dq_accumulator_bytes(c.problem.shape);
  // Equal, or a little larger where the library pads its rows.
  const bool like_accumulator = memsets.bytes >= accumulator && memsets.bytes <= 1.25 * accumulator;
  c.findings.push_back(
      {"workspace_memset",
       fmt::format("{} memset(s) per iteration inside the backward, {} in all ({:.1f} us), issued by {}: workspace or "
                   "accumulator zeroing paid on every call{}",
                   count_text(memsets.per_iter), mb_text(memsets.bytes), memsets.us,
                   memsets.launch_api.empty() ? "an unknown API call" : memsets.launch_api,
                   like_accumulator ? fmt::format(", the size of the fp32 dQ accumulator ({})", mb_text(accumulator)) : ""),
       {{"per_iter", memsets.per_iter},
        {"bytes_per_iter", memsets.bytes},
        {"gpu_us_per_iter", memsets.us},
        {"launch_api", memsets.launch_api},
        {"dq_accumulator_bytes", accumulator}},
       gpu_time_cost(c, memsets.us, memsets.bytes)});
}

}  // namespace

double iteration_gpu_us(const CaseSummary& c) { return c.gpu_busy_us_per_iter > 0 ? c.gpu_busy_us_per_iter : c.median_us; }

Stake gpu_time_cost(const CaseSummary& c, double us, double bytes) {
  const double total = iteration_gpu_us(c);
  return {StakeBasis::gpu_time, true, us, total > 0 ? std::min(100.0, 100.0 * us / total) : 0, bytes};
}

Stake gpu_time_scope(const CaseSummary& c, double us, double bytes) {
  Stake stake = gpu_time_cost(c, us, bytes);
  stake.cost = false;
  return stake;
}

Stake host_time_cost(double above_gpu_us, double host_us) {
  return {StakeBasis::host_time, true, above_gpu_us, host_us > 0 ? std::min(100.0, 100.0 * above_gpu_us / host_us) : 0,
          0};
}

Stake first_call_cost(const CaseSummary& c, double host_us) {
  const double first_call = host_us + c.median_us;
  return {StakeBasis::first_call, true, host_us, first_call > 0 ? 100.0 * host_us / first_call : 0, 0};
}

Stake device_memory_stake(const CaseSummary& c, double bytes, bool cost) {
  const double peak = c.memory ? static_cast<double>(c.memory->peak_bytes) : 0;
  return {StakeBasis::none, cost, 0, peak > 0 ? std::min(100.0, 100.0 * bytes / peak) : 0, bytes};
}

bool is_memory_stake(const Stake& stake) { return stake.basis == StakeBasis::none && stake.bytes > 0; }

bool at_realistic_size(const AttentionProblem& problem) {
  constexpr double kRealisticFlops = 1e9;
  constexpr double kRealisticBytes = 16e6;
  return attention_flops(problem) >= kRealisticFlops || attention_min_bytes(problem) >= kRealisticBytes;
}

bool has_stream_k_tail(const CaseSummary& c) { return !kernels_named(c, {kTailKernel}).kernels.empty(); }

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
  add_device_memory_findings(c);
  conversion_findings(c);
  grouped_heads_findings(c);
  masked_dense_findings(c);
  padded_batch_findings(c);
  gathered_pages_findings(c);
  split_kv_findings(c);
  stream_k_tail_findings(c);
  dq_accumulator_findings(c);
  workspace_memset_findings(c);
  score_matrix_findings(c);
  repeatability_findings(c);
  mask_findings(c);
  occupancy_findings(c);
  register_reallocation_findings(c);
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
          {"ratio", ratio}},
         // A comparison between cases, whose time the table already shows.
         Stake{StakeBasis::none, false, 0, 0, 0}});
  }
}

}  // namespace attnprof
