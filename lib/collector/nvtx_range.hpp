// NVTX ranges that mark the sweep (case, plan, verify, warmup, iter N), so the trace, Nsight
// Systems and any other NVTX consumer read it alike.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace attnprof {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace attnprof
