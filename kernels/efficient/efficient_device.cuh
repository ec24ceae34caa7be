// The device pieces the efficient kernels share: the primitives layer (kernels/common) and where
// one (sequence, head) of a dense or ragged problem lives. Every shared-memory access of the
// kernels goes through a volatile asm, so program order is kept around the barriers.
#pragma once

#include <cstdint>

#include "common/cp_async.cuh"
#include "common/fast_math.cuh"
#include "common/log2e.hpp"
#include "common/mma_sm80.cuh"
#include "common/shared_memory.cuh"
#include "core/mask_bounds.hpp"
#include "efficient/efficient.hpp"

namespace attnprof::kernels::efficient {

constexpr float kLn2 = 0.6931471805599453f;

// Where one (sequence, query head) of a problem lives, dense or packed: its own lengths and mask,
// the first element of its row 0 in q/o and in k/v, and the elements between consecutive rows.
struct SequenceView {
  int q_len = 0;
  int kv_len = 0;
  MaskBounds mask;
  std::int64_t q_offset = 0;   // q and o: row i of this head at q_offset + i * q_ld
  std::int64_t kv_offset = 0;  // k and v: key j of this head's K/V head at kv_offset + j * kv_ld
  int q_ld = 0;
  int kv_ld = 0;
  std::int64_t lse_offset = 0;  // padded lse: row i at lse_offset + i
};

// A dense problem: every sequence has seq_q rows and seq_kv keys, rows head_dim apart.
__device__ __forceinline__ SequenceView dense_view(const ForwardParams& p, int b, int h) {
  SequenceView v;
  v.q_len = p.seq_q;
  v.kv_len = p.seq_kv;
  v.mask = p.mask;
  v.lse_offset = (static_cast<std::int64_t>(b) * p.heads + h) * p.seq_q;
  v.q_offset = v.lse_offset * p.head_dim;
  v.kv_offset = (static_cast<std::int64_t>(b) * p.heads_kv + h / p.group_size) * p.seq_kv * p.head_dim;
  v.q_ld = p.head_dim;
  v.kv_ld = p.head_dim;
  return v;
}

// A ragged batch: the sequence's lengths from seq_lens_q/kv (when set), its rows from the
// cumulative offsets of a packed q/o or k/v (when set), each packed row heads (or heads_kv) rows
// of the dense layout apart.
__device__ __forceinline__ SequenceView sequence_view(const ForwardParams& p, int b, int h) {
  SequenceView v;
  v.q_len = p.seq_lens_q != nullptr ? p.seq_lens_q[b] : p.seq_q;
  v.kv_len = p.seq_lens_kv != nullptr ? p.seq_lens_kv[b] : p.seq_kv;
  v.mask = p.mask.for_lengths(v.q_len, v.kv_len);
  const int h_kv = h / p.group_size;
  v.lse_offset = (static_cast<std::int64_t>(b) * p.heads + h) * p.seq_q;
  if (p.cu_seqlens_q != nullptr) {
    v.q_offset = (static_cast<std::int64_t>(p.cu_seqlens_q[b]) * p.heads + h) * p.head_dim;
    v.q_ld = p.heads * p.head_dim;
  } else {
    v.q_offset = v.lse_offset * p.head_dim;
    v.q_ld = p.head_dim;
  }
  if (p.cu_seqlens_kv != nullptr) {
    v.kv_offset = (static_cast<std::int64_t>(p.cu_seqlens_kv[b]) * p.heads_kv + h_kv) * p.head_dim;
    v.kv_ld = p.heads_kv * p.head_dim;
  } else {
    v.kv_offset = (static_cast<std::int64_t>(b) * p.heads_kv + h_kv) * p.seq_kv * p.head_dim;
    v.kv_ld = p.head_dim;
  }
  return v;
}

}  // namespace attnprof::kernels::efficient
