#include "backends/cudnn_sdpa_graph.hpp"

#include <fmt/format.h>

namespace attnprof {
namespace {

using Dims = std::vector<std::int64_t>;

cudnnDataType_t io_data_type(DType dtype) {
  return dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;  // check_problem rejects fp32
}

// Contiguous [b, h, rows, cols] strides.
Dims packed_strides(std::int64_t h, std::int64_t rows, std::int64_t cols) {
  return {h * rows * cols, rows * cols, cols, 1};
}

struct SdpaTensors {
  cudnnBackendDescriptor_t q, k, v, o, scale;
};

// Q, V, O as stored; K either as stored [b, h, s_kv, d] (native op) or as the transposed view
// [b, h, d, s_kv] over the same memory (composite bmm1 computes Q x K^T).
SdpaTensors add_io_tensors(OperationGraphBuilder& graph, const AttentionProblem& p, bool k_transposed) {
  const AttentionShape& s = p.shape;
  const std::int64_t b = s.batch, h = s.heads, sq = s.seq_q, skv = s.seq_kv, d = s.head_dim;
  const cudnnDataType_t io = io_data_type(p.dtype);
  SdpaTensors t{};
  t.q = graph.tensor({"Q", sdpa_uid::q, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  if (k_transposed)
    t.k = graph.tensor({"K^T", sdpa_uid::k, io, {b, h, d, skv}, {h * skv * d, skv * d, 1, d}});
  else
    t.k = graph.tensor({"K", sdpa_uid::k, io, {b, h, skv, d}, packed_strides(h, skv, d)});
  t.v = graph.tensor({"V", sdpa_uid::v, io, {b, h, skv, d}, packed_strides(h, skv, d)});
  t.o = graph.tensor({"O", sdpa_uid::o, io, {b, h, sq, d}, packed_strides(h, sq, d)});
  t.scale = graph.tensor({"attn_scale", sdpa_uid::scale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true});
  return t;
}

void add_native(OperationGraphBuilder& graph, const AttentionProblem& p) {
  const SdpaTensors t = add_io_tensors(graph, p, /*k_transposed=*/false);
  graph.sdpa_forward("sdpa", t.q, t.k, t.v, t.o, t.scale);
}

// bmm1 -> scale -> [causal mask] -> softmax (max, sub, exp, sum, div, plus the log-sum-exp stats
// the flash pattern carries even when nobody reads them) -> bmm2. Intermediates are virtual
// fp32, except the mask's index/boolean tensors and the probabilities, which bmm2 takes in the
// I/O type; this is the order and typing cuDNN-frontend's composite SDPA node emits.
void add_composite(OperationGraphBuilder& graph, const AttentionProblem& p, const SdpaGraphVariant& variant) {
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

  const auto s_raw = scores("S", CUDNN_DATA_FLOAT);
  graph.matmul("bmm1 Q.K^T", t.q, t.k, s_raw);
  const auto s_scaled = scores("S*scale", CUDNN_DATA_FLOAT);
  graph.pointwise("attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s_raw, t.scale, nullptr, s_scaled);
  auto logits = s_scaled;

  if (p.causal) {
    // Top-left causal (PyTorch's is_causal): query row i keeps keys 0..i, i.e. row >= col.
    const auto row = scores("row_index", CUDNN_DATA_INT32);
    graph.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, variant.gen_index_compute, logits, nullptr, nullptr,
                    row, /*axis=*/2);
    const auto col = scores("col_index", CUDNN_DATA_INT32);
    graph.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, variant.gen_index_compute, logits, nullptr, nullptr,
                    col, /*axis=*/3);
    const auto keep = scores("row>=col", CUDNN_DATA_BOOLEAN);
    graph.pointwise("row_ge_col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    const auto minus_inf = graph.tensor({"-inf", sdpa_uid::negative_infinity, CUDNN_DATA_FLOAT, {1, 1, 1, 1},
                                         {1, 1, 1, 1}, false, true});
    const auto masked = scores("S_masked", CUDNN_DATA_FLOAT);
    // BINARY_SELECT: y = t ? x : b.
    graph.pointwise("causal_select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, logits, minus_inf, keep, masked);
    logits = masked;
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
}

}  // namespace

std::string describe(const SdpaGraphVariant& variant, bool causal) {
  if (variant.kind == SdpaGraphKind::native_op) return "native SDPA_FWD op";
  if (!causal) return "composite pattern graph";
  return fmt::format("composite pattern graph (causal mask, GEN_INDEX math {})",
                     variant.gen_index_compute == CUDNN_DATA_INT32 ? "int32" : "fp32");
}

std::vector<SdpaGraphVariant> sdpa_graph_variants(const AttentionProblem& problem, std::size_t cudnn_version) {
  std::vector<SdpaGraphVariant> variants;
  if (problem.causal) {
    variants.push_back({SdpaGraphKind::composite, CUDNN_DATA_INT32});
    variants.push_back({SdpaGraphKind::composite, CUDNN_DATA_FLOAT});
    return variants;
  }
  if (cudnn_version >= kNativeSdpaMinVersion) variants.push_back({SdpaGraphKind::native_op});
  variants.push_back({SdpaGraphKind::composite});
  return variants;
}

void add_sdpa_forward(OperationGraphBuilder& graph, const AttentionProblem& problem, const SdpaGraphVariant& variant) {
  if (variant.kind == SdpaGraphKind::native_op)
    add_native(graph, problem);
  else
    add_composite(graph, problem, variant);
}

std::vector<std::int64_t> sdpa_bound_uids(const AttentionProblem& problem, const SdpaGraphVariant& variant) {
  std::vector<std::int64_t> uids = {sdpa_uid::q, sdpa_uid::k, sdpa_uid::v, sdpa_uid::o, sdpa_uid::scale};
  if (variant.kind == SdpaGraphKind::composite && problem.causal) uids.push_back(sdpa_uid::negative_infinity);
  return uids;
}

}  // namespace attnprof
