// efficient forward: fp16, head-dim bucket 64, ragged batch (per-sequence lengths, packed layouts).
#include "efficient/efficient_launch.cuh"

template struct attnprof::kernels::efficient::EfficientForward<attnprof::DType::fp16, 64, true>;
