// attnprof_decode_capi: flash:fa2's bf16 head-dim-128 decode kernels (split rule included) behind
// plain C functions, so docs/perf/decode_same_buffers.py can call them through ctypes on PyTorch's
// own tensors: ours and PyTorch's SDPA then read the same bytes, in one process, timed the same way.
// Dense K/V [batch, heads_kv, seq_kv, 128], one query row per head, no mask. Performance work
// only: `cmake --build build --target attnprof_decode_capi` (not part of the default build).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "common/log2e.hpp"
#include "decode/decode.hpp"
#include "decode/decode_instances.hpp"

namespace {

using Instance = attnprof::kernels::DecodeForward<attnprof::DType::bf16, 128>;

// The device's SMs and the instance's blocks per SM, found once (prepare() also raises the
// kernels' shared-memory limit): the split rule's inputs and, multiplied, DecodeParams::wave_blocks.
struct Occupancy {
  int sm_count = 0;
  int blocks_per_sm = 0;
};

cudaError_t occupancy(Occupancy* out) {
  static Occupancy cached;
  if (cached.sm_count == 0) {
    Occupancy found;
    int device = 0;
    cudaError_t error = Instance::prepare(&found.blocks_per_sm);
    if (error == cudaSuccess) error = cudaGetDevice(&device);
    if (error == cudaSuccess) error = cudaDeviceGetAttribute(&found.sm_count, cudaDevAttrMultiProcessorCount, device);
    if (error != cudaSuccess) return error;
    cached = found;
  }
  *out = cached;
  return cudaSuccess;
}

}  // namespace

extern "C" {

const char* attnprof_decode_error_string(int status) { return cudaGetErrorString(static_cast<cudaError_t>(status)); }

// The split count flash:fa2's rule picks for this problem (0 on a CUDA error; see *status).
int attnprof_decode_splits(int batch, int heads_kv, int seq_kv, int* status) {
  Occupancy occ;
  const cudaError_t error = occupancy(&occ);
  *status = static_cast<int>(error);
  if (error != cudaSuccess) return 0;
  const int key_tiles =
      std::max(1, (seq_kv + attnprof::kernels::kDecodeBlockKeys - 1) / attnprof::kernels::kDecodeBlockKeys);
  return attnprof::kernels::choose_decode_splits(attnprof::kernels::decode_split_inputs(
      static_cast<long long>(batch) * heads_kv, key_tiles, occ.sm_count, occ.blocks_per_sm));
}

// Floats of split workspace the caller provides when splits > 1.
long long attnprof_decode_workspace_floats(int batch, int heads, int splits) {
  return static_cast<long long>(splits) * batch * heads * (128 + 1);
}

// Enqueues the decode (splits == 1) or split-KV + combine kernels on stream; returns the launch's
// CUDA status (cudaErrorInvalidValue for a shape the kernels do not take: one block holds the
// group's heads_kv-th of the query heads, at most kDecodeMaxRows rows).
int attnprof_decode_run(const void* q, const void* k, const void* v, void* o, int batch, int heads, int heads_kv,
                        int seq_kv, int splits, float* workspace, void* stream) {
  if (batch < 1 || heads_kv < 1 || heads % heads_kv != 0 || heads / heads_kv > attnprof::kernels::kDecodeMaxRows ||
      seq_kv < 1 || splits < 1 || splits > attnprof::kernels::kDecodeMaxSplits || (splits > 1 && workspace == nullptr))
    return static_cast<int>(cudaErrorInvalidValue);
  attnprof::kernels::DecodeParams p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.batch = batch;
  p.heads = heads;
  p.heads_kv = heads_kv;
  p.group_size = heads / heads_kv;
  p.seq_q = 1;
  p.seq_kv = seq_kv;
  p.scale = 1.0f / std::sqrt(128.0f);
  p.scale_log2 = p.scale * attnprof::kernels::kLog2e;
  p.splits = splits;
  Occupancy occ;
  if (const cudaError_t error = occupancy(&occ); error != cudaSuccess) return static_cast<int>(error);
  p.wave_blocks = occ.sm_count * occ.blocks_per_sm;
  if (splits > 1) {
    p.partial_o = workspace;
    p.partial_lse = workspace + static_cast<long long>(splits) * batch * heads * 128;
  }
  Instance::launch(p, static_cast<cudaStream_t>(stream));
  return static_cast<int>(cudaGetLastError());
}

}  // extern "C"
