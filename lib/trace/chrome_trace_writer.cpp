#include "trace/chrome_trace_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "trace/json_text.hpp"
#include "trace/key_text.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof::trace {
namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

// Sort order of tracks in Perfetto: the host process first, then one process per GPU.
constexpr int kHostSortIndex = 0;
constexpr int kGpuSortIndexBase = 100;

std::string json_of(std::string_view text) {
  fmt::memory_buffer b;
  append_json_string(b, text);
  return fmt::to_string(b);
}

// Appending without a format string to interpret: events are written millions at a time, so
// literals are fixed-size copies and numbers go straight into the buffer with to_chars.
void append_raw(fmt::memory_buffer& b, const char* text, std::size_t n) {
  const std::size_t size = b.size();
  if (b.capacity() - size < n) b.reserve(size + n);
  std::memcpy(b.data() + size, text, n);
  b.resize(size + n);
}

template <std::size_t N>
void put(fmt::memory_buffer& b, const char (&literal)[N]) {
  const std::size_t size = b.size();
  if (b.capacity() - size < N) b.reserve(size + N);
  std::memcpy(b.data() + size, literal, N - 1);  // a constant size: a few moves, no call
  b.resize(size + N - 1);
}

void put(fmt::memory_buffer& b, std::string_view text) { append_raw(b, text.data(), text.size()); }
// Text joined at compile time: its size is a constant once inlined, a copy as cheap as a literal's.
void put(fmt::memory_buffer& b, const JoinedText& text) { append_raw(b, text.chars.data(), text.size); }

// `{"ph":"X","cat":"<category>","name":`: how every complete event begins.
consteval JoinedText complete_event_head(std::string_view category) {
  return join({"{\"", event_key::kPh, "\":\"", ph::kComplete, "\",\"", event_key::kCat, "\":\"", category, "\",\"",
               event_key::kName, "\":"});
}

// `{"ph":"s","id":`: how a flow's start or end begins.
consteval JoinedText flow_event_head(std::string_view phase) {
  return join({"{\"", event_key::kPh, "\":\"", phase, "\",\"", event_key::kId, "\":"});
}

// `,"cat":"ac2g","name":"ac2g"`: what every flow event says it is.
constexpr JoinedText kFlowIdentity = join({",\"", event_key::kCat, "\":\"", category::kFlow, "\",\"", event_key::kName,
                                           "\":\"", category::kFlow, "\""});
// `,"bp":"e"`: a flow's end binds to the slice that encloses it.
constexpr JoinedText kFlowBindsEnclosing = join({",\"", event_key::kBp, "\":\"", ph::kEnclosingSlice, "\""});
// `,"args":{"<key>":`: the first arg of an event.
template <const std::string_view& Key>
constexpr JoinedText kFirstArg = join({",\"", event_key::kArgs, "\":{\"", Key, "\":"});

template <typename Integer>
void put_int(fmt::memory_buffer& b, Integer v) {
  constexpr std::size_t kRoom = 24;  // a 64-bit integer and its sign
  const std::size_t size = b.size();
  if (b.capacity() - size < kRoom) b.reserve(size + kRoom);
  char* const end = std::to_chars(b.data() + size, b.data() + size + kRoom, v).ptr;
  b.resize(static_cast<std::size_t>(end - b.data()));
}

// {:.<precision>f} and {:.<precision>g}, as fmt writes them (both follow printf).
void put_double(fmt::memory_buffer& b, double v, std::chars_format format, int precision) {
  if (!std::isfinite(v)) {
    put(b, "null");  // JSON has no inf or NaN; "inf" would make the whole trace unreadable
    return;
  }
  char text[64];
  const auto [end, error] = std::to_chars(text, text + sizeof text, v, format, precision);
  if (error == std::errc()) append_raw(b, text, static_cast<std::size_t>(end - text));
  else if (format == std::chars_format::fixed) fmt::format_to(fmt::appender(b), "{:.{}f}", v, precision);  // huge values
  else fmt::format_to(fmt::appender(b), "{:.{}g}", v, precision);
}

// `<path>.tmp`, in a directory made if missing: the trace takes its name only when complete.
std::filesystem::path temp_path_of(const std::filesystem::path& path) {
  std::filesystem::path temp = path;
  temp += ".tmp";
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  return temp;
}

// A metric that is not a finite number is left out, not written as null: the reader takes it as a number.
bool has_finite(const std::optional<double>& v) { return v && std::isfinite(*v); }

void put_fixed(fmt::memory_buffer& b, double v, int precision) { put_double(b, v, std::chars_format::fixed, precision); }
void put_general(fmt::memory_buffer& b, double v, int precision) { put_double(b, v, std::chars_format::general, precision); }

// "12.345": microseconds with a three-digit nanosecond fraction.
void put_us(fmt::memory_buffer& b, std::uint64_t ns) {
  put_int(b, ns / 1000);
  const unsigned fraction = static_cast<unsigned>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + fraction / 100), static_cast<char>('0' + fraction / 10 % 10),
                          static_cast<char>('0' + fraction % 10)};
  append_raw(b, digits, 4);
}

// One deviceProperties entry, in Kineto's names: {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": ...}.
void format_device(fmt::memory_buffer& b, const DeviceProperties& d) {
  namespace key = device_key;
  const std::pair<std::string_view, std::int64_t> numbers[] = {
      {key::kTotalGlobalMem, d.total_global_mem},
      {key::kComputeMajor, d.compute_major},
      {key::kComputeMinor, d.compute_minor},
      {key::kMaxThreadsPerBlock, d.max_threads_per_block},
      {key::kMaxThreadsPerMultiprocessor, d.max_threads_per_sm},
      {key::kMaxBlocksPerMultiprocessor, d.max_blocks_per_sm},
      {key::kRegsPerBlock, d.regs_per_block},
      {key::kRegsPerMultiprocessor, d.regs_per_sm},
      {key::kWarpSize, d.warp_size},
      {key::kSharedMemPerBlock, d.shared_mem_per_block},
      {key::kSharedMemPerMultiprocessor, d.shared_mem_per_sm},
      {key::kSharedMemPerBlockOptin, d.shared_mem_per_block_optin},
      {key::kReservedSharedMemPerBlock, d.reserved_shared_mem_per_block},
      {key::kNumSms, d.sm_count},
      {key::kL2CacheSize, d.l2_cache_bytes},
      {key::kClockRateKHz, d.clock_rate_khz},
      {key::kMemoryClockRateKHz, d.memory_clock_rate_khz},
      {key::kMemoryBusWidth, d.memory_bus_width_bits},
  };
  auto out = std::back_inserter(b);
  fmt::format_to(out, "{{\"{}\": {}, \"{}\": {}", key::kId, d.id, key::kName, json_of(d.name));
  for (const auto& [name, value] : numbers) fmt::format_to(out, ", \"{}\": {}", name, value);
  b.push_back('}');
}

}  // namespace

void append_json_text(fmt::memory_buffer& out, std::string_view text) {
  const char* const end = text.data() + text.size();
  for (const char* run = text.data();;) {
    const char* special = find_json_special<true>(run, end);
    append_raw(out, run, static_cast<std::size_t>(special - run));
    if (special == end) return;
    run = special + 1;
    const unsigned char c = static_cast<unsigned char>(*special);
    if (c > 0x7f) {
      // Names from other traces or the OS may hold bytes that are not UTF-8; JSON must be.
      if (const std::size_t n = utf8_character_length(special, end); n > 0) {
        append_raw(out, special, n);
        run = special + n;
      } else {
        out.append(std::string_view("\\ufffd"));  // one per byte that starts no character
      }
      continue;
    }
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      case '\b': out.append(std::string_view("\\b")); break;
      case '\f': out.append(std::string_view("\\f")); break;
      default: fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
    }
  }
}

void append_json_string(fmt::memory_buffer& out, std::string_view text) {
  out.push_back('"');
  append_json_text(out, text);
  out.push_back('"');
}

void append_relative_us(fmt::memory_buffer& out, std::uint64_t ns, std::uint64_t base_ns) {
  // Records from before the base (clock skew between host and GPU) clamp to 0, as Kineto does.
  put_us(out, ns > base_ns ? ns - base_ns : 0);
}

ChromeTraceWriter::ChromeTraceWriter(std::filesystem::path path, TraceHeader header, TraceWriteOptions options)
    : path_(std::move(path)),
      temp_path_(temp_path_of(path_)),
      output_(temp_path_, options.format == TraceFormat::json_gz ? Compression::gzip : Compression::none,
              options.gzip_level),
      header_(std::move(header)) {
  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "{{\n  \"{}\": 1,\n  \"{}\": [", document_key::kSchemaVersion, document_key::kDeviceProperties);
  for (std::size_t i = 0; i < header_.devices.size(); ++i) {
    fmt::format_to(out, "{}\n    ", i == 0 ? "" : ",");
    format_device(buffer_, header_.devices[i]);
  }
  fmt::format_to(out, "\n  ],\n");
  if (header_.rank || header_.local_rank || header_.world_size) {
    std::string info;
    auto add = [&](std::string_view key, const std::optional<int>& value) {
      if (value) info += fmt::format("{}\"{}\": {}", info.empty() ? "" : ", ", key, *value);
    };
    add(distributed_key::kRank, header_.rank);
    add(distributed_key::kLocalRank, header_.local_rank);
    add(distributed_key::kWorldSize, header_.world_size);
    fmt::format_to(out, "  \"{}\": {{{}}},\n", document_key::kDistributedInfo, info);
  }
  fmt::format_to(out, "  \"{}\": \"ms\",\n  \"{}\": {},\n  \"{}\": [", document_key::kDisplayTimeUnit,
                 document_key::kBaseTimeNanoseconds, header_.base_time_ns, document_key::kTraceEvents);

  source_.host_process = header_.host_process;
  source_.host_process_name = header_.host_process_name;
  if (!header_.host_process_name.empty()) {
    host_processes_.insert(header_.host_process);
    write_metadata_event(metadata::kProcessName, header_.host_process, std::nullopt, metadata::kNameArg,
                         json_of(header_.host_process_name));
    write_metadata_event(metadata::kProcessSortIndex, header_.host_process, std::nullopt, metadata::kSortIndexArg,
                         std::to_string(kHostSortIndex));
  }
}

ChromeTraceWriter::~ChromeTraceWriter() {
  if (finished_) return;
  try {
    finish(nlohmann::json{{"incomplete", true}});
  } catch (...) {
    // A destructor has nowhere to report to; the .tmp file stays behind as evidence.
  }
}

void ChromeTraceWriter::add_case(CaseName name) {
  set_case(cases_.empty() ? 0 : cases_.rbegin()->first + 1, std::move(name));
}

void ChromeTraceWriter::set_case(std::size_t index, CaseName name) {
  // Escaped once here, copied into every event of the case.
  fmt::memory_buffer args;
  put(args, kMember<arg::kBackend>);
  append_json_string(args, name.backend);
  put(args, kMember<arg::kCase>);
  append_json_string(args, name.label);
  cases_[index] = {std::move(name), fmt::to_string(args)};
  last_case_index_ = static_cast<std::size_t>(-1);  // it may have been looked up, and missing
}

void ChromeTraceWriter::set_source(TraceSource source) { source_ = std::move(source); }

void ChromeTraceWriter::begin_event() {
  put(buffer_, events_ == 0 ? std::string_view("\n") : std::string_view(",\n"));
  ++events_;
}

void ChromeTraceWriter::flush_if_large() {
  if (buffer_.size() < kFlushBytes) return;
  output_.write(std::string_view(buffer_.data(), buffer_.size()));
  buffer_.clear();
}

void ChromeTraceWriter::write_metadata_event(std::string_view what, std::uint32_t pid,
                                             std::optional<std::uint32_t> tid, std::string_view key,
                                             std::string_view value_json) {
  static constexpr JoinedText kHead = join({"{\"", event_key::kPh, "\":\"", ph::kMetadata, "\",\"", event_key::kName, "\":\""});
  begin_event();
  put(buffer_, kHead);
  put(buffer_, what);
  put(buffer_, "\"");
  put(buffer_, kMember<event_key::kPid>);
  put_int(buffer_, pid);
  if (tid) {
    put(buffer_, kMember<event_key::kTid>);
    put_int(buffer_, *tid);
  }
  static constexpr JoinedText kArgsOpen = join({",\"", event_key::kArgs, "\":{\""});
  put(buffer_, kArgsOpen);
  put(buffer_, key);
  put(buffer_, "\":");
  put(buffer_, value_json);
  put(buffer_, "}}");
}

void ChromeTraceWriter::ensure_host_track(std::uint32_t thread) {
  const std::uint32_t pid = source_.host_process;
  if (last_host_track_ == std::pair{pid, thread}) return;  // the common case: the same thread again
  last_host_track_ = {pid, thread};
  if (host_processes_.insert(pid).second) {
    const std::string name =
        source_.host_process_name.empty() ? fmt::format("process {}", pid) : source_.host_process_name;
    write_metadata_event(metadata::kProcessName, pid, std::nullopt, metadata::kNameArg, json_of(name));
    write_metadata_event(metadata::kProcessSortIndex, pid, std::nullopt, metadata::kSortIndexArg,
                         std::to_string(source_.sort_index_base + kHostSortIndex));
  }
  if (!host_threads_.insert({pid, thread}).second) return;
  write_metadata_event(metadata::kThreadName, pid, thread, metadata::kNameArg, json_of(fmt::format("host thread {}", thread)));
  write_metadata_event(metadata::kThreadSortIndex, pid, thread, metadata::kSortIndexArg, std::to_string(thread));
}

void ChromeTraceWriter::ensure_gpu_track(std::uint32_t device, std::uint32_t stream) {
  const std::uint32_t pid = gpu_pid(device);
  if (last_gpu_track_ == std::pair{pid, stream}) return;  // the common case: the same stream again
  last_gpu_track_ = {pid, stream};
  ensure_gpu_process(device);
  if (gpu_tracks_.insert({pid, stream}).second) {
    write_metadata_event(metadata::kThreadName, pid, stream, metadata::kNameArg, json_of(fmt::format("stream {}", stream)));
    write_metadata_event(metadata::kThreadSortIndex, pid, stream, metadata::kSortIndexArg, std::to_string(stream));
  }
}

void ChromeTraceWriter::ensure_gpu_process(std::uint32_t device) {
  const std::uint32_t pid = gpu_pid(device);
  if (gpu_processes_.insert(pid).second) {
    std::string name = source_.gpu_process_prefix + fmt::format("{}{}", event_name::kGpuProcessPrefix, device);
    for (const DeviceProperties& d : header_.devices)
      if (static_cast<std::uint32_t>(d.id) == device) {
        name += ": " + d.name;
        break;
      }
    write_metadata_event(metadata::kProcessName, pid, std::nullopt, metadata::kNameArg, json_of(name));
    write_metadata_event(metadata::kProcessSortIndex, pid, std::nullopt, metadata::kSortIndexArg,
                         std::to_string(source_.sort_index_base + kGpuSortIndexBase + static_cast<int>(device)));
  }
}

void ChromeTraceWriter::append_ts(std::uint64_t ns) {
  put(buffer_, kMember<event_key::kTs>);
  append_relative_us(buffer_, ns, header_.base_time_ns);
}

void ChromeTraceWriter::append_dur(std::uint64_t start_ns, std::uint64_t end_ns) {
  put(buffer_, kMember<event_key::kDur>);
  put_us(buffer_, end_ns > start_ns ? end_ns - start_ns : 0);
}

void ChromeTraceWriter::write_case_args(const SweepTag& tag) {
  if (tag.case_index < 0) return;
  const auto index = static_cast<std::size_t>(tag.case_index);
  if (last_case_index_ != index) {
    const auto it = cases_.find(index);
    last_case_ = it == cases_.end() ? nullptr : &it->second;
    last_case_index_ = index;
  }
  if (last_case_ != nullptr) put(buffer_, last_case_->args);
  put(buffer_, kMember<arg::kCaseIndex>);
  put_int(buffer_, tag.case_index);
  put(buffer_, kMember<arg::kPhase>);
  put(buffer_, "\"");
  put(buffer_, to_string(tag.phase));
  put(buffer_, "\"");
  if (tag.iteration >= 0) {
    put(buffer_, kMember<arg::kIteration>);
    put_int(buffer_, tag.iteration);
  }
}

void ChromeTraceWriter::write_flow_start(std::uint64_t id, std::uint64_t ts_ns, std::uint32_t thread) {
  begin_event();
  static constexpr JoinedText kHead = flow_event_head(ph::kFlowStart);
  put(buffer_, kHead);
  put_int(buffer_, id);
  put(buffer_, kMember<event_key::kPid>);
  put_int(buffer_, source_.host_process);
  put(buffer_, kMember<event_key::kTid>);
  put_int(buffer_, thread);
  append_ts(ts_ns);
  put(buffer_, kFlowIdentity);
  put(buffer_, "}");
}

void ChromeTraceWriter::write_flow_end(std::uint64_t id, std::uint64_t ts_ns, std::uint32_t device,
                                       std::uint32_t stream) {
  begin_event();
  static constexpr JoinedText kHead = flow_event_head(ph::kFlowEnd);
  put(buffer_, kHead);
  put_int(buffer_, id);
  put(buffer_, kMember<event_key::kPid>);
  put_int(buffer_, gpu_pid(device));
  put(buffer_, kMember<event_key::kTid>);
  put_int(buffer_, stream);
  append_ts(ts_ns);
  put(buffer_, kFlowIdentity);
  put(buffer_, kFlowBindsEnclosing);
  put(buffer_, "}");
}

void ChromeTraceWriter::write_track(std::uint32_t pid, std::uint32_t tid) {
  put(buffer_, kMember<event_key::kPid>);
  put_int(buffer_, pid);
  put(buffer_, kMember<event_key::kTid>);
  put_int(buffer_, tid);
}

void ChromeTraceWriter::begin_gpu_event(const GpuActivity& g) {
  ensure_gpu_track(g.device, g.stream);
  begin_event();
}

void ChromeTraceWriter::write_gpu_placement(const GpuActivity& g) {
  write_track(gpu_pid(g.device), g.stream);
  append_ts(g.start_ns);
  append_dur(g.start_ns, g.end_ns);
  put(buffer_, kFirstArg<arg::kDevice>);
  put_int(buffer_, g.device);
  put(buffer_, kMember<arg::kContext>);
  put_int(buffer_, g.context);
  put(buffer_, kMember<arg::kStream>);
  put_int(buffer_, g.stream);
  put(buffer_, kMember<arg::kCorrelation>);
  put_int(buffer_, g.correlation);
}

void ChromeTraceWriter::write_bandwidth(const GpuActivity& g, std::uint64_t bytes) {
  const double ns = static_cast<double>(g.end_ns > g.start_ns ? g.end_ns - g.start_ns : 0);
  put(buffer_, kMember<arg::kMemoryBandwidth>);
  put_fixed(buffer_, ns > 0 ? bytes / ns : 0.0, 3);
}

void ChromeTraceWriter::end_gpu_event(const GpuActivity& g) {
  if (!g.launch_api.empty()) {
    put(buffer_, kMember<arg::kLaunchApi>);
    append_json_string(buffer_, g.launch_api);
  }
  write_case_args(g.tag);
  put(buffer_, "}}");
  if (source_.automatic_flows && !g.launch_api.empty()) write_flow_end(g.correlation, g.start_ns, g.device, g.stream);
  flush_if_large();
}

ChromeTraceWriter::KernelShape ChromeTraceWriter::KernelShape::of(const KernelActivity& k) {
  return {k.device, k.grid, k.block, k.cluster, k.registers_per_thread, k.static_shared_bytes,
          k.dynamic_shared_bytes, k.local_bytes_per_thread, k.shared_memory_executed, k.carveout_percent,
          k.occupancy};
}

std::size_t ChromeTraceWriter::KernelShape::slot(std::size_t slots) const {
  std::size_t h = device;
  for (int v : {grid[0], grid[1], grid[2], block[0], block[1], block[2], registers, static_shared, dynamic_shared})
    h = h * 0x9e3779b97f4a7c15ull + static_cast<std::size_t>(v);
  return (h ^ (h >> 29)) % slots;
}

void ChromeTraceWriter::write_kernel_shape_args(const KernelActivity& k) {
  KernelShape shape = KernelShape::of(k);
  FormattedShape& cached = kernel_shapes_[shape.slot(kernel_shapes_.size())];
  if (cached.json.empty() || !(cached.shape == shape)) {
    const std::size_t start = buffer_.size();
    format_kernel_shape_args(k);
    cached.shape = std::move(shape);
    cached.json.assign(buffer_.data() + start, buffer_.size() - start);
    return;
  }
  put(buffer_, cached.json);
}

// registers ... occupancy: what the launch configuration fixes, the same for every launch of it.
void ChromeTraceWriter::format_kernel_shape_args(const KernelActivity& k) {
  int sm_count = 0, max_threads_per_sm = 0;
  for (const DeviceProperties& p : header_.devices)
    if (static_cast<std::uint32_t>(p.id) == k.device) {
      sm_count = p.sm_count;
      max_threads_per_sm = p.max_threads_per_sm;
    }
  const double grid_blocks = static_cast<double>(k.grid[0]) * k.grid[1] * k.grid[2];
  const int block_threads = k.block[0] * k.block[1] * k.block[2];
  const double blocks_per_sm = sm_count > 0 ? grid_blocks / sm_count : 0;
  const double warps_per_sm = blocks_per_sm * ((block_threads + 31) / 32);
  put(buffer_, kMember<arg::kRegistersPerThread>);
  put_int(buffer_, k.registers_per_thread);
  put(buffer_, kMember<arg::kSharedMemory>);
  put_int(buffer_, k.static_shared_bytes + k.dynamic_shared_bytes);
  put(buffer_, kMember<arg::kStaticSharedMemory>);
  put_int(buffer_, k.static_shared_bytes);
  put(buffer_, kMember<arg::kDynamicSharedMemory>);
  put_int(buffer_, k.dynamic_shared_bytes);
  put(buffer_, kMember<arg::kLocalMemoryPerThread>);
  put_int(buffer_, k.local_bytes_per_thread);
  put(buffer_, kMember<arg::kBlocksPerSm>);
  put_general(buffer_, blocks_per_sm, 6);
  put(buffer_, kMember<arg::kWarpsPerSm>);
  put_general(buffer_, warps_per_sm, 6);
  auto put_dims = [&](const std::array<int, 3>& d) {
    put(buffer_, "[");
    put_int(buffer_, d[0]);
    put(buffer_, ",");
    put_int(buffer_, d[1]);
    put(buffer_, ",");
    put_int(buffer_, d[2]);
    put(buffer_, "]");
  };
  put(buffer_, kMember<arg::kGrid>);
  put_dims(k.grid);
  put(buffer_, kMember<arg::kBlock>);
  put_dims(k.block);
  if (k.cluster[0] > 0) {
    put(buffer_, kMember<arg::kCluster>);
    put_dims(k.cluster);
  }
  if (k.shared_memory_executed > 0) {
    put(buffer_, kMember<arg::kSharedMemoryConfig>);
    put_int(buffer_, k.shared_memory_executed);
  }
  if (k.carveout_percent >= 0) {
    put(buffer_, kMember<arg::kSharedMemoryCarveout>);
    put_int(buffer_, k.carveout_percent);
  }
  if (k.occupancy.valid) {
    // Kineto's estimate: theoretical blocks/SM capped by the blocks the grid really has.
    const double resident_blocks = std::min<double>(k.occupancy.active_blocks_per_sm, blocks_per_sm);
    const double kineto_estimate =
        max_threads_per_sm > 0 ? std::round(100.0 * resident_blocks * block_threads / max_threads_per_sm) : 0;
    put(buffer_, kMember<arg::kEstimatedAchievedOccupancy>);
    put_fixed(buffer_, kineto_estimate, 0);
    put(buffer_, kMember<arg::kTheoreticalOccupancy>);
    put_fixed(buffer_, k.occupancy.theoretical_percent, 2);
    put(buffer_, kMember<arg::kOccupancyLimiter>);
    append_json_string(buffer_, k.occupancy.limiter);
    static constexpr JoinedText kOccupancyOpen =
        join({",\"", arg::kOccupancy, "\":{\"", occupancy_key::kActiveBlocksPerMultiprocessor, "\":"});
    put(buffer_, kOccupancyOpen);
    put_int(buffer_, k.occupancy.active_blocks_per_sm);
    put(buffer_, kMember<occupancy_key::kBlockLimitRegs>);
    put_int(buffer_, k.occupancy.block_limit_registers);
    put(buffer_, kMember<occupancy_key::kBlockLimitSharedMem>);
    put_int(buffer_, k.occupancy.block_limit_shared_memory);
    put(buffer_, kMember<occupancy_key::kBlockLimitWarps>);
    put_int(buffer_, k.occupancy.block_limit_warps);
    put(buffer_, kMember<occupancy_key::kBlockLimitBlocks>);
    put_int(buffer_, k.occupancy.block_limit_blocks);
    put(buffer_, "}");
  }
}

void ChromeTraceWriter::write(const KernelActivity& k) {
  begin_gpu_event(k);
  static constexpr JoinedText kHead = complete_event_head(category::kKernel);
  put(buffer_, kHead);
  append_json_string(buffer_, k.name);
  write_gpu_placement(k);
  write_kernel_shape_args(k);
  if (has_finite(k.achieved_occupancy_percent)) {
    put(buffer_, kMember<arg::kAchievedOccupancy>);
    put_fixed(buffer_, *k.achieved_occupancy_percent, 2);
  }
  if (has_finite(k.dram_throughput_percent)) {
    put(buffer_, kMember<arg::kDramThroughput>);
    put_fixed(buffer_, *k.dram_throughput_percent, 2);
  }
  if (has_finite(k.dram_bytes_per_second)) {
    put(buffer_, kMember<arg::kDramBandwidth>);
    put_fixed(buffer_, *k.dram_bytes_per_second / 1e9, 3);
  }
  if (has_finite(k.tensor_pipe_percent)) {
    put(buffer_, kMember<arg::kTensorPipeActive>);
    put_fixed(buffer_, *k.tensor_pipe_percent, 2);
  }
  end_gpu_event(k);
}

void ChromeTraceWriter::write(const MemcpyActivity& m) {
  begin_gpu_event(m);
  // The name, "Memcpy DtoD (Device -> Device)", escaped piece by piece: no string is built.
  static constexpr JoinedText kHead = join({complete_event_head(category::kGpuMemcpy).view(), "\"", event_name::kMemcpyPrefix});
  put(buffer_, kHead);
  put(buffer_, to_string(m.kind));
  put(buffer_, " (");
  append_json_text(buffer_, m.src_memory);
  put(buffer_, event_name::kMemcpyArrow);
  append_json_text(buffer_, m.dst_memory);
  put(buffer_, ")\"");
  write_gpu_placement(m);
  put(buffer_, kMember<arg::kBytes>);
  put_int(buffer_, m.bytes);
  write_bandwidth(m, m.bytes);
  put(buffer_, kMember<arg::kCopyKind>);
  put(buffer_, "\"");
  put(buffer_, to_string(m.kind));
  put(buffer_, "\"");
  end_gpu_event(m);
}

void ChromeTraceWriter::write(const MemsetActivity& m) {
  begin_gpu_event(m);
  static constexpr JoinedText kHead = join({complete_event_head(category::kGpuMemset).view(), "\"Memset ("});
  put(buffer_, kHead);
  append_json_text(buffer_, m.memory);
  put(buffer_, ")\"");
  write_gpu_placement(m);
  put(buffer_, kMember<arg::kBytes>);
  put_int(buffer_, m.bytes);
  put(buffer_, kMember<arg::kValue>);
  put_int(buffer_, m.value);
  write_bandwidth(m, m.bytes);
  end_gpu_event(m);
}

void ChromeTraceWriter::write(const ApiCall& call) {
  ensure_host_track(call.thread);
  begin_event();
  static constexpr JoinedText kRuntimeHead = complete_event_head(category::kCudaRuntime);
  static constexpr JoinedText kDriverHead = complete_event_head(category::kCudaDriver);
  put(buffer_, call.domain == ApiDomain::runtime ? kRuntimeHead : kDriverHead);
  append_json_string(buffer_, call.name);
  write_track(source_.host_process, call.thread);
  append_ts(call.start_ns);
  append_dur(call.start_ns, call.end_ns);
  put(buffer_, kFirstArg<arg::kCbid>);
  put_int(buffer_, call.cbid);
  put(buffer_, kMember<arg::kCorrelation>);
  put_int(buffer_, call.correlation);
  if (call.return_value != 0) {
    put(buffer_, kMember<arg::kReturnValue>);
    put_int(buffer_, call.return_value);
  }
  write_case_args(call.tag);
  put(buffer_, "}}");
  if (source_.automatic_flows && call.launches_work) write_flow_start(call.correlation, call.start_ns, call.thread);
  flush_if_large();
}

void ChromeTraceWriter::write(const Annotation& a) {
  std::uint32_t pid = source_.host_process;
  if (a.on_gpu) {
    ensure_gpu_track(a.process, a.thread);
    pid = gpu_pid(a.process);
  } else {
    ensure_host_track(a.thread);
  }
  begin_event();
  static constexpr JoinedText kGpuHead = complete_event_head(category::kGpuUserAnnotation);
  static constexpr JoinedText kHostHead = complete_event_head(category::kUserAnnotation);
  put(buffer_, a.on_gpu ? kGpuHead : kHostHead);
  append_json_string(buffer_, a.name);
  write_track(pid, a.thread);
  append_ts(a.start_ns);
  append_dur(a.start_ns, a.end_ns);
  put(buffer_, kFirstArg<arg::kNvtx>);
  put(buffer_, "true");
  write_case_args(a.tag);
  put(buffer_, "}}");
  flush_if_large();
}

void ChromeTraceWriter::write(const OverheadActivity& o) {
  ensure_host_track(o.thread);
  begin_event();
  static constexpr JoinedText kHead = complete_event_head(category::kOverhead);
  put(buffer_, kHead);
  append_json_string(buffer_, o.kind);
  write_track(source_.host_process, o.thread);
  append_ts(o.start_ns);
  append_dur(o.start_ns, o.end_ns);
  put(buffer_, kFirstArg<arg::kSource>);
  put(buffer_, "\"CUPTI\"}}");
  flush_if_large();
}

void ChromeTraceWriter::write(const MemoryActivity& m) {
  const bool host = is_host_memory(m.memory_kind);
  // The running total of what the process holds on the device (or, for host memory, on the host):
  // Kineto's "Total Allocated", and the counter track's value. A release of memory allocated before
  // the trace began stops at zero.
  const std::uint32_t holder = host ? source_.host_process : gpu_pid(m.device);
  std::uint64_t& in_use = memory_in_use_[{host, holder}];
  if (m.operation == MemoryOperation::allocation) in_use += m.bytes;
  else in_use -= std::min(in_use, m.bytes);

  ensure_host_track(m.thread);
  begin_event();
  static constexpr JoinedText kHead =
      join({"{\"", event_key::kPh, "\":\"", ph::kInstant, "\",\"", event_key::kCat, "\":\"", category::kCpuInstantEvent,
            "\",\"", event_key::kScope, "\":\"", ph::kThreadScope, "\",\"", event_key::kName, "\":\"", event_name::kMemory,
            "\""});
  put(buffer_, kHead);
  write_track(source_.host_process, m.thread);
  append_ts(m.start_ns);
  put(buffer_, kFirstArg<arg::kDeviceType>);
  put_int(buffer_, host ? kineto_device_type::kCpu : kineto_device_type::kCuda);
  put(buffer_, kMember<arg::kDeviceId>);
  put_int(buffer_, m.device);
  put(buffer_, kMember<arg::kAddr>);
  put_int(buffer_, m.address);
  put(buffer_, kMember<arg::kMemoryBytes>);
  if (m.operation == MemoryOperation::release && m.bytes > 0) put(buffer_, "-");
  put_int(buffer_, m.bytes);
  // CUPTI sees what the driver hands out: every byte allocated is also reserved.
  put(buffer_, kMember<arg::kTotalAllocated>);
  put_int(buffer_, in_use);
  put(buffer_, kMember<arg::kTotalReserved>);
  put_int(buffer_, in_use);
  put(buffer_, kMember<arg::kOperation>);
  put(buffer_, "\"");
  put(buffer_, to_string(m.operation));
  put(buffer_, "\"");
  put(buffer_, kMember<arg::kMemoryKind>);
  append_json_string(buffer_, m.memory_kind);
  put(buffer_, kMember<arg::kContext>);
  put_int(buffer_, m.context);
  put(buffer_, kMember<arg::kStream>);
  put_int(buffer_, m.stream);
  put(buffer_, kMember<arg::kCorrelation>);
  put_int(buffer_, m.correlation);
  if (!m.api.empty()) {
    put(buffer_, kMember<arg::kApi>);
    append_json_string(buffer_, m.api);
  }
  if (!m.pool_type.empty() || m.pool_address != 0) {
    put(buffer_, kMember<arg::kPoolAddress>);
    put_int(buffer_, m.pool_address);
    put(buffer_, kMember<arg::kPoolType>);
    append_json_string(buffer_, m.pool_type);
  }
  if (!m.role.empty()) {
    put(buffer_, kMember<arg::kRole>);
    append_json_string(buffer_, m.role);
  }
  write_case_args(m.tag);
  put(buffer_, "}}");

  if (!host) {
    // The counter track Perfetto draws as a graph under the GPU's process: one value per change.
    ensure_gpu_process(m.device);
    begin_event();
    static constexpr JoinedText kCounterHead =
        join({"{\"", event_key::kPh, "\":\"", ph::kCounter, "\",\"", event_key::kName, "\":\"",
              event_name::kDeviceMemoryInUse, "\""});
    put(buffer_, kCounterHead);
    put(buffer_, kMember<event_key::kPid>);
    put_int(buffer_, holder);
    append_ts(m.start_ns);
    put(buffer_, kFirstArg<arg::kBytes>);
    put_int(buffer_, in_use);
    put(buffer_, "}}");
  }
  flush_if_large();
}

void ChromeTraceWriter::write(const ActivityBatch& batch) {
  for (const ApiCall& c : batch.api_calls) write(c);
  for (const KernelActivity& k : batch.kernels) write(k);
  for (const MemcpyActivity& m : batch.memcpys) write(m);
  for (const MemsetActivity& m : batch.memsets) write(m);
  for (const Annotation& a : batch.annotations) write(a);
  for (const OverheadActivity& o : batch.overheads) write(o);
  // In time order, so that the running totals are those of each moment: CUPTI hands buffers
  // over per thread, not in time order.
  std::vector<const MemoryActivity*> memory;
  memory.reserve(batch.memory.size());
  for (const MemoryActivity& m : batch.memory) memory.push_back(&m);
  std::stable_sort(memory.begin(), memory.end(),
                   [](const MemoryActivity* a, const MemoryActivity* b) { return a->start_ns < b->start_ns; });
  for (const MemoryActivity* m : memory) write(*m);
}

void ChromeTraceWriter::write(const FlowEvent& flow) {
  if (!flow.start) {
    ensure_gpu_track(flow.device, flow.thread);
    write_flow_end(flow.id, flow.ts_ns, flow.device, flow.thread);
  } else {
    ensure_host_track(flow.thread);
    write_flow_start(flow.id, flow.ts_ns, flow.thread);
  }
  flush_if_large();
}

void ChromeTraceWriter::abandon() {
  if (!finished_) {
    finished_ = true;
    try {
      output_.close();
    } catch (const std::exception&) {
      // The file is removed either way; the caller is already reporting why it gave up.
    }
  }
  // Also after a finish() that threw before its rename; after one that renamed, nothing is there.
  std::error_code ignored;
  std::filesystem::remove(temp_path_, ignored);
}

void ChromeTraceWriter::finish(const nlohmann::json& attnprof_metadata) {
  if (finished_) return;
  finished_ = true;
  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "\n  ],\n  \"{}\": ", document_key::kTraceName);
  append_json_string(buffer_, path_.filename().string());
  // Paths and names in the metadata may hold bytes that are not UTF-8: replaced, never a throw.
  fmt::format_to(out, ",\n  \"{}\": {}\n}}\n", document_key::kAttnprof,
                 attnprof_metadata.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  output_.write(std::string_view(buffer_.data(), buffer_.size()));
  buffer_.clear();
  output_.close();
  std::filesystem::rename(temp_path_, path_);
}

}  // namespace attnprof::trace
