// flash:hopper forward: bf16, head dim 128.
#include "flash_hopper/flash_hopper_launch.cuh"

template struct attnprof::kernels::FlashHopperForward<attnprof::DType::bf16, 128>;
