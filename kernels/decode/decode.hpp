// Host launchers of the flash decode kernels: few query rows per sequence against a long K/V
// sequence, split over the keys (split-KV) when the grid would leave SMs idle. Plain C++:
// callable from g++-compiled code (lib/backends/flash.cpp); no CUDA device types appear here.
#pragma once

#include <cuda_runtime_api.h>

#include "core/mask_bounds.hpp"
#include "core/types.hpp"
#include "decode/decode_split.hpp"

namespace attnprof::kernels {

// One decode problem in the layouts of core/types.hpp (AttentionShape): q/o dense or packed
// (cu_seqlens_q set), k/v dense, packed (cu_seqlens_kv set) or paged (block_table set). The
// query rows of one sequence and one K/V head (group_size heads x q_len rows) form the M
// dimension of one block, so K and V are read once per K/V head.
struct DecodeParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, heads, seq_q] padded, or null
  const int* seq_lens_q = nullptr;     // [batch], null: every sequence has seq_q rows
  const int* seq_lens_kv = nullptr;    // [batch], null: every sequence has seq_kv keys
  const int* cu_seqlens_q = nullptr;   // [batch + 1] when q/o are packed
  const int* cu_seqlens_kv = nullptr;  // [batch + 1] when k/v are packed
  const int* block_table = nullptr;    // [batch, pages_per_sequence] when k/v are paged
  int batch = 0;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;
  int seq_q = 0;   // the longest sequence's query rows; group_size * seq_q <= kDecodeMaxRows
  int seq_kv = 0;  // the longest sequence's keys
  int page_size = 0;  // a multiple of kDecodeBlockKeys when paged
  int pages_per_sequence = 0;
  float scale = 0.f;
  float scale_log2 = 0.f;
  MaskBounds mask;  // causal and window bounds (moved per sequence with for_lengths)
  int splits = 1;   // > 1: partial results to the workspace, then the combine kernel
  float* partial_o = nullptr;    // [splits, batch, heads, seq_q, head_dim] fp32 when split
  float* partial_lse = nullptr;  // [splits, batch, heads, seq_q] fp32 when split
  // Blocks resident at once (SMs x blocks per SM); > 0 lets each block of an unsplit grid of
  // several waves warm L2 with the first keys of the block one wave after it (decode_kernel.cuh).
  int wave_blocks = 0;
};

// Query rows one block holds (the m16 tile of mma.sync): group_size * seq_q must not exceed it.
inline constexpr int kDecodeMaxRows = 16;
// Keys per tile; a paged cache's page_size must be a multiple.
inline constexpr int kDecodeBlockKeys = 16;
// Warps per block; each walks its own share of the key tiles.
inline constexpr int kDecodeWarps = 4;
// The most splits: bounds the workspace and the combine kernel's shared weights.
inline constexpr int kDecodeMaxSplits = 128;

// The split rule's inputs for these kernels: blocks = batch x K/V heads, the key tiles of the
// longest visible range, and the device's SMs and the kernel's blocks per SM.
inline DecodeSplitInputs decode_split_inputs(long long blocks, int key_tiles, int sm_count, int blocks_per_sm) {
  DecodeSplitInputs in;
  in.blocks = blocks;
  in.key_tiles = key_tiles;
  in.sm_count = sm_count;
  in.blocks_per_sm = blocks_per_sm;
  in.min_tiles_per_split = kDecodeWarps;
  in.warps = kDecodeWarps;
  in.max_splits = kDecodeMaxSplits;
  return in;
}

bool decode_has_kernel(DType dtype, int head_dim);

// Raises the dynamic shared-memory limit of the decode kernels of one instantiation and reports
// how many of its blocks one SM holds (for the split heuristic).
cudaError_t decode_prepare(DType dtype, int head_dim, int* blocks_per_sm);

// Floats the split workspace needs: partial_o then partial_lse.
inline long long decode_workspace_floats(const AttentionShape& s, int splits) {
  const long long rows = static_cast<long long>(splits) * s.batch * s.heads * s.seq_q;
  return rows * (s.head_dim + 1);
}

// Enqueues one kernel (splits == 1: flash_decode_kernel writes o) or two
// (flash_decode_splitkv_kernel, then flash_decode_combine_kernel); the caller checks the launch.
void decode_forward(const DecodeParams& params, DType dtype, int head_dim, cudaStream_t stream);

}  // namespace attnprof::kernels
