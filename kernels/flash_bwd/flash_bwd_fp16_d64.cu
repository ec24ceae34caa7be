// flash backward: fp16, head dim 64.
#include "flash_bwd/flash_bwd_launch.cuh"

template struct attnprof::kernels::FlashBackward<attnprof::DType::fp16, 64>;
