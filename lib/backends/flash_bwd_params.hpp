// What the backward kernels (kernels/flash_bwd) refuse, and their parameters for one problem and
// its buffers, shared by the two backends that run them: flash:fa2 (three kernels) and efficient (the
// fused one). The caller adds its workspace pointers to the parameters.
#pragma once

#include <string>

#include <fmt/format.h>

#include "backends/backend.hpp"
#include "core/mask_bounds.hpp"
#include "flash_bwd/flash_bwd.hpp"

namespace attnprof {

// What the backward kernels cannot take, said in `backend`'s name (the same kernels serve both).
inline Unsupported flash_bwd_unsupported(const char* backend, const AttentionProblem& problem) {
  if (!kernels::flash_bwd_has_kernel(problem.dtype, problem.shape.head_dim))
    return fmt::format("{}'s backward has kernels for bf16 and fp16 at head dims 64 and 128 (got {} d{})", backend,
                       to_string(problem.dtype), problem.shape.head_dim);
  if (problem.has_bias) return fmt::format("{}'s backward takes no additive bias (no dBias)", backend);
  return std::nullopt;
}

inline kernels::FlashBwdParams flash_bwd_params(const AttentionProblem& problem, const BackwardBuffers& buffers) {
  const AttentionShape& s = problem.shape;
  kernels::FlashBwdParams params;
  params.q = buffers.q;
  params.k = buffers.k;
  params.v = buffers.v;
  params.o = buffers.o;
  params.d_o = buffers.d_o;
  params.lse = buffers.lse;
  params.dq = buffers.dq;
  params.dk = buffers.dk;
  params.dv = buffers.dv;
  params.batch = s.batch;
  params.heads = s.heads;
  params.heads_kv = s.kv_heads();
  params.group_size = s.group_size();
  params.seq_q = s.seq_q;
  params.seq_kv = s.seq_kv;
  params.scale = problem.softmax_scale();
  params.mask = mask_bounds(problem);
  return params;
}

}  // namespace attnprof
