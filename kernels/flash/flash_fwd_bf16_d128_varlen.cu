// flash forward: bf16, head dim 128, ragged/paged batches (per-sequence bands: masked).
#include "flash/flash_fwd_launch.cuh"

template struct attnprof::kernels::FlashForward<attnprof::DType::bf16, 128, true, true>;
