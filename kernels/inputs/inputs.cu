// The fill is bound by integer work, not by HBM: one 64-bit hash per two elements, eight
// elements per thread and iteration written as 16-byte stores. Grid-stride loops with 64-bit
// indices cover any size.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "inputs/inputs.hpp"

namespace attnprof::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kFillPack = 8;  // elements per thread and iteration: 4 hashes, 16 B (bf16/fp16) or 32 B (fp32)
constexpr std::int64_t kMaxBlocks = 65535LL * 16;

unsigned blocks_for(std::int64_t items) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((items + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// The storage bits of a drawn value: 16 for bf16/fp16 (in the low half), 32 for fp32.
template <DType kType>
__device__ __forceinline__ std::uint32_t encode(float value) {
  if constexpr (kType == DType::fp32) {
    return counter_random::float_bits(value);
  } else {
    return round_to_half_bits(kType, value);
  }
}

template <DType kType>
__global__ void __launch_bounds__(kThreads)
    fill_uniform_kernel(void* dst, std::int64_t count, std::int64_t packs, std::uint64_t stream, float low, float high) {
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t p = first; p < packs; p += threads) {
    std::uint32_t e[kFillPack];
#pragma unroll
    for (int h = 0; h < kFillPack / 2; ++h) {
      const std::uint64_t hash = pair_bits(stream, static_cast<std::uint64_t>(p) * (kFillPack / 2) + h);
      e[2 * h] = encode<kType>(uniform_from_bits(element_bits(hash, 0), low, high));
      e[2 * h + 1] = encode<kType>(uniform_from_bits(element_bits(hash, 1), low, high));
    }
    if constexpr (kType == DType::fp32) {
      uint4* out = static_cast<uint4*>(dst) + 2 * p;
      out[0] = make_uint4(e[0], e[1], e[2], e[3]);
      out[1] = make_uint4(e[4], e[5], e[6], e[7]);
    } else {  // little endian: the lower-addressed element is the low half
      static_cast<uint4*>(dst)[p] =
          make_uint4(e[0] | (e[1] << 16), e[2] | (e[3] << 16), e[4] | (e[5] << 16), e[6] | (e[7] << 16));
    }
  }
  for (std::int64_t i = packs * kFillPack + first; i < count; i += threads) {
    const std::uint32_t bits = encode<kType>(uniform_input(stream, static_cast<std::uint64_t>(i), low, high));
    if constexpr (kType == DType::fp32) {
      static_cast<std::uint32_t*>(dst)[i] = bits;
    } else {
      static_cast<std::uint16_t*>(dst)[i] = static_cast<std::uint16_t>(bits);
    }
  }
}

template <DType kType>
void launch_fill(void* dst, std::int64_t count, std::uint64_t stream_key, float low, float high, cudaStream_t stream) {
  const std::int64_t packs = aligned(dst, 16) ? count / kFillPack : 0;  // cudaMalloc'ed buffers always are
  const std::int64_t items = std::max(packs, count - packs * kFillPack);
  fill_uniform_kernel<kType><<<blocks_for(items), kThreads, 0, stream>>>(dst, count, packs, stream_key, low, high);
}

template <typename Word>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(const Word* src, std::int64_t row_words, const std::int64_t* rows, std::int64_t row_count,
                       Word* dst) {
  const std::int64_t total = row_count * row_words;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += threads) {
    const std::int64_t n = t / row_words;
    dst[t] = src[rows[n] * row_words + (t - n * row_words)];
  }
}

template <typename Word>
__global__ void __launch_bounds__(kThreads)
    scatter_rows_kernel(const Word* src, std::int64_t row_words, const std::int64_t* targets, std::int64_t row_count,
                        Word* dst) {
  const std::int64_t total = row_count * row_words;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += threads) {
    const std::int64_t n = t / row_words;
    const std::int64_t target = targets[n];
    if (target >= 0) dst[target * row_words + (t - n * row_words)] = src[t];
  }
}

// Calls launch(Word{}) with the widest word that divides a row and that both buffers are
// aligned to: 16-byte moves where they can be, down to single bytes.
template <typename Launch>
void with_row_word(const void* src, const void* dst, std::int64_t row_bytes, Launch&& launch) {
  auto fits = [&](std::int64_t word) {
    return row_bytes % word == 0 && aligned(src, static_cast<std::uintptr_t>(word)) &&
           aligned(dst, static_cast<std::uintptr_t>(word));
  };
  if (fits(16)) {
    launch(uint4{});
  } else if (fits(8)) {
    launch(uint2{});
  } else if (fits(4)) {
    launch(std::uint32_t{});
  } else if (fits(2)) {
    launch(std::uint16_t{});
  } else {
    launch(std::uint8_t{});
  }
}

// NaN and infinity are the values whose exponent bits are all ones.
template <typename Bits, Bits kExponent>
__device__ __forceinline__ bool non_finite(Bits bits) {
  return (bits & kExponent) == kExponent;
}

template <typename Bits, Bits kExponent>
__global__ void __launch_bounds__(kThreads)
    count_non_finite_kernel(const Bits* data, std::int64_t count, std::int64_t vectors, NonFiniteElements* result) {
  constexpr int kPerVector = 16 / sizeof(Bits);
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first_thread = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long found = 0, first = ~0ull;
  for (std::int64_t n = first_thread; n < vectors; n += threads) {
    const uint4 vector = reinterpret_cast<const uint4*>(data)[n];
    const Bits* elements = reinterpret_cast<const Bits*>(&vector);
#pragma unroll
    for (int e = 0; e < kPerVector; ++e)
      if (non_finite<Bits, kExponent>(elements[e])) {
        first = min(first, static_cast<unsigned long long>(n * kPerVector + e));
        ++found;
      }
  }
  for (std::int64_t i = vectors * kPerVector + first_thread; i < count; i += threads)
    if (non_finite<Bits, kExponent>(data[i])) {
      first = min(first, static_cast<unsigned long long>(i));
      ++found;
    }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    found += __shfl_down_sync(0xffffffffu, found, offset);
    first = min(first, __shfl_down_sync(0xffffffffu, first, offset));
  }
  if (threadIdx.x % kWarp == 0 && found > 0) {
    atomicAdd(&result->count, found);
    atomicMin(&result->first, first);
  }
}

template <typename Bits, Bits kExponent>
void launch_count(const void* data, std::int64_t count, NonFiniteElements* result, cudaStream_t stream) {
  constexpr std::int64_t kPerVector = 16 / sizeof(Bits);
  const std::int64_t vectors = aligned(data, 16) ? count / kPerVector : 0;
  const std::int64_t items = std::max(vectors, count - vectors * kPerVector);
  count_non_finite_kernel<Bits, kExponent><<<blocks_for(items), kThreads, 0, stream>>>(
      static_cast<const Bits*>(data), count, vectors, result);
}

}  // namespace

cudaError_t fill_uniform(void* dst, DType dtype, std::int64_t count, std::uint64_t seed, InputTensor tensor, float low,
                         float high, cudaStream_t stream) {
  if (count < 0 || (count > 0 && dst == nullptr)) throw std::invalid_argument("fill_uniform: bad destination or count");
  if (count == 0) return cudaSuccess;
  const std::uint64_t key = input_stream(seed, tensor);
  switch (dtype) {
    case DType::bf16: launch_fill<DType::bf16>(dst, count, key, low, high, stream); break;
    case DType::fp16: launch_fill<DType::fp16>(dst, count, key, low, high, stream); break;
    case DType::fp32: launch_fill<DType::fp32>(dst, count, key, low, high, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t gather_rows(const void* src, std::int64_t row_bytes, const std::int64_t* rows, std::int64_t row_count,
                        void* dst, cudaStream_t stream) {
  if (row_bytes <= 0 || row_count < 0) throw std::invalid_argument("gather_rows: bad row size or count");
  if (row_count == 0) return cudaSuccess;
  with_row_word(src, dst, row_bytes, [&](auto word) {
    using Word = decltype(word);
    const std::int64_t row_words = row_bytes / static_cast<std::int64_t>(sizeof(Word));
    gather_rows_kernel<Word><<<blocks_for(row_count * row_words), kThreads, 0, stream>>>(
        static_cast<const Word*>(src), row_words, rows, row_count, static_cast<Word*>(dst));
  });
  return cudaGetLastError();
}

cudaError_t scatter_rows(const void* src, std::int64_t row_bytes, const std::int64_t* targets, std::int64_t row_count,
                         void* dst, cudaStream_t stream) {
  if (row_bytes <= 0 || row_count < 0) throw std::invalid_argument("scatter_rows: bad row size or count");
  if (row_count == 0) return cudaSuccess;
  with_row_word(src, dst, row_bytes, [&](auto word) {
    using Word = decltype(word);
    const std::int64_t row_words = row_bytes / static_cast<std::int64_t>(sizeof(Word));
    scatter_rows_kernel<Word><<<blocks_for(row_count * row_words), kThreads, 0, stream>>>(
        static_cast<const Word*>(src), row_words, targets, row_count, static_cast<Word*>(dst));
  });
  return cudaGetLastError();
}

cudaError_t count_non_finite(const void* data, DType dtype, std::int64_t count, NonFiniteElements* result,
                             cudaStream_t stream) {
  if (count < 0 || result == nullptr) throw std::invalid_argument("count_non_finite: bad count or result");
  cudaError_t status = cudaMemsetAsync(&result->count, 0, sizeof(result->count), stream);
  if (status == cudaSuccess) status = cudaMemsetAsync(&result->first, 0xff, sizeof(result->first), stream);
  if (status != cudaSuccess || count == 0) return status;
  switch (dtype) {
    case DType::bf16: launch_count<std::uint16_t, 0x7f80u>(data, count, result, stream); break;
    case DType::fp16: launch_count<std::uint16_t, 0x7c00u>(data, count, result, stream); break;
    case DType::fp32: launch_count<std::uint32_t, 0x7f800000u>(data, count, result, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace attnprof::kernels
