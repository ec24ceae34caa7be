// Picks the compiled instantiation for a (dtype, head dim); host code only.
#include <stdexcept>
#include <string>
#include <type_traits>

#include "efficient/efficient.hpp"

namespace attnprof::kernels::efficient {
namespace {

template <typename F>
decltype(auto) with_instance(DType dtype, int head_dim, F&& f) {
  const int bucket = head_dim_bucket(head_dim);
  auto by_bucket = [&](auto dtype_tag) -> decltype(auto) {
    constexpr DType kDType = decltype(dtype_tag)::value;
    switch (bucket) {
      case 64: return f(std::integral_constant<DType, kDType>{}, std::integral_constant<int, 64>{});
      case 128: return f(std::integral_constant<DType, kDType>{}, std::integral_constant<int, 128>{});
      case 256: return f(std::integral_constant<DType, kDType>{}, std::integral_constant<int, 256>{});
    }
    throw std::invalid_argument("efficient attention: unsupported head dim " + std::to_string(head_dim));
  };
  switch (dtype) {
    case DType::bf16: return by_bucket(std::integral_constant<DType, DType::bf16>{});
    case DType::fp16: return by_bucket(std::integral_constant<DType, DType::fp16>{});
    case DType::fp32: return by_bucket(std::integral_constant<DType, DType::fp32>{});
  }
  throw std::invalid_argument("efficient attention: unknown dtype");
}

}  // namespace

int forward_smem_bytes(DType dtype, int head_dim) {
  return with_instance(dtype, head_dim, [](auto d, auto h) { return instance_smem_bytes<decltype(d)::value, decltype(h)::value>(); });
}

cudaError_t prepare_forward(DType dtype, int head_dim) {
  return with_instance(dtype, head_dim, [](auto d, auto h) { return prepare_instance<decltype(d)::value, decltype(h)::value>(); });
}

void forward(DType dtype, const ForwardParams& params, cudaStream_t stream) {
  with_instance(dtype, params.head_dim,
                [&](auto d, auto h) { launch_instance<decltype(d)::value, decltype(h)::value>(params, stream); });
}

}  // namespace attnprof::kernels::efficient
