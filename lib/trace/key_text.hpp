// The trace's words (trace_keys.hpp) as the writer copies them and the reader names them in
// errors, joined at compile time: `,"grid":` is one fixed-size copy per event, not three, and no
// key is spelled a second time inside a longer literal.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string_view>

#include "trace/trace_keys.hpp"

namespace attnprof::trace {

// Text joined at compile time; `view()` is the text.
struct JoinedText {
  std::array<char, 96> chars{};
  std::size_t size = 0;
  constexpr std::string_view view() const { return {chars.data(), size}; }
};

// The parts, one after another (text longer than the buffer fails to compile: at() throws).
// constexpr, not consteval: clang 14 does not evaluate a consteval call that reads a reference
// template argument; every use below initialises a constexpr variable, so it runs at compile time.
constexpr JoinedText join(std::initializer_list<std::string_view> parts) {
  JoinedText text;
  for (std::string_view part : parts)
    for (char c : part) text.chars.at(text.size++) = c;
  return text;
}

// `,"key":` : the next member of an object.
template <const std::string_view& Key>
inline constexpr JoinedText kMember = join({",\"", Key, "\":"});

// `"key"`: a key quoted, as errors name document keys and event members.
template <const std::string_view& Key>
inline constexpr JoinedText kQuoted = join({"\"", Key, "\""});

// `args.key`, or `args."key"` when the key is more than letters and underscores: an arg as
// errors name it.
constexpr JoinedText arg_path(std::string_view key) {
  bool plain = true;
  for (char c : key) plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_');
  return plain ? join({event_key::kArgs, ".", key}) : join({event_key::kArgs, ".\"", key, "\""});
}
template <const std::string_view& Key>
inline constexpr JoinedText kArgPath = arg_path(Key);

// `event "key"`: an event's member as errors name it.
template <const std::string_view& Key>
inline constexpr JoinedText kEventPath = join({"event \"", Key, "\""});

}  // namespace attnprof::trace
