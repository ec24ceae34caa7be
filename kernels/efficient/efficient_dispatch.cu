// Picks the compiled instantiation for a (dtype, head dim); host code only.
#include <stdexcept>
#include <string>

#include "common/static_switch.hpp"
#include "efficient/efficient.hpp"

namespace attnprof::kernels::efficient {
namespace {

// Calls f(EfficientForward<dtype, bucket, ragged>{}) for the head-dim bucket that runs `head_dim`;
// the ragged kernels exist for buckets 64 and 128 only.
template <typename F>
decltype(auto) with_instance(DType dtype, int head_dim, bool ragged, F&& f) {
  const int bucket = head_dim_bucket(head_dim);
  if (bucket == 0)
    throw std::invalid_argument("efficient: no kernel for head_dim " + std::to_string(head_dim) +
                                " (multiples of 8 from 8 to " + std::to_string(kMaxHeadDim) + ")");
  return dtype_switch<DType::bf16, DType::fp16, DType::fp32>("efficient", dtype, [&](auto dtype_tag) -> decltype(auto) {
    constexpr DType kDType = decltype(dtype_tag)::value;
    if (ragged)
      return head_dim_switch<64, 128>("efficient (ragged)", bucket, [&](auto dim_tag) -> decltype(auto) {
        return f(EfficientForward<kDType, decltype(dim_tag)::value, true>{});
      });
    return head_dim_switch<64, 128, 256>("efficient", bucket, [&](auto dim_tag) -> decltype(auto) {
      return f(EfficientForward<kDType, decltype(dim_tag)::value, false>{});
    });
  });
}

}  // namespace

int forward_smem_bytes(DType dtype, int head_dim) {
  return with_instance(dtype, head_dim, false, [](auto instance) { return decltype(instance)::smem_bytes(); });
}

cudaError_t prepare_forward(DType dtype, int head_dim, bool ragged) {
  return with_instance(dtype, head_dim, ragged, [](auto instance) { return decltype(instance)::prepare(); });
}

void forward(DType dtype, const ForwardParams& params, cudaStream_t stream) {
  with_instance(dtype, params.head_dim, is_ragged(params),
                [&](auto instance) { decltype(instance)::launch(params, stream); });
}

}  // namespace attnprof::kernels::efficient
