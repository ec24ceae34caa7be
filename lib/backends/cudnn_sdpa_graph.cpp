#include "backends/cudnn_sdpa_graph.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "backends/cudnn_info.hpp"
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
};

// Q, V, O as stored; K either as stored [b, h_kv, s_kv, d] (native op) or as the transposed view
// [b, h_kv, d, s_kv] over the same memory (composite bmm1 computes Q x K^T). K and V carry
// heads_kv heads: the fused attention broadcasts each over its heads / heads_kv query heads.
SdpaTensors add_io_tensors(OperationGraphBuilder& graph, const AttentionProblem& p, bool k_transposed) {
  const AttentionShape& s = p.shape;
  const std::int64_t b = s.batch, h = s.heads, h_kv = s.kv_heads(), sq = s.seq_q, skv = s.seq_kv, d = s.head_dim;
  const cudnnDataType_t io = io_data_type(p.dtype);
  SdpaTensors t{};
  t.q = graph.tensor({"Q", sdpa_uid::q, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  if (k_transposed)
    t.k = graph.tensor({"K^T", sdpa_uid::k, io, {b, h_kv, d, skv}, {h_kv * skv * d, skv * d, 1, d}});
  else
    t.k = graph.tensor({"K", sdpa_uid::k, io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d)});
  t.v = graph.tensor({"V", sdpa_uid::v, io, {b, h_kv, skv, d}, packed_strides(h_kv, skv, d)});
  t.o = graph.tensor({"O", sdpa_uid::o, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  t.scale = graph.tensor({"attn_scale", sdpa_uid::scale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true});
  return t;
}

void add_native(OperationGraphBuilder& graph, const AttentionProblem& p) {
  const SdpaTensors t = add_io_tensors(graph, p, /*k_transposed=*/false);
  graph.sdpa_forward("sdpa", t.q, t.k, t.v, t.o, t.scale);
}

// bmm1 -> scale -> [band mask] -> softmax (max, sub, exp, sum, div, plus the log-sum-exp stats
// the flash pattern carries even when nobody reads them) -> bmm2. Intermediates are virtual
// fp32, except the mask's index/boolean tensors and the probabilities, which bmm2 takes in the
// I/O type; this is the order and typing cuDNN-frontend's composite SDPA node emits.
std::vector<ByValueScalar> add_composite(OperationGraphBuilder& graph, const AttentionProblem& p,
                                         const SdpaGraphVariant& variant) {
  const AttentionShape& s = p.shape;
  const std::int64_t b = s.batch, h = s.heads, sq = s.seq_q, skv = s.seq_kv;
  const SdpaTensors t = add_io_tensors(graph, p, /*k_transposed=*/true);

  std::int64_t next_uid = 100;
  auto scores = [&](const char* name, cudnnDataType_t type) {
    return graph.tensor({name, next_uid++, type, {b, h, sq, skv}, packed_strides(h, sq, skv), true});
  };
  auto row_stat = [&](const char* name) {
    return graph.tensor({name, next_uid++, CUDNN_DATA_FLOAT, {b, h, sq, 1}, {h * sq, sq, 1, 1}, true});
  };
  std::vector<ByValueScalar> constants;
  auto constant = [&](const char* name, ByValueScalar value) {
    value.uid = sdpa_uid::first_constant + static_cast<std::int64_t>(constants.size());
    constants.push_back(value);
    return graph.tensor({name, value.uid, value.data_type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true});
  };
  auto int32_constant = [&](const char* name, int value) {
    return constant(name, {.data_type = CUDNN_DATA_INT32, .as_int32 = static_cast<std::int32_t>(value)});
  };
  auto float_constant = [&](const char* name, float value) {
    return constant(name, {.data_type = CUDNN_DATA_FLOAT, .as_float = value});
  };

  const auto s_raw = scores("S", CUDNN_DATA_FLOAT);
  graph.matmul("bmm1 Q.K^T", t.q, t.k, s_raw);
  const auto s_scaled = scores("S*scale", CUDNN_DATA_FLOAT);
  graph.pointwise("attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s_raw, t.scale, nullptr, s_scaled);
  auto logits = s_scaled;

  // Each side of the band as cudnn-frontend's composite diagonal-band node lowers it (the shape
  // the fusion engines recognise): its own row and column GEN_INDEX over the scores, the row
  // (right side) or the column (left side) shifted by by-value constants, one comparison, and
  // BINARY_SELECT(keep ? S : -inf). Right side first, as the frontend orders them.
  const SdpaBand band = sdpa_band(p);
  auto gen_index = [&](const char* name, std::int64_t axis) {
    const auto index = scores(name, CUDNN_DATA_INT32);
    graph.pointwise(name, CUDNN_POINTWISE_GEN_INDEX, variant.gen_index_compute, logits, nullptr, nullptr, index, axis);
    return index;
  };
  auto select = [&](const char* name, cudnnBackendDescriptor_t keep) {
    const auto minus_inf = float_constant("-inf", -std::numeric_limits<float>::infinity());
    const auto masked = scores(name, CUDNN_DATA_FLOAT);
    // BINARY_SELECT: y = t ? x : b.
    graph.pointwise(name, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, logits, minus_inf, keep, masked);
    logits = masked;
  };
  if (band.right_bound) {
    // Keep key j of row i when i [+ s_kv - s_q] [+ right] >= j.
    auto row = gen_index("row_index", 2);
    const auto col = gen_index("col_index", 3);
    auto shift_row = [&](const char* name, cudnnPointwiseMode_t mode, const char* constant_name, int value) {
      const auto shifted = scores(name, CUDNN_DATA_INT32);
      graph.pointwise(name, mode, CUDNN_DATA_INT32, row, int32_constant(constant_name, value), nullptr, shifted);
      row = shifted;
    };
    if (band.bottom_right) {
      shift_row("row+s_kv", CUDNN_POINTWISE_ADD, "s_kv", s.seq_kv);
      shift_row("row+s_kv-s_q", CUDNN_POINTWISE_SUB, "s_q", s.seq_q);
    }
    if (*band.right_bound != 0) shift_row("row+right_bound", CUDNN_POINTWISE_ADD, "right_bound", *band.right_bound);
    const auto keep = scores("row>=col", CUDNN_DATA_BOOLEAN);
    graph.pointwise("row_ge_col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    select("S_masked_right", keep);
  }
  if (band.left_bound) {
    // Keep key j of row i when j + left_bound [- (s_kv - s_q)] > i; with fixed lengths one fp32
    // constant carries both terms (cudnn-frontend's form).
    const auto row = gen_index("row_index (left)", 2);
    const auto col = gen_index("col_index (left)", 3);
    const auto shifted = scores("col+left_bound", CUDNN_DATA_FLOAT);
    const auto bound = float_constant("left_bound", static_cast<float>(*band.left_bound - band.shift));
    graph.pointwise("col+left_bound", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, col, bound, nullptr, shifted);
    const auto keep = scores("col+left_bound>row", CUDNN_DATA_BOOLEAN);
    graph.pointwise("col_gt_row", CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, shifted, row, nullptr, keep);
    select("S_masked_left", keep);
  }

  const auto row_max = row_stat("max");
  graph.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, logits, row_max);
  const auto shifted = scores("S-max", CUDNN_DATA_FLOAT);
  graph.pointwise("softmax sub", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, logits, row_max, nullptr, shifted);
  const auto exps = scores("exp(S-max)", CUDNN_DATA_FLOAT);
  graph.pointwise("softmax exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, nullptr, nullptr, exps);
  const auto row_sum = row_stat("sum_exp");
  graph.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  const auto log_sum = row_stat("log(sum_exp)");
  graph.pointwise("stats log", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, row_sum, nullptr, nullptr, log_sum);
  const auto stats = row_stat("stats");
  graph.pointwise("stats add", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, row_max, log_sum, nullptr, stats);
  const auto probs = scores("P", io_data_type(p.dtype));
  graph.pointwise("softmax div", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, exps, row_sum, nullptr, probs);

  graph.matmul("bmm2 P.V", probs, t.v, t.o);
  return constants;
}

}  // namespace

SdpaBand sdpa_band(const AttentionProblem& p) {
  SdpaBand band;
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
  if (!band.masked()) return "composite pattern graph";
  return fmt::format("composite pattern graph ({}, GEN_INDEX math {})", describe_band(band),
                     variant.gen_index_compute == CUDNN_DATA_INT32 ? "int32" : "fp32");
}

std::vector<SdpaGraphVariant> sdpa_graph_variants(const AttentionProblem& problem, std::size_t cudnn_version) {
  std::vector<SdpaGraphVariant> variants;
  if (sdpa_band(problem).masked()) {
    // The native op takes a mask only from cuDNN 9.21 (as a score-modifier subgraph).
    variants.push_back({SdpaGraphKind::composite, CUDNN_DATA_INT32});
    variants.push_back({SdpaGraphKind::composite, CUDNN_DATA_FLOAT});
    return variants;
  }
  if (cudnn_version >= kNativeSdpaMinVersion) variants.push_back({SdpaGraphKind::native_op});
  variants.push_back({SdpaGraphKind::composite});
  return variants;
}

std::vector<ByValueScalar> add_sdpa_forward(OperationGraphBuilder& graph, const AttentionProblem& problem,
                                            const SdpaGraphVariant& variant) {
  if (variant.kind == SdpaGraphKind::native_op) {
    add_native(graph, problem);
    return {};
  }
  return add_composite(graph, problem, variant);
}

}  // namespace attnprof
