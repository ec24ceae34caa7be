// Host launchers of flash's backward pass, FlashAttention-2 style: three kernels per call.
//   flash_bwd_dot_do_o_kernel    D = rowsum(dO * O) per query row (fp32), and the fp32 dQ
//                                accumulator of that row zeroed
//   flash_bwd_dq_dk_dv_kernel    one block per (128 keys, K/V head, sequence): K and V stay in
//                                shared memory while the block walks the query rows that see
//                                them (every query head of the K/V head's group), recomputing
//                                P = exp(S - lse) from the forward's logsumexp; dK and dV
//                                accumulate in registers, dQ goes to the fp32 accumulator with
//                                atomic adds (so dQ's summation order varies run to run)
//   flash_bwd_convert_dq_kernel  the accumulator to dQ in the input's type
// Plain C++: callable from g++-compiled code (lib/backends/flash.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"

namespace attnprof::kernels {

// Dense layouts only: q, o, dO, dQ [batch, heads, seq_q, head_dim]; k, v, dK, dV [batch,
// heads_kv, seq_kv, head_dim]; lse [batch, heads, seq_q] natural log (-inf: a row without keys).
struct FlashBwdParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* d_o = nullptr;
  const float* lse = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* dq_accum = nullptr;  // [batch, heads, seq_q, head_dim] fp32 workspace
  float* d_sum = nullptr;     // [batch, heads, seq_q] fp32 workspace: rowsum(dO * O)
  int batch = 0;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;
  int seq_q = 0;
  int seq_kv = 0;
  float scale = 0.f;
  MaskBounds mask;  // causal and window bounds
};

bool flash_bwd_has_kernel(DType dtype, int head_dim);

// Floats of workspace one problem needs: dq_accum, then d_sum.
inline long long flash_bwd_workspace_floats(const AttentionShape& s) {
  const long long rows = static_cast<long long>(s.batch) * s.heads * s.seq_q;
  return rows * (s.head_dim + 1);
}

// Raises the main kernel's dynamic shared-memory limit (once per instantiation).
cudaError_t flash_bwd_prepare(DType dtype, int head_dim);

// Enqueues the three kernels; the caller checks the launches.
void flash_backward(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream);

}  // namespace attnprof::kernels
