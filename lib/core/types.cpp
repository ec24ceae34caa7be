#include "core/types.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attnprof {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view text) {
  if (text == "bf16") return DType::bf16;
  if (text == "fp16") return DType::fp16;
  if (text == "fp32") return DType::fp32;
  return std::nullopt;
}

int dtype_bytes(DType dtype) { return dtype == DType::fp32 ? 4 : 2; }

std::string_view to_string(AttentionPass pass) { return pass == AttentionPass::backward ? "backward" : "forward"; }

std::optional<AttentionPass> parse_pass(std::string_view text) {
  if (text == "forward") return AttentionPass::forward;
  if (text == "backward") return AttentionPass::backward;
  return std::nullopt;
}

double pass_flop_factor(AttentionPass pass) { return pass == AttentionPass::backward ? 2.5 : 1.0; }

float AttentionProblem::softmax_scale() const {
  return scale != 0.f ? scale : 1.f / std::sqrt(static_cast<float>(shape.head_dim));
}

KeyRange visible_keys(const AttentionProblem& p, int row, int seq_q, int seq_kv) {
  const long diagonal = row + (p.alignment == MaskAlignment::bottom_right ? static_cast<long>(seq_kv) - seq_q : 0L);
  long first = 0, last = static_cast<long>(seq_kv) - 1;
  if (p.causal) last = std::min(last, diagonal);
  if (p.window.right >= 0) last = std::min(last, diagonal + p.window.right);
  if (p.window.left >= 0) first = std::max(first, diagonal - p.window.left);
  if (last < first) return KeyRange{0, -1};
  return KeyRange{static_cast<int>(first), static_cast<int>(last)};
}

std::string_view to_string(CausalMode mode) {
  switch (mode) {
    case CausalMode::none: return "false";
    case CausalMode::top_left: return "top_left";
    case CausalMode::bottom_right: return "bottom_right";
  }
  return "false";
}

CausalMode causal_mode(const AttentionProblem& p) {
  if (!p.causal) return CausalMode::none;
  return p.is_bottom_right() ? CausalMode::bottom_right : CausalMode::top_left;
}

void set_causal_mode(AttentionProblem& p, CausalMode mode) {
  p.causal = mode != CausalMode::none;
  p.alignment = mode == CausalMode::bottom_right ? MaskAlignment::bottom_right : MaskAlignment::top_left;
}

namespace {

// (query row, visible key) pairs of one head of one sequence of q_len rows against kv_len keys.
double visible_pairs(const AttentionProblem& problem, int q_len, int kv_len) {
  if (!problem.causal && !problem.window.bounded()) return static_cast<double>(q_len) * kv_len;
  double pairs = 0;
  for (int row = 0; row < q_len; ++row) pairs += visible_keys(problem, row, q_len, kv_len).count();
  return pairs;
}

}  // namespace

double attention_flops(const AttentionProblem& problem) {
  const AttentionShape& s = problem.shape;
  double pairs = 0;  // over the batch, per head
  if (!s.ragged()) {
    pairs = s.batch * visible_pairs(problem, s.seq_q, s.seq_kv);
  } else {
    for (int b = 0; b < s.batch; ++b) pairs += visible_pairs(problem, s.q_len(b), s.kv_len(b));
  }
  return 4.0 * s.heads * s.head_dim * pairs * pass_flop_factor(problem.pass);
}

double attention_padded_flops(const AttentionProblem& problem) {
  AttentionProblem padded = problem;
  padded.shape.seq_lens_q.clear();
  padded.shape.seq_lens_kv.clear();
  return attention_flops(padded);
}

double attention_min_bytes(const AttentionProblem& problem) {
  const AttentionShape& s = problem.shape;
  // Query-sized tensors: q, o (forward); q, o, dO, dQ (backward). K/V-sized: k, v; k, v, dK, dV.
  const double tensors = problem.is_backward() ? 4.0 : 2.0;
  const double q_side = tensors * static_cast<double>(s.total_q()) * s.heads * s.head_dim;
  const double kv_side = tensors * static_cast<double>(s.total_kv()) * s.kv_heads() * s.head_dim;
  const double lse = problem.is_backward() ? 4.0 * static_cast<double>(s.total_q()) * s.heads : 0.0;
  double sequence_arrays = 0;  // int32: lengths, offsets, the block table
  if (s.ragged()) sequence_arrays += 4.0 * (2.0 * s.batch + 1);
  if (s.paged()) sequence_arrays += 4.0 * s.batch * s.pages_per_sequence();
  // The fp32 [seq_q, seq_kv] bias, shared by the batch and heads, read at least once.
  const double bias = problem.has_bias ? 4.0 * static_cast<double>(s.seq_q) * s.seq_kv : 0.0;
  return (q_side + kv_side) * dtype_bytes(problem.dtype) + lse + sequence_arrays + bias;
}

namespace {

// "1,17,64" for a few sequences; for many, "sum 24576 max 8192 #3f2a9c1e": the sum and maximum to
// read, and a hash of the lengths in order so that two batches of one sum and maximum (the same
// lengths permuted) keep distinct labels, which `check` matches cases by.
std::string lengths_label(const std::vector<int>& lens) {
  if (lens.size() <= 8) return fmt::format("{}", fmt::join(lens, ","));
  long long sum = 0;
  std::uint32_t hash = 2166136261u;  // FNV-1a over each length's four bytes
  for (int len : lens) {
    sum += len;
    for (int byte = 0; byte < 4; ++byte) {
      hash ^= (static_cast<std::uint32_t>(len) >> (8 * byte)) & 0xffu;
      hash *= 16777619u;
    }
  }
  return fmt::format("sum {} max {} #{:08x}", sum, *std::max_element(lens.begin(), lens.end()), hash);
}

}  // namespace

std::string shape_label(const AttentionShape& s) {
  const std::string heads = s.kv_heads() != s.heads ? fmt::format("{}/{}", s.heads, s.kv_heads()) : std::to_string(s.heads);
  return fmt::format("{}x{}x{}x{}x{}", s.batch, heads, s.seq_q, s.seq_kv, s.head_dim);
}

std::string layout_label(const AttentionShape& s) {
  std::vector<std::string> parts;
  if (s.ragged()) {
    std::vector<std::string> sides;
    if (!s.seq_lens_q.empty()) sides.push_back("q " + lengths_label(s.seq_lens_q));
    if (!s.seq_lens_kv.empty()) sides.push_back("kv " + lengths_label(s.seq_lens_kv));
    parts.push_back(fmt::format("ragged({})", fmt::join(sides, "; ")));
  }
  if (s.paged()) parts.push_back(fmt::format("paged{}", s.page_size));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string mask_label(const AttentionProblem& p) {
  std::string text = !p.causal ? "full" : p.is_bottom_right() ? "causal_br" : "causal";
  if (p.window.bounded()) text += fmt::format(" window[{},{}]", p.window.left, p.window.right);
  return text;
}

std::string case_label(std::string_view backend, const AttentionProblem& problem) {
  const std::string layout = layout_label(problem.shape);
  return fmt::format("{}{} {} {}{}{} {}", backend, problem.is_backward() ? " backward" : "", to_string(problem.dtype),
                     mask_label(problem),
                     problem.has_bias ? " bias" : "", layout.empty() ? "" : " " + layout, shape_label(problem.shape));
}

std::int64_t AttentionShape::total_q() const {
  if (seq_lens_q.empty()) return static_cast<std::int64_t>(batch) * seq_q;
  std::int64_t total = 0;
  for (int len : seq_lens_q) total += len;
  return total;
}

std::int64_t AttentionShape::total_kv() const {
  if (seq_lens_kv.empty()) return static_cast<std::int64_t>(batch) * seq_kv;
  std::int64_t total = 0;
  for (int len : seq_lens_kv) total += len;
  return total;
}

std::vector<int> cumulative_offsets(const std::vector<int>& lens) {
  std::vector<int> offsets(lens.size() + 1, 0);
  for (std::size_t b = 0; b < lens.size(); ++b) offsets[b + 1] = offsets[b] + lens[b];
  return offsets;
}

std::int64_t element_count_q(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.heads * s.seq_q * s.head_dim;
}

std::int64_t element_count_kv(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.kv_heads() * s.seq_kv * s.head_dim;
}

}  // namespace attnprof

namespace attnprof {

std::int64_t stored_elements_q(const AttentionShape& s) { return s.total_q() * s.heads * s.head_dim; }

std::int64_t stored_elements_kv(const AttentionShape& s) {
  // A paged pool holds one page more than the block table names (core/layout.hpp).
  const std::int64_t tokens =
      s.paged() ? (static_cast<std::int64_t>(s.batch) * s.pages_per_sequence() + 1) * s.page_size : s.total_kv();
  return tokens * s.kv_heads() * s.head_dim;
}

}  // namespace attnprof
