// Host side of one Hopper forward instantiation: the definitions behind FlashHopperForward,
// included only by the instance files (flash_hopper_fwd_<dtype>_d<dim>.cu).
#pragma once

#include <cuda_runtime.h>

#ifdef ATTNPROF_HOPPER_TIMELINE
#include <cstdio>
#include <cstdlib>
#include <vector>
#endif

#include "common/element_type.cuh"
#include "flash_hopper/flash_hopper_instances.hpp"
#include "flash_hopper/flash_hopper_kernel.cuh"

namespace attnprof::kernels {

namespace hopper {
// The kernel for a problem: 176-key tiles at head dim 128 without a mask band, else 128.
template <DType kDType, int kHeadDim, typename F>
decltype(auto) with_traits(bool masked, F&& f) {
  if constexpr (kHeadDim == 128) {
    if (!masked) return f(HopperTraits<Element<kDType>, 128, 176>{});
  }
  return f(HopperTraits<Element<kDType>, kHeadDim, 128>{});
}
}  // namespace hopper

template <DType kDType, int kHeadDim>
cudaError_t FlashHopperForward<kDType, kHeadDim>::prepare() {
  for (const bool masked : {false, true}) {
    const cudaError_t status = hopper::with_traits<kDType, kHeadDim>(masked, [](auto traits) {
      using Traits = decltype(traits);
      return cudaFuncSetAttribute(&hopper::flash_hopper_fwd_kernel<Traits>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  Traits::kSmemBytes);
    });
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

template <DType kDType, int kHeadDim>
int FlashHopperForward<kDType, kHeadDim>::block_keys(bool masked) {
  return hopper::with_traits<kDType, kHeadDim>(masked, [](auto traits) { return decltype(traits)::kBlockN; });
}

template <DType kDType, int kHeadDim>
void FlashHopperForward<kDType, kHeadDim>::launch(const hopper::HopperKernelParams& params, int blocks, bool masked,
                                                  cudaStream_t stream) {
  hopper::with_traits<kDType, kHeadDim>(masked, [&](auto traits) {
    using Traits = decltype(traits);
    hopper::flash_hopper_fwd_kernel<Traits>
        <<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
#ifdef ATTNPROF_HOPPER_TIMELINE
    // The developer's timeline (see flash_hopper_kernel.cuh): the logs of this launch, over the
    // previous launch's, as int32 blocks, kBlockN, kTimelineEvents, then int32 counts[blocks * 3]
    // and uint64 events[blocks * 3][kTimelineEvents].
    if (const char* path = std::getenv("ATTNPROF_HOPPER_TIMELINE")) {
      const int logged = blocks < hopper::kTimelineBlocks ? blocks : hopper::kTimelineBlocks;
      std::vector<int> counts(static_cast<size_t>(logged) * 3);
      std::vector<unsigned long long> events(counts.size() * hopper::kTimelineEvents);
      auto check = [](cudaError_t status, const char* call) {
        if (status == cudaSuccess) return;
        std::fprintf(stderr, "flash:hopper timeline: %s failed: %s\n", call, cudaGetErrorString(status));
        std::exit(3);
      };
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      check(cudaMemcpyFromSymbol(counts.data(), hopper::g_timeline_count, counts.size() * sizeof(int)),
            "cudaMemcpyFromSymbol(counts)");
      check(cudaMemcpyFromSymbol(events.data(), hopper::g_timeline, events.size() * 8), "cudaMemcpyFromSymbol(events)");
      std::FILE* f = std::fopen(path, "wb");
      if (f == nullptr) {
        std::fprintf(stderr, "flash:hopper timeline: cannot write %s\n", path);
        std::exit(3);
      }
      const int header[3] = {logged, Traits::kBlockN, hopper::kTimelineEvents};
      const bool written = std::fwrite(header, sizeof(int), 3, f) == 3 &&
                           std::fwrite(counts.data(), sizeof(int), counts.size(), f) == counts.size() &&
                           std::fwrite(events.data(), 8, events.size(), f) == events.size();
      if (std::fclose(f) != 0 || !written) {
        std::fprintf(stderr, "flash:hopper timeline: writing %s failed\n", path);
        std::exit(3);
      }
    }
#endif
  });
}

}  // namespace attnprof::kernels
