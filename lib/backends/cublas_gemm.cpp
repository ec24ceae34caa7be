#include "backends/cublas_gemm.hpp"

#include <fmt/format.h>

namespace attnprof {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw GpuCallError(fmt::format("{} failed at {}:{}: {} ({})", call, file, line, cublasGetStatusString(status),
                                 cublasGetStatusName(status)));
}

CublasHandle::CublasHandle() {
  CUBLAS_CHECK(cublasCreate(&handle_));
  // PyTorch's default: fp32 products stay fp32 (no TF32 tensor cores).
  CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

namespace {
cudaDataType_t cuda_type(DType type) {
  switch (type) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp16: return CUDA_R_16F;
    case DType::fp32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}
}  // namespace

void run_batched_gemm(cublasHandle_t handle, cudaStream_t stream, const BatchedGemm& g) {
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  const float beta = 0.f;
  const cudaDataType_t t = cuda_type(g.type);
  // cuBLAS is column-major, and a row-major X is the column-major X^T. So the row-major
  // C = A B^T is the column-major C^T = B A^T (B^T stored as B: op T), and C = A B is C^T = B^T A^T.
  if (g.transposed_b) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, g.n, g.m, g.k, &g.alpha, g.b, t, g.k,
                                            g.stride_b, g.a, t, g.k, g.stride_a, &beta, g.c, t, g.n, g.stride_c,
                                            g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, g.n, g.m, g.k, &g.alpha, g.b, t, g.n,
                                            g.stride_b, g.a, t, g.k, g.stride_a, &beta, g.c, t, g.n, g.stride_c,
                                            g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace attnprof
