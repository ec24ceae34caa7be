#include "trace/chrome_trace_reader.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "core/json_numbers.hpp"
#include "trace/key_text.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof::trace {
namespace {

// Names looked up by length, so a look-up compares a handful of names and hashes nothing: the
// keys of every event and of its args pass here.
template <typename Field>
class KeyTable {
 public:
  KeyTable(std::initializer_list<std::pair<std::string_view, Field>> fields) {
    for (const auto& [name, field] : fields) by_length_.at(name.size()).emplace_back(name, field);
  }

  std::optional<Field> find(std::string_view key) const {
    if (key.size() >= by_length_.size()) return std::nullopt;
    for (const auto& [name, field] : by_length_[key.size()])  // the last letter tells most apart
      if (name.back() == key.back() && name == key) return field;
    return std::nullopt;
  }

 private:
  std::array<std::vector<std::pair<std::string_view, Field>>, 32> by_length_;
};

enum class EventField { other, ph, cat, name, pid, tid, ts, dur, id, bp, args };

EventField event_field(std::string_view key) {
  static const KeyTable<EventField> table = {
      {event_key::kPh, EventField::ph},   {event_key::kCat, EventField::cat}, {event_key::kName, EventField::name},
      {event_key::kPid, EventField::pid}, {event_key::kTid, EventField::tid}, {event_key::kTs, EventField::ts},
      {event_key::kDur, EventField::dur}, {event_key::kId, EventField::id},   {event_key::kBp, EventField::bp},
      {event_key::kArgs, EventField::args},
  };
  return table.find(key).value_or(EventField::other);
}

enum class ArgField {
  correlation, device, context, stream, cbid, return_value, registers_per_thread, shared_memory,
  static_shared_memory, dynamic_shared_memory, local_memory_per_thread, shared_memory_config, bytes, value,
  grid, block, cluster, carveout, achieved_occupancy,
  copy_kind, launch_api, case_index, iteration, phase, case_label, backend, name, labels, dram_throughput,
  dram_bandwidth, tensor_pipe, device_type, device_id, addr, memory_bytes, operation, memory_kind, api,
  pool_address, pool_type, role,
};

// The args attnprof reads; every other arg is skipped unread.
const KeyTable<ArgField>& arg_fields() {
  static const KeyTable<ArgField> table = {
      {arg::kCorrelation, ArgField::correlation},
      {arg::kDevice, ArgField::device},
      {arg::kContext, ArgField::context},
      {arg::kStream, ArgField::stream},
      {arg::kCbid, ArgField::cbid},
      {arg::kReturnValue, ArgField::return_value},
      {arg::kRegistersPerThread, ArgField::registers_per_thread},
      {arg::kSharedMemory, ArgField::shared_memory},
      {arg::kStaticSharedMemory, ArgField::static_shared_memory},
      {arg::kDynamicSharedMemory, ArgField::dynamic_shared_memory},
      {arg::kLocalMemoryPerThread, ArgField::local_memory_per_thread},
      {arg::kSharedMemoryConfig, ArgField::shared_memory_config},
      {arg::kBytes, ArgField::bytes},
      {arg::kValue, ArgField::value},
      {arg::kGrid, ArgField::grid},
      {arg::kBlock, ArgField::block},
      {arg::kCluster, ArgField::cluster},
      {arg::kSharedMemoryCarveout, ArgField::carveout},
      {arg::kAchievedOccupancy, ArgField::achieved_occupancy},
      {arg::kCopyKind, ArgField::copy_kind},
      {arg::kLaunchApi, ArgField::launch_api},
      {arg::kCaseIndex, ArgField::case_index},
      {arg::kIteration, ArgField::iteration},
      {arg::kPhase, ArgField::phase},
      {arg::kCase, ArgField::case_label},
      {arg::kBackend, ArgField::backend},
      {metadata::kNameArg, ArgField::name},
      {metadata::kLabelsArg, ArgField::labels},
      {arg::kDramThroughput, ArgField::dram_throughput},
      {arg::kDramBandwidth, ArgField::dram_bandwidth},
      {arg::kTensorPipeActive, ArgField::tensor_pipe},
      {arg::kDeviceType, ArgField::device_type},
      {arg::kDeviceId, ArgField::device_id},
      {arg::kAddr, ArgField::addr},
      {arg::kMemoryBytes, ArgField::memory_bytes},
      {arg::kOperation, ArgField::operation},
      {arg::kMemoryKind, ArgField::memory_kind},
      {arg::kApi, ArgField::api},
      {arg::kPoolAddress, ArgField::pool_address},
      {arg::kPoolType, ArgField::pool_type},
      {arg::kRole, ArgField::role},
  };
  return table;
}

std::uint64_t hash_id(std::string_view text) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) hash = (hash ^ ch) * 1099511628211ull;
  return hash & 0x7fffffffu;
}

std::int64_t read_int(JsonPullParser& p, std::string_view what) {
  if (p.last() != JsonToken::number) p.fail_type(what, "an integer");
  return p.as_int64(what);
}

double read_number(JsonPullParser& p, std::string_view what) {
  if (p.last() != JsonToken::number) p.fail_type(what, "a number");
  return p.as_double(what);
}

std::string_view read_string(JsonPullParser& p, std::string_view what) {
  if (p.last() != JsonToken::string) p.fail_type(what, "a string");
  return p.text();
}

// An integer that feeds occupancy and size arithmetic: within [low, high], far beyond what CUDA
// reports, so that the arithmetic on it cannot overflow.
std::int64_t read_int_in(JsonPullParser& p, std::string_view what, std::int64_t low, std::int64_t high) {
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

// An address: unsigned as we write it, or signed as Kineto does (intptr_t); its 64 bits either way.
std::uint64_t read_address(JsonPullParser& p, std::string_view what) {
  if (p.last() != JsonToken::number) p.fail_type(what, "an integer");
  if (!p.text().empty() && p.text().front() == '-') return static_cast<std::uint64_t>(p.as_int64(what));
  return p.as_uint64(what);
}

// [x, y, z] (Kineto's grid/block); fewer elements are padded with 1, each within [0, high].
std::array<int, 3> read_dims(JsonPullParser& p, std::string_view what, std::int64_t high) {
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
std::uint64_t read_process_or_thread(JsonPullParser& p, std::string_view what) {
  if (p.last() == JsonToken::string) return hash_id(p.text());
  if (p.last() != JsonToken::number) p.fail_type(what, "an integer or a string");
  const std::int64_t v = p.as_int64(what);
  // Kineto's sanitizeTid; negated in unsigned arithmetic, where INT64_MIN has a negation too.
  return v < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
}

void read_args(JsonPullParser& p, TraceEventArgs& a) {
  if (p.last() != JsonToken::begin_object) p.fail_type(event_key::kArgs, "an object");
  const KeyTable<ArgField>& fields = arg_fields();
  while (p.next() == JsonToken::key) {
    const std::optional<ArgField> field = fields.find(p.text());
    if (!field) {
      p.skip_next_value();
      continue;
    }
    p.next();
    switch (*field) {
      case ArgField::correlation: a.correlation = read_int(p, kArgPath<arg::kCorrelation>.view()); break;
      case ArgField::device: a.device = read_int(p, kArgPath<arg::kDevice>.view()); break;
      case ArgField::context: a.context = read_int(p, kArgPath<arg::kContext>.view()); break;
      case ArgField::stream: a.stream = read_int(p, kArgPath<arg::kStream>.view()); break;
      case ArgField::cbid: a.cbid = read_int(p, kArgPath<arg::kCbid>.view()); break;
      case ArgField::return_value: a.return_value = read_int(p, kArgPath<arg::kReturnValue>.view()); break;
      case ArgField::registers_per_thread:
        a.registers_per_thread = read_int_in(p, kArgPath<arg::kRegistersPerThread>.view(), 0, kMaxRegisters);
        break;
      case ArgField::shared_memory: a.shared_memory = read_int_in(p, kArgPath<arg::kSharedMemory>.view(), 0, kMaxBytes); break;
      case ArgField::static_shared_memory:
        a.static_shared_memory = read_int_in(p, kArgPath<arg::kStaticSharedMemory>.view(), 0, kMaxBytes);
        break;
      case ArgField::dynamic_shared_memory:
        a.dynamic_shared_memory = read_int_in(p, kArgPath<arg::kDynamicSharedMemory>.view(), 0, kMaxBytes);
        break;
      case ArgField::local_memory_per_thread:
        a.local_memory_per_thread = read_int_in(p, kArgPath<arg::kLocalMemoryPerThread>.view(), 0, kMaxBytes);
        break;
      case ArgField::shared_memory_config:
        a.shared_memory_config = read_int_in(p, kArgPath<arg::kSharedMemoryConfig>.view(), 0, kMaxBytes);
        break;
      case ArgField::bytes: a.bytes = read_int(p, kArgPath<arg::kBytes>.view()); break;
      case ArgField::value: a.value = read_int(p, kArgPath<arg::kValue>.view()); break;
      case ArgField::grid: a.grid = read_dims(p, kArgPath<arg::kGrid>.view(), kMaxCount); break;
      case ArgField::block:
        a.block = read_dims(p, kArgPath<arg::kBlock>.view(), kMaxBlockThreads);
        if (std::int64_t{(*a.block)[0]} * (*a.block)[1] * (*a.block)[2] > kMaxBlockThreads)
          p.fail(fmt::format("{}: more than {} threads in a block", kArgPath<arg::kBlock>.view(), kMaxBlockThreads));
        break;
      case ArgField::cluster: a.cluster = read_dims(p, kArgPath<arg::kCluster>.view(), kMaxCount); break;
      case ArgField::carveout: a.carveout_percent = read_int_in(p, kArgPath<arg::kSharedMemoryCarveout>.view(), 0, 100); break;
      case ArgField::achieved_occupancy: a.achieved_occupancy_percent = read_number(p, kArgPath<arg::kAchievedOccupancy>.view()); break;
      case ArgField::copy_kind: a.copy_kind = read_string(p, kArgPath<arg::kCopyKind>.view()); break;
      case ArgField::launch_api: a.launch_api = read_string(p, kArgPath<arg::kLaunchApi>.view()); break;
      case ArgField::case_index: a.case_index = read_int_in(p, kArgPath<arg::kCaseIndex>.view(), -1, kMaxCount - 1); break;
      case ArgField::iteration: a.iteration = read_int_in(p, kArgPath<arg::kIteration>.view(), -1, kMaxCount - 1); break;
      case ArgField::phase: a.phase = read_string(p, kArgPath<arg::kPhase>.view()); break;
      case ArgField::case_label: a.case_label = read_string(p, kArgPath<arg::kCase>.view()); break;
      case ArgField::backend: a.backend = read_string(p, kArgPath<arg::kBackend>.view()); break;
      case ArgField::dram_throughput: a.dram_throughput_percent = read_number(p, kArgPath<arg::kDramThroughput>.view()); break;
      case ArgField::dram_bandwidth: a.dram_gb_per_second = read_number(p, kArgPath<arg::kDramBandwidth>.view()); break;
      case ArgField::tensor_pipe: a.tensor_pipe_percent = read_number(p, kArgPath<arg::kTensorPipeActive>.view()); break;
      case ArgField::device_type: a.device_type = read_int(p, kArgPath<arg::kDeviceType>.view()); break;
      case ArgField::device_id: a.device_id = read_int(p, kArgPath<arg::kDeviceId>.view()); break;
      case ArgField::addr: a.addr = read_address(p, kArgPath<arg::kAddr>.view()); break;
      case ArgField::memory_bytes: a.memory_bytes = read_int(p, kArgPath<arg::kMemoryBytes>.view()); break;
      case ArgField::operation: a.operation = read_string(p, kArgPath<arg::kOperation>.view()); break;
      case ArgField::memory_kind: a.memory_kind = read_string(p, kArgPath<arg::kMemoryKind>.view()); break;
      case ArgField::api: a.api = read_string(p, kArgPath<arg::kApi>.view()); break;
      case ArgField::pool_address: a.pool_address = read_address(p, kArgPath<arg::kPoolAddress>.view()); break;
      case ArgField::pool_type: a.pool_type = read_string(p, kArgPath<arg::kPoolType>.view()); break;
      case ArgField::role: a.role = read_string(p, kArgPath<arg::kRole>.view()); break;
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

// "traceEvents element": an event as errors name it.
constexpr JoinedText kEventElement = join({document_key::kTraceEvents, " element"});

void read_event(JsonPullParser& p, TraceEvent& e) {
  if (p.last() != JsonToken::begin_object) p.fail_type(kEventElement.view(), "an event object");
  while (p.next() == JsonToken::key) {
    const EventField field = event_field(p.text());
    if (field == EventField::other) {
      p.skip_next_value();
      continue;
    }
    p.next();
    switch (field) {
      case EventField::ph: e.ph = read_string(p, kEventPath<event_key::kPh>.view()); break;
      case EventField::cat: e.cat = read_string(p, kEventPath<event_key::kCat>.view()); break;
      case EventField::name:
        if (p.last() == JsonToken::number) e.name = p.text();  // tolerated by Perfetto
        else e.name = read_string(p, kEventPath<event_key::kName>.view());
        break;
      case EventField::pid: e.pid = read_process_or_thread(p, kEventPath<event_key::kPid>.view()); break;
      case EventField::tid: e.tid = read_process_or_thread(p, kEventPath<event_key::kTid>.view()); break;
      case EventField::ts: e.ts_ns = p.as_microseconds_in_ns(kEventPath<event_key::kTs>.view()); break;
      case EventField::dur: e.dur_ns = p.as_microseconds_in_ns(kEventPath<event_key::kDur>.view()); break;
      case EventField::id:
        if (p.last() == JsonToken::number) e.id = p.as_uint64(kEventPath<event_key::kId>.view());
        else if (p.last() == JsonToken::string) e.id = hash_id(p.text());
        else p.fail_type(kEventPath<event_key::kId>.view(), "an integer or a string");
        break;
      case EventField::bp: e.bp = read_string(p, kEventPath<event_key::kBp>.view()); break;
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

bool reads_arg(std::string_view key) { return arg_fields().find(key).has_value(); }

void TraceEventArgs::clear() {
  // Field by field: the text fields keep their storage, so no event allocates.
  for (std::optional<std::int64_t>* v :
       {&correlation, &device, &context, &stream, &cbid, &return_value, &registers_per_thread, &shared_memory,
        &static_shared_memory, &dynamic_shared_memory, &local_memory_per_thread, &shared_memory_config, &bytes, &value,
        &carveout_percent, &case_index, &iteration, &device_type, &device_id, &memory_bytes})
    v->reset();
  addr.reset();
  pool_address.reset();
  for (std::optional<std::array<int, 3>>* v : {&grid, &block, &cluster}) v->reset();
  for (std::optional<double>* v : {&achieved_occupancy_percent,
                                   &dram_throughput_percent, &dram_gb_per_second, &tensor_pipe_percent})
    v->reset();
  for (ReusableText* v : {&copy_kind, &launch_api, &phase, &case_label, &backend, &metadata_name, &metadata_labels,
                          &operation, &memory_kind, &api, &pool_type, &role})
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
  namespace key = device_key;
  DeviceProperties d;
  d.id = json_integer_in(j, key::kId.data(), 0, 0, kCount);
  d.name = j.value(key::kName.data(), "");
  d.compute_major = json_integer_in(j, key::kComputeMajor.data(), 0, 0, 1000);
  d.compute_minor = json_integer_in(j, key::kComputeMinor.data(), 0, 0, 1000);
  d.sm_count = json_integer_in(j, key::kNumSms.data(), 0, 0, kCount);
  d.max_threads_per_block = json_integer_in(j, key::kMaxThreadsPerBlock.data(), 1024, 1, kCount);
  d.max_threads_per_sm = json_integer_in(j, key::kMaxThreadsPerMultiprocessor.data(), 2048, 1, kCount);
  d.max_blocks_per_sm = json_integer_in(j, key::kMaxBlocksPerMultiprocessor.data(),
                                        default_max_blocks_per_sm(d.compute_major, d.compute_minor), 1, kCount);
  d.regs_per_block = json_integer_in(j, key::kRegsPerBlock.data(), 65536, 1, kCount);
  d.regs_per_sm = json_integer_in(j, key::kRegsPerMultiprocessor.data(), 65536, 1, kCount);
  d.warp_size = json_integer_in(j, key::kWarpSize.data(), 32, 1, 1024);
  d.shared_mem_per_block = json_integer_in<std::int64_t>(j, key::kSharedMemPerBlock.data(), 49152, 0, kBytes);
  d.shared_mem_per_sm = json_integer_in<std::int64_t>(j, key::kSharedMemPerMultiprocessor.data(), 0, 0, kBytes);
  d.shared_mem_per_block_optin =
      json_integer_in<std::int64_t>(j, key::kSharedMemPerBlockOptin.data(), d.shared_mem_per_block, 0, kBytes);
  d.reserved_shared_mem_per_block =
      json_integer_in<std::int64_t>(j, key::kReservedSharedMemPerBlock.data(), d.compute_major >= 8 ? 1024 : 0, 0, kBytes);
  d.total_global_mem = json_integer_in<std::int64_t>(j, key::kTotalGlobalMem.data(), 0, 0, kBytes);
  d.l2_cache_bytes = json_integer_in<std::int64_t>(j, key::kL2CacheSize.data(), 0, 0, kBytes);
  d.clock_rate_khz = json_integer_in(j, key::kClockRateKHz.data(), 0, 0, kCount * 1000);
  d.memory_clock_rate_khz = json_integer_in(j, key::kMemoryClockRateKHz.data(), 0, 0, kCount * 1000);
  d.memory_bus_width_bits = json_integer_in(j, key::kMemoryBusWidth.data(), 0, 0, kCount);
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
    if (p.last() != JsonToken::begin_array) p.fail_type(kQuoted<document_key::kTraceEvents>.view(), "an array of events");
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
    if (key == document_key::kTraceEvents) {
      saw_events = true;
      read_events();
    } else if (key == document_key::kDeviceProperties) {
      if (p.last() != JsonToken::begin_array) p.fail_type(kQuoted<document_key::kDeviceProperties>.view(), "an array of objects");
      const nlohmann::json devices = p.read_value();
      for (const nlohmann::json& d : devices) {
        try {
          if (!d.is_object()) throw std::runtime_error("an element is not an object");
          doc.devices.push_back(device_properties_from_json(d));
        } catch (const std::exception& e) {
          p.fail_at(key_offset, fmt::format("{}: {}", kQuoted<document_key::kDeviceProperties>.view(), e.what()));
        }
      }
    } else if (key == document_key::kBaseTimeNanoseconds) {
      doc.base_time_ns = p.as_uint64(kQuoted<document_key::kBaseTimeNanoseconds>.view());
    } else if (key == document_key::kDistributedInfo && p.last() == JsonToken::begin_object) {
      const nlohmann::json info = p.read_value();
      const auto rank = info.find(distributed_key::kRank);
      if (rank != info.end() && rank->is_number_integer()) doc.rank = rank->get<int>();
    } else if (key == document_key::kAttnprof && p.last() == JsonToken::begin_object) {
      doc.attnprof = p.read_value();
    } else if (key == document_key::kTraceName && p.last() == JsonToken::string) {
      doc.trace_name = p.text();
    } else if (key == summary_document::kSchemaKey && p.last() == JsonToken::string) {
      schema = p.text();
    } else {
      p.skip_value();
    }
  }
  p.next();  // end of input, or an error for trailing data

  if (!saw_events) {
    std::string why = fmt::format("its top-level object has no {} array (it has: {})", kQuoted<document_key::kTraceEvents>.view(),
                                  keys.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(keys, ", ")));
    if (schema == summary_document::kSchema)
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
  if (text.starts_with(event_name::kMemcpyPrefix)) text.remove_prefix(event_name::kMemcpyPrefix.size());
  const auto space = text.find(' ');
  kind = parse_memcpy_kind(std::string(text.substr(0, space)));
  if (space == std::string_view::npos) return;
  const auto open = text.find('(', space);
  const auto arrow = text.find(event_name::kMemcpyArrow, space);
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || arrow == std::string_view::npos || close == std::string_view::npos ||
      !(open < arrow && arrow < close))
    return;
  src = std::string(text.substr(open + 1, arrow - open - 1));
  const std::size_t dst_start = arrow + event_name::kMemcpyArrow.size();
  dst = std::string(text.substr(dst_start, close - dst_start));
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
        fmt::format("the trace has no {}: occupancy is computed for an NVIDIA H200 (sm_90, 132 SMs)",
                    document_key::kDeviceProperties));
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

void TraceEventConverter::set_note(std::optional<std::size_t>& slot, std::string text) {
  if (!slot) {
    slot = notes_.size();
    notes_.emplace_back();
  }
  notes_[*slot] = std::move(text);
}

std::optional<MemoryActivity> TraceEventConverter::memory(const TraceEvent& e, std::uint64_t start) {
  const TraceEventArgs& a = e.args;
  // Ours name the memory kind; Kineto's are CUDA (1) or some other device's memory, the CPU's (0) included.
  if (!a.memory_kind && a.device_type.value_or(kineto_device_type::kCuda) != kineto_device_type::kCuda) {
    ++foreign_memory_events_;
    set_note(foreign_memory_note_,
             fmt::format("{} \"{}\" event(s) of memory not on a CUDA device ({} other than {}) left out",
                         foreign_memory_events_, event_name::kMemory, kQuoted<arg::kDeviceType>.view(),
                         kineto_device_type::kCuda));
    return std::nullopt;
  }
  MemoryActivity m;
  const std::int64_t bytes = a.memory_bytes.value_or(0);
  std::optional<MemoryOperation> operation;
  if (a.operation) operation = parse_memory_operation(*a.operation);
  m.operation = operation.value_or(bytes < 0 ? MemoryOperation::release : MemoryOperation::allocation);
  m.bytes = bytes < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(bytes) : static_cast<std::uint64_t>(bytes);
  m.start_ns = start;
  m.address = a.addr.value_or(0);
  m.memory_kind = a.memory_kind.value_or(memory_kind::kDevice);  // Kineto's CUDA events: the caching allocator's
  m.device = a.device_id && *a.device_id >= 0 ? u32(a.device_id) : 0;
  m.context = u32(a.context);
  m.stream = u32(a.stream);
  m.process = static_cast<std::uint32_t>(e.pid);
  m.thread = static_cast<std::uint32_t>(e.tid);
  m.correlation = u32(a.correlation);
  m.api = a.api.value_or("");
  m.pool_address = a.pool_address.value_or(0);
  m.pool_type = a.pool_type.value_or("");
  m.role = a.role.value_or("");
  m.tag = tag_of(a);

  const LiveAllocation key{e.pid, m.address};
  if (m.operation == MemoryOperation::allocation) {
    live_allocations_.insert(key);
  } else if (live_allocations_.erase(key) == 0) {
    ++releases_without_allocation_;
    set_note(releases_note_, fmt::format("{} memory release(s) of an allocation the trace does not hold (made before "
                                         "it began)",
                                         releases_without_allocation_));
  }
  return m;
}

std::optional<Activity> TraceEventConverter::convert(const TraceEvent& e, const TraceDocument& doc) {
  if (e.ph == ph::kInstant && e.name == event_name::kMemory && e.ts_ns) {
    std::optional<MemoryActivity> m = memory(e, to_ns(*e.ts_ns, doc));
    if (!m) return std::nullopt;
    return std::move(*m);
  }
  if (e.ph != ph::kComplete || !e.ts_ns) return std::nullopt;
  const std::string& cat = e.cat;
  const std::uint64_t start = to_ns(*e.ts_ns, doc);
  const std::uint64_t end = start + static_cast<std::uint64_t>(std::max<std::int64_t>(0, e.dur_ns.value_or(0)));
  const TraceEventArgs& a = e.args;

  if (cat == category::kKernel) return kernel(e, doc, start, end);
  if (cat == category::kGpuMemcpy) {
    MemcpyActivity m;
    read_gpu_fields(e, start, end, m);
    parse_memcpy_name(e.name, m.kind, m.src_memory, m.dst_memory);
    if (a.copy_kind) m.kind = parse_memcpy_kind(*a.copy_kind);
    m.bytes = static_cast<std::uint64_t>(a.bytes.value_or(0));
    return m;
  }
  if (cat == category::kGpuMemset) {
    MemsetActivity m;
    read_gpu_fields(e, start, end, m);
    m.bytes = static_cast<std::uint64_t>(a.bytes.value_or(0));
    m.value = u32(a.value);
    m.memory = parse_memset_memory(e.name);
    return m;
  }
  if (cat == category::kCudaRuntime || cat == category::kCudaDriver) {
    ApiCall c;
    c.domain = cat == category::kCudaDriver ? ApiDomain::driver : ApiDomain::runtime;
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
  if (cat == category::kUserAnnotation || cat == category::kGpuUserAnnotation) {
    Annotation n;
    n.name = e.name;
    n.start_ns = start;
    n.end_ns = end;
    n.on_gpu = cat == category::kGpuUserAnnotation;
    n.process = static_cast<std::uint32_t>(e.pid);
    n.thread = static_cast<std::uint32_t>(e.tid);
    n.tag = tag_of(a);
    return n;
  }
  if (cat == category::kOverhead) {
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
