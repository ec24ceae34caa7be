// A ragged batch and a paged K/V cache the way a plain PyTorch program meets them before a dense
// attention call (the math and manual backends): packed q, k, v padded to the longest sequence,
// a paged cache gathered into a contiguous K and V, and the output padded until its valid rows
// are copied back into the packed o. Each copy is its own kernel launch (kernels/elementwise/
// ragged_layout.hpp), every call, so the trace shows what the program pays for.
#pragma once

#include <cuda_runtime_api.h>

#include "backends/backend.hpp"
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

}  // namespace attnprof
