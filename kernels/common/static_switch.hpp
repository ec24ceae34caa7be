// Run-time values to template arguments, in one place: each switch calls a generic lambda with
// a std::integral_constant tag for the value, chosen from the compile-time list it is given, and
// throws std::invalid_argument naming the value (and what exists) when none matches. Host code
// only; no CUDA types here.
//
//   dtype_switch<DType::bf16, DType::fp16>("flash", dtype, [&](auto dtype_tag) {
//     return head_dim_switch<64, 128>("flash", head_dim, [&](auto dim_tag) {
//       return bool_switch(masked, [&](auto masked_tag) {
//         return run<decltype(dtype_tag)::value, decltype(dim_tag)::value, decltype(masked_tag)::value>();
//       });
//     });
//   });
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/types.hpp"

namespace attnprof::kernels {
namespace switch_detail {

inline std::string name_of(DType value) { return std::string(to_string(value)); }
inline std::string name_of(int value) { return std::to_string(value); }

template <typename T, T... kChoices>
[[noreturn]] void throw_no_match(std::string_view family, std::string_view what, T value) {
  std::string message = std::string(family) + ": no kernel for " + std::string(what) + " " + name_of(value) +
                        " (compiled:";
  ((message += " " + name_of(kChoices)), ...);
  throw std::invalid_argument(message + ")");
}

// `value` is one of the choices (choose() checked): the last one is taken without a comparison.
template <typename T, T kFirst, T... kRest, typename F>
decltype(auto) match(T value, F& f) {
  if constexpr (sizeof...(kRest) == 0) {
    return f(std::integral_constant<T, kFirst>{});
  } else {
    if (value == kFirst) return f(std::integral_constant<T, kFirst>{});
    return match<T, kRest...>(value, f);
  }
}

template <typename T, T... kChoices, typename F>
decltype(auto) choose(T value, F& f, std::string_view family, std::string_view what) {
  if (!((value == kChoices) || ...)) throw_no_match<T, kChoices...>(family, what, value);
  return match<T, kChoices...>(value, f);
}

}  // namespace switch_detail

// f(std::integral_constant<DType, d>{}) for the d among kChoices equal to `dtype`.
template <DType... kChoices, typename F>
decltype(auto) dtype_switch(std::string_view family, DType dtype, F&& f) {
  static_assert(sizeof...(kChoices) > 0);
  return switch_detail::choose<DType, kChoices...>(dtype, f, family, "dtype");
}

// f(std::integral_constant<int, d>{}) for the d among kChoices equal to `head_dim`.
template <int... kChoices, typename F>
decltype(auto) head_dim_switch(std::string_view family, int head_dim, F&& f) {
  static_assert(sizeof...(kChoices) > 0);
  return switch_detail::choose<int, kChoices...>(head_dim, f, family, "head_dim");
}

// f(std::true_type{}) or f(std::false_type{}).
template <typename F>
decltype(auto) bool_switch(bool value, F&& f) {
  if (value) return f(std::true_type{});
  return f(std::false_type{});
}

}  // namespace attnprof::kernels
