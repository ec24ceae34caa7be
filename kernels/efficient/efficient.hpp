// Host launcher of the memory-efficient attention forward kernel (the `efficient` backend).
// Host-only: callable from g++-compiled code. One launch per forward; the kernel sweeps a
// 64-row query block over key blocks with an online softmax, the output accumulator on chip.
#pragma once

#include <cuda_runtime_api.h>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"

namespace attnprof::kernels::efficient {

// q, o: [batch, heads, seq_q, head_dim], k, v: [batch, heads_kv, seq_kv, head_dim], contiguous in
// `dtype`; query head h reads K/V head h / group_size. bias: fp32 [seq_q, seq_kv] (null when
// absent), added to the scaled score; lse: fp32 [batch, heads, seq_q] (may be null). A row that
// sees no key (mask) gets zeros in o and -inf in lse.
// A ragged batch (core/types.hpp): seq_lens_q/kv give each sequence's lengths (seq_q, seq_kv are
// the maxima); with cu_seqlens_q, q and o are packed [total_q, heads, head_dim], with
// cu_seqlens_kv, k and v are packed [total_kv, heads_kv, head_dim]; lse stays padded. Each
// sequence's mask follows its own lengths (MaskBounds::for_lengths); the bias is indexed by the
// sequence's own row and key.
struct ForwardParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  const float* bias = nullptr;
  int batch = 0;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;  // heads / heads_kv
  int seq_q = 0;
  int seq_kv = 0;
  int head_dim = 0;  // multiple of 8, 8..256
  float scale = 0.f;
  MaskBounds mask;  // causal and window bounds, either alignment (unbounded: every key)
  int bias_ld = 0;   // floats between bias rows (seq_kv)
  const int* seq_lens_q = nullptr;     // [batch] device; null: every sequence has seq_q rows
  const int* seq_lens_kv = nullptr;    // [batch] device; null: every sequence has seq_kv keys
  const int* cu_seqlens_q = nullptr;   // [batch + 1] device; null: q and o dense
  const int* cu_seqlens_kv = nullptr;  // [batch + 1] device; null: k and v dense
};

constexpr int kMaxHeadDim = 256;

// The compiled head-dim bucket a head dim runs in (64, 128 or 256), or 0 if none fits.
// Columns past head_dim are zero-filled on chip.
constexpr int head_dim_bucket(int head_dim) {
  if (head_dim < 8 || head_dim > kMaxHeadDim || head_dim % 8 != 0) return 0;
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

// The largest head dim the ragged kernels are compiled for (buckets 64 and 128), and whether
// they take a bias (no: only the dense kernels do; fp32's bias is a run-time branch of either).
constexpr int kMaxRaggedHeadDim = 128;
constexpr bool ragged_takes_bias(DType dtype) { return dtype == DType::fp32; }

// Whether params describe a ragged batch (any length or offset array set).
inline bool is_ragged(const ForwardParams& p) {
  return p.seq_lens_q != nullptr || p.seq_lens_kv != nullptr || p.cu_seqlens_q != nullptr ||
         p.cu_seqlens_kv != nullptr;
}

// Dynamic shared memory (bytes) the instantiation for (dtype, head_dim) needs per block.
int forward_smem_bytes(DType dtype, int head_dim);

// One-time per instantiation: raises its dynamic shared-memory limit. Host-only, no launch.
cudaError_t prepare_forward(DType dtype, int head_dim, bool ragged);

// Enqueues the single kernel launch; the caller checks cudaGetLastError().
void forward(DType dtype, const ForwardParams& params, cudaStream_t stream);

// One compiled instantiation per (dtype, head-dim bucket, dense or ragged): its entry points are
// declared here and defined in efficient_launch.cuh; each efficient_fwd_<dtype>_d<dim>[_ragged].cu
// explicitly instantiates exactly one, and efficient_dispatch.cu (which sees only this
// declaration) dispatches among them.
template <DType kDType, int kHeadDim, bool kRagged>
struct EfficientForward {
  static int smem_bytes();
  static cudaError_t prepare();
  static void launch(const ForwardParams& params, cudaStream_t stream);
};

}  // namespace attnprof::kernels::efficient
