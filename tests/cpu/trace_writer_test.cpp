// The streaming Chrome-trace writer: structure (Kineto schema), escaping of C++ kernel names,
// ac2g flows, timestamps, atomic rename, and a golden file for the exact text.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "trace/chrome_trace_writer.hpp"

namespace attnprof::trace {
namespace {

constexpr std::uint64_t kBase = 1'700'000'000'000'000'000ull;
const std::string kNastyName = "void ns::kernel<\"quoted\", a\\b, 3>(float*)\t\x01 end";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TraceHeader test_header() {
  TraceHeader h;
  h.base_time_ns = kBase;
  h.devices = {sm90_reference_properties()};
  h.host_process = 4242;
  h.host_process_name = "attnprof test (pid 4242)";
  return h;
}

ActivityBatch test_batch() {
  ActivityBatch b;
  const SweepTag iter2{0, Phase::iteration, 2};
  ApiCall launch;
  launch.name = "cudaLaunchKernel";
  launch.cbid = 211;
  launch.start_ns = kBase + 1000;
  launch.end_ns = kBase + 3500;
  launch.thread = 99;
  launch.correlation = 11;
  launch.launches_work = true;
  launch.tag = iter2;
  b.api_calls.push_back(launch);
  ApiCall copy = launch;
  copy.name = "cudaMemcpyAsync";
  copy.cbid = 41;
  copy.correlation = 12;
  copy.start_ns = kBase + 4000;
  copy.end_ns = kBase + 4500;
  b.api_calls.push_back(copy);
  ApiCall driver = launch;
  driver.domain = ApiDomain::driver;
  driver.name = "cuCtxGetCurrent";
  driver.cbid = 9;
  driver.correlation = 13;
  driver.launches_work = false;
  driver.start_ns = kBase + 1200;
  driver.end_ns = kBase + 1300;
  b.api_calls.push_back(driver);

  KernelActivity k;
  k.name = kNastyName;
  k.start_ns = kBase + 10'000;
  k.end_ns = kBase + 1'250'123;
  k.device = 0;
  k.context = 1;
  k.stream = 7;
  k.correlation = 11;
  k.grid = {264, 1, 1};
  k.block = {128, 1, 1};
  k.registers_per_thread = 255;
  k.dynamic_shared_bytes = 65536;
  k.shared_optin = true;
  k.occupancy.valid = true;
  k.occupancy.active_blocks_per_sm = 2;
  k.occupancy.theoretical_percent = 12.5;
  k.occupancy.limiter = "registers";
  k.occupancy.block_limit_registers = 2;
  k.occupancy.block_limit_shared_memory = 3;
  k.occupancy.block_limit_warps = 16;
  k.occupancy.block_limit_blocks = 32;
  k.launch_api = "cudaLaunchKernel";
  k.tag = iter2;
  b.kernels.push_back(k);

  MemcpyActivity m;
  m.kind = MemcpyKind::DtoD;
  m.src_memory = "Device";
  m.dst_memory = "Device";
  m.bytes = 1 << 20;
  m.start_ns = kBase + 1'300'000;
  m.end_ns = kBase + 1'301'000;
  m.stream = 7;
  m.correlation = 12;
  m.launch_api = "cudaMemcpyAsync";
  m.tag = iter2;
  b.memcpys.push_back(m);

  MemsetActivity s;
  s.bytes = 4;
  s.memory = "Device";
  s.start_ns = kBase - 5;  // before the base: clamped to 0
  s.end_ns = kBase + 10;
  s.stream = 7;
  b.memsets.push_back(s);

  Annotation a;
  a.name = "iter 2";
  a.start_ns = kBase + 900;
  a.end_ns = kBase + 5000;
  a.thread = 99;
  a.tag = iter2;
  b.annotations.push_back(a);
  Annotation g = a;
  g.on_gpu = true;
  g.process = 0;
  g.thread = 7;
  g.start_ns = k.start_ns;
  g.end_ns = m.end_ns;
  b.annotations.push_back(g);

  b.overheads.push_back({"CUPTI overhead: buffer flush", kBase + 6000, kBase + 7000, 4242, 99});
  return b;
}

std::filesystem::path temp_trace(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / "attnprof_trace_writer_test";
  std::filesystem::create_directories(dir);
  return dir / name;
}

nlohmann::json write_and_parse(const std::filesystem::path& path) {
  {
    ChromeTraceWriter writer(path, test_header());
    writer.add_case({"flash bf16 causal 1x1x4x4x64", "flash"});
    writer.write(test_batch());
    writer.finish({{"tool", "attnprof"}, {"capture", {{"dropped_records", 0}}}});
  }
  return nlohmann::json::parse(read_file(path));
}

TEST(ChromeTraceWriter, WritesTheKinetoSchema) {
  const auto path = temp_trace("schema.json");
  const nlohmann::json t = write_and_parse(path);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  EXPECT_EQ(t.at("schemaVersion"), 1);
  EXPECT_EQ(t.at("baseTimeNanoseconds"), kBase);
  EXPECT_EQ(t.at("displayTimeUnit"), "ms");
  EXPECT_EQ(t.at("deviceProperties").at(0).at("numSms"), 132);
  EXPECT_EQ(t.at("deviceProperties").at(0).at("regsPerMultiprocessor"), 65536);
  EXPECT_EQ(t.at("attnprof").at("tool"), "attnprof");

  std::map<std::string, int> categories;
  int process_names = 0, thread_names = 0;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    if (e.at("ph") == "X") ++categories[e.at("cat").get<std::string>()];
    if (e.at("ph") == "M" && e.at("name") == "process_name") ++process_names;
    if (e.at("ph") == "M" && e.at("name") == "thread_name") ++thread_names;
    EXPECT_TRUE(e.at("pid").is_number_unsigned()) << e.dump();
  }
  EXPECT_EQ(process_names, 2);  // the host process and GPU 0
  EXPECT_EQ(thread_names, 2);   // host thread 99 and stream 7
  EXPECT_EQ(categories["kernel"], 1);
  EXPECT_EQ(categories["gpu_memcpy"], 1);
  EXPECT_EQ(categories["gpu_memset"], 1);
  EXPECT_EQ(categories["cuda_runtime"], 2);
  EXPECT_EQ(categories["cuda_driver"], 1);
  EXPECT_EQ(categories["user_annotation"], 1);
  EXPECT_EQ(categories["gpu_user_annotation"], 1);
  EXPECT_EQ(categories["overhead"], 1);
}

TEST(ChromeTraceWriter, KernelArgsCarryResourcesOccupancyAndCase) {
  const nlohmann::json t = write_and_parse(temp_trace("kernel.json"));
  for (const nlohmann::json& e : t.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "kernel") continue;
    EXPECT_EQ(e.at("name"), kNastyName);  // escaped on write, identical after parsing
    EXPECT_EQ(e.at("pid"), 0);
    EXPECT_EQ(e.at("tid"), 7);
    EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 10.0);
    EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 1240.123);
    const nlohmann::json& a = e.at("args");
    EXPECT_EQ(a.at("registers per thread"), 255);
    EXPECT_EQ(a.at("shared memory"), 65536);
    EXPECT_EQ(a.at("grid"), (std::vector<int>{264, 1, 1}));
    EXPECT_EQ(a.at("block"), (std::vector<int>{128, 1, 1}));
    EXPECT_DOUBLE_EQ(a.at("blocks per SM").get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(a.at("warps per SM").get<double>(), 8.0);
    EXPECT_DOUBLE_EQ(a.at("theoretical occupancy %").get<double>(), 12.5);
    EXPECT_EQ(a.at("occupancy limiter"), "registers");
    EXPECT_EQ(a.at("est. achieved occupancy %"), 13);  // Kineto's rounding of 12.5
    EXPECT_EQ(a.at("launch api"), "cudaLaunchKernel");
    EXPECT_EQ(a.at("correlation"), 11);
    EXPECT_EQ(a.at("stream"), 7);
    EXPECT_EQ(a.at("backend"), "flash");
    EXPECT_EQ(a.at("case"), "flash bf16 causal 1x1x4x4x64");
    EXPECT_EQ(a.at("phase"), "iter");
    EXPECT_EQ(a.at("iteration"), 2);
  }
}

// The args a launch configuration fixes are formatted once per configuration and reused: every
// kernel of a long, shuffled stream (more configurations than cache slots, and pairs that differ
// in one field only) must carry exactly the args it gets when written alone.
TEST(ChromeTraceWriter, ReusedKernelArgsAreTheKernelsOwn) {
  std::vector<KernelActivity> shapes;
  for (int i = 0; i < 150; ++i) {
    KernelActivity k = test_batch().kernels.front();
    k.grid = {1 + i % 37, 1 + i % 3, 1};
    k.block = {32 * (1 + i % 8), 1, 1};
    k.registers_per_thread = 32 + i % 5;
    k.dynamic_shared_bytes = 1024 * (i % 4);
    k.device = static_cast<std::uint32_t>(i % 2);
    // Pairs with the same launch configuration but for one field, which must not share args.
    if (i % 10 == 9) {
      k = shapes[static_cast<std::size_t>(i - 1)];
      k.occupancy.limiter = "warps";
    }
    if (i % 10 == 4) {
      k = shapes[static_cast<std::size_t>(i - 1)];
      k.local_bytes_per_thread = 16;
    }
    shapes.push_back(k);
  }
  TraceHeader header = test_header();
  header.devices.push_back(sm90_reference_properties());
  header.devices.back().id = 1;
  header.devices.back().sm_count = 66;
  auto args_alone = [&](const KernelActivity& k) {
    const auto path = temp_trace("alone.json");
    {
      ChromeTraceWriter writer(path, header);
      writer.write(k);
      writer.finish({});
    }
    const nlohmann::json trace = nlohmann::json::parse(read_file(path));
    for (const nlohmann::json& e : trace.at("traceEvents"))
      if (e.at("ph") == "X") return e.at("args");
    return nlohmann::json();
  };
  std::vector<nlohmann::json> expected;
  for (const KernelActivity& k : shapes) expected.push_back(args_alone(k));

  std::mt19937 random(12345);
  std::vector<std::size_t> order;
  for (int round = 0; round < 20; ++round)
    for (std::size_t i = 0; i < shapes.size(); ++i) order.push_back(i);
  std::shuffle(order.begin(), order.end(), random);
  const auto path = temp_trace("reused.json");
  {
    ChromeTraceWriter writer(path, header);
    for (std::size_t i : order) writer.write(shapes[i]);
    writer.finish({});
  }
  std::size_t n = 0;
  const nlohmann::json trace = nlohmann::json::parse(read_file(path));
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ASSERT_LT(n, order.size());
    EXPECT_EQ(e.at("args"), expected[order[n]]) << "kernel " << n << " (configuration " << order[n] << ")";
    ++n;
  }
  EXPECT_EQ(n, order.size());
}

TEST(ChromeTraceWriter, FlowsJoinEveryLaunchToItsGpuWork) {
  const nlohmann::json t = write_and_parse(temp_trace("flows.json"));
  std::map<std::uint64_t, nlohmann::json> starts, ends;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    if (e.at("ph") == "s") starts[e.at("id")] = e;
    if (e.at("ph") == "f") ends[e.at("id")] = e;
  }
  ASSERT_EQ(starts.size(), 2u);  // the kernel launch and the memcpy, not the driver query
  ASSERT_EQ(ends.size(), 2u);
  for (const auto& [id, s] : starts) {
    const nlohmann::json& f = ends.at(id);
    EXPECT_EQ(s.at("cat"), "ac2g");
    EXPECT_EQ(f.at("cat"), "ac2g");
    EXPECT_EQ(f.at("bp"), "e");
    EXPECT_EQ(s.at("pid"), 4242);
    EXPECT_EQ(s.at("tid"), 99);
    EXPECT_EQ(f.at("pid"), 0);
    EXPECT_EQ(f.at("tid"), 7);
    EXPECT_LT(s.at("ts").get<double>(), f.at("ts").get<double>());
  }
}

TEST(ChromeTraceWriter, ClampsRecordsBeforeTheBaseToZero) {
  const nlohmann::json t = write_and_parse(temp_trace("clamp.json"));
  for (const nlohmann::json& e : t.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("cat") == "gpu_memset") {
      EXPECT_EQ(e.at("ts").get<double>(), 0.0);
    }
}

TEST(ChromeTraceWriter, UnfinishedWriterStillLeavesValidJson) {
  const auto path = temp_trace("unfinished.json");
  {
    ChromeTraceWriter writer(path, test_header());
    writer.write(test_batch());
  }  // no finish(): the destructor closes the document
  const nlohmann::json t = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(t.at("attnprof").at("incomplete"), true);
  EXPECT_GT(t.at("traceEvents").size(), 10u);
}

TEST(ChromeTraceWriter, EscapesEveryControlCharacter) {
  std::string all;
  for (int c = 0; c < 0x20; ++c) all.push_back(static_cast<char>(c));
  all += "\"\\/<>&'";
  fmt::memory_buffer out;
  append_json_string(out, all);
  EXPECT_EQ(nlohmann::json::parse(fmt::to_string(out)).get<std::string>(), all);
}

// JSON has no inf or NaN: a metric that is not finite is left out, and the trace stays JSON.
TEST(ChromeTraceWriter, NonFiniteMetricsAreLeftOut) {
  const auto path = temp_trace("non_finite.json");
  {
    ChromeTraceWriter writer(path, test_header());
    ActivityBatch b = test_batch();
    b.kernels[0].achieved_occupancy_percent = std::numeric_limits<double>::infinity();
    b.kernels[0].dram_throughput_percent = std::numeric_limits<double>::quiet_NaN();
    b.kernels[0].dram_bytes_per_second = -std::numeric_limits<double>::infinity();
    b.kernels[0].tensor_pipe_percent = 42.0;
    writer.write(b);
    writer.finish(nlohmann::json::object());
  }
  const std::string text = read_file(path);
  EXPECT_EQ(text.find("inf"), std::string::npos);
  EXPECT_EQ(text.find("nan"), std::string::npos);
  const nlohmann::json t = nlohmann::json::parse(text);
  for (const nlohmann::json& e : t.at("traceEvents"))
    if (e.value("cat", "") == "kernel") {
      EXPECT_FALSE(e.at("args").contains("achieved occupancy %"));
      EXPECT_FALSE(e.at("args").contains("dram throughput %"));
      EXPECT_FALSE(e.at("args").contains("dram bandwidth (GB/s)"));
      EXPECT_EQ(e.at("args").at("tensor pipe active %"), 42.0);
    }
}

// A byte that starts no UTF-8 character becomes U+FFFD; well-formed characters stay as they are.
TEST(ChromeTraceWriter, InvalidUtf8BecomesTheReplacementCharacter) {
  const std::string name = "k\xff<\xc3\xa9\xe2\x82>\xed\xa0\x80 \xf0\x9f\x98\x80\xc3";
  fmt::memory_buffer out;
  append_json_string(out, name);
  const std::string text = fmt::to_string(out);
  EXPECT_EQ(text, "\"k\\ufffd<\xc3\xa9\\ufffd\\ufffd>\\ufffd\\ufffd\\ufffd \xf0\x9f\x98\x80\\ufffd\"");
  EXPECT_NO_THROW(nlohmann::json::parse(text));
}

// Paths and names in the attnprof object need not be UTF-8 either: finish() writes the trace,
// where a strict dump threw and left an empty .tmp behind.
TEST(ChromeTraceWriter, MetadataWithInvalidUtf8StillFinishes) {
  const auto path = temp_trace("metadata_utf8.json");
  std::filesystem::remove(path);
  {
    ChromeTraceWriter writer(path, test_header());
    ActivityBatch b = test_batch();
    b.kernels[0].name = "kernel \xff";
    writer.write(b);
    EXPECT_NO_THROW(writer.finish({{"inputs", nlohmann::json::array({"trace-\xfe.json"})}}));
  }
  EXPECT_FALSE(std::filesystem::exists(temp_trace("metadata_utf8.json.tmp")));
  const nlohmann::json t = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(t.at("attnprof").at("inputs").at(0), "trace-\xef\xbf\xbd.json");
}

// The exact text against tests/golden/small_trace.json. The test never writes into the source
// tree: with ATTNPROF_GOLDEN_OUT set (tests/golden/regenerate.sh sets it to a temporary
// directory) it also leaves its output there, for the script to diff and, with --write, copy over.
TEST(ChromeTraceWriter, MatchesTheGoldenFile) {
  const auto path = temp_trace("golden.json");
  write_and_parse(path);
  const std::filesystem::path golden_dir = std::filesystem::weakly_canonical(ATTNPROF_GOLDEN_DIR);
  const std::filesystem::path golden = golden_dir / "small_trace.json";
  if (const char* out = std::getenv("ATTNPROF_GOLDEN_OUT"); out != nullptr && *out != '\0') {
    const std::filesystem::path dir = std::filesystem::weakly_canonical(out);
    const std::filesystem::path inside = dir.lexically_relative(golden_dir);
    ASSERT_TRUE(inside.empty() || *inside.begin() == "..")
        << "ATTNPROF_GOLDEN_OUT=" << dir << " is in the golden directory; tests/golden/regenerate.sh --write copies there";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(path, dir / "small_trace.json", std::filesystem::copy_options::overwrite_existing);
  }
  const char* how = "tests/golden/regenerate.sh BUILD_DIR shows the diff; with --write it takes the new file";
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden << " is missing: " << how;
  EXPECT_EQ(read_file(path), read_file(golden)) << "the writer's output changed; if on purpose, " << how;
}

}  // namespace
}  // namespace attnprof::trace
