// What a plain PyTorch program builds around a dense attention call (the math and manual
// backends): the mask of a causal or windowed band, and, for a ragged batch or a paged K/V
// cache, packed q, k, v padded to the longest sequence,
// a paged cache gathered into a contiguous K and V, and the output padded until its valid rows
// are copied back into the packed o. Each copy is its own kernel launch (kernels/elementwise/
// ragged_layout.hpp), every call, so the trace shows what the program pays for.
#pragma once

#include <cuda_runtime_api.h>

#include "backends/backend.hpp"
#include "core/mask_bounds.hpp"
#include "gpu/device_memory.hpp"

namespace attnprof {

class PaddedBatch {
 public:
  // The padded copies a problem needs; in prepare(), never in run().
  void reserve(const AttentionProblem& p);

  // q, k, v and o as the dense path reads and writes them: the problem's own buffers, or padded /
  // gathered copies (pad_ragged q; gather_paged_kv k and v, or pad_ragged k and v).
  struct Dense {
    const void* q;
    const void* k;
    const void* v;
    void* o;
  };
  Dense pad(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream);

  // The valid rows of the padded output back into the packed o (unpad_ragged); nothing for a
  // dense q.
  void unpad(const AttentionProblem& p, const AttentionBuffers& io, cudaStream_t stream);

 private:
  DeviceBuffer q_, k_, v_, o_;
};

// The dense [seq_q, seq_kv] boolean mask of a band as PyTorch builds it every call:
// torch.ones(L, S, dtype=bool).tril(high) [.triu(low) for a window's left edge], top-left causal
// being plain .tril(). Uses `buffer` and `spare` (seq_q x seq_kv each) and returns the one holding
// the mask.
bool* build_band_mask(const MaskBounds& mask, int seq_q, int seq_kv, bool* buffer, bool* spare, cudaStream_t stream);

}  // namespace attnprof
