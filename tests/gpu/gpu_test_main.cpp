// main() of every GPU test binary: exits 77 (ctest: skipped) when no usable GPU exists.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no usable GPU (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device found");
    return 77;
  }
  return RUN_ALL_TESTS();
}
