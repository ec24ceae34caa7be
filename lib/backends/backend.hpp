// The one interface every attention backend implements, and the registry that names them.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/device_properties.hpp"
#include "core/types.hpp"

namespace attnprof {

// Device pointers of one problem, in the layouts core/types.hpp (AttentionShape) describes:
// dense [batch, heads, seq, head_dim], packed ragged, or a paged K/V cache. The sequence
// arrays are device int32 and set only where the shape needs them; the problem's shape holds
// the same lengths on the host.
struct AttentionBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;         // [batch, heads, seq_q] natural-log logsumexp (padded); may be null
  const float* bias = nullptr;  // [seq_q, seq_kv] additive fp32 bias when problem.has_bias
  const int* seq_lens_q = nullptr;     // [batch] q_len(b) when shape.ragged()
  const int* seq_lens_kv = nullptr;    // [batch] kv_len(b) when shape.ragged()
  const int* cu_seqlens_q = nullptr;   // [batch + 1] when shape.packed_q()
  const int* cu_seqlens_kv = nullptr;  // [batch + 1] when shape.packed_kv()
  const int* block_table = nullptr;    // [batch, pages_per_sequence] when shape.paged()
};

// Device pointers of one backward pass (dense layouts only: core/types.hpp): the forward's inputs,
// its output O and logsumexp (natural log, [batch, heads, seq_q] fp32) as the backend's own forward
// wrote them, the upstream gradient dO (like O), and the gradients it writes, dQ like q, dK and dV
// like k and v.
struct BackwardBuffers {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const float* lse = nullptr;
  const void* d_o = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
};

// Why a backend cannot run something; empty optional means it can.
using Unsupported = std::optional<std::string>;

// Thrown by prepare() when only building the plan shows that this problem cannot run here
// (e.g. cuDNN finds no engine for it). The runner records the case as skipped with the
// message and goes on; any other exception marks the case failed.
class BackendUnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // Can this backend run at all on this device and with the libraries loaded? Cheap, no allocation.
  virtual Unsupported check_device(const DeviceProperties& device) const = 0;

  // Can it run this problem? Checked before any memory is allocated for the case.
  virtual Unsupported check_problem(const AttentionProblem& problem) const = 0;

  // Can it run this problem's backward (problem.pass is backward)? Asked after check_problem,
  // before any allocation. A backend without a backward says so here, and its backward cases are
  // skipped with that reason.
  virtual Unsupported check_backward(const AttentionProblem& problem) const {
    (void)problem;
    return std::string("no backward yet for this backend");
  }

  // Host-side set-up for a problem (handles, workspace, plans). Runs inside the NVTX `plan`
  // phase and may be called again for the next case; cache what can be reused. For a backward
  // problem it sets up both passes: the forward that gives O and the logsumexp, and the backward.
  virtual void prepare(const AttentionProblem& problem, cudaStream_t stream) = 0;

  // Enqueue one forward pass on `stream`. Must not synchronize. For a backward problem it must
  // also write buffers.lse, which the backward reads.
  virtual void run(const AttentionProblem& problem, const AttentionBuffers& buffers,
                   cudaStream_t stream) = 0;

  // Enqueue one backward pass on `stream` (only for problems check_backward accepted): dQ, dK, dV
  // from buffers; nothing else is written that a later backward reads. Must not synchronize.
  virtual void run_backward(const AttentionProblem& problem, const BackwardBuffers& buffers, cudaStream_t stream) {
    (void)problem;
    (void)buffers;
    (void)stream;
    throw std::logic_error("run_backward called on a backend without a backward");
  }
};

struct BackendInfo {
  std::string name;         // "efficient", "flash:fa2", "manual:in_place"
  std::string description;  // one line for `attnprof backends`
  std::function<std::unique_ptr<AttentionBackend>()> make;
};

// Every backend variant this build knows, in the order a sweep runs them.
const std::vector<BackendInfo>& backend_registry();
const BackendInfo* find_backend(std::string_view name);

// Names a user may write: every variant ("manual:in_place") and every family ("manual").
std::vector<std::string> accepted_backend_names();

// Expands families into their variants, keeping the user's order and dropping repeats.
// Throws UsageError on an unknown name.
std::vector<std::string> expand_backend_names(const std::vector<std::string>& names);

}  // namespace attnprof
