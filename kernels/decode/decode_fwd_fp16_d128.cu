// flash decode: fp16, head dim 128.
#include "decode/decode_launch.cuh"

template struct attnprof::kernels::DecodeForward<attnprof::DType::fp16, 128>;
