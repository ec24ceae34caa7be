// The bytes of a JSON document (a trace, a summary) in a file, plain or gzip-compressed. Both
// directions stream through zlib a buffer at a time, so memory stays flat however large the
// document is. A reader tells gzip from plain by the first bytes (1f 8b), never by the name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attnprof {

enum class Compression : std::uint8_t { none, gzip };

// A document that could not be read: the file could not be opened or read, or its gzip data
// is truncated or corrupt. what() names the file; reason() says what went wrong without it
// (for messages that name the file and a place in the document themselves).
class DocumentReadError : public std::runtime_error {
 public:
  DocumentReadError(const std::string& message, std::string reason)
      : std::runtime_error(message), reason_(std::move(reason)) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// True when `first_bytes` begin a gzip stream. A lone 0x1f counts: no JSON document starts
// with it, and "truncated gzip" says more than "unexpected byte 0x1f".
bool starts_like_gzip(std::string_view first_bytes);

// Reads a document's bytes from a file or from memory; gzip data is inflated as it is read.
// Concatenated gzip members (as `cat a.gz b.gz` makes) read as one document.
class DocumentReader {
 public:
  // Throws DocumentReadError when the file cannot be opened or its first bytes read.
  explicit DocumentReader(const std::filesystem::path& path);
  // Over `bytes`, which must outlive the reader; `name` appears in messages.
  DocumentReader(std::string_view bytes, std::string name);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // Fills `out` with up to `size` bytes of the document; 0 after its end. Throws
  // DocumentReadError for a read error and for truncated or corrupt gzip data, after handing
  // out every byte inflated before it: the call that meets the error returns what it has, and
  // the next one throws, so a reader knows where the readable document stops.
  std::size_t read(char* out, std::size_t size);

  bool compressed() const { return inflater_ != nullptr; }
  const std::string& name() const { return name_; }

 private:
  struct Inflater;  // zlib's state, kept out of this header

  std::size_t read_plain(char* out, std::size_t size);
  std::size_t read_inflated(char* out, std::size_t size);
  // Reads more of the file after the input not yet consumed; false at the end of the file.
  bool fill_input();
  // Consumes the rest of the input if it is all zero bytes (true), else leaves a non-zero byte
  // behind (false).
  bool skip_zero_padding();
  [[noreturn]] void fail(std::string reason) const;

  struct CloseFile {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };

  std::string name_;
  std::unique_ptr<std::FILE, CloseFile> file_;  // null when reading memory
  std::vector<unsigned char> input_;  // raw (possibly compressed) bytes read ahead of the document
  const unsigned char* input_data_ = nullptr;
  std::size_t input_pos_ = 0, input_end_ = 0;
  bool input_eof_ = false;
  std::uint64_t produced_ = 0;    // document bytes handed out so far
  std::string pending_error_;     // met after inflating bytes not yet handed out; thrown next
  std::unique_ptr<Inflater> inflater_;
};

// Writes a document's bytes to a file, plain or deflated into gzip as they come.
class DocumentWriter {
 public:
  // `gzip_level`: zlib's 1 (Z_BEST_SPEED) to 9 (Z_BEST_COMPRESSION), or -1 for its default (6).
  // Throws std::runtime_error when the file cannot be created.
  DocumentWriter(std::filesystem::path path, Compression compression, int gzip_level = -1);
  ~DocumentWriter();  // closes without reporting; call close() to learn whether all went well
  DocumentWriter(const DocumentWriter&) = delete;
  DocumentWriter& operator=(const DocumentWriter&) = delete;

  // Every error names the call (fwrite, deflate, ...) and the file.
  void write(std::string_view bytes);
  // Ends the gzip stream, flushes and closes the file. Once; later calls do nothing.
  void close();

  std::uint64_t document_bytes() const { return document_bytes_; }  // as given to write()
  std::uint64_t file_bytes() const { return file_bytes_; }          // as written to the file

 private:
  struct Deflater;

  void deflate_into_file(int flush);
  void write_to_file(const void* data, std::size_t size);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<Deflater> deflater_;
  std::uint64_t document_bytes_ = 0;
  std::uint64_t file_bytes_ = 0;
};

// The whole document in `path`, inflated when it is gzip (`summary.json.gz`). For small files:
// it is held in memory. Throws DocumentReadError.
std::string read_file_text(const std::filesystem::path& path);

}  // namespace attnprof
