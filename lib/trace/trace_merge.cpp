#include "trace/trace_merge.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <fmt/format.h>

#include "trace/annotate.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/trace_files.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof::trace {
namespace {

// Thrown from the reader's callback to stop after the head of a trace.
struct HeadComplete {};

// Kineto's process_labels (a comma-separated list) name a GPU process "GPU <d>".
bool labels_name_a_gpu(std::string_view labels) {
  while (!labels.empty()) {
    const std::size_t comma = labels.find(',');
    std::string_view label = labels.substr(0, comma);
    labels = comma == std::string_view::npos ? std::string_view() : labels.substr(comma + 1);
    while (!label.empty() && label.front() == ' ') label.remove_prefix(1);
    while (!label.empty() && label.back() == ' ') label.remove_suffix(1);
    const std::size_t prefix = event_name::kGpuProcessPrefix.size();
    if (label.size() > prefix && label.starts_with(event_name::kGpuProcessPrefix) &&
        std::all_of(label.begin() + prefix, label.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

bool is_device_pid(std::uint64_t pid, const std::vector<DeviceProperties>& devices) {
  return std::any_of(devices.begin(), devices.end(),
                     [&](const DeviceProperties& d) { return d.id >= 0 && static_cast<std::uint64_t>(d.id) == pid; });
}

struct NamedProcess {
  std::uint64_t pid = 0;
  std::string name;
};

// What a trace's events say of its processes: the names its "M" events give, which are GPUs
// (ours are named "GPU <d>: <name>"; Kineto's have the host program's name and the label
// "GPU <d>"), and which called the CUDA API.
class TraceProcesses {
 public:
  void take(const TraceEvent& e) {
    if (e.ph != ph::kMetadata) {
      if (e.cat == category::kCudaRuntime || e.cat == category::kCudaDriver) api_callers_.insert(e.pid);
    } else if (e.name == metadata::kProcessName && e.args.metadata_name) {
      if (named_pids_.insert(e.pid).second) named_.push_back({e.pid, *e.args.metadata_name});
    } else if (e.name == metadata::kProcessLabels && e.args.metadata_labels && labels_name_a_gpu(*e.args.metadata_labels)) {
      gpus_.insert(e.pid);
    }
  }

  // The first named process that is no GPU, preferring one that called the CUDA API (Kineto
  // names its CUPTI overhead process before the host), then one whose pid is no device's
  // (Kineto's GPU pids are the device ordinals, named like the host: labels may be missing).
  const NamedProcess* host(const std::vector<DeviceProperties>& devices) const {
    const NamedProcess* best = nullptr;
    int best_score = -1;
    for (const NamedProcess& p : named_) {
      if (p.name.starts_with(event_name::kGpuProcessPrefix) || gpus_.count(p.pid) > 0) continue;
      const int score = (api_callers_.count(p.pid) > 0 ? 2 : 0) + (is_device_pid(p.pid, devices) ? 0 : 1);
      if (score > best_score) {
        best = &p;
        best_score = score;
      }
    }
    return best;
  }

 private:
  std::vector<NamedProcess> named_;  // in the order first named
  std::set<std::uint64_t> named_pids_;
  std::set<std::uint64_t> gpus_;
  std::set<std::uint64_t> api_callers_;
};

// Linux pids stay below 2^22 (pid_max); a fresh pid above 2^30 can be neither a process's nor a GPU's.
constexpr std::uint32_t kFreshPidBase = 1u << 30;

std::string case_prefix(const std::string& label) { return label.empty() ? "" : "[" + label + "] "; }

// GPU pids a slot may use: its inputs' devices, and at least the first 16 ordinals (a node's
// GPUs) for devices a trace uses without listing them in deviceProperties.
constexpr std::uint32_t kGpusAssumedPerSlot = 16;

// Host pids: the input's own unless another input has it or it is one of a slot's GPU pids.
std::vector<std::uint32_t> assign_host_pids(const std::vector<MergeInput>& inputs) {
  std::map<std::uint32_t, std::uint32_t> gpu_pids_of_slot;  // slot -> how many GPU pids it may use
  for (const MergeInput& in : inputs) {
    std::uint32_t& count = gpu_pids_of_slot[in.slot];
    count = std::max(count, kGpusAssumedPerSlot);
    for (const DeviceProperties& d : in.head.devices)
      count = std::max(count, static_cast<std::uint32_t>(std::max(d.id, 0)) + 1);
  }
  auto is_gpu_pid = [&](std::uint32_t pid) {
    const auto slot = gpu_pids_of_slot.find(pid / kGpuPidsPerSlot);
    return slot != gpu_pids_of_slot.end() && pid % kGpuPidsPerSlot < slot->second;
  };
  std::set<std::uint32_t> taken;
  std::vector<std::uint32_t> pids;
  std::uint32_t fresh = kFreshPidBase;
  for (const MergeInput& in : inputs) {
    std::optional<std::uint32_t> pid = in.head.host_process;
    if (pid && (is_gpu_pid(*pid) || taken.count(*pid) > 0)) pid.reset();
    if (!pid) {
      while (taken.count(fresh) > 0) ++fresh;
      pid = fresh++;
    }
    taken.insert(*pid);
    pids.push_back(*pid);
  }
  return pids;
}

// ac2g ids of input `input`: its own range of 2^32, so correlation ids never meet across inputs.
class FlowIds {
 public:
  explicit FlowIds(std::size_t inputs) : next_fresh_(static_cast<std::uint64_t>(inputs) << 32) {}
  std::uint64_t map(std::size_t input, std::uint64_t id) {
    if (id <= std::numeric_limits<std::uint32_t>::max()) return (static_cast<std::uint64_t>(input) << 32) | id;
    auto [it, inserted] = large_.try_emplace({input, id}, next_fresh_);
    if (inserted) ++next_fresh_;
    return it->second;
  }

 private:
  struct KeyHash {
    std::size_t operator()(const std::pair<std::size_t, std::uint64_t>& k) const {
      return std::hash<std::uint64_t>()(k.second * 31 + k.first);
    }
  };
  std::unordered_map<std::pair<std::size_t, std::uint64_t>, std::uint64_t, KeyHash> large_;
  std::uint64_t next_fresh_;
};

// Correlation ids of each input moved past the previous inputs' (every process counts from 1),
// so `report` joins GPU work only to its own process's launches. Streamed: only the largest id of
// the input being read is kept.
class CorrelationIds {
 public:
  // The id `id` of the current input becomes, or nullopt where it would pass 2^32 (left as is).
  // 0 is CUPTI's "no correlation" (work no API call launched): it stays 0 in every input.
  std::optional<std::uint32_t> map(std::uint32_t id) {
    if (id == 0) return 0;
    largest_ = std::max(largest_, id);
    const std::uint64_t moved = base_ + id;
    if (moved > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
    return static_cast<std::uint32_t>(moved);
  }
  void next_input() {
    base_ += std::uint64_t{largest_} + 1;
    largest_ = 0;
  }

 private:
  std::uint64_t base_ = 0;
  std::uint32_t largest_ = 0;
};

}  // namespace

std::string labelled(const std::string& label, const std::string& name) {
  return label.empty() ? name : label + " / " + name;
}

TraceHead read_trace_head(const std::filesystem::path& path) {
  TraceHead head;
  head.path = path;
  TraceProcesses processes;
  bool past_leading_metadata = false;  // from here on, only what names the host is looked at
  auto take_document = [&](const TraceDocument& doc) {
    head.base_time_ns = doc.base_time_ns;
    head.devices = doc.devices;
    head.rank = doc.rank;
  };
  try {
    const TraceDocument doc = read_chrome_trace(path, [&](const TraceEvent& e, const TraceDocument& so_far) {
      processes.take(e);
      if (e.ph == ph::kMetadata || past_leading_metadata) return;
      past_leading_metadata = true;
      take_document(so_far);
      // Our writer names the host before any event; Kineto names its processes after all of them.
      const NamedProcess* host = processes.host(so_far.devices);
      if (host && !is_device_pid(host->pid, so_far.devices)) throw HeadComplete{};
    });
    if (!past_leading_metadata) take_document(doc);
  } catch (const HeadComplete&) {
  }
  if (const NamedProcess* host = processes.host(head.devices)) {
    head.host_process = static_cast<std::uint32_t>(host->pid);
    head.host_process_name = host->name;
  }
  return head;
}

MergeResult merge_traces(const std::vector<MergeInput>& inputs, const std::filesystem::path& out,
                         const MergeOptions& options,
                         const std::function<nlohmann::json(const MergeResult&)>& metadata) {
  MergeResult result;
  std::optional<std::uint64_t> base;
  TraceHeader header;
  std::set<int> device_ids;
  for (const MergeInput& in : inputs) {
    if (in.head.base_time_ns) base = std::min(base.value_or(*in.head.base_time_ns), *in.head.base_time_ns);
    else
      result.notes.push_back(fmt::format("{} has no baseTimeNanoseconds: its timestamps are taken as absolute",
                                         in.head.path.string()));
    for (const DeviceProperties& d : in.head.devices)
      if (device_ids.insert(d.id).second) header.devices.push_back(d);
  }
  result.base_time_ns = base.value_or(0);
  header.base_time_ns = result.base_time_ns;  // no host process of its own: each input names its own

  ChromeTraceWriter writer(out, header, options.write);
  const bool shared_cases = !options.shared_cases.empty();
  for (const CaseName& c : options.shared_cases) writer.add_case(c);

  const std::vector<std::uint32_t> host_pids = assign_host_pids(inputs);
  FlowIds flow_ids(inputs.size());
  CorrelationIds correlations;
  int next_case = 0;
  try {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const MergeInput& in = inputs[i];
      MergedInput merged;
      merged.path = in.head.path;
      merged.label = in.label;
      merged.rank = in.head.rank;
      merged.host_pid = host_pids[i];
      merged.original_host_pid = in.head.host_process;
      merged.gpu_pid_base = in.slot * kGpuPidsPerSlot;
      merged.clock_shift_ns = in.head.base_time_ns ? static_cast<std::int64_t>(*in.head.base_time_ns - result.base_time_ns) : 0;
      merged.first_case = shared_cases ? 0 : next_case;

      TraceSource source;
      source.host_process = merged.host_pid;
      source.host_process_name = labelled(
          in.label, in.head.host_process_name.empty() ? fmt::format("process {}", in.head.host_process.value_or(0))
                                                      : in.head.host_process_name);
      source.gpu_pid_base = merged.gpu_pid_base;
      source.gpu_process_prefix = in.label.empty() ? "" : in.label + " / ";
      source.sort_index_base = static_cast<int>(in.slot) * static_cast<int>(kGpuPidsPerSlot);
      source.automatic_flows = false;  // the input's own flow events are copied, ids remapped
      writer.set_source(source);

      TraceEventConverter converter;
      std::optional<std::int64_t> shift;  // the converter's rule, for the flow events
      int cases_seen = 0;
      std::uint64_t correlations_kept = 0;  // ids past 2^32 once moved
      const std::string prefix = case_prefix(in.label);
      const TraceDocument doc = read_chrome_trace(in.head.path, [&](const TraceEvent& e, const TraceDocument& so_far) {
        if (e.ph == ph::kMetadata) return;  // the writer names every track it writes
        if (e.ts_ns && !shift) shift = timestamp_shift(so_far.base_time_ns, *e.ts_ns);
        if (e.ph == ph::kFlowStart || e.ph == ph::kFlowEnd) {
          // Only ac2g flows join what a merge carries (a launch to its GPU work); Kineto's fwdbwd
          // and others join cpu_op events, which it does not, and "f" would end on a GPU track.
          if (e.cat != category::kFlow || !e.id || !e.ts_ns) {
            ++merged.events_not_carried;
            return;
          }
          FlowEvent flow;
          flow.start = e.ph == ph::kFlowStart;
          flow.id = flow_ids.map(i, *e.id);
          std::int64_t ts_ns = 0;
          if (__builtin_add_overflow(*e.ts_ns, *shift, &ts_ns)) ts_ns = *e.ts_ns > 0 ? std::numeric_limits<std::int64_t>::max() : 0;
          flow.ts_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, ts_ns));
          flow.device = static_cast<std::uint32_t>(e.pid);
          flow.thread = static_cast<std::uint32_t>(e.tid);
          writer.write(flow);
          ++merged.events;
          return;
        }
        // Our counter track is drawn afresh from the memory events, with this merge's pids.
        if (e.ph == ph::kCounter && e.name == event_name::kDeviceMemoryInUse) return;
        std::optional<Activity> activity = converter.convert(e, so_far);
        if (!activity) {
          ++merged.events_not_carried;
          return;
        }
        // Derived facts are not read back; the merged trace gets them as every trace does.
        if (auto* kernel = std::get_if<KernelActivity>(&*activity))
          annotate_occupancy(*kernel, converter.device_for(kernel->device, so_far));
        std::visit(
            [&](auto& a) {
              if constexpr (requires { a.correlation; }) {
                if (const std::optional<std::uint32_t> moved = correlations.map(a.correlation)) a.correlation = *moved;
                else ++correlations_kept;
              }
              if constexpr (requires { a.tag; }) {
                if (a.tag.case_index >= 0) {
                  cases_seen = std::max(cases_seen, a.tag.case_index + 1);
                  if (!shared_cases) {
                    int moved = 0;
                    if (__builtin_add_overflow(a.tag.case_index, merged.first_case, &moved))
                      throw TraceFormatError(TraceFormatError::Kind::malformed,
                                             fmt::format("{}: case index {} after the previous inputs' {} cases is "
                                                         "beyond what an int holds",
                                                         in.head.path.string(), a.tag.case_index, merged.first_case));
                    a.tag.case_index = moved;
                    const auto index = static_cast<std::size_t>(a.tag.case_index);
                    if (!writer.has_case(index) && e.args.case_label)
                      writer.set_case(index, {prefix + *e.args.case_label, e.args.backend.value_or("")});
                  }
                }
              }
              if constexpr (std::is_same_v<std::decay_t<decltype(a)>, ApiCall>) a.launches_work = false;
              writer.write(a);
            },
            *activity);
        ++merged.events;
      });
      correlations.next_input();
      // What the reader left out or could not pair (releases of memory allocated before the trace began).
      for (const std::string& note : converter.notes()) result.notes.push_back(fmt::format("{}: {}", in.head.path.string(), note));
      if (correlations_kept > 0)
        result.notes.push_back(fmt::format("{}: {} correlation id(s) kept as they were (moved past the previous inputs' they "
                                           "would not fit in 32 bits): `report` may join their GPU work to another "
                                           "input's launches",
                                           in.head.path.string(), correlations_kept));
      merged.attnprof = doc.attnprof;
      if (doc.attnprof.is_object() && (doc.attnprof.value("command", std::string()) == "merge" || doc.attnprof.contains("workers")))
        result.notes.push_back(fmt::format("{} is itself a merge of several processes: its host processes became one "
                                           "here; merge the per-process traces instead",
                                           in.head.path.string()));
      // Cases without GPU events still hold their index: the stored summary lists them all.
      int stored_cases = 0;
      if (doc.attnprof.is_object() && doc.attnprof.contains("summary") && doc.attnprof["summary"].is_object() &&
          doc.attnprof["summary"].contains("cases") && doc.attnprof["summary"]["cases"].is_array())
        stored_cases = static_cast<int>(doc.attnprof["summary"]["cases"].size());
      merged.case_count = std::max(cases_seen, stored_cases);
      if (!shared_cases && __builtin_add_overflow(next_case, merged.case_count, &next_case))
        throw TraceFormatError(TraceFormatError::Kind::malformed,
                               fmt::format("{}: its {} cases after the previous inputs' {} are more than an int holds",
                                           in.head.path.string(), merged.case_count, merged.first_case));
      if (merged.events_not_carried > 0)
        result.notes.push_back(fmt::format("{}: {} event(s) of kinds a merge does not carry (only kernels, copies, "
                                           "memsets, CUDA API calls, annotations, overhead, memory allocations and "
                                           "ac2g flows are)",
                                           in.head.path.string(), merged.events_not_carried));
      result.events += merged.events;
      result.inputs.push_back(std::move(merged));
    }
    writer.finish(metadata ? metadata(result) : nlohmann::json::object());
  } catch (const std::exception&) {
    writer.abandon();  // a previous good `out` stays; part of a merge is worth less than it
    throw;
  }
  return result;
}

std::vector<MergeInput> plan_rank_merge(std::vector<TraceHead> heads) {
  for (TraceHead& h : heads)
    if (!h.rank) h.rank = rank_in_file_name(h.path);
  std::stable_sort(heads.begin(), heads.end(), [](const TraceHead& a, const TraceHead& b) {
    if (a.rank.has_value() != b.rank.has_value()) return a.rank.has_value();
    if (a.rank != b.rank) return *a.rank < *b.rank;
    return a.host_process.value_or(0) < b.host_process.value_or(0);
  });
  std::set<std::uint32_t> slots;
  for (const TraceHead& h : heads)
    if (h.rank && *h.rank >= 0) slots.insert(static_cast<std::uint32_t>(*h.rank));
  std::uint32_t next_free = 0;
  auto fresh_slot = [&] {
    while (slots.count(next_free) > 0) ++next_free;
    slots.insert(next_free);
    return next_free;
  };
  std::vector<MergeInput> inputs;
  std::set<std::uint32_t> claimed;
  std::map<std::string, int> label_uses;
  for (TraceHead& h : heads) {
    MergeInput in;
    if (h.rank) {
      in.label = fmt::format("rank {}", *h.rank);
      const auto wanted = static_cast<std::uint32_t>(std::max(*h.rank, 0));
      in.slot = claimed.insert(wanted).second ? wanted : fresh_slot();  // two traces of one rank: two jobs
    } else {
      in.label = h.host_process ? fmt::format("pid {}", *h.host_process) : h.path.stem().string();
      in.slot = fresh_slot();
    }
    claimed.insert(in.slot);
    if (const int uses = ++label_uses[in.label]; uses > 1) in.label += fmt::format(" ({})", uses);
    in.head = std::move(h);
    inputs.push_back(std::move(in));
  }
  return inputs;
}

}  // namespace attnprof::trace
