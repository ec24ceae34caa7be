// flash:hopper backward (main kernel): fp16, head dim 128.
#include "flash_hopper/flash_hopper_bwd_launch.cuh"

template struct attnprof::kernels::FlashHopperBackward<attnprof::DType::fp16, 128>;
