// The FlashAttention-2-style forward kernel, generic over FlashFwdTraits (kernel_traits.cuh).
//
// One block per (query tile of kBlockM rows, head, batch); each of the kWarps warps owns
// kWarpRows of those rows and needs no other warp's results (split-Q). K and V stream through
// shared memory in tiles of kBlockN keys, kStages deep, with cp.async. Per tile:
//   S = Q K^T          mma.sync m16n8k16, Q and K by ldmatrix from swizzled shared memory
//   mask               only on tiles that hold a tail key or cross an edge of the mask band
//                      (causal diagonal, window); tiles outside the band are never visited
//   online softmax     exp2 domain, scale*log2(e) folded into one FFMA, quad shuffles for the max
//   O += P V           P stays in registers (the C fragment of S is the A fragment of PV),
//                      V by ldmatrix.trans
// O is normalised by 1/l once at the end; the score matrix never leaves registers.
// Query head h reads K/V head h / group_size (GQA, MQA); a row that sees no key writes zeros
// and a logsumexp of -inf (log of an empty sum; FlashAttention writes +inf there).
// kVarlen (ragged and paged batches): each sequence has its own lengths and mask bounds
// (MaskBounds::for_lengths), q/o may be packed (rows through cu_seqlens_q), k/v packed or paged
// (a K/V tile's rows looked up per page in the block table); these per-block values live in a
// BlockSequence in shared memory, not in registers. The dense instantiations do not change.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cp_async.cuh"
#include "common/fast_math.cuh"
#include "common/mma_sm80.cuh"
#include "common/shared_memory.cuh"
#include "core/mask_bounds.hpp"
#include "core/types.hpp"
#include "flash/flash.hpp"
#include "flash/kernel_traits.cuh"

namespace attnprof::kernels::flash {

// ---------------------------------------------------------------------------------------------
// Register economy
//
// O (kMTiles x kOTiles x 4 floats) and S (kMTiles x kSTiles x 4) fill most of the 255 registers,
// and ptxas spends the rest on loads in flight; a few more live values and it spills. So:
// - the per-lane running row sums live in shared memory (RowSums), not in registers;
// - values derived from %tid / %ctaid are recomputed where they are used, from reads the
//   compiler may not hoist (ptxas may still merge the reads themselves: one register each);
// - P V waits, through a data dependency, until all of P is packed (see attend_tile).
// Any change here must be re-checked with -Xptxas -v: zero spills is a requirement.

// Special registers read through volatile asm, so that what is derived from them (copy and
// ldmatrix addresses, row indices) is not hoisted out of the main loop into live registers.
__device__ __forceinline__ int fresh_thread_index() {
  int value;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(value));
  return value;
}
__device__ __forceinline__ int fresh_block_index_x() {
  int value;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(value));
  return value;
}
__device__ __forceinline__ int fresh_block_index_y() {
  int value;
  asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(value));
  return value;
}
__device__ __forceinline__ int fresh_block_index_z() {
  int value;
  asm volatile("mov.u32 %0, %%ctaid.z;\n" : "=r"(value));
  return value;
}

// Shared-memory layout: Q tile | K stages | V stages | row sums.
template <typename Traits>
struct SmemLayout {
  static constexpr int kQ = 0;
  static constexpr int kK = Traits::kQBytes;
  static constexpr int kV = kK + Traits::kStages * Traits::kKVTileBytes;
  static constexpr int kRowSums = Traits::kRowSumsOffset;
  static constexpr int kKVHead = Traits::kKVHeadOffset;
};

// Where this block works: its first query row (tiles are taken in reverse so that causal's
// longest tiles start first and the short ones fill the tail), its (batch, head) and the
// (batch, K/V head) that head reads.
__device__ __forceinline__ int block_first_row(int block_rows) {
  return (static_cast<int>(gridDim.x) - 1 - fresh_block_index_x()) * block_rows;
}
__device__ __forceinline__ int64_t block_head(const FlashParams& params) {
  return static_cast<int64_t>(fresh_block_index_z()) * params.heads + fresh_block_index_y();
}
__device__ __forceinline__ int64_t block_kv_head(const FlashParams& params) {
  return static_cast<int64_t>(fresh_block_index_z()) * params.heads_kv + fresh_block_index_y() / params.group_size;
}

// The per-block values of a ragged/paged (kVarlen) block, written once by thread 0 and read
// where needed, so they take no registers through the main loop. kv_base + token * kv_stride is
// the element offset of a key row (token: the key, or its slot page * page_size + key % page_size
// in a paged cache); q_row0 + r * q_stride is row m0 + r of the block's head in q and o.
struct BlockSequence {
  int64_t kv_base;
  int64_t q_row0;
  MaskBounds mask;  // moved to this sequence's lengths
  int q_len;
  int kv_len;
  int kv_stride;
  int q_stride;
};

template <typename Traits>
__device__ __forceinline__ const BlockSequence& block_sequence(const unsigned char* smem) {
  return *reinterpret_cast<const BlockSequence*>(smem + SmemLayout<Traits>::kKVHead);
}

// This lane's running sums of its (kMTiles x 2) rows, one float each, [row slot][thread] so a
// warp's accesses are conflict-free. Only the owning thread touches its slots: no barrier needed.
template <typename Traits>
__device__ __forceinline__ float& row_sum_slot(unsigned char* smem, int mi, int h) {
  return reinterpret_cast<float*>(smem + SmemLayout<Traits>::kRowSums)[(mi * 2 + h) * Traits::kThreads +
                                                                       fresh_thread_index()];
}

// One thread's share of copying a [rows, head_dim] tile: 16-byte chunk `chunk` of rows
// row, row + kRowsPerPass, ... The rows step by a multiple of 8, so the swizzled chunk is fixed.
template <typename Traits>
struct TileCopy {
  static constexpr int kRowsPerPass = Traits::kThreads / Traits::kChunksPerRow;
  uint32_t smem;  // byte offset inside the tile of the first copy
  int row;        // tile row of the first copy
  int elem;       // element offset inside the tile of the first copy

  __device__ __forceinline__ static TileCopy of_thread(int tid) {
    const int row = tid / Traits::kChunksPerRow;
    const int chunk = tid % Traits::kChunksPerRow;
    return {static_cast<uint32_t>(row * Traits::kRowBytes + ((chunk ^ (row & 7)) << 4)), row,
            row * Traits::kHeadDim + chunk * 8};
  }

  // Copies rows [0, kRows) of the tile starting at `tile` into the shared tile at `dst`,
  // zero-filling rows >= valid_rows. Every tile but the last is whole and takes the branch
  // with no per-row test, where the copies' addresses differ by constants only.
  template <int kRows>
  __device__ __forceinline__ void copy(uint32_t dst, const typename Traits::Element* tile, int valid_rows) const {
    constexpr int kPasses = kRows / kRowsPerPass;
    constexpr int kPassElems = kRowsPerPass * Traits::kHeadDim;
    constexpr int kPassBytes = kRowsPerPass * Traits::kRowBytes;
    const auto* first = tile + elem;
    dst += smem;
    if (valid_rows >= kRows) {
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) cp_async_16(dst + pass * kPassBytes, first + pass * kPassElems);
    } else {
      const int rows_left = valid_rows - row;
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const bool valid = pass * kRowsPerPass < rows_left;
        // An invalid row reads nothing; point it at the tile's first row, which always exists.
        cp_async_16_zfill(dst + pass * kPassBytes, valid ? first + pass * kPassElems : tile, valid);
      }
    }
  }

  // As copy(), rows `stride` elements apart (packed q/o, packed K/V); with a block table, key
  // `first_key + row` lives in page table[key / page_size] (a paged K/V cache).
  template <int kRows>
  __device__ __forceinline__ void copy_rows(uint32_t dst, const typename Traits::Element* base, int64_t stride,
                                            int valid_rows, int first_key, const int* table, int page_size) const {
    constexpr int kPasses = kRows / kRowsPerPass;
    constexpr int kPassBytes = kRowsPerPass * Traits::kRowBytes;
    const int chunk_elem = elem - row * Traits::kHeadDim;
    dst += smem;
    // Not unrolled: unrolled, every pass's 64-bit address is live at once beside O, and spills.
#pragma unroll 1
    for (int pass = 0; pass < kPasses; ++pass) {
      const int r = row + pass * kRowsPerPass;
      const bool valid = r < valid_rows;
      int64_t token = first_key + r;
      if (table != nullptr && valid)
        token = static_cast<int64_t>(table[(first_key + r) / page_size]) * page_size + (first_key + r) % page_size;
      cp_async_16_zfill(dst + pass * kPassBytes, valid ? base + token * stride + chunk_elem : base, valid);
    }
  }
};

// Issues this thread's copies of K/V tile n (keys n*kBlockN ...) into stage n % kStages;
// kv_head is the element offset of this block's (batch, head) in k and v.
template <typename Traits>
__device__ __forceinline__ void copy_kv_tile(const FlashParams& params, uint32_t smem, int64_t kv_head, int n) {
  using Element = typename Traits::Element;
  const TileCopy<Traits> plan = TileCopy<Traits>::of_thread(fresh_thread_index());
  const int64_t offset = kv_head + static_cast<int64_t>(n) * Traits::kBlockN * Traits::kHeadDim;
  const int valid_rows = params.seq_kv - n * Traits::kBlockN;
  const uint32_t stage = smem + (n % Traits::kStages) * Traits::kKVTileBytes;
  plan.template copy<Traits::kBlockN>(stage + SmemLayout<Traits>::kK, static_cast<const Element*>(params.k) + offset,
                                      valid_rows);
  plan.template copy<Traits::kBlockN>(stage + SmemLayout<Traits>::kV, static_cast<const Element*>(params.v) + offset,
                                      valid_rows);
}

// kVarlen's copy of K/V tile n: key rows through the block's BlockSequence values (passed in,
// since the prologue runs before the barrier that publishes them) and, paged, the block table.
template <typename Traits>
__device__ __forceinline__ void copy_kv_tile_varlen(const FlashParams& params, uint32_t smem, int64_t kv_base,
                                                    int kv_stride, int kv_len, int n) {
  using Element = typename Traits::Element;
  const TileCopy<Traits> plan = TileCopy<Traits>::of_thread(fresh_thread_index());
  const int key0 = n * Traits::kBlockN;
  const int* table = params.block_table != nullptr
                         ? params.block_table + static_cast<int64_t>(fresh_block_index_z()) * params.pages_per_sequence
                         : nullptr;
  // Dense and packed: the tile's first row folded into the base; paged: every row looked up.
  const int64_t base = table != nullptr ? kv_base : kv_base + static_cast<int64_t>(key0) * kv_stride;
  const int first_key = table != nullptr ? key0 : 0;
  const uint32_t stage = smem + (n % Traits::kStages) * Traits::kKVTileBytes;
  plan.template copy_rows<Traits::kBlockN>(stage + SmemLayout<Traits>::kK, static_cast<const Element*>(params.k) + base,
                                           kv_stride, kv_len - key0, first_key, table, params.page_size);
  plan.template copy_rows<Traits::kBlockN>(stage + SmemLayout<Traits>::kV, static_cast<const Element*>(params.v) + base,
                                           kv_stride, kv_len - key0, first_key, table, params.page_size);
}

// Shared addresses of the rows a lane points ldmatrix at, with the lane's swizzle term in bits
// 4..6. Dynamic shared memory starts 128-byte aligned and every tile is a multiple of 128
// bytes, so bits 4..6 of a row's address are otherwise zero. Row r of a tile keeps its 16-byte
// chunk c at chunk c ^ (r % 8). Every ldmatrix row a lane addresses has r % 8 == lane % 8 and
// wants chunk 2*step + (one lane bit), so the physical chunk is (2*step) ^ x with a per-lane x:
// x is stored here once and chunk_address() XORs in 2*step.
template <typename Traits>
struct FragmentRows {
  uint32_t q;  // Q, A operand: lanes 0-15 rows 0-15 at chunk 2*step, lanes 16-31 the same rows at +1
  uint32_t k;  // K (stage 0), B operand for two n8 tiles: lanes 0-7 keys 0-7 at chunk 2*step,
               // 8-15 keys 0-7 at +1, 16-23 keys 8-15 at 2*step, 24-31 keys 8-15 at +1
  uint32_t v;  // V (stage 0), B operand via .trans: lanes 0-15 keys 0-15 at chunk 2*step, 16-31 at +1

  __device__ __forceinline__ static FragmentRows of_thread(uint32_t smem, int tid) {
    constexpr int kRowBytes = Traits::kRowBytes;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const uint32_t qv_xor = static_cast<uint32_t>((lane >> 4) ^ (lane & 7));
    const uint32_t k_xor = static_cast<uint32_t>(((lane >> 3) & 1) ^ (lane & 7));
    return {smem + SmemLayout<Traits>::kQ + (warp * Traits::kWarpRows + (lane & 15)) * kRowBytes + (qv_xor << 4),
            smem + SmemLayout<Traits>::kK + (((lane >> 4) << 3) + (lane & 7)) * kRowBytes + (k_xor << 4),
            smem + SmemLayout<Traits>::kV + (lane & 15) * kRowBytes + (qv_xor << 4)};
  }
};

// Address of 16-byte chunk `chunk` (compile-time after unrolling) of the row a FragmentRows
// address points at: the XOR flips only the swizzled chunk bits, the high chunk bit is added.
__device__ __forceinline__ uint32_t chunk_address(uint32_t row, int chunk) {
  return (row ^ static_cast<uint32_t>((chunk & 7) << 4)) + static_cast<uint32_t>((chunk & ~7) << 4);
}

template <typename Traits>
struct Accumulators {
  float o[Traits::kMTiles][Traits::kOTiles][4];  // unnormalised output, m16n8 C fragments
  float row_max[Traits::kMTiles][2];             // raw (unscaled) running max of rows g and g+8
};

// ---------------------------------------------------------------------------------------------
// One K/V tile: S = Q K^T, mask, online softmax, O += P V.

// kBand: the kernel's rows see a band of keys (MaskBounds); kMaskTile: this tile needs element
// masks (it crosses an edge of the band or holds keys past seq_kv).
template <typename Traits, bool kBand, bool kMaskTile, bool kVarlen = false>
__device__ __forceinline__ void attend_tile(const FlashParams& params, unsigned char* smem, int n, int n_end,
                                            Accumulators<Traits>& acc) {
  using Element = typename Traits::Element;
  constexpr int kMTiles = Traits::kMTiles;
  constexpr int kSTiles = Traits::kSTiles;
  constexpr int kOTiles = Traits::kOTiles;
  constexpr int kRowBytes = Traits::kRowBytes;
  const uint32_t smem_base = shared_address(smem);

  // Tile n's copies by this thread have landed; the barrier publishes every thread's copies and
  // guarantees every warp has finished tile n-1, whose stage the prefetch below overwrites.
  cp_async_wait<Traits::kStages - 2>();
  __syncthreads();
  if (n + Traits::kStages - 1 < n_end) {
    // Read back from shared memory rather than held in registers through the loop.
    if constexpr (kVarlen) {
      const BlockSequence& seq = block_sequence<Traits>(smem);
      copy_kv_tile_varlen<Traits>(params, smem_base, seq.kv_base, seq.kv_stride, seq.kv_len, n + Traits::kStages - 1);
    } else {
      const int64_t kv_head = *reinterpret_cast<const int64_t*>(smem + SmemLayout<Traits>::kKVHead);
      copy_kv_tile<Traits>(params, smem_base, kv_head, n + Traits::kStages - 1);
    }
  }
  cp_async_commit();  // committed even when empty, so group i always holds tile i

  const FragmentRows<Traits> rows = FragmentRows<Traits>::of_thread(smem_base, fresh_thread_index());
  const uint32_t stage_offset = (n % Traits::kStages) * Traits::kKVTileBytes;
  const uint32_t k_row = rows.k + stage_offset;
  const uint32_t v_row = rows.v + stage_offset;

  // S = Q K^T. A (Q, 16x16): matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15) from lanes 0-7,
  // 8-15, 16-23, 24-31. B (K^T): one x4 covers keys 16np..16np+15 (two n8 tiles) x k16.
  float s[kMTiles][kSTiles][4];
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mi][nt][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < Traits::kHeadDim / 16; ++kk) {
    uint32_t a[kMTiles][4];
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi) ldmatrix_x4(a[mi], chunk_address(rows.q, 2 * kk) + mi * 16 * kRowBytes);
#pragma unroll
    for (int np = 0; np < kSTiles / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, chunk_address(k_row, 2 * kk) + np * 16 * kRowBytes);
#pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi) {
        mma_16816<Element>(s[mi][2 * np], a[mi], b[0], b[1]);
        mma_16816<Element>(s[mi][2 * np + 1], a[mi], b[2], b[3]);
      }
    }
  }

  // Element (mi, nt, 2h + e) is query row first_row + 16mi + 8h and key n*kBlockN + 8nt +
  // 2(lane%4) + e, where first_row is row lane/4 of the warp's rows.
  if constexpr (kMaskTile) {
    const int tid = fresh_thread_index();
    const int first_row = block_first_row(Traits::kBlockM) + (tid >> 5) * Traits::kWarpRows + ((tid & 31) >> 2);
    const int key0 = n * Traits::kBlockN + 2 * (tid & 3);
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = first_row + 16 * mi + 8 * h;
        // Row `row` sees keys [first, last]: visible_keys(), with last <= seq_kv - 1.
        const MaskBounds& mask = kVarlen ? block_sequence<Traits>(smem).mask : params.mask;
        const int seq_kv = kVarlen ? block_sequence<Traits>(smem).kv_len : params.seq_kv;
        const int first = kBand ? mask.first_key(row) : 0;
        const int last = kBand ? mask.last_key(row, seq_kv) : seq_kv - 1;
#pragma unroll
        for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key0 + 8 * nt + e;
            if (kBand ? (key < first || key > last) : key > last) s[mi][nt][2 * h + e] = -INFINITY;
          }
      }
  }

  // Online softmax. The four lanes of a quad share a row: max over the quad by two shuffles;
  // the sum stays per lane until the end (rescaling is linear).
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float row_max = acc.row_max[mi][h];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) row_max = fmaxf(row_max, fmaxf(s[mi][nt][2 * h], s[mi][nt][2 * h + 1]));
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 1));
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, 2));
      // A row with every key so far masked keeps max -inf; subtracting 0 then gives exp2(-inf) = 0.
      const float max_scaled = row_max == -INFINITY ? 0.f : row_max * params.scale_log2;
      const float rescale = exp2_approx(acc.row_max[mi][h] * params.scale_log2 - max_scaled);
      acc.row_max[mi][h] = row_max;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = exp2_approx(fmaf(s[mi][nt][2 * h + e], params.scale_log2, -max_scaled));
          s[mi][nt][2 * h + e] = p;
          sum += p;
        }
      float& row_sum = row_sum_slot<Traits>(smem, mi, h);
      row_sum = row_sum * rescale + sum;
#pragma unroll
      for (int dt = 0; dt < kOTiles; ++dt) {
        acc.o[mi][dt][2 * h] *= rescale;
        acc.o[mi][dt][2 * h + 1] *= rescale;
      }
    }

  // P as A fragments: k16 step kk spans S tiles 2kk (a0..a3) and 2kk+1 (a4..a7).
  uint32_t p[kMTiles][kSTiles / 2][4];
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
    for (int kk = 0; kk < kSTiles / 2; ++kk) {
      p[mi][kk][0] = pack2<Element>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
      p[mi][kk][1] = pack2<Element>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
      p[mi][kk][2] = pack2<Element>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
      p[mi][kk][3] = pack2<Element>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
    }

  // Keeps ptxas from starting P V (and its V loads) before the last P is packed: interleaving
  // them keeps unconverted scores live beside O, and spills. A packed pair of probabilities in
  // [0, 1] is never all ones, so v_dep is always v_row.
  const uint32_t v_dep = p[kMTiles - 1][kSTiles / 2 - 1][3] == 0xffffffffu ? 0u : v_row;

  // O += P V. B (V, k = key, n = head-dim column) via ldmatrix.trans of row-major V: one x4
  // covers keys 16kk..16kk+15 (matrices 0/1 and 2/3) x columns 16dp..16dp+15 (two n8 tiles).
#pragma unroll
  for (int kk = 0; kk < kSTiles / 2; ++kk)
#pragma unroll
    for (int dp = 0; dp < kOTiles / 2; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, chunk_address(v_dep, 2 * dp) + kk * 16 * kRowBytes);
#pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi) {
        mma_16816<Element>(acc.o[mi][2 * dp], p[mi][kk], b[0], b[1]);
        mma_16816<Element>(acc.o[mi][2 * dp + 1], p[mi][kk], b[2], b[3]);
      }
    }
}

// ---------------------------------------------------------------------------------------------
// Epilogue: O / l to o through shared memory, logsumexp to lse.

template <typename Traits, bool kVarlen = false>
__device__ __forceinline__ void write_output(const FlashParams& params, Accumulators<Traits>& acc,
                                             unsigned char* smem) {
  using Element = typename Traits::Element;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kRowBytes = Traits::kRowBytes;
  constexpr int kChunksPerRow = Traits::kChunksPerRow;
  constexpr int kWarpRows = Traits::kWarpRows;
  const int tid = fresh_thread_index();
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int m0 = block_first_row(Traits::kBlockM);
  const int64_t head = block_head(params);
  // lse is padded [batch, heads, seq_q] whatever the layout; rows past the sequence's own
  // q_len are not written (a packed o has no such rows).
  const int seq_q = kVarlen ? block_sequence<Traits>(smem).q_len : params.seq_q;

  // A row that saw no key has max -inf and sum 0: zeros out, -inf logsumexp.
  float* lse = params.lse != nullptr ? params.lse + head * params.seq_q : nullptr;
#pragma unroll
  for (int mi = 0; mi < Traits::kMTiles; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum_slot<Traits>(smem, mi, h);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inverse = sum > 0.f ? 1.f / sum : 0.f;
      const int row = m0 + warp * kWarpRows + 16 * mi + 8 * h + (lane >> 2);
      if (lse != nullptr && (lane & 3) == 0 && row < seq_q)
        lse[row] = sum > 0.f ? acc.row_max[mi][h] * params.scale + logf(sum) : -INFINITY;
#pragma unroll
      for (int dt = 0; dt < Traits::kOTiles; ++dt) {
        acc.o[mi][dt][2 * h] *= inverse;
        acc.o[mi][dt][2 * h + 1] *= inverse;
      }
    }

  // O goes out through this warp's own rows of the Q tile (no other warp ever reads them), so
  // that global stores are 16-byte and coalesced. Same swizzle as every tile.
  __syncwarp();
#pragma unroll
  for (int mi = 0; mi < Traits::kMTiles; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int local_row = warp * kWarpRows + 16 * mi + 8 * h + (lane >> 2);
#pragma unroll
      for (int dt = 0; dt < Traits::kOTiles; ++dt) {
        const int offset =
            SmemLayout<Traits>::kQ + local_row * kRowBytes + ((dt ^ (local_row & 7)) << 4) + 4 * (lane & 3);
        *reinterpret_cast<uint32_t*>(smem + offset) = pack2<Element>(acc.o[mi][dt][2 * h], acc.o[mi][dt][2 * h + 1]);
      }
    }
  __syncwarp();
  const int64_t o_stride = kVarlen ? block_sequence<Traits>(smem).q_stride : kHeadDim;
  Element* o_tile = static_cast<Element*>(params.o) +
                    (kVarlen ? block_sequence<Traits>(smem).q_row0 : (head * seq_q + m0) * kHeadDim);
#pragma unroll
  for (int i = 0; i < kWarpRows * kChunksPerRow / 32; ++i) {
    const int index = i * 32 + lane;
    const int tile_row = warp * kWarpRows + index / kChunksPerRow;
    const int chunk = index % kChunksPerRow;
    if (m0 + tile_row < seq_q) {
      const uint4 value = *reinterpret_cast<const uint4*>(smem + SmemLayout<Traits>::kQ + tile_row * kRowBytes +
                                                          ((chunk ^ (tile_row & 7)) << 4));
      *reinterpret_cast<uint4*>(o_tile + tile_row * o_stride + chunk * 8) = value;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The kernel

// kMasked: rows see a band of keys (params.mask: causal and/or a window, either alignment).
// kVarlen: a ragged or paged batch (always instantiated with kMasked: the band is per sequence).
template <typename Traits, bool kMasked, bool kVarlen = false>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    flash_fwd_kernel(const __grid_constant__ FlashParams params) {
  static_assert(!kVarlen || kMasked, "the varlen kernel evaluates each sequence's band");
  static_assert(sizeof(BlockSequence) <= Traits::kSmemBytes - Traits::kKVHeadOffset);
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // cp.async, bf16 mma.sync and ldmatrix need sm_80; fail loudly, never silently
#else
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = shared_address(smem);
  const int tid = static_cast<int>(threadIdx.x);
  const int m0 = block_first_row(kBlockM);
  int seq_q = params.seq_q;
  int seq_kv = params.seq_kv;
  MaskBounds mask = params.mask;
  int64_t kv_base = 0;
  int kv_stride = Traits::kHeadDim;
  if constexpr (kVarlen) {
    // This block's sequence: its lengths, its band, where its rows live.
    const int b = fresh_block_index_z();
    const int h = fresh_block_index_y();
    const int kv_h = h / params.group_size;
    if (params.seq_lens_q != nullptr) seq_q = params.seq_lens_q[b];
    if (params.seq_lens_kv != nullptr) seq_kv = params.seq_lens_kv[b];
    if (m0 >= seq_q) return;  // a shorter sequence has no rows in this query tile
    mask = params.mask.for_lengths(seq_q, seq_kv);
    const int64_t kv_row = static_cast<int64_t>(params.heads_kv) * Traits::kHeadDim;
    if (params.block_table != nullptr) {
      kv_base = static_cast<int64_t>(kv_h) * Traits::kHeadDim;
      kv_stride = static_cast<int>(kv_row);
    } else if (params.cu_seqlens_kv != nullptr) {
      kv_base = static_cast<int64_t>(params.cu_seqlens_kv[b]) * kv_row + static_cast<int64_t>(kv_h) * Traits::kHeadDim;
      kv_stride = static_cast<int>(kv_row);
    } else {
      kv_base = (static_cast<int64_t>(b) * params.heads_kv + kv_h) * params.seq_kv * Traits::kHeadDim;
    }
    BlockSequence seq;
    seq.kv_base = kv_base;
    seq.kv_stride = kv_stride;
    seq.kv_len = seq_kv;
    seq.q_len = seq_q;
    seq.mask = mask;
    if (params.cu_seqlens_q != nullptr) {
      seq.q_stride = params.heads * Traits::kHeadDim;
      seq.q_row0 = ((static_cast<int64_t>(params.cu_seqlens_q[b]) + m0) * params.heads + h) * Traits::kHeadDim;
    } else {
      seq.q_stride = Traits::kHeadDim;
      seq.q_row0 = ((static_cast<int64_t>(b) * params.heads + h) * params.seq_q + m0) * Traits::kHeadDim;
    }
    if (tid == 0) *reinterpret_cast<BlockSequence*>(smem + SmemLayout<Traits>::kKVHead) = seq;
    __syncthreads();  // published before any read, also for a block that visits no tile
  }

  // The K/V tiles the block visits (core/mask_bounds.hpp): [begin, end), of which
  // [unmasked_begin, unmasked_end) hold only keys every row of the block sees; the others need
  // element masks. Without a band: every tile, the last one masked when it is partial.
  KeyTiles tiles;
  if constexpr (kMasked) {
    tiles = key_tiles(mask, seq_q, seq_kv, m0, kBlockM, kBlockN);
  } else {
    tiles.end = (seq_kv + kBlockN - 1) / kBlockN;
    tiles.unmasked_end = seq_kv / kBlockN;
  }

  // Prologue: Q with K/V tile `begin` in one group, the next kStages-2 tiles in groups of their
  // own. A block whose rows see no key loads nothing and writes zeros.
  if constexpr (kVarlen) {
    if (tiles.begin < tiles.end) {
      const BlockSequence& seq = block_sequence<Traits>(smem);
      TileCopy<Traits>::of_thread(tid).template copy_rows<kBlockM>(
          smem_base + SmemLayout<Traits>::kQ, static_cast<const Element*>(params.q) + seq.q_row0, seq.q_stride,
          seq_q - m0, 0, nullptr, 1);
    }
#pragma unroll
    for (int n = 0; n < Traits::kStages - 1; ++n) {
      if (tiles.begin + n < tiles.end)
        copy_kv_tile_varlen<Traits>(params, smem_base, kv_base, kv_stride, seq_kv, tiles.begin + n);
      cp_async_commit();
    }
  } else {
    const int64_t kv_head = block_kv_head(params) * seq_kv * Traits::kHeadDim;
    // Published to the other threads by the first tile's barrier.
    if (tid == 0) *reinterpret_cast<int64_t*>(smem + SmemLayout<Traits>::kKVHead) = kv_head;
    if (tiles.begin < tiles.end) {
      const Element* q_tile =
          static_cast<const Element*>(params.q) + (block_head(params) * seq_q + m0) * Traits::kHeadDim;
      TileCopy<Traits>::of_thread(tid).template copy<kBlockM>(smem_base + SmemLayout<Traits>::kQ, q_tile, seq_q - m0);
    }
#pragma unroll
    for (int n = 0; n < Traits::kStages - 1; ++n) {
      if (tiles.begin + n < tiles.end) copy_kv_tile<Traits>(params, smem_base, kv_head, tiles.begin + n);
      cp_async_commit();
    }
  }

  Accumulators<Traits> acc;
#pragma unroll
  for (int mi = 0; mi < Traits::kMTiles; ++mi) {
#pragma unroll
    for (int dt = 0; dt < Traits::kOTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.o[mi][dt][e] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      acc.row_max[mi][h] = -INFINITY;
      row_sum_slot<Traits>(smem, mi, h) = 0.f;
    }
  }

  int n = tiles.begin;
  if constexpr (kMasked) {
    // Left edge of a window first (empty when the band has none), whole tiles, then the right
    // edge: the diagonal, a window's right bound, the last keys.
    for (; n < tiles.unmasked_begin; ++n) attend_tile<Traits, true, true, kVarlen>(params, smem, n, tiles.end, acc);
    for (; n < tiles.unmasked_end; ++n) attend_tile<Traits, true, false, kVarlen>(params, smem, n, tiles.end, acc);
    for (; n < tiles.end; ++n) attend_tile<Traits, true, true, kVarlen>(params, smem, n, tiles.end, acc);
  } else {
    for (; n < tiles.unmasked_end; ++n) attend_tile<Traits, false, false>(params, smem, n, tiles.end, acc);
    for (; n < tiles.end; ++n) attend_tile<Traits, false, true>(params, smem, n, tiles.end, acc);
  }

  write_output<Traits, kVarlen>(params, acc, smem);
#endif
}

}  // namespace attnprof::kernels::flash
