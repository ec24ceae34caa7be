// The two cuDNN graphs of attention forward over [batch, heads, seq, head_dim] tensors:
// - native: cuDNN 9.13.1+'s single SDPA_FWD operation (Q, K, V, O, by-value scale; no stats);
//   it has no causal attribute before 9.21, so it serves non-causal problems only;
// - composite: the "flash fused attention fprop" pattern of matmul, pointwise and reduction
//   operations that cuDNN 9 fuses into one kernel; used for causal, and for non-causal where
//   the native operation is missing or rejected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cudnn_graph.hpp"
#include "core/types.hpp"

namespace attnprof {

enum class SdpaGraphKind { native_op, composite };

struct SdpaGraphVariant {
  SdpaGraphKind kind = SdpaGraphKind::composite;
  // Math precision of the two GEN_INDEX operations of the causal mask (composite only). cuDNN-frontend
  // used INT32 up to 1.1x and lets it default to the graph's FLOAT compute type since; both are tried.
  cudnnDataType_t gen_index_compute = CUDNN_DATA_INT32;
};

// "native SDPA_FWD op" / "composite pattern graph (causal mask, GEN_INDEX math int32)".
std::string describe(const SdpaGraphVariant& variant, bool causal);

// Unique ids of the tensors bound at execution; intermediates use ids from 100 on.
namespace sdpa_uid {
inline constexpr std::int64_t q = 1, k = 2, v = 3, o = 4, scale = 5, negative_infinity = 6;
}

// The first cuDNN release with CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR usable for fp16/bf16
// (cuDNN-frontend gates its "unified" SDPA node on this version).
inline constexpr std::size_t kNativeSdpaMinVersion = 91301;

// The variants worth trying for a problem on a library, best first.
std::vector<SdpaGraphVariant> sdpa_graph_variants(const AttentionProblem& problem, std::size_t cudnn_version);

// Adds the variant's tensors and finalized operations to `graph` (which is not yet built).
void add_sdpa_forward(OperationGraphBuilder& graph, const AttentionProblem& problem, const SdpaGraphVariant& variant);

// Ids of the graph's tensors the variant pack binds: q, k, v, o, scale[, -inf].
std::vector<std::int64_t> sdpa_bound_uids(const AttentionProblem& problem, const SdpaGraphVariant& variant);

}  // namespace attnprof
