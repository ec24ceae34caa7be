// Per-case aggregation of what the trace showed, and the run summary that summary.json holds
// (the input of `attnprof check`).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_properties.hpp"
#include "core/roofline.hpp"
#include "core/types.hpp"
#include "reference/gradients.hpp"
#include "trace/model.hpp"

namespace attnprof {

// What a backward case's FLOPs are (summary.json's roofline "flops_counted", the table's note).
inline constexpr const char* kBackwardFlopsNote =
    "backward: 2.5x the forward's exact FLOPs (FlashAttention's convention: five matmuls to the forward's two)";

struct KernelSummary {
  std::string name;
  double per_iter = 0;         // launches per timed iteration
  double gpu_us_per_iter = 0;  // summed duration per timed iteration
  int registers_per_thread = 0;
  std::array<int, 3> grid{};
  std::array<int, 3> block{};
  int shared_bytes = 0;        // static + dynamic
  int local_bytes_per_thread = 0;
  bool occupancy_valid = false;
  int active_blocks_per_sm = 0;
  double theoretical_occupancy_percent = 0;
  std::string occupancy_limiter;
  std::string occupancy_explanation;  // "255 registers (allocated as 256) x 128 threads ... limited by registers"
  std::optional<double> achieved_occupancy_percent;  // the --metrics values (range profiler, replayed forward)
  std::optional<double> dram_throughput_percent;
  std::optional<double> dram_bytes_per_second;
  std::optional<double> tensor_pipe_percent;
  std::string launch_api;
};

// Memcpy grouped by direction, or memset.
struct MemoryOpSummary {
  std::string what;            // "memcpy DtoD", "memset"
  double per_iter = 0;
  double bytes_per_iter = 0;
  double gpu_us_per_iter = 0;  // summed duration per timed iteration
  std::string launch_api;
};

// What a finding is worth to a reader, from the trace: how much of its case's time it explains.
// The findings are ranked by it (summary/finding_groups.hpp).
enum class StakeBasis {
  none,         // nothing measured to weigh it by
  gpu_time,     // `us` of GPU time per iteration; `share_percent` of the case's GPU time per iteration
  host_time,    // `us` of host time per call above the GPU's; `share_percent` of the call's host time
  first_call,   // `us` of host time preparing the first call; `share_percent` of the first call's time
  correctness,  // about the results, not the time (a backward whose bits differ between runs)
};
const char* to_string(StakeBasis basis);
std::optional<StakeBasis> parse_stake_basis(const std::string& text);

struct Stake {
  StakeBasis basis = StakeBasis::none;
  // A cost is time spent on what the finding names (a copy, a conversion, a rebuilt mask, idle
  // SMs, host time above the GPU's), which the case could save; otherwise the time is the scope
  // of a fact that explains a kernel (its occupancy, its launch API), not time lost.
  bool cost = true;
  double us = 0;
  double share_percent = 0;
  double bytes = 0;  // bytes moved, written or avoided, where the finding is about bytes
};
// A memory finding with no time measured weighs its bytes instead (findings.hpp's
// device_memory_stake): basis none, `bytes`, `share_percent` of the case's peak device memory.

struct Finding {
  std::string kind;     // "memcpy_in_iteration", "dtype_conversion", "mask_rebuilt", "low_occupancy",
                        // "register_reallocation", "driver_launch", "host_bound", "communication", ...; a
                        // backward's: docs/config.md
  std::string message;  // one sentence for the table
  nlohmann::json evidence;
  Stake stake = {};
};

struct Surprise {
  std::string expectation;  // "/expect/2"
  std::string field;        // "memcpy_per_iter"
  std::string expected;
  std::string observed;
  std::string note;         // the user's note on the guess, if any
};

// Device memory of a case, from CUPTI's memory records (allocations and releases). Bytes live at
// a moment = what was allocated minus what was released before it, in time order, over the
// case's records; only device memory counts (trace::MemoryActivity::memory_kind "Device" or
// "Array"; pinned or pageable host and managed memory are counted apart).
inline constexpr const char* kUnnamedMemoryRole = "other";

// What one role held and allocated: the backend's name for a buffer ("scores", "workspace",
// "q", ...), kUnnamedMemoryRole where it names none.
struct MemoryRole {
  std::string role;
  std::uint64_t peak_bytes = 0;         // held at the case's peak
  std::uint64_t max_bytes = 0;          // the most it held at once, anywhere in the case
  std::uint64_t plan_bytes = 0;         // allocated in the plan phase
  double iteration_bytes_per_iter = 0;  // allocated inside the timed iterations, per iteration
  std::uint64_t carried_bytes = 0;      // held when the case began, left by earlier cases
};

// Allocations, or releases, inside the timed iterations made by one API for one role.
struct MemoryOperations {
  std::string operation;  // "allocation" or "release" (trace::to_string(MemoryOperation))
  std::string api;        // "cudaMalloc", "cudaFreeAsync", ...; "" when the record does not say
  std::string role;
  double per_iter = 0;
  double bytes_per_iter = 0;
  std::uint64_t largest_bytes = 0;  // the largest single one
  std::vector<std::uint64_t> sizes;  // the sizes of one, those with the most bytes in all first (at most kMemoryOperationSizes)
};
inline constexpr std::size_t kMemoryOperationSizes = 4;

struct CaseMemory {
  // The most device memory live at any moment of the timed iterations, counting what was
  // allocated before them and still held (the plan's buffers); without a timed iteration in the
  // records, the most live at any moment of the case.
  std::uint64_t peak_bytes = 0;
  std::vector<MemoryRole> roles;  // the most held at the peak first; roles held at no time leave none
  // Held when the case began: what earlier cases left allocated (the runner carries it in,
  // trace::MemoryActivity::carried), which the peak counts too.
  std::uint64_t carried_bytes = 0;
  std::uint64_t plan_allocations = 0;
  std::uint64_t plan_bytes = 0;
  double allocations_per_iter = 0;
  double allocation_bytes_per_iter = 0;
  double releases_per_iter = 0;
  double release_bytes_per_iter = 0;
  std::vector<MemoryOperations> in_iterations;  // allocations first, then releases; by bytes
  // Releases of an address no allocation in the case's records made (a trace cut at its start):
  // counted, never subtracted.
  std::uint64_t unmatched_releases = 0;
  std::uint64_t unmatched_release_bytes = 0;
  std::uint64_t other_kind_records = 0;  // records of memory that is not the device's: not in the peak

  const MemoryRole* role(std::string_view name) const;
};

enum class CaseStatus { ok, failed, skipped, interrupted };
const char* to_string(CaseStatus status);
std::optional<CaseStatus> parse_case_status(const std::string& text);

struct CaseSummary {
  std::string label;    // the key `check` matches on
  std::string backend;
  AttentionProblem problem;
  int device = 0;       // the CUDA ordinal the case ran on (`run --devices` spreads cases over GPUs)
  CaseStatus status = CaseStatus::ok;
  std::string reason;   // why failed/skipped/interrupted

  // Verification against the float64 reference.
  bool verified = false;
  bool verify_passed = false;
  double relative_error = 0;
  double error_bound = 0;
  std::int64_t rows_verified = 0;  // output rows compared with the reference
  std::optional<GradientRepeatability> repeatability;  // a verified backward case's run-to-run check

  // CUDA-event timing of the timed iterations.
  int iterations = 0;
  std::vector<double> iteration_us;
  double median_us = 0;
  double p90_us = 0;
  double min_us = 0;
  double tflops = 0;  // attention_flops (exact) / median
  RooflinePoint roofline;  // exact FLOPs, minimum bytes, GB/s, intensity; the roof fractions with the run's roofs

  // What the trace showed per timed iteration.
  double kernels_per_iter = 0;
  double memcpy_per_iter = 0;
  double memcpy_bytes_per_iter = 0;
  double memset_per_iter = 0;
  double memset_bytes_per_iter = 0;
  double gpu_busy_us_per_iter = 0;  // summed kernel/memcpy/memset durations
  std::vector<KernelSummary> kernels;  // by GPU time, largest first: kernels[0] is the dominant one
  std::vector<MemoryOpSummary> memory_ops;
  std::vector<std::string> launch_apis;

  // Host time: the plan (cold, then cached) and enqueueing one iteration.
  std::optional<double> plan_cold_ms;
  std::optional<double> plan_warm_ms;
  double host_enqueue_us_per_iter = 0;

  // Device memory held and allocated; absent when the case's records hold no memory record
  // (a capture without memory activity, an older summary).
  std::optional<CaseMemory> memory;

  std::vector<Finding> findings;
  std::vector<Surprise> surprises;

  const KernelSummary* dominant_kernel() const { return kernels.empty() ? nullptr : &kernels.front(); }
};

struct RunSummary {
  std::string tool_version;
  std::string config_name;
  std::string config_source;
  std::string created_at;  // ISO 8601, UTC
  DeviceProperties device;
  std::string driver_version;
  std::string cuda_runtime_version;
  std::string cupti_version;
  std::string cudnn_version;
  std::optional<Roofs> roofs;  // the device's compute and bandwidth roofs, when known
  trace::CaptureHealth capture;
  bool interrupted = false;
  std::vector<CaseSummary> cases;
};

// Everything the runner knows about one case, handed to the aggregation.
struct CaseMeasurements {
  std::string label;
  std::string backend;
  AttentionProblem problem;
  int iterations = 0;
  std::vector<double> iteration_us;
  std::optional<double> plan_cold_ms;
  std::optional<double> plan_warm_ms;
  double host_enqueue_us_per_iter = 0;
  bool verified = false;
  bool verify_passed = false;
  double relative_error = 0;
  double error_bound = 0;
  std::int64_t rows_verified = 0;
  std::optional<GradientRepeatability> repeatability;
};

// Builds a case's summary from its measurements and the activities the collector tagged with
// its case index (GPU records with phase `iteration` are the ones counted per iteration); the
// kernels carry their occupancy (trace/annotate.hpp).
CaseSummary summarize_case(const CaseMeasurements& measured, const trace::ActivityBatch& activities);

// Median and 90th percentile (nearest rank) of a sample; 0 for an empty one.
double median(std::vector<double> values);
double percentile(std::vector<double> values, double p);

namespace trace {
void to_json(nlohmann::json& j, const CaptureHealth& c);  // the four counts and "complete"
void from_json(const nlohmann::json& j, CaptureHealth& c);
}  // namespace trace

void to_json(nlohmann::json& j, const CaseSummary& c);
void from_json(const nlohmann::json& j, CaseSummary& c);
void to_json(nlohmann::json& j, const RunSummary& r);
void from_json(const nlohmann::json& j, RunSummary& r);

// Several processes' summaries as one: the first one's header, every summary's cases in order
// (labels prefixed "[<label>] " when a label is given), capture counts added, interrupted if
// any was.
struct LabelledSummary {
  std::string label;  // "rank 1", "pid 4242"; empty: the labels stay as they are
  RunSummary summary;
};
RunSummary combine_summaries(const std::vector<LabelledSummary>& parts);

// The exit code of a run, whatever wrote it (one GPU, several, a worker): kExitOk when every case
// ran or was skipped with its reason and nothing was interrupted or lost, kExitPartialFailure
// otherwise. `outputs_complete` false: a process of the run ended without writing its outputs.
int run_exit_code(const RunSummary& summary, bool outputs_complete = true);

// Reads a summary.json (or a gzip-compressed one); throws std::runtime_error naming the file and the problem.
RunSummary load_summary(const std::string& path);
// Writes JSON to `<path>.tmp` and renames it over `path`.
void write_json_atomically(const std::string& path, const nlohmann::json& document);
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace attnprof
