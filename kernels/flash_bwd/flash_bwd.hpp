// Host launchers of flash's backward pass, FlashAttention-2 style: three kernels per call.
//   flash_bwd_dot_do_o_kernel    D = rowsum(dO * O) per query row (fp32), the row's lse in log2
//                                units, and the fp32 dQ accumulator of that row zeroed
//   flash_bwd_dq_dk_dv_kernel    one block per (128 keys, K/V head, sequence): K and V stay in
//                                shared memory while the block walks the query rows that see
//                                them (every query head of the K/V head's group), recomputing
//                                P = exp(S - lse) from the forward's logsumexp; dK and dV
//                                accumulate in registers, dQ goes to the fp32 accumulator with
//                                atomic adds (so dQ's summation order varies run to run)
//   flash_bwd_dq_dk_dv_tail_kernel  (sm_90, no mask band, when flash_bwd_tail_plan takes it) the
//                                main kernel's last partial wave instead, one block per SM walking
//                                equal runs of those blocks' steps (stream-K), launched as a
//                                programmatic dependent of the main kernel
//   flash_bwd_convert_dq_kernel  the accumulator to dQ in the input's type
// The same main kernel also runs fused (the efficient backend's backward, one kernel after a
// memset, like xformers' cutlassB): each step computes D = rowsum(dO * O) from an O tile itself,
// and the last key block to add into a tile of dQ rows (an arrival counter per (sequence, head,
// tile of rows), the expected count from flash_bwd_tile_arrivals) converts those rows.
// Plain C++: callable from g++-compiled code (lib/backends/flash.cpp, efficient.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"
#include "flash_bwd/flash_bwd_order.hpp"

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
  float* d_sum = nullptr;     // [batch, heads, seq_q] fp32 workspace: rowsum(dO * O) (not fused)
  float* lse_log2 = nullptr;  // [batch, heads, seq_q] fp32 workspace: lse * log2 e, +inf for a row
                              // without keys (not fused; written with d_sum)
  int* dq_arrivals = nullptr;             // fused: [batch, heads, row tiles], zero before the call
  const int* dq_tile_arrivals = nullptr;  // fused: [row tiles] key blocks that add into each tile
  int batch = 0;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;
  int seq_q = 0;
  int seq_kv = 0;
  float scale = 0.f;
  MaskBounds mask;  // causal and window bounds
  // Not fused: the tail kernel's share (flash_bwd_tail_plan; none by default), its parts' slots
  // ([2 tail.ctas] of flash_bwd_tail_part_floats) and arrival counters ([tail.blocks], zeroed by
  // the pre-pass). Last, so that the other fields keep their offsets.
  FlashBwdTail tail;
  float* tail_parts = nullptr;
  int* tail_arrivals = nullptr;
};

bool flash_bwd_has_kernel(DType dtype, int head_dim);

// Floats of workspace one problem needs: dq_accum, then d_sum, then lse_log2; with a tail, its
// parts from flash_bwd_tail_parts_offset on, then its arrival counters.
inline long long flash_bwd_workspace_floats(const AttentionShape& s) {
  const long long rows = static_cast<long long>(s.batch) * s.heads * s.seq_q;
  return rows * (s.head_dim + 2);
}
inline constexpr int kFlashBwdThreads = 256;  // the main kernel's block
// One part's dK and dV: fp32, the block's threads x head_dim floats.
inline long long flash_bwd_tail_part_floats(int head_dim) { return static_cast<long long>(kFlashBwdThreads) * head_dim; }
inline long long flash_bwd_tail_parts_offset(const AttentionShape& s) {
  return (flash_bwd_workspace_floats(s) + 3) / 4 * 4;  // float4 aligned
}
inline long long flash_bwd_workspace_floats(const AttentionShape& s, const FlashBwdTail& tail) {
  if (tail.blocks == 0) return flash_bwd_workspace_floats(s);
  return flash_bwd_tail_parts_offset(s) + 2LL * tail.ctas * flash_bwd_tail_part_floats(s.head_dim) + tail.blocks;
}

// The first and the last of the three kernels alone: D = rowsum(dO * O) with lse_log2 and the
// zeroed dQ accumulator; the accumulator converted to dQ. flash:hopper's backward runs its own
// main kernel between them. The caller checks the launches.
void flash_bwd_pre_pass(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream);
void flash_bwd_convert_dq(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream);

// Main-kernel blocks one SM holds at a time (its occupancy), for the tail plan's slots.
cudaError_t flash_bwd_blocks_per_sm(DType dtype, int head_dim, int* blocks);

// Raises the main kernel's dynamic shared-memory limit (once per instantiation and variant).
cudaError_t flash_bwd_prepare(DType dtype, int head_dim, bool fused);

// Enqueues the three kernels (four with a tail: params.tail); the caller checks the launches.
void flash_backward(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream);

// For each tile of kFlashBwdBlockRows query rows, how many key blocks add into its dQ (the same
// spans the kernel walks): what the fused kernel's arrival counters count up to. A tile no key
// block visits has 0 (its rows see no key: dQ is 0 there, and nobody converts them).
inline std::vector<int> flash_bwd_tile_arrivals(const MaskBounds& mask, int seq_q, int seq_kv) {
  const int tiles = (seq_q + kFlashBwdBlockRows - 1) / kFlashBwdBlockRows;
  std::vector<int> arrivals(static_cast<std::size_t>(tiles), 0);
  for (int key0 = 0; key0 < seq_kv; key0 += kFlashBwdBlockKeys) {
    const int key1 = (key0 + kFlashBwdBlockKeys < seq_kv ? key0 + kFlashBwdBlockKeys : seq_kv) - 1;
    int first = 0, last = -1;
    flash_bwd_query_span(mask, key0, key1, seq_q, &first, &last);
    if (last < first) continue;
    for (int t = first / kFlashBwdBlockRows; t <= last / kFlashBwdBlockRows; ++t) ++arrivals[static_cast<std::size_t>(t)];
  }
  return arrivals;
}

// Bytes the fused variant's zeroed workspace takes: the fp32 dQ accumulator, then the counters.
inline long long flash_bwd_fused_workspace_bytes(long long batch, long long heads, long long seq_q, long long head_dim) {
  const long long tiles = (seq_q + kFlashBwdBlockRows - 1) / kFlashBwdBlockRows;
  return batch * heads * seq_q * head_dim * 4 + batch * heads * tiles * 4;
}
inline long long flash_bwd_fused_workspace_bytes(const AttentionShape& s) {
  return flash_bwd_fused_workspace_bytes(s.batch, s.heads, s.seq_q, s.head_dim);
}

// The fused variant: one memset of the workspace (params.dq_accum, then params.dq_arrivals,
// contiguous), `zero_dq` another of dQ (when a tile has no arrivals), then one kernel. Returns
// the memsets' error; the caller checks the kernel's launch.
cudaError_t flash_backward_fused(const FlashBwdParams& params, DType dtype, int head_dim, bool zero_dq,
                                 cudaStream_t stream);

}  // namespace attnprof::kernels
