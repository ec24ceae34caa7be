// A streaming (pull) JSON tokenizer over a file read in fixed-size chunks: memory stays flat
// however large the document, and no DOM is built unless asked for one small sub-value at a
// time. Every error names the file, line, column and byte offset, and says what was expected.
// Gzip input (recognised by its first bytes, in a file or in memory) is inflated chunk by
// chunk; offsets, lines and columns are then those of the decompressed JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/document_file.hpp"

namespace attnprof::trace {

struct JsonLocation {
  std::uint64_t offset = 0;  // bytes from the start of the document
  std::uint64_t line = 1;
  std::uint64_t column = 1;  // in bytes
};

// A document that cannot be read as a trace. `malformed`: not valid JSON, or a field of the
// wrong type. `foreign`: valid JSON that is not a Chrome/Kineto trace (a summary.json, say).
class TraceFormatError : public std::runtime_error {
 public:
  enum class Kind { malformed, foreign };
  TraceFormatError(Kind kind, std::string message, std::optional<JsonLocation> where = std::nullopt)
      : std::runtime_error(std::move(message)), kind_(kind), where_(where) {}
  Kind kind() const { return kind_; }
  const std::optional<JsonLocation>& where() const { return where_; }

 private:
  Kind kind_;
  std::optional<JsonLocation> where_;
};

enum class JsonToken : std::uint8_t {
  begin_object,
  end_object,
  begin_array,
  end_array,
  key,     // text() is the member name
  string,  // text() is the unescaped value
  number,  // text() is the number as written (for exact decimal parsing)
  true_value,
  false_value,
  null_value,
  end_of_input,
};

// "a string", "'{'", ... for messages.
const char* describe(JsonToken token);

class JsonPullParser {
 public:
  static constexpr std::size_t kDefaultChunkBytes = 1 << 20;
  static constexpr int kMaxDepth = 512;

  // Reads `path`, plain or gzip; throws TraceFormatError (malformed) if it cannot be opened.
  // Truncated or corrupt gzip data is a malformed error too, where the JSON stops.
  explicit JsonPullParser(const std::filesystem::path& path, std::size_t chunk_bytes = kDefaultChunkBytes);
  // Parses text held in memory, plain or gzip (`name` appears in messages).
  JsonPullParser(std::string text, std::string name);
  ~JsonPullParser();
  JsonPullParser(const JsonPullParser&) = delete;
  JsonPullParser& operator=(const JsonPullParser&) = delete;

  // The next token; enforces JSON's grammar (commas, colons, nesting, one top-level value).
  JsonToken next();
  JsonToken last() const { return last_; }
  // Valid until the next call of next(): a view into the read buffer where the token lies
  // within it unescaped (the common case, no copy), else into a copy.
  std::string_view text() const { return view_; }
  // Nesting depth after the last token (1 inside the top-level object).
  int depth() const { return static_cast<int>(stack_.size()); }
  // Where the last token started: the byte offset is free, line and column cost a re-read.
  std::uint64_t token_offset() const { return token_offset_; }
  JsonLocation location() const { return locate(token_offset_); }

  // After the first token of a value: consume the rest of it (nothing to do for scalars).
  void skip_value();
  // After a key: consume the whole value that follows without keeping any of its text (the
  // grammar is still checked). The fast way past values nobody reads.
  void skip_next_value();
  // After the first token of a value: the whole value as a DOM. Only for small sub-documents.
  nlohmann::json read_value();

  // Typed views of the last token, or a malformed-file error naming `what` and what was found.
  std::int64_t as_int64(std::string_view what) const;
  std::uint64_t as_uint64(std::string_view what) const;
  double as_double(std::string_view what) const;
  // A decimal number of microseconds (ts/dur) as exact nanoseconds: "1700000000123456.789" has
  // more digits than a double holds, so the text is parsed digit by digit.
  std::int64_t as_microseconds_in_ns(std::string_view what) const;

  [[noreturn]] void fail(std::string_view message) const;
  [[noreturn]] void fail_at(std::uint64_t offset, std::string_view message) const;
  [[noreturn]] void fail_type(std::string_view what, std::string_view expected) const;

  const std::string& source_name() const { return name_; }
  // The input is gzip, inflated as it is read.
  bool compressed() const { return reader_ != nullptr && reader_->compressed(); }

 private:
  enum class Expect : std::uint8_t {
    value,
    value_or_end_array,
    comma_or_end_array,
    key_or_end_object,
    key,
    comma_or_end_object,
    end_of_input,
  };

  int peek() { return pos_ < end_ ? static_cast<unsigned char>(data_[pos_]) : peek_after_refill(); }
  int peek_after_refill();
  bool refill();
  void skip_whitespace() {
    // Separators are short (our events have none inside, Kineto writes ", "): the common case stays inline.
    while (pos_ < end_) {
      const char c = data_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
    skip_whitespace_across_chunks();
  }
  void skip_whitespace_across_chunks();
  void read_string(bool keep);
  void read_string_slowly(bool keep);  // escapes, chunk boundaries, errors
  void read_number();
  bool read_number_in_place();
  void read_number_across_chunks();
  void read_literal(const char* word);
  void after_value();
  JsonToken close(char container);
  std::uint64_t offset() const { return consumed_ + pos_; }
  JsonLocation locate(std::uint64_t offset) const;
  std::string found_text() const;
  double number_as_double(std::string_view what) const;

  std::string name_;
  std::filesystem::path path_;      // empty when parsing memory
  std::unique_ptr<DocumentReader> reader_;  // null for plain text in memory, parsed in place
  bool reader_failed_ = false;      // the reader threw: its input is known bad, and why
  std::string memory_;              // the whole input when parsing memory
  std::vector<char> chunk_;
  const char* data_ = nullptr;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::uint64_t consumed_ = 0;      // bytes before data_[0]
  bool eof_ = false;

  std::vector<char> stack_;         // '{' or '[' per open container
  Expect expect_ = Expect::value;
  JsonToken last_ = JsonToken::end_of_input;
  std::string text_;               // the last token's text where it could not be a view
  std::string_view view_;          // the last token's text
  bool keep_text_ = true;         // false while skip_next_value() runs: strings are checked, not copied
  bool number_is_integer_ = true;  // the last number had no fraction or exponent
  bool number_has_exponent_ = false;
  std::uint64_t token_offset_ = 0;
};

}  // namespace attnprof::trace
