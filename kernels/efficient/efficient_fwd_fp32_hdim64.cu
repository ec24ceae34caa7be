// One instantiation per file, so the build compiles them in parallel.
#include "efficient/efficient_launch.cuh"

ATTNPROF_EFFICIENT_INSTANCE(::attnprof::DType::fp32, 64)
