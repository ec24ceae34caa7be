// Host launchers of the FlashAttention-2-style fused forward kernel. Plain C++: callable from
// g++-compiled code (lib/backends/flash.cpp); no CUDA device types appear here.
#pragma once

#include <cuda_runtime_api.h>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"

namespace attnprof::kernels {

// One forward problem. q, o: [batch, heads, seq_q, head_dim], k, v: [batch, heads_kv, seq_kv,
// head_dim], contiguous, 16-byte aligned; query head h reads K/V head h / group_size. lse:
// [batch, heads, seq_q] fp32 natural-log logsumexp of the scaled scores, or null to skip it; a row
// that sees no key (mask) gets zeros in o and -inf in lse. The varlen instantiation also takes
// the layouts of core/types.hpp: per-sequence lengths, packed q/o and k/v through cumulative
// offsets, a paged K/V cache through a block table (seq_q and seq_kv are then the maxima).
struct FlashParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  int batch = 0;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;  // heads / heads_kv
  int seq_q = 0;
  int seq_kv = 0;
  float scale = 0.f;       // softmax scale applied to q.k
  float scale_log2 = 0.f;  // scale * log2(e): the kernel exponentiates in base 2
  MaskBounds mask;         // causal and window bounds; read only by the masked instantiation
  // Read only by the varlen instantiation; null: not ragged / not packed / not paged.
  const int* seq_lens_q = nullptr;     // [batch]
  const int* seq_lens_kv = nullptr;    // [batch]
  const int* cu_seqlens_q = nullptr;   // [batch + 1]: q/o packed [total_q, heads, head_dim]
  const int* cu_seqlens_kv = nullptr;  // [batch + 1]: k/v packed [total_kv, heads_kv, head_dim]
  const int* block_table = nullptr;    // [batch, pages_per_sequence]: k/v paged [pages, page_size, heads_kv, head_dim]
  int page_size = 0;
  int pages_per_sequence = 0;
};

// The instantiations that exist: bf16 and fp16, head dims 64 and 128, masked (causal and/or a
// window, either alignment: params.mask.bounded()) and not, and varlen (ragged or paged; its
// bands are per sequence, so it is always the masked kind).
bool flash_has_kernel(DType dtype, int head_dim);

// Dynamic shared memory one block of the kernel for this head dim needs (bytes).
int flash_smem_bytes(int head_dim);

// One-time set-up of one instantiation: raises its dynamic shared-memory limit past 48 KB and
// prefers the shared-memory carveout so that two blocks fit per SM.
cudaError_t flash_prepare(DType dtype, int head_dim, bool masked, bool varlen = false);

// Enqueues exactly one kernel launch on `stream`; the caller checks the launch.
void flash_forward(const FlashParams& params, DType dtype, int head_dim, bool masked, bool varlen,
                   cudaStream_t stream);

}  // namespace attnprof::kernels
