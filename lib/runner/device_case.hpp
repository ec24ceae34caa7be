// Device memory of one case: inputs uploaded from HostInputs, outputs poisoned before each
// checked run and read back for verification.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "backends/backend.hpp"
#include "gpu/device_memory.hpp"
#include "runner/host_inputs.hpp"
#include "runner/reference.hpp"

namespace attnprof {

class DeviceCase {
 public:
  explicit DeviceCase(const HostInputs& inputs);

  AttentionBuffers buffers() const;
  // Fills o and lse with the poison pattern (NaN in every format).
  void poison_outputs(cudaStream_t stream);
  std::vector<float> read_output(cudaStream_t stream) const;
  std::vector<float> read_lse(cudaStream_t stream) const;

 private:
  AttentionProblem problem_;
  DeviceBuffer q_, k_, v_, o_, lse_, bias_;
};

// prepare + poison + one run + read back + compare with the float64 reference. Synchronizes.
// `check_lse` also compares the logsumexp the backend wrote (backends that write one).
Verification run_and_verify(AttentionBackend& backend, const HostInputs& inputs, DeviceCase& device,
                            cudaStream_t stream, bool check_lse = false);

}  // namespace attnprof
