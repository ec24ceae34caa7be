// Picks the instantiation of flash's backward kernels for a problem (host code only; the
// kernels compile in flash_bwd_<dtype>_d<dim>.cu).
#include "common/static_switch.hpp"
#include "flash_bwd/flash_bwd.hpp"
#include "flash_bwd/flash_bwd_instances.hpp"

namespace attnprof::kernels {
namespace {

template <typename F>
decltype(auto) with_instance(DType dtype, int head_dim, F&& f) {
  return dtype_switch<DType::bf16, DType::fp16>("flash backward", dtype, [&](auto dtype_tag) -> decltype(auto) {
    return head_dim_switch<64, 128>("flash backward", head_dim, [&](auto dim_tag) -> decltype(auto) {
      return f(FlashBackward<decltype(dtype_tag)::value, decltype(dim_tag)::value>{});
    });
  });
}

}  // namespace

bool flash_bwd_has_kernel(DType dtype, int head_dim) {
  return (dtype == DType::bf16 || dtype == DType::fp16) && (head_dim == 64 || head_dim == 128);
}

cudaError_t flash_bwd_prepare(DType dtype, int head_dim, bool fused) {
  return with_instance(dtype, head_dim, [&](auto instance) { return decltype(instance)::prepare(fused); });
}

void flash_backward(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  with_instance(dtype, head_dim, [&](auto instance) { decltype(instance)::launch(params, stream); });
}

void flash_bwd_pre_pass(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  with_instance(dtype, head_dim, [&](auto instance) { decltype(instance)::pre_pass(params, stream); });
}

void flash_bwd_convert_dq(const FlashBwdParams& params, DType dtype, int head_dim, cudaStream_t stream) {
  with_instance(dtype, head_dim, [&](auto instance) { decltype(instance)::convert_dq(params, stream); });
}

cudaError_t flash_bwd_blocks_per_sm(DType dtype, int head_dim, int* blocks) {
  return with_instance(dtype, head_dim, [&](auto instance) { return decltype(instance)::blocks_per_sm(blocks); });
}

cudaError_t flash_backward_fused(const FlashBwdParams& params, DType dtype, int head_dim, bool zero_dq,
                                 cudaStream_t stream) {
  return with_instance(dtype, head_dim,
                       [&](auto instance) { return decltype(instance)::launch_fused(params, zero_dq, stream); });
}

}  // namespace attnprof::kernels
