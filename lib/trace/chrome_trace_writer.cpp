#include "trace/chrome_trace_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

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

}  // namespace

void append_json_string(fmt::memory_buffer& out, std::string_view text) {
  out.push_back('"');
  std::size_t run_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + run_start, text.data() + i);
    run_start = i + 1;
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
  out.append(text.data() + run_start, text.data() + text.size());
  out.push_back('"');
}

void append_relative_us(fmt::memory_buffer& out, std::uint64_t ns, std::uint64_t base_ns) {
  // Records from before the base (clock skew between host and GPU) clamp to 0, as Kineto does.
  const std::uint64_t rel = ns > base_ns ? ns - base_ns : 0;
  fmt::format_to(std::back_inserter(out), "{}.{:03}", rel / 1000, rel % 1000);
}

ChromeTraceWriter::ChromeTraceWriter(std::filesystem::path path, TraceHeader header)
    : path_(std::move(path)), header_(std::move(header)) {
  temp_path_ = path_;
  temp_path_ += ".tmp";
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (file_ == nullptr)
    throw std::runtime_error(fmt::format("cannot write trace {}: {}", temp_path_.string(), std::strerror(errno)));

  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
  for (std::size_t i = 0; i < header_.devices.size(); ++i) {
    const DeviceProperties& d = header_.devices[i];
    fmt::format_to(out,
                   "{}\n    {{\"id\": {}, \"name\": {}, \"totalGlobalMem\": {}, \"computeMajor\": {}, "
                   "\"computeMinor\": {}, \"maxThreadsPerBlock\": {}, \"maxThreadsPerMultiprocessor\": {}, "
                   "\"maxBlocksPerMultiprocessor\": {}, \"regsPerBlock\": {}, \"regsPerMultiprocessor\": {}, "
                   "\"warpSize\": {}, \"sharedMemPerBlock\": {}, \"sharedMemPerMultiprocessor\": {}, "
                   "\"sharedMemPerBlockOptin\": {}, \"reservedSharedMemPerBlock\": {}, \"numSms\": {}, "
                   "\"l2CacheSize\": {}, \"clockRateKHz\": {}, \"memoryClockRateKHz\": {}, "
                   "\"memoryBusWidth\": {}}}",
                   i == 0 ? "" : ",", d.id, json_of(d.name), d.total_global_mem, d.compute_major,
                   d.compute_minor, d.max_threads_per_block, d.max_threads_per_sm, d.max_blocks_per_sm,
                   d.regs_per_block, d.regs_per_sm, d.warp_size, d.shared_mem_per_block, d.shared_mem_per_sm,
                   d.shared_mem_per_block_optin, d.reserved_shared_mem_per_block, d.sm_count, d.l2_cache_bytes,
                   d.clock_rate_khz, d.memory_clock_rate_khz, d.memory_bus_width_bits);
  }
  fmt::format_to(out, "\n  ],\n");
  if (header_.rank || header_.local_rank || header_.world_size) {
    std::string info;
    if (header_.rank) info += fmt::format("\"rank\": {}", *header_.rank);
    if (header_.local_rank) info += fmt::format("{}\"local_rank\": {}", info.empty() ? "" : ", ", *header_.local_rank);
    if (header_.world_size) info += fmt::format("{}\"world_size\": {}", info.empty() ? "" : ", ", *header_.world_size);
    fmt::format_to(out, "  \"distributedInfo\": {{{}}},\n", info);
  }
  fmt::format_to(out, "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {},\n  \"traceEvents\": [",
                 header_.base_time_ns);

  source_.host_process = header_.host_process;
  source_.host_process_name = header_.host_process_name;
  if (!header_.host_process_name.empty()) {
    host_processes_.insert(header_.host_process);
    write_metadata_event("process_name", header_.host_process, std::nullopt, "name",
                         json_of(header_.host_process_name));
    write_metadata_event("process_sort_index", header_.host_process, std::nullopt, "sort_index",
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

void ChromeTraceWriter::add_case(CaseName name) { cases_.push_back(std::move(name)); }

void ChromeTraceWriter::set_case(std::size_t index, CaseName name) {
  if (cases_.size() <= index) cases_.resize(index + 1);
  cases_[index] = std::move(name);
}

void ChromeTraceWriter::set_source(TraceSource source) { source_ = std::move(source); }

void ChromeTraceWriter::begin_event() {
  buffer_.append(std::string_view(events_ == 0 ? "\n    " : ",\n    "));
  ++events_;
}

void ChromeTraceWriter::flush_if_large() {
  if (buffer_.size() < kFlushBytes) return;
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
    throw std::runtime_error(fmt::format("writing trace {} failed: {}", temp_path_.string(), std::strerror(errno)));
  flushed_bytes_ += buffer_.size();
  buffer_.clear();
}

void ChromeTraceWriter::write_metadata_event(std::string_view what, std::uint32_t pid,
                                             std::optional<std::uint32_t> tid, std::string_view key,
                                             std::string_view value_json) {
  begin_event();
  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "{{\"ph\": \"M\", \"name\": \"{}\", \"pid\": {}", what, pid);
  if (tid) fmt::format_to(out, ", \"tid\": {}", *tid);
  fmt::format_to(out, ", \"args\": {{\"{}\": {}}}}}", key, value_json);
}

void ChromeTraceWriter::ensure_host_track(std::uint32_t thread) {
  const std::uint32_t pid = source_.host_process;
  if (host_processes_.insert(pid).second) {
    const std::string name =
        source_.host_process_name.empty() ? fmt::format("process {}", pid) : source_.host_process_name;
    write_metadata_event("process_name", pid, std::nullopt, "name", json_of(name));
    write_metadata_event("process_sort_index", pid, std::nullopt, "sort_index",
                         std::to_string(source_.sort_index_base + kHostSortIndex));
  }
  if (!host_threads_.insert({pid, thread}).second) return;
  write_metadata_event("thread_name", pid, thread, "name", json_of(fmt::format("host thread {}", thread)));
  write_metadata_event("thread_sort_index", pid, thread, "sort_index", std::to_string(thread));
}

void ChromeTraceWriter::ensure_gpu_track(std::uint32_t device, std::uint32_t stream) {
  const std::uint32_t pid = gpu_pid(device);
  if (gpu_processes_.insert(pid).second) {
    std::string name = source_.gpu_process_prefix + fmt::format("GPU {}", device);
    for (const DeviceProperties& d : header_.devices)
      if (static_cast<std::uint32_t>(d.id) == device) {
        name += ": " + d.name;
        break;
      }
    write_metadata_event("process_name", pid, std::nullopt, "name", json_of(name));
    write_metadata_event("process_sort_index", pid, std::nullopt, "sort_index",
                         std::to_string(source_.sort_index_base + kGpuSortIndexBase + static_cast<int>(device)));
  }
  if (gpu_tracks_.insert({pid, stream}).second) {
    write_metadata_event("thread_name", pid, stream, "name", json_of(fmt::format("stream {}", stream)));
    write_metadata_event("thread_sort_index", pid, stream, "sort_index", std::to_string(stream));
  }
}

void ChromeTraceWriter::append_ts(std::uint64_t ns) {
  buffer_.append(std::string_view(", \"ts\": "));
  append_relative_us(buffer_, ns, header_.base_time_ns);
}

void ChromeTraceWriter::append_dur(std::uint64_t start_ns, std::uint64_t end_ns) {
  const std::uint64_t dur = end_ns > start_ns ? end_ns - start_ns : 0;
  fmt::format_to(std::back_inserter(buffer_), ", \"dur\": {}.{:03}", dur / 1000, dur % 1000);
}

void ChromeTraceWriter::write_case_args(const SweepTag& tag) {
  if (tag.case_index < 0) return;
  auto out = std::back_inserter(buffer_);
  if (static_cast<std::size_t>(tag.case_index) < cases_.size()) {
    const CaseName& c = cases_[static_cast<std::size_t>(tag.case_index)];
    buffer_.append(std::string_view(", \"backend\": "));
    append_json_string(buffer_, c.backend);
    buffer_.append(std::string_view(", \"case\": "));
    append_json_string(buffer_, c.label);
  }
  fmt::format_to(out, ", \"case index\": {}, \"phase\": \"{}\"", tag.case_index, to_string(tag.phase));
  if (tag.iteration >= 0) fmt::format_to(out, ", \"iteration\": {}", tag.iteration);
}

void ChromeTraceWriter::write_flow_end(std::uint64_t id, std::uint64_t ts_ns, std::uint32_t device,
                                       std::uint32_t stream) {
  begin_event();
  fmt::format_to(std::back_inserter(buffer_),
                 "{{\"ph\": \"f\", \"id\": {}, \"pid\": {}, \"tid\": {}", id, gpu_pid(device), stream);
  append_ts(ts_ns);
  buffer_.append(std::string_view(", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}"));
}

void ChromeTraceWriter::write(const KernelActivity& k) {
  ensure_gpu_track(k.device, k.stream);
  begin_event();
  auto out = std::back_inserter(buffer_);
  buffer_.append(std::string_view("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "));
  append_json_string(buffer_, k.name);
  fmt::format_to(out, ", \"pid\": {}, \"tid\": {}", gpu_pid(k.device), k.stream);
  append_ts(k.start_ns);
  append_dur(k.start_ns, k.end_ns);

  int sm_count = 0, max_threads_per_sm = 0;
  for (const DeviceProperties& d : header_.devices)
    if (static_cast<std::uint32_t>(d.id) == k.device) {
      sm_count = d.sm_count;
      max_threads_per_sm = d.max_threads_per_sm;
    }
  const double grid_blocks = static_cast<double>(k.grid[0]) * k.grid[1] * k.grid[2];
  const int block_threads = k.block[0] * k.block[1] * k.block[2];
  const double blocks_per_sm = sm_count > 0 ? grid_blocks / sm_count : 0;
  const double warps_per_sm = blocks_per_sm * ((block_threads + 31) / 32);
  fmt::format_to(out,
                 ", \"args\": {{\"device\": {}, \"context\": {}, \"stream\": {}, \"correlation\": {}, "
                 "\"registers per thread\": {}, \"shared memory\": {}, \"static shared memory\": {}, "
                 "\"dynamic shared memory\": {}, \"local memory per thread\": {}, "
                 "\"blocks per SM\": {:.6g}, \"warps per SM\": {:.6g}, "
                 "\"grid\": [{}, {}, {}], \"block\": [{}, {}, {}]",
                 k.device, k.context, k.stream, k.correlation, k.registers_per_thread,
                 k.static_shared_bytes + k.dynamic_shared_bytes, k.static_shared_bytes, k.dynamic_shared_bytes,
                 k.local_bytes_per_thread, blocks_per_sm, warps_per_sm, k.grid[0], k.grid[1], k.grid[2],
                 k.block[0], k.block[1], k.block[2]);
  if (k.cluster[0] > 0) fmt::format_to(out, ", \"cluster\": [{}, {}, {}]", k.cluster[0], k.cluster[1], k.cluster[2]);
  if (k.shared_memory_executed > 0) fmt::format_to(out, ", \"shared memory config\": {}", k.shared_memory_executed);
  if (k.occupancy.valid) {
    // Kineto's estimate: theoretical blocks/SM capped by the blocks the grid really has.
    const double resident_blocks = std::min<double>(k.occupancy.active_blocks_per_sm, blocks_per_sm);
    const double kineto_estimate =
        max_threads_per_sm > 0 ? std::round(100.0 * resident_blocks * block_threads / max_threads_per_sm) : 0;
    fmt::format_to(out,
                   ", \"est. achieved occupancy %\": {:.0f}, \"theoretical occupancy %\": {:.2f}, "
                   "\"occupancy limiter\": ",
                   kineto_estimate, k.occupancy.theoretical_percent);
    append_json_string(buffer_, k.occupancy.limiter);
    fmt::format_to(out,
                   ", \"occupancy\": {{\"activeBlocksPerMultiprocessor\": {}, \"blockLimitRegs\": {}, "
                   "\"blockLimitSharedMem\": {}, \"blockLimitWarps\": {}, \"blockLimitBlocks\": {}}}",
                   k.occupancy.active_blocks_per_sm, k.occupancy.block_limit_registers,
                   k.occupancy.block_limit_shared_memory, k.occupancy.block_limit_warps,
                   k.occupancy.block_limit_blocks);
  }
  if (k.achieved_occupancy_percent)
    fmt::format_to(out, ", \"achieved occupancy %\": {:.2f}", *k.achieved_occupancy_percent);
  if (k.dram_throughput_percent) fmt::format_to(out, ", \"dram throughput %\": {:.2f}", *k.dram_throughput_percent);
  if (k.dram_bytes_per_second)
    fmt::format_to(out, ", \"dram bandwidth (GB/s)\": {:.3f}", *k.dram_bytes_per_second / 1e9);
  if (k.tensor_pipe_percent) fmt::format_to(out, ", \"tensor pipe active %\": {:.2f}", *k.tensor_pipe_percent);
  if (!k.launch_api.empty()) {
    buffer_.append(std::string_view(", \"launch api\": "));
    append_json_string(buffer_, k.launch_api);
  }
  write_case_args(k.tag);
  buffer_.append(std::string_view("}}"));
  if (source_.automatic_flows && !k.launch_api.empty()) write_flow_end(k.correlation, k.start_ns, k.device, k.stream);
  flush_if_large();
}

void ChromeTraceWriter::write(const MemcpyActivity& m) {
  ensure_gpu_track(m.device, m.stream);
  begin_event();
  auto out = std::back_inserter(buffer_);
  const std::string name = fmt::format("Memcpy {} ({} -> {})", to_string(m.kind), m.src_memory, m.dst_memory);
  buffer_.append(std::string_view("{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": "));
  append_json_string(buffer_, name);
  fmt::format_to(out, ", \"pid\": {}, \"tid\": {}", gpu_pid(m.device), m.stream);
  append_ts(m.start_ns);
  append_dur(m.start_ns, m.end_ns);
  const double ns = static_cast<double>(m.end_ns > m.start_ns ? m.end_ns - m.start_ns : 0);
  fmt::format_to(out,
                 ", \"args\": {{\"device\": {}, \"context\": {}, \"stream\": {}, \"correlation\": {}, "
                 "\"bytes\": {}, \"memory bandwidth (GB/s)\": {:.3f}, \"copy kind\": \"{}\"",
                 m.device, m.context, m.stream, m.correlation, m.bytes, ns > 0 ? m.bytes / ns : 0.0,
                 to_string(m.kind));
  if (!m.launch_api.empty()) {
    buffer_.append(std::string_view(", \"launch api\": "));
    append_json_string(buffer_, m.launch_api);
  }
  write_case_args(m.tag);
  buffer_.append(std::string_view("}}"));
  if (source_.automatic_flows && !m.launch_api.empty()) write_flow_end(m.correlation, m.start_ns, m.device, m.stream);
  flush_if_large();
}

void ChromeTraceWriter::write(const MemsetActivity& m) {
  ensure_gpu_track(m.device, m.stream);
  begin_event();
  auto out = std::back_inserter(buffer_);
  buffer_.append(std::string_view("{\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": "));
  append_json_string(buffer_, fmt::format("Memset ({})", m.memory));
  fmt::format_to(out, ", \"pid\": {}, \"tid\": {}", gpu_pid(m.device), m.stream);
  append_ts(m.start_ns);
  append_dur(m.start_ns, m.end_ns);
  const double ns = static_cast<double>(m.end_ns > m.start_ns ? m.end_ns - m.start_ns : 0);
  fmt::format_to(out,
                 ", \"args\": {{\"device\": {}, \"context\": {}, \"stream\": {}, \"correlation\": {}, "
                 "\"bytes\": {}, \"value\": {}, \"memory bandwidth (GB/s)\": {:.3f}",
                 m.device, m.context, m.stream, m.correlation, m.bytes, m.value, ns > 0 ? m.bytes / ns : 0.0);
  if (!m.launch_api.empty()) {
    buffer_.append(std::string_view(", \"launch api\": "));
    append_json_string(buffer_, m.launch_api);
  }
  write_case_args(m.tag);
  buffer_.append(std::string_view("}}"));
  if (source_.automatic_flows && !m.launch_api.empty()) write_flow_end(m.correlation, m.start_ns, m.device, m.stream);
  flush_if_large();
}

void ChromeTraceWriter::write(const ApiCall& call) {
  ensure_host_track(call.thread);
  begin_event();
  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": ",
                 call.domain == ApiDomain::runtime ? "cuda_runtime" : "cuda_driver");
  append_json_string(buffer_, call.name);
  fmt::format_to(out, ", \"pid\": {}, \"tid\": {}", source_.host_process, call.thread);
  append_ts(call.start_ns);
  append_dur(call.start_ns, call.end_ns);
  fmt::format_to(out, ", \"args\": {{\"cbid\": {}, \"correlation\": {}", call.cbid, call.correlation);
  if (call.return_value != 0) fmt::format_to(out, ", \"return value\": {}", call.return_value);
  write_case_args(call.tag);
  buffer_.append(std::string_view("}}"));
  if (source_.automatic_flows && call.launches_work) {
    begin_event();
    fmt::format_to(out, "{{\"ph\": \"s\", \"id\": {}, \"pid\": {}, \"tid\": {}", call.correlation,
                   source_.host_process, call.thread);
    append_ts(call.start_ns);
    buffer_.append(std::string_view(", \"cat\": \"ac2g\", \"name\": \"ac2g\"}"));
  }
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
  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": ", a.on_gpu ? "gpu_user_annotation" : "user_annotation");
  append_json_string(buffer_, a.name);
  fmt::format_to(out, ", \"pid\": {}, \"tid\": {}", pid, a.thread);
  append_ts(a.start_ns);
  append_dur(a.start_ns, a.end_ns);
  buffer_.append(std::string_view(", \"args\": {\"nvtx\": true"));
  write_case_args(a.tag);
  buffer_.append(std::string_view("}}"));
  flush_if_large();
}

void ChromeTraceWriter::write(const OverheadActivity& o) {
  ensure_host_track(o.thread);
  begin_event();
  auto out = std::back_inserter(buffer_);
  buffer_.append(std::string_view("{\"ph\": \"X\", \"cat\": \"overhead\", \"name\": "));
  append_json_string(buffer_, o.kind);
  fmt::format_to(out, ", \"pid\": {}, \"tid\": {}", source_.host_process, o.thread);
  append_ts(o.start_ns);
  append_dur(o.start_ns, o.end_ns);
  buffer_.append(std::string_view(", \"args\": {\"source\": \"CUPTI\"}}"));
  flush_if_large();
}

void ChromeTraceWriter::write(const ActivityBatch& batch) {
  for (const ApiCall& c : batch.api_calls) write(c);
  for (const KernelActivity& k : batch.kernels) write(k);
  for (const MemcpyActivity& m : batch.memcpys) write(m);
  for (const MemsetActivity& m : batch.memsets) write(m);
  for (const Annotation& a : batch.annotations) write(a);
  for (const OverheadActivity& o : batch.overheads) write(o);
}

void ChromeTraceWriter::write(const FlowEvent& flow) {
  if (!flow.start) {
    ensure_gpu_track(flow.device, flow.thread);
    write_flow_end(flow.id, flow.ts_ns, flow.device, flow.thread);
  } else {
    ensure_host_track(flow.thread);
    begin_event();
    fmt::format_to(std::back_inserter(buffer_), "{{\"ph\": \"s\", \"id\": {}, \"pid\": {}, \"tid\": {}", flow.id,
                   source_.host_process, flow.thread);
    append_ts(flow.ts_ns);
    buffer_.append(std::string_view(", \"cat\": \"ac2g\", \"name\": \"ac2g\"}"));
  }
  flush_if_large();
}

void ChromeTraceWriter::finish(const nlohmann::json& attnprof_metadata) {
  if (finished_) return;
  finished_ = true;
  auto out = std::back_inserter(buffer_);
  fmt::format_to(out, "\n  ],\n  \"traceName\": ");
  append_json_string(buffer_, path_.filename().string());
  fmt::format_to(out, ",\n  \"attnprof\": {}\n}}\n", attnprof_metadata.dump());
  const bool wrote = std::fwrite(buffer_.data(), 1, buffer_.size(), file_) == buffer_.size();
  flushed_bytes_ += buffer_.size();
  buffer_.clear();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!wrote || !closed)
    throw std::runtime_error(fmt::format("writing trace {} failed: {}", temp_path_.string(), std::strerror(errno)));
  std::filesystem::rename(temp_path_, path_);
}

}  // namespace attnprof::trace
