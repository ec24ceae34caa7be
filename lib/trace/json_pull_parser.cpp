#include "trace/json_pull_parser.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "trace/json_text.hpp"

namespace attnprof::trace {
namespace {

bool is_digit(int c) { return c >= '0' && c <= '9'; }

bool is_ascii_alnum(int c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string printable(int c) {
  if (c < 0) return "end of file";
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c);
}

}  // namespace

const char* describe(JsonToken token) {
  switch (token) {
    case JsonToken::begin_object: return "an object";
    case JsonToken::end_object: return "'}'";
    case JsonToken::begin_array: return "an array";
    case JsonToken::end_array: return "']'";
    case JsonToken::key: return "a member name";
    case JsonToken::string: return "a string";
    case JsonToken::number: return "a number";
    case JsonToken::true_value: return "true";
    case JsonToken::false_value: return "false";
    case JsonToken::null_value: return "null";
    case JsonToken::end_of_input: return "the end of the document";
  }
  return "a token";
}

JsonPullParser::JsonPullParser(const std::filesystem::path& path, std::size_t chunk_bytes)
    : name_(path.string()), path_(path) {
  try {
    reader_ = std::make_unique<DocumentReader>(path);
  } catch (const DocumentReadError& e) {
    throw TraceFormatError(TraceFormatError::Kind::malformed, e.what());
  }
  chunk_.resize(chunk_bytes < 16 ? 16 : chunk_bytes);
  data_ = chunk_.data();
}

JsonPullParser::JsonPullParser(std::string text, std::string name) : name_(std::move(name)), memory_(std::move(text)) {
  if (starts_like_gzip(memory_)) {
    reader_ = std::make_unique<DocumentReader>(memory_, name_);  // memory_ stays put: the parser never moves
    chunk_.resize(64 << 10);
    data_ = chunk_.data();
    return;
  }
  data_ = memory_.data();
  end_ = memory_.size();
  eof_ = true;
}

JsonPullParser::~JsonPullParser() = default;

bool JsonPullParser::refill() {
  if (eof_) return false;
  // The last token may still be viewed (a key, while its ':' is sought): copy it out first.
  if (!view_.empty() && view_.data() >= chunk_.data() && view_.data() < chunk_.data() + chunk_.size()) {
    text_.assign(view_);
    view_ = text_;
  }
  consumed_ += end_;
  pos_ = 0;
  end_ = 0;
  try {
    end_ = reader_->read(chunk_.data(), chunk_.size());
  } catch (const DocumentReadError& e) {
    reader_failed_ = true;
    fail_at(consumed_, e.reason());  // where the readable JSON stops
  }
  // A short read is not yet the end: a gzip error waits behind the bytes inflated before it.
  if (end_ == 0) eof_ = true;
  return end_ > 0;
}

int JsonPullParser::peek_after_refill() {
  if (pos_ == end_ && !refill()) return -1;
  return static_cast<unsigned char>(data_[pos_]);
}

void JsonPullParser::skip_whitespace_across_chunks() {
  for (;;) {
    while (pos_ < end_) {
      const char c = data_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
    if (!refill()) return;
  }
}

JsonLocation JsonPullParser::locate(std::uint64_t at) const {
  // Lines are counted only when an error needs them, so the happy path pays nothing.
  JsonLocation where;
  where.offset = at;
  std::uint64_t line_start = 0;
  auto count = [&](const char* p, std::size_t n, std::uint64_t base) {
    for (std::size_t i = 0; i < n; ++i)
      if (p[i] == '\n') {
        ++where.line;
        line_start = base + i + 1;
      }
  };
  if (reader_ == nullptr) {
    count(memory_.data(), static_cast<std::size_t>(std::min<std::uint64_t>(at, memory_.size())), 0);
  } else {
    // Read the document again (inflated again, for gzip) up to the offset.
    try {
      DocumentReader again = path_.empty() ? DocumentReader(memory_, name_) : DocumentReader(path_);
      std::vector<char> buffer(1 << 16);
      std::uint64_t done = 0;
      while (done < at) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), at - done));
        const std::size_t got = again.read(buffer.data(), want);
        if (got == 0) break;
        count(buffer.data(), got, done);
        done += got;
      }
    } catch (const DocumentReadError&) {
      // Lines counted as far as the file could be read again.
    }
  }
  where.column = at - line_start + 1;
  return where;
}

void JsonPullParser::fail(std::string_view message) const { fail_at(token_offset_, message); }

void JsonPullParser::fail_at(std::uint64_t at, std::string_view message) const {
  const JsonLocation where = locate(at);
  std::string text = fmt::format("{}:{}:{} (byte {}): {}", name_, where.line, where.column, where.offset, message);
  // Detection goes by the bytes, so a misnamed file is read as what it is; say so when it fails.
  if (!compressed() && name_.size() > 3 && name_.compare(name_.size() - 3, 3, ".gz") == 0)
    text += " (the name ends in .gz, but the file does not start with gzip's magic bytes 1f 8b)";
  // Damaged gzip can inflate to garbled JSON before its checksum fails at the end of the stream:
  // read on, and name the damage if it is there (an error path: the cost is one more pass).
  if (compressed() && !reader_failed_) {
    try {
      std::vector<char> rest(1 << 16);
      while (reader_->read(rest.data(), rest.size()) > 0) {
      }
    } catch (const DocumentReadError& e) {
      text += fmt::format(" (reading on, the gzip data turns out damaged: {})", e.reason());
    }
  }
  throw TraceFormatError(TraceFormatError::Kind::malformed, std::move(text), where);
}

void JsonPullParser::fail_type(std::string_view what, std::string_view expected) const {
  std::string found = describe(last_);
  if (last_ == JsonToken::string || last_ == JsonToken::number) {
    const std::string shown = view_.size() > 40 ? std::string(view_.substr(0, 40)) + "..." : std::string(view_);
    found += last_ == JsonToken::string ? fmt::format(" \"{}\"", shown) : fmt::format(" {}", shown);
  }
  fail(fmt::format("{}: expected {}, found {}", what, expected, found));
}

std::string JsonPullParser::found_text() const {
  return pos_ < end_ ? printable(static_cast<unsigned char>(data_[pos_])) : printable(-1);
}

void JsonPullParser::after_value() {
  if (stack_.empty()) expect_ = Expect::end_of_input;
  else expect_ = stack_.back() == '[' ? Expect::comma_or_end_array : Expect::comma_or_end_object;
}

JsonToken JsonPullParser::close(char container) {
  ++pos_;
  stack_.pop_back();
  after_value();
  last_ = container == '{' ? JsonToken::end_object : JsonToken::end_array;
  return last_;
}

JsonToken JsonPullParser::next() {
  for (;;) {
    skip_whitespace();
    token_offset_ = offset();
    const int c = pos_ < end_ ? static_cast<unsigned char>(data_[pos_]) : -1;
    switch (expect_) {
      case Expect::end_of_input:
        if (c < 0) return last_ = JsonToken::end_of_input;
        fail(fmt::format("expected the end of the document after the top-level value, found {}", printable(c)));
      case Expect::comma_or_end_array:
        if (c == ',') {
          ++pos_;
          expect_ = Expect::value;
          continue;
        }
        if (c == ']') return close('[');
        if (c < 0) fail("unexpected end of file inside an array: the document is truncated");
        fail(fmt::format("expected ',' or ']' after an array element, found {}", printable(c)));
      case Expect::comma_or_end_object:
        if (c == ',') {
          ++pos_;
          expect_ = Expect::key;
          continue;
        }
        if (c == '}') return close('{');
        if (c < 0) fail("unexpected end of file inside an object: the document is truncated");
        fail(fmt::format("expected ',' or '}}' after an object member, found {}", printable(c)));
      case Expect::key_or_end_object:
        if (c == '}') return close('{');
        [[fallthrough]];
      case Expect::key: {
        if (c != '"') {
          if (c < 0) fail("unexpected end of file inside an object: the document is truncated");
          fail(fmt::format("expected a member name in double quotes, found {}", printable(c)));
        }
        read_string(true);
        skip_whitespace();
        if (pos_ >= end_) fail_at(offset(), "unexpected end of file after a member name: the document is truncated");
        if (data_[pos_] != ':')
          fail_at(offset(), fmt::format("expected ':' after member name \"{}\", found {}", view_, found_text()));
        ++pos_;
        expect_ = Expect::value;
        return last_ = JsonToken::key;
      }
      case Expect::value_or_end_array:
        if (c == ']') return close('[');
        [[fallthrough]];
      case Expect::value:
        switch (c) {
          case '{':
          case '[':
            if (static_cast<int>(stack_.size()) >= kMaxDepth)
              fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
            ++pos_;
            stack_.push_back(static_cast<char>(c));
            expect_ = c == '{' ? Expect::key_or_end_object : Expect::value_or_end_array;
            return last_ = c == '{' ? JsonToken::begin_object : JsonToken::begin_array;
          case '"':
            read_string(keep_text_);
            after_value();
            return last_ = JsonToken::string;
          case 't':
            read_literal("true");
            after_value();
            return last_ = JsonToken::true_value;
          case 'f':
            read_literal("false");
            after_value();
            return last_ = JsonToken::false_value;
          case 'n':
            read_literal("null");
            after_value();
            return last_ = JsonToken::null_value;
          case -1:
            fail(stack_.empty() ? "the document is empty: expected a JSON value"
                                : "unexpected end of file where a value was expected: the document is truncated");
          default:
            if (c == '-' || is_digit(c)) {
              read_number();
              after_value();
              return last_ = JsonToken::number;
            }
            fail(fmt::format("expected a JSON value (object, array, string, number, true, false or null), found {}",
                             printable(c)));
        }
    }
  }
}

void JsonPullParser::read_string(bool keep) {
  ++pos_;  // opening quote
  {
    // The common case: the closing quote in this chunk with nothing escaped before it.
    const std::size_t run = static_cast<std::size_t>(find_json_special(data_ + pos_, data_ + end_) - data_);
    if (run < end_ && data_[run] == '"') {
      view_ = keep ? std::string_view(data_ + pos_, run - pos_) : std::string_view();
      pos_ = run + 1;
      return;
    }
  }
  view_ = {};  // nothing for refill() to save: text_ is where this string goes
  text_.clear();
  read_string_slowly(keep);
  view_ = text_;
}

void JsonPullParser::read_string_slowly(bool keep) {
  for (;;) {
    const std::size_t run = static_cast<std::size_t>(find_json_special(data_ + pos_, data_ + end_) - data_);
    if (keep) text_.append(data_ + pos_, run - pos_);
    pos_ = run;
    if (pos_ == end_) {
      if (!refill()) fail("unexpected end of file inside a string: the document is truncated");
      continue;
    }
    const unsigned char ch = static_cast<unsigned char>(data_[pos_]);
    if (ch == '"') {
      ++pos_;
      return;
    }
    if (ch < 0x20) fail_at(offset(), fmt::format("control character 0x{:02x} inside a string (must be escaped)", ch));
    // Backslash escape; `another` when a lone high surrogate's backslash starts the next one.
    ++pos_;
    for (bool another = true; another;) {
      another = false;
      const int e = peek();
      if (e < 0) fail("unexpected end of file inside a string escape: the document is truncated");
      ++pos_;
      switch (e) {
        case '"': text_.push_back('"'); break;
        case '\\': text_.push_back('\\'); break;
        case '/': text_.push_back('/'); break;
        case 'b': text_.push_back('\b'); break;
        case 'f': text_.push_back('\f'); break;
        case 'n': text_.push_back('\n'); break;
        case 'r': text_.push_back('\r'); break;
        case 't': text_.push_back('\t'); break;
        case 'u': {
          auto read_hex4 = [&]() {
            std::uint32_t value = 0;
            for (int i = 0; i < 4; ++i) {
              const int h = hex_value(peek());
              if (h < 0) fail_at(offset(), "expected four hex digits after \\u in a string");
              ++pos_;
              value = value * 16 + static_cast<std::uint32_t>(h);
            }
            return value;
          };
          // A high surrogate pairs with a low one escaped right after it. UTF-8 has no
          // surrogates: any left alone (JSON allows them) becomes U+FFFD.
          std::uint32_t cp = read_hex4();
          while (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\') {
            ++pos_;
            if (peek() != 'u') {
              another = true;
              break;
            }
            ++pos_;
            const std::uint32_t next = read_hex4();
            if (next >= 0xDC00 && next <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (next - 0xDC00);
              break;
            }
            append_utf8(text_, 0xFFFD);
            cp = next;
          }
          append_utf8(text_, cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp);
          break;
        }
        default:
          fail_at(offset() - 1, fmt::format("invalid escape \\{} in a string", printable(e)));
      }
    }
  }
}

void JsonPullParser::read_number() {
  if (read_number_in_place()) return;
  view_ = {};
  read_number_across_chunks();
}

bool JsonPullParser::read_number_in_place() {
  // The common case: a well-formed number that ends inside the buffer, scanned without a call
  // per character. Anything else (a chunk boundary, a grammar error) takes the careful path.
  const char* const begin = data_ + pos_;
  const char* const end = data_ + end_;
  const char* p = begin;
  auto digits = [&]() {
    const char* start = p;
    while (p < end && is_digit(static_cast<unsigned char>(*p))) ++p;
    return p > start;
  };
  if (p < end && *p == '-') ++p;
  if (p < end && *p == '0') ++p;
  else if (!digits()) return false;
  bool integer = true, exponent = false;
  if (p < end && *p == '.') {
    ++p;
    if (!digits()) return false;
    integer = false;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p < end && (*p == '+' || *p == '-')) ++p;
    if (!digits()) return false;
    integer = false;
    exponent = true;
  }
  if (p == end) return false;  // it may go on in the next chunk
  const unsigned char next = static_cast<unsigned char>(*p);
  if (is_ascii_alnum(next) || next == '.' || next == '"') return false;  // "01", "1x": said precisely below
  view_ = std::string_view(begin, static_cast<std::size_t>(p - begin));
  number_is_integer_ = integer;
  number_has_exponent_ = exponent;
  pos_ += static_cast<std::size_t>(p - begin);
  return true;
}

void JsonPullParser::read_number_across_chunks() {
  text_.clear();
  auto take = [&]() {
    text_.push_back(data_[pos_]);
    ++pos_;
  };
  auto digits = [&](const char* where) {
    if (!is_digit(peek())) fail_at(offset(), fmt::format("expected a digit {} in a number, found {}", where, found_text()));
    while (is_digit(peek())) take();
  };
  if (peek() == '-') take();
  if (peek() == '0') {
    take();
    if (is_digit(peek())) fail_at(offset(), "a number must not have a leading zero");
  } else {
    digits("after '-'");
  }
  if (peek() == '.') {
    take();
    digits("after the decimal point");
  }
  if (peek() == 'e' || peek() == 'E') {
    take();
    if (peek() == '+' || peek() == '-') take();
    digits("in the exponent");
  }
  const int c = peek();
  if (c >= 0 && (std::isalpha(c) || c == '.' || c == '"'))
    fail_at(offset(), fmt::format("unexpected {} right after the number {}", printable(c), text_));
  number_is_integer_ = text_.find_first_of(".eE") == std::string::npos;
  number_has_exponent_ = text_.find_first_of("eE") != std::string::npos;
  view_ = text_;
}

void JsonPullParser::read_literal(const char* word) {
  const std::uint64_t start = offset();
  for (const char* p = word; *p != '\0'; ++p) {
    if (peek() != static_cast<unsigned char>(*p)) {
      fail_at(start, fmt::format("invalid literal: expected {}", word));
    }
    ++pos_;
  }
  const int c = peek();
  if (c >= 0 && std::isalnum(c)) fail_at(start, fmt::format("invalid literal: expected {}", word));
}

void JsonPullParser::skip_value() {
  if (last_ != JsonToken::begin_object && last_ != JsonToken::begin_array) return;
  const int target = depth() - 1;
  while (depth() > target) next();
}

void JsonPullParser::skip_next_value() {
  keep_text_ = false;
  try {
    next();
    skip_value();
  } catch (...) {
    keep_text_ = true;
    throw;
  }
  keep_text_ = true;
}

nlohmann::json JsonPullParser::read_value() {
  switch (last_) {
    case JsonToken::begin_object: {
      nlohmann::json object = nlohmann::json::object();
      while (next() == JsonToken::key) {
        std::string key(view_);
        next();
        object[key] = read_value();
      }
      return object;
    }
    case JsonToken::begin_array: {
      nlohmann::json array = nlohmann::json::array();
      for (JsonToken t = next(); t != JsonToken::end_array; t = next()) array.push_back(read_value());
      return array;
    }
    case JsonToken::string: return std::string(view_);
    case JsonToken::number:
      if (number_is_integer_) {
        if (view_[0] == '-') return as_int64("number");
        return as_uint64("number");
      }
      return as_double("number");
    case JsonToken::true_value: return true;
    case JsonToken::false_value: return false;
    case JsonToken::null_value: return nullptr;
    default: fail(fmt::format("expected a value, found {}", describe(last_)));
  }
}

double JsonPullParser::number_as_double(std::string_view what) const {
  // The tokenizer has checked JSON's grammar, which from_chars accepts. Out of range (1e999,
  // 1e-999) is rare: strtod says what it rounds to.
  double v = 0;
  const auto [end, error] = std::from_chars(view_.data(), view_.data() + view_.size(), v);
  if (error == std::errc()) return v;
  v = std::strtod(std::string(view_).c_str(), nullptr);
  // Tiny values round to 0; an infinity would reach sums and the JSON we write, which has none.
  if (!std::isfinite(v)) fail(fmt::format("{}: {} is beyond the range of a double (about 1.8e308)", what, view_));
  return v;
}

std::int64_t JsonPullParser::as_int64(std::string_view what) const {
  if (last_ != JsonToken::number) fail_type(what, "an integer");
  if (number_is_integer_) {
    std::int64_t v = 0;
    const auto [end, error] = std::from_chars(view_.data(), view_.data() + view_.size(), v);
    if (error != std::errc()) fail(fmt::format("{}: {} does not fit in 64 bits", what, view_));
    return v;
  }
  const double v = number_as_double(what);
  if (v != std::floor(v) || std::abs(v) > 9.2e18) fail_type(what, "an integer");
  return static_cast<std::int64_t>(v);
}

std::uint64_t JsonPullParser::as_uint64(std::string_view what) const {
  if (last_ != JsonToken::number || view_[0] == '-') fail_type(what, "a non-negative integer");
  if (number_is_integer_) {
    std::uint64_t v = 0;
    const auto [end, error] = std::from_chars(view_.data(), view_.data() + view_.size(), v);
    if (error != std::errc()) fail(fmt::format("{}: {} does not fit in 64 bits", what, view_));
    return v;
  }
  const double v = number_as_double(what);
  if (v != std::floor(v) || v > 1.8e19) fail_type(what, "a non-negative integer");
  return static_cast<std::uint64_t>(v);
}

double JsonPullParser::as_double(std::string_view what) const {
  if (last_ != JsonToken::number) fail_type(what, "a number");
  return number_as_double(what);
}

std::int64_t JsonPullParser::as_microseconds_in_ns(std::string_view what) const {
  // Perfetto accepts numeric strings for ts/dur; so do we.
  if (last_ != JsonToken::number && last_ != JsonToken::string) fail_type(what, "a number of microseconds");
  const std::string_view t = view_;
  std::size_t i = 0;
  const bool negative = i < t.size() && t[i] == '-';
  if (negative) ++i;
  if (i >= t.size() || !is_digit(static_cast<unsigned char>(t[i]))) fail_type(what, "a number of microseconds");
  const bool exponent = last_ == JsonToken::number ? number_has_exponent_ : t.find_first_of("eE") != std::string::npos;
  if (exponent) {
    const std::string copy(t);  // strtod needs the terminating NUL
    char* end = nullptr;
    const double v = std::strtod(copy.c_str(), &end);
    if (end == nullptr || *end != '\0' || !std::isfinite(v)) fail_type(what, "a number of microseconds");
    // Checked before llround, whose result is undefined beyond 64 bits (1e300 came back as INT64_MIN).
    if (std::abs(v) * 1000.0 >= 9.2e18) fail(fmt::format("{}: {} is too large", what, t));
    return static_cast<std::int64_t>(std::llround(v * 1000.0));
  }
  std::int64_t us = 0;
  for (; i < t.size() && is_digit(static_cast<unsigned char>(t[i])); ++i) {
    if (us > (std::numeric_limits<std::int64_t>::max() / 10 - 10) / 1000) fail(fmt::format("{}: {} is too large", what, t));
    us = us * 10 + (t[i] - '0');
  }
  std::int64_t ns = us * 1000;
  if (i < t.size() && t[i] == '.') {
    ++i;
    std::int64_t scale = 100;
    bool round_up = false;
    for (int digit = 0; i < t.size() && is_digit(static_cast<unsigned char>(t[i])); ++i, ++digit) {
      if (digit < 3) {
        ns += (t[i] - '0') * scale;
        scale /= 10;
      } else if (digit == 3) {
        round_up = t[i] >= '5';
      }
    }
    if (round_up) ++ns;
  }
  if (i != t.size()) fail_type(what, "a number of microseconds");
  return negative ? -ns : ns;
}

}  // namespace attnprof::trace
