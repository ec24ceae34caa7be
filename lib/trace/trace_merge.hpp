// Several processes' traces merged into one Chrome trace: the ranks of a torchrun / mpirun job
// (`attnprof merge`), or the per-GPU workers of `attnprof run --devices`. Each input is streamed
// with the reader and written with the streaming writer, so memory stays flat however large
// the traces are; only ids and names are remapped:
// - process tracks: every input keeps its own. Host: the input's OS pid (a fresh pid from 2^30
//   up when two inputs share one, or it is one of the GPU pids: s*1000 + d for d below 16 or
//   the slot's largest listed device); GPU d of the input in slot s: pid s*1000 + d, named
//   "<label> / GPU d: <name>".
// - clocks: every input's ts is made absolute with its own baseTimeNanoseconds and written
//   relative to the earliest one. All of them are CUPTI timestamps (CLOCK_REALTIME-based), so
//   processes on one host share the clock; across hosts the result is only as aligned as the
//   hosts' clocks (NTP/PTP) are.
// - flows and correlation ids: both repeat across processes, so each input's ac2g ids move to a
//   range of their own (input i: i * 2^32 + id), and its args.correlation follow the previous
//   inputs' (plus the sum of their largest ids + 1), where `report` joins GPU work to launches.
// - cases: each input's case indices follow the previous inputs' (its labels prefixed with
//   "[<label>] "), or, for a run's workers, all inputs index one shared list of cases.
// - memory: each input's "[memory]" events keep their process and device as the other events
//   do, and the merged trace's "device memory in use" tracks (one per GPU of each input) are
//   written afresh from them; the inputs' own counter events are not copied.
// Events the model does not hold (Kineto's cpu_op, python_function, counters) are not carried.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_properties.hpp"
#include "trace/chrome_trace_writer.hpp"

namespace attnprof::trace {

// What the start of a trace says about the process that wrote it: the header values before
// traceEvents, and its host process as its "M" events name it (ours lead the events, Kineto's
// follow them all).
struct TraceHead {
  std::filesystem::path path;
  std::optional<std::uint64_t> base_time_ns;
  std::vector<DeviceProperties> devices;
  std::optional<int> rank;                  // distributedInfo.rank
  std::optional<std::uint32_t> host_process;
  std::string host_process_name;
};

// Reads the head of the trace, plain or gzip: up to its first event that is not "M" when the
// leading "M" events name the host, otherwise on through the rest of its "M" events.
TraceHead read_trace_head(const std::filesystem::path& path);

// GPU pids of the input in slot s are s * kGpuPidsPerSlot + device.
inline constexpr std::uint32_t kGpuPidsPerSlot = 1000;

struct MergeInput {
  TraceHead head;
  std::string label;      // "rank 1", "pid 4242"; empty for a run's workers: names stay as they are
  std::uint32_t slot = 0;  // GPU pids and Perfetto's order; run workers all share slot 0
};

// What the merge did with one input.
struct MergedInput {
  std::filesystem::path path;
  std::string label;
  std::uint32_t host_pid = 0;      // in the merged trace
  std::optional<std::uint32_t> original_host_pid;
  std::uint32_t gpu_pid_base = 0;  // GPU d -> gpu_pid_base + d
  std::int64_t clock_shift_ns = 0;  // its baseTimeNanoseconds minus the merged one
  int first_case = 0;              // its case indices in the merged trace start here
  int case_count = 0;
  std::uint64_t events = 0;        // events written
  std::uint64_t events_not_carried = 0;
  std::optional<int> rank;
  nlohmann::json attnprof;         // its `attnprof` object (the stored summary, versions, ...)
};

struct MergeResult {
  std::uint64_t base_time_ns = 0;
  std::vector<MergedInput> inputs;
  std::uint64_t events = 0;
  std::vector<std::string> notes;
};

struct MergeOptions {
  // Empty: each input's cases follow the previous inputs'. Otherwise the inputs share these
  // cases (the workers of one run tag them by their index in the whole sweep).
  std::vector<CaseName> shared_cases;
  // How the merged trace is written (json or json.gz); inputs may be either, whatever this says.
  TraceWriteOptions write;
};

// Streams `inputs` (in this order, each plain or gzip) into `out`, then writes the `attnprof` object `metadata`
// returns once every input is read. Throws TraceFormatError for an unreadable input.
MergeResult merge_traces(const std::vector<MergeInput>& inputs, const std::filesystem::path& out,
                         const MergeOptions& options,
                         const std::function<nlohmann::json(const MergeResult&)>& metadata);

// "rank 1 / GPU 0" style: `label` + " / " + `name`, or `name` alone without a label.
std::string labelled(const std::string& label, const std::string& name);

// Order and names for the inputs of a job's merge: by rank (distributedInfo, or rank<R> in the
// file name), then those without one by pid. Each gets a label ("rank 1", "pid 4242") and a
// slot of its own (its rank, when no other input claims it).
std::vector<MergeInput> plan_rank_merge(std::vector<TraceHead> heads);

}  // namespace attnprof::trace
