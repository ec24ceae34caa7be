// log2(e), for host and device code that turns a natural-log scale into the exp2 the kernels use
// (C++17: nvcc's dialect here has no std::numbers).
#pragma once

namespace attnprof::kernels {

inline constexpr float kLog2e = 1.4426950408889634f;

}  // namespace attnprof::kernels
