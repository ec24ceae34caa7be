// Does cuDNN's ragged prefill stay inside our packed buffers? A packed tensor is described to
// cuDNN as [batch, heads, seq_max, head_dim] with per-sequence offsets (cudnn_sdpa_graph.cpp); a
// descriptor or offset of ours that is off, or a kernel that loads whole tiles past a sequence's
// last token, reads past the packed data. In an ordinary allocation such a read lands in whatever
// follows and goes unseen, or faults only when nothing is mapped there: a sweep once lost its
// context in this case after nine decode cases (configs/perf_decode.json, docs/perf/NOTES.md).
//
// So the test puts Q, K, V and O in buffers that end exactly at the end of their mapping (the
// driver's virtual-memory API; the rest of the reservation stays unmapped): a read or write past
// the packed data faults every time. The ragged prefill must run there and write the same output,
// bit for bit, as in the case's own buffers. (cuDNN 9.14 on an H100, 2026-12-07: it does.)
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "backends/cudnn.hpp"
#include "backends/cudnn_info.hpp"
#include "gpu/cuda_check.hpp"
#include "runner/device_case.hpp"

namespace attnprof {
namespace {

// The driver's virtual-memory calls, reached through the runtime (cudaGetDriverEntryPoint) so
// that the binary does not link libcuda and loads, to report itself skipped, where none exists.
template <typename Fn>
Fn driver_function(const char* name) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &entry, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr)
    throw std::runtime_error(fmt::format("the driver has no {}", name));
  return reinterpret_cast<Fn>(entry);
}

struct DriverVmm {
  decltype(&cuMemGetAllocationGranularity) granularity = driver_function<decltype(granularity)>("cuMemGetAllocationGranularity");
  decltype(&cuMemAddressReserve) reserve = driver_function<decltype(reserve)>("cuMemAddressReserve");
  decltype(&cuMemAddressFree) free = driver_function<decltype(free)>("cuMemAddressFree");
  decltype(&cuMemCreate) create = driver_function<decltype(create)>("cuMemCreate");
  decltype(&cuMemRelease) release = driver_function<decltype(release)>("cuMemRelease");
  decltype(&cuMemMap) map = driver_function<decltype(map)>("cuMemMap");
  decltype(&cuMemUnmap) unmap = driver_function<decltype(unmap)>("cuMemUnmap");
  decltype(&cuMemSetAccess) set_access = driver_function<decltype(set_access)>("cuMemSetAccess");
};

const DriverVmm& vmm() {
  static const DriverVmm functions;
  return functions;
}

#define CU_CHECK(call)                                                                                 \
  do {                                                                                                 \
    const CUresult status_ = (call);                                                                   \
    if (status_ != CUDA_SUCCESS)                                                                       \
      throw std::runtime_error(fmt::format("{} failed: CUresult {} ({}:{})", #call, static_cast<int>(status_), \
                                           __FILE__, __LINE__));                                       \
  } while (0)

// A device buffer whose last byte is the last mapped byte of a reservation that extends `guard`
// bytes further, unmapped.
class EdgeBuffer {
 public:
  EdgeBuffer(std::size_t bytes, std::size_t guard) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    std::size_t granularity = 0;
    CU_CHECK(vmm().granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    auto round_up = [&](std::size_t n) { return (n + granularity - 1) / granularity * granularity; };
    mapped_ = round_up(bytes);
    reserved_ = mapped_ + round_up(guard);
    CU_CHECK(vmm().reserve(&base_, reserved_, 0, 0, 0));
    CU_CHECK(vmm().create(&handle_, mapped_, &prop, 0));
    CU_CHECK(vmm().map(base_, mapped_, 0, handle_, 0));
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_CHECK(vmm().set_access(base_, mapped_, &access, 1));
    data_ = reinterpret_cast<void*>(base_ + mapped_ - bytes);
  }
  ~EdgeBuffer() {
    vmm().unmap(base_, mapped_);
    vmm().release(handle_);
    vmm().free(base_, reserved_);
  }
  EdgeBuffer(const EdgeBuffer&) = delete;
  EdgeBuffer& operator=(const EdgeBuffer&) = delete;
  void* get() const { return data_; }

 private:
  CUdeviceptr base_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  std::size_t mapped_ = 0, reserved_ = 0;
  void* data_ = nullptr;
};

// The case that lost its context in a sweep (configs/perf_decode.json): a ragged prefill, packed
// q and k/v, bottom-right causal.
AttentionProblem ragged_prefill() {
  AttentionProblem p;
  p.shape = {4, 32, 4096, 4096, 128, 8};
  p.shape.seq_lens_q = p.shape.seq_lens_kv = {4096, 2048, 1537, 319};
  p.dtype = DType::bf16;
  p.causal = true;
  p.alignment = MaskAlignment::bottom_right;
  return p;
}

struct EdgeRun {
  std::vector<std::uint16_t> o;  // the packed output rows, as stored
};

// Runs cuDNN's forward on copies of the case's inputs in edge buffers of `q_elements` /
// `kv_elements` elements and checks its output against the run in the case's own buffers.
EdgeRun run_at_the_edge(const AttentionProblem& p, std::int64_t q_elements, std::int64_t kv_elements) {
  auto backend = make_cudnn_backend(CudnnBackendOptions{});
  if (auto reason = backend->check_problem(p)) throw std::runtime_error("cudnn refused the case: " + *reason);
  CudaStream stream;
  DeviceCase device_case(p, 4242, stream.get());
  const std::size_t width = dtype_bytes(p.dtype);
  const std::size_t q_bytes = static_cast<std::size_t>(q_elements) * width;
  const std::size_t kv_bytes = static_cast<std::size_t>(kv_elements) * width;
  // The guard reaches further than any tile could: one more longest sequence.
  const std::size_t guard = static_cast<std::size_t>(p.shape.seq_q) * p.shape.heads * p.shape.head_dim * width * 2;
  EdgeBuffer q(q_bytes, guard), k(kv_bytes, guard), v(kv_bytes, guard), o(q_bytes, guard);
  AttentionBuffers buffers = device_case.buffers();
  CUDA_CHECK(cudaMemcpy(q.get(), buffers.q, q_bytes, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy(k.get(), buffers.k, kv_bytes, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy(v.get(), buffers.v, kv_bytes, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemset(o.get(), 0xff, q_bytes));  // NaN in bf16: rows it does not write stay NaN
  buffers.q = q.get();
  buffers.k = k.get();
  buffers.v = v.get();
  buffers.o = o.get();
  backend->prepare(p, stream.get());
  backend->run(p, buffers, stream.get());
  CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  EdgeRun out;
  out.o.resize(static_cast<std::size_t>(stored_elements_q(p.shape)));
  CUDA_CHECK(cudaMemcpy(out.o.data(), o.get(), out.o.size() * width, cudaMemcpyDeviceToHost));

  // The same inputs in the case's own buffers, for the output to compare with.
  device_case.poison_outputs(stream.get());
  backend->run(p, device_case.buffers(), stream.get());
  CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  std::vector<std::uint16_t> want(out.o.size());
  CUDA_CHECK(cudaMemcpy(want.data(), device_case.buffers().o, want.size() * width, cudaMemcpyDeviceToHost));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differ += want[i] != out.o[i];
  if (differ != 0) throw std::runtime_error(fmt::format("{} of {} output elements differ from the run in the case's buffers",
                                                        differ, want.size()));
  return out;
}

TEST(CudnnPackedBuffers, TheRaggedPrefillStaysInsideThePackedData) {
  const AttentionProblem p = ragged_prefill();
  EXPECT_NO_THROW(run_at_the_edge(p, stored_elements_q(p.shape), stored_elements_kv(p.shape)))
      << "cuDNN " << cudnn_runtime_version();
}

}  // namespace
}  // namespace attnprof
