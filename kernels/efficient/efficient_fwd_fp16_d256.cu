// efficient forward: fp16, head-dim bucket 256.
#include "efficient/efficient_launch.cuh"

template struct attnprof::kernels::efficient::EfficientForward<attnprof::DType::fp16, 256, false>;
