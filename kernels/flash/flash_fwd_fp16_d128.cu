// flash forward: fp16, head dim 128.
#include "flash/flash_fwd_launch.cuh"

template struct attnprof::kernels::FlashForward<attnprof::DType::fp16, 128, false>;
