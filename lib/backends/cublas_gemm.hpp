// cuBLAS for the math and manual backends: a checked handle and the batched row-major products
// attention needs: S = Q K^T and O = P V forward; dP = dO V^T, dV = P^T dO, dQ = dS K and
// dK = dS^T Q backward.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/errors.hpp"
#include "core/types.hpp"

namespace attnprof {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace attnprof

#define CUBLAS_CHECK(call)                                                        \
  do {                                                                            \
    const cublasStatus_t attnprof_status_ = (call);                               \
    if (attnprof_status_ != CUBLAS_STATUS_SUCCESS)                                \
      ::attnprof::throw_cublas_error(attnprof_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace attnprof {

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// One batch of row-major products, matrices of element type `type` (fp32 accumulation, no TF32:
// fp32 inputs run on FFMA as PyTorch's default does):
//   transposed_b: C[m x n] = alpha * A[m x k] * B^T, B stored [n x k]
//   transposed_a: C[m x n] = alpha * A^T * B,        A stored [k x m], B stored [k x n]
//   neither:      C[m x n] = alpha * A[m x k] * B,   B stored [k x n]
// Both at once is not needed and throws std::invalid_argument.
struct BatchedGemm {
  DType type = DType::fp32;
  bool transposed_a = false;
  bool transposed_b = false;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  long long stride_a = 0;
  const void* b = nullptr;
  long long stride_b = 0;
  void* c = nullptr;
  long long stride_c = 0;
  int batch = 1;
  float alpha = 1.f;
};

// A BatchedGemm of `matrices` products of m x n (depth k), neither operand transposed; the caller
// sets the pointers, strides and transposes.
BatchedGemm per_head_gemm(DType type, int m, int n, int k, std::int64_t matrices);

void run_batched_gemm(cublasHandle_t handle, cudaStream_t stream, const BatchedGemm& gemm);

}  // namespace attnprof
