// One table per vocabulary. The trace: every key, category and metadata name the writer emits is
// in trace_keys.hpp's tables and every entry there is emitted; the reader keeps exactly the args
// the table says, and reads each of them back into the activity it came from. The summary
// formats: kOutputFormats is what the parser, the CLI's choices and its help text go by.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "summary/render.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/trace_keys.hpp"

namespace attnprof::trace {
namespace {

constexpr std::uint64_t kBase = 1'700'000'000'000'000'000ull;

template <typename Table>
std::set<std::string> set_of(const Table& table) {
  std::set<std::string> names;
  for (const auto& word : table) {
    if constexpr (std::is_same_v<std::decay_t<decltype(word)>, ArgKey>) names.emplace(word.name);
    else names.emplace(word);
  }
  return names;
}

// "" when the trace's words are the table's; otherwise which are not, readable where the sets are long.
std::string difference(const std::set<std::string>& written, const std::set<std::string>& table) {
  std::string text;
  for (const std::string& w : written)
    if (table.count(w) == 0) text += "written but not in the table: \"" + w + "\"\n";
  for (const std::string& t : table)
    if (written.count(t) == 0) text += "in the table but never written: \"" + t + "\"\n";
  return text;
}

std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

// A trace that takes every branch of the writer: each optional arg, both API domains, host and
// GPU annotations, overhead, flows, distributedInfo, a memory allocation (with its pool and role)
// and its release, and so the counter track.
struct WrittenTrace {
  KernelActivity kernel;
  MemcpyActivity memcpy;
  MemsetActivity memset;
  ApiCall runtime_call, driver_call;
  Annotation host_range, gpu_range;
  OverheadActivity overhead;
  MemoryActivity allocation, release;
  CaseName case_name{"flash bf16 1x8x1024x128", "flash"};
};

WrittenTrace write_every_branch(const std::filesystem::path& path) {
  WrittenTrace w;
  const SweepTag tag{0, Phase::iteration, 3};
  KernelActivity& k = w.kernel;
  k.name = "flash_fwd_kernel<128>";
  k.start_ns = kBase + 10'000;
  k.end_ns = kBase + 30'000;
  k.device = 0;
  k.context = 1;
  k.stream = 7;
  k.correlation = 21;
  k.grid = {132, 8, 1};
  k.block = {128, 1, 1};
  k.cluster = {2, 1, 1};
  k.registers_per_thread = 168;
  k.static_shared_bytes = 1024;
  k.dynamic_shared_bytes = 98304;
  k.local_bytes_per_thread = 16;
  k.shared_memory_executed = 233472;
  k.carveout_percent = 100;
  k.occupancy.valid = true;
  k.occupancy.active_blocks_per_sm = 2;
  k.occupancy.theoretical_percent = 12.5;
  k.occupancy.limiter = "shared memory";
  k.occupancy.block_limit_registers = 3;
  k.occupancy.block_limit_shared_memory = 2;
  k.occupancy.block_limit_warps = 16;
  k.occupancy.block_limit_blocks = 32;
  k.achieved_occupancy_percent = 11.25;
  k.dram_throughput_percent = 55.5;
  k.dram_bytes_per_second = 3.2e12;
  k.tensor_pipe_percent = 70.5;
  k.launch_api = "cudaLaunchKernel";
  k.tag = tag;

  MemcpyActivity& m = w.memcpy;
  m.kind = MemcpyKind::HtoD;
  m.src_memory = "Pinned";
  m.dst_memory = "Device";
  m.bytes = 4096;
  m.start_ns = kBase + 40'000;
  m.end_ns = kBase + 41'000;
  m.context = 1;
  m.stream = 7;
  m.correlation = 22;
  m.launch_api = "cudaMemcpyAsync";
  m.tag = tag;

  MemsetActivity& s = w.memset;
  s.bytes = 256;
  s.value = 7;
  s.memory = "Device";
  s.start_ns = kBase + 42'000;
  s.end_ns = kBase + 42'500;
  s.context = 1;
  s.stream = 7;
  s.correlation = 23;
  s.launch_api = "cudaMemsetAsync";
  s.tag = tag;

  ApiCall& c = w.runtime_call;
  c.name = "cudaLaunchKernel";
  c.cbid = 211;
  c.start_ns = kBase + 5'000;
  c.end_ns = kBase + 6'000;
  c.process = 4242;
  c.thread = 99;
  c.correlation = 21;
  c.return_value = 1;
  c.launches_work = true;
  c.tag = tag;
  ApiCall& d = w.driver_call;
  d = c;
  d.domain = ApiDomain::driver;
  d.name = "cuCtxGetCurrent";
  d.cbid = 9;
  d.correlation = 24;
  d.return_value = 0;
  d.launches_work = false;

  w.host_range = {"iteration 3", kBase + 4'000, kBase + 50'000, false, 4242, 99, tag};
  w.gpu_range = {"iteration 3", kBase + 10'000, kBase + 42'500, true, 0, 7, tag};
  w.overhead = {"CUPTI overhead: buffer flush", kBase + 60'000, kBase + 61'000, 4242, 99};

  MemoryActivity& a = w.allocation;
  a.start_ns = kBase + 3'000;
  a.address = 0x7f0000200000;
  a.bytes = 1 << 20;
  a.memory_kind = "Device";
  a.context = 1;
  a.stream = 7;
  a.process = 4242;
  a.thread = 99;
  a.correlation = 25;
  a.api = "cudaMallocAsync";
  a.pool_address = 0x7f0000000000;
  a.pool_type = "local";
  a.role = "scores";
  a.tag = tag;
  w.release = a;
  w.release.operation = MemoryOperation::release;
  w.release.start_ns = kBase + 45'000;
  w.release.correlation = 26;
  w.release.api = "cudaFreeAsync";

  TraceHeader header;
  header.base_time_ns = kBase;
  header.devices = {sm90_reference_properties()};
  header.host_process = 4242;
  header.host_process_name = "attnprof test (pid 4242)";
  header.rank = 1;
  header.local_rank = 1;
  header.world_size = 2;
  ChromeTraceWriter writer(path, header);
  writer.add_case(w.case_name);
  ActivityBatch batch;
  batch.kernels = {w.kernel};
  batch.memcpys = {w.memcpy};
  batch.memsets = {w.memset};
  batch.api_calls = {w.runtime_call, w.driver_call};
  batch.annotations = {w.host_range, w.gpu_range};
  batch.overheads = {w.overhead};
  batch.memory = {w.allocation, w.release};
  writer.write(batch);
  writer.finish({{"tool", "attnprof"}});
  return w;
}

std::filesystem::path temp_trace(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / "attnprof_trace_keys_test";
  std::filesystem::create_directories(dir);
  return dir / name;
}

nlohmann::json parse_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

TEST(TraceKeys, TheWriterEmitsExactlyTheTablesWords) {
  const auto path = temp_trace("every_branch.json");
  write_every_branch(path);
  const nlohmann::json trace = parse_file(path);

  EXPECT_EQ(difference(keys_of(trace), set_of(kDocumentKeys)), "");
  ASSERT_EQ(trace.at(document_key::kDeviceProperties).size(), 1u);
  EXPECT_EQ(difference(keys_of(trace.at(document_key::kDeviceProperties).at(0)), set_of(kDeviceKeys)), "");
  EXPECT_EQ(difference(keys_of(trace.at(document_key::kDistributedInfo)), set_of(kDistributedKeys)), "");

  std::set<std::string> members, categories, metadata_names, args, occupancy;
  for (const nlohmann::json& e : trace.at(document_key::kTraceEvents)) {
    for (const std::string& key : keys_of(e)) members.insert(key);
    if (e.contains(event_key::kCat)) categories.insert(e.at(event_key::kCat).get<std::string>());
    if (e.at(event_key::kPh).get<std::string>() == ph::kMetadata)
      metadata_names.insert(e.at(event_key::kName).get<std::string>());
    if (!e.contains(event_key::kArgs)) continue;
    for (const std::string& key : keys_of(e.at(event_key::kArgs))) args.insert(key);
    if (e.at(event_key::kArgs).contains(arg::kOccupancy))
      for (const std::string& key : keys_of(e.at(event_key::kArgs).at(arg::kOccupancy))) occupancy.insert(key);
  }
  // Equal, not just included: a word the writer stopped writing must leave the table too.
  EXPECT_EQ(difference(members, set_of(kEventKeys)), "");
  EXPECT_EQ(difference(categories, set_of(kCategories)), "");
  EXPECT_EQ(difference(metadata_names, set_of(kMetadataNames)), "");
  EXPECT_EQ(difference(args, set_of(kArgKeys)), "");
  EXPECT_EQ(difference(occupancy, set_of(kOccupancyKeys)), "");
}

TEST(TraceKeys, EachTableSpellsAWordOnce) {
  EXPECT_EQ(set_of(kDocumentKeys).size(), kDocumentKeys.size());
  EXPECT_EQ(set_of(kDeviceKeys).size(), kDeviceKeys.size());
  EXPECT_EQ(set_of(kEventKeys).size(), kEventKeys.size());
  EXPECT_EQ(set_of(kCategories).size(), kCategories.size());
  EXPECT_EQ(set_of(kMetadataNames).size(), kMetadataNames.size());
  EXPECT_EQ(set_of(kArgKeys).size(), kArgKeys.size());
  EXPECT_EQ(set_of(kOccupancyKeys).size(), kOccupancyKeys.size());
}

TEST(TraceKeys, TheReaderKeepsTheArgsTheTableSaysItReadsBack) {
  for (const ArgKey& key : kArgKeys)
    EXPECT_EQ(reads_arg(key.name), key.read_back) << "args.\"" << key.name << "\"";
  EXPECT_TRUE(reads_arg(metadata::kLabelsArg)) << "Kineto's process_labels name its GPU processes";
  EXPECT_FALSE(reads_arg("no such arg"));
}

// Every arg read back lands where it came from: a key renamed on one side only fails here.
TEST(TraceKeys, TheReaderReadsEveryWrittenFactBack) {
  const auto path = temp_trace("round_trip.json");
  const WrittenTrace w = write_every_branch(path);
  TraceEventConverter converter;
  std::vector<Activity> read;
  std::set<std::string> case_labels, backends;
  read_chrome_trace(path, [&](const TraceEvent& e, const TraceDocument& doc) {
    if (e.args.case_label) case_labels.insert(*e.args.case_label);
    if (e.args.backend) backends.insert(*e.args.backend);
    if (std::optional<Activity> a = converter.convert(e, doc)) read.push_back(std::move(*a));
  });
  EXPECT_EQ(case_labels, std::set<std::string>{w.case_name.label});
  EXPECT_EQ(backends, std::set<std::string>{w.case_name.backend});

  auto expect_gpu_fields = [](const GpuActivity& got, const GpuActivity& want) {
    EXPECT_EQ(got.start_ns, want.start_ns);
    EXPECT_EQ(got.end_ns, want.end_ns);
    EXPECT_EQ(got.device, want.device);
    EXPECT_EQ(got.context, want.context);
    EXPECT_EQ(got.stream, want.stream);
    EXPECT_EQ(got.correlation, want.correlation);
    EXPECT_EQ(got.launch_api, want.launch_api);
    EXPECT_EQ(got.tag.case_index, want.tag.case_index);
    EXPECT_EQ(got.tag.phase, want.tag.phase);
    EXPECT_EQ(got.tag.iteration, want.tag.iteration);
  };
  int kernels = 0, memcpys = 0, memsets = 0, calls = 0, ranges = 0, overheads = 0, memory = 0;
  for (const Activity& a : read) {
    if (const auto* k = std::get_if<KernelActivity>(&a)) {
      ++kernels;
      const KernelActivity& want = w.kernel;
      expect_gpu_fields(*k, want);
      EXPECT_EQ(k->name, want.name);
      EXPECT_EQ(k->grid, want.grid);
      EXPECT_EQ(k->block, want.block);
      EXPECT_EQ(k->cluster, want.cluster);
      EXPECT_EQ(k->registers_per_thread, want.registers_per_thread);
      EXPECT_EQ(k->static_shared_bytes, want.static_shared_bytes);
      EXPECT_EQ(k->dynamic_shared_bytes, want.dynamic_shared_bytes);
      EXPECT_EQ(k->local_bytes_per_thread, want.local_bytes_per_thread);
      EXPECT_EQ(k->shared_memory_executed, want.shared_memory_executed);
      EXPECT_EQ(k->carveout_percent, want.carveout_percent);
      EXPECT_EQ(k->achieved_occupancy_percent, want.achieved_occupancy_percent);
      EXPECT_EQ(k->dram_throughput_percent, want.dram_throughput_percent);
      EXPECT_EQ(k->dram_bytes_per_second, want.dram_bytes_per_second);
      EXPECT_EQ(k->tensor_pipe_percent, want.tensor_pipe_percent);
    } else if (const auto* m = std::get_if<MemcpyActivity>(&a)) {
      ++memcpys;
      expect_gpu_fields(*m, w.memcpy);
      EXPECT_EQ(m->kind, w.memcpy.kind);
      EXPECT_EQ(m->src_memory, w.memcpy.src_memory);
      EXPECT_EQ(m->dst_memory, w.memcpy.dst_memory);
      EXPECT_EQ(m->bytes, w.memcpy.bytes);
    } else if (const auto* s = std::get_if<MemsetActivity>(&a)) {
      ++memsets;
      expect_gpu_fields(*s, w.memset);
      EXPECT_EQ(s->bytes, w.memset.bytes);
      EXPECT_EQ(s->value, w.memset.value);
      EXPECT_EQ(s->memory, w.memset.memory);
    } else if (const auto* c = std::get_if<ApiCall>(&a)) {
      ++calls;
      const ApiCall& want = c->domain == ApiDomain::driver ? w.driver_call : w.runtime_call;
      EXPECT_EQ(c->name, want.name);
      EXPECT_EQ(c->cbid, want.cbid);
      EXPECT_EQ(c->start_ns, want.start_ns);
      EXPECT_EQ(c->end_ns, want.end_ns);
      EXPECT_EQ(c->process, want.process);
      EXPECT_EQ(c->thread, want.thread);
      EXPECT_EQ(c->correlation, want.correlation);
      EXPECT_EQ(c->return_value, want.return_value);
      EXPECT_EQ(c->tag.case_index, want.tag.case_index);
      EXPECT_EQ(c->tag.phase, want.tag.phase);
      EXPECT_EQ(c->tag.iteration, want.tag.iteration);
    } else if (const auto* r = std::get_if<Annotation>(&a)) {
      ++ranges;
      const Annotation& want = r->on_gpu ? w.gpu_range : w.host_range;
      EXPECT_EQ(r->name, want.name);
      EXPECT_EQ(r->start_ns, want.start_ns);
      EXPECT_EQ(r->end_ns, want.end_ns);
      EXPECT_EQ(r->process, want.process);
      EXPECT_EQ(r->thread, want.thread);
      EXPECT_EQ(r->tag.phase, want.tag.phase);
    } else if (const auto* m = std::get_if<MemoryActivity>(&a)) {
      ++memory;
      const MemoryActivity& want = m->operation == MemoryOperation::allocation ? w.allocation : w.release;
      EXPECT_EQ(m->start_ns, want.start_ns);
      EXPECT_EQ(m->address, want.address);
      EXPECT_EQ(m->bytes, want.bytes);
      EXPECT_EQ(m->memory_kind, want.memory_kind);
      EXPECT_EQ(m->device, want.device);
      EXPECT_EQ(m->context, want.context);
      EXPECT_EQ(m->stream, want.stream);
      EXPECT_EQ(m->process, want.process);
      EXPECT_EQ(m->thread, want.thread);
      EXPECT_EQ(m->correlation, want.correlation);
      EXPECT_EQ(m->api, want.api);
      EXPECT_EQ(m->pool_address, want.pool_address);
      EXPECT_EQ(m->pool_type, want.pool_type);
      EXPECT_EQ(m->role, want.role);
      EXPECT_EQ(m->tag.case_index, want.tag.case_index);
      EXPECT_EQ(m->tag.phase, want.tag.phase);
      EXPECT_EQ(m->tag.iteration, want.tag.iteration);
    } else if (const auto* o = std::get_if<OverheadActivity>(&a)) {
      ++overheads;
      EXPECT_EQ(o->kind, w.overhead.kind);
      EXPECT_EQ(o->start_ns, w.overhead.start_ns);
      EXPECT_EQ(o->thread, w.overhead.thread);
    }
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(memcpys, 1);
  EXPECT_EQ(memsets, 1);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ranges, 2);
  EXPECT_EQ(overheads, 1);
  EXPECT_EQ(memory, 2);
}

}  // namespace
}  // namespace attnprof::trace

namespace attnprof {
namespace {

TEST(OutputFormats, EachNameParsesToItsFormatAndBack) {
  for (const OutputFormatName& f : kOutputFormats) {
    EXPECT_EQ(parse_output_format(f.name), f.format) << f.name;
    EXPECT_EQ(to_string(f.format), f.name);
    EXPECT_EQ(output_format_named(f.name), f.format);
  }
  EXPECT_EQ(parse_output_format("CSV"), std::nullopt);
  EXPECT_EQ(parse_output_format(""), std::nullopt);
}

TEST(OutputFormats, CheckHasNoCsvReport) {
  EXPECT_EQ(output_format_names(), (std::vector<std::string>{"table", "md", "csv", "json"}));
  EXPECT_EQ(output_format_names(RenderedReport::check), (std::vector<std::string>{"table", "md", "json"}));
  EXPECT_EQ(parse_output_format("csv", RenderedReport::check), std::nullopt);
  EXPECT_EQ(parse_output_format("md", RenderedReport::check), OutputFormat::md);
}

TEST(OutputFormats, AnUnknownNameIsAUsageErrorListingTheChoices) {
  try {
    output_format_named("csv", RenderedReport::check);
    FAIL() << "csv accepted for check";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "unknown format 'csv': use table, md or json");
  }
  EXPECT_THROW(output_format_named("xml"), UsageError);
  EXPECT_EQ(choice_list(output_format_names()), "table, md, csv or json");
  EXPECT_EQ(choice_list({"json"}), "json");
  EXPECT_EQ(choice_list({"json", "json.gz"}), "json or json.gz");
}

}  // namespace
}  // namespace attnprof
