// Plain vocabulary shared by every part of attnprof: data types, shapes, cases.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attnprof {

enum class DType { bf16, fp16, fp32 };

std::string_view to_string(DType dtype);
std::optional<DType> parse_dtype(std::string_view text);
int dtype_bytes(DType dtype);

// Layout is [batch, heads, seq, head_dim], contiguous, for q/k/v/o (PyTorch SDPA's default layout).
struct AttentionShape {
  int batch = 1;
  int heads = 1;
  int seq_q = 1;
  int seq_kv = 1;
  int head_dim = 64;
};

inline bool operator==(const AttentionShape& a, const AttentionShape& b) {
  return a.batch == b.batch && a.heads == b.heads && a.seq_q == b.seq_q && a.seq_kv == b.seq_kv &&
         a.head_dim == b.head_dim;
}

// One problem a backend is asked to solve. Causal masking is top-left aligned, as in
// PyTorch's SDPA: query row i sees keys 0..i (so no row is ever fully masked).
struct AttentionProblem {
  AttentionShape shape;
  DType dtype = DType::bf16;
  bool causal = false;
  bool has_bias = false;  // additive [seq_q, seq_kv] fp32 bias, broadcast over batch and heads
  float scale = 0.f;      // softmax scale; 0 means 1/sqrt(head_dim)

  float softmax_scale() const;
};

inline bool operator==(const AttentionProblem& a, const AttentionProblem& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.causal == b.causal && a.has_bias == b.has_bias &&
         a.scale == b.scale;
}

// FLOPs of the forward pass as PyTorch, FlashAttention and our reference figures count them:
// 4*B*H*Sq*Skv*D, halved when causal.
double attention_flops(const AttentionProblem& problem);

// Fewest bytes any implementation must move through device memory: q, k, v read once, o written once.
double attention_min_bytes(const AttentionProblem& problem);

// "2x16x4096x4096x128" (batch x heads x seq_q x seq_kv x head_dim).
std::string shape_label(const AttentionShape& shape);

// The stable name of a case, used as the key in summary.json and by `attnprof check`:
// "flash bf16 causal 2x16x4096x4096x128".
std::string case_label(std::string_view backend, const AttentionProblem& problem);

std::int64_t element_count_q(const AttentionShape& shape);
std::int64_t element_count_kv(const AttentionShape& shape);

}  // namespace attnprof
