// Picks the instantiation of the flash forward kernel for a problem (host code only; the
// kernels themselves compile in flash_fwd_d*_*.cu).
#include <stdexcept>
#include <string>
#include <type_traits>

#include "flash/flash.hpp"
#include "flash/flash_fwd_instances.hpp"
#include "flash/kernel_traits.cuh"

namespace attnprof::kernels {
namespace {

// Calls f(dtype tag, head-dim tag, causal tag) with the compile-time values of the arguments.
template <typename F>
decltype(auto) dispatch(DType dtype, int head_dim, bool causal, F&& f) {
  auto by_causal = [&](auto dtype_tag, auto dim_tag) -> decltype(auto) {
    return causal ? f(dtype_tag, dim_tag, std::true_type{}) : f(dtype_tag, dim_tag, std::false_type{});
  };
  auto by_dim = [&](auto dtype_tag) -> decltype(auto) {
    if (head_dim == 64) return by_causal(dtype_tag, std::integral_constant<int, 64>{});
    if (head_dim == 128) return by_causal(dtype_tag, std::integral_constant<int, 128>{});
    throw std::invalid_argument("flash: no kernel for head_dim " + std::to_string(head_dim));
  };
  if (dtype == DType::bf16) return by_dim(std::integral_constant<DType, DType::bf16>{});
  if (dtype == DType::fp16) return by_dim(std::integral_constant<DType, DType::fp16>{});
  throw std::invalid_argument("flash: no kernel for dtype " + std::string(to_string(dtype)));
}

}  // namespace

bool flash_has_kernel(DType dtype, int head_dim) {
  return (dtype == DType::bf16 || dtype == DType::fp16) && (head_dim == 64 || head_dim == 128);
}

int flash_smem_bytes(int head_dim) {
  return head_dim == 64 ? flash::FlashFwdTraitsD64<__nv_bfloat16>::kSmemBytes
                        : flash::FlashFwdTraitsD128<__nv_bfloat16>::kSmemBytes;
}

cudaError_t flash_prepare(DType dtype, int head_dim, bool causal) {
  return dispatch(dtype, head_dim, causal, [](auto dtype_tag, auto dim_tag, auto causal_tag) {
    return prepare_flash_fwd<decltype(dtype_tag)::value, decltype(dim_tag)::value, decltype(causal_tag)::value>();
  });
}

void flash_forward(const FlashParams& params, DType dtype, int head_dim, bool causal, cudaStream_t stream) {
  dispatch(dtype, head_dim, causal, [&](auto dtype_tag, auto dim_tag, auto causal_tag) {
    run_flash_fwd<decltype(dtype_tag)::value, decltype(dim_tag)::value, decltype(causal_tag)::value>(params,
                                                                                                      stream);
  });
}

}  // namespace attnprof::kernels
