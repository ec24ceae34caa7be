// Device memory of one case: q, k, v (and bias) drawn on the GPU from (problem, seed) by the
// counter-based generator, so no host copy of them exists, in the shape's layout (dense, packed
// ragged, paged: core/types.hpp), with its sequence arrays; outputs poisoned before each checked
// run; only the rows verification checks are read back.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.hpp"
#include "gpu/device_memory.hpp"
#include "reference/gradients.hpp"
#include "reference/inputs.hpp"
#include "reference/verification.hpp"

namespace attnprof {

class DeviceCase {
 public:
  // Allocates q, k, v, o, lse (and bias) and fills the inputs on `stream`; synchronizes it, so
  // the buffers are ready on any stream when it returns. A backward problem also gets dO (drawn
  // like the inputs) and dQ, dK, dV.
  DeviceCase(const AttentionProblem& problem, std::uint64_t seed, cudaStream_t stream);

  // Device memory the constructor takes at its peak: q, k, v, o as stored (a paged pool holds
  // whole pages), lse, bias, and the logical copy and row map a packed or paged tensor is drawn
  // through. The sweep checks it against free memory before anything is allocated.
  static double device_bytes(const AttentionProblem& problem);

  const AttentionProblem& problem() const { return problem_; }
  std::uint64_t seed() const { return seed_; }
  AttentionBuffers buffers() const;
  // The backward's pointers (a backward problem only): o and lse as the forward left them.
  BackwardBuffers backward_buffers() const;

  // Fills o and lse with the poison pattern (NaN in every format).
  void poison_outputs(cudaStream_t stream);
  // Fills dQ, dK and dV with it (a backward problem).
  void poison_gradients(cudaStream_t stream);

  // The gradient rows `rows` names (gathered on the device, copied back in one piece) and a
  // device-side NaN/inf count over the whole of dQ, dK and dV. Synchronizes `stream`.
  GradientOutputs read_gradient_rows(const GradientRows& rows, cudaStream_t stream);
  // dQ, dK and dV whole, one after the other, for tests on small problems (bitwise repeatability).
  std::vector<float> read_gradients(cudaStream_t stream) const;

  // The run-to-run check of the verification: keep_gradients copies dQ, dK and dV on the device
  // (false, and no copy, when that does not fit in free memory beside a margin for the backend);
  // after another backward, compare_with_kept counts per gradient the elements that differ bitwise
  // from the copy (read back in chunks, compared on the host) and frees it. Synchronize `stream`.
  bool keep_gradients(cudaStream_t stream);
  GradientRepeatability compare_with_kept(cudaStream_t stream);

  // The output rows `rows` (ascending logical flat indices over [batch, heads, seq_q], never the
  // padding of a ragged sequence) and their
  // logsumexp, gathered on the device and copied back in one piece, plus a device-side count of
  // NaN/inf over the whole output. Synchronizes `stream`.
  OutputRows read_rows(const std::vector<std::int64_t>& rows, cudaStream_t stream);

  // The whole output / logsumexp, for tests on small problems (bitwise repeatability, untouched
  // poison); the runner reads rows only.
  std::vector<float> read_output(cudaStream_t stream) const;
  std::vector<float> read_lse(cudaStream_t stream) const;

 private:
  AttentionProblem problem_;
  std::uint64_t seed_;
  DeviceBuffer q_, k_, v_, o_, lse_, bias_;
  DeviceBuffer d_o_, dq_, dk_, dv_;  // a backward problem's
  DeviceBuffer kept_gradients_;      // dQ | dK | dV of the first run, during the run-to-run check

  DeviceBuffer sequences_;         // int32 lengths, cumulative offsets and block table (ragged, paged)
  std::ptrdiff_t lens_q_at_ = -1, lens_kv_at_ = -1, cu_q_at_ = -1, cu_kv_at_ = -1, table_at_ = -1;
  std::vector<int> cu_q_;          // host copy of q's cumulative offsets (packed q)
  std::vector<int> block_table_;   // host copy (paged)
  DeviceBuffer row_index_, gathered_, scan_;  // read_rows' scratch, grown as needed
};

// prepare + poison + one run + read back the checked rows + compare with the float64
// reference. Synchronizes. `options.compare_lse` also checks the logsumexp the backend wrote.
// A backward problem: prepare + poison o and lse + the forward + poison the gradients + one
// backward + the checked gradient rows against the float64 reference gradients.
Verification run_and_verify(AttentionBackend& backend, DeviceCase& device, cudaStream_t stream,
                            const VerifyOptions& options = {}, std::int64_t max_rows = kDefaultRowsChecked);

// The forward a backward case runs once, untimed, for its O and logsumexp: o and lse poisoned
// first, so a forward that leaves the logsumexp unwritten shows as NaN in the backward.
void run_forward_for_backward(AttentionBackend& backend, DeviceCase& device, cudaStream_t stream);

}  // namespace attnprof
