// gzip traces (trace.json.gz): the writer deflates as it streams and every reader inflates by
// the first bytes, whatever the name. A run's trace reads back the same in both formats, and
// truncated or corrupt gzip is a malformed-trace error that names the file. zlib's own gz*
// functions are the independent check that what we write is ordinary gzip.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "bench/synthetic_run.hpp"
#include "core/document_file.hpp"
#include "summary/trace_report.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/chrome_trace_writer.hpp"
#include "trace/json_pull_parser.hpp"
#include "trace/trace_format.hpp"
#include "trace/trace_merge.hpp"
#include "support/scratch_dir.hpp"

namespace attnprof {
namespace {

using ::testing::HasSubstr;
using trace::JsonPullParser;
using trace::JsonToken;
using trace::TraceFormat;
using trace::TraceFormatError;

std::filesystem::path fresh_dir(const std::string& name) {
  return attnprof::test::fresh_dir("attnprof_gzip_test", name);
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// zlib's gzip file functions, independent of the DocumentWriter/DocumentReader under test.
void gzip_with_zlib(const std::filesystem::path& path, const std::string& text, const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string gunzip_with_zlib(const std::filesystem::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return "";
  std::string text;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  EXPECT_EQ(n, 0) << "gzread failed on " << path;
  EXPECT_EQ(gzclose(f), Z_OK);
  return text;
}

bool has_gzip_magic(const std::filesystem::path& path) {
  const std::string bytes = read_bytes(path);
  return bytes.size() > 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Walks two documents token by token, in step; `traceName` (the file's own name) may differ.
void expect_same_tokens(JsonPullParser& a, JsonPullParser& b) {
  std::uint64_t n = 0;
  bool trace_name_next = false;
  for (;;) {
    const JsonToken ta = a.next();
    const JsonToken tb = b.next();
    ASSERT_EQ(ta, tb) << "token " << n << " at byte " << a.token_offset();
    if (!trace_name_next) {
      ASSERT_EQ(a.text(), b.text()) << "token " << n << " at byte " << a.token_offset();
    }
    trace_name_next = ta == JsonToken::key && a.depth() == 1 && a.text() == "traceName";
    if (ta == JsonToken::end_of_input) break;
    ++n;
  }
  EXPECT_GT(n, 1000u);
}

void expect_same_tokens(const std::filesystem::path& a, const std::filesystem::path& b) {
  JsonPullParser pa(a), pb(b);
  expect_same_tokens(pa, pb);
}

// What the reader hands to its callback, as one line.
std::string event_line(const trace::TraceEvent& e) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} corr={} case={} iter={} regs={} grid={} bytes={} api={} m={}",
                     e.index, e.ph, e.cat, e.name, e.pid, e.tid, e.ts_ns.value_or(-1), e.dur_ns.value_or(-1),
                     e.id.value_or(0), e.bp, e.args.correlation.value_or(-1), e.args.case_index.value_or(-1),
                     e.args.iteration.value_or(-1), e.args.registers_per_thread.value_or(-1),
                     e.args.grid ? (*e.args.grid)[0] : -1, e.args.bytes.value_or(-1), e.args.launch_api.value_or(""),
                     e.args.metadata_name.value_or(""));
}

// The message and place of the TraceFormatError reading `path` ends with; fails the test if none.
TraceFormatError read_error(const std::filesystem::path& path) {
  try {
    trace::read_chrome_trace(path, [](const trace::TraceEvent&, const trace::TraceDocument&) {});
  } catch (const TraceFormatError& e) {
    return e;
  }
  ADD_FAILURE() << "no error reading " << path;
  return TraceFormatError(TraceFormatError::Kind::foreign, "none");
}

// ---- the format's names -------------------------------------------------------------------------

TEST(TraceFormat, NamesParseAndPrintBothWays) {
  for (TraceFormat f : {TraceFormat::json, TraceFormat::json_gz}) EXPECT_EQ(trace::parse_trace_format(trace::to_string(f)), f);
  EXPECT_EQ(trace::to_string(TraceFormat::json_gz), "json.gz");
  EXPECT_EQ(trace::parse_trace_format("gzip"), std::nullopt);
  EXPECT_EQ(trace::parse_trace_format("JSON"), std::nullopt);
  EXPECT_EQ(trace::trace_file_name("trace", TraceFormat::json), "trace.json");
  EXPECT_EQ(trace::trace_file_name("trace-rank1-pid7", TraceFormat::json_gz), "trace-rank1-pid7.json.gz");
  EXPECT_EQ(trace::TraceWriteOptions().format, TraceFormat::json);
}

// ---- DocumentWriter and DocumentReader ----------------------------------------------------------

// Pieces of every size, one larger than the writer's output buffer: zlib reads back their concatenation.
TEST(DocumentFile, ZlibReadsWhatTheWriterDeflates) {
  const std::filesystem::path dir = fresh_dir("writer");
  std::mt19937 random(7);
  std::vector<std::string> pieces = {"", "{", std::string(1, '\0'), "\"a\": [1, 2, 3],"};
  std::string big;
  for (int i = 0; i < 120'000; ++i) big += fmt::format("{},", random() % 1000);  // ~480 kB, some entropy
  pieces.push_back(big);
  pieces.push_back("\"end\": true}\n");
  std::string expected;
  for (const std::string& p : pieces) expected += p;
  for (int level : {1, 6, 9, -1}) {
    const std::filesystem::path path = dir / fmt::format("level{}.json.gz", level);
    DocumentWriter writer(path, Compression::gzip, level);
    for (const std::string& p : pieces) writer.write(p);
    writer.close();
    writer.close();  // once is enough; again does nothing
    EXPECT_EQ(writer.document_bytes(), expected.size());
    EXPECT_EQ(writer.file_bytes(), std::filesystem::file_size(path));
    EXPECT_TRUE(has_gzip_magic(path));
    EXPECT_EQ(gunzip_with_zlib(path), expected) << "level " << level;
    EXPECT_EQ(read_file_text(path), expected) << "level " << level;
  }
  const std::filesystem::path plain = dir / "plain.json";
  DocumentWriter writer(plain, Compression::none);
  for (const std::string& p : pieces) writer.write(p);
  writer.close();
  EXPECT_EQ(read_bytes(plain), expected);
  EXPECT_EQ(writer.file_bytes(), expected.size());
}

TEST(DocumentFile, ALevelZlibRefusesNamesTheCallAndTheFile) {
  const std::filesystem::path path = fresh_dir("level") / "t.json.gz";
  try {
    DocumentWriter writer(path, Compression::gzip, 42);
    ADD_FAILURE() << "level 42 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("deflateInit2() returned Z_STREAM_ERROR"));
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
  }
}

// Detection goes by the first bytes: gzip named .json and JSON named .json.gz both read right.
TEST(DocumentFile, GzipIsToldByItsBytesNotItsName) {
  const std::filesystem::path dir = fresh_dir("magic");
  const std::string text = R"({"cases": [1, 2, 3], "name": "summary"})";
  gzip_with_zlib(dir / "gzip.json", text);
  write_bytes(dir / "plain.json.gz", text);
  EXPECT_EQ(read_file_text(dir / "gzip.json"), text);
  EXPECT_EQ(read_file_text(dir / "plain.json.gz"), text);
  EXPECT_TRUE(DocumentReader(dir / "gzip.json").compressed());
  EXPECT_FALSE(DocumentReader(dir / "plain.json.gz").compressed());
  write_bytes(dir / "empty.json", "");
  EXPECT_EQ(read_file_text(dir / "empty.json"), "");
}

// `cat a.gz b.gz > ab.gz` (or gzip's append mode) is one document, whatever sizes it is read in.
TEST(DocumentFile, ConcatenatedGzipMembersReadAsOneDocument) {
  const std::filesystem::path path = fresh_dir("members") / "ab.json.gz";
  gzip_with_zlib(path, "{\"a\": [1, 2], ");
  gzip_with_zlib(path, "\"b\": \"second member\"}", "ab");
  EXPECT_EQ(read_file_text(path), R"({"a": [1, 2], "b": "second member"})");
  for (std::size_t size : {1u, 2u, 5u, 64u}) {
    DocumentReader reader(path);
    std::string text;
    std::vector<char> buffer(size);
    while (const std::size_t n = reader.read(buffer.data(), size)) text.append(buffer.data(), n);
    EXPECT_EQ(text, R"({"a": [1, 2], "b": "second member"})") << "read " << size << " at a time";
  }
}

TEST(DocumentFile, ReadErrorsNameTheFileAndWhatIsWrong) {
  const std::filesystem::path dir = fresh_dir("read_errors");
  auto error_of = [](const std::filesystem::path& path) -> std::string {
    try {
      read_file_text(path);
    } catch (const DocumentReadError& e) {
      EXPECT_THAT(e.what(), HasSubstr(path.string()));
      return e.what();
    }
    ADD_FAILURE() << "read " << path;
    return "";
  };
  EXPECT_THAT(error_of(dir / "missing.json.gz"), HasSubstr("cannot read"));
  EXPECT_THAT(error_of(dir), HasSubstr("cannot read"));  // a directory

  std::string text;
  for (int i = 0; i < 2000; ++i) text += fmt::format("{{\"i\": {}}},\n", i);
  gzip_with_zlib(dir / "whole.json.gz", text);
  const std::string gz = read_bytes(dir / "whole.json.gz");
  write_bytes(dir / "truncated.json.gz", gz.substr(0, gz.size() / 2));
  EXPECT_THAT(error_of(dir / "truncated.json.gz"), HasSubstr("truncated gzip data"));
  write_bytes(dir / "no_trailer.json.gz", gz.substr(0, gz.size() - 4));  // all the data, no length
  EXPECT_THAT(error_of(dir / "no_trailer.json.gz"), HasSubstr("truncated gzip data"));
  write_bytes(dir / "magic_only.json.gz", gz.substr(0, 1));
  EXPECT_THAT(error_of(dir / "magic_only.json.gz"), HasSubstr("truncated gzip data"));
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 0x55;  // the CRC-32 of the trailer
  write_bytes(dir / "bad_crc.json.gz", bad_crc);
  EXPECT_THAT(error_of(dir / "bad_crc.json.gz"), HasSubstr("corrupt gzip data: inflate() returned Z_DATA_ERROR (incorrect data check)"));
  write_bytes(dir / "trailing.json.gz", gz + "not gzip");
  EXPECT_THAT(error_of(dir / "trailing.json.gz"), HasSubstr("bytes that are not gzip follow the compressed stream"));
  // Zero padding to the end is not data (gzip -t accepts it), whatever its length against the
  // reader's buffer; a non-zero byte after zeros is still an error.
  for (const std::size_t zeros : {std::size_t{1}, std::size_t{4096}, std::size_t{3} << 20}) {
    write_bytes(dir / "padded.json.gz", gz + std::string(zeros, '\0'));
    EXPECT_EQ(read_file_text(dir / "padded.json.gz"), text) << zeros << " zero bytes";
  }
  write_bytes(dir / "padded_then_data.json.gz", gz + std::string((std::size_t{1} << 20) + 7, '\0') + "x");
  EXPECT_THAT(error_of(dir / "padded_then_data.json.gz"), HasSubstr("bytes that are not gzip follow the compressed stream"));
}

// ---- a run's trace in both formats --------------------------------------------------------------

// One synthetic run (about 20,000 events) written as trace.json and as trace.json.gz.
class GzipTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test in a process of its own, several at once: one directory per process.
    dir_ = fresh_dir(fmt::format("run-{}", getpid()));
    bench::SyntheticRunOptions options;
    options.target_events = 20'000;
    json_run_ = bench::write_synthetic_run(dir_ / "trace.json", options);
    options.write.format = TraceFormat::json_gz;
    gz_run_ = bench::write_synthetic_run(dir_ / "trace.json.gz", options);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::filesystem::path json() { return dir_ / "trace.json"; }
  static std::filesystem::path gz() { return dir_ / "trace.json.gz"; }

  static std::filesystem::path dir_;
  static bench::SyntheticRunResult json_run_, gz_run_;
};
std::filesystem::path GzipTrace::dir_;
bench::SyntheticRunResult GzipTrace::json_run_, GzipTrace::gz_run_;

TEST_F(GzipTrace, IsOrdinaryGzipOfTheSameJson) {
  ASSERT_TRUE(has_gzip_magic(gz()));
  EXPECT_FALSE(has_gzip_magic(json()));
  EXPECT_FALSE(std::filesystem::exists(gz().string() + ".tmp"));
  EXPECT_EQ(gz_run_.events, json_run_.events);
  EXPECT_GE(json_run_.events, 20'000u);
  EXPECT_EQ(gz_run_.bytes, std::filesystem::file_size(gz()));
  std::string expected = read_bytes(json());
  const std::string name = "\"traceName\": \"trace.json\"";
  ASSERT_NE(expected.find(name), std::string::npos);
  expected.replace(expected.find(name), name.size(), "\"traceName\": \"trace.json.gz\"");
  EXPECT_TRUE(gunzip_with_zlib(gz()) == expected) << "zlib's gunzip differs from trace.json";
}

TEST_F(GzipTrace, ReadsBackTheSameEventsAsTheJson) {
  expect_same_tokens(json(), gz());
  std::vector<std::string> from_json;
  const trace::TraceDocument a = trace::read_chrome_trace(json(), [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    from_json.push_back(event_line(e));
  });
  std::size_t n = 0;
  const trace::TraceDocument b = trace::read_chrome_trace(gz(), [&](const trace::TraceEvent& e, const trace::TraceDocument&) {
    ASSERT_LT(n, from_json.size());
    EXPECT_EQ(event_line(e), from_json[n]);
    ++n;
  });
  EXPECT_EQ(n, from_json.size());
  EXPECT_EQ(b.events, a.events);
  EXPECT_EQ(b.base_time_ns, a.base_time_ns);
  EXPECT_EQ(b.devices.size(), a.devices.size());
  EXPECT_EQ(b.attnprof, a.attnprof);
  EXPECT_EQ(b.trace_name, "trace.json.gz");
}

TEST_F(GzipTrace, ReportsTheSameSummaryAsTheJson) {
  TraceReportOptions options;
  options.known_backends = bench::synthetic_backend_names();
  const TraceReport from_json = report_from_trace(json(), options);
  const TraceReport from_gz = report_from_trace(gz(), options);
  EXPECT_EQ(nlohmann::json(from_gz.summary), nlohmann::json(from_json.summary));
  EXPECT_EQ(from_gz.events, from_json.events);
  EXPECT_EQ(from_gz.origin, from_json.origin);
  EXPECT_EQ(from_gz.notes, from_json.notes);
  EXPECT_FALSE(from_gz.summary.cases.empty());
}

// The issue's bar: gzip at least 8x smaller than the JSON.
TEST_F(GzipTrace, IsAtLeastEightTimesSmaller) {
  const auto json_bytes = std::filesystem::file_size(json());
  const auto gz_bytes = std::filesystem::file_size(gz());
  EXPECT_GE(json_bytes, 8 * gz_bytes) << json_bytes << " bytes of JSON, " << gz_bytes << " of gzip";
}

TEST_F(GzipTrace, TheHeadIsReadFromEither) {
  const trace::TraceHead a = trace::read_trace_head(json());
  const trace::TraceHead b = trace::read_trace_head(gz());
  EXPECT_EQ(b.base_time_ns, a.base_time_ns);
  EXPECT_EQ(b.host_process, a.host_process);
  EXPECT_EQ(b.host_process_name, a.host_process_name);
  EXPECT_EQ(b.devices.size(), a.devices.size());
  EXPECT_TRUE(b.host_process.has_value());
}

// Every chunk boundary in the inflated text, and gzip held in memory, give the same tokens.
TEST_F(GzipTrace, ChunkSizesAndMemoryMakeNoDifference) {
  std::string head = read_bytes(json()).substr(0, 200'000);
  head = head.substr(0, head.rfind("},\n") + 1) + "]}";  // whole events only, closed
  const std::filesystem::path dir = fresh_dir("chunks");
  write_bytes(dir / "head.json", head);
  gzip_with_zlib(dir / "head.json.gz", head);
  for (std::size_t chunk : {16u, 17u, 4093u, 1u << 20}) {
    JsonPullParser plain(dir / "head.json", chunk), inflated(dir / "head.json.gz", chunk);
    EXPECT_TRUE(inflated.compressed());
    expect_same_tokens(plain, inflated);
  }
  JsonPullParser plain(dir / "head.json"), in_memory(read_bytes(dir / "head.json.gz"), "head.json.gz");
  EXPECT_TRUE(in_memory.compressed());
  expect_same_tokens(plain, in_memory);
}

// ---- merge ----------------------------------------------------------------------------------------

TEST_F(GzipTrace, MergeReadsGzipInputsAndWritesGzip) {
  const std::filesystem::path dir = fresh_dir("merge");
  bench::SyntheticRunOptions options;
  options.target_events = 3'000;
  bench::write_synthetic_run(dir / "other.json", options);
  options.write.format = TraceFormat::json_gz;
  bench::write_synthetic_run(dir / "other.json.gz", options);
  auto merge = [&](const std::filesystem::path& a, const std::filesystem::path& b, const std::filesystem::path& out,
                   TraceFormat format) {
    trace::MergeOptions merge_options;
    merge_options.write.format = format;
    return trace::merge_traces({{trace::read_trace_head(a), "rank 0", 0}, {trace::read_trace_head(b), "rank 1", 1}}, out,
                               merge_options, [](const trace::MergeResult& r) { return nlohmann::json{{"events", r.events}}; });
  };
  const trace::MergeResult plain = merge(json(), dir / "other.json", dir / "merged.json", TraceFormat::json);
  const trace::MergeResult gzip = merge(gz(), dir / "other.json.gz", dir / "merged.json.gz", TraceFormat::json_gz);
  const trace::MergeResult mixed = merge(json(), dir / "other.json.gz", dir / "mixed.json.gz", TraceFormat::json_gz);
  EXPECT_GT(plain.events, json_run_.events);
  EXPECT_EQ(gzip.events, plain.events);
  EXPECT_EQ(mixed.events, plain.events);
  EXPECT_FALSE(has_gzip_magic(dir / "merged.json"));
  EXPECT_TRUE(has_gzip_magic(dir / "merged.json.gz"));
  EXPECT_FALSE(std::filesystem::exists(dir / "merged.json.gz.tmp"));
  expect_same_tokens(dir / "merged.json", dir / "merged.json.gz");
  expect_same_tokens(dir / "merged.json", dir / "mixed.json.gz");
}

// ---- bad gzip ---------------------------------------------------------------------------------------

TEST_F(GzipTrace, ATruncatedGzipIsAMalformedTraceNamingTheFile) {
  const std::filesystem::path dir = fresh_dir("truncated");
  const std::string bytes = read_bytes(gz());
  const std::uint64_t json_size = gunzip_with_zlib(gz()).size();

  write_bytes(dir / "half.json.gz", bytes.substr(0, bytes.size() / 2));
  const TraceFormatError half = read_error(dir / "half.json.gz");
  EXPECT_EQ(half.kind(), TraceFormatError::Kind::malformed);
  EXPECT_THAT(half.what(), HasSubstr((dir / "half.json.gz").string() + ":"));
  EXPECT_THAT(half.what(), HasSubstr("truncated gzip data"));
  ASSERT_TRUE(half.where());
  // A place in the decompressed JSON: past its first line, short of its end.
  EXPECT_GT(half.where()->line, 100u);
  EXPECT_GT(half.where()->offset, 0u);
  EXPECT_LT(half.where()->offset, json_size);

  // Only the trailer missing: every byte of JSON was read, the stream's end never came.
  write_bytes(dir / "no_trailer.json.gz", bytes.substr(0, bytes.size() - 8));
  const TraceFormatError tail = read_error(dir / "no_trailer.json.gz");
  EXPECT_THAT(tail.what(), HasSubstr("truncated gzip data"));
  ASSERT_TRUE(tail.where());
  EXPECT_EQ(tail.where()->offset, json_size);
}

TEST(GzipTraceErrors, GarbageIsAMalformedTraceNamingTheFile) {
  const std::filesystem::path dir = fresh_dir("garbage");
  std::mt19937 random(99);
  std::string garbage = "\x1f\x8b";
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>(random()));

  write_bytes(dir / "garbage.json.gz", garbage);
  const TraceFormatError behind_magic = read_error(dir / "garbage.json.gz");
  EXPECT_EQ(behind_magic.kind(), TraceFormatError::Kind::malformed);
  EXPECT_THAT(behind_magic.what(), HasSubstr((dir / "garbage.json.gz").string() + ":1:1 (byte 0): corrupt gzip data"));

  write_bytes(dir / "not_gzip.json.gz", garbage.substr(2));
  const TraceFormatError not_gzip = read_error(dir / "not_gzip.json.gz");
  EXPECT_EQ(not_gzip.kind(), TraceFormatError::Kind::malformed);
  EXPECT_THAT(not_gzip.what(), HasSubstr((dir / "not_gzip.json.gz").string()));
  EXPECT_THAT(not_gzip.what(), HasSubstr("does not start with gzip's magic bytes 1f 8b"));

  // Damage in the middle of real gzip: garbled text may fail as JSON before the checksum fails;
  // the message names the damage either way.
  std::string text = "{\"traceEvents\": [";
  for (int i = 0; i < 5000; ++i) text += fmt::format("{}{{\"ph\": \"i\", \"name\": \"e{}\", \"ts\": {}}}", i ? ",\n" : "", i, i);
  text += "]}";
  gzip_with_zlib(dir / "whole.json.gz", text);
  std::string damaged = read_bytes(dir / "whole.json.gz");
  for (std::size_t i = damaged.size() / 2; i < damaged.size() / 2 + 16; ++i) damaged[i] = static_cast<char>(~damaged[i]);
  write_bytes(dir / "damaged.json.gz", damaged);
  const TraceFormatError e = read_error(dir / "damaged.json.gz");
  EXPECT_EQ(e.kind(), TraceFormatError::Kind::malformed);
  EXPECT_THAT(e.what(), HasSubstr((dir / "damaged.json.gz").string() + ":"));
  EXPECT_THAT(e.what(), HasSubstr("corrupt gzip data: inflate() returned Z_DATA_ERROR"));
}

// A JSON error inside gzip is placed in the decompressed text, exactly as in the plain file.
TEST(GzipTraceErrors, JsonErrorsInsideGzipHaveTheJsonsLineColumnAndByte) {
  const std::filesystem::path dir = fresh_dir("json_error");
  const std::string text = "{\n  \"traceEvents\": [\n    {\"ph\": \"X\"; \"cat\": \"kernel\"}\n  ]\n}";
  write_bytes(dir / "bad.json", text);
  gzip_with_zlib(dir / "bad.json.gz", text);
  const TraceFormatError plain = read_error(dir / "bad.json");
  const TraceFormatError inflated = read_error(dir / "bad.json.gz");
  ASSERT_TRUE(plain.where() && inflated.where());
  EXPECT_EQ(inflated.where()->line, 3u);
  EXPECT_EQ(inflated.where()->column, plain.where()->column);
  EXPECT_EQ(inflated.where()->offset, plain.where()->offset);
  EXPECT_EQ(std::string(inflated.what()), (dir / "bad.json.gz").string() + std::string(plain.what()).substr((dir / "bad.json").string().size()));
}

// ---- the writer's temporary file -----------------------------------------------------------------

TEST(GzipTraceWriter, TheTraceTakesItsNameOnlyWhenFinished) {
  const std::filesystem::path path = fresh_dir("writer_temp") / "trace.json.gz";
  trace::TraceHeader header;
  header.base_time_ns = 1'000'000;
  header.host_process = 7;
  header.host_process_name = "test";
  {
    trace::ChromeTraceWriter writer(path, header, {TraceFormat::json_gz});
    trace::ApiCall call;
    call.name = "cudaLaunchKernel";
    call.start_ns = 2'000'000;
    call.end_ns = 2'000'500;
    writer.write(call);
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::exists(path.string() + ".tmp"));
    writer.finish({{"tool", "attnprof"}});
  }
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  ASSERT_TRUE(has_gzip_magic(path));
  const nlohmann::json t = nlohmann::json::parse(gunzip_with_zlib(path));
  EXPECT_EQ(t.at("attnprof").at("tool"), "attnprof");
  EXPECT_EQ(t.at("traceName"), "trace.json.gz");
  EXPECT_EQ(t.at("traceEvents").size(), 5u);  // the call, and M events naming and ordering its process and thread

  // Abandoned without finish(): the destructor still leaves complete gzip of a valid document.
  const std::filesystem::path unfinished = path.parent_path() / "unfinished.json.gz";
  {
    trace::ChromeTraceWriter writer(unfinished, header, {TraceFormat::json_gz});
  }
  EXPECT_EQ(nlohmann::json::parse(read_file_text(unfinished)).at("attnprof").at("incomplete"), true);
}

}  // namespace
}  // namespace attnprof

namespace attnprof {
namespace {

// `attnprof check` reads a gzip-compressed summary as it reads a plain one.
TEST(GzipSummary, LoadSummaryReadsGzip) {
  const RunSummary s = load_summary(std::string(ATTNPROF_SOURCE_DIR) + "/traces/samples/sample_summary.json");
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "attnprof_summary_test.json.gz";
  {
    DocumentWriter out(path, Compression::gzip);
    out.write(nlohmann::json(s).dump());
    out.close();
  }
  EXPECT_EQ(nlohmann::json(load_summary(path.string())), nlohmann::json(s));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace attnprof
