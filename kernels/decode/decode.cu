// Picks the instantiation of the decode kernels for a problem (host code only; the kernels
// compile in decode_fwd_<dtype>_d<dim>.cu).
#include "common/static_switch.hpp"
#include "decode/decode.hpp"
#include "decode/decode_instances.hpp"

namespace attnprof::kernels {
namespace {

template <typename F>
decltype(auto) with_instance(DType dtype, int head_dim, F&& f) {
  return dtype_switch<DType::bf16, DType::fp16>("flash decode", dtype, [&](auto dtype_tag) -> decltype(auto) {
    return head_dim_switch<64, 128>("flash decode", head_dim, [&](auto dim_tag) -> decltype(auto) {
      return f(DecodeForward<decltype(dtype_tag)::value, decltype(dim_tag)::value>{});
    });
  });
}

}  // namespace

bool decode_has_kernel(DType dtype, int head_dim) {
  return (dtype == DType::bf16 || dtype == DType::fp16) && (head_dim == 64 || head_dim == 128);
}

cudaError_t decode_prepare(DType dtype, int head_dim, int* blocks_per_sm) {
  return with_instance(dtype, head_dim, [&](auto instance) { return decltype(instance)::prepare(blocks_per_sm); });
}

void decode_forward(const DecodeParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  with_instance(dtype, head_dim, [&](auto instance) { decltype(instance)::launch(params, stream); });
}

}  // namespace attnprof::kernels
