// `attnprof merge` on crafted inputs: torch.profiler (Kineto) ranks whose ids and threads repeat
// and whose processes are named after their events, flows of other categories, and a merge that
// fails part way. A merged trace must still report each rank's own numbers and names.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "summary/trace_report.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/json_pull_parser.hpp"
#include "trace/trace_merge.hpp"
#include "support/scratch_dir.hpp"

namespace attnprof {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_merge_test", name);
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json kineto_small_trace() {
  std::ifstream in(std::filesystem::path(ATTNPROF_GOLDEN_DIR) / "kineto_small_trace.json");
  return nlohmann::json::parse(in);
}

// The golden Kineto trace as rank `rank` wrote it: the same program, its ranges named "r<rank> ..."
// (but for rank 0) and its kernels `slower` times as long, so the two ranks' numbers differ.
nlohmann::json kineto_rank(int rank, int slower) {
  nlohmann::json doc = kineto_small_trace();
  for (nlohmann::json& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (rank > 0 && cat == "user_annotation" && e["name"].get<std::string>().rfind("ProfilerStep", 0) != 0)
      e["name"] = fmt::format("r{} {}", rank, e["name"].get<std::string>());
    if (cat == "kernel") e["dur"] = e["dur"].get<double>() * slower;
  }
  doc["distributedInfo"]["rank"] = rank;
  return doc;
}

trace::MergeResult merge(const std::vector<std::filesystem::path>& paths, const std::filesystem::path& out) {
  std::vector<trace::MergeInput> inputs;
  for (std::size_t i = 0; i < paths.size(); ++i)
    inputs.push_back({trace::read_trace_head(paths[i]), fmt::format("rank {}", i), static_cast<std::uint32_t>(i)});
  return trace::merge_traces(inputs, out, {}, [](const trace::MergeResult&) { return nlohmann::json::object(); });
}

const CaseSummary* case_named(const RunSummary& s, const std::string& label) {
  for (const CaseSummary& c : s.cases)
    if (c.label == label) return &c;
  return nullptr;
}

// The reviewer's repro: each rank counts correlation ids from 1 on a thread of the same id, and
// rank 0's kernels were joined to rank 1's launches (and ranges).
TEST(TraceMerge, KinetoRanksKeepTheirOwnLaunchesAndRanges) {
  const std::filesystem::path dir = fresh_dir("kineto_ranks");
  std::ofstream(dir / "trace-rank0.json") << kineto_rank(0, 1).dump();
  std::ofstream(dir / "trace-rank1.json") << kineto_rank(1, 3).dump();
  merge({dir / "trace-rank0.json", dir / "trace-rank1.json"}, dir / "merged.json");

  const TraceReport merged = report_from_trace(dir / "merged.json");
  const TraceReport rank0 = report_from_trace(dir / "trace-rank0.json");
  const TraceReport rank1 = report_from_trace(dir / "trace-rank1.json");
  ASSERT_EQ(merged.summary.cases.size(), rank0.summary.cases.size() + rank1.summary.cases.size());
  for (const TraceReport* alone : {&rank0, &rank1})
    for (const CaseSummary& c : alone->summary.cases) {
      const CaseSummary* m = case_named(merged.summary, c.label);
      ASSERT_NE(m, nullptr) << c.label;
      EXPECT_EQ(m->iterations, c.iterations) << c.label;
      EXPECT_EQ(m->iteration_us, c.iteration_us) << c.label;
      EXPECT_EQ(m->kernels_per_iter, c.kernels_per_iter) << c.label;
      EXPECT_EQ(m->memcpy_per_iter, c.memcpy_per_iter) << c.label;
      EXPECT_EQ(m->launch_apis, c.launch_apis) << c.label;
    }

  // No correlation id of one input's launches is another's.
  std::map<std::uint64_t, std::set<std::int64_t>> correlations_by_pid;
  trace::read_chrome_trace(dir / "merged.json", [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    if (e.cat == "cuda_runtime" || e.cat == "cuda_driver") correlations_by_pid[e.pid].insert(*e.args.correlation);
  });
  ASSERT_EQ(correlations_by_pid.size(), 2u);
  const std::set<std::int64_t>& a = correlations_by_pid.begin()->second;
  const std::set<std::int64_t>& b = correlations_by_pid.rbegin()->second;
  for (std::int64_t c : a) EXPECT_EQ(b.count(c), 0u) << "correlation " << c << " in both inputs";
}

// The process_name events of `path`'s trace: pid -> name.
std::map<std::uint64_t, std::string> process_names(const std::filesystem::path& path) {
  std::map<std::uint64_t, std::string> names;
  trace::read_chrome_trace(path, [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    if (e.ph == "M" && e.name == "process_name") names[e.pid] = e.args.metadata_name.value_or("");
  });
  return names;
}

// Kineto puts its metadata after the events: the head still names the host by it (pid 4321,
// "python3"), not the GPU process of the same name that carries the label "GPU 0".
TEST(TraceMerge, TheHeadOfAKinetoTraceNamesItsHostFromTheMetadataAtTheEnd) {
  const trace::TraceHead head = trace::read_trace_head(std::filesystem::path(ATTNPROF_GOLDEN_DIR) / "kineto_small_trace.json");
  EXPECT_EQ(head.host_process, 4321u);
  EXPECT_EQ(head.host_process_name, "python3");
  EXPECT_EQ(head.base_time_ns, 1764700000000000000u);
  ASSERT_EQ(head.devices.size(), 1u);
  EXPECT_EQ(head.devices[0].name, "NVIDIA H200");
}

// Which process is the host does not depend on where the metadata stands: GPU processes named
// first are told apart by their "GPU n" label (here with no deviceProperties to go by), or
// without labels by their pid being a device's.
TEST(TraceMerge, KinetoGpuProcessesNamedFirstAreNotTheHost) {
  const std::filesystem::path dir = fresh_dir("kineto_gpu_first");
  auto gpu_metadata_first = [](bool labels) {
    nlohmann::json doc = kineto_small_trace();
    if (labels) doc.erase("deviceProperties");
    nlohmann::json events = nlohmann::json::array(), host_metadata = nlohmann::json::array();
    for (nlohmann::json& e : doc["traceEvents"]) {
      if (e["ph"] != "M") events.push_back(e);
      else if (e["pid"] == 4321) host_metadata.push_back(e);
      else if (labels || e["name"] != "process_labels") events.insert(events.begin(), e);
    }
    for (nlohmann::json& e : host_metadata) events.push_back(e);
    doc["traceEvents"] = events;
    return doc;
  };
  std::ofstream(dir / "labelled.json") << gpu_metadata_first(true).dump();
  std::ofstream(dir / "unlabelled.json") << gpu_metadata_first(false).dump();
  for (const char* name : {"labelled.json", "unlabelled.json"}) {
    const trace::TraceHead head = trace::read_trace_head(dir / name);
    EXPECT_EQ(head.host_process, 4321u) << name;
    EXPECT_EQ(head.host_process_name, "python3") << name;
  }
}

// Kineto names its CUPTI overhead process (pid -1) as it meets overhead records, before the host;
// the host is the process that called the CUDA API.
TEST(TraceMerge, KinetosOverheadProcessIsNotTheHost) {
  const std::filesystem::path dir = fresh_dir("kineto_overhead");
  nlohmann::json doc = kineto_small_trace();
  nlohmann::json& events = doc["traceEvents"];
  const nlohmann::json overhead = {{"name", "process_name"}, {"ph", "M"}, {"ts", 1764700000000100.0}, {"pid", -1},
                                   {"tid", 0}, {"args", {{"name", "CUPTI Overhead"}}}};
  events.insert(std::find_if(events.begin(), events.end(), [](const nlohmann::json& e) { return e["ph"] == "M"; }),
                overhead);
  std::ofstream(dir / "trace.json") << doc.dump();
  const trace::TraceHead head = trace::read_trace_head(dir / "trace.json");
  EXPECT_EQ(head.host_process, 4321u);
  EXPECT_EQ(head.host_process_name, "python3");
}

// Our own traces name the host before any event: the head is read no further (here the rest of
// the document is not even JSON).
TEST(TraceMerge, AHostNamedUpFrontEndsTheHead) {
  const std::filesystem::path dir = fresh_dir("named_up_front");
  std::ofstream(dir / "trace.json") << R"json({"baseTimeNanoseconds": 1000, "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 4242, "args": {"name": "attnprof run (pid 4242)"}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2},
    this is not JSON)json";
  const trace::TraceHead head = trace::read_trace_head(dir / "trace.json");
  EXPECT_EQ(head.host_process, 4242u);
  EXPECT_EQ(head.host_process_name, "attnprof run (pid 4242)");
  EXPECT_EQ(head.base_time_ns, 1000u);
}

// A Kineto trace without a rank is labelled by its host's pid, as ours are.
TEST(TraceMerge, AKinetoTraceWithoutARankIsLabelledByItsPid) {
  const std::filesystem::path dir = fresh_dir("kineto_no_rank");
  nlohmann::json doc = kineto_small_trace();
  doc.erase("distributedInfo");
  std::ofstream(dir / "worker.json") << doc.dump();
  const std::vector<trace::MergeInput> inputs = trace::plan_rank_merge({trace::read_trace_head(dir / "worker.json")});
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].label, "pid 4321");
}

// The merged trace names each rank's host process as its own trace does, and keeps its pid
// where no other input has it (it was "rank 0 / process 0" on a fresh pid).
TEST(TraceMerge, KinetoRanksKeepTheirHostProcessNames) {
  const std::filesystem::path dir = fresh_dir("kineto_names");
  std::ofstream(dir / "trace-rank0.json") << kineto_rank(0, 1).dump();
  std::ofstream(dir / "trace-rank1.json") << kineto_rank(1, 3).dump();
  const trace::MergeResult result = merge({dir / "trace-rank0.json", dir / "trace-rank1.json"}, dir / "merged.json");

  ASSERT_EQ(result.inputs.size(), 2u);
  EXPECT_EQ(result.inputs[0].host_pid, 4321u);
  EXPECT_EQ(result.inputs[0].original_host_pid, 4321u);
  EXPECT_EQ(result.inputs[1].original_host_pid, 4321u);
  const std::uint32_t rank1_host = result.inputs[1].host_pid;  // 4321 is rank 0's: a fresh one
  EXPECT_NE(rank1_host, 4321u);
  EXPECT_EQ(process_names(dir / "merged.json"), (std::map<std::uint64_t, std::string>{
                                                    {0, "rank 0 / GPU 0: NVIDIA H200"},
                                                    {1000, "rank 1 / GPU 0: NVIDIA H200"},
                                                    {4321, "rank 0 / python3"},
                                                    {rank1_host, "rank 1 / python3"}}));
}

// Kineto writes fwdbwd flows between cpu_op events, which a merge does not carry: copied as ac2g
// their "f" ended on a made-up GPU track.
TEST(TraceMerge, OnlyAc2gFlowsAreCarried) {
  const std::filesystem::path dir = fresh_dir("fwdbwd");
  nlohmann::json doc = kineto_small_trace();
  doc["traceEvents"].push_back({{"ph", "s"}, {"id", 5}, {"pid", 4321}, {"tid", 4321}, {"ts", 1764700000000201.0},
                                {"cat", "fwdbwd"}, {"name", "fwdbwd"}});
  doc["traceEvents"].push_back({{"ph", "f"}, {"id", 5}, {"pid", 4321}, {"tid", 4322}, {"ts", 1764700000000301.0},
                                {"cat", "fwdbwd"}, {"name", "fwdbwd"}, {"bp", "e"}});
  std::ofstream(dir / "trace-rank0.json") << doc.dump();
  const trace::MergeResult result = merge({dir / "trace-rank0.json"}, dir / "merged.json");

  std::vector<std::string> flows;  // "<ph> <cat> <pid>"
  trace::read_chrome_trace(dir / "merged.json", [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    if (e.ph == "s" || e.ph == "f") flows.push_back(fmt::format("{} {} {}", e.ph, e.cat, e.pid));
  });
  ASSERT_EQ(result.inputs.size(), 1u);
  const std::uint32_t host = result.inputs[0].host_pid;
  EXPECT_EQ(flows, (std::vector<std::string>{"f ac2g 0", fmt::format("s ac2g {}", host)}));
  EXPECT_GT(result.inputs[0].events_not_carried, 0u);
}

// A relative trace whose first record lies before its base: its times stay where they were
// (a negative first ts made the whole input "absolute", so every event collapsed to 0).
TEST(TraceMerge, ANegativeFirstTimestampKeepsTheInputRelative) {
  const std::filesystem::path dir = fresh_dir("negative_ts");
  std::ofstream(dir / "relative.json") << R"({"baseTimeNanoseconds": 1764700000000000000, "traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": -0.5, "dur": 1,
     "args": {"correlation": 1}},
    {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": -0.5, "cat": "ac2g", "name": "ac2g"},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2, "args": {"correlation": 1}},
    {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 10, "cat": "ac2g", "name": "ac2g", "bp": "e"}]})";
  merge({dir / "relative.json"}, dir / "merged.json");
  std::map<std::string, double> ts_by_what;
  trace::read_chrome_trace(dir / "merged.json", [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    if (e.ph != "M") ts_by_what[e.ph + " " + e.cat] = static_cast<double>(*e.ts_ns) / 1000;
  });
  EXPECT_EQ(ts_by_what["X kernel"], 10.0);
  EXPECT_EQ(ts_by_what["f ac2g"], 10.0);
  EXPECT_EQ(ts_by_what["X cuda_runtime"], 0.0);  // before the merged base: clamped, as every writer does
}

// Correlation 0 is CUPTI's "none" (work no API call launched): every input's stays 0 in the
// merge, while its other ids move past the previous inputs'.
TEST(TraceMerge, CorrelationZeroStaysNone) {
  const std::filesystem::path dir = fresh_dir("correlation_zero");
  const std::string trace = R"({"baseTimeNanoseconds": 1764700000000000000, "traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
     "args": {"correlation": 5}},
    {"ph": "X", "cat": "kernel", "name": "launched", "pid": 0, "tid": 7, "ts": 10, "dur": 2, "args": {"correlation": 5}},
    {"ph": "X", "cat": "gpu_memset", "name": "unlaunched", "pid": 0, "tid": 7, "ts": 20, "dur": 2,
     "args": {"correlation": 0}}]})";
  std::ofstream(dir / "a.json") << trace;
  std::ofstream(dir / "b.json") << trace;
  merge({dir / "a.json", dir / "b.json"}, dir / "merged.json");
  std::multiset<std::int64_t> launched;
  std::multiset<std::int64_t> unlaunched;
  trace::read_chrome_trace(dir / "merged.json", [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    if (e.name == "launched") launched.insert(*e.args.correlation);
    if (e.cat == "gpu_memset") unlaunched.insert(*e.args.correlation);
  });
  EXPECT_EQ(unlaunched, (std::multiset<std::int64_t>{0, 0}));
  EXPECT_EQ(launched, (std::multiset<std::int64_t>{5, 11}));  // the second input's ids past the first's largest
}

// Case indices come from the inputs: one near 2^31 must neither make the writer allocate a slot
// for every index below it nor wrap around when the next input's cases follow it.
std::string trace_with_case(std::int64_t case_index) {
  return fmt::format(R"({{"baseTimeNanoseconds": 1000000, "traceEvents": [
    {{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
      "args": {{"case index": {}, "phase": "iter", "iteration": 0, "case": "c", "backend": "b"}}}}]}})",
                     case_index);
}

TEST(TraceMerge, HugeCaseIndicesAreNeitherAllocatedNorWrapped) {
  const std::filesystem::path dir = fresh_dir("huge_case");
  std::ofstream(dir / "a.json") << trace_with_case(2147483646);
  std::ofstream(dir / "b.json") << trace_with_case(1);
  const trace::MergeResult one = merge({dir / "a.json"}, dir / "one.json");
  EXPECT_EQ(one.inputs[0].case_count, 2147483647);
  std::optional<std::int64_t> written;
  trace::read_chrome_trace(dir / "one.json", [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    if (e.cat == "kernel") written = e.args.case_index;
  });
  EXPECT_EQ(written, 2147483646);

  try {
    merge({dir / "a.json", dir / "b.json"}, dir / "two.json");
    FAIL() << "case index 1 after 2147483647 cases was merged";
  } catch (const trace::TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("beyond what an int holds"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "two.json"));
}

// A merge that fails part way (here a truncated gzip input) leaves a previous good output as it
// was, and no temporary file.
TEST(TraceMerge, AFailedMergeLeavesThePreviousOutputAlone) {
  const std::filesystem::path dir = fresh_dir("failed");
  std::ofstream(dir / "good.json") << kineto_rank(0, 1).dump();
  merge({dir / "good.json"}, dir / "merged.json");
  const std::string before = read_text(dir / "merged.json");
  ASSERT_FALSE(before.empty());

  trace::TraceWriteOptions gz;
  gz.format = trace::TraceFormat::json_gz;
  {
    trace::ChromeTraceWriter writer(dir / "big.json.gz", {}, gz);
    trace::KernelActivity k;
    k.name = "k";
    for (int i = 0; i < 20'000; ++i) {
      k.start_ns = 1000 + 10 * static_cast<std::uint64_t>(i);
      k.end_ns = k.start_ns + 5;
      writer.write(k);
    }
    writer.finish(nlohmann::json::object());
  }
  const std::string gzip = read_text(dir / "big.json.gz");
  std::ofstream(dir / "cut.json.gz", std::ios::binary) << gzip.substr(0, gzip.size() / 2);
  EXPECT_THROW(merge({dir / "good.json", dir / "cut.json.gz"}, dir / "merged.json"), trace::TraceFormatError);
  EXPECT_EQ(read_text(dir / "merged.json"), before);
  EXPECT_FALSE(std::filesystem::exists(dir / "merged.json.tmp"));
}

}  // namespace
}  // namespace attnprof
