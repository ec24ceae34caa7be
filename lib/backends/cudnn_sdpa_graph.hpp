// The two cuDNN graphs of attention forward, Q and O [batch, heads, seq_q, head_dim], K and V
// [batch, heads_kv, seq_kv, head_dim] (query head h reads K/V head h / (heads / heads_kv)):
// - native: cuDNN 9.13.1+'s single SDPA_FWD operation (Q, K, V, O, by-value scale; no stats);
//   it takes no mask before 9.21, so it serves problems without one;
// - composite: the "flash fused attention fprop" pattern of matmul, pointwise and reduction
//   operations that cuDNN 9 fuses into one kernel; used for every mask (causal, bottom-right,
//   windows), and where the native operation is missing or rejected.
// A ragged batch or a paged K/V cache (sdpa_per_sequence) always takes the composite graph with a
// padding mask: per-sequence lengths as int32 [batch, 1, 1, 1] tensors cap both matmuls and mask
// the padded rows and keys; packed Q/O and K/V carry ragged offset tensors (element offsets of
// each sequence, [batch + 1, 1, 1, 1]); a paged cache is gathered by PAGED_CACHE_LOAD operations
// through the block table, seen as a [batch, 1, pages_per_sequence, 1] tensor over the same memory.
// A bottom-right diagonal follows each sequence's own lengths (row + kv_len(b) - q_len(b)).
// What each cuDNN version takes (sdpa_unsupported) follows cudnn-frontend's SDPA support surface
// (include/cudnn_frontend/node/sdpa_support_surface.h and its history), the checks cuDNN's own
// front end makes before it hands these graphs to the library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cudnn_graph.hpp"
#include "core/types.hpp"

namespace attnprof {

// The problem's mask as cuDNN's fused attention describes it (cudnn-frontend's diagonal band):
// query row i keeps key j when
//   j <= i + shift + right_bound   (when right_bound is set; causal is right_bound 0)
//   j >  i + shift - left_bound    (when left_bound is set: FlashAttention's window left + 1)
// with shift = seq_kv - seq_q when bottom_right, else 0. Built from mask_bounds(), so it keeps
// exactly the keys visible_keys() names. A bound that masks no key of the problem is dropped,
// and a square bottom-right band is the top-left one.
struct SdpaBand {
  std::optional<int> right_bound;
  std::optional<int> left_bound;
  bool bottom_right = false;
  int shift = 0;

  bool masked() const { return right_bound.has_value() || left_bound.has_value(); }
  bool keeps(int row, int key) const {
    const long diagonal = static_cast<long>(row) + shift;
    return (!right_bound || key <= diagonal + *right_bound) && (!left_bound || key > diagonal - *left_bound);
  }
};

SdpaBand sdpa_band(const AttentionProblem& problem);

// True when the graph needs per-sequence lengths: a ragged batch or a paged K/V cache.
bool sdpa_per_sequence(const AttentionProblem& problem);

// Ragged offsets of a packed tensor [total, heads, head_dim]: batch + 1 element offsets,
// cumulative length x heads x head_dim (what cuDNN's ragged offset tensors hold).
std::vector<std::int64_t> sdpa_ragged_offsets(const std::vector<int>& lens, int heads, int head_dim);

// Why the cuDNN of version `cudnn_version` (cudnnGetVersion(), e.g. 91400) cannot run the
// problem through these graphs, naming the version that would be needed where one would do;
// nullopt when it can (the fusion engine may still decline at plan time).
// `check_band_surface` false lets through the bands cudnn-frontend refuses for every version
// (seq_q > seq_kv with a bottom-right or left-bounded band, rows that see no key), for a probe
// of what the library itself does with them; the backend always checks them.
Unsupported sdpa_unsupported(const AttentionProblem& problem, std::size_t cudnn_version,
                             bool check_band_surface = true);

enum class SdpaGraphKind { native_op, composite };

struct SdpaGraphVariant {
  SdpaGraphKind kind = SdpaGraphKind::composite;
  // Math precision of the GEN_INDEX operations of the mask (composite only). cuDNN-frontend used
  // INT32 up to 1.1x and lets it default to the graph's FLOAT compute type since; both are tried.
  cudnnDataType_t gen_index_compute = CUDNN_DATA_INT32;
  // Packed K/V read as a paged cache of one-token pages (PAGED_CACHE_LOAD through a
  // [batch, 1, seq_kv, 1] table of token rows, sdpa_token_page_table) instead of ragged offsets.
  bool packed_kv_as_pages = false;
};

// The page table that reads packed K/V [total_kv, heads_kv, head_dim] as one-token pages: row
// b holds cu_kv[b] + j for j < kv_len(b), and a valid row (the sequence's last, or 0) past it.
std::vector<std::int32_t> sdpa_token_page_table(const AttentionShape& shape);

// Whether packed K/V should be read as one-token pages first: for decode (seq_q up to 16), where
// on an NVIDIA H200 (cuDNN 9.14, 2026-12-03) the ragged-offset graph ran 1.6-16x slower
// (8x32/8x1x32768x128, ragged lengths: 584 us against 241 us; 1x32/8x1x131072x128: 2261 us
// against 144 us) and the page view matched dense K/V. Prefill keeps the ragged offsets (cuDNN's THD path; not measured).
bool sdpa_prefers_token_pages(const AttentionProblem& problem);

// "native SDPA_FWD op" / "composite pattern graph (bottom-right band [left 18, right 0], GEN_INDEX math int32)".
std::string describe(const SdpaGraphVariant& variant, const AttentionProblem& problem);

// Unique ids of the tensors bound at execution; by-value constants of the mask use ids from
// 10 on, intermediates from 100 on.
namespace sdpa_uid {
inline constexpr std::int64_t q = 1, k = 2, v = 3, o = 4, scale = 5, first_constant = 10;
// Per-sequence inputs (device int32): lengths, the block table, ragged offsets of Q, K, V, O.
inline constexpr std::int64_t seq_len_q = 6, seq_len_kv = 7, page_table = 8;
inline constexpr std::int64_t ragged_q = 40, ragged_k = 41, ragged_v = 42, ragged_o = 43;
// The backward's: the forward's logsumexp ("stats", [batch, heads, seq_q, 1] fp32, written by a
// backward problem's forward), dO, the gradients, and two fp32 buffers the graph keeps in memory
// (cuDNN-frontend places them in its workspace): D = rowsum(dO o O) and the dQ accumulator.
inline constexpr std::int64_t stats = 30, d_o = 31, dq = 32, dk = 33, dv = 34, softmax_sum = 35, dq_accum = 36;
}

// The oldest cuDNN the backward graph here is built for: from 9.6.0 the library zeroes the fp32
// dQ accumulator itself (before, the caller had to), 9.10.0 and 9.10.1 have known backward bugs
// (cudnn-frontend refuses them), and 9.10.2 needs no second padding select after the stats.
inline constexpr std::size_t kSdpaBackwardMinVersion = 91002;

// Versions of the per-sequence features (cudnn-frontend's support surface and release notes):
// paged caches (PAGED_CACHE_LOAD) from 9.5.0; a paged cache with packed (ragged) queries from 9.7.0;
// a paged cache with head_dim above 128 from 9.10.0; ragged offsets before 9.18.1 only on Hopper
// and newer (checked in prepare(), which knows the device).
inline constexpr std::size_t kPagedCacheMinVersion = 90500;
inline constexpr std::size_t kPagedRaggedMinVersion = 90700;
inline constexpr std::size_t kPagedLargeHeadMinVersion = 91000;
inline constexpr std::size_t kRaggedBeforeHopperMinVersion = 91801;

// The first cuDNN release with CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR usable for fp16/bf16
// (cuDNN-frontend gates its "unified" SDPA node on this version).
inline constexpr std::size_t kNativeSdpaMinVersion = 91301;

// The variants worth trying for a problem on a library, best first.
// `packed_kv_as_pages`: offer the one-token-page view of packed K/V first (where the version has
// paged caches), with the ragged-offset graph after it.
std::vector<SdpaGraphVariant> sdpa_graph_variants(const AttentionProblem& problem, std::size_t cudnn_version,
                                                  bool packed_kv_as_pages = false);

// A by-value scalar of the graph (the mask's -inf, diagonal shifts and window bounds): the
// variant pack points at its host value at execution.
struct ByValueScalar {
  std::int64_t uid = 0;
  cudnnDataType_t data_type = CUDNN_DATA_FLOAT;  // CUDNN_DATA_FLOAT or CUDNN_DATA_INT32
  float as_float = 0.f;
  std::int32_t as_int32 = 0;

  void* data() { return data_type == CUDNN_DATA_INT32 ? static_cast<void*>(&as_int32) : static_cast<void*>(&as_float); }
};

// Adds the variant's tensors and finalized operations to `graph` (which is not yet built).
// Returns the by-value constants it reads besides q, k, v, o and scale, to bind at execution.
// A backward problem's forward also writes the logsumexp (sdpa_uid::stats).
std::vector<ByValueScalar> add_sdpa_forward(OperationGraphBuilder& graph, const AttentionProblem& problem,
                                            const SdpaGraphVariant& variant);

// Why cuDNN `version` cannot run this problem's backward through the graph below (after
// sdpa_unsupported has passed it); nullopt when it can.
Unsupported sdpa_backward_unsupported(const AttentionProblem& problem, std::size_t version);

// Up to 9.15, cudnn-frontend gives the backward of a problem whose seq_kv is not a multiple of
// 128 a padding mask with the full lengths (a known-bug workaround); so does this graph, and the
// lengths (seq_len_q/seq_len_kv uids, [batch] int32 of seq_q and seq_kv) are bound at execution.
bool sdpa_backward_needs_lengths(const AttentionProblem& problem, std::size_t version);

// cuDNN-frontend's composite SDPA backward, for dense problems (a variant's composite mask):
// D = rowsum(dO o O) into softmax_sum; P = exp(scale Q.K^T [padding] - stats [band]); dV = P^T.dO;
// dS = P o (dO.V^T - D) * scale; dK = dS^T.Q; dQ = dS.K through the fp32 dq_accum. Grouped heads
// compute dK and dV per query head and sum them per K/V head. Binds q, k (as K^T), v (as V^T),
// o, scale, stats, d_o, dq, dk, dv, softmax_sum, dq_accum (and the lengths when
// sdpa_backward_needs_lengths); returns the by-value constants.
std::vector<ByValueScalar> add_sdpa_backward(OperationGraphBuilder& graph, const AttentionProblem& problem,
                                             const SdpaGraphVariant& variant, std::size_t version);

}  // namespace attnprof
