// flash:hopper forward: fp16, head dim 128.
#include "flash_hopper/flash_hopper_launch.cuh"

template struct attnprof::kernels::FlashHopperForward<attnprof::DType::fp16, 128>;
