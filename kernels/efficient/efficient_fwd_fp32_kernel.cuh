// fp32 body of the efficient forward kernel: exact fp32 products on FFMA (tensor cores would
// mean TF32 and about 3e-4 relative error, over the 1e-4 bound). Same sweep as the mma body:
// one block per (64-query block, head, batch), online softmax, accumulator in registers.
#pragma once

#include <cmath>
#include <cstdint>

#include "efficient/efficient.hpp"
#include "efficient/efficient_device.cuh"
#include "efficient/efficient_traits.cuh"

namespace attnprof::kernels::efficient {

// Rows [0, rows_valid) x 16-byte chunks [0, chunks_valid) of a row-major fp32 global tile into a
// shared tile with Tr::kLd floats per row; the rest is zero-filled.
template <class Tr, int kRows>
__device__ __forceinline__ void load_fp32_tile(std::uint32_t tile, const float* src, int rows_valid,
                                               int chunks_valid, int ld, int tid) {
#pragma unroll
  for (int it = 0; it < kRows * Tr::kChunks / Tr::kThreads; ++it) {
    const int idx = it * Tr::kThreads + tid;
    const int row = idx / Tr::kChunks, chunk = idx % Tr::kChunks;
    const bool inside = row < rows_valid && chunk < chunks_valid;
    cp_async_16_zfill(tile + (row * Tr::kLd + chunk * 4) * 4, inside ? src + row * ld + chunk * 4 : src, inside);
  }
}

// One block: query rows [m0, m0 + 64) of one (sequence, head); p's seq_q, seq_kv and mask are
// that sequence's own (as the mma body's forward_block).
template <class Tr>
__device__ __forceinline__ void forward_block_fp32(const ForwardParams& p, const SequenceView& seq, const int m0) {
  constexpr int kKeysPerThread = Tr::kBlockN / 8;
  extern __shared__ __align__(128) unsigned char smem[];

  const int tid = threadIdx.x;
  const int lane_group = tid >> 3;  // rows lane_group and lane_group + 32
  const int col = tid & 7;          // keys col + 8i; output columns 4*col + 32j
  const float* q = static_cast<const float*>(p.q) + seq.q_offset + static_cast<std::int64_t>(m0) * seq.q_ld;
  const float* k = static_cast<const float*>(p.k) + seq.kv_offset;
  const float* v = static_cast<const float*>(p.v) + seq.kv_offset;

  const std::uint32_t s_q = shared_address(smem);
  const std::uint32_t s_k = s_q + Tr::kKOffset, s_v = s_q + Tr::kVOffset, s_p = s_q + Tr::kPOffset;

  // Only the key tiles some row of the block sees (core/mask_bounds.hpp); none when no row
  // sees a key (the block then writes zeros).
  const KeyTiles tiles = key_tiles(p.mask, p.seq_q, p.seq_kv, m0, Tr::kBlockM, Tr::kBlockN);

  const int chunks_valid = p.head_dim / 4;
  if (tiles.begin < tiles.end) {  // else nothing is loaded: no copy is left in flight at exit
    load_fp32_tile<Tr, Tr::kBlockM>(s_q, q, min(Tr::kBlockM, p.seq_q - m0), chunks_valid, seq.q_ld, tid);
    cp_async_commit();
  }

  float o[2][Tr::kColGroups][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int j = 0; j < Tr::kColGroups; ++j) o[r][j][0] = o[r][j][1] = o[r][j][2] = o[r][j][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.scale * kLog2e;
  const int rows[2] = {m0 + lane_group, m0 + lane_group + 32};

  for (int tile = tiles.begin; tile < tiles.end; ++tile) {
    const int key0 = tile * Tr::kBlockN;
    __syncthreads();  // every thread is done with the previous K, V and P
    load_fp32_tile<Tr, Tr::kBlockN>(s_k, k + static_cast<std::int64_t>(key0) * seq.kv_ld,
                                    min(Tr::kBlockN, p.seq_kv - key0), chunks_valid, seq.kv_ld, tid);
    load_fp32_tile<Tr, Tr::kBlockN>(s_v, v + static_cast<std::int64_t>(key0) * seq.kv_ld,
                                    min(Tr::kBlockN, p.seq_kv - key0), chunks_valid, seq.kv_ld, tid);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    // Scores: 2 rows x 4 keys per thread, float4 steps along the head dim (padding is zero).
    float s[2][kKeysPerThread] = {};
#pragma unroll 2
    for (int c = 0; c < p.head_dim; c += 4) {
      const float4 q0 = ld_shared_f4(s_q + (lane_group * Tr::kLd + c) * 4);
      const float4 q1 = ld_shared_f4(s_q + ((lane_group + 32) * Tr::kLd + c) * 4);
#pragma unroll
      for (int i = 0; i < kKeysPerThread; ++i) {
        const float4 kv = ld_shared_f4(s_k + ((col + 8 * i) * Tr::kLd + c) * 4);
        s[0][i] = fmaf(q0.x, kv.x, fmaf(q0.y, kv.y, fmaf(q0.z, kv.z, fmaf(q0.w, kv.w, s[0][i]))));
        s[1][i] = fmaf(q1.x, kv.x, fmaf(q1.y, kv.y, fmaf(q1.z, kv.z, fmaf(q1.w, kv.w, s[1][i]))));
      }
    }

    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int i = 0; i < kKeysPerThread; ++i) {
        const int key = key0 + col + 8 * i;
        float x = s[r][i] * scale_log2;
        if (p.bias != nullptr && rows[r] < p.seq_q && key < p.seq_kv)
          x = fmaf(__ldg(p.bias + static_cast<std::int64_t>(rows[r]) * p.bias_ld + key), kLog2e, x);
        if (key >= p.seq_kv || !p.mask.sees(rows[r], key)) x = -INFINITY;
        s[r][i] = x;
        tile_max[r] = fmaxf(tile_max[r], x);
      }
      // The 8 lanes of a row group are consecutive lanes of one warp.
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 4));

      const float new_max = fmaxf(row_max[r], tile_max[r]);
      const float base = new_max == -INFINITY ? 0.f : new_max;
      const float rescale = exp2_approx(row_max[r] - base);
      row_max[r] = new_max;
      row_sum[r] *= rescale;
#pragma unroll
      for (int j = 0; j < Tr::kColGroups; ++j) {
        o[r][j][0] *= rescale, o[r][j][1] *= rescale, o[r][j][2] *= rescale, o[r][j][3] *= rescale;
      }
#pragma unroll
      for (int i = 0; i < kKeysPerThread; ++i) {
        const float prob = exp2_approx(s[r][i] - base);
        row_sum[r] += prob;
        st_shared_f32(s_p + ((lane_group + 32 * r) * Tr::kPLd + col + 8 * i) * 4, prob);
      }
    }
    __syncwarp();  // a row's probabilities were written by the 8 lanes that read them

    // O += P V over the tile's keys (keys past the end have P = 0 and zero-filled V).
#pragma unroll 4
    for (int key = 0; key < Tr::kBlockN; ++key) {
      const float p0 = ld_shared_f32(s_p + (lane_group * Tr::kPLd + key) * 4);
      const float p1 = ld_shared_f32(s_p + ((lane_group + 32) * Tr::kPLd + key) * 4);
#pragma unroll
      for (int j = 0; j < Tr::kColGroups; ++j) {
        const float4 vv = ld_shared_f4(s_v + (key * Tr::kLd + 4 * col + 32 * j) * 4);
        o[0][j][0] = fmaf(p0, vv.x, o[0][j][0]), o[0][j][1] = fmaf(p0, vv.y, o[0][j][1]);
        o[0][j][2] = fmaf(p0, vv.z, o[0][j][2]), o[0][j][3] = fmaf(p0, vv.w, o[0][j][3]);
        o[1][j][0] = fmaf(p1, vv.x, o[1][j][0]), o[1][j][1] = fmaf(p1, vv.y, o[1][j][1]);
        o[1][j][2] = fmaf(p1, vv.z, o[1][j][2]), o[1][j][3] = fmaf(p1, vv.w, o[1][j][3]);
      }
    }
  }

  float* out = static_cast<float*>(p.o);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 4);
    if (rows[r] >= p.seq_q) continue;
    // A row that saw no key has sum 0: zeros out, -inf logsumexp.
    const float inv_sum = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
    if (p.lse != nullptr && col == 0) {
      const float base = row_max[r] == -INFINITY ? 0.f : row_max[r];
      p.lse[seq.lse_offset + rows[r]] = row_sum[r] > 0.f ? (base + log2f(row_sum[r])) * kLn2 : -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < Tr::kColGroups; ++j) {
      const int c = 4 * col + 32 * j;
      if (c < p.head_dim)
        *reinterpret_cast<float4*>(out + seq.q_offset + static_cast<std::int64_t>(rows[r]) * seq.q_ld + c) =
            make_float4(o[r][j][0] * inv_sum, o[r][j][1] * inv_sum, o[r][j][2] * inv_sum, o[r][j][3] * inv_sum);
    }
  }
}

// kRagged: per-sequence lengths and packed layouts, compiled separately (see efficient_fwd_kernel).
template <class Tr, bool kRagged>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocksPerSm)
    efficient_fwd_fp32_kernel(const ForwardParams params) {
  const int m0 = (gridDim.x - 1 - blockIdx.x) * Tr::kBlockM;
  if constexpr (kRagged) {
    const SequenceView seq = sequence_view(params, blockIdx.z, blockIdx.y);
    if (m0 >= seq.q_len) return;
    ForwardParams p = params;
    p.seq_q = seq.q_len;
    p.seq_kv = seq.kv_len;
    p.mask = seq.mask;
    forward_block_fp32<Tr>(p, seq, m0);
  } else {
    forward_block_fp32<Tr>(params, dense_view(params, blockIdx.z, blockIdx.y), m0);
  }
}

}  // namespace attnprof::kernels::efficient
