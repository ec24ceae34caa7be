// Integers from JSON that came from a file (a summary, a trace's header). nlohmann's get<int>()
// of a number that does not fit (1e20, or -1.5 read as unsigned) is undefined behaviour, so these
// check first and throw std::runtime_error naming the field and what was found.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attnprof {

template <typename Integer>
Integer json_integer(const nlohmann::json& value, std::string_view name) {
  using limits = std::numeric_limits<Integer>;
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v <= static_cast<std::uint64_t>(limits::max())) return static_cast<Integer>(v);
  } else if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if ((limits::is_signed || v >= 0) && (!limits::is_signed || v >= static_cast<std::int64_t>(limits::min())) &&
        (v < 0 || static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(limits::max())))
      return static_cast<Integer>(v);
  } else if (value.is_number_float()) {
    // 3.0 is an integer; the bounds are powers of two, exact as doubles.
    const double v = value.get<double>();
    const double high = std::ldexp(1.0, limits::digits);  // limits::max() + 1
    const double low = limits::is_signed ? -high : 0.0;
    if (v == std::floor(v) && v >= low && v < high) return static_cast<Integer>(v);
  }
  throw std::runtime_error(std::string("\"") + std::string(name) + "\": expected an integer that fits, found " +
                           value.dump());
}

// object[key] as an integer, or `fallback` when the key is absent.
template <typename Integer>
Integer json_integer_or(const nlohmann::json& object, const char* key, Integer fallback) {
  const auto it = object.find(key);
  return it == object.end() ? fallback : json_integer<Integer>(*it, key);
}

// The same, and within [low, high]: values that later feed arithmetic stay where it cannot
// overflow or divide by zero.
template <typename Integer>
Integer json_integer_in(const nlohmann::json& object, const char* key, Integer fallback, Integer low, Integer high) {
  const Integer v = json_integer_or<Integer>(object, key, fallback);
  if (v < low || v > high)
    throw std::runtime_error(std::string("\"") + key + "\": expected " + std::to_string(low) + " to " +
                             std::to_string(high) + ", found " + std::to_string(v));
  return v;
}

}  // namespace attnprof
