// Picks the instantiation of the flash forward kernel for a problem (host code only; the
// kernels themselves compile in flash_fwd_<dtype>_d<dim>[_<variant>].cu).
#include "common/static_switch.hpp"
#include "flash/flash.hpp"
#include "flash/flash_fwd_instances.hpp"
#include "flash/kernel_traits.cuh"

namespace attnprof::kernels {
namespace {

// Calls f(FlashForward<dtype, head_dim, masked[, varlen]>{}) for the compiled instantiation;
// varlen exists only masked.
template <typename F>
decltype(auto) with_instance(DType dtype, int head_dim, bool masked, bool varlen, F&& f) {
  return dtype_switch<DType::bf16, DType::fp16>("flash", dtype, [&](auto dtype_tag) -> decltype(auto) {
    return head_dim_switch<64, 128>("flash", head_dim, [&](auto dim_tag) -> decltype(auto) {
      constexpr DType kDType = decltype(dtype_tag)::value;
      constexpr int kHeadDim = decltype(dim_tag)::value;
      if (varlen) return f(FlashForward<kDType, kHeadDim, true, true>{});
      return bool_switch(masked, [&](auto masked_tag) -> decltype(auto) {
        return f(FlashForward<kDType, kHeadDim, decltype(masked_tag)::value>{});
      });
    });
  });
}

}  // namespace

bool flash_has_kernel(DType dtype, int head_dim) {
  return (dtype == DType::bf16 || dtype == DType::fp16) && (head_dim == 64 || head_dim == 128);
}

int flash_smem_bytes(int head_dim) {
  return head_dim == 64 ? flash::FlashFwdTraitsD64<__nv_bfloat16>::kSmemBytes
                        : flash::FlashFwdTraitsD128<__nv_bfloat16>::kSmemBytes;
}

cudaError_t flash_prepare(DType dtype, int head_dim, bool masked, bool varlen) {
  return with_instance(dtype, head_dim, masked, varlen, [](auto instance) { return decltype(instance)::prepare(); });
}

void flash_forward(const FlashParams& params, DType dtype, int head_dim, bool masked, bool varlen,
                   cudaStream_t stream) {
  with_instance(dtype, head_dim, masked, varlen, [&](auto instance) { decltype(instance)::launch(params, stream); });
}

}  // namespace attnprof::kernels
