// PTX wrappers the efficient kernels are built from: cp.async, ldmatrix, mma.sync m16n8k16,
// ex2.approx. Every shared-memory access of the kernels goes through a
// volatile asm, so program order is kept around the barriers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/log2e.hpp"
#include "core/mask_bounds.hpp"
#include "efficient/efficient.hpp"

namespace attnprof::kernels::efficient {

constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ std::uint32_t smem_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16-byte global->shared copy; src_bytes = 0 zero-fills the destination without reading `src`
// (which must still be a valid address).
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void st_shared_b32(std::uint32_t address, std::uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(value));
}
__device__ __forceinline__ uint4 ld_shared_v4(std::uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}
__device__ __forceinline__ float4 ld_shared_f4(std::uint32_t address) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address));
  return v;
}
__device__ __forceinline__ float ld_shared_f32(std::uint32_t address) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(address));
  return v;
}
__device__ __forceinline__ void st_shared_f32(std::uint32_t address, float value) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(address), "f"(value));
}

// 2^x on the SFU; ex2.approx(-inf) = +0, which the online softmax relies on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded into one register of 16-bit elements: `lo` in the low half (the element
// with the smaller column index in every mma fragment).
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
template <>
__device__ __forceinline__ std::uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// D += A(16x16, row) * B(16x8, col), fp32 accumulators, in the fragment layouts of PTX ISA
// "Matrix Fragments for mma.m16n8k16 with floating point type".
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const std::uint32_t (&a)[4],
                                                         std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                                  std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

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
