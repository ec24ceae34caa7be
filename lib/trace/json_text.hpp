// What JSON's strings have to escape, found sixteen bytes at a time: the writer's escaping and
// the reader's tokenizer both skip plain runs of text with it.
#pragma once

#include <cstddef>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace attnprof::trace {

// The first '"', '\\' or control character (below 0x20) in [p, end), or end; with
// kNonAscii, also the first byte above 0x7f (where the writer checks the UTF-8).
template <bool kNonAscii = false>
inline const char* find_json_special(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i below_space = _mm_set1_epi8(0x1f);
  for (; end - p >= 16; p += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i special = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)),
        _mm_cmpeq_epi8(_mm_max_epu8(bytes, below_space), below_space));  // unsigned byte <= 0x1f
    int mask = _mm_movemask_epi8(special);
    if constexpr (kNonAscii) mask |= _mm_movemask_epi8(bytes);  // the top bit of each byte
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || (kNonAscii && c > 0x7f)) return p;
  }
  return end;
}

// The length of the well-formed UTF-8 character at p (1 to 4 bytes, none past end), or 0 when
// the bytes there are not one: a stray continuation byte, an overlong form, a surrogate, a cut.
inline std::size_t utf8_character_length(const char* p, const char* end) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(p[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte (RFC 3629's table)
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) low = 0xa0;
    if (c == 0xed) high = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) low = 0x90;
    if (c == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (end - p < static_cast<std::ptrdiff_t>(n) || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if ((byte(i) & 0xc0) != 0x80) return 0;
  return n;
}

}  // namespace attnprof::trace
