// The CUPTI record -> model conversion on synthetic activity records, as CUPTI lays them out:
// every kind the collector enables, the marker pairing, a record with a corrupt timestamp, and
// the join of GPU records to the calls that launched them. No GPU and no subscription: only
// CUPTI's callback-name table is consulted.
#include <cupti.h>

#include <cstring>

#include <gtest/gtest.h>

#include "collector/cupti_records.hpp"
#include "collector/sweep_tags.hpp"

namespace attnprof {
namespace {

template <typename Record>
Record zeroed(CUpti_ActivityKind kind) {
  Record r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  return r;
}

const CUpti_Activity& as_activity(const void* record) { return *static_cast<const CUpti_Activity*>(record); }

CUpti_ActivityKernel10 kernel_record(const char* name, std::uint64_t start, std::uint64_t end, std::uint32_t correlation) {
  auto r = zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  r.name = name;
  r.start = start;
  r.end = end;
  r.deviceId = 0;
  r.contextId = 1;
  r.streamId = 13;
  r.correlationId = correlation;
  r.gridX = 264;
  r.gridY = 2;
  r.gridZ = 1;
  r.blockX = 128;
  r.blockY = 1;
  r.blockZ = 1;
  r.registersPerThread = 255;
  r.staticSharedMemory = 0;
  r.dynamicSharedMemory = 65536;
  r.localMemoryPerThread = 16;
  r.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_OPTIN;
  r.sharedMemoryExecuted = 233472;
  r.clusterX = 2;
  r.clusterY = 1;
  r.clusterZ = 1;
  return r;
}

CUpti_ActivityAPI api_record(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint64_t start, std::uint32_t correlation) {
  auto r = zeroed<CUpti_ActivityAPI>(kind);
  r.cbid = cbid;
  r.start = start;
  r.end = start + 2'500;
  r.processId = 4242;
  r.threadId = 77;
  r.correlationId = correlation;
  return r;
}

TEST(CuptiRecords, AKernelRecordBecomesAKernelWithItsLaunchConfiguration) {
  RecordConversion state;
  const auto r = kernel_record("_Z11fill_kernelPfi", 1'000, 31'000, 5);
  convert_record(as_activity(&r), state);
  ASSERT_EQ(state.batch.kernels.size(), 1u);
  const trace::KernelActivity& k = state.batch.kernels[0];
  EXPECT_EQ(k.name, "fill_kernel(float*, int)");  // demangled
  EXPECT_EQ(k.start_ns, 1'000u);
  EXPECT_EQ(k.end_ns, 31'000u);
  EXPECT_EQ(k.stream, 13u);
  EXPECT_EQ(k.correlation, 5u);
  EXPECT_EQ(k.grid, (std::array<int, 3>{264, 2, 1}));
  EXPECT_EQ(k.block, (std::array<int, 3>{128, 1, 1}));
  EXPECT_EQ(k.cluster, (std::array<int, 3>{2, 1, 1}));
  EXPECT_EQ(k.registers_per_thread, 255);
  EXPECT_EQ(k.dynamic_shared_bytes, 65536);
  EXPECT_EQ(k.local_bytes_per_thread, 16);
  EXPECT_TRUE(k.shared_optin);
  EXPECT_EQ(k.shared_memory_executed, 233472);
  EXPECT_EQ(k.carveout_percent, -1);  // none requested
  EXPECT_FALSE(k.occupancy.valid);    // computed later, by the annotate step, never on CUPTI's thread
  EXPECT_EQ(state.health.records, 1u);
  EXPECT_EQ(state.health.invalid_timestamps, 0u);
}

TEST(CuptiRecords, ARequestedCarveoutIsKept) {
  RecordConversion state;
  auto r = kernel_record("k", 1, 2, 1);
  r.isSharedMemoryCarveoutRequested = 1;
  r.sharedMemoryCarveoutRequested = 50;
  convert_record(as_activity(&r), state);
  ASSERT_EQ(state.batch.kernels.size(), 1u);
  EXPECT_EQ(state.batch.kernels[0].carveout_percent, 50);
}

TEST(CuptiRecords, GpuRecordsWithCorruptTimestampsAreCountedNotConverted) {
  RecordConversion state;
  const auto no_start = kernel_record("k", 0, 500, 1);
  const auto backwards = kernel_record("k", 900, 800, 2);
  auto copy = zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.start = 10;
  copy.end = 5;
  auto fill = zeroed<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);  // start 0
  for (const void* r : {static_cast<const void*>(&no_start), static_cast<const void*>(&backwards),
                        static_cast<const void*>(&copy), static_cast<const void*>(&fill)})
    convert_record(as_activity(r), state);
  EXPECT_TRUE(state.batch.empty());
  EXPECT_EQ(state.health.records, 4u);
  EXPECT_EQ(state.health.invalid_timestamps, 4u);
}

TEST(CuptiRecords, MemcpyAndMemsetKeepKindBytesAndMemory) {
  RecordConversion state;
  auto copy = zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 262'144;
  copy.start = 100;
  copy.end = 400;
  copy.streamId = 13;
  copy.correlationId = 9;
  auto fill = zeroed<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  fill.bytes = 4;
  fill.value = 0xff;
  fill.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  fill.start = 500;
  fill.end = 510;
  fill.correlationId = 10;
  convert_record(as_activity(&copy), state);
  convert_record(as_activity(&fill), state);
  ASSERT_EQ(state.batch.memcpys.size(), 1u);
  EXPECT_EQ(state.batch.memcpys[0].kind, trace::MemcpyKind::DtoD);
  EXPECT_EQ(state.batch.memcpys[0].src_memory, "Device");
  EXPECT_EQ(state.batch.memcpys[0].dst_memory, "Device");
  EXPECT_EQ(state.batch.memcpys[0].bytes, 262'144u);
  EXPECT_EQ(state.batch.memcpys[0].correlation, 9u);
  ASSERT_EQ(state.batch.memsets.size(), 1u);
  EXPECT_EQ(state.batch.memsets[0].bytes, 4u);
  EXPECT_EQ(state.batch.memsets[0].value, 0xffu);
  EXPECT_EQ(state.batch.memsets[0].memory, "Device");
}

TEST(CuptiRecords, RuntimeAndDriverCallsAreNamedWithoutTheirVersion) {
  RecordConversion state;
  const auto runtime = api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 50, 5);
  const auto driver = api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 60, 6);
  convert_record(as_activity(&runtime), state);
  convert_record(as_activity(&driver), state);
  ASSERT_EQ(state.batch.api_calls.size(), 2u);
  EXPECT_EQ(state.batch.api_calls[0].name, "cudaLaunchKernel");
  EXPECT_EQ(state.batch.api_calls[0].domain, trace::ApiDomain::runtime);
  EXPECT_EQ(state.batch.api_calls[0].thread, 77u);
  EXPECT_EQ(state.batch.api_calls[0].end_ns - state.batch.api_calls[0].start_ns, 2'500u);
  EXPECT_EQ(state.batch.api_calls[1].name, "cuLaunchKernelEx");
  EXPECT_EQ(state.batch.api_calls[1].domain, trace::ApiDomain::driver);
}

// The start record of NVTX range `id`, pushed on `thread` of `process`.
CUpti_ActivityMarker2 marker_start(std::uint32_t id, std::uint64_t timestamp, const char* name, std::uint32_t thread,
                                   std::uint32_t process) {
  auto start = zeroed<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.id = id;
  start.timestamp = timestamp;
  start.name = name;
  start.domain = "";
  start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  start.objectId.pt.threadId = thread;
  start.objectId.pt.processId = process;
  return start;
}

TEST(CuptiRecords, MarkerStartAndEndBecomeOneRange) {
  RecordConversion state;
  const auto start = marker_start(3, 1'000, "iter 2", 77, 4242);
  auto end = zeroed<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  end.id = 3;
  end.timestamp = 9'000;
  auto orphan_end = end;
  orphan_end.id = 4;  // its start was never seen: nothing to pair
  convert_record(as_activity(&start), state);
  EXPECT_TRUE(state.batch.annotations.empty());  // open until its end arrives
  convert_record(as_activity(&orphan_end), state);
  convert_record(as_activity(&end), state);
  ASSERT_EQ(state.batch.annotations.size(), 1u);
  const trace::Annotation& a = state.batch.annotations[0];
  EXPECT_EQ(a.name, "iter 2");
  EXPECT_EQ(a.start_ns, 1'000u);
  EXPECT_EQ(a.end_ns, 9'000u);
  EXPECT_EQ(a.thread, 77u);
  EXPECT_EQ(a.process, 4242u);  // as the API records of that process say it
  EXPECT_TRUE(state.open_markers.empty());
}

TEST(CuptiRecords, ARangeStillOpenAtTheLastDrainEndsThere) {
  RecordConversion state;
  const auto start = marker_start(5, 2'000, "train step", 9, 31);
  convert_record(as_activity(&start), state);
  ASSERT_TRUE(state.batch.annotations.empty());
  close_open_markers(state, 50'000);
  ASSERT_EQ(state.batch.annotations.size(), 1u);
  EXPECT_EQ(state.batch.annotations[0].name, "train step");
  EXPECT_EQ(state.batch.annotations[0].start_ns, 2'000u);
  EXPECT_EQ(state.batch.annotations[0].end_ns, 50'000u);
  EXPECT_EQ(state.batch.annotations[0].process, 31u);
  EXPECT_EQ(state.batch.annotations[0].thread, 9u);
  EXPECT_TRUE(state.open_markers.empty());
}

TEST(CuptiRecords, OverheadRecordsNameWhatCuptiSpentTimeOn) {
  RecordConversion state;
  auto r = zeroed<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  r.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  r.start = 10;
  r.end = 20;
  r.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  r.objectId.pt.threadId = 5;
  convert_record(as_activity(&r), state);
  ASSERT_EQ(state.batch.overheads.size(), 1u);
  EXPECT_EQ(state.batch.overheads[0].kind, "CUPTI overhead: buffer flush");
  EXPECT_EQ(state.batch.overheads[0].thread, 5u);
}

TEST(CuptiRecords, GpuRecordsJoinTheirLaunchingCallAndItsSweepTag) {
  RecordConversion state;
  const trace::SweepTag tag{4, trace::Phase::iteration, 2};
  auto external = zeroed<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  external.correlationId = 5;
  external.externalId = encode_tag(tag);
  const auto launch = api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 50, 5);
  const auto sync = api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 90, 7);
  const auto kernel = kernel_record("k", 1'000, 2'000, 5);
  const auto stray = kernel_record("k", 3'000, 4'000, 99);  // its call was not recorded
  for (const void* r : {static_cast<const void*>(&kernel), static_cast<const void*>(&external),
                        static_cast<const void*>(&launch), static_cast<const void*>(&sync),
                        static_cast<const void*>(&stray)})
    convert_record(as_activity(r), state);
  join_launches(state.batch, state.external_ids);

  ASSERT_EQ(state.batch.kernels.size(), 2u);
  const trace::KernelActivity& k = state.batch.kernels[0];
  EXPECT_EQ(k.launch_api, "cudaLaunchKernel");
  EXPECT_EQ(k.tag.case_index, 4);
  EXPECT_EQ(k.tag.phase, trace::Phase::iteration);
  EXPECT_EQ(k.tag.iteration, 2);
  EXPECT_TRUE(state.batch.kernels[1].launch_api.empty());
  EXPECT_EQ(state.batch.kernels[1].tag.case_index, -1);
  ASSERT_EQ(state.batch.api_calls.size(), 2u);
  EXPECT_TRUE(state.batch.api_calls[0].launches_work);   // the start of an ac2g flow
  EXPECT_FALSE(state.batch.api_calls[1].launches_work);  // a synchronize launches nothing
  EXPECT_EQ(state.batch.api_calls[0].tag.case_index, 4);
}

}  // namespace
}  // namespace attnprof
