// The cudnn backend with options, for tests and probes; the registry makes the default one
// (backends/factories.hpp).
#pragma once

#include <memory>

#include "backends/backend.hpp"

namespace attnprof {

struct CudnnBackendOptions {
  // false: check_problem lets through the bands cudnn-frontend refuses for every cuDNN version
  // (seq_q > seq_kv with a bottom-right or left-bounded band, rows that see no key), so a probe
  // can see what the loaded library does with them. Version gates still apply.
  bool check_band_surface = true;
};

std::unique_ptr<AttentionBackend> make_cudnn_backend(const CudnnBackendOptions& options);

}  // namespace attnprof
