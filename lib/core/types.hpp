// Plain vocabulary shared by every part of attnprof: data types, shapes, cases.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnprof {

enum class DType { bf16, fp16, fp32 };

std::string_view to_string(DType dtype);
std::optional<DType> parse_dtype(std::string_view text);
int dtype_bytes(DType dtype);

// Query head h reads K/V head h / (heads / heads_kv): grouped-query attention, multi-query when
// heads_kv is 1. Where each tensor lives (device memory, contiguous, elements):
//   q, o   [batch, heads, seq_q, head_dim] (PyTorch SDPA's default layout), or packed
//          [total_q, heads, head_dim] when seq_lens_q is given: sequence b's tokens are rows
//          cu_q[b] .. cu_q[b+1) - 1, cu_q = cumulative sum of seq_lens_q (cu_q[0] = 0).
//   k, v   [batch, heads_kv, seq_kv, head_dim]; packed [total_kv, heads_kv, head_dim] when
//          seq_lens_kv is given (cu_kv likewise); or, when page_size > 0, a paged cache
//          [pool pages, page_size, heads_kv, head_dim] reached through a block table
//          [batch, pages_per_sequence] of int32 page numbers (token j of sequence b lives in
//          page table[b][j / page_size], slot j % page_size; the pages are shuffled).
//   lse    [batch, heads, seq_q] fp32, padded: a ragged row (b, h, i) at ((b*heads + h)*seq_q + i).
// A ragged sequence's lengths are its own (q_len(b), kv_len(b)); seq_q and seq_kv are the maxima.
struct AttentionShape {
  int batch = 1;
  int heads = 1;
  int seq_q = 1;
  int seq_kv = 1;
  int head_dim = 64;
  int heads_kv = 0;  // 0: as many K/V heads as query heads
  std::vector<int> seq_lens_q{};   // a ragged batch: batch entries, each in [0, seq_q]; empty: all seq_q
  std::vector<int> seq_lens_kv{};  // each in [0, seq_kv]; empty: all seq_kv
  int page_size = 0;             // > 0: K/V in a paged cache of pages of this many tokens

  int kv_heads() const { return heads_kv > 0 ? heads_kv : heads; }
  int group_size() const { return heads / kv_heads(); }  // query heads per K/V head
  int q_len(int b) const { return seq_lens_q.empty() ? seq_q : seq_lens_q[static_cast<std::size_t>(b)]; }
  int kv_len(int b) const { return seq_lens_kv.empty() ? seq_kv : seq_lens_kv[static_cast<std::size_t>(b)]; }
  bool packed_q() const { return !seq_lens_q.empty(); }
  bool packed_kv() const { return !seq_lens_kv.empty() && page_size == 0; }
  bool paged() const { return page_size > 0; }
  bool ragged() const { return !seq_lens_q.empty() || !seq_lens_kv.empty(); }
  int pages_per_sequence() const { return page_size > 0 ? (seq_kv + page_size - 1) / page_size : 0; }
  std::int64_t total_q() const;   // query tokens over the batch (sum of q_len)
  std::int64_t total_kv() const;  // key tokens over the batch (sum of kv_len)
};

inline bool operator==(const AttentionShape& a, const AttentionShape& b) {
  return a.batch == b.batch && a.heads == b.heads && a.seq_q == b.seq_q && a.seq_kv == b.seq_kv &&
         a.head_dim == b.head_dim && a.kv_heads() == b.kv_heads() && a.seq_lens_q == b.seq_lens_q &&
         a.seq_lens_kv == b.seq_lens_kv && a.page_size == b.page_size;
}

// Cumulative offsets of a ragged batch: batch + 1 entries, [0] = 0, [b + 1] - [b] = lens[b].
std::vector<int> cumulative_offsets(const std::vector<int>& lens);

// Where the diagonal of the causal mask and of a window lies. top_left (PyTorch's is_causal):
// query row i's diagonal is key i. bottom_right (PyTorch's causal_lower_right, FlashAttention's
// convention): key i + seq_kv - seq_q, so the last query row sees every key (decode, chunked
// prefill). The two agree when seq_q == seq_kv.
enum class MaskAlignment { top_left, bottom_right };

// A sliding window around the diagonal, in keys: row i sees keys [diag - left, diag + right];
// -1 leaves that side unbounded (FlashAttention's window_size).
struct AttentionWindow {
  int left = -1;
  int right = -1;
  bool bounded() const { return left >= 0 || right >= 0; }
};

inline bool operator==(const AttentionWindow& a, const AttentionWindow& b) {
  return a.left == b.left && a.right == b.right;
}

// Which pass a case times. backward: dQ, dK, dV from q, k, v, the forward's output O and its
// logsumexp, and an upstream gradient dO (the forward runs once, untimed, to give O and the LSE).
enum class AttentionPass { forward, backward };
std::string_view to_string(AttentionPass pass);
std::optional<AttentionPass> parse_pass(std::string_view text);

// One problem a backend is asked to solve.
struct AttentionProblem {
  AttentionShape shape;
  DType dtype = DType::bf16;
  bool causal = false;  // row i sees no key past its diagonal
  MaskAlignment alignment = MaskAlignment::top_left;  // of the causal diagonal and the window
  AttentionWindow window;
  bool has_bias = false;  // additive [seq_q, seq_kv] fp32 bias, broadcast over batch and heads
  float scale = 0.f;      // softmax scale; 0 means 1/sqrt(head_dim)
  AttentionPass pass = AttentionPass::forward;

  float softmax_scale() const;
  bool is_backward() const { return pass == AttentionPass::backward; }
  bool has_grouped_heads() const { return shape.kv_heads() != shape.heads; }
  bool is_bottom_right() const { return alignment == MaskAlignment::bottom_right; }
};

inline bool operator==(const AttentionProblem& a, const AttentionProblem& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.causal == b.causal && a.alignment == b.alignment &&
         a.window == b.window && a.has_bias == b.has_bias && a.scale == b.scale && a.pass == b.pass;
}

// The keys one query row sees: [first, last], empty when last < first (a bottom-right mask
// with seq_q > seq_kv, or a window that misses every key). seq_q and seq_kv are the row's
// sequence's own lengths.
struct KeyRange {
  int first = 0;
  int last = -1;
  int count() const { return last >= first ? last - first + 1 : 0; }
};
KeyRange visible_keys(const AttentionProblem& problem, int row, int seq_q, int seq_kv);

// The causal words of a config: "false" (none), "top_left" (true: PyTorch's is_causal),
// "bottom_right" (PyTorch's causal_lower_right). Read into AttentionProblem's causal + alignment.
enum class CausalMode { none, top_left, bottom_right };
std::string_view to_string(CausalMode mode);
CausalMode causal_mode(const AttentionProblem& problem);
void set_causal_mode(AttentionProblem& problem, CausalMode mode);

// FLOPs of the problem's pass. The forward's are counted exactly: 4 * D per (query row, visible
// key) pair, summed over every row's visible keys (the causal alignment and the window counted per
// row), times B * H. (PyTorch's and FlashAttention's figures halve the dense count when causal:
// (S+1)/S lower.) A backward counts 2.5x the forward's, FlashAttention's convention (five
// matmuls to the forward's two; recomputing P is not counted).
double attention_flops(const AttentionProblem& problem);

// The factor attention_flops() applies to the forward's FLOPs for the problem's pass: 1 or 2.5.
double pass_flop_factor(AttentionPass pass);

// The same with every sequence of a ragged batch at the maximum lengths: what a backend that pads
// the batch computes (the share above attention_flops is spent on padding).
double attention_padded_flops(const AttentionProblem& problem);

// Fewest bytes any implementation must move through device memory: q read once, k and v once per
// K/V head, o written once, counted per sequence (a ragged batch's own lengths), plus the int32
// sequence arrays (lengths and offsets of a ragged batch, the block table of a paged cache).
// A backward reads q, k, v, o, dO and the fp32 logsumexp and writes dQ, dK, dV, each once.
double attention_min_bytes(const AttentionProblem& problem);

// "2x16x4096x4096x128" (batch x heads x seq_q x seq_kv x head_dim); grouped K/V heads as
// "1x32/8x8192x8192x128".
std::string shape_label(const AttentionShape& shape);

// The layout part of a case's name, empty for a dense batch: "ragged(q 1,17,64; kv 1,17,64)"
// (lengths listed up to 8 sequences, "sum S max M" beyond), "paged16".
std::string layout_label(const AttentionShape& shape);

// The mask part of a case's name: "full", "causal", "causal_br" (bottom-right), each followed by
// " window[L,R]" when a window bounds it.
std::string mask_label(const AttentionProblem& problem);

// The stable name of a case, used as the key in summary.json and by `attnprof check`:
// "flash:fa2 bf16 causal 2x16x4096x4096x128", "flash:hopper bf16 causal_br window[4096,0] 1x32/8x8192x8192x128",
// "flash:fa2 bf16 causal_br ragged(kv 1,17,4096) paged16 3x32/8x1x4096x128". A backward case says so
// after the backend: "cudnn backward bf16 causal 2x16x4096x4096x128" (forward names are unchanged).
std::string case_label(std::string_view backend, const AttentionProblem& problem);

// Elements of the logical, padded tensors: q/o [batch, heads, seq_q, head_dim], k/v [batch,
// heads_kv, seq_kv, head_dim]. Inputs are drawn by logical index, whatever the layout.
std::int64_t element_count_q(const AttentionShape& shape);
std::int64_t element_count_kv(const AttentionShape& shape);

// Elements the device buffers hold in the shape's layout: packed q/o total_q x heads x head_dim;
// k/v packed total_kv x heads_kv x head_dim, or every page of a paged cache's pool
// (batch x pages_per_sequence + 1 pages of page_size tokens: core/layout.hpp).
std::int64_t stored_elements_q(const AttentionShape& shape);
std::int64_t stored_elements_kv(const AttentionShape& shape);

}  // namespace attnprof
