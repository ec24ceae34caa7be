// Device-memory records, CUPTI to trace.json and back: synthetic CUpti_ActivityMemory4 records
// converted and tagged by correlation, what CUPTI may give that this build does not name (counted,
// never fatal), the writer's Kineto "[memory]" events and the "device memory in use" counter track,
// the round trip through the reader, torch.profiler's own "[memory]" events, a release whose
// allocation the trace does not hold, and a merge of two ranks' memory.
#include <cupti.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "collector/cupti_records.hpp"
#include "collector/sweep_tags.hpp"
#include "support/scratch_dir.hpp"
#include "trace/annotation_cases.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/json_pull_parser.hpp"
#include "trace/trace_keys.hpp"
#include "trace/trace_merge.hpp"

namespace attnprof {
namespace {

constexpr std::uint64_t kBase = 1'700'000'000'000'000'000ull;
constexpr std::uint32_t kHostPid = 4242;

// ---- the collector: CUPTI records -> MemoryActivity ----

template <typename Record>
Record zeroed(CUpti_ActivityKind kind) {
  Record r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  return r;
}

const CUpti_Activity& as_activity(const void* record) { return *static_cast<const CUpti_Activity*>(record); }

CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType operation, std::uint64_t address,
                                    std::uint64_t bytes, std::uint64_t timestamp, std::uint32_t correlation) {
  auto r = zeroed<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
  r.memoryOperationType = operation;
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.correlationId = correlation;
  r.address = address;
  r.bytes = bytes;
  r.timestamp = timestamp;
  r.processId = kHostPid;
  r.deviceId = 1;
  r.contextId = 3;
  r.streamId = CUPTI_INVALID_STREAM_ID;  // not stream-ordered
  return r;
}

TEST(CuptiMemoryRecords, AnAllocationBecomesAMemoryActivity) {
  RecordConversion state;
  const auto r = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000200000, 1 << 20, 5'000, 12);
  convert_record(as_activity(&r), state);
  ASSERT_EQ(state.batch.memory.size(), 1u);
  const trace::MemoryActivity& m = state.batch.memory[0];
  EXPECT_EQ(m.operation, trace::MemoryOperation::allocation);
  EXPECT_EQ(m.start_ns, 5'000u);
  EXPECT_EQ(m.address, 0x7f0000200000u);
  EXPECT_EQ(m.bytes, 1u << 20);
  EXPECT_EQ(m.memory_kind, "Device");
  EXPECT_EQ(m.device, 1u);
  EXPECT_EQ(m.context, 3u);
  EXPECT_EQ(m.stream, 0u);  // CUPTI_INVALID_STREAM_ID: not stream-ordered
  EXPECT_EQ(m.process, kHostPid);
  EXPECT_EQ(m.correlation, 12u);
  EXPECT_EQ(m.pool_address, 0u);
  EXPECT_EQ(m.pool_type, "");
  EXPECT_EQ(state.health.records, 1u);
  EXPECT_TRUE(memory_record_notes(state.memory_counts).empty());
}

TEST(CuptiMemoryRecords, AStreamOrderedReleaseKeepsItsStreamAndPool) {
  RecordConversion state;
  auto r = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x7f0000400000, 4096, 9'000, 13);
  r.streamId = 7;
  r.isAsync = 1;
  r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
  r.memoryPoolConfig.address = 0x7f0000000000;
  convert_record(as_activity(&r), state);
  ASSERT_EQ(state.batch.memory.size(), 1u);
  const trace::MemoryActivity& m = state.batch.memory[0];
  EXPECT_EQ(m.operation, trace::MemoryOperation::release);
  EXPECT_EQ(m.bytes, 4096u);
  EXPECT_EQ(m.stream, 7u);
  EXPECT_EQ(m.pool_type, "local");
  EXPECT_EQ(m.pool_address, 0x7f0000000000u);
}

// A newer CUPTI may name kinds, operations and pool types this build does not: counted, never fatal.
TEST(CuptiMemoryRecords, ValuesThisBuildDoesNotNameAreCountedNotFatal) {
  RecordConversion state;
  auto odd_kind = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000, 64, 100, 1);
  odd_kind.memoryKind = static_cast<CUpti_ActivityMemoryKind>(99);
  auto odd_operation = memory_record(static_cast<CUpti_ActivityMemoryOperationType>(7), 0x2000, 64, 200, 2);
  auto odd_pool = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x3000, 64, 300, 3);
  odd_pool.memoryPoolConfig.memoryPoolType = static_cast<CUpti_ActivityMemoryPoolType>(9);
  odd_pool.memoryPoolConfig.address = 0x9000;
  const auto no_time = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x4000, 64, 0, 4);
  auto pool = zeroed<CUpti_ActivityMemoryPool3>(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
  pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
  for (const void* r : {static_cast<const void*>(&odd_kind), static_cast<const void*>(&odd_operation),
                        static_cast<const void*>(&odd_pool), static_cast<const void*>(&no_time),
                        static_cast<const void*>(&pool)})
    convert_record(as_activity(r), state);

  ASSERT_EQ(state.batch.memory.size(), 2u);
  EXPECT_EQ(state.batch.memory[0].memory_kind, "Unknown");
  EXPECT_EQ(state.batch.memory[1].pool_type, "unknown");
  EXPECT_EQ(state.batch.memory[1].pool_address, 0x9000u);
  EXPECT_EQ(state.memory_counts.unknown_kind, 1u);
  EXPECT_EQ(state.memory_counts.unknown_operation, 1u);
  EXPECT_EQ(state.memory_counts.unknown_pool_type, 1u);
  EXPECT_EQ(state.memory_counts.pool_operations, 1u);
  EXPECT_EQ(state.health.invalid_timestamps, 1u);
  EXPECT_EQ(state.health.records, 5u);
  const std::vector<std::string> notes = memory_record_notes(state.memory_counts);
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_NE(notes[0].find("1 memory record(s) of an operation type"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("\"Unknown\""), std::string::npos) << notes[1];
}

CUpti_ActivityAPI api_record(std::uint32_t cbid, std::uint64_t start, std::uint32_t correlation) {
  auto r = zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  r.cbid = cbid;
  r.start = start;
  r.end = start + 1'000;
  r.processId = kHostPid;
  r.threadId = 77;
  r.correlationId = correlation;
  return r;
}

CUpti_ActivityExternalCorrelation external_record(std::uint32_t correlation, const trace::SweepTag& tag) {
  auto r = zeroed<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  r.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  r.correlationId = correlation;
  r.externalId = encode_tag(tag);
  return r;
}

// As memcpy and memset records are: the call with the same correlation id names it and gives its tag.
TEST(CuptiMemoryRecords, TaggedByTheCallWithTheirCorrelationId) {
  RecordConversion state;
  const trace::SweepTag plan{2, trace::Phase::plan, -1};
  const trace::SweepTag iteration{2, trace::Phase::iteration, 1};
  const auto malloc_call = api_record(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1'000, 5);
  const auto malloc_tag = external_record(5, plan);
  const auto allocation = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x1000, 256, 1'500, 5);
  // Its call not recorded (a driver call under an unrecorded runtime call): the tag still comes.
  const auto untraced_tag = external_record(6, iteration);
  const auto release = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x1000, 256, 9'000, 6);
  const auto internal = memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x8000, 64, 50, 0);
  for (const void* r : {static_cast<const void*>(&allocation), static_cast<const void*>(&malloc_call),
                        static_cast<const void*>(&malloc_tag), static_cast<const void*>(&untraced_tag),
                        static_cast<const void*>(&release), static_cast<const void*>(&internal)})
    convert_record(as_activity(r), state);
  join_launches(state.batch, state.external_ids);

  ASSERT_EQ(state.batch.memory.size(), 3u);
  const trace::MemoryActivity& a = state.batch.memory[0];
  EXPECT_EQ(a.api, "cudaMalloc");
  EXPECT_EQ(a.thread, 77u);
  EXPECT_EQ(a.tag.case_index, 2);
  EXPECT_EQ(a.tag.phase, trace::Phase::plan);
  const trace::MemoryActivity& r = state.batch.memory[1];
  EXPECT_EQ(r.api, "");
  EXPECT_EQ(r.tag.case_index, 2);
  EXPECT_EQ(r.tag.phase, trace::Phase::iteration);
  EXPECT_EQ(r.tag.iteration, 1);
  EXPECT_EQ(state.batch.memory[2].tag.case_index, -1);  // made outside any call
  ASSERT_EQ(state.batch.api_calls.size(), 1u);
  EXPECT_FALSE(state.batch.api_calls[0].launches_work);  // an allocation is no flow's start
}

// ---- the writer ----

std::filesystem::path scratch(const std::string& name) { return test::fresh_dir("attnprof_memory_trace_test", name); }

nlohmann::json parse_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());  // throws on invalid JSON
}

trace::TraceHeader test_header(std::uint32_t host_pid = kHostPid) {
  trace::TraceHeader header;
  header.base_time_ns = kBase;
  header.devices = {sm90_reference_properties()};
  header.devices[0].id = 0;
  header.host_process = host_pid;
  header.host_process_name = "attnprof test";
  return header;
}

trace::MemoryActivity allocation(std::uint64_t address, std::uint64_t bytes, std::uint64_t at_ns) {
  trace::MemoryActivity m;
  m.operation = trace::MemoryOperation::allocation;
  m.start_ns = kBase + at_ns;
  m.address = address;
  m.bytes = bytes;
  m.memory_kind = "Device";
  m.context = 1;
  m.process = kHostPid;
  m.thread = 99;
  m.api = "cudaMalloc";
  return m;
}

trace::MemoryActivity release_of(const trace::MemoryActivity& a, std::uint64_t at_ns) {
  trace::MemoryActivity m = a;
  m.operation = trace::MemoryOperation::release;
  m.start_ns = kBase + at_ns;
  m.api = "cudaFree";
  return m;
}

std::vector<nlohmann::json> events_where(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.at("ph") == ph) out.push_back(e);
  return out;
}

TEST(MemoryTraceWriter, WritesKinetosMemoryEventsAndACounterTrackThatGoesUpAndDown) {
  const auto path = scratch("up_and_down") / "trace.json";
  const trace::MemoryActivity a = allocation(0x7f0000200000, 1000, 1'000);
  const trace::MemoryActivity b = allocation(0x7f0000400000, 500, 2'000);
  trace::MemoryActivity pinned = allocation(0x7e0000000000, 64, 2'500);
  pinned.memory_kind = "Pinned";
  pinned.api = "cudaHostAlloc";
  trace::ActivityBatch batch;
  // Out of time order, as CUPTI's per-thread buffers may give them: the writer sorts a batch.
  batch.memory = {release_of(b, 4'000), a, b, pinned, release_of(a, 3'000)};
  {
    trace::ChromeTraceWriter writer(path, test_header());
    writer.write(batch);
    writer.finish(nlohmann::json::object());
  }
  const nlohmann::json trace = parse_file(path);

  const std::vector<nlohmann::json> memory = events_where(trace, "i");
  ASSERT_EQ(memory.size(), 5u);
  for (const nlohmann::json& e : memory) {
    EXPECT_EQ(e.at("cat"), "cpu_instant_event");
    EXPECT_EQ(e.at("s"), "t");
    EXPECT_EQ(e.at("name"), "[memory]");
    EXPECT_EQ(e.at("pid"), kHostPid);  // on the host thread that made the call, as Kineto has them
    EXPECT_EQ(e.at("tid"), 99);
    for (const char* key : {"Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"})
      EXPECT_TRUE(e.at("args").contains(key)) << key;
  }
  const nlohmann::json& first = memory[0].at("args");
  EXPECT_EQ(memory[0].at("ts"), 1.0);
  EXPECT_EQ(first.at("Device Type"), 1);  // CUDA, in Kineto's numbering
  EXPECT_EQ(first.at("Device Id"), 0);
  EXPECT_EQ(first.at("Addr").get<std::uint64_t>(), 0x7f0000200000u);
  EXPECT_EQ(first.at("Bytes"), 1000);
  EXPECT_EQ(first.at("operation"), "allocation");
  EXPECT_EQ(first.at("memory kind"), "Device");
  EXPECT_EQ(first.at("api"), "cudaMalloc");
  EXPECT_FALSE(first.contains("pool address"));
  EXPECT_FALSE(first.contains("role"));
  EXPECT_FALSE(first.contains("case index"));  // untagged

  std::vector<std::int64_t> bytes, totals;
  for (const nlohmann::json& e : memory) {
    if (e.at("args").at("memory kind") == "Pinned") {
      EXPECT_EQ(e.at("args").at("Device Type"), 0);  // host memory: Kineto's CPU
      EXPECT_EQ(e.at("args").at("Total Allocated"), 64);
      continue;
    }
    bytes.push_back(e.at("args").at("Bytes").get<std::int64_t>());
    totals.push_back(e.at("args").at("Total Allocated").get<std::int64_t>());
    EXPECT_EQ(e.at("args").at("Total Reserved"), e.at("args").at("Total Allocated"));
  }
  EXPECT_EQ(bytes, (std::vector<std::int64_t>{1000, 500, -1000, -500}));  // negative: a release
  EXPECT_EQ(totals, (std::vector<std::int64_t>{1000, 1500, 500, 0}));

  // The counter: device memory only, on the GPU's process, one value per change, in time order.
  const std::vector<nlohmann::json> counter = events_where(trace, "C");
  ASSERT_EQ(counter.size(), 4u);
  std::vector<std::int64_t> values;
  double last_ts = -1;
  for (const nlohmann::json& e : counter) {
    EXPECT_EQ(e.at("name"), "device memory in use");
    EXPECT_EQ(e.at("pid"), 0);  // GPU 0's process
    EXPECT_GE(e.at("ts").get<double>(), last_ts);
    last_ts = e.at("ts").get<double>();
    values.push_back(e.at("args").at("bytes").get<std::int64_t>());
  }
  EXPECT_EQ(values, totals);
  bool gpu_named = false;
  for (const nlohmann::json& e : events_where(trace, "M"))
    gpu_named = gpu_named || (e.at("name") == "process_name" && e.at("pid") == 0);
  EXPECT_TRUE(gpu_named) << "the counter's process is named like every GPU's";
}

TEST(MemoryTraceWriter, AReleaseOfMemoryAllocatedBeforeTheTraceStopsAtZero) {
  const auto path = scratch("release_first") / "trace.json";
  {
    trace::ChromeTraceWriter writer(path, test_header());
    writer.write(release_of(allocation(0x1000, 4096, 0), 10));
    writer.write(allocation(0x2000, 100, 20));
    writer.finish(nlohmann::json::object());
  }
  const std::vector<nlohmann::json> counter = events_where(parse_file(path), "C");
  ASSERT_EQ(counter.size(), 2u);
  EXPECT_EQ(counter[0].at("args").at("bytes"), 0);
  EXPECT_EQ(counter[1].at("args").at("bytes"), 100);
}

// ---- the reader ----

std::vector<trace::MemoryActivity> read_memory(trace::JsonPullParser& parser, trace::TraceEventConverter& converter) {
  std::vector<trace::MemoryActivity> out;
  trace::read_chrome_trace(parser, [&](const trace::TraceEvent& e, const trace::TraceDocument& doc) {
    std::optional<trace::Activity> a = converter.convert(e, doc);
    if (!a) return;
    if (auto* m = std::get_if<trace::MemoryActivity>(&*a)) out.push_back(std::move(*m));
  });
  return out;
}

std::vector<trace::MemoryActivity> read_memory(const std::filesystem::path& path, trace::TraceEventConverter& converter) {
  trace::JsonPullParser parser(path);
  return read_memory(parser, converter);
}

void expect_same(const trace::MemoryActivity& got, const trace::MemoryActivity& want) {
  EXPECT_EQ(got.operation, want.operation);
  EXPECT_EQ(got.start_ns, want.start_ns);
  EXPECT_EQ(got.address, want.address);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.memory_kind, want.memory_kind);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.context, want.context);
  EXPECT_EQ(got.stream, want.stream);
  EXPECT_EQ(got.process, want.process);
  EXPECT_EQ(got.thread, want.thread);
  EXPECT_EQ(got.correlation, want.correlation);
  EXPECT_EQ(got.api, want.api);
  EXPECT_EQ(got.pool_address, want.pool_address);
  EXPECT_EQ(got.pool_type, want.pool_type);
  EXPECT_EQ(got.role, want.role);
  EXPECT_EQ(got.tag.case_index, want.tag.case_index);
  EXPECT_EQ(got.tag.phase, want.tag.phase);
  EXPECT_EQ(got.tag.iteration, want.tag.iteration);
}

TEST(MemoryTraceReader, ReadsBackEveryFieldTheWriterWrote) {
  const auto path = scratch("round_trip") / "trace.json";
  std::vector<trace::MemoryActivity> written;
  trace::MemoryActivity pooled = allocation(0xffff'ff00'0000'1000ull, 3 << 20, 1'234);  // past INT64_MAX
  pooled.device = 0;
  pooled.stream = 7;
  pooled.correlation = 31;
  pooled.api = "cudaMallocAsync";
  pooled.pool_address = 0xffff'ff00'0000'0000ull;
  pooled.pool_type = "local";
  pooled.role = "scores";
  pooled.tag = {0, trace::Phase::iteration, 3};
  written.push_back(pooled);
  trace::MemoryActivity odd = allocation(0x5000, 8, 2'000);
  odd.memory_kind = "Unknown";
  odd.tag = {0, trace::Phase::plan, -1};
  written.push_back(odd);
  trace::MemoryActivity pinned = allocation(0x6000, 16, 2'500);
  pinned.memory_kind = "Pinned";
  written.push_back(pinned);
  trace::MemoryActivity freed = release_of(pooled, 5'001);
  freed.api = "cudaFreeAsync";
  written.push_back(freed);
  trace::MemoryActivity empty_release = release_of(odd, 6'000);
  empty_release.bytes = 0;  // a release of zero bytes is still a release
  written.push_back(empty_release);
  {
    trace::ChromeTraceWriter writer(path, test_header());
    writer.add_case({"flash bf16", "flash"});
    for (const trace::MemoryActivity& m : written) writer.write(m);
    writer.finish(nlohmann::json::object());
  }
  trace::TraceEventConverter converter;
  const std::vector<trace::MemoryActivity> read = read_memory(path, converter);  // the counter events are skipped
  ASSERT_EQ(read.size(), written.size());
  for (std::size_t i = 0; i < read.size(); ++i) {
    SCOPED_TRACE(i);
    expect_same(read[i], written[i]);
  }
  EXPECT_TRUE(converter.notes().empty());
}

// What torch.profiler(profile_memory=True) writes: CUDA and CPU allocations of its caching
// allocators (Addr signed, Bytes negative for a free), an out-of-memory event, and counters of others.
constexpr const char* kKinetoMemoryTrace = R"({
  "schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 6504, "tid": 6569, "ts": 10.500,
   "args": {"Total Reserved": 2097152, "Total Allocated": 102400, "Bytes": 102400, "Addr": 137224702615552,
            "Device Id": 0, "Device Type": 1, "Ev Idx": 126}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 6504, "tid": 6569, "ts": 11.000,
   "args": {"Total Reserved": 0, "Total Allocated": 4096, "Bytes": 4096, "Addr": 94558316193792,
            "Device Id": -1, "Device Type": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", "pid": 6504, "tid": 6569, "ts": 11.5,
   "args": {"Total Reserved": 0, "Total Allocated": 0, "Bytes": 1, "Device Id": 0, "Device Type": 1}},
  {"ph": "C", "name": "device memory in use", "pid": 0, "ts": 11.0, "args": {"bytes": 102400}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 6504, "tid": 6570, "ts": 12.250,
   "args": {"Total Reserved": 2097152, "Total Allocated": 0, "Bytes": -102400, "Addr": 137224702615552,
            "Device Id": 0, "Device Type": 1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 6504, "tid": 6570, "ts": 13,
   "args": {"Bytes": -512, "Addr": -4096, "Device Id": 1, "Device Type": 1}}
  ]
})";

TEST(MemoryTraceReader, ReadsKinetosMemoryEventsOfCudaDevices) {
  trace::JsonPullParser parser(kKinetoMemoryTrace, "kineto.json");
  trace::TraceEventConverter converter;
  const std::vector<trace::MemoryActivity> read = read_memory(parser, converter);
  ASSERT_EQ(read.size(), 3u);  // the CPU allocation, the out-of-memory event and the counter are not
  const trace::MemoryActivity& a = read[0];
  EXPECT_EQ(a.operation, trace::MemoryOperation::allocation);
  EXPECT_EQ(a.start_ns, kBase + 10'500);
  EXPECT_EQ(a.address, 137224702615552u);
  EXPECT_EQ(a.bytes, 102400u);
  EXPECT_EQ(a.memory_kind, "Device");
  EXPECT_EQ(a.device, 0u);
  EXPECT_EQ(a.process, 6504u);
  EXPECT_EQ(a.thread, 6569u);
  EXPECT_EQ(a.correlation, 0u);
  EXPECT_EQ(a.tag.case_index, -1);
  const trace::MemoryActivity& freed = read[1];
  EXPECT_EQ(freed.operation, trace::MemoryOperation::release);
  EXPECT_EQ(freed.bytes, 102400u);
  EXPECT_EQ(freed.address, a.address);
  EXPECT_EQ(freed.thread, 6570u);
  // A release the trace holds no allocation of (the profiler started after it): kept, and counted.
  const trace::MemoryActivity& orphan = read[2];
  EXPECT_EQ(orphan.operation, trace::MemoryOperation::release);
  EXPECT_EQ(orphan.bytes, 512u);
  EXPECT_EQ(orphan.address, static_cast<std::uint64_t>(-4096));  // Kineto's intptr_t, its 64 bits
  EXPECT_EQ(orphan.device, 1u);
  const std::vector<std::string>& notes = converter.notes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "1 \"[memory]\" event(s) of memory not on a CUDA device (\"Device Type\" other than 1) left out");
  EXPECT_EQ(notes[1], "1 memory release(s) of an allocation the trace does not hold (made before it began)");
}

TEST(MemoryTraceReader, AReleaseWithoutItsAllocationIsCountedNotAnError) {
  const auto path = scratch("cut") / "trace.json";
  {
    trace::ChromeTraceWriter writer(path, test_header());
    const trace::MemoryActivity before = allocation(0x1000, 256, 0);
    writer.write(release_of(before, 100));
    writer.write(release_of(allocation(0x2000, 128, 0), 200));
    writer.write(allocation(0x3000, 64, 300));
    writer.write(release_of(allocation(0x3000, 64, 0), 400));
    writer.finish(nlohmann::json::object());
  }
  trace::TraceEventConverter converter;
  const std::vector<trace::MemoryActivity> read = read_memory(path, converter);
  EXPECT_EQ(read.size(), 4u);
  ASSERT_EQ(converter.notes().size(), 1u);
  EXPECT_EQ(converter.notes()[0], "2 memory release(s) of an allocation the trace does not hold (made before it began)");
}

// ---- cases from ranges (profile, Kineto traces) ----

TEST(MemoryCases, AnAllocationTakesItsCallsCaseOrTheRangeAroundItOnItsThread) {
  trace::ActivityBatch batch;
  trace::Annotation range;
  range.name = "attention";
  range.start_ns = 1'000;
  range.end_ns = 9'000;
  range.process = kHostPid;
  range.thread = 99;
  batch.annotations = {range};
  trace::KernelActivity k;
  k.start_ns = 2'000;
  k.end_ns = 3'000;
  k.correlation = 5;
  batch.kernels = {k};
  trace::ApiCall launch;
  launch.name = "cudaLaunchKernel";
  launch.start_ns = 1'500;
  launch.end_ns = 1'600;
  launch.process = kHostPid;
  launch.thread = 99;
  launch.correlation = 5;
  launch.launches_work = true;
  trace::ApiCall malloc_call = launch;
  malloc_call.name = "cudaMalloc";
  malloc_call.correlation = 6;
  malloc_call.launches_work = false;
  batch.api_calls = {launch, malloc_call};
  trace::MemoryActivity by_call = allocation(0x1000, 64, 0);
  by_call.start_ns = 1'550;
  by_call.correlation = 6;
  trace::MemoryActivity by_thread = allocation(0x2000, 64, 0);  // Kineto's: no correlation
  by_thread.start_ns = 4'000;
  trace::MemoryActivity outside = by_thread;
  outside.start_ns = 10'000;
  batch.memory = {by_call, by_thread, outside};

  trace::assign_cases_from_annotations(batch);
  EXPECT_EQ(batch.memory[0].tag.case_index, 0);
  EXPECT_EQ(batch.memory[0].tag.phase, trace::Phase::iteration);
  EXPECT_EQ(batch.memory[1].tag.case_index, 0);
  EXPECT_EQ(batch.memory[2].tag.case_index, -1);
}

// ---- merge ----

TEST(MemoryMerge, EveryRanksMemoryIsKeptOnItsOwnProcessAndGpu) {
  const auto dir = scratch("merge");
  for (int rank : {0, 1}) {
    trace::TraceHeader header = test_header(100 + rank);
    header.rank = rank;
    trace::ChromeTraceWriter writer(dir / fmt::format("trace-rank{}.json", rank), header);
    trace::MemoryActivity a = allocation(0x1000, 1000 * (rank + 1), 1'000);
    a.process = 100 + rank;
    a.correlation = 3;
    writer.write(a);
    writer.write(release_of(a, 2'000));
    writer.finish(nlohmann::json::object());
  }
  std::vector<trace::MergeInput> inputs;
  for (int rank : {0, 1})
    inputs.push_back({trace::read_trace_head(dir / fmt::format("trace-rank{}.json", rank)), fmt::format("rank {}", rank),
                      static_cast<std::uint32_t>(rank)});
  trace::merge_traces(inputs, dir / "merged.json", {}, [](const trace::MergeResult&) { return nlohmann::json::object(); });

  const nlohmann::json merged = parse_file(dir / "merged.json");
  std::map<std::uint32_t, std::vector<std::int64_t>> bytes_by_host, counter_by_gpu_pid;
  for (const nlohmann::json& e : events_where(merged, "i"))
    bytes_by_host[e.at("pid").get<std::uint32_t>()].push_back(e.at("args").at("Bytes").get<std::int64_t>());
  for (const nlohmann::json& e : events_where(merged, "C"))
    counter_by_gpu_pid[e.at("pid").get<std::uint32_t>()].push_back(e.at("args").at("bytes").get<std::int64_t>());
  EXPECT_EQ(bytes_by_host, (std::map<std::uint32_t, std::vector<std::int64_t>>{{100, {1000, -1000}}, {101, {2000, -2000}}}));
  // GPU 0 of rank r is pid r * 1000, each with its own total.
  EXPECT_EQ(counter_by_gpu_pid, (std::map<std::uint32_t, std::vector<std::int64_t>>{{0, {1000, 0}}, {1000, {2000, 0}}}));
}

}  // namespace
}  // namespace attnprof
