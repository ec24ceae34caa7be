// What JSON's strings have to escape, found sixteen bytes at a time: the writer's escaping and
// the reader's tokenizer both skip plain runs of text with it.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace attnprof::trace {

// The first '"', '\\' or control character (below 0x20) in [p, end), or end.
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
    const int mask = _mm_movemask_epi8(special);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20) return p;
  }
  return end;
}

}  // namespace attnprof::trace
