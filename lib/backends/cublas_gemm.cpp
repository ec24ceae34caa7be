#include "backends/cublas_gemm.hpp"

#include <dlfcn.h>

#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace attnprof {
namespace {

// cuBLAS is opened on first use rather than linked: libcublasLt's static initialisers cost every
// attnprof start 0.6 s and 200 MB of resident memory, `report` and `check` included, which
// never multiply a matrix. The functions attention needs are looked up by their exported names
// (cublas_v2.h maps cublasCreate to cublasCreate_v2, and so on).
// The exported function's type; cublasGemmStridedBatchedEx is also overloaded in C++ (a
// cudaDataType compute type), so its exported form is spelt out.
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);
#define ATTNPROF_CUBLAS_FUNCTIONS(X)                                                                     \
  X(cublasCreate, decltype(&::cublasCreate)) X(cublasDestroy, decltype(&::cublasDestroy))               \
  X(cublasSetStream, decltype(&::cublasSetStream)) X(cublasSetMathMode, decltype(&::cublasSetMathMode)) \
  X(cublasGemmStridedBatchedEx, GemmStridedBatchedEx)                                                    \
  X(cublasGetStatusString, decltype(&::cublasGetStatusString))                                           \
  X(cublasGetStatusName, decltype(&::cublasGetStatusName))
#define ATTNPROF_QUOTE(name) #name
#define ATTNPROF_SYMBOL(name) ATTNPROF_QUOTE(name)

struct CublasApi {
#define ATTNPROF_DECLARE(name, type) type name = nullptr;
  ATTNPROF_CUBLAS_FUNCTIONS(ATTNPROF_DECLARE)
#undef ATTNPROF_DECLARE
};

void* open_cublas() {
  // The soname of the toolkit built against; then the file itself, for a RUNPATH-less binary.
  const std::string soname = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  if (void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return library;
  const std::string first_error = dlerror();
  if (void* library = dlopen(ATTNPROF_CUBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL)) return library;
  throw GpuCallError(fmt::format("cannot load cuBLAS (needed by the math and manual backends): dlopen({}): {}; "
                                 "dlopen({}): {}",
                                 soname, first_error, ATTNPROF_CUBLAS_LIBRARY, dlerror()));
}

const CublasApi& cublas() {
  static std::once_flag once;
  static CublasApi api;
  std::call_once(once, [] {  // a throw leaves the flag unset: the next case tries again
    void* library = open_cublas();
    CublasApi loaded;
#define ATTNPROF_RESOLVE(name, type)                                                                          \
  loaded.name = reinterpret_cast<decltype(loaded.name)>(dlsym(library, ATTNPROF_SYMBOL(name)));         \
  if (loaded.name == nullptr)                                                                             \
    throw GpuCallError(fmt::format("cuBLAS library has no {}: {}", ATTNPROF_SYMBOL(name), dlerror()));
    ATTNPROF_CUBLAS_FUNCTIONS(ATTNPROF_RESOLVE)
#undef ATTNPROF_RESOLVE
    api = loaded;
  });
  return api;
}

}  // namespace

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw GpuCallError(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                 cublas().cublasGetStatusString(status), cublas().cublasGetStatusName(status)));
}

CublasHandle::CublasHandle() {
  CUBLAS_CHECK(cublas().cublasCreate(&handle_));
  // PyTorch's default: fp32 products stay fp32 (no TF32 tensor cores).
  const cublasStatus_t status = cublas().cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH);
  if (status != CUBLAS_STATUS_SUCCESS) {
    // The destructor does not run for a constructor that throws.
    cublas().cublasDestroy(handle_);
    handle_ = nullptr;
    throw_cublas_error(status, "cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH)", __FILE__, __LINE__);
  }
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublas().cublasDestroy(handle_);
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

BatchedGemm per_head_gemm(DType type, int m, int n, int k, std::int64_t matrices) {
  if (matrices < 1 || matrices > std::numeric_limits<int>::max())
    throw std::invalid_argument(fmt::format("per_head_gemm: {} matrices (cuBLAS takes 1 to 2^31 - 1)", matrices));
  BatchedGemm g;
  g.type = type;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = static_cast<int>(matrices);
  return g;
}

void run_batched_gemm(cublasHandle_t handle, cudaStream_t stream, const BatchedGemm& g) {
  CUBLAS_CHECK(cublas().cublasSetStream(handle, stream));
  const float beta = 0.f;
  const cudaDataType_t t = cuda_type(g.type);
  // cuBLAS is column-major, and a row-major X is the column-major X^T. So the row-major
  // C = A B^T is the column-major C^T = B A^T (B^T stored as B: op T), C = A B is C^T = B^T A^T,
  // and C = A^T B is C^T = B^T A (A stored [k x m] reads as the column-major m x k A^T: op T).
  if (g.transposed_a && g.transposed_b)
    throw std::invalid_argument("run_batched_gemm: A^T B^T is not a product attention needs");
  if (g.transposed_a) {
    CUBLAS_CHECK(cublas().cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, g.n, g.m, g.k, &g.alpha, g.b, t, g.n,
                                            g.stride_b, g.a, t, g.m, g.stride_a, &beta, g.c, t, g.n, g.stride_c,
                                            g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else if (g.transposed_b) {
    CUBLAS_CHECK(cublas().cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, g.n, g.m, g.k, &g.alpha, g.b, t, g.k,
                                            g.stride_b, g.a, t, g.k, g.stride_a, &beta, g.c, t, g.n, g.stride_c,
                                            g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublas().cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, g.n, g.m, g.k, &g.alpha, g.b, t, g.n,
                                            g.stride_b, g.a, t, g.k, g.stride_a, &beta, g.c, t, g.n, g.stride_c,
                                            g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace attnprof
