// Memory-bound kernels, one launch per eager PyTorch op. Each moves 16-byte packs per access when
// its pointers (and, for broadcasts, the matrix size) allow it, checked at run time in the
// launcher, and one element per access otherwise; none divides per element on its vector path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/element_type.cuh"
#include "common/static_switch.hpp"
#include "elementwise/elementwise.hpp"

namespace attnprof::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kVectorBytes = 16;
constexpr std::int64_t kMaxBlocks = 65535 * 16;  // grid-stride loops cover anything beyond
// Loads in flight per thread: about this many bytes before the first use keeps HBM busy.
constexpr int kBytesInFlight = 64;
// add_broadcast / masked_fill: matrices one thread walks with its mask pack held in registers.
constexpr int kMatricesPerThread = 16;

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

unsigned blocks_for(std::int64_t items, std::int64_t items_per_block) {
  const std::int64_t blocks = (items + items_per_block - 1) / items_per_block;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

constexpr int unroll_for(int bytes_per_pack) {
  return bytes_per_pack >= kBytesInFlight ? 1 : kBytesInFlight / bytes_per_pack;
}

// N consecutive elements moved as one access (or as several 16-byte accesses when larger).
template <typename T, int N>
struct alignas(sizeof(T) * N < kVectorBytes ? sizeof(T) * N : kVectorBytes) Pack {
  T v[N];
};

template <typename T, int N> __device__ __forceinline__ Pack<T, N> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}
template <typename T, int N> __device__ __forceinline__ void store_pack(T* p, const Pack<T, N>& pack) {
  *reinterpret_cast<Pack<T, N>*>(p) = pack;
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

// Flat element-wise work: packs [0, packs), kUnroll per thread, all loaded before any is stored
// (explicitly: the compiler may not reorder them past stores that might alias), then elements
// [tail_begin, n) one by one.
template <int kUnroll, typename Load, typename Store, typename Element>
__device__ __forceinline__ void for_each_pack(std::int64_t packs, std::int64_t tail_begin, std::int64_t n, Load load,
                                              Store store, Element element) {
  using Loaded = decltype(load(std::int64_t{}));
  const std::int64_t tile = static_cast<std::int64_t>(blockDim.x) * kUnroll;
  for (std::int64_t base = blockIdx.x * tile + threadIdx.x; base < packs; base += gridDim.x * tile) {
    Loaded v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * blockDim.x < packs) v[u] = load(base + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * blockDim.x < packs) store(base + u * blockDim.x, v[u]);
  }
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = tail_begin + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += threads)
    element(i);
}

// Launch geometry of a flat kernel: the packs when every pointer allows them, the scalar rest.
struct FlatWork {
  std::int64_t packs = 0;
  std::int64_t tail_begin = 0;
  unsigned blocks = 1;
};

FlatWork flat_work(std::int64_t n, int pack, int unroll, bool vectorized) {
  FlatWork w;
  w.packs = vectorized ? n / pack : 0;
  w.tail_begin = w.packs * pack;
  w.blocks = std::max(blocks_for(w.packs, static_cast<std::int64_t>(kThreads) * unroll),
                      blocks_for(n - w.tail_begin, kThreads));
  return w;
}

template <typename In, typename Out>
constexpr int kConvertPack = kVectorBytes / static_cast<int>(sizeof(In) < sizeof(Out) ? sizeof(In) : sizeof(Out));
template <typename In, typename Out>
constexpr int kConvertUnroll = unroll_for(kConvertPack<In, Out> * static_cast<int>(sizeof(In)));

template <typename In, typename Out>
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const In* in, Out* out, std::int64_t n, std::int64_t packs, std::int64_t tail_begin) {
  constexpr int N = kConvertPack<In, Out>;
  for_each_pack<kConvertUnroll<In, Out>>(
      packs, tail_begin, n, [&](std::int64_t p) { return load_pack<In, N>(in + p * N); },
      [&](std::int64_t p, const Pack<In, N>& v) {
        Pack<Out, N> o;
#pragma unroll
        for (int e = 0; e < N; ++e) o.v[e] = from_float<Out>(to_float(v.v[e]));
        store_pack<Out, N>(out + p * N, o);
      },
      [&](std::int64_t i) { out[i] = from_float<Out>(to_float(in[i])); });
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_kernel(const T* in, T* out, float factor, std::int64_t n, std::int64_t packs, std::int64_t tail_begin) {
  constexpr int N = kVectorBytes / sizeof(T);
  for_each_pack<unroll_for(kVectorBytes)>(
      packs, tail_begin, n, [&](std::int64_t p) { return load_pack<T, N>(in + p * N); },
      [&](std::int64_t p, Pack<T, N> v) {
#pragma unroll
        for (int e = 0; e < N; ++e) v.v[e] = from_float<T>(to_float(v.v[e]) * factor);
        store_pack<T, N>(out + p * N, v);
      },
      [&](std::int64_t i) { out[i] = from_float<T>(to_float(in[i]) * factor); });
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fill_kernel(T* out, T value, std::int64_t n, std::int64_t packs, std::int64_t tail_begin) {
  constexpr int N = kVectorBytes / sizeof(T);
  Pack<T, N> filled;
#pragma unroll
  for (int e = 0; e < N; ++e) filled.v[e] = value;
  for_each_pack<1>(
      packs, tail_begin, n, [](std::int64_t) { return 0; },
      [&](std::int64_t p, int) { store_pack<T, N>(out + p * N, filled); }, [&](std::int64_t i) { out[i] = value; });
}

// One 64-bit division per 16-element pack finds its row; the columns are walked from there.
// Keeps in[r, c] where c <= r + diagonal (kLower) or c >= r + diagonal (upper), zeros elsewhere.
template <bool kLower>
__device__ __forceinline__ void keep_triangle(const bool* in, bool* out, int rows, int cols, std::int64_t diagonal,
                                              std::int64_t packs, std::int64_t tail_begin) {
  constexpr int N = kVectorBytes;
  const std::int64_t n = static_cast<std::int64_t>(rows) * cols;
  auto keep = [&](std::int64_t r, std::int64_t c) { return kLower ? c <= r + diagonal : c >= r + diagonal; };
  for_each_pack<1>(
      packs, tail_begin, n, [&](std::int64_t p) { return load_pack<bool, N>(in + p * N); },
      [&](std::int64_t p, const Pack<bool, N>& v) {
        std::int64_t r = p * N / cols;
        int c = static_cast<int>(p * N - r * cols);
        Pack<bool, N> o;
#pragma unroll
        for (int e = 0; e < N; ++e) {
          o.v[e] = keep(r, c) ? v.v[e] : false;
          if (++c == cols) c = 0, ++r;
        }
        store_pack<bool, N>(out + p * N, o);
      },
      [&](std::int64_t i) { out[i] = keep(i / cols, i % cols) ? in[i] : false; });
}

// tril() (the causal mask): its own kernel, as before diagonals other than 0 existed.
__global__ void __launch_bounds__(kThreads)
    tril_kernel(const bool* in, bool* out, int rows, int cols, std::int64_t packs, std::int64_t tail_begin) {
  keep_triangle<true>(in, out, rows, cols, 0, packs, tail_begin);
}

// tril(diagonal) and triu(diagonal): bottom-right alignment and sliding windows.
__global__ void __launch_bounds__(kThreads) tril_kernel(const bool* in, bool* out, int rows, int cols,
                                                        std::int64_t diagonal, std::int64_t packs,
                                                        std::int64_t tail_begin) {
  keep_triangle<true>(in, out, rows, cols, diagonal, packs, tail_begin);
}

__global__ void __launch_bounds__(kThreads) triu_kernel(const bool* in, bool* out, int rows, int cols,
                                                        std::int64_t diagonal, std::int64_t packs,
                                                        std::int64_t tail_begin) {
  keep_triangle<false>(in, out, rows, cols, diagonal, packs, tail_begin);
}

// out[b, h] = in[b, h / group] over heads of head_elements each: grid y walks the output heads
// (one division per head, none per element), grid x the packs of a head, kRepeatUnroll per
// thread in flight (64 bytes on the 16-byte path).
constexpr int kRepeatUnroll = unroll_for(kVectorBytes);

template <typename T, int N>
__device__ __forceinline__ void repeat_head_packs(const T* in, T* out, std::int64_t head_elements, int heads,
                                                  int heads_kv, int group, std::int64_t out_heads) {
  constexpr int kUnroll = kRepeatUnroll;
  const std::int64_t packs = head_elements / N;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t head = blockIdx.y; head < out_heads; head += gridDim.y) {
    const std::int64_t batch = head / heads;
    const int h = static_cast<int>(head - batch * heads);
    const T* src = in + (batch * heads_kv + h / group) * head_elements;
    T* dst = out + head * head_elements;
    for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
         p += stride * kUnroll) {
      Pack<T, N> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p + u * stride < packs) v[u] = load_pack<T, N>(src + (p + u * stride) * N);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p + u * stride < packs) store_pack<T, N>(dst + (p + u * stride) * N, v[u]);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    repeat_interleave_kernel(const T* in, T* out, std::int64_t head_elements, int heads, int heads_kv, int group,
                             std::int64_t out_heads, bool vectorized) {
  if (vectorized)
    repeat_head_packs<T, kVectorBytes / sizeof(T)>(in, out, head_elements, heads, heads_kv, group, out_heads);
  else
    repeat_head_packs<T, 1>(in, out, head_elements, heads, heads_kv, group, out_heads);
}

// out[b, hk] = sum over g of in[b, hk * group + g]: grid y walks the output (K/V) heads, whose
// group of input heads is contiguous (output head i reads input heads i * group ...), grid x the
// packs of a head; fp32 sums, one rounding.
template <typename T, int N>
__device__ __forceinline__ void sum_group_packs(const T* in, T* out, std::int64_t head_elements, int group,
                                                std::int64_t out_heads) {
  const std::int64_t packs = head_elements / N;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t head = blockIdx.y; head < out_heads; head += gridDim.y) {
    const T* src = in + head * group * head_elements;
    T* dst = out + head * head_elements;
    for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs; p += stride) {
      float sum[N] = {};
      for (int g = 0; g < group; ++g) {
        const Pack<T, N> v = load_pack<T, N>(src + g * head_elements + p * N);
#pragma unroll
        for (int e = 0; e < N; ++e) sum[e] += to_float(v.v[e]);
      }
      Pack<T, N> o;
#pragma unroll
      for (int e = 0; e < N; ++e) o.v[e] = from_float<T>(sum[e]);
      store_pack<T, N>(dst + p * N, o);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) sum_head_groups_kernel(const T* in, T* out, std::int64_t head_elements,
                                                                   int group, std::int64_t out_heads, bool vectorized) {
  if (vectorized)
    sum_group_packs<T, kVectorBytes / sizeof(T)>(in, out, head_elements, group, out_heads);
  else
    sum_group_packs<T, 1>(in, out, head_elements, group, out_heads);
}

__global__ void __launch_bounds__(kThreads)
    where_scalars_kernel(const bool* cond, const float* if_true, const float* if_false, float* out, std::int64_t n,
                         std::int64_t packs, std::int64_t tail_begin) {
  constexpr int N = kVectorBytes;
  const float t = *if_true, f = *if_false;
  for_each_pack<1>(  // one pack of conditions is already 64 bytes of output
      packs, tail_begin, n, [&](std::int64_t p) { return load_pack<bool, N>(cond + p * N); },
      [&](std::int64_t p, const Pack<bool, N>& c) {
#pragma unroll
        for (int q = 0; q < N; q += 4)
          store_pack<float, 4>(out + p * N + q, {{c.v[q] ? t : f, c.v[q + 1] ? t : f, c.v[q + 2] ? t : f,
                                                  c.v[q + 3] ? t : f}});
      },
      [&](std::int64_t i) { out[i] = cond[i] ? t : f; });
}

__global__ void __launch_bounds__(kThreads)
    isneginf_kernel(const float* in, bool* out, std::int64_t n, std::int64_t packs, std::int64_t tail_begin) {
  constexpr int N = kVectorBytes;
  for_each_pack<1>(
      packs, tail_begin, n, [&](std::int64_t p) { return load_pack<float, N>(in + p * N); },
      [&](std::int64_t p, const Pack<float, N>& v) {
        Pack<bool, N> o;
#pragma unroll
        for (int e = 0; e < N; ++e) o.v[e] = v.v[e] == -INFINITY;
        store_pack<bool, N>(out + p * N, o);
      },
      [&](std::int64_t i) { out[i] = in[i] == -INFINITY; });
}

// Mask-broadcast kernels: grid x walks the mask in packs of N, grid y groups of matrices; each
// thread loads its mask pack once and applies it to kMatricesPerThread matrices, so the matrix
// index never comes from a division.
template <int N>
__device__ __forceinline__ void add_broadcast_packs(float* attn, const float* mask, std::int64_t matrix_elements,
                                                    std::int64_t matrices) {
  const std::int64_t packs = matrix_elements / N;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Pack<float, N> m = load_pack<float, N>(mask + p * N);
    for (std::int64_t first = blockIdx.y * std::int64_t{kMatricesPerThread}; first < matrices;
         first += gridDim.y * std::int64_t{kMatricesPerThread}) {
      float* at = attn + first * matrix_elements + p * N;
      const std::int64_t count = matrices - first;
      constexpr int kGroup = 4;  // loads in flight before the first store
#pragma unroll
      for (int j = 0; j < kMatricesPerThread; j += kGroup) {
        Pack<float, N> v[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u)
          if (j + u < count) v[u] = load_pack<float, N>(at + (j + u) * matrix_elements);
#pragma unroll
        for (int u = 0; u < kGroup; ++u)
          if (j + u < count) {
#pragma unroll
            for (int e = 0; e < N; ++e) v[u].v[e] += m.v[e];
            store_pack<float, N>(at + (j + u) * matrix_elements, v[u]);
          }
      }
    }
  }
}

// Grid z walks the masks of a per-batch broadcast: mask z applies to matrices
// [z * matrices, (z + 1) * matrices); one mask (z = 0) applies to all.
__global__ void __launch_bounds__(kThreads) add_broadcast_kernel(float* attn, const float* mask,
                                                                 std::int64_t matrix_elements, std::int64_t matrices,
                                                                 bool vectorized) {
  attn += blockIdx.z * matrices * matrix_elements;
  mask += blockIdx.z * matrix_elements;
  if (vectorized)
    add_broadcast_packs<4>(attn, mask, matrix_elements, matrices);
  else
    add_broadcast_packs<1>(attn, mask, matrix_elements, matrices);
}

// Stores only where keep is false (the data is never read): a whole pack when none of it is kept,
// element by element on the few packs that straddle the mask's edge.
template <typename T, int N>
__device__ __forceinline__ void masked_fill_packs(T* data, const bool* keep, float value, std::int64_t matrix_elements,
                                                  std::int64_t matrices) {
  const std::int64_t packs = matrix_elements / N;
  const T fill = from_float<T>(value);
  Pack<T, N> filled;
#pragma unroll
  for (int e = 0; e < N; ++e) filled.v[e] = fill;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Pack<bool, N> k = load_pack<bool, N>(keep + p * N);
    bool any_filled = false, all_filled = true;
#pragma unroll
    for (int e = 0; e < N; ++e) any_filled |= !k.v[e], all_filled &= !k.v[e];
    if (!any_filled) continue;
    for (std::int64_t first = blockIdx.y * std::int64_t{kMatricesPerThread}; first < matrices;
         first += gridDim.y * std::int64_t{kMatricesPerThread}) {
      T* at = data + first * matrix_elements + p * N;
      const std::int64_t count = std::min<std::int64_t>(matrices - first, kMatricesPerThread);
      if (all_filled) {
#pragma unroll
        for (int j = 0; j < kMatricesPerThread; ++j)
          if (j < count) store_pack<T, N>(at + j * matrix_elements, filled);
      } else {
        for (int j = 0; j < count; ++j)
#pragma unroll
          for (int e = 0; e < N; ++e)
            if (!k.v[e]) at[j * matrix_elements + e] = fill;
      }
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) masked_fill_kernel(T* data, const bool* keep, float value,
                                                               std::int64_t matrix_elements, std::int64_t matrices,
                                                               bool vectorized) {
  data += blockIdx.z * matrices * matrix_elements;  // grid z: per-batch masks, as add_broadcast_kernel
  keep += blockIdx.z * matrix_elements;
  if (vectorized)
    masked_fill_packs<T, kVectorBytes / sizeof(T)>(data, keep, value, matrix_elements, matrices);
  else
    masked_fill_packs<T, 1>(data, keep, value, matrix_elements, matrices);
}

// Reduction over the kRowThreads threads that share a row: shuffles in the warp, then (block
// per row) through shared memory; every thread gets the result.
template <int kRowThreads, bool kMax>
__device__ __forceinline__ float row_reduce(float value, float* scratch) {
  auto combine = [](float a, float b) { return kMax ? fmaxf(a, b) : a + b; };
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1)
    value = combine(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if constexpr (kRowThreads > kWarp) {
    constexpr int kWarps = kRowThreads / kWarp;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    __syncthreads();  // scratch may still be read from the previous reduction
    if (lane == 0) scratch[warp] = value;
    __syncthreads();
    value = scratch[lane % kWarps];
#pragma unroll
    for (int offset = kWarps / 2; offset > 0; offset >>= 1)
      value = combine(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Single-read softmax: kRowThreads threads (a warp, or the block) per row, each holding kPacks
// packs of kPack elements in fp32 registers; pack j of thread t starts at column
// (j * kRowThreads + t) * kPack, so every access is coalesced. kPack > 1 needs cols % kPack == 0.
// Rows that are all -inf give NaN, as torch.softmax does (exp(-inf - -inf)).
template <typename T, int kRowThreads, int kPack, int kPacks>
__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(const T* in, T* out, std::int64_t rows, int cols) {
  static_assert(kThreads % kRowThreads == 0 && kRowThreads % kWarp == 0);
  __shared__ float scratch[kRowThreads / kWarp];
  const int t = threadIdx.x % kRowThreads;
  const std::int64_t row = blockIdx.x * std::int64_t{kThreads / kRowThreads} + threadIdx.x / kRowThreads;
  if (row >= rows) return;  // whole rows only: a warp, or the block with its one row
  const T* row_in = in + row * cols;
  T* row_out = out + row * cols;
  float x[kPacks][kPack];
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int c = (j * kRowThreads + t) * kPack;
    if (c < cols) {
      const Pack<T, kPack> v = load_pack<T, kPack>(row_in + c);
#pragma unroll
      for (int e = 0; e < kPack; ++e) x[j][e] = to_float(v.v[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kPack; ++e) x[j][e] = -INFINITY;
    }
  }
  float row_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
#pragma unroll
    for (int e = 0; e < kPack; ++e) row_max = fmaxf(row_max, x[j][e]);
  row_max = row_reduce<kRowThreads, true>(row_max, scratch);
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < kPacks; ++j)
#pragma unroll
    for (int e = 0; e < kPack; ++e) {
      x[j][e] = __expf(x[j][e] - row_max);
      if ((j * kRowThreads + t) * kPack < cols) sum += x[j][e];
    }
  sum = row_reduce<kRowThreads, false>(sum, scratch);
  const float inv = 1.f / sum;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int c = (j * kRowThreads + t) * kPack;
    if (c < cols) {
      Pack<T, kPack> o;
#pragma unroll
      for (int e = 0; e < kPack; ++e) o.v[e] = from_float<T>(x[j][e] * inv);
      store_pack<T, kPack>(row_out + c, o);
    }
  }
}

// Rows too long for registers: one block per row reads it three times (max, sum, write), as an
// unfused eager softmax does.
template <typename T>
__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(const T* in, T* out, int cols) {
  __shared__ float scratch[kThreads / kWarp];
  const T* row_in = in + blockIdx.x * static_cast<std::int64_t>(cols);
  T* row_out = out + blockIdx.x * static_cast<std::int64_t>(cols);
  float row_max = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) row_max = fmaxf(row_max, to_float(row_in[c]));
  row_max = row_reduce<kThreads, true>(row_max, scratch);
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += __expf(to_float(row_in[c]) - row_max);
  sum = row_reduce<kThreads, false>(sum, scratch);
  const float inv = 1.f / sum;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    row_out[c] = from_float<T>(__expf(to_float(row_in[c]) - row_max) * inv);
}

// Softmax backward, kRowThreads threads (a warp, or the block) per row: dot = sum(grad * probs)
// over the row, then out = probs * (grad - dot), reading the row twice (the second read mostly
// from L2). Every element is read and written by the same thread, so out may alias grad. kPack > 1
// needs cols % kPack == 0 and 16-byte aligned rows.
template <typename T, int kRowThreads, int kPack>
__global__ void __launch_bounds__(kThreads)
    softmax_backward_rows_kernel(const T* grad, const T* probs, T* out, std::int64_t rows, int cols) {
  static_assert(kThreads % kRowThreads == 0 && kRowThreads % kWarp == 0);
  __shared__ float scratch[kRowThreads / kWarp];
  const int t = threadIdx.x % kRowThreads;
  const std::int64_t row = blockIdx.x * std::int64_t{kThreads / kRowThreads} + threadIdx.x / kRowThreads;
  if (row >= rows) return;  // whole rows only: a warp, or the block with its one row
  const T* row_grad = grad + row * cols;
  const T* row_probs = probs + row * cols;
  T* row_out = out + row * cols;
  float dot = 0.f;
  for (int c = t * kPack; c < cols; c += kRowThreads * kPack) {
    const Pack<T, kPack> g = load_pack<T, kPack>(row_grad + c);
    const Pack<T, kPack> p = load_pack<T, kPack>(row_probs + c);
#pragma unroll
    for (int e = 0; e < kPack; ++e) dot += to_float(g.v[e]) * to_float(p.v[e]);
  }
  dot = row_reduce<kRowThreads, false>(dot, scratch);
  for (int c = t * kPack; c < cols; c += kRowThreads * kPack) {
    const Pack<T, kPack> g = load_pack<T, kPack>(row_grad + c);
    const Pack<T, kPack> p = load_pack<T, kPack>(row_probs + c);
    Pack<T, kPack> o;
#pragma unroll
    for (int e = 0; e < kPack; ++e) o.v[e] = from_float<T>(to_float(p.v[e]) * (to_float(g.v[e]) - dot));
    store_pack<T, kPack>(row_out + c, o);
  }
}

// Elements of a row before its first 16-byte boundary: the whole row when not vectorized.
template <typename T>
__device__ __forceinline__ int row_head(const T* row, int cols, bool vectorized) {
  if (!vectorized) return cols;
  const auto misalignment = static_cast<int>(reinterpret_cast<std::uintptr_t>(row) % kVectorBytes);
  const int bytes = (kVectorBytes - misalignment) % kVectorBytes;
  return min(cols, bytes / static_cast<int>(sizeof(T)));
}

__device__ __forceinline__ bool has_zero_byte(unsigned w) { return ((w - 0x01010101u) & ~w & 0x80808080u) != 0; }

// A warp per row: the bytes up to the first 16-byte boundary, then 16 bytes per lane, then the rest.
__global__ void __launch_bounds__(kThreads) all_rows_kernel(const bool* in, bool* out, std::int64_t rows, int cols) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t row = blockIdx.x * std::int64_t{kThreads / kWarp} + threadIdx.x / kWarp;
  if (row >= rows) return;
  const auto* bytes = reinterpret_cast<const unsigned char*>(in + row * cols);
  const int head = row_head(bytes, cols, true);
  const int packs = (cols - head) / kVectorBytes;
  const int tail = head + packs * kVectorBytes;
  bool all = true;
  if (lane < head) all = bytes[lane] != 0;
  const auto* vectors = reinterpret_cast<const uint4*>(bytes + head);
  constexpr int kUnroll = 4;
  for (int p0 = lane; p0 < packs; p0 += kWarp * kUnroll) {
    uint4 w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      w[u] = p0 + u * kWarp < packs ? vectors[p0 + u * kWarp] : make_uint4(~0u, ~0u, ~0u, ~0u);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      all &= !(has_zero_byte(w[u].x) || has_zero_byte(w[u].y) || has_zero_byte(w[u].z) || has_zero_byte(w[u].w));
  }
  if (tail + lane < cols) all &= bytes[tail + lane] != 0;
  all = __all_sync(0xffffffffu, all);
  if (lane == 0) out[row] = all;
}

// A warp per row; the row's flag is read once, alongside the row (not before it: its latency would
// come first). Both operands are read, as torch.where does.
__global__ void __launch_bounds__(kThreads) where_rows_kernel(const bool* row_flag, const float* zero, const float* in,
                                                              float* out, std::int64_t rows, int cols,
                                                              bool vectorized) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t row = blockIdx.x * std::int64_t{kThreads / kWarp} + threadIdx.x / kWarp;
  if (row >= rows) return;
  const bool flag = row_flag[row];
  const float z = *zero;
  const float* src = in + row * cols;
  float* dst = out + row * cols;
  const int head = row_head(src, cols, vectorized);
  for (int c = lane; c < head; c += kWarp) dst[c] = flag ? z : src[c];
  const int packs = (cols - head) / 4;
  const auto* src4 = reinterpret_cast<const Pack<float, 4>*>(src + head);
  auto* dst4 = reinterpret_cast<Pack<float, 4>*>(dst + head);
  const Pack<float, 4> zeros = {{z, z, z, z}};
  constexpr int kUnroll = 8;
  for (int p0 = lane; p0 < packs; p0 += kWarp * kUnroll) {
    Pack<float, 4> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (p0 + u * kWarp < packs) v[u] = src4[p0 + u * kWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (p0 + u * kWarp < packs) dst4[p0 + u * kWarp] = flag ? zeros : v[u];
  }
  for (int c = head + packs * 4 + lane; c < cols; c += kWarp) dst[c] = flag ? z : src[c];
}

// f(Element<dtype>*{nullptr}): the element type of a run-time dtype, for every op below.
template <typename F>
void with_element(const char* op, DType type, F&& f) {
  dtype_switch<DType::bf16, DType::fp16, DType::fp32>(
      op, type, [&](auto tag) { f(static_cast<Element<decltype(tag)::value>*>(nullptr)); });
}

// Grid for the mask-broadcast kernels: x over the mask's packs, y over groups of matrices.
// z over the masks of a per-batch broadcast (1: one mask for every matrix).
dim3 broadcast_grid(std::int64_t packs, std::int64_t matrices, int masks = 1) {
  const std::int64_t groups = (matrices + kMatricesPerThread - 1) / kMatricesPerThread;
  if (masks < 1 || masks > 65535)
    throw std::invalid_argument("mask broadcast: " + std::to_string(masks) + " masks (grid z takes 1 to 65535)");
  return dim3(blocks_for(packs, kThreads), static_cast<unsigned>(std::clamp<std::int64_t>(groups, 1, 65535)),
              static_cast<unsigned>(masks));
}

unsigned warp_per_row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(std::max<std::int64_t>((rows + kThreads / kWarp - 1) / (kThreads / kWarp), 1));
}

// Smallest register tile that holds a row: a warp with 16 or 32 floats per lane, a block with 16
// or 32 floats per thread; longer rows take the three-pass kernel.
template <typename T>
void launch_softmax(const T* in, T* out, std::int64_t rows, int cols, cudaStream_t stream) {
  constexpr int kVec = kVectorBytes / sizeof(T);
  const bool vectorized = cols % kVec == 0 && aligned(in, kVectorBytes) && aligned(out, kVectorBytes);
  auto launch = [&](auto row_threads, auto floats) {
    constexpr int kRowThreads = decltype(row_threads)::value, kFloats = decltype(floats)::value;
    const std::int64_t threads = rows * kRowThreads;
    const auto blocks = static_cast<unsigned>(std::max<std::int64_t>((threads + kThreads - 1) / kThreads, 1));
    if (vectorized)
      softmax_rows_kernel<T, kRowThreads, kVec, kFloats / kVec><<<blocks, kThreads, 0, stream>>>(in, out, rows, cols);
    else
      softmax_rows_kernel<T, kRowThreads, 1, kFloats><<<blocks, kThreads, 0, stream>>>(in, out, rows, cols);
  };
  using Warp = std::integral_constant<int, kWarp>;
  using Block = std::integral_constant<int, kThreads>;
  using F16 = std::integral_constant<int, 16>;
  using F32 = std::integral_constant<int, 32>;
  if (cols <= kWarp * 16)
    launch(Warp{}, F16{});
  else if (cols <= kWarp * 32)
    launch(Warp{}, F32{});
  else if (cols <= kThreads * 16)
    launch(Block{}, F16{});
  else if (cols <= kThreads * 32)
    launch(Block{}, F32{});
  else
    softmax_rows_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, out, cols);
}

}  // namespace

void convert(const void* in, DType in_type, void* out, DType out_type, std::int64_t n, cudaStream_t stream) {
  with_element("convert", in_type, [&](auto* in_tag) {
    with_element("convert", out_type, [&](auto* out_tag) {
      using In = std::remove_pointer_t<decltype(in_tag)>;
      using Out = std::remove_pointer_t<decltype(out_tag)>;
      const FlatWork w = flat_work(n, kConvertPack<In, Out>, kConvertUnroll<In, Out>,
                                   aligned(in, kVectorBytes) && aligned(out, kVectorBytes));
      convert_kernel<In, Out><<<w.blocks, kThreads, 0, stream>>>(static_cast<const In*>(in), static_cast<Out*>(out), n,
                                                                 w.packs, w.tail_begin);
    });
  });
}

void scale(const void* in, void* out, DType type, float factor, std::int64_t n, cudaStream_t stream) {
  with_element("scale", type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const FlatWork w = flat_work(n, kVectorBytes / sizeof(T), unroll_for(kVectorBytes),
                                 aligned(in, kVectorBytes) && aligned(out, kVectorBytes));
    scale_kernel<T><<<w.blocks, kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out), factor, n,
                                                       w.packs, w.tail_begin);
  });
}

void fill_bool(bool* out, bool value, std::int64_t n, cudaStream_t stream) {
  const FlatWork w = flat_work(n, kVectorBytes, 1, aligned(out, kVectorBytes));
  fill_kernel<bool><<<w.blocks, kThreads, 0, stream>>>(out, value, n, w.packs, w.tail_begin);
}

void fill_float(float* out, float value, std::int64_t n, cudaStream_t stream) {
  const FlatWork w = flat_work(n, kVectorBytes / sizeof(float), 1, aligned(out, kVectorBytes));
  fill_kernel<float><<<w.blocks, kThreads, 0, stream>>>(out, value, n, w.packs, w.tail_begin);
}

void tril(const bool* in, bool* out, int rows, int cols, cudaStream_t stream) {
  tril(in, out, rows, cols, 0, stream);
}

void tril(const bool* in, bool* out, int rows, int cols, std::int64_t diagonal, cudaStream_t stream) {
  const FlatWork w = flat_work(static_cast<std::int64_t>(rows) * cols, kVectorBytes, 1,
                               aligned(in, kVectorBytes) && aligned(out, kVectorBytes));
  if (diagonal == 0)
    tril_kernel<<<w.blocks, kThreads, 0, stream>>>(in, out, rows, cols, w.packs, w.tail_begin);
  else
    tril_kernel<<<w.blocks, kThreads, 0, stream>>>(in, out, rows, cols, diagonal, w.packs, w.tail_begin);
}

void triu(const bool* in, bool* out, int rows, int cols, std::int64_t diagonal, cudaStream_t stream) {
  const FlatWork w = flat_work(static_cast<std::int64_t>(rows) * cols, kVectorBytes, 1,
                               aligned(in, kVectorBytes) && aligned(out, kVectorBytes));
  triu_kernel<<<w.blocks, kThreads, 0, stream>>>(in, out, rows, cols, diagonal, w.packs, w.tail_begin);
}

void repeat_interleave(const void* in, void* out, DType type, int batch, int heads, int heads_kv,
                       std::int64_t head_elements, cudaStream_t stream) {
  if (heads_kv < 1 || heads % heads_kv != 0)
    throw std::invalid_argument("repeat_interleave: heads " + std::to_string(heads) +
                                " is not a multiple of heads_kv " + std::to_string(heads_kv));
  with_element("repeat_interleave", type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kPack = kVectorBytes / sizeof(T);
    // Every head starts on a 16-byte boundary only when a head is a whole number of packs.
    const bool vectorized = head_elements % kPack == 0 && aligned(in, kVectorBytes) && aligned(out, kVectorBytes);
    const std::int64_t out_heads = static_cast<std::int64_t>(batch) * heads;
    const dim3 grid(blocks_for(vectorized ? head_elements / kPack : head_elements, kThreads * kRepeatUnroll),
                    static_cast<unsigned>(std::clamp<std::int64_t>(out_heads, 1, 65535)));
    repeat_interleave_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out),
                                                               head_elements, heads, heads_kv, heads / heads_kv,
                                                               out_heads, vectorized);
  });
}

void sum_head_groups(const void* in, void* out, DType type, int batch, int heads, int heads_kv,
                     std::int64_t head_elements, cudaStream_t stream) {
  if (heads_kv < 1 || heads % heads_kv != 0)
    throw std::invalid_argument("sum_head_groups: heads " + std::to_string(heads) + " is not a multiple of heads_kv " +
                                std::to_string(heads_kv));
  with_element("sum_head_groups", type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kPack = kVectorBytes / sizeof(T);
    // Every head starts on a 16-byte boundary only when a head is a whole number of packs.
    const bool vectorized = head_elements % kPack == 0 && aligned(in, kVectorBytes) && aligned(out, kVectorBytes);
    const std::int64_t out_heads = static_cast<std::int64_t>(batch) * heads_kv;
    const dim3 grid(blocks_for(vectorized ? head_elements / kPack : head_elements, kThreads),
                    static_cast<unsigned>(std::clamp<std::int64_t>(out_heads, 1, 65535)));
    sum_head_groups_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out),
                                                             head_elements, heads / heads_kv, out_heads, vectorized);
  });
}

void where_scalars(const bool* cond, const float* if_true, const float* if_false, float* out, std::int64_t n,
                   cudaStream_t stream) {
  const FlatWork w = flat_work(n, kVectorBytes, 1, aligned(cond, kVectorBytes) && aligned(out, kVectorBytes));
  where_scalars_kernel<<<w.blocks, kThreads, 0, stream>>>(cond, if_true, if_false, out, n, w.packs, w.tail_begin);
}

void add_broadcast(float* attn, const float* mask, std::int64_t matrix_elements, std::int64_t matrices,
                   cudaStream_t stream) {
  add_batch_broadcast(attn, mask, matrix_elements, 1, matrices, stream);
}

void add_batch_broadcast(float* attn, const float* masks, std::int64_t matrix_elements, int batch,
                         std::int64_t matrices_per_mask, cudaStream_t stream) {
  // Every matrix starts on a 16-byte boundary only when the matrix size is a multiple of 4 floats.
  const bool vectorized = matrix_elements % 4 == 0 && aligned(attn, kVectorBytes) && aligned(masks, kVectorBytes);
  const dim3 grid = broadcast_grid(vectorized ? matrix_elements / 4 : matrix_elements, matrices_per_mask, batch);
  add_broadcast_kernel<<<grid, kThreads, 0, stream>>>(attn, masks, matrix_elements, matrices_per_mask, vectorized);
}

void softmax_rows(const void* in, void* out, DType type, std::int64_t rows, int cols, cudaStream_t stream) {
  with_element("softmax_rows", type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_softmax<T>(static_cast<const T*>(in), static_cast<T*>(out), rows, cols, stream);
  });
}

void softmax_backward_rows(const void* grad, const void* probs, void* out, DType type, std::int64_t rows, int cols,
                           cudaStream_t stream) {
  with_element("softmax_backward_rows", type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kVec = kVectorBytes / sizeof(T);
    const bool vectorized =
        cols % kVec == 0 && aligned(grad, kVectorBytes) && aligned(probs, kVectorBytes) && aligned(out, kVectorBytes);
    const auto* g = static_cast<const T*>(grad);
    const auto* p = static_cast<const T*>(probs);
    auto* o = static_cast<T*>(out);
    // A warp per row up to 2048 columns (64 floats a lane), the block beyond.
    if (cols <= kWarp * 64) {
      const unsigned blocks = warp_per_row_blocks(rows);
      if (vectorized)
        softmax_backward_rows_kernel<T, kWarp, kVec><<<blocks, kThreads, 0, stream>>>(g, p, o, rows, cols);
      else
        softmax_backward_rows_kernel<T, kWarp, 1><<<blocks, kThreads, 0, stream>>>(g, p, o, rows, cols);
    } else {
      const auto blocks = static_cast<unsigned>(std::max<std::int64_t>(rows, 1));
      if (vectorized)
        softmax_backward_rows_kernel<T, kThreads, kVec><<<blocks, kThreads, 0, stream>>>(g, p, o, rows, cols);
      else
        softmax_backward_rows_kernel<T, kThreads, 1><<<blocks, kThreads, 0, stream>>>(g, p, o, rows, cols);
    }
  });
}

void isneginf(const float* in, bool* out, std::int64_t n, cudaStream_t stream) {
  const FlatWork w = flat_work(n, kVectorBytes, 1, aligned(in, kVectorBytes) && aligned(out, kVectorBytes));
  isneginf_kernel<<<w.blocks, kThreads, 0, stream>>>(in, out, n, w.packs, w.tail_begin);
}

void all_rows(const bool* in, bool* out, std::int64_t rows, int cols, cudaStream_t stream) {
  all_rows_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream>>>(in, out, rows, cols);
}

void where_rows(const bool* row_flag, const float* zero, const float* in, float* out, std::int64_t rows, int cols,
                cudaStream_t stream) {
  // Packs line up in both rows when in and out sit at the same offset from a 16-byte boundary.
  const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(in) - reinterpret_cast<std::uintptr_t>(out);
  const bool vectorized = aligned(in, sizeof(float)) && aligned(out, sizeof(float)) && offset % kVectorBytes == 0;
  where_rows_kernel<<<warp_per_row_blocks(rows), kThreads, 0, stream>>>(row_flag, zero, in, out, rows, cols,
                                                                          vectorized);
}

void masked_fill(void* data, DType type, const bool* keep, float value, std::int64_t matrix_elements,
                 std::int64_t matrices, cudaStream_t stream) {
  masked_fill_batch(data, type, keep, value, matrix_elements, 1, matrices, stream);
}

void masked_fill_batch(void* data, DType type, const bool* keep, float value, std::int64_t matrix_elements, int batch,
                       std::int64_t matrices, cudaStream_t stream) {
  with_element("masked_fill", type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kPack = kVectorBytes / sizeof(T);
    const bool vectorized = matrix_elements % kPack == 0 && aligned(data, kVectorBytes) && aligned(keep, kPack);
    const dim3 grid = broadcast_grid(vectorized ? matrix_elements / kPack : matrix_elements, matrices, batch);
    masked_fill_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<T*>(data), keep, value, matrix_elements, matrices,
                                                         vectorized);
  });
}

}  // namespace attnprof::kernels
