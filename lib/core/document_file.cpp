#include "core/document_file.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

#include "core/errors.hpp"

namespace attnprof {
namespace {

// Compressed input read ahead: a trace deflates about tenfold, so this feeds a 1 MB parse chunk.
constexpr std::size_t kInputBytes = 128 << 10;
// Deflated output collected before each fwrite.
constexpr std::size_t kOutputBytes = 256 << 10;
// zlib's windowBits for a gzip wrapper (not zlib's own) around a 32 kB window.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kMemLevel = 8;  // zlib's default

// zlib counts in uInt: larger spans go through in pieces.
uInt zlib_size(std::size_t n) { return static_cast<uInt>(std::min<std::size_t>(n, UINT_MAX)); }

std::string zlib_code(int code) {
  switch (code) {
    case Z_OK: return "Z_OK";
    case Z_STREAM_END: return "Z_STREAM_END";
    case Z_NEED_DICT: return "Z_NEED_DICT";
    case Z_ERRNO: return "Z_ERRNO";
    case Z_STREAM_ERROR: return "Z_STREAM_ERROR";
    case Z_DATA_ERROR: return "Z_DATA_ERROR";
    case Z_MEM_ERROR: return "Z_MEM_ERROR";
    case Z_BUF_ERROR: return "Z_BUF_ERROR";
    case Z_VERSION_ERROR: return "Z_VERSION_ERROR";
  }
  return fmt::format("code {}", code);
}

// "inflate() returned Z_DATA_ERROR (invalid block type)"
std::string zlib_failure(const char* call, int code, const z_stream& stream) {
  if (stream.msg != nullptr) return fmt::format("{}() returned {} ({})", call, zlib_code(code), stream.msg);
  return fmt::format("{}() returned {}", call, zlib_code(code));
}

}  // namespace

bool starts_like_gzip(std::string_view first_bytes) {
  return !first_bytes.empty() && static_cast<unsigned char>(first_bytes[0]) == 0x1f &&
         (first_bytes.size() == 1 || static_cast<unsigned char>(first_bytes[1]) == 0x8b);
}

// ---- reading ----------------------------------------------------------------------------------

struct DocumentReader::Inflater {
  z_stream stream{};
  bool initialised = false;
  bool member_ended = false;  // the end marker of the current gzip member was read
  bool finished = false;      // the last member ended with the input; inflateEnd() was called

  ~Inflater() {
    // Only after an error or a reader abandoned early: there is nobody left to tell.
    if (initialised && !finished) (void)inflateEnd(&stream);
  }
};

DocumentReader::DocumentReader(const std::filesystem::path& path) : name_(path.string()) {
  errno = 0;
  file_.reset(std::fopen(path.c_str(), "rb"));
  if (!file_) {
    const std::string reason = std::strerror(errno);
    throw DocumentReadError(fmt::format("cannot read {}: {}", name_, reason), reason);
  }
  input_.resize(kInputBytes);
  input_data_ = input_.data();
  try {
    fill_input();
  } catch (const DocumentReadError& e) {  // e.g. a directory: fopen accepts it, fread does not
    throw DocumentReadError(fmt::format("cannot read {}: {}", name_, e.reason()), e.reason());
  }
  const std::string_view first(reinterpret_cast<const char*>(input_data_), input_end_);
  if (starts_like_gzip(first)) {
    inflater_ = std::make_unique<Inflater>();
    const int status = inflateInit2(&inflater_->stream, kGzipWindowBits);
    if (status != Z_OK) fail(zlib_failure("inflateInit2", status, inflater_->stream));
    inflater_->initialised = true;
  }
}

DocumentReader::DocumentReader(std::string_view bytes, std::string name) : name_(std::move(name)) {
  input_data_ = reinterpret_cast<const unsigned char*>(bytes.data());
  input_end_ = bytes.size();
  input_eof_ = true;
  if (starts_like_gzip(bytes)) {
    inflater_ = std::make_unique<Inflater>();
    const int status = inflateInit2(&inflater_->stream, kGzipWindowBits);
    if (status != Z_OK) fail(zlib_failure("inflateInit2", status, inflater_->stream));
    inflater_->initialised = true;
  }
}

DocumentReader::~DocumentReader() = default;

void DocumentReader::fail(std::string reason) const {
  const std::string message = fmt::format("{}: {}", name_, reason);
  throw DocumentReadError(message, std::move(reason));
}

bool DocumentReader::fill_input() {
  if (!file_ || input_eof_) return false;
  const std::size_t kept = input_end_ - input_pos_;
  std::memmove(input_.data(), input_.data() + input_pos_, kept);
  input_pos_ = 0;
  const std::size_t wanted = input_.size() - kept;
  const std::size_t got = std::fread(input_.data() + kept, 1, wanted, file_.get());
  input_end_ = kept + got;
  if (got < wanted) {
    if (std::ferror(file_.get())) fail(fmt::format("fread() failed: {}", std::strerror(errno)));
    input_eof_ = true;
  }
  return got > 0;
}

std::size_t DocumentReader::read(char* out, std::size_t size) {
  if (!pending_error_.empty()) fail(pending_error_);
  const std::size_t n = inflater_ ? read_inflated(out, size) : read_plain(out, size);
  produced_ += n;
  return n;
}

std::size_t DocumentReader::read_plain(char* out, std::size_t size) {
  const std::size_t buffered = std::min(size, input_end_ - input_pos_);
  if (buffered > 0) std::memcpy(out, input_data_ + input_pos_, buffered);
  input_pos_ += buffered;
  std::size_t produced = buffered;
  if (produced < size && file_ && !input_eof_) {
    // Past the bytes read to look for gzip's magic, straight into the caller's buffer.
    const std::size_t wanted = size - produced;
    const std::size_t got = std::fread(out + produced, 1, wanted, file_.get());
    if (got < wanted) {
      if (std::ferror(file_.get())) fail(fmt::format("fread() failed: {}", std::strerror(errno)));
      input_eof_ = true;
    }
    produced += got;
  }
  return produced;
}

bool DocumentReader::skip_zero_padding() {
  do {
    const auto* begin = input_data_ + input_pos_;
    const auto* end = input_data_ + input_end_;
    if (std::find_if(begin, end, [](unsigned char b) { return b != 0; }) != end) return false;
    input_pos_ = input_end_;
  } while (fill_input());
  return true;
}

std::size_t DocumentReader::read_inflated(char* out, std::size_t size) {
  Inflater& z = *inflater_;
  z_stream& s = z.stream;
  std::size_t produced = 0;
  // An error met after some bytes were inflated waits for the next call: those bytes come first.
  auto stop = [&](std::string reason) {
    if (produced == 0) fail(std::move(reason));
    pending_error_ = std::move(reason);
    return produced;
  };
  while (produced < size && !z.finished) {
    if (z.member_ended) {
      // Another gzip member may follow (`cat a.gz b.gz`); anything else is not gzip's.
      if (input_end_ - input_pos_ < 2) fill_input();
      const std::string_view rest(reinterpret_cast<const char*>(input_data_ + input_pos_), input_end_ - input_pos_);
      if (rest.empty()) {
        z.finished = true;
        const int status = inflateEnd(&s);
        if (status != Z_OK) return stop(zlib_failure("inflateEnd", status, s));
        break;
      }
      // Zero bytes to the end (a tape or block device's padding) end the data, as gzip(1) reads it.
      const bool padding = rest.front() == '\0';
      if (padding ? !skip_zero_padding() : !starts_like_gzip(rest))
        return stop("corrupt gzip data: bytes that are not gzip follow the compressed stream");
      if (padding) continue;  // the input is used up: the member_ended branch finishes
      const int status = inflateReset(&s);
      if (status != Z_OK) return stop(zlib_failure("inflateReset", status, s));
      z.member_ended = false;
    }
    if (input_pos_ == input_end_ && !fill_input())
      return stop("truncated gzip data: the file ends before the compressed stream does");
    const uInt in = zlib_size(input_end_ - input_pos_);
    const uInt room = zlib_size(size - produced);
    s.next_in = const_cast<Bytef*>(input_data_ + input_pos_);  // zlib's API is not const-correct
    s.avail_in = in;
    s.next_out = reinterpret_cast<Bytef*>(out + produced);
    s.avail_out = room;
    const int status = inflate(&s, Z_NO_FLUSH);
    input_pos_ += in - s.avail_in;
    produced += room - s.avail_out;
    switch (status) {
      case Z_OK: break;
      case Z_STREAM_END: z.member_ended = true; break;
      case Z_BUF_ERROR:
        // No progress without more input: the loop reads more, or reports the truncation.
        if (input_pos_ == input_end_) break;
        return stop(zlib_failure("inflate", status, s));
      case Z_DATA_ERROR:
      case Z_NEED_DICT:  // gzip has no preset dictionaries: a corrupt header
        return stop("corrupt gzip data: " + zlib_failure("inflate", status, s));
      default: return stop(zlib_failure("inflate", status, s));
    }
  }
  return produced;
}

std::string read_file_text(const std::filesystem::path& path) {
  DocumentReader reader(path);
  std::string text;
  char buffer[1 << 16];
  while (const std::size_t n = reader.read(buffer, sizeof buffer)) text.append(buffer, n);
  return text;
}

// ---- writing ----------------------------------------------------------------------------------

struct DocumentWriter::Deflater {
  z_stream stream{};
  bool ended = false;  // deflateEnd() was called
  std::vector<unsigned char> output = std::vector<unsigned char>(kOutputBytes);

  ~Deflater() {
    // Only for a writer abandoned before close() (an exception on the way): nobody to tell.
    if (!ended) (void)deflateEnd(&stream);
  }
};

DocumentWriter::DocumentWriter(std::filesystem::path path, Compression compression, int gzip_level)
    : path_(std::move(path)) {
  errno = 0;
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) throw OutputFileError(fmt::format("cannot write {}: {}", path_.string(), std::strerror(errno)));
  if (compression == Compression::gzip) {
    auto deflater = std::make_unique<Deflater>();
    const int status =
        deflateInit2(&deflater->stream, gzip_level, Z_DEFLATED, kGzipWindowBits, kMemLevel, Z_DEFAULT_STRATEGY);
    if (status != Z_OK) {
      deflater->ended = true;  // never started
      std::fclose(file_);
      file_ = nullptr;
      throw std::runtime_error(fmt::format("writing {}: {} (gzip level {})", path_.string(),
                                           zlib_failure("deflateInit2", status, deflater->stream), gzip_level));
    }
    deflater_ = std::move(deflater);
  }
}

DocumentWriter::~DocumentWriter() {
  deflater_.reset();
  if (file_ != nullptr) std::fclose(file_);
}

void DocumentWriter::write_to_file(const void* data, std::size_t size) {
  if (std::fwrite(data, 1, size, file_) != size)
    throw std::runtime_error(fmt::format("writing {}: fwrite() failed: {}", path_.string(), std::strerror(errno)));
  file_bytes_ += size;
}

void DocumentWriter::write(std::string_view bytes) {
  if (file_ == nullptr) throw std::logic_error(fmt::format("writing {}: the file is already closed", path_.string()));
  document_bytes_ += bytes.size();
  if (!deflater_) {
    write_to_file(bytes.data(), bytes.size());
    return;
  }
  z_stream& s = deflater_->stream;
  while (!bytes.empty()) {
    const uInt piece = zlib_size(bytes.size());
    s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    s.avail_in = piece;
    deflate_into_file(Z_NO_FLUSH);
    bytes.remove_prefix(piece);
  }
}

void DocumentWriter::deflate_into_file(int flush) {
  z_stream& s = deflater_->stream;
  std::vector<unsigned char>& output = deflater_->output;
  for (;;) {
    s.next_out = output.data();
    s.avail_out = zlib_size(output.size());
    const int status = deflate(&s, flush);
    const std::size_t produced = output.size() - s.avail_out;
    // Z_BUF_ERROR is "no progress possible", not a failure, unless finishing makes none at all.
    const bool stuck = status == Z_BUF_ERROR && flush == Z_FINISH && produced == 0;
    if ((status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) || stuck)
      throw std::runtime_error(fmt::format("writing {}: {}", path_.string(), zlib_failure("deflate", status, s)));
    write_to_file(output.data(), produced);
    if (flush == Z_FINISH ? status == Z_STREAM_END : s.avail_out != 0) return;
  }
}

void DocumentWriter::close() {
  if (file_ == nullptr) return;
  if (deflater_) {
    deflate_into_file(Z_FINISH);
    const int status = deflateEnd(&deflater_->stream);
    deflater_->ended = true;
    if (status != Z_OK)
      throw std::runtime_error(
          fmt::format("writing {}: {}", path_.string(), zlib_failure("deflateEnd", status, deflater_->stream)));
  }
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0)
    throw std::runtime_error(fmt::format("writing {}: fclose() failed: {}", path_.string(), std::strerror(errno)));
}

}  // namespace attnprof
