// flash forward: bf16, head dim 64, ragged/paged batches (per-sequence bands: masked).
#include "flash/flash_fwd_launch.cuh"

template struct attnprof::kernels::FlashForward<attnprof::DType::bf16, 64, true, true>;
