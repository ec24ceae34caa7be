#include "backends/cudnn_sdpa_graph.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "backends/cudnn_info.hpp"
#include "core/layout.hpp"
#include "core/mask_bounds.hpp"

namespace attnprof {
namespace {

using Dims = std::vector<std::int64_t>;

cudnnDataType_t io_data_type(DType dtype) {
  return dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;  // sdpa_unsupported rejects fp32
}

// Contiguous [b, h, rows, cols] strides.
Dims packed_strides(std::int64_t h, std::int64_t rows, std::int64_t cols) {
  return {h * rows * cols, rows * cols, cols, 1};
}

// "bottom-right band left 18 right 0", "causal mask"; "" without a mask.
std::string describe_band(const SdpaBand& band) {
  if (!band.masked()) return "";
  const std::string alignment = band.bottom_right ? "bottom-right " : "";
  if (band.right_bound == 0 && !band.left_bound) return alignment + "causal mask";
  std::string text = alignment + "band";
  if (band.left_bound) text += fmt::format(" left {}", *band.left_bound);
  if (band.right_bound) text += fmt::format(" right {}", *band.right_bound);
  return text;
}

// Rows of the problem that see no key: the first rows when the band ends left of key 0, the last
// ones when it starts right of the last key (first and last key never decrease with the row).
std::int64_t rows_without_keys(const AttentionProblem& p) {
  const MaskBounds m = mask_bounds(p);
  const std::int64_t sq = p.shape.seq_q, skv = p.shape.seq_kv;
  const std::int64_t front = std::clamp<std::int64_t>(-static_cast<std::int64_t>(m.high), 0, sq);
  const std::int64_t back = std::clamp<std::int64_t>(sq - skv + m.low, 0, sq);
  return std::min(sq, front + back);
}

std::string needs_version(std::size_t needed, std::string_view what, std::size_t loaded) {
  return fmt::format("{} needs cuDNN {} or newer (cudnn-frontend's SDPA support surface); the loaded cuDNN is {}", what,
                     format_cudnn_version(needed), format_cudnn_version(loaded));
}

struct SdpaTensors {
  cudnnBackendDescriptor_t q, k, v, o, scale;
  // Per-sequence problems only (null otherwise): int32 [batch, 1, 1, 1] lengths.
  cudnnBackendDescriptor_t seq_len_q = nullptr, seq_len_kv = nullptr;
};

// Q, V, O as stored; K either as stored [b, h_kv, s_kv, d] (native op) or as the transposed view
// [b, h_kv, d, s_kv] over the same memory (composite bmm1 computes Q x K^T). K and V carry
// heads_kv heads: the fused attention broadcasts each over its heads / heads_kv query heads.
// Packed (ragged) tensors keep their [b, h, s, d] dims over [total, h, d] memory: the token stride
// is h * d, and the ragged offset tensor says where each sequence starts. A paged K or V is a
// PAGED_CACHE_LOAD from the cache container into a virtual tensor of the dense shape.
SdpaTensors add_io_tensors(OperationGraphBuilder& graph, const AttentionProblem& p, bool k_transposed,
                           bool packed_kv_as_pages, bool with_lengths = false) {
  const AttentionShape& s = p.shape;
  const std::int64_t b = s.batch, h = s.heads, h_kv = s.kv_heads(), sq = s.seq_q, skv = s.seq_kv, d = s.head_dim;
  const cudnnDataType_t io = io_data_type(p.dtype);
  auto index_tensor = [&](const char* name, std::int64_t uid, std::int64_t count) {
    return graph.tensor({name, uid, CUDNN_DATA_INT32, {count, 1, 1, 1}, {1, 1, 1, 1}});
  };
  SdpaTensors t{};
  if (sdpa_per_sequence(p) || with_lengths) {
    t.seq_len_q = index_tensor("seq_len_q", sdpa_uid::seq_len_q, b);
    t.seq_len_kv = index_tensor("seq_len_kv", sdpa_uid::seq_len_kv, b);
  }

  if (s.packed_q()) {
    const Dims strides = {sq * h * d, d, h * d, 1};
    t.q = graph.tensor({"Q (packed)", sdpa_uid::q, io, {b, h, sq, d}, strides, false, false,
                        index_tensor("Q ragged offsets", sdpa_uid::ragged_q, b + 1)});
    t.o = graph.tensor({"O (packed)", sdpa_uid::o, io, {b, h, sq, d}, strides, false, false,
                        index_tensor("O ragged offsets", sdpa_uid::ragged_o, b + 1)});
  } else {
    t.q = graph.tensor({"Q", sdpa_uid::q, io, {b, h, sq, d}, packed_strides(h, sq, d)});
    t.o = graph.tensor({"O", sdpa_uid::o, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  }

  const Dims k_dense_strides = k_transposed ? Dims{h_kv * skv * d, skv * d, 1, d} : packed_strides(h_kv, skv, d);
  const Dims k_dims = k_transposed ? Dims{b, h_kv, d, skv} : Dims{b, h_kv, skv, d};
  const char* k_name = k_transposed ? "K^T" : "K";
  if (s.paged() || (s.packed_kv() && packed_kv_as_pages)) {
    // Container [pool pages, h_kv, page_size, d] over our [pool pages, page_size, h_kv, d] memory;
    // packed K/V as pages of one token: [total_kv, h_kv, 1, d], a table row per token.
    const bool token_pages = !s.paged();
    const std::int64_t page = token_pages ? 1 : s.page_size, pps = token_pages ? skv : s.pages_per_sequence(),
                       pages = token_pages ? s.total_kv() : page_pool_size(s);
    const Dims container_dims = {pages, h_kv, page, d}, container_strides = {page * h_kv * d, d, h_kv * d, 1};
    const auto table =
        graph.tensor({"block table", sdpa_uid::page_table, CUDNN_DATA_INT32, {b, 1, pps, 1}, {pps, pps, 1, 1}});
    const auto k_cache = graph.tensor({"K cache", sdpa_uid::k, io, container_dims, container_strides});
    const auto v_cache = graph.tensor({"V cache", sdpa_uid::v, io, container_dims, container_strides});
    t.k = graph.tensor({k_name, 90, io, k_dims, k_dense_strides, true});
    t.v = graph.tensor({"V", 91, io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d), true});
    graph.paged_cache_load("K", k_cache, table, t.seq_len_kv, t.k);
    graph.paged_cache_load("V", v_cache, table, t.seq_len_kv, t.v);
  } else if (s.packed_kv()) {
    const Dims k_strides = k_transposed ? Dims{skv * h_kv * d, d, 1, h_kv * d} : Dims{skv * h_kv * d, d, h_kv * d, 1};
    t.k = graph.tensor({std::string(k_name) + " (packed)", sdpa_uid::k, io, k_dims, k_strides, false, false,
                        index_tensor("K ragged offsets", sdpa_uid::ragged_k, b + 1)});
    t.v = graph.tensor({"V (packed)", sdpa_uid::v, io, {b, h_kv, skv, d}, {skv * h_kv * d, d, h_kv * d, 1}, false,
                        false, index_tensor("V ragged offsets", sdpa_uid::ragged_v, b + 1)});
  } else {
    t.k = graph.tensor({k_name, sdpa_uid::k, io, k_dims, k_dense_strides});
    t.v = graph.tensor({"V", sdpa_uid::v, io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d)});
  }
  t.scale = graph.tensor({"attn_scale", sdpa_uid::scale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true});
  return t;
}

void add_native(OperationGraphBuilder& graph, const AttentionProblem& p) {
  const SdpaTensors t = add_io_tensors(graph, p, /*k_transposed=*/false, /*packed_kv_as_pages=*/false);
  graph.sdpa_forward("sdpa", t.q, t.k, t.v, t.o, t.scale);
}

// The parts both composite graphs share: tensor factories over the score matrix, by-value
// constants, and the masks as cuDNN-frontend lowers them.
class ScoreGraph {
 public:
  ScoreGraph(OperationGraphBuilder& graph, const AttentionProblem& p, const SdpaGraphVariant& variant,
             const SdpaTensors& t)
      : graph_(graph), p_(p), variant_(variant), t_(t) {}

  // A virtual [b, h, s_q, s_kv] tensor.
  cudnnBackendDescriptor_t scores(const char* name, cudnnDataType_t type) {
    const AttentionShape& s = p_.shape;
    return graph_.tensor({name, next_uid_++, type, {s.batch, s.heads, s.seq_q, s.seq_kv},
                          packed_strides(s.heads, s.seq_q, s.seq_kv), true});
  }
  // A [b, h, s_q, 1] fp32 tensor: virtual, or bound under `uid` when given.
  cudnnBackendDescriptor_t row_stat(const char* name, std::int64_t uid = 0) {
    const std::int64_t h = p_.shape.heads, sq = p_.shape.seq_q;
    return graph_.tensor({name, uid != 0 ? uid : next_uid_++, CUDNN_DATA_FLOAT, {p_.shape.batch, h, sq, 1},
                          {h * sq, sq, 1, 1}, uid == 0});
  }
  // Any other virtual intermediate.
  cudnnBackendDescriptor_t virtual_tensor(const char* name, cudnnDataType_t type, Dims dims, Dims strides) {
    return graph_.tensor({name, next_uid_++, type, std::move(dims), std::move(strides), true});
  }
  cudnnBackendDescriptor_t int32_constant(const char* name, int value) {
    return constant(name, {.data_type = CUDNN_DATA_INT32, .as_int32 = static_cast<std::int32_t>(value)});
  }
  cudnnBackendDescriptor_t float_constant(const char* name, float value) {
    return constant(name, {.data_type = CUDNN_DATA_FLOAT, .as_float = value});
  }
  std::vector<ByValueScalar> take_constants() { return std::move(constants_); }

  // Keep (i, j) when i < q_len(b) and j < kv_len(b): the [b, 1, 1, 1] lengths broadcast over
  // heads, rows and keys. Only where the graph has lengths.
  cudnnBackendDescriptor_t padding_mask(cudnnBackendDescriptor_t logits) {
    if (t_.seq_len_q == nullptr) return logits;
    const auto row = gen_index(logits, "row_index (padding)", 2, CUDNN_DATA_INT32);
    const auto col = gen_index(logits, "col_index (padding)", 3, CUDNN_DATA_INT32);
    const auto row_in = scores("row<seq_len_q", CUDNN_DATA_BOOLEAN);
    graph_.pointwise("row_lt_seq_len_q", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, row, t_.seq_len_q, nullptr,
                     row_in);
    const auto col_in = scores("col<seq_len_kv", CUDNN_DATA_BOOLEAN);
    graph_.pointwise("col_lt_seq_len_kv", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, col, t_.seq_len_kv, nullptr,
                     col_in);
    const auto keep = scores("inside", CUDNN_DATA_BOOLEAN);
    graph_.pointwise("padding_and", CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, row_in, col_in, nullptr, keep);
    return select(logits, "S_padded", keep);
  }

  // Each side of the band as cudnn-frontend's composite diagonal-band node lowers it (the shape
  // the fusion engines recognise): its own row and column GEN_INDEX over the scores, the row
  // (right side) or the column (left side) shifted by by-value constants (the row by each
  // sequence's own lengths when they are given), one comparison, and
  // BINARY_SELECT(keep ? S : -inf). Right side first, as the frontend orders them.
  cudnnBackendDescriptor_t band_mask(cudnnBackendDescriptor_t logits) {
    const SdpaBand band = sdpa_band(p_);
    const AttentionShape& s = p_.shape;
    if (band.right_bound) {
      // Keep key j of row i when i [+ s_kv - s_q] [+ right] >= j.
      auto row = gen_index(logits, "row_index", 2, variant_.gen_index_compute);
      const auto col = gen_index(logits, "col_index", 3, variant_.gen_index_compute);
      auto shift_row = [&](const char* name, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t by) {
        const auto shifted = scores(name, CUDNN_DATA_INT32);
        graph_.pointwise(name, mode, CUDNN_DATA_INT32, row, by, nullptr, shifted);
        row = shifted;
      };
      if (band.bottom_right && t_.seq_len_q != nullptr && sdpa_per_sequence(p_)) {
        // Each sequence's own diagonal: row + kv_len(b) - q_len(b).
        shift_row("row+seq_len_kv", CUDNN_POINTWISE_ADD, t_.seq_len_kv);
        shift_row("row+seq_len_kv-seq_len_q", CUDNN_POINTWISE_SUB, t_.seq_len_q);
      } else if (band.bottom_right) {
        shift_row("row+s_kv", CUDNN_POINTWISE_ADD, int32_constant("s_kv", s.seq_kv));
        shift_row("row+s_kv-s_q", CUDNN_POINTWISE_SUB, int32_constant("s_q", s.seq_q));
      }
      if (*band.right_bound != 0)
        shift_row("row+right_bound", CUDNN_POINTWISE_ADD, int32_constant("right_bound", *band.right_bound));
      const auto keep = scores("row>=col", CUDNN_DATA_BOOLEAN);
      graph_.pointwise("row_ge_col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
      logits = select(logits, "S_masked_right", keep);
    }
    if (band.left_bound) {
      // Keep key j of row i when j + left_bound [- (s_kv - s_q)] > i; with fixed lengths one fp32
      // constant carries both terms (cudnn-frontend's form).
      const auto row = gen_index(logits, "row_index (left)", 2, variant_.gen_index_compute);
      const auto col = gen_index(logits, "col_index (left)", 3, variant_.gen_index_compute);
      const auto shifted = scores("col+left_bound", CUDNN_DATA_FLOAT);
      const auto bound = float_constant("left_bound", static_cast<float>(*band.left_bound - band.shift));
      graph_.pointwise("col+left_bound", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, col, bound, nullptr, shifted);
      const auto keep = scores("col+left_bound>row", CUDNN_DATA_BOOLEAN);
      graph_.pointwise("col_gt_row", CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, shifted, row, nullptr, keep);
      logits = select(logits, "S_masked_left", keep);
    }
    return logits;
  }

 private:
  cudnnBackendDescriptor_t constant(const char* name, ByValueScalar value) {
    value.uid = sdpa_uid::first_constant + static_cast<std::int64_t>(constants_.size());
    constants_.push_back(value);
    return graph_.tensor({name, value.uid, value.data_type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true});
  }
  cudnnBackendDescriptor_t gen_index(cudnnBackendDescriptor_t over, const char* name, std::int64_t axis,
                                     cudnnDataType_t compute) {
    const auto index = scores(name, CUDNN_DATA_INT32);
    graph_.pointwise(name, CUDNN_POINTWISE_GEN_INDEX, compute, over, nullptr, nullptr, index, axis);
    return index;
  }
  // BINARY_SELECT: y = keep ? logits : -inf.
  cudnnBackendDescriptor_t select(cudnnBackendDescriptor_t logits, const char* name, cudnnBackendDescriptor_t keep) {
    const auto minus_inf = float_constant("-inf", -std::numeric_limits<float>::infinity());
    const auto masked = scores(name, CUDNN_DATA_FLOAT);
    graph_.pointwise(name, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, logits, minus_inf, keep, masked);
    return masked;
  }

  OperationGraphBuilder& graph_;
  const AttentionProblem& p_;
  const SdpaGraphVariant& variant_;
  const SdpaTensors& t_;
  std::int64_t next_uid_ = 100;
  std::vector<ByValueScalar> constants_;
};

// bmm1 -> scale -> [padding mask] -> [band mask] -> softmax (max, sub, exp, sum, div, plus the
// log-sum-exp stats the flash pattern carries even when nobody reads them; bound under
// sdpa_uid::stats when `write_stats`) -> bmm2. Intermediates are virtual fp32, except the mask's
// index/boolean tensors and the probabilities, which bmm2 takes in the I/O type; this is the
// order and typing cuDNN-frontend's composite SDPA node emits.
std::vector<ByValueScalar> add_composite(OperationGraphBuilder& graph, const AttentionProblem& p,
                                         const SdpaGraphVariant& variant, bool write_stats) {
  const SdpaTensors t = add_io_tensors(graph, p, /*k_transposed=*/true, variant.packed_kv_as_pages);
  ScoreGraph g(graph, p, variant, t);

  const auto s_raw = g.scores("S", CUDNN_DATA_FLOAT);
  // With per-sequence lengths each batch entry's GEMMs stop at its own q_len x kv_len.
  graph.matmul("bmm1 Q.K^T", t.q, t.k, s_raw, {.m = t.seq_len_q, .n = t.seq_len_kv});
  const auto s_scaled = g.scores("S*scale", CUDNN_DATA_FLOAT);
  graph.pointwise("attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s_raw, t.scale, nullptr, s_scaled);
  const auto logits = g.band_mask(g.padding_mask(s_scaled));

  const auto row_max = g.row_stat("max");
  graph.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, logits, row_max);
  const auto shifted = g.scores("S-max", CUDNN_DATA_FLOAT);
  graph.pointwise("softmax sub", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, logits, row_max, nullptr, shifted);
  const auto exps = g.scores("exp(S-max)", CUDNN_DATA_FLOAT);
  graph.pointwise("softmax exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, nullptr, nullptr, exps);
  const auto row_sum = g.row_stat("sum_exp");
  graph.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  const auto log_sum = g.row_stat("log(sum_exp)");
  graph.pointwise("stats log", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, row_sum, nullptr, nullptr, log_sum);
  const auto stats = g.row_stat("stats", write_stats ? sdpa_uid::stats : 0);
  graph.pointwise("stats add", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, row_max, log_sum, nullptr, stats);
  const auto probs = g.scores("P", io_data_type(p.dtype));
  graph.pointwise("softmax div", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, exps, row_sum, nullptr, probs);

  graph.matmul("bmm2 P.V", probs, t.v, t.o, {.m = t.seq_len_q, .k = t.seq_len_kv});
  return g.take_constants();
}

// The limits of a ragged batch or a paged cache (a padding mask with per-sequence lengths).
Unsupported per_sequence_unsupported(const AttentionProblem& p, std::size_t version, bool check_band_surface) {
  const AttentionShape& s = p.shape;
  const std::string what = s.paged() ? (s.ragged() ? "a paged K/V cache with a ragged batch" : "a paged K/V cache")
                                     : "a ragged batch";
  if (p.window.bounded())
    return fmt::format("a sliding window with {} is not wired for cudnn (only causal masks follow per-sequence "
                       "lengths here); use flash:fa2",
                       what);
  if (s.paged()) {
    if (version < kPagedCacheMinVersion)
      return needs_version(kPagedCacheMinVersion, "a paged K/V cache (the PAGED_CACHE_LOAD operation)", version);
    if (s.packed_q() && version < kPagedRaggedMinVersion)
      return needs_version(kPagedRaggedMinVersion, "a paged K/V cache with packed (ragged) queries", version);
    if (s.head_dim > 128 && version < kPagedLargeHeadMinVersion)
      return needs_version(kPagedLargeHeadMinVersion, "a paged K/V cache with head_dim above 128", version);
  }
  // Per-sequence lengths are arbitrary, so the bottom-right diagonal meets lengths that are not
  // multiples of 64, which needs 9.6.0 (as for a fixed-length bottom-right band).
  if (p.causal && p.is_bottom_right() && version < 90600)
    return needs_version(90600, fmt::format("a bottom-right causal diagonal per sequence ({})", what), version);
  if (p.causal && s.seq_q == 1 && version < 91000)
    return needs_version(91000, "decode (seq_q 1) with a causal mask", version);
  const std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();
  if (s.total_q() * s.heads * s.head_dim > int32_max || s.total_kv() * s.kv_heads() * s.head_dim > int32_max)
    return fmt::format("{} of more than 2^31 elements needs int64 ragged offsets, which this backend does not build",
                       what);
  if (check_band_surface) {
    // Rows that see no key (a key-less sequence, or q_len > kv_len under a bottom-right diagonal)
    // must write zeros and -inf; cuDNN's softmax over an all-masked row does not promise that.
    // First and last keys never decrease with the row, so the first and last rows tell.
    for (int b = 0; b < s.batch; ++b) {
      const int q_len = s.q_len(b), kv_len = s.kv_len(b);
      if (q_len == 0) continue;
      if (visible_keys(p, 0, q_len, kv_len).count() == 0 || visible_keys(p, q_len - 1, q_len, kv_len).count() == 0)
        return fmt::format(
            "sequence {} of {} ({} query rows, {} keys, {}) has query rows that see no key; cuDNN's fused attention "
            "does not write them as zeros; use flash:fa2 or efficient",
            b, what, q_len, kv_len, to_string(causal_mode(p)));
    }
  }
  return std::nullopt;
}

}  // namespace

bool sdpa_per_sequence(const AttentionProblem& p) { return p.shape.ragged() || p.shape.paged(); }

bool sdpa_prefers_token_pages(const AttentionProblem& p) { return p.shape.packed_kv() && p.shape.seq_q <= 16; }

std::vector<std::int32_t> sdpa_token_page_table(const AttentionShape& s) {
  const std::vector<int> cu = cumulative_offsets(s.seq_lens_kv);
  std::vector<std::int32_t> table(static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.seq_kv));
  for (int b = 0; b < s.batch; ++b) {
    const int len = s.kv_len(b);
    const int start = cu[static_cast<std::size_t>(b)];
    const int pad = len > 0 ? start + len - 1 : 0;  // never read: the padding mask drops it
    for (int j = 0; j < s.seq_kv; ++j)
      table[static_cast<std::size_t>(b) * static_cast<std::size_t>(s.seq_kv) + static_cast<std::size_t>(j)] =
          j < len ? start + j : pad;
  }
  return table;
}

std::vector<std::int64_t> sdpa_ragged_offsets(const std::vector<int>& lens, int heads, int head_dim) {
  std::vector<std::int64_t> offsets(lens.size() + 1, 0);
  for (std::size_t i = 0; i < lens.size(); ++i)
    offsets[i + 1] = offsets[i] + static_cast<std::int64_t>(lens[i]) * heads * head_dim;
  return offsets;
}

SdpaBand sdpa_band(const AttentionProblem& p) {
  SdpaBand band;
  if (sdpa_per_sequence(p)) {
    // Lengths differ per sequence, so a bound is dropped only when it masks nothing in every
    // sequence (the dense rule below, per sequence: key minus row spans [1 - q_len, kv_len - 1]),
    // e.g. a bottom-right diagonal seen from one query row (decode). cuDNN's paged decode with
    // such a mask in the graph ran 20x slower on the H200 (docs/perf/NOTES.md). Windows are
    // refused for these problems (sdpa_unsupported), so only the causal right bound remains.
    const MaskBounds m = mask_bounds(p);
    bool masks_nothing = true;
    for (int b = 0; masks_nothing && b < p.shape.batch; ++b) {
      const int q_len = p.shape.q_len(b), kv_len = p.shape.kv_len(b);
      const MaskBounds own = m.for_lengths(q_len, kv_len);
      masks_nothing = own.high >= kv_len - 1 && own.low <= 1 - q_len;
    }
    if (masks_nothing) return band;
    if (p.causal) {
      band.right_bound = 0;
      band.bottom_right = p.is_bottom_right();
    }
    return band;
  }
  const MaskBounds m = mask_bounds(p);
  if (!m.bounded()) return band;
  const int sq = p.shape.seq_q, skv = p.shape.seq_kv;
  const int offset = p.is_bottom_right() ? skv - sq : 0;  // mask_bounds' diagonal of row 0
  // Key minus row spans [1 - seq_q, seq_kv - 1]: a bound outside that masks nothing.
  if (m.high < skv - 1) band.right_bound = m.high - offset;
  if (m.low > 1 - sq) band.left_bound = offset - m.low + 1;
  if (band.masked() && offset != 0) {
    band.bottom_right = true;
    band.shift = offset;
  }
  return band;
}

Unsupported sdpa_unsupported(const AttentionProblem& p, std::size_t version, bool check_band_surface) {
  const AttentionShape& s = p.shape;
  if (p.dtype == DType::fp32)
    return std::string("fp32 is not supported: cuDNN's fused attention takes fp16/bf16 Q, K, V, O only");
  if (p.has_bias) return std::string("bias not wired for cudnn");
  const int d = s.head_dim;
  if (d % 8 != 0) return fmt::format("head_dim {} is not a multiple of 8 (cuDNN fused attention needs d % 8 == 0)", d);
  if (d > 256) return fmt::format("head_dim {} is above 256, the largest cuDNN fused attention supports", d);
  if (s.kv_heads() <= 0 || s.heads % s.kv_heads() != 0)
    return fmt::format("heads {} is not a multiple of heads_kv {}: cuDNN's fused attention broadcasts each K/V head "
                       "over the same number of query heads",
                       s.heads, s.kv_heads());

  if (sdpa_per_sequence(p)) return per_sequence_unsupported(p, version, check_band_surface);

  const SdpaBand band = sdpa_band(p);
  if (!band.masked()) return std::nullopt;
  const std::string mask = describe_band(band);
  if (check_band_surface) {
    if (const std::int64_t empty = rows_without_keys(p); empty > 0)
      return fmt::format(
          "{} of the {} query rows see no key ({}, seq_q {}, seq_kv {}): cuDNN's fused attention takes such a band "
          "only with per-sequence lengths (a padding mask), which this backend does not build; use flash or efficient",
          empty, s.seq_q, mask, s.seq_q, s.seq_kv);
    if (s.seq_q > s.seq_kv && (band.left_bound || band.bottom_right))
      return fmt::format(
          "a {} with seq_q {} > seq_kv {} is outside cuDNN's fused-attention support (cudnn-frontend refuses it for "
          "every cuDNN version unless per-sequence lengths, a padding mask, come with it, which this backend does not "
          "build); use flash or efficient",
          mask, s.seq_q, s.seq_kv);
  }
  if (band.left_bound && version < 90200) return needs_version(90200, "a sliding window (a left bound)", version);
  if (band.bottom_right && band.right_bound && version < 90300)
    return needs_version(90300, "bottom-right causal alignment with seq_q != seq_kv", version);
  if (band.bottom_right && version < 90600 && (s.seq_q % 64 != 0 || s.seq_kv % 64 != 0 || band.left_bound))
    return needs_version(90600, "a bottom-right band with a left bound, or with seq_q or seq_kv not a multiple of 64,",
                         version);
  if (band.left_bound && !band.right_bound) {
    if (version < 91002)
      return needs_version(91002, "a window with a left bound and no right bound (neither causal nor window right)",
                           version);
    if (version == 91400 && s.seq_kv > 1024)
      return std::string(
          "cuDNN 9.14.0 has a known bug with a non-causal window with a left bound and seq_kv > 1024 (cudnn-frontend "
          "refuses it); this needs cuDNN 9.14.1 or newer");
  }
  if (s.seq_q == 1 && band.right_bound && version < 91000)
    return needs_version(91000, "decode (seq_q 1) with a causal mask or a window right bound", version);
  return std::nullopt;
}

std::string describe(const SdpaGraphVariant& variant, const AttentionProblem& problem) {
  if (variant.kind == SdpaGraphKind::native_op) return "native SDPA_FWD op";
  const SdpaBand band = sdpa_band(problem);
  const AttentionShape& s = problem.shape;
  std::string inputs;
  if (sdpa_per_sequence(problem)) {
    inputs = "padding mask";
    if (s.packed_q()) inputs += ", ragged Q/O";
    if (s.packed_kv()) inputs += ", ragged K/V";
    if (s.paged()) inputs += fmt::format(", paged K/V (pages of {})", s.page_size);
    if (variant.packed_kv_as_pages) inputs += " read as one-token pages";
  }
  if (!band.masked()) return inputs.empty() ? "composite pattern graph" : fmt::format("composite pattern graph ({})", inputs);
  return fmt::format("composite pattern graph ({}{}{}, GEN_INDEX math {})", inputs, inputs.empty() ? "" : ", ",
                     describe_band(band), variant.gen_index_compute == CUDNN_DATA_INT32 ? "int32" : "fp32");
}

std::vector<SdpaGraphVariant> sdpa_graph_variants(const AttentionProblem& problem, std::size_t cudnn_version,
                                                  bool packed_kv_as_pages) {
  const AttentionShape& s = problem.shape;
  if (packed_kv_as_pages && s.packed_kv() && cudnn_version >= kPagedCacheMinVersion &&
      (!s.packed_q() || cudnn_version >= kPagedRaggedMinVersion) &&
      (s.head_dim <= 128 || cudnn_version >= kPagedLargeHeadMinVersion)) {
    std::vector<SdpaGraphVariant> variants = sdpa_graph_variants(problem, cudnn_version, false);
    std::vector<SdpaGraphVariant> as_pages = variants;
    for (SdpaGraphVariant& v : as_pages) v.packed_kv_as_pages = true;
    as_pages.insert(as_pages.end(), variants.begin(), variants.end());
    return as_pages;
  }
  std::vector<SdpaGraphVariant> variants;
  if (sdpa_per_sequence(problem) && !sdpa_band(problem).masked()) {
    // Per-sequence lengths need the composite graph's padding mask (the native op takes them
    // only from 9.15 on, not wired here).
    variants.push_back({SdpaGraphKind::composite});
    return variants;
  }
  if (sdpa_band(problem).masked()) {
    // The native op takes a mask only from cuDNN 9.21 (as a score-modifier subgraph).
    variants.push_back({SdpaGraphKind::composite, CUDNN_DATA_INT32});
    variants.push_back({SdpaGraphKind::composite, CUDNN_DATA_FLOAT});
    return variants;
  }
  // The native op is wired without its stats output, which a backward problem's forward must write.
  if (cudnn_version >= kNativeSdpaMinVersion && !problem.is_backward()) variants.push_back({SdpaGraphKind::native_op});
  variants.push_back({SdpaGraphKind::composite});
  return variants;
}

std::vector<ByValueScalar> add_sdpa_forward(OperationGraphBuilder& graph, const AttentionProblem& problem,
                                            const SdpaGraphVariant& variant) {
  if (variant.kind == SdpaGraphKind::native_op) {
    add_native(graph, problem);
    return {};
  }
  return add_composite(graph, problem, variant, problem.is_backward());
}

bool sdpa_backward_needs_lengths(const AttentionProblem& p, std::size_t version) {
  return p.shape.seq_kv % 128 != 0 && version <= 91500;
}

Unsupported sdpa_backward_unsupported(const AttentionProblem& p, std::size_t version) {
  if (sdpa_per_sequence(p)) return std::string("cudnn's backward is wired for dense batches only");
  if (p.window.bounded()) return std::string("cudnn's backward is not wired for sliding windows here");
  if (version < kSdpaBackwardMinVersion)
    return needs_version(kSdpaBackwardMinVersion,
                         "the SDPA backward graph as built here (the library zeroes its fp32 dQ accumulator itself "
                         "from 9.6.0; 9.10.0 and 9.10.1 have known backward bugs)",
                         version);
  if (p.shape.seq_q == 1 && p.shape.seq_kv == 1) return std::string("seq_q = seq_kv = 1 has no cuDNN backward");
  return std::nullopt;
}

std::vector<ByValueScalar> add_sdpa_backward(OperationGraphBuilder& graph, const AttentionProblem& p,
                                             const SdpaGraphVariant& variant, std::size_t version) {
  const AttentionShape& s = p.shape;
  const std::int64_t b = s.batch, h = s.heads, h_kv = s.kv_heads(), sq = s.seq_q, skv = s.seq_kv, d = s.head_dim;
  const cudnnDataType_t io = io_data_type(p.dtype);
  // Q, O as stored; K and V as their transposed views [b, h_kv, d, s_kv] (Q.K^T and dO.V^T).
  const SdpaTensors t = add_io_tensors(graph, p, /*k_transposed=*/true, /*packed_kv_as_pages=*/false,
                                       sdpa_backward_needs_lengths(p, version));
  ScoreGraph g(graph, p, variant, t);
  const MatmulOverrides rows_by_keys = {.m = t.seq_len_q, .n = t.seq_len_kv};
  const MatmulOverrides keys_by_rows = {.m = t.seq_len_kv, .k = t.seq_len_q};
  const auto v_t = graph.tensor({"V^T", sdpa_uid::v, io, {b, h_kv, d, skv}, {h_kv * skv * d, skv * d, 1, d}});
  const auto d_o = graph.tensor({"dO", sdpa_uid::d_o, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  const auto stats = g.row_stat("stats", sdpa_uid::stats);
  const auto dq = graph.tensor({"dQ", sdpa_uid::dq, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  const auto dk = graph.tensor({"dK", sdpa_uid::dk, io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d)});
  const auto dv = graph.tensor({"dV", sdpa_uid::dv, io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d)});

  // D = rowsum(dO o O), kept in memory (softmax_sum) for the dS step.
  const auto do_o = g.virtual_tensor("dO*O", CUDNN_DATA_FLOAT, {b, h, sq, d}, {h * sq * d, sq * d, h * d, 1});
  graph.pointwise("mul_dO_O", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, d_o, t.o, nullptr, do_o);
  const auto row_dot = g.row_stat("rowsum(dO*O)");
  graph.reduction("reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, do_o, row_dot);
  const auto softmax_sum = g.row_stat("softmax_sum", sdpa_uid::softmax_sum);
  graph.pointwise("scale_dropout_inv", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, row_dot, g.float_constant("one", 1.f),
                  nullptr, softmax_sum);

  // P = exp(scale * Q.K^T [masked] - stats), recomputed.
  const auto s_raw = g.scores("S", CUDNN_DATA_FLOAT);
  graph.matmul("matmul_Q_KT", t.q, t.k, s_raw, rows_by_keys);
  const auto s_scaled = g.scores("S*scale", CUDNN_DATA_FLOAT);
  graph.pointwise("mul_s_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s_raw, t.scale, nullptr, s_scaled);
  const auto padded = g.padding_mask(s_scaled);
  const auto centred = g.scores("S-stats", CUDNN_DATA_FLOAT);
  graph.pointwise("sub_s_m", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, padded, stats, nullptr, centred);
  const auto masked = g.band_mask(centred);
  const auto probs = g.scores("P", CUDNN_DATA_FLOAT);
  graph.pointwise("exp_s", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, masked, nullptr, nullptr, probs);

  // dV = P^T.dO (summed over each K/V head's query heads when grouped).
  const Dims transposed_scores = {h * sq * skv, sq * skv, 1, skv};
  const auto probs_t = g.virtual_tensor("P^T", io, {b, h, skv, sq}, transposed_scores);
  graph.reshape("reshape_p", probs, probs_t);
  auto per_head_sum = [&](const char* name, const char* matmul_name, cudnnBackendDescriptor_t a,
                          cudnnBackendDescriptor_t bt, cudnnBackendDescriptor_t out) {
    if (h == h_kv) return graph.matmul(matmul_name, a, bt, out, keys_by_rows);
    const auto full = g.virtual_tensor(name, io, {b, h, skv, d}, packed_strides(h, skv, d));
    graph.matmul(matmul_name, a, bt, full, keys_by_rows);
    graph.reduction(fmt::format("reduce {}", name), CUDNN_REDUCE_TENSOR_ADD, full, out);
  };
  per_head_sum("dV per query head", "matmul_pT_dO", probs_t, d_o, dv);

  // dS = P o (dO.V^T - D) * scale.
  const auto dp = g.scores("dP", CUDNN_DATA_FLOAT);
  graph.matmul("matmul_dO_VT", d_o, v_t, dp, rows_by_keys);
  const auto dp_centred = g.scores("dP-D", CUDNN_DATA_FLOAT);
  graph.pointwise("sub_dP_softmax_sum", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, softmax_sum, nullptr, dp_centred);
  const auto ds_unscaled = g.scores("P*(dP-D)", CUDNN_DATA_FLOAT);
  graph.pointwise("mul_dP_exp_s", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp_centred, probs, nullptr, ds_unscaled);
  const auto ds = g.scores("dS", CUDNN_DATA_FLOAT);
  graph.pointwise("mul_dS_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, ds_unscaled, t.scale, nullptr, ds);

  // dK = dS^T.Q (summed over the group when grouped).
  const auto ds_t = g.virtual_tensor("dS^T", io, {b, h, skv, sq}, transposed_scores);
  graph.reshape("reshape_dS", ds, ds_t);
  per_head_sum("dK per query head", "matmul_dST_Q", ds_t, t.q, dk);

  // dQ = dS.K, accumulated in fp32 in memory (dq_accum), then converted.
  const auto k_view = g.virtual_tensor("K", io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d));
  graph.reshape("reshape_k", t.k, k_view);
  const auto dq_accum = graph.tensor({"dQ accumulator", sdpa_uid::dq_accum, CUDNN_DATA_FLOAT, {b, h, sq, d},
                                      packed_strides(h, sq, d)});
  graph.matmul("matmul_dS_K", ds, k_view, dq_accum, {.m = t.seq_len_q, .k = t.seq_len_kv});
  graph.pointwise("identity_dQ", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, dq_accum, nullptr, nullptr, dq);
  return g.take_constants();
}

}  // namespace attnprof
