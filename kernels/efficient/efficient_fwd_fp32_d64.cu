// efficient forward: fp32, head-dim bucket 64.
#include "efficient/efficient_launch.cuh"

template struct attnprof::kernels::efficient::EfficientForward<attnprof::DType::fp32, 64, false>;
