#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <stdexcept>

#include "elementwise/elementwise.hpp"

namespace attnprof::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

template <typename T> __device__ __forceinline__ float load(const T* p) { return static_cast<float>(*p); }
template <> __device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
template <> __device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
template <typename T> __device__ __forceinline__ void store(T* p, float v) { *p = static_cast<T>(v); }
template <> __device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
template <> __device__ __forceinline__ void store(__half* p, float v) { *p = __float2half(v); }

template <typename In, typename Out>
__global__ void convert_kernel(const In* in, Out* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(out + i, load(in + i));
}

template <typename T>
__global__ void scale_kernel(const T* in, T* out, float factor, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(out + i, load(in + i) * factor);
}

template <typename T>
__global__ void fill_kernel(T* out, T value, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = value;
}

__global__ void tril_kernel(const bool* in, bool* out, int rows, int cols) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    out[i] = c <= r ? in[i] : false;
  }
}

__global__ void where_scalars_kernel(const bool* cond, const float* if_true, const float* if_false, float* out,
                                     std::int64_t n) {
  const float t = *if_true, f = *if_false;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = cond[i] ? t : f;
}

__global__ void add_broadcast_kernel(float* attn, const float* mask, std::int64_t matrix_elements, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    attn[i] += mask[i % matrix_elements];
}

__device__ __forceinline__ float block_reduce(float value, bool is_max, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = is_max ? fmaxf(value, other) : value + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from the previous reduction
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < blockDim.x / 32 ? scratch[lane] : (is_max ? -FLT_MAX : 0.f);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = is_max ? fmaxf(value, other) : value + other;
  }
  return value;
}

// One block per row; the row is read three times from global memory (max, sum, write), as an
// unfused eager softmax does. Rows that are all -inf give NaN, as torch.softmax does.
template <typename T>
__global__ void softmax_rows_kernel(const T* in, T* out, int cols) {
  __shared__ float scratch[32];
  const T* row_in = in + blockIdx.x * static_cast<std::int64_t>(cols);
  T* row_out = out + blockIdx.x * static_cast<std::int64_t>(cols);
  float row_max = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) row_max = fmaxf(row_max, load(row_in + c));
  row_max = block_reduce(row_max, true, scratch);
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += __expf(load(row_in + c) - row_max);
  sum = block_reduce(sum, false, scratch);
  const float inv = 1.f / sum;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) store(row_out + c, __expf(load(row_in + c) - row_max) * inv);
}

__global__ void isneginf_kernel(const float* in, bool* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = in[i] == -INFINITY;
}

__global__ void all_rows_kernel(const bool* in, bool* out, int cols) {
  const bool* row = in + blockIdx.x * static_cast<std::int64_t>(cols);
  int all = 1;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) all &= row[c] ? 1 : 0;
  all = __syncthreads_and(all);
  if (threadIdx.x == 0) out[blockIdx.x] = all != 0;
}

__global__ void where_rows_kernel(const bool* row_flag, const float* zero, const float* in, float* out,
                                  std::int64_t n, int cols) {
  const float z = *zero;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = row_flag[i / cols] ? z : in[i];
}

template <typename T>
__global__ void masked_fill_kernel(T* data, const bool* keep, float value, std::int64_t matrix_elements,
                                   std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    if (!keep[i % matrix_elements]) store(data + i, value);
}

template <typename F>
void dispatch(DType type, F&& f) {
  switch (type) {
    case DType::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case DType::fp16: f(static_cast<__half*>(nullptr)); return;
    case DType::fp32: f(static_cast<float*>(nullptr)); return;
  }
  throw std::invalid_argument("unknown dtype");
}

}  // namespace

void convert(const void* in, DType in_type, void* out, DType out_type, std::int64_t n, cudaStream_t stream) {
  dispatch(in_type, [&](auto* in_tag) {
    dispatch(out_type, [&](auto* out_tag) {
      using In = std::remove_pointer_t<decltype(in_tag)>;
      using Out = std::remove_pointer_t<decltype(out_tag)>;
      convert_kernel<In, Out><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const In*>(in),
                                                                      static_cast<Out*>(out), n);
    });
  });
}

void scale(const void* in, void* out, DType type, float factor, std::int64_t n, cudaStream_t stream) {
  dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    scale_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out),
                                                            factor, n);
  });
}

void fill_bool(bool* out, bool value, std::int64_t n, cudaStream_t stream) {
  fill_kernel<bool><<<blocks_for(n), kThreads, 0, stream>>>(out, value, n);
}

void fill_float(float* out, float value, std::int64_t n, cudaStream_t stream) {
  fill_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(out, value, n);
}

void tril(const bool* in, bool* out, int rows, int cols, cudaStream_t stream) {
  tril_kernel<<<blocks_for(static_cast<std::int64_t>(rows) * cols), kThreads, 0, stream>>>(in, out, rows, cols);
}

void where_scalars(const bool* cond, const float* if_true, const float* if_false, float* out, std::int64_t n,
                   cudaStream_t stream) {
  where_scalars_kernel<<<blocks_for(n), kThreads, 0, stream>>>(cond, if_true, if_false, out, n);
}

void add_broadcast(float* attn, const float* mask, std::int64_t matrix_elements, std::int64_t matrices,
                   cudaStream_t stream) {
  const std::int64_t n = matrix_elements * matrices;
  add_broadcast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(attn, mask, matrix_elements, n);
}

void softmax_rows(const void* in, void* out, DType type, std::int64_t rows, int cols, cudaStream_t stream) {
  dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    softmax_rows_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(static_cast<const T*>(in),
                                                                                 static_cast<T*>(out), cols);
  });
}

void isneginf(const float* in, bool* out, std::int64_t n, cudaStream_t stream) {
  isneginf_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
}

void all_rows(const bool* in, bool* out, std::int64_t rows, int cols, cudaStream_t stream) {
  all_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, out, cols);
}

void where_rows(const bool* row_flag, const float* zero, const float* in, float* out, std::int64_t rows, int cols,
                cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  where_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_flag, zero, in, out, n, cols);
}

void masked_fill(void* data, DType type, const bool* keep, float value, std::int64_t matrix_elements,
                 std::int64_t matrices, cudaStream_t stream) {
  const std::int64_t n = matrix_elements * matrices;
  dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    masked_fill_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(data), keep, value,
                                                                   matrix_elements, n);
  });
}

}  // namespace attnprof::kernels
