// The problem's sizes, softmax scale and mask, as every attention kernel reads them: FA2 forward
// (kernels/flash), decode (kernels/decode), efficient (kernels/efficient), FA2 backward
// (kernels/flash_bwd) and flash:hopper forward and backward. Each kernel family's parameters embed
// one KernelProblem; kernel_problem() fills it from an AttentionProblem, once, for all of them.
// Plain header: host code and CUDA kernels both include it (C++17, so log2(e) comes from
// common/log2e.hpp, not std::numbers).
#pragma once

#include "common/log2e.hpp"
#include "core/mask_bounds.hpp"
#include "core/types.hpp"

namespace attnprof::kernels {

// The order is not free: with scale_log2 before the mask and no head_dim, FA2 backward's tail and
// fused kernels (at 255 registers) spilled and flash:hopper backward's register count moved
// (ptxas -v of every instance file against the separate structs this replaced); this order gives
// the registers and spills those structs did.
struct KernelProblem {
  int batch = 0;
  int heads = 0;
  int heads_kv = 0;
  int group_size = 1;  // heads / heads_kv: query head h reads K/V head h / group_size
  int seq_q = 0;       // a ragged batch's longest sequence
  int seq_kv = 0;
  float scale = 0.f;       // softmax scale applied to q.k
  MaskBounds mask;         // causal and window bounds, either alignment (unbounded: every key)
  float scale_log2 = 0.f;  // scale * log2(e): the kernels exponentiate in base 2
  int head_dim = 0;  // the others' template parameter; efficient reads it at run time
};

// The sizes (the maxima of a ragged batch), the softmax scale and the mask of `problem`.
inline KernelProblem kernel_problem(const AttentionProblem& problem) {
  const AttentionShape& s = problem.shape;
  KernelProblem k;
  k.batch = s.batch;
  k.heads = s.heads;
  k.heads_kv = s.kv_heads();
  k.group_size = s.group_size();
  k.seq_q = s.seq_q;
  k.seq_kv = s.seq_kv;
  k.scale = problem.softmax_scale();
  k.scale_log2 = k.scale * kLog2e;
  k.mask = mask_bounds(problem);
  k.head_dim = s.head_dim;
  return k;
}

}  // namespace attnprof::kernels
