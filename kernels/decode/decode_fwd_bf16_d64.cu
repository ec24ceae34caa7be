// flash decode: bf16, head dim 64.
#include "decode/decode_launch.cuh"

template struct attnprof::kernels::DecodeForward<attnprof::DType::bf16, 64>;
