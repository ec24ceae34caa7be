// Several GPUs and several processes, on the CPU: `run --devices` (device lists, sharding, the
// worker processes merged back into one trace and summary), `attnprof merge` of per-rank traces
// (a process track per rank and GPU, unique flows, aligned clocks, one summary), NCCL kernels as
// their own category, and each case's device through summary.json.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "commands/merge.hpp"
#include "commands/run_devices.hpp"
#include "core/errors.hpp"
#include "summary/findings.hpp"
#include "summary/kernel_category.hpp"
#include "summary/render.hpp"
#include "summary/trace_report.hpp"
#include "sweep/plan.hpp"
#include "trace/annotate.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/trace_files.hpp"
#include "trace/trace_merge.hpp"
#include "support/scratch_dir.hpp"

namespace attnprof {
namespace {

constexpr std::uint64_t kBase = 1'700'000'000'000'000'000ull;
const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const char* kFlash = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>(Flash_fwd_params)";

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_multi_gpu_test", name);
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws if invalid
}

DeviceProperties gpu(int id) {
  DeviceProperties d = sm90_reference_properties();
  d.id = id;
  return d;
}

// What one iteration of a DDP step launches: an SDPA kernel on stream 7, an all_reduce on
// NCCL's stream 13, both from host thread `thread`, both with ac2g flows.
void add_step(trace::ActivityBatch& b, std::uint64_t at, int iteration, int device, std::uint32_t thread,
              int case_index, std::uint32_t correlation) {
  const trace::SweepTag tag{case_index, trace::Phase::iteration, iteration};
  for (int k = 0; k < 2; ++k) {
    trace::ApiCall call;
    call.name = "cudaLaunchKernel";
    call.cbid = 211;
    call.start_ns = at + 1000 + 10'000 * k;
    call.end_ns = call.start_ns + 2000;
    call.thread = thread;
    call.correlation = correlation + k;
    call.launches_work = true;
    call.tag = tag;
    b.api_calls.push_back(call);
    trace::KernelActivity kernel;
    kernel.name = k == 0 ? kFlash : kAllReduce;
    kernel.start_ns = at + 5000 + 20'000 * k;
    kernel.end_ns = kernel.start_ns + (k == 0 ? 15'000 : 40'000);
    kernel.device = static_cast<std::uint32_t>(device);
    kernel.stream = k == 0 ? 7 : 13;
    kernel.correlation = correlation + k;
    kernel.grid = {132, 1, 1};
    kernel.block = {128, 1, 1};
    kernel.registers_per_thread = 96;
    kernel.occupancy.valid = true;
    kernel.occupancy.active_blocks_per_sm = 4;
    kernel.occupancy.theoretical_percent = 25.0;
    kernel.occupancy.limiter = "registers";
    kernel.occupancy.block_limit_registers = 4;
    kernel.occupancy.block_limit_shared_memory = 8;
    kernel.occupancy.block_limit_warps = 16;
    kernel.occupancy.block_limit_blocks = 32;
    kernel.launch_api = "cudaLaunchKernel";
    kernel.tag = tag;
    b.kernels.push_back(kernel);
  }
  trace::Annotation range;
  range.name = "step";
  range.start_ns = at;
  range.end_ns = at + 30'000;
  range.thread = thread;
  range.tag = tag;
  b.annotations.push_back(range);
}

CaseSummary summarize_step(const trace::ActivityBatch& b, int device, int case_index, const std::string& label) {
  CaseMeasurements m;
  m.label = label;
  m.problem.shape = {0, 0, 0, 0, 0};
  m.iterations = 2;
  m.iteration_us = {65.0, 65.0};
  trace::ActivityBatch mine;
  for (const trace::KernelActivity& k : b.kernels)
    if (k.tag.case_index == case_index) mine.kernels.push_back(k);
  CaseSummary c = summarize_case(m, mine);
  c.device = device;
  add_findings(c);
  return c;
}

// One rank's trace as `attnprof profile` under torchrun writes it: case "step", two iterations.
std::filesystem::path write_rank_trace(const std::filesystem::path& dir, int rank, std::uint32_t pid,
                                       std::uint64_t base) {
  trace::ActivityBatch b;
  add_step(b, base + 100'000, 0, rank, pid + 1, 0, 1);
  add_step(b, base + 200'000, 1, rank, pid + 1, 0, 3);
  RunSummary s;
  s.tool_version = "test";
  s.config_name = "profile";
  s.config_source = "python ddp.py";
  s.device = gpu(rank);
  s.cases = {summarize_step(b, rank, 0, "step")};

  trace::TraceHeader h;
  h.base_time_ns = base;
  h.devices = {gpu(rank)};
  h.host_process = pid;
  h.host_process_name = fmt::format("attnprof profile: python ddp.py (pid {})", pid);
  h.rank = rank;
  h.local_rank = rank;
  const std::filesystem::path path = dir / fmt::format("trace-rank{}-pid{}.json", rank, pid);
  trace::ChromeTraceWriter writer(path, h);
  writer.add_case({"step", ""});
  writer.write(b);
  writer.finish({{"tool", "attnprof"}, {"command", "profile"}, {"pid", pid}, {"rank", rank}, {"summary", s}});
  return path;
}

struct TraceIndex {
  std::map<std::uint64_t, std::string> process_names;  // pid -> name
  std::vector<nlohmann::json> kernels, flows_start, flows_end, api_calls;
};

TraceIndex index_trace(const nlohmann::json& t) {
  TraceIndex x;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "process_name") {
      const auto pid = e.at("pid").get<std::uint64_t>();
      EXPECT_EQ(x.process_names.count(pid), 0u) << "pid " << pid << " named twice";
      x.process_names[pid] = e.at("args").at("name");
    }
    if (ph == "X" && e.at("cat") == "kernel") x.kernels.push_back(e);
    if (ph == "X" && e.at("cat") == "cuda_runtime") x.api_calls.push_back(e);
    if (ph == "s") x.flows_start.push_back(e);
    if (ph == "f") x.flows_end.push_back(e);
  }
  return x;
}

// ---- kernel categories and the device per case ----

TEST(KernelCategory, NcclKernelsAreCommunication) {
  EXPECT_STREQ(kernel_category(kAllReduce), kCommunicationKernel);
  EXPECT_STREQ(kernel_category("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"), kCommunicationKernel);
  EXPECT_STREQ(kernel_category("void c10d::NCCLKernelWrapper<float>()"), kCommunicationKernel);
  EXPECT_STREQ(kernel_category(kFlash), kComputeKernel);
  EXPECT_STREQ(kernel_category("at::native::vectorized_elementwise_kernel<4, ...>"), kComputeKernel);
}

TEST(KernelCategory, TheSummaryCountsCommunicationAndFindsIt) {
  trace::ActivityBatch b;
  add_step(b, kBase, 0, 0, 1, 0, 1);
  add_step(b, kBase + 100'000, 1, 0, 1, 0, 3);
  const CaseSummary c = summarize_step(b, 0, 0, "step");
  EXPECT_DOUBLE_EQ(c.kernels_per_iter, 2.0);
  EXPECT_DOUBLE_EQ(communication_kernels_per_iter(c), 1.0);
  EXPECT_DOUBLE_EQ(communication_us_per_iter(c), 40.0);
  const auto finding = std::find_if(c.findings.begin(), c.findings.end(),
                                    [](const Finding& f) { return f.kind == "communication"; });
  ASSERT_NE(finding, c.findings.end());
  EXPECT_NE(finding->message.find("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), std::string::npos) << finding->message;
  EXPECT_NE(finding->message.find("73%"), std::string::npos) << finding->message;  // 40 of 55 us

  const nlohmann::json j = c;
  EXPECT_EQ(j.at("per_iter").at("communication_kernels"), 1.0);
  EXPECT_EQ(j.at("kernels").at(0).at("category"), kCommunicationKernel);  // the largest GPU time first
  EXPECT_EQ(j.at("kernels").at(1).at("category"), kComputeKernel);

  RunSummary run;
  run.cases = {c};
  const std::string table = render_summary(run, OutputFormat::table);
  EXPECT_NE(table.find("nccl/it"), std::string::npos) << table;
  EXPECT_EQ(render_summary(RunSummary{}, OutputFormat::table).find("nccl/it"), std::string::npos);
}

TEST(DevicePerCase, RoundTripsAndOldSummariesReadAsDeviceZero) {
  CaseSummary c;
  c.label = "flash bf16 full 1x1x64x64x64";
  c.backend = "flash";
  c.problem.shape = {1, 1, 64, 64, 64};
  c.device = 3;
  nlohmann::json j = c;
  EXPECT_EQ(j.at("device"), 3);
  EXPECT_EQ(j.get<CaseSummary>().device, 3);
  j.erase("device");  // written before `run --devices`
  EXPECT_EQ(j.get<CaseSummary>().device, 0);
}

TEST(DevicePerCase, TheTableShowsTheGpuOnlyWhenCasesRanOnSeveral) {
  RunSummary run;
  CaseSummary a;
  a.label = "a";
  a.problem.shape = {1, 1, 64, 64, 64};
  CaseSummary b = a;
  b.label = "b";
  run.cases = {a, b};
  EXPECT_EQ(render_summary(run, OutputFormat::table).find(" GPU "), std::string::npos);
  run.cases[1].device = 1;
  const std::string table = render_summary(run, OutputFormat::table);
  EXPECT_NE(table.find("GPU"), std::string::npos) << table;
  const std::string csv = render_summary(run, OutputFormat::csv);
  EXPECT_NE(csv.find(",device,communication_kernels_per_iter,"), std::string::npos);
}

// ---- run --devices: which GPU runs what ----

std::vector<PlannedCase> planned(const std::vector<int>& seqs) {
  std::vector<PlannedCase> cases;
  for (int s : seqs) {
    PlannedCase c;
    c.backend = "flash";
    c.problem.shape = {1, 8, s, s, 64};
    c.label = fmt::format("flash bf16 full 1x8x{}x{}x64", s, s);
    cases.push_back(c);
  }
  return cases;
}

TEST(Sharding, DeviceListsAreAllOrDistinctOrdinals) {
  EXPECT_EQ(parse_device_list("all", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(parse_device_list("all", 1), (std::vector<int>{0}));
  EXPECT_EQ(parse_device_list("2,0", 4), (std::vector<int>{2, 0}));
  EXPECT_EQ(parse_device_list("1", std::nullopt), (std::vector<int>{1}));
  EXPECT_THROW(parse_device_list("0,0", 2), UsageError);
  EXPECT_THROW(parse_device_list("0,2", 2), UsageError);
  EXPECT_THROW(parse_device_list("0,,1", 2), UsageError);
  EXPECT_THROW(parse_device_list("gpu0", 2), UsageError);
  EXPECT_THROW(parse_device_list("", 2), UsageError);
  EXPECT_THROW(parse_device_list("all", std::nullopt), UsageError);
}

TEST(Sharding, OneDeviceRunsEverythingInOrder) {
  const auto shards = shard_cases(planned({256, 1024, 512}), 1);
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0], (std::vector<int>{0, 1, 2}));
}

TEST(Sharding, EveryCaseOnceTheCostliestSpreadFirst) {
  // Costs 1, 64, 16, 4, 64, 1 (seq^2): 64 | 64 | 16 + 4 + 1 + 1 over three GPUs.
  const std::vector<PlannedCase> cases = planned({256, 2048, 1024, 512, 2048, 256});
  const auto shards = shard_cases(cases, 3);
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[0], (std::vector<int>{1}));
  EXPECT_EQ(shards[1], (std::vector<int>{4}));
  EXPECT_EQ(shards[2], (std::vector<int>{0, 2, 3, 5}));
  std::vector<int> all;
  for (const auto& s : shards) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(shard_cases(cases, 3), shards);  // the same every time
}

TEST(Sharding, MoreGpusThanCasesLeavesSomeIdle) {
  const auto shares = share_out(planned({256, 512}), {0, 1, 2, 3}, "/tmp/x");
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].device, 0);
  EXPECT_EQ(shares[0].cases, (std::vector<int>{1}));
  EXPECT_EQ(shares[1].device, 1);
  EXPECT_EQ(shares[1].out_dir, std::filesystem::path("/tmp/x/gpu1"));
}

// A worker's outputs as `attnprof run --device D --worker-cases ...` writes them: every case of
// the sweep registered, its own tagged by their index in the sweep.
void write_worker_outputs(const std::filesystem::path& dir, int device, std::uint32_t pid,
                          const std::vector<PlannedCase>& cases, const std::vector<int>& mine) {
  trace::ActivityBatch b;
  RunSummary s;
  s.tool_version = "test";
  s.config_name = "sweep";
  s.device = gpu(device);
  s.capture.records = 100;
  std::uint32_t correlation = 1;
  for (int index : mine) {
    add_step(b, kBase + 1'000'000 * static_cast<std::uint64_t>(index), 0, device, pid, index, correlation);
    correlation += 2;
  }
  for (int index : mine) {
    CaseSummary c = summarize_step(b, device, index, cases[static_cast<std::size_t>(index)].label);
    c.backend = "flash";
    s.cases.push_back(c);
  }
  trace::TraceHeader h;
  h.base_time_ns = kBase + 1000 * static_cast<std::uint64_t>(device);
  h.devices = {gpu(device)};
  h.host_process = pid;
  h.host_process_name = fmt::format("attnprof run (pid {}, GPU {})", pid, device);
  trace::ChromeTraceWriter writer(dir / "trace.json", h);
  for (const PlannedCase& c : cases) writer.add_case({c.label, c.backend});
  writer.write(b);
  writer.finish({{"tool", "attnprof"}, {"command", "run"}, {"config", {{"iterations", 2}}}, {"summary", s},
                 {"worker", {{"device", device}}}});
  write_json_atomically((dir / "summary.json").string(), nlohmann::json(s));
}

TEST(DeviceWorkers, TheWorkersOutputsBecomeOneTraceAndOneSummaryInSweepOrder) {
  const std::filesystem::path root = fresh_dir("workers");
  const std::vector<PlannedCase> cases = planned({256, 2048, 1024, 512});
  const std::vector<int> devices = {0, 1};
  for (const DeviceShare& share : share_out(cases, devices, root / "run")) {
    const std::filesystem::path stage = root / fmt::format("stage{}", share.device);
    std::filesystem::create_directories(stage);
    write_worker_outputs(stage, share.device, 7000u + static_cast<std::uint32_t>(share.device), cases, share.cases);
  }
  DeviceRunOptions o;
  o.cases = cases;
  o.devices = devices;
  o.out_dir = root / "run";
  o.progress = nullptr;
  std::map<int, std::vector<int>> given;
  o.worker_command = [&](const DeviceShare& share) {
    given[share.device] = share.cases;
    const std::filesystem::path stage = root / fmt::format("stage{}", share.device);
    return std::vector<std::string>{"/bin/sh", "-c",
                                    "mkdir -p \"$1\" && cp \"$0\"/trace.json \"$0\"/summary.json \"$1\"/",
                                    stage.string(), share.out_dir.string()};
  };
  const DeviceRunOutcome r = run_on_devices(o);
  EXPECT_EQ(r.exit_code, kExitOk);
  ASSERT_EQ(r.workers.size(), 2u);
  ASSERT_EQ(r.summary.cases.size(), 4u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(r.summary.cases[i].label, cases[i].label);  // sweep order, whichever GPU ran it
    const int device = std::count(given[1].begin(), given[1].end(), static_cast<int>(i)) > 0 ? 1 : 0;
    EXPECT_EQ(r.summary.cases[i].device, device) << cases[i].label;
    EXPECT_EQ(r.summary.cases[i].status, CaseStatus::ok);
  }
  EXPECT_EQ(r.summary.capture.records, 200u);
  EXPECT_FALSE(std::filesystem::exists(root / "run" / "gpu0"));  // merged, so removed

  const nlohmann::json saved = read_json(r.summary_path);
  EXPECT_EQ(saved.at("cases").size(), 4u);
  const nlohmann::json t = read_json(r.trace_path);
  const TraceIndex x = index_trace(t);
  // A process per GPU, pid = ordinal as in a one-GPU run; each worker's host process its own pid.
  EXPECT_EQ(x.process_names.at(0), "GPU 0: NVIDIA H200");
  EXPECT_EQ(x.process_names.at(1), "GPU 1: NVIDIA H200");
  EXPECT_EQ(x.process_names.at(7000), "attnprof run (pid 7000, GPU 0)");
  EXPECT_EQ(x.process_names.at(7001), "attnprof run (pid 7001, GPU 1)");
  for (const nlohmann::json& k : x.kernels) {
    const int index = k.at("args").at("case index");
    EXPECT_EQ(k.at("args").at("case"), cases[static_cast<std::size_t>(index)].label);
    EXPECT_EQ(k.at("pid"), r.summary.cases[static_cast<std::size_t>(index)].device);
  }
  std::set<std::uint64_t> starts, ends;
  for (const auto& f : x.flows_start) starts.insert(f.at("id").get<std::uint64_t>());
  for (const auto& f : x.flows_end) ends.insert(f.at("id").get<std::uint64_t>());
  EXPECT_EQ(starts.size(), 8u);  // correlation ids 1..4 in both workers, kept apart
  EXPECT_EQ(starts, ends);
  EXPECT_EQ(t.at("attnprof").at("command"), "run");
  EXPECT_EQ(t.at("attnprof").at("workers").size(), 2u);
  EXPECT_FALSE(t.at("attnprof").contains("worker"));
  EXPECT_EQ(t.at("attnprof").at("summary").at("cases").size(), 4u);

  // `attnprof report` on the merged trace: the same cases, each on its GPU.
  const TraceReport report = report_from_trace(r.trace_path);
  ASSERT_EQ(report.summary.cases.size(), 4u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(report.summary.cases[i].label, cases[i].label);
    EXPECT_DOUBLE_EQ(report.summary.cases[i].kernels_per_iter, r.summary.cases[i].kernels_per_iter);
    EXPECT_EQ(report.summary.cases[i].device, r.summary.cases[i].device);
  }
}

TEST(DeviceWorkers, AWorkerThatDiesFailsItsCasesAndTheRestIsKept) {
  const std::filesystem::path root = fresh_dir("dead_worker");
  const std::vector<PlannedCase> cases = planned({256, 2048, 1024});
  const std::vector<int> devices = {0, 1};
  std::map<int, std::vector<int>> given;
  for (const DeviceShare& share : share_out(cases, devices, root / "run")) {
    given[share.device] = share.cases;
    if (share.device != 0) continue;
    const std::filesystem::path stage = root / "stage0";
    std::filesystem::create_directories(stage);
    write_worker_outputs(stage, 0, 7100, cases, share.cases);
  }
  DeviceRunOptions o;
  o.cases = cases;
  o.devices = devices;
  o.out_dir = root / "run";
  o.progress = nullptr;
  o.worker_command = [&](const DeviceShare& share) -> std::vector<std::string> {
    if (share.device == 1) return {"/bin/sh", "-c", "mkdir -p \"$0\" && kill -SEGV $$", share.out_dir.string()};
    return {"/bin/sh", "-c", "mkdir -p \"$1\" && cp \"$0\"/trace.json \"$0\"/summary.json \"$1\"/",
            (root / "stage0").string(), share.out_dir.string()};
  };
  const DeviceRunOutcome r = run_on_devices(o);
  EXPECT_EQ(r.exit_code, kExitPartialFailure);
  ASSERT_EQ(r.summary.cases.size(), 3u);
  for (int i : given[1]) {
    const CaseSummary& c = r.summary.cases[static_cast<std::size_t>(i)];
    EXPECT_EQ(c.status, CaseStatus::failed);
    EXPECT_EQ(c.device, 1);
    EXPECT_NE(c.reason.find("GPU 1 was ended by signal 11"), std::string::npos) << c.reason;
  }
  for (int i : given[0]) EXPECT_EQ(r.summary.cases[static_cast<std::size_t>(i)].status, CaseStatus::ok);
  EXPECT_TRUE(std::filesystem::exists(root / "run" / "gpu1"));  // kept for a look
  EXPECT_FALSE(std::filesystem::exists(root / "run" / "gpu0"));
  const nlohmann::json t = read_json(r.trace_path);  // GPU 0's trace alone, still valid
  EXPECT_EQ(t.at("attnprof").at("summary").at("cases").size(), 3u);
}

// ---- attnprof merge ----

TEST(Merge, TwoRanksGetTheirOwnTracksFlowsAndAlignedClocks) {
  const std::filesystem::path dir = fresh_dir("ranks");
  // Rank 1's clock base is 2 ms after rank 0's; its files are found through the directory.
  write_rank_trace(dir, 1, 4343, kBase + 2'000'000);
  write_rank_trace(dir, 0, 4242, kBase);
  std::ofstream(dir / "summary-rank0-pid4242.json") << "{}";  // not a trace: never an input
  const std::filesystem::path out = dir / "merged.json";
  const ProfileMerge m = merge_process_traces({dir}, out);
  ASSERT_EQ(m.merge.inputs.size(), 2u);
  EXPECT_EQ(m.merge.inputs[0].label, "rank 0");  // ordered by rank, not by name
  EXPECT_EQ(m.merge.inputs[1].label, "rank 1");
  EXPECT_EQ(m.merge.inputs[1].clock_shift_ns, 2'000'000);
  EXPECT_EQ(m.merge.base_time_ns, kBase);
  EXPECT_EQ(m.summary, dir / "merged-summary.json");

  const nlohmann::json t = read_json(out);
  EXPECT_EQ(t.at("baseTimeNanoseconds"), kBase);
  EXPECT_EQ(t.at("deviceProperties").size(), 2u);
  const TraceIndex x = index_trace(t);
  EXPECT_EQ(x.process_names.at(4242), "rank 0 / attnprof profile: python ddp.py (pid 4242)");
  EXPECT_EQ(x.process_names.at(4343), "rank 1 / attnprof profile: python ddp.py (pid 4343)");
  EXPECT_EQ(x.process_names.at(0), "rank 0 / GPU 0: NVIDIA H200");
  EXPECT_EQ(x.process_names.at(1001), "rank 1 / GPU 1: NVIDIA H200");
  EXPECT_EQ(x.process_names.size(), 4u);

  ASSERT_EQ(x.kernels.size(), 8u);
  for (const nlohmann::json& k : x.kernels) {
    const int device = k.at("args").at("device");
    EXPECT_EQ(k.at("pid"), device == 0 ? 0 : 1001);
    EXPECT_EQ(k.at("args").at("case index"), device);  // rank 1's case follows rank 0's
    EXPECT_EQ(k.at("args").at("case"), fmt::format("[rank {}] step", device));
  }
  // Rank 1's first SDPA kernel ran 2 ms + 100 us + 5 us after rank 0's base.
  double first_rank1 = 1e300;
  for (const nlohmann::json& k : x.kernels)
    if (k.at("pid") == 1001) first_rank1 = std::min(first_rank1, k.at("ts").get<double>());
  EXPECT_DOUBLE_EQ(first_rank1, 2105.0);
  for (const nlohmann::json& c : x.api_calls) EXPECT_TRUE(c.at("pid") == 4242 || c.at("pid") == 4343);

  // Both ranks used correlation ids 1..4: in the merged trace every flow is its own.
  std::multiset<std::uint64_t> starts, ends;
  for (const auto& f : x.flows_start) starts.insert(f.at("id").get<std::uint64_t>());
  for (const auto& f : x.flows_end) ends.insert(f.at("id").get<std::uint64_t>());
  EXPECT_EQ(starts.size(), 8u);
  EXPECT_EQ(std::set<std::uint64_t>(starts.begin(), starts.end()).size(), 8u);
  EXPECT_EQ(starts, ends);
  for (const auto& f : x.flows_end) EXPECT_TRUE(f.at("pid") == 0 || f.at("pid") == 1001);

  // One summary: each rank's case, labelled, with the all_reduce counted as communication.
  ASSERT_EQ(m.combined.cases.size(), 2u);
  EXPECT_EQ(m.combined.cases[0].label, "[rank 0] step");
  EXPECT_EQ(m.combined.cases[1].label, "[rank 1] step");
  EXPECT_EQ(m.combined.cases[1].device, 1);
  for (const CaseSummary& c : m.combined.cases) EXPECT_DOUBLE_EQ(communication_kernels_per_iter(c), 1.0);
  const nlohmann::json saved = read_json(m.summary);
  EXPECT_EQ(saved.at("cases").at(1).at("per_iter").at("communication_kernels"), 1.0);
  EXPECT_EQ(t.at("attnprof").at("command"), "merge");
  EXPECT_EQ(t.at("attnprof").at("inputs").at(1).at("rank"), 1);
  EXPECT_EQ(t.at("attnprof").at("summary").at("cases").size(), 2u);

  // `attnprof report` reads the merged trace back to the same cases.
  const TraceReport report = report_from_trace(out);
  ASSERT_EQ(report.summary.cases.size(), 2u);
  EXPECT_EQ(report.summary.cases[1].label, "[rank 1] step");
  EXPECT_DOUBLE_EQ(report.summary.cases[1].kernels_per_iter, 2.0);
  EXPECT_DOUBLE_EQ(communication_kernels_per_iter(report.summary.cases[1]), 1.0);
}

TEST(Merge, PidsStayUniqueWhenProcessesCollide) {
  const std::filesystem::path dir = fresh_dir("collide");
  // Two hosts, the same pid on both; a third process whose pid falls among rank 1's GPU pids.
  const auto a = write_rank_trace(dir, 0, 500, kBase);
  const auto b = write_rank_trace(dir, 1, 500, kBase);
  const auto c = write_rank_trace(dir, 2, 1001, kBase);
  const ProfileMerge m = merge_process_traces({c, b, a}, dir / "all.json", dir / "all-summary.json");
  std::set<std::uint32_t> pids;
  for (const trace::MergedInput& in : m.merge.inputs) {
    EXPECT_TRUE(pids.insert(in.host_pid).second) << in.label;
    EXPECT_LT(in.host_pid, 1u << 31);
  }
  EXPECT_EQ(m.merge.inputs[0].host_pid, 500u);       // rank 0 keeps its pid
  EXPECT_GE(m.merge.inputs[1].host_pid, 1u << 30);   // rank 1 shares it: a fresh one
  EXPECT_GE(m.merge.inputs[2].host_pid, 1u << 30);   // 1001 is rank 1's GPU 1
  const TraceIndex x = index_trace(read_json(dir / "all.json"));  // no pid named twice
  EXPECT_EQ(x.process_names.size(), 6u);
}

TEST(Merge, FindsOnlyAttnprofsPerProcessTraces) {
  const std::filesystem::path dir = fresh_dir("find");
  for (const char* name : {"trace.json", "trace-pid12.json", "trace-rank3-pid12.json", "summary.json",
                           "trace-merged.json", "trace.json.tmp", "notes.json"})
    std::ofstream(dir / name) << "{}";
  const auto found = trace::find_process_traces({dir}, dir / "trace-merged.json");
  std::set<std::string> names;
  for (const auto& p : found) names.insert(p.filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"trace.json", "trace-pid12.json", "trace-rank3-pid12.json"}));
  EXPECT_THROW(trace::find_process_traces({dir / "nothing here"}, {}), UsageError);
  EXPECT_THROW(trace::find_process_traces({fresh_dir("empty")}, {}), UsageError);
  EXPECT_EQ(merged_summary_path("/x/trace.json"), std::filesystem::path("/x/summary.json"));
  EXPECT_EQ(merged_summary_path("/x/trace-merged.json"), std::filesystem::path("/x/summary-merged.json"));
  EXPECT_EQ(merged_summary_path("/x/job.json"), std::filesystem::path("/x/job-summary.json"));
}

TEST(Merge, TheHeadOfATraceNamesItsProcessAndRank) {
  const std::filesystem::path dir = fresh_dir("head");
  const trace::TraceHead h = trace::read_trace_head(write_rank_trace(dir, 5, 999, kBase + 7));
  EXPECT_EQ(h.rank, 5);
  EXPECT_EQ(h.host_process, 999u);
  EXPECT_EQ(h.host_process_name, "attnprof profile: python ddp.py (pid 999)");
  EXPECT_EQ(h.base_time_ns, kBase + 7);
  ASSERT_EQ(h.devices.size(), 1u);
  EXPECT_EQ(h.devices[0].id, 5);
  const nlohmann::json t = read_json(h.path);
  EXPECT_EQ(t.at("distributedInfo"), (nlohmann::json{{"rank", 5}, {"local_rank", 5}}));
}

}  // namespace
}  // namespace attnprof
