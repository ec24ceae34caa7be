// Picks the instantiation of the Hopper forward for a problem and builds its TMA descriptors
// (host code only; the kernels compile in flash_hopper_fwd_<dtype>_d<dim>.cu).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/element_type.cuh"
#include "common/log2e.hpp"
#include "common/static_switch.hpp"
#include "flash_bwd/flash_bwd_order.hpp"
#include "flash_hopper/flash_hopper.hpp"
#include "flash_hopper/flash_hopper_bwd_kernel.cuh"
#include "flash_hopper/flash_hopper_instances.hpp"
#include "flash_hopper/flash_hopper_kernel.cuh"

namespace attnprof::kernels {
namespace {

template <typename F>
decltype(auto) with_instance(DType dtype, int head_dim, F&& f) {
  return dtype_switch<DType::bf16, DType::fp16>("flash:hopper", dtype, [&](auto dtype_tag) -> decltype(auto) {
    return head_dim_switch<64, 128>("flash:hopper", head_dim, [&](auto dim_tag) -> decltype(auto) {
      return f(FlashHopperForward<decltype(dtype_tag)::value, decltype(dim_tag)::value>{});
    });
  });
}

using Traits128 = hopper::HopperTraits<__nv_bfloat16, 128>;

// A driver entry point through the runtime (no link to libcuda: the CPU-only programs that link
// the kernels library must load without a driver).
template <typename Function>
Function driver_function(const char* symbol, unsigned version) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &function, version, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || function == nullptr)
    throw std::runtime_error(std::string("flash:hopper: cudaGetDriverEntryPointByVersion(") + symbol + ") failed: " +
                             (status != cudaSuccess ? cudaGetErrorString(status) : "the driver lacks the symbol"));
  return reinterpret_cast<Function>(function);
}

// A [rows_outer][rows][head_dim] tensor as 3-D TMA boxes of 64 columns x box_rows rows x 1,
// 128-byte swizzled (the layout the kernel's wgmma descriptors read); rows past `rows` arrive
// as zeros.
CUtensorMap encode(const char* tensor, const void* data, DType dtype, int head_dim, int rows, long long rows_outer,
                   int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(rows_outer)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_dim) * 2,
                                 static_cast<cuuint64_t>(head_dim) * 2 * static_cast<cuuint64_t>(rows)};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  static const auto encode_tiled =
      driver_function<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled", 12000);
  const CUresult status = encode_tiled(
      &map, dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
      const_cast<void*>(data), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    const char* name = nullptr;
    static const auto error_name = driver_function<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
    if (error_name(status, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
    throw std::runtime_error(std::string("flash:hopper: cuTensorMapEncodeTiled(") + tensor + ") failed: " + name +
                             " (" + std::to_string(static_cast<int>(status)) + ")");
  }
  return map;
}

// The current device's SM count (one persistent block each).
int sm_count() {
  int device = 0;
  int count = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status == cudaSuccess) status = cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("flash:hopper: cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount) failed: ") +
                             cudaGetErrorString(status));
  return count;
}

}  // namespace

bool flash_hopper_compiled() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, &hopper::flash_hopper_fwd_kernel<Traits128>) == cudaSuccess &&
         attributes.binaryVersion >= 90;
}

int flash_hopper_smem_bytes(int head_dim) {
  return head_dim == 64 ? hopper::HopperTraits<__nv_bfloat16, 64>::kSmemBytes
                        : std::max(Traits128::kSmemBytes, hopper::HopperTraits<__nv_bfloat16, 128, 176>::kSmemBytes);
}

cudaError_t flash_hopper_prepare(DType dtype, int head_dim) {
  return with_instance(dtype, head_dim, [](auto instance) { return decltype(instance)::prepare(); });
}

namespace {
// The fields both kernels share, from the forward's FlashParams or the backward's FlashBwdParams.
template <typename Params>
hopper::HopperProblem hopper_problem(const Params& params, float scale_log2) {
  hopper::HopperProblem problem;
  problem.heads = params.heads;
  problem.heads_kv = params.heads_kv;
  problem.group_size = params.group_size;
  problem.seq_q = params.seq_q;
  problem.seq_kv = params.seq_kv;
  problem.scale = params.scale;
  problem.scale_log2 = scale_log2;
  problem.mask = params.mask;
  return problem;
}
}  // namespace

void flash_hopper_forward(const FlashParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  hopper::HopperKernelParams p;
  const long long bh_q = static_cast<long long>(params.batch) * params.heads;
  const long long bh_kv = static_cast<long long>(params.batch) * params.heads_kv;
  const bool masked = params.mask.bounded();
  const int block_keys = with_instance(dtype, head_dim, [&](auto instance) { return decltype(instance)::block_keys(masked); });
  p.q_map = encode("q", params.q, dtype, head_dim, params.seq_q, bh_q, Traits128::kBlockM);
  p.k_map = encode("k", params.k, dtype, head_dim, params.seq_kv, bh_kv, block_keys);
  p.v_map = encode("v", params.v, dtype, head_dim, params.seq_kv, bh_kv, block_keys);
  // The epilogue stores 16 bytes at a time (and cudaMalloc's 256-byte alignment gives that).
  if (reinterpret_cast<std::uintptr_t>(params.o) % 16 != 0)
    throw std::runtime_error("flash:hopper: the output O is not 16-byte aligned");
  p.o = params.o;
  p.lse = params.lse;
  p.problem = hopper_problem(params, params.scale_log2);
  const long long m_blocks = (params.seq_q + Traits128::kBlockM - 1) / Traits128::kBlockM;
  const long long work_tiles = m_blocks * bh_q;
  if (work_tiles > 0x7fffffffLL)
    throw std::runtime_error("flash:hopper: " + std::to_string(work_tiles) + " work tiles exceed the int range");
  p.work_tiles = static_cast<int>(work_tiles);
  const int blocks = static_cast<int>(std::min<long long>(work_tiles, sm_count()));
  with_instance(dtype, head_dim, [&](auto instance) { decltype(instance)::launch(p, blocks, masked, stream); });
}

namespace {
using BwdTraits128 = hopper::HopperBwdTraits<__nv_bfloat16, 128>;

template <typename F>
decltype(auto) with_bwd_instance(DType dtype, int head_dim, F&& f) {
  return dtype_switch<DType::bf16, DType::fp16>("flash:hopper backward", dtype, [&](auto dtype_tag) -> decltype(auto) {
    return head_dim_switch<128>("flash:hopper backward", head_dim, [&](auto dim_tag) -> decltype(auto) {
      return f(FlashHopperBackward<decltype(dtype_tag)::value, decltype(dim_tag)::value>{});
    });
  });
}
}  // namespace

bool flash_hopper_bwd_has_kernel(DType dtype, int head_dim) {
  return (dtype == DType::bf16 || dtype == DType::fp16) && head_dim == 128;
}

cudaError_t flash_hopper_bwd_prepare(DType dtype, int head_dim) {
  return with_bwd_instance(dtype, head_dim, [](auto instance) { return decltype(instance)::prepare(); });
}

void flash_hopper_backward(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  hopper::HopperBwdParams p;
  const long long bh_q = static_cast<long long>(params.batch) * params.heads;
  const long long bh_kv = static_cast<long long>(params.batch) * params.heads_kv;
  p.q_map = encode("q", params.q, dtype, head_dim, params.seq_q, bh_q, BwdTraits128::kBlockM);
  p.do_map = encode("dO", params.d_o, dtype, head_dim, params.seq_q, bh_q, BwdTraits128::kBlockM);
  p.k_map = encode("k", params.k, dtype, head_dim, params.seq_kv, bh_kv, BwdTraits128::kBlockN);
  p.v_map = encode("v", params.v, dtype, head_dim, params.seq_kv, bh_kv, BwdTraits128::kBlockN);
  p.lse_log2 = params.lse_log2;
  p.d_sum = params.d_sum;
  p.dq_accum = params.dq_accum;
  p.dk = params.dk;
  p.dv = params.dv;
  p.problem = hopper_problem(params, params.scale * kLog2e);
  const FlashBwdGrid g = flash_bwd_grid(params.mask, params.seq_kv, params.heads_kv, params.batch);
  flash_bwd_pre_pass(params, dtype, head_dim, stream);
  if (cudaPeekAtLastError() != cudaSuccess) return;  // the caller's check reports the first failure
  with_bwd_instance(dtype, head_dim, [&](auto instance) { decltype(instance)::launch(p, dim3(g.x, g.y, g.z), stream); });
  if (cudaPeekAtLastError() != cudaSuccess) return;
  flash_bwd_convert_dq(params, dtype, head_dim, stream);
}

}  // namespace attnprof::kernels
