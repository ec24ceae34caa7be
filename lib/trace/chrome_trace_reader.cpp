#include "trace/chrome_trace_reader.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "core/json_numbers.hpp"

namespace attnprof::trace {
namespace {

enum class EventField { other, ph, cat, name, pid, tid, ts, dur, id, bp, args };

EventField event_field(std::string_view key) {
  // Compared a character at a time: the keys of every event pass here.
  switch (key.size()) {
    case 2:
      if (key[0] == 'p' && key[1] == 'h') return EventField::ph;
      if (key[0] == 't' && key[1] == 's') return EventField::ts;
      if (key[0] == 'i' && key[1] == 'd') return EventField::id;
      if (key[0] == 'b' && key[1] == 'p') return EventField::bp;
      break;
    case 3:
      if (key == "cat") return EventField::cat;
      if (key == "pid") return EventField::pid;
      if (key == "tid") return EventField::tid;
      if (key == "dur") return EventField::dur;
      break;
    case 4:
      if (key == "name") return EventField::name;
      if (key == "args") return EventField::args;
      break;
    default: break;
  }
  return EventField::other;
}

enum class ArgField {
  correlation, device, context, stream, cbid, return_value, registers_per_thread, shared_memory,
  static_shared_memory, dynamic_shared_memory, local_memory_per_thread, shared_memory_config, bytes, value,
  grid, block, cluster, carveout, achieved_occupancy,
  copy_kind, launch_api, case_index, iteration, phase, case_label, backend, name, labels, dram_throughput,
  dram_bandwidth, tensor_pipe,
};

// The arg names by length, so a look-up compares a handful of names and hashes nothing.
class ArgFieldTable {
 public:
  ArgFieldTable() {
    const std::pair<std::string_view, ArgField> fields[] = {
        {"correlation", ArgField::correlation},
        {"device", ArgField::device},
        {"context", ArgField::context},
        {"stream", ArgField::stream},
        {"cbid", ArgField::cbid},
        {"return value", ArgField::return_value},
        {"registers per thread", ArgField::registers_per_thread},
        {"shared memory", ArgField::shared_memory},
        {"static shared memory", ArgField::static_shared_memory},
        {"dynamic shared memory", ArgField::dynamic_shared_memory},
        {"local memory per thread", ArgField::local_memory_per_thread},
        {"shared memory config", ArgField::shared_memory_config},
        {"bytes", ArgField::bytes},
        {"value", ArgField::value},
        {"grid", ArgField::grid},
        {"block", ArgField::block},
        {"cluster", ArgField::cluster},
        {"shared memory carveout %", ArgField::carveout},
        {"achieved occupancy %", ArgField::achieved_occupancy},
        {"copy kind", ArgField::copy_kind},
        {"launch api", ArgField::launch_api},
        {"case index", ArgField::case_index},
        {"iteration", ArgField::iteration},
        {"phase", ArgField::phase},
        {"case", ArgField::case_label},
        {"backend", ArgField::backend},
        {"name", ArgField::name},
        {"labels", ArgField::labels},
        {"dram throughput %", ArgField::dram_throughput},
        {"dram bandwidth (GB/s)", ArgField::dram_bandwidth},
        {"tensor pipe active %", ArgField::tensor_pipe},
    };
    for (const auto& [name, field] : fields) by_length_[name.size()].emplace_back(name, field);
  }

  std::optional<ArgField> find(std::string_view key) const {
    if (key.size() >= by_length_.size()) return std::nullopt;
    for (const auto& [name, field] : by_length_[key.size()])  // the last letter tells most apart
      if (name.back() == key.back() && name == key) return field;
    return std::nullopt;
  }

 private:
  std::array<std::vector<std::pair<std::string_view, ArgField>>, 32> by_length_;
};

const ArgFieldTable& arg_fields() {
  static const ArgFieldTable table;
  return table;
}

std::uint64_t hash_id(std::string_view text) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) hash = (hash ^ ch) * 1099511628211ull;
  return hash & 0x7fffffffu;
}

std::int64_t read_int(JsonPullParser& p, const char* what) {
  if (p.last() != JsonToken::number) p.fail_type(what, "an integer");
  return p.as_int64(what);
}

double read_number(JsonPullParser& p, const char* what) {
  if (p.last() != JsonToken::number) p.fail_type(what, "a number");
  return p.as_double(what);
}

std::string_view read_string(JsonPullParser& p, const char* what) {
  if (p.last() != JsonToken::string) p.fail_type(what, "a string");
  return p.text();
}

// An integer that feeds occupancy and size arithmetic: within [low, high], far beyond what CUDA
// reports, so that the arithmetic on it cannot overflow.
std::int64_t read_int_in(JsonPullParser& p, const char* what, std::int64_t low, std::int64_t high) {
  const std::int64_t v = read_int(p, what);
  if (v < low || v > high) p.fail(fmt::format("{}: expected an integer from {} to {}, found {}", what, low, high, p.text()));
  return v;
}

// Limits far beyond CUDA's, chosen so that products of them (registers x threads, blocks x
// warps) still fit in an int.
constexpr std::int64_t kMaxCount = (std::int64_t{1} << 31) - 1;  // grid sizes, indices: what an int holds
constexpr std::int64_t kMaxBlockThreads = std::int64_t{1} << 14;
constexpr std::int64_t kMaxRegisters = std::int64_t{1} << 16;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 24;        // shared and local memory sizes

// [x, y, z] (Kineto's grid/block); fewer elements are padded with 1, each within [0, high].
std::array<int, 3> read_dims(JsonPullParser& p, const char* what, std::int64_t high) {
  if (p.last() != JsonToken::begin_array) p.fail_type(what, "an array of up to 3 integers");
  std::array<int, 3> dims{1, 1, 1};
  std::size_t n = 0;
  for (JsonToken t = p.next(); t != JsonToken::end_array; t = p.next()) {
    if (n >= 3) p.fail_type(what, "an array of up to 3 integers");
    dims[n++] = static_cast<int>(read_int_in(p, what, 0, high));
  }
  return dims;
}

// A pid or tid: an integer, or a string (Perfetto interns those; we hash them).
std::uint64_t read_process_or_thread(JsonPullParser& p, const char* what) {
  if (p.last() == JsonToken::string) return hash_id(p.text());
  if (p.last() != JsonToken::number) p.fail_type(what, "an integer or a string");
  const std::int64_t v = p.as_int64(what);
  // Kineto's sanitizeTid; negated in unsigned arithmetic, where INT64_MIN has a negation too.
  return v < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
}

void read_args(JsonPullParser& p, TraceEventArgs& a) {
  if (p.last() != JsonToken::begin_object) p.fail_type("args", "an object");
  const ArgFieldTable& fields = arg_fields();
  while (p.next() == JsonToken::key) {
    const std::optional<ArgField> field = fields.find(p.text());
    if (!field) {
      p.skip_next_value();
      continue;
    }
    p.next();
    switch (*field) {
      case ArgField::correlation: a.correlation = read_int(p, "args.correlation"); break;
      case ArgField::device: a.device = read_int(p, "args.device"); break;
      case ArgField::context: a.context = read_int(p, "args.context"); break;
      case ArgField::stream: a.stream = read_int(p, "args.stream"); break;
      case ArgField::cbid: a.cbid = read_int(p, "args.cbid"); break;
      case ArgField::return_value: a.return_value = read_int(p, "args.\"return value\""); break;
      case ArgField::registers_per_thread:
        a.registers_per_thread = read_int_in(p, "args.\"registers per thread\"", 0, kMaxRegisters);
        break;
      case ArgField::shared_memory: a.shared_memory = read_int_in(p, "args.\"shared memory\"", 0, kMaxBytes); break;
      case ArgField::static_shared_memory:
        a.static_shared_memory = read_int_in(p, "args.\"static shared memory\"", 0, kMaxBytes);
        break;
      case ArgField::dynamic_shared_memory:
        a.dynamic_shared_memory = read_int_in(p, "args.\"dynamic shared memory\"", 0, kMaxBytes);
        break;
      case ArgField::local_memory_per_thread:
        a.local_memory_per_thread = read_int_in(p, "args.\"local memory per thread\"", 0, kMaxBytes);
        break;
      case ArgField::shared_memory_config:
        a.shared_memory_config = read_int_in(p, "args.\"shared memory config\"", 0, kMaxBytes);
        break;
      case ArgField::bytes: a.bytes = read_int(p, "args.bytes"); break;
      case ArgField::value: a.value = read_int(p, "args.value"); break;
      case ArgField::grid: a.grid = read_dims(p, "args.grid", kMaxCount); break;
      case ArgField::block:
        a.block = read_dims(p, "args.block", kMaxBlockThreads);
        if (std::int64_t{(*a.block)[0]} * (*a.block)[1] * (*a.block)[2] > kMaxBlockThreads)
          p.fail(fmt::format("args.block: more than {} threads in a block", kMaxBlockThreads));
        break;
      case ArgField::cluster: a.cluster = read_dims(p, "args.cluster", kMaxCount); break;
      case ArgField::carveout: a.carveout_percent = read_int_in(p, "args.\"shared memory carveout %\"", 0, 100); break;
      case ArgField::achieved_occupancy: a.achieved_occupancy_percent = read_number(p, "args.\"achieved occupancy %\""); break;
      case ArgField::copy_kind: a.copy_kind = read_string(p, "args.\"copy kind\""); break;
      case ArgField::launch_api: a.launch_api = read_string(p, "args.\"launch api\""); break;
      case ArgField::case_index: a.case_index = read_int_in(p, "args.\"case index\"", -1, kMaxCount - 1); break;
      case ArgField::iteration: a.iteration = read_int_in(p, "args.iteration", -1, kMaxCount - 1); break;
      case ArgField::phase: a.phase = read_string(p, "args.phase"); break;
      case ArgField::case_label: a.case_label = read_string(p, "args.case"); break;
      case ArgField::backend: a.backend = read_string(p, "args.backend"); break;
      case ArgField::dram_throughput: a.dram_throughput_percent = read_number(p, "args.\"dram throughput %\""); break;
      case ArgField::dram_bandwidth: a.dram_gb_per_second = read_number(p, "args.\"dram bandwidth (GB/s)\""); break;
      case ArgField::tensor_pipe: a.tensor_pipe_percent = read_number(p, "args.\"tensor pipe active %\""); break;
      case ArgField::name:
        // Only metadata events carry a string name in args; anything else is not ours to judge.
        if (p.last() == JsonToken::string) a.metadata_name = p.text();
        else p.skip_value();
        break;
      case ArgField::labels:
        if (p.last() == JsonToken::string) a.metadata_labels = p.text();
        else p.skip_value();
        break;
    }
  }
}

void read_event(JsonPullParser& p, TraceEvent& e) {
  if (p.last() != JsonToken::begin_object) p.fail_type("traceEvents element", "an event object");
  while (p.next() == JsonToken::key) {
    const EventField field = event_field(p.text());
    if (field == EventField::other) {
      p.skip_next_value();
      continue;
    }
    p.next();
    switch (field) {
      case EventField::ph: e.ph = read_string(p, "event \"ph\""); break;
      case EventField::cat: e.cat = read_string(p, "event \"cat\""); break;
      case EventField::name:
        if (p.last() == JsonToken::number) e.name = p.text();  // tolerated by Perfetto
        else e.name = read_string(p, "event \"name\"");
        break;
      case EventField::pid: e.pid = read_process_or_thread(p, "event \"pid\""); break;
      case EventField::tid: e.tid = read_process_or_thread(p, "event \"tid\""); break;
      case EventField::ts: e.ts_ns = p.as_microseconds_in_ns("event \"ts\""); break;
      case EventField::dur: e.dur_ns = p.as_microseconds_in_ns("event \"dur\""); break;
      case EventField::id:
        if (p.last() == JsonToken::number) e.id = p.as_uint64("event \"id\"");
        else if (p.last() == JsonToken::string) e.id = hash_id(p.text());
        else p.fail_type("event \"id\"", "an integer or a string");
        break;
      case EventField::bp: e.bp = read_string(p, "event \"bp\""); break;
      case EventField::args: read_args(p, e.args); break;
      case EventField::other: break;
    }
  }
}

int default_max_blocks_per_sm(int major, int minor) {
  // cudaDevAttrMaxBlocksPerMultiprocessor by architecture (CUDA programming guide, table 21).
  if (major >= 9 || (major == 8 && minor == 0)) return 32;
  if (major == 8 && minor == 9) return 24;
  if (major == 8) return 16;
  if (major == 7 && minor == 5) return 16;
  return 32;
}

[[noreturn]] void foreign(const std::string& source, const std::string& why) {
  throw TraceFormatError(TraceFormatError::Kind::foreign,
                         fmt::format("{} is not a Chrome/Kineto trace: {}", source, why));
}

}  // namespace

void TraceEventArgs::clear() {
  // Field by field: the text fields keep their storage, so no event allocates.
  for (std::optional<std::int64_t>* v :
       {&correlation, &device, &context, &stream, &cbid, &return_value, &registers_per_thread, &shared_memory,
        &static_shared_memory, &dynamic_shared_memory, &local_memory_per_thread, &shared_memory_config, &bytes, &value,
        &carveout_percent, &case_index, &iteration})
    v->reset();
  for (std::optional<std::array<int, 3>>* v : {&grid, &block, &cluster}) v->reset();
  for (std::optional<double>* v : {&achieved_occupancy_percent,
                                   &dram_throughput_percent, &dram_gb_per_second, &tensor_pipe_percent})
    v->reset();
  for (ReusableText* v : {&copy_kind, &launch_api, &phase, &case_label,
                          &backend, &metadata_name, &metadata_labels})
    v->reset();
}

void TraceEvent::clear() {
  ph.clear();
  cat.clear();
  name.clear();
  pid = tid = 0;
  ts_ns.reset();
  dur_ns.reset();
  id.reset();
  bp.clear();
  args.clear();
}

DeviceProperties device_properties_from_json(const nlohmann::json& j) {
  // Bounded by far more than any GPU has, so that occupancy arithmetic on them cannot overflow or
  // divide by zero.
  constexpr int kCount = 1 << 20;
  constexpr std::int64_t kBytes = std::int64_t{1} << 50;
  DeviceProperties d;
  d.id = json_integer_in(j, "id", 0, 0, kCount);
  d.name = j.value("name", "");
  d.compute_major = json_integer_in(j, "computeMajor", 0, 0, 1000);
  d.compute_minor = json_integer_in(j, "computeMinor", 0, 0, 1000);
  d.sm_count = json_integer_in(j, "numSms", 0, 0, kCount);
  d.max_threads_per_block = json_integer_in(j, "maxThreadsPerBlock", 1024, 1, kCount);
  d.max_threads_per_sm = json_integer_in(j, "maxThreadsPerMultiprocessor", 2048, 1, kCount);
  d.max_blocks_per_sm = json_integer_in(j, "maxBlocksPerMultiprocessor",
                                        default_max_blocks_per_sm(d.compute_major, d.compute_minor), 1, kCount);
  d.regs_per_block = json_integer_in(j, "regsPerBlock", 65536, 1, kCount);
  d.regs_per_sm = json_integer_in(j, "regsPerMultiprocessor", 65536, 1, kCount);
  d.warp_size = json_integer_in(j, "warpSize", 32, 1, 1024);
  d.shared_mem_per_block = json_integer_in<std::int64_t>(j, "sharedMemPerBlock", 49152, 0, kBytes);
  d.shared_mem_per_sm = json_integer_in<std::int64_t>(j, "sharedMemPerMultiprocessor", 0, 0, kBytes);
  d.shared_mem_per_block_optin =
      json_integer_in<std::int64_t>(j, "sharedMemPerBlockOptin", d.shared_mem_per_block, 0, kBytes);
  d.reserved_shared_mem_per_block =
      json_integer_in<std::int64_t>(j, "reservedSharedMemPerBlock", d.compute_major >= 8 ? 1024 : 0, 0, kBytes);
  d.total_global_mem = json_integer_in<std::int64_t>(j, "totalGlobalMem", 0, 0, kBytes);
  d.l2_cache_bytes = json_integer_in<std::int64_t>(j, "l2CacheSize", 0, 0, kBytes);
  d.clock_rate_khz = json_integer_in(j, "clockRateKHz", 0, 0, kCount * 1000);
  d.memory_clock_rate_khz = json_integer_in(j, "memoryClockRateKHz", 0, 0, kCount * 1000);
  d.memory_bus_width_bits = json_integer_in(j, "memoryBusWidth", 0, 0, kCount);
  return d;
}

TraceDocument read_chrome_trace(const std::filesystem::path& path, const TraceEventCallback& on_event) {
  JsonPullParser parser(path);
  return read_chrome_trace(parser, on_event);
}

TraceDocument read_chrome_trace(JsonPullParser& p, const TraceEventCallback& on_event) {
  TraceDocument doc;
  doc.source = p.source_name();
  TraceEvent event;

  auto read_events = [&]() {
    if (p.last() != JsonToken::begin_array) p.fail_type("\"traceEvents\"", "an array of events");
    for (JsonToken t = p.next(); t != JsonToken::end_array; t = p.next()) {
      event.clear();
      event.index = doc.events;
      read_event(p, event);
      ++doc.events;
      on_event(event, doc);
    }
  };

  const JsonToken first = p.next();
  if (first == JsonToken::begin_array) {
    // The format's other container: a bare array of events.
    doc.bare_array = true;
    read_events();
    p.next();  // end of input, or an error for trailing data
    return doc;
  }
  if (first != JsonToken::begin_object)
    foreign(doc.source, fmt::format("the document is {}, not an object with \"traceEvents\"", describe(first)));

  bool saw_events = false;
  std::string schema;
  std::vector<std::string> keys;
  while (p.next() == JsonToken::key) {
    const std::string key(p.text());
    if (keys.size() < 6) keys.push_back(key);
    const std::uint64_t key_offset = p.token_offset();
    p.next();
    if (key == "traceEvents") {
      saw_events = true;
      read_events();
    } else if (key == "deviceProperties") {
      if (p.last() != JsonToken::begin_array) p.fail_type("\"deviceProperties\"", "an array of objects");
      const nlohmann::json devices = p.read_value();
      for (const nlohmann::json& d : devices) {
        try {
          if (!d.is_object()) throw std::runtime_error("an element is not an object");
          doc.devices.push_back(device_properties_from_json(d));
        } catch (const std::exception& e) {
          p.fail_at(key_offset, fmt::format("\"deviceProperties\": {}", e.what()));
        }
      }
    } else if (key == "baseTimeNanoseconds") {
      doc.base_time_ns = p.as_uint64("\"baseTimeNanoseconds\"");
    } else if (key == "distributedInfo" && p.last() == JsonToken::begin_object) {
      const nlohmann::json info = p.read_value();
      if (info.contains("rank") && info["rank"].is_number_integer()) doc.rank = info["rank"].get<int>();
    } else if (key == "attnprof" && p.last() == JsonToken::begin_object) {
      doc.attnprof = p.read_value();
    } else if (key == "traceName" && p.last() == JsonToken::string) {
      doc.trace_name = p.text();
    } else if (key == "schema" && p.last() == JsonToken::string) {
      schema = p.text();
    } else {
      p.skip_value();
    }
  }
  p.next();  // end of input, or an error for trailing data

  if (!saw_events) {
    std::string why = fmt::format("its top-level object has no \"traceEvents\" array (it has: {})",
                                  keys.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(keys, ", ")));
    if (schema == "attnprof-summary")
      why += "; it is an attnprof summary.json: `report` reads the trace.json written beside it";
    foreign(doc.source, why);
  }
  return doc;
}

// ---- conversion to the model ----

void parse_memcpy_name(const std::string& name, MemcpyKind& kind, std::string& src, std::string& dst) {
  // "Memcpy DtoD (Device -> Device)"
  kind = MemcpyKind::unknown;
  src.clear();
  dst.clear();
  std::string_view text(name);
  if (text.rfind("Memcpy ", 0) == 0) text.remove_prefix(7);
  const auto space = text.find(' ');
  kind = parse_memcpy_kind(std::string(text.substr(0, space)));
  if (space == std::string_view::npos) return;
  const auto open = text.find('(', space);
  const auto arrow = text.find(" -> ", space);
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || arrow == std::string_view::npos || close == std::string_view::npos ||
      !(open < arrow && arrow < close))
    return;
  src = std::string(text.substr(open + 1, arrow - open - 1));
  dst = std::string(text.substr(arrow + 4, close - arrow - 4));
}

std::string parse_memset_memory(const std::string& name) {
  const auto open = name.find('(');
  const auto close = name.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close <= open) return "";
  return name.substr(open + 1, close - open - 1);
}

const DeviceProperties& TraceEventConverter::device_for(std::uint32_t device, const TraceDocument& doc) {
  for (const DeviceProperties& d : doc.devices)
    if (static_cast<std::uint32_t>(d.id) == device) return d;
  if (!doc.devices.empty()) return doc.devices.front();
  if (!fallback_device_) {
    fallback_device_ = sm90_reference_properties();
    notes_.push_back(
        "the trace has no deviceProperties: occupancy is computed for an NVIDIA H200 (sm_90, 132 SMs)");
  }
  return *fallback_device_;
}

std::int64_t timestamp_shift(std::optional<std::uint64_t> base_time_ns, std::int64_t first_ts_ns) {
  if (!base_time_ns) return 0;
  const bool relative = first_ts_ns < 0 || static_cast<std::uint64_t>(first_ts_ns) < *base_time_ns;
  return relative ? static_cast<std::int64_t>(*base_time_ns) : 0;
}

std::uint64_t TraceEventConverter::to_ns(std::int64_t ts_ns, const TraceDocument& doc) {
  if (!shift_) shift_ = timestamp_shift(doc.base_time_ns, ts_ns);  // once, so all events share one clock
  std::int64_t ns = 0;
  if (__builtin_add_overflow(ts_ns, *shift_, &ns)) return ts_ns > 0 ? std::numeric_limits<std::uint64_t>::max() : 0;
  return ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
}

namespace {

SweepTag tag_of(const TraceEventArgs& a) {
  SweepTag tag;
  if (!a.case_index) return tag;
  tag.case_index = static_cast<int>(*a.case_index);
  if (a.phase) tag.phase = parse_phase(*a.phase).value_or(Phase::none);
  if (a.iteration) tag.iteration = static_cast<int>(*a.iteration);
  return tag;
}

std::uint32_t u32(std::optional<std::int64_t> v, std::uint32_t fallback = 0) {
  return v ? static_cast<std::uint32_t>(*v) : fallback;
}

// What every GPU event carries, as ChromeTraceWriter writes it: the interval, where it ran (a
// trace without device and stream args, Kineto's, has them as the track's pid and tid), the
// correlation id, the launch API and the sweep tag.
void read_gpu_fields(const TraceEvent& e, std::uint64_t start, std::uint64_t end, GpuActivity& g) {
  const TraceEventArgs& a = e.args;
  g.start_ns = start;
  g.end_ns = end;
  g.device = a.device ? u32(a.device) : static_cast<std::uint32_t>(e.pid);
  g.context = u32(a.context);
  g.stream = a.stream ? u32(a.stream) : static_cast<std::uint32_t>(e.tid);
  g.correlation = u32(a.correlation);
  g.launch_api = a.launch_api.value_or("");
  g.tag = tag_of(a);
}

}  // namespace

KernelActivity TraceEventConverter::kernel(const TraceEvent& e, const TraceDocument& doc, std::uint64_t start,
                                           std::uint64_t end) {
  const TraceEventArgs& a = e.args;
  KernelActivity k;
  read_gpu_fields(e, start, end, k);
  k.name = e.name;
  k.grid = a.grid.value_or(std::array<int, 3>{0, 0, 0});
  k.block = a.block.value_or(std::array<int, 3>{0, 0, 0});
  if (a.cluster) k.cluster = *a.cluster;
  k.registers_per_thread = static_cast<int>(a.registers_per_thread.value_or(0));
  if (a.static_shared_memory || a.dynamic_shared_memory) {
    k.static_shared_bytes = static_cast<int>(a.static_shared_memory.value_or(0));
    k.dynamic_shared_bytes = static_cast<int>(a.dynamic_shared_memory.value_or(0));
  } else {
    // Kineto writes static + dynamic as one number; for occupancy only the total matters.
    k.dynamic_shared_bytes = static_cast<int>(a.shared_memory.value_or(0));
  }
  k.local_bytes_per_thread = static_cast<int>(a.local_memory_per_thread.value_or(0));
  k.shared_memory_executed = static_cast<int>(a.shared_memory_config.value_or(0));
  const DeviceProperties& device = device_for(k.device, doc);
  // Neither trace records the opt-in flag; a block above the default limit must have opted in.
  k.shared_optin = k.static_shared_bytes + k.dynamic_shared_bytes > device.shared_mem_per_block;
  k.carveout_percent = static_cast<int>(a.carveout_percent.value_or(-1));
  // The --metrics values come back as written: rounded to 2 decimals (3 for GB/s).
  k.achieved_occupancy_percent = a.achieved_occupancy_percent;
  k.dram_throughput_percent = a.dram_throughput_percent;
  if (a.dram_gb_per_second) k.dram_bytes_per_second = *a.dram_gb_per_second * 1e9;
  k.tensor_pipe_percent = a.tensor_pipe_percent;
  return k;
}

std::optional<Activity> TraceEventConverter::convert(const TraceEvent& e, const TraceDocument& doc) {
  if (e.ph != "X" || !e.ts_ns) return std::nullopt;
  const std::string& cat = e.cat;
  const std::uint64_t start = to_ns(*e.ts_ns, doc);
  const std::uint64_t end = start + static_cast<std::uint64_t>(std::max<std::int64_t>(0, e.dur_ns.value_or(0)));
  const TraceEventArgs& a = e.args;

  if (cat == "kernel") return kernel(e, doc, start, end);
  if (cat == "gpu_memcpy") {
    MemcpyActivity m;
    read_gpu_fields(e, start, end, m);
    parse_memcpy_name(e.name, m.kind, m.src_memory, m.dst_memory);
    if (a.copy_kind) m.kind = parse_memcpy_kind(*a.copy_kind);
    m.bytes = static_cast<std::uint64_t>(a.bytes.value_or(0));
    return m;
  }
  if (cat == "gpu_memset") {
    MemsetActivity m;
    read_gpu_fields(e, start, end, m);
    m.bytes = static_cast<std::uint64_t>(a.bytes.value_or(0));
    m.value = u32(a.value);
    m.memory = parse_memset_memory(e.name);
    return m;
  }
  if (cat == "cuda_runtime" || cat == "cuda_driver") {
    ApiCall c;
    c.domain = cat == "cuda_driver" ? ApiDomain::driver : ApiDomain::runtime;
    c.name = e.name;
    c.cbid = u32(a.cbid);
    c.start_ns = start;
    c.end_ns = end;
    c.process = static_cast<std::uint32_t>(e.pid);
    c.thread = static_cast<std::uint32_t>(e.tid);
    c.correlation = u32(a.correlation);
    c.return_value = static_cast<int>(a.return_value.value_or(0));
    c.tag = tag_of(a);
    return c;
  }
  if (cat == "user_annotation" || cat == "gpu_user_annotation") {
    Annotation n;
    n.name = e.name;
    n.start_ns = start;
    n.end_ns = end;
    n.on_gpu = cat == "gpu_user_annotation";
    n.process = static_cast<std::uint32_t>(e.pid);
    n.thread = static_cast<std::uint32_t>(e.tid);
    n.tag = tag_of(a);
    return n;
  }
  if (cat == "overhead") {
    OverheadActivity o;
    o.kind = e.name;
    o.start_ns = start;
    o.end_ns = end;
    o.process = static_cast<std::uint32_t>(e.pid);
    o.thread = static_cast<std::uint32_t>(e.tid);
    return o;
  }
  return std::nullopt;
}

}  // namespace attnprof::trace
