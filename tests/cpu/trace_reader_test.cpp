// The streaming JSON tokenizer and the Chrome-trace reader: grammar, escapes, exact timestamps,
// chunk boundaries, and the errors a user sees for truncated, malformed and foreign files.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "trace/annotate.hpp"
#include "trace/chrome_trace_reader.hpp"
#include "trace/json_pull_parser.hpp"

namespace attnprof::trace {
namespace {

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnprof_reader_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<JsonToken> tokens_of(JsonPullParser& p) {
  std::vector<JsonToken> out;
  for (JsonToken t = p.next(); t != JsonToken::end_of_input; t = p.next()) out.push_back(t);
  return out;
}

TraceFormatError read_error(const std::string& text, const std::string& name = "bad.json") {
  JsonPullParser p(text, name);
  try {
    read_chrome_trace(p, [](const TraceEvent&, const TraceDocument&) {});
  } catch (const TraceFormatError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << text.substr(0, 200);
  return TraceFormatError(TraceFormatError::Kind::malformed, "none");
}

TEST(JsonPullParser, TokenizesEveryKindOfValue) {
  JsonPullParser p(R"( {"a": [1, -2.5e3, "x", true, false, null, {}], "b": {"c": []}} )", "t");
  const std::vector<JsonToken> expected = {
      JsonToken::begin_object, JsonToken::key,         JsonToken::begin_array, JsonToken::number,
      JsonToken::number,       JsonToken::string,      JsonToken::true_value,  JsonToken::false_value,
      JsonToken::null_value,   JsonToken::begin_object, JsonToken::end_object, JsonToken::end_array,
      JsonToken::key,          JsonToken::begin_object, JsonToken::key,        JsonToken::begin_array,
      JsonToken::end_array,    JsonToken::end_object,  JsonToken::end_object};
  EXPECT_EQ(tokens_of(p), expected);
}

TEST(JsonPullParser, UnescapesStringsToUtf8) {
  JsonPullParser p(R"(["q\"b\\s\/n\nt\tu\u00e9 \ud83d\ude00 <\u0001>"])", "t");
  p.next();
  ASSERT_EQ(p.next(), JsonToken::string);
  EXPECT_EQ(p.text(), "q\"b\\s/n\nt\tu\xc3\xa9 \xf0\x9f\x98\x80 <\x01>");
}

// JSON allows lone surrogates; UTF-8 has none: each becomes U+FFFD, and an escape after a lone
// high surrogate is read as usual.
TEST(JsonPullParser, LoneSurrogatesBecomeTheReplacementCharacter) {
  JsonPullParser p(R"(["a\ud800\nb", "\ud800\ud800", "\udc00x", "\ud800\ud83d\ude00", "\ud800"])", "t");
  p.next();
  std::vector<std::string> texts;
  for (JsonToken t = p.next(); t != JsonToken::end_array; t = p.next()) texts.emplace_back(p.text());
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(texts, (std::vector<std::string>{"a" + fffd + "\nb", fffd + fffd, fffd + "x", fffd + "\xf0\x9f\x98\x80",
                                             fffd}));
}

// A number a double cannot hold would become inf, and inf is not JSON: the trace is malformed.
TEST(JsonPullParser, NumbersBeyondADoubleAreMalformedAndSaySo) {
  for (const char* text : {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"achieved occupancy %": 1e999}}]})",
                           R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"dram throughput %": -1e999}}]})",
                           R"({"attnprof": {"summary": {"x": 1e400}}, "traceEvents": []})"}) {
    const TraceFormatError e = read_error(text);
    EXPECT_EQ(e.kind(), TraceFormatError::Kind::malformed) << text;
    EXPECT_NE(std::string(e.what()).find("beyond the range of a double"), std::string::npos) << text << " -> " << e.what();
  }
  JsonPullParser tiny("[1e-999]", "t");  // rounds to 0, as JSON readers do
  tiny.next();
  tiny.next();
  EXPECT_EQ(tiny.as_double("x"), 0.0);
}

TEST(JsonPullParser, MicrosecondsAreExactNanoseconds) {
  // 19 significant digits: a double would lose the last ones.
  JsonPullParser p(R"([1764700000000220.125, 12.5, 7, -3.0005, "4.25", 1.5e3])", "t");
  p.next();
  std::vector<std::int64_t> ns;
  for (JsonToken t = p.next(); t != JsonToken::end_array; t = p.next()) ns.push_back(p.as_microseconds_in_ns("ts"));
  EXPECT_EQ(ns, (std::vector<std::int64_t>{1764700000000220125, 12500, 7000, -3001, 4250, 1500000}));
}

TEST(JsonPullParser, TokensStraddlingChunkBoundariesSurvive) {
  std::string text = "{\"traceEvents\": [";
  for (int i = 0; i < 50; ++i) {
    if (i > 0) text += ',';
    text += std::string(R"({"ph": "X", "cat": "kernel", "name": "k\u00e9\"rnel<)") + std::to_string(i) +
            R"(>", "ts": 1764700000000220.125, "dur": 3.5, "pid": 0, "tid": 7, "args": {"grid": [1, 2, 3]}})";
  }
  text += "]}";
  const std::filesystem::path path = write_temp("chunks.json", text);
  for (std::size_t chunk : {16u, 17u, 31u, 64u, 1u << 20}) {
    JsonPullParser p(path, chunk);
    int events = 0;
    read_chrome_trace(p, [&](const TraceEvent& e, const TraceDocument&) {
      EXPECT_EQ(e.name, "k\xc3\xa9\"rnel<" + std::to_string(events) + ">") << "chunk " << chunk;
      EXPECT_EQ(*e.ts_ns, 1764700000000220125);
      EXPECT_EQ(*e.dur_ns, 3500);
      EXPECT_EQ(e.args.grid, (std::array<int, 3>{1, 2, 3}));
      ++events;
    });
    EXPECT_EQ(events, 50) << "chunk " << chunk;
  }
}

// Token texts are views into the read buffer where they can be: every chunk size must give the
// same tokens and texts as the document parsed in memory (keys whose ':' lies past a refill too).
TEST(JsonPullParser, TextsAreTheSameWhateverTheChunkSize) {
  std::string text = "{";
  for (int i = 0; i < 40; ++i) {
    if (i > 0) text += ',';
    text += fmt::format(R"("key number {}"{}:{}"value {}", "n{}": {}.{}e{})", i,
                                         std::string(static_cast<std::size_t>(i % 5), ' '),
                                         std::string(static_cast<std::size_t>(i % 3), '\n'), i * 7, i, i * 31, i % 10,
                                         i % 4);
  }
  text += "}";
  auto all_tokens = [](JsonPullParser& p) {
    std::vector<std::pair<JsonToken, std::string>> out;
    for (JsonToken t = p.next(); t != JsonToken::end_of_input; t = p.next()) out.emplace_back(t, std::string(p.text()));
    return out;
  };
  JsonPullParser in_memory(text, "memory");
  const auto expected = all_tokens(in_memory);
  ASSERT_EQ(expected.size(), 2u + 40u * 4u);
  const std::filesystem::path path = write_temp("views.json", text);
  for (std::size_t chunk = 16; chunk < 48; ++chunk) {
    JsonPullParser from_file(path, chunk);
    EXPECT_EQ(all_tokens(from_file), expected) << "chunk " << chunk;
  }
}

TEST(JsonPullParser, ErrorsNameLineColumnAndByte) {
  const TraceFormatError e = read_error("{\n  \"traceEvents\": [\n    {\"ph\": \"X\"; \"cat\": \"kernel\"}\n  ]\n}");
  EXPECT_EQ(e.kind(), TraceFormatError::Kind::malformed);
  ASSERT_TRUE(e.where());
  EXPECT_EQ(e.where()->line, 3u);
  EXPECT_EQ(e.where()->column, 15u);
  EXPECT_NE(std::string(e.what()).find("bad.json:3:15"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("expected ',' or '}'"), std::string::npos) << e.what();
}

TEST(JsonPullParser, RejectsWhatJsonDoesNotAllow) {
  for (const char* bad : {"{\"traceEvents\": [01]}", "{\"traceEvents\": [1.]}", "{\"traceEvents\": [tru]}",
                          "{\"traceEvents\": [\"a\tb\"]}", "{\"traceEvents\": [\"\\x\"]}", "{\"traceEvents\": [],}",
                          "{\"traceEvents\": [1,]}", "{traceEvents: []}", "{\"traceEvents\": []} x", "",
                          "{\"traceEvents\": [\"\\u12G4\"]}", "\x01\x02\x03"}) {
    const TraceFormatError e = read_error(bad);
    EXPECT_EQ(e.kind(), TraceFormatError::Kind::malformed) << bad << ": " << e.what();
  }
  std::string deep(JsonPullParser::kMaxDepth + 10, '[');
  EXPECT_NE(std::string(read_error("{\"other\": " + deep).what()).find("nesting deeper"), std::string::npos);
}

TEST(ChromeTraceReader, TruncatedFilesFailCleanlyAtEveryCut) {
  std::ifstream in(std::string(ATTNPROF_GOLDEN_DIR) + "/kineto_small_trace.json", std::ios::binary);
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  for (std::size_t cut = 0; cut + 3 < text.size(); cut += 97) {
    const TraceFormatError e = read_error(text.substr(0, cut), "cut.json");
    EXPECT_EQ(e.kind(), TraceFormatError::Kind::malformed) << "cut at " << cut << ": " << e.what();
  }
  const TraceFormatError end = read_error(text.substr(0, text.size() / 2), "cut.json");
  EXPECT_NE(std::string(end.what()).find("truncated"), std::string::npos) << end.what();
}

TEST(ChromeTraceReader, WrongTypesAreMalformedAndSaySo) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"traceEvents": {}})", "expected an array of events"},
           {R"({"traceEvents": [3]})", "expected an event object"},
           {R"({"traceEvents": [{"ph": "X", "ts": true}]})", "expected a number of microseconds"},
           {R"({"traceEvents": [{"ph": "X", "ts": "soon"}]})", "expected a number of microseconds"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": []}]})", "args: expected an object"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"grid": "big"}}]})", "args.grid"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"correlation": "7"}}]})", "args.correlation"},
           {R"({"traceEvents": [{"ph": 1}]})", "\"ph\": expected a string"},
           {R"({"baseTimeNanoseconds": -5, "traceEvents": []})", "baseTimeNanoseconds"},
           {R"({"deviceProperties": [{"numSms": "many"}], "traceEvents": []})", "deviceProperties"},
           // Out of any GPU's range, so that occupancy arithmetic cannot overflow (found by fuzzing).
           {R"({"deviceProperties": [{"numSms": 1.7e15}], "traceEvents": []})", "\"numSms\": expected"},
           {R"({"deviceProperties": [{"warpSize": 0}], "traceEvents": []})", "\"warpSize\": expected 1 to 1024"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"block": [100000, 1, 1]}}]})", "args.block: expected"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"block": [1024, 1024, 1]}}]})", "threads in a block"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"registers per thread": 2000000000}}]})",
            "registers per thread\": expected an integer from 0 to 65536"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "args": {"iteration": 9000000000}}]})", "args.iteration"},
           // Beyond 64 bits of nanoseconds: llround's result would be undefined (it gave INT64_MIN).
           {R"({"traceEvents": [{"ph": "X", "ts": 1e300}]})", "\"ts\": 1e300 is too large"},
           {R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": "-1e16"}]})", "\"dur\": -1e16 is too large"},
       }) {
    const TraceFormatError e = read_error(c.text);
    EXPECT_EQ(e.kind(), TraceFormatError::Kind::malformed) << c.text;
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.text << " -> " << e.what();
  }
}

TEST(ChromeTraceReader, ValidJsonThatIsNotATraceIsForeign) {
  const TraceFormatError summary =
      read_error(R"({"schema": "attnprof-summary", "schema_version": 1, "cases": []})", "summary.json");
  EXPECT_EQ(summary.kind(), TraceFormatError::Kind::foreign);
  EXPECT_NE(std::string(summary.what()).find("summary.json is not a Chrome/Kineto trace"), std::string::npos);
  EXPECT_NE(std::string(summary.what()).find("trace.json written beside it"), std::string::npos) << summary.what();
  EXPECT_EQ(read_error(R"({"name": "package", "version": "1.0"})").kind(), TraceFormatError::Kind::foreign);
  EXPECT_EQ(read_error("42").kind(), TraceFormatError::Kind::foreign);
  EXPECT_EQ(read_error(R"("a string")").kind(), TraceFormatError::Kind::foreign);
}

TEST(ChromeTraceReader, ReadsHeaderAndFlatEvents) {
  int kernels = 0;
  TraceEventConverter converter;
  std::vector<Activity> activities;
  const TraceDocument doc = read_chrome_trace(
      std::filesystem::path(ATTNPROF_GOLDEN_DIR) / "kineto_small_trace.json",
      [&](const TraceEvent& e, const TraceDocument& so_far) {
        if (e.cat == "kernel") ++kernels;
        auto a = converter.convert(e, so_far);
        if (!a) return;
        // Occupancy is not read back: the annotate step computes it from what was read.
        if (auto* k = std::get_if<KernelActivity>(&*a)) annotate_occupancy(*k, converter.device_for(k->device, so_far));
        activities.push_back(std::move(*a));
      });
  EXPECT_EQ(doc.events, 32u);
  EXPECT_EQ(kernels, 5);
  ASSERT_EQ(doc.devices.size(), 1u);
  EXPECT_EQ(doc.devices[0].sm_count, 132);
  EXPECT_EQ(doc.devices[0].max_blocks_per_sm, 32);             // not in Kineto's keys: from sm_90
  EXPECT_EQ(doc.devices[0].reserved_shared_mem_per_block, 1024);
  EXPECT_EQ(doc.base_time_ns, 1764700000000000000u);
  EXPECT_EQ(doc.rank, 0);
  EXPECT_TRUE(doc.attnprof.is_null());

  const KernelActivity* flash = nullptr;
  const MemcpyActivity* copy = nullptr;
  for (const Activity& a : activities) {
    if (const auto* k = std::get_if<KernelActivity>(&a); k && k->registers_per_thread == 255 && !flash) flash = k;
    if (const auto* m = std::get_if<MemcpyActivity>(&a)) copy = m;
  }
  ASSERT_NE(flash, nullptr);
  // Absolute epoch microseconds stay exact to the nanosecond.
  EXPECT_EQ(flash->start_ns, 1764700000000220125u);
  EXPECT_EQ(flash->end_ns - flash->start_ns, 30000u);
  EXPECT_EQ(flash->correlation, 2u);
  EXPECT_EQ(flash->block, (std::array<int, 3>{128, 1, 1}));
  EXPECT_EQ(flash->dynamic_shared_bytes, 32768);
  // Computed here, not trusted from Kineto's "est. achieved occupancy %".
  EXPECT_TRUE(flash->occupancy.valid);
  EXPECT_DOUBLE_EQ(flash->occupancy.theoretical_percent, 12.5);
  EXPECT_EQ(flash->occupancy.limiter, "registers");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->kind, MemcpyKind::DtoD);
  EXPECT_EQ(copy->src_memory, "Device");
  EXPECT_EQ(copy->bytes, 2097152u);
}

// A relative trace's first record may lie before its base (a negative ts): still relative.
TEST(ChromeTraceReader, ANegativeFirstTimestampIsStillRelative) {
  JsonPullParser p(R"({"baseTimeNanoseconds": 1000000000000, "traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": -0.5, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2}]})",
                   "negative.json");
  TraceEventConverter converter;
  std::vector<std::uint64_t> starts;
  read_chrome_trace(p, [&](const TraceEvent& e, const TraceDocument& doc) {
    if (auto a = converter.convert(e, doc)) starts.push_back(start_of(*a));
  });
  EXPECT_EQ(starts, (std::vector<std::uint64_t>{1000000000000 - 500, 1000000000000 + 10000}));
  EXPECT_EQ(timestamp_shift(1000, -1), 1000);
  EXPECT_EQ(timestamp_shift(1000, 999), 1000);
  EXPECT_EQ(timestamp_shift(1000, 1000), 0);  // at or past the base: absolute
  EXPECT_EQ(timestamp_shift(std::nullopt, -1), 0);
}

TEST(ChromeTraceReader, BareEventArraysAreTraces) {
  JsonPullParser p(R"([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 7}])", "bare.json");
  int events = 0;
  const TraceDocument doc = read_chrome_trace(p, [&](const TraceEvent&, const TraceDocument&) { ++events; });
  EXPECT_TRUE(doc.bare_array);
  EXPECT_EQ(events, 1);
}

TEST(ChromeTraceReader, MemcpyAndMemsetNamesParse) {
  MemcpyKind kind;
  std::string src, dst;
  parse_memcpy_name("Memcpy HtoD (Pageable -> Device)", kind, src, dst);
  EXPECT_EQ(kind, MemcpyKind::HtoD);
  EXPECT_EQ(src, "Pageable");
  EXPECT_EQ(dst, "Device");
  parse_memcpy_name("Memcpy PtoP", kind, src, dst);
  EXPECT_EQ(kind, MemcpyKind::PtoP);
  EXPECT_EQ(parse_memset_memory("Memset (Device)"), "Device");
}

}  // namespace
}  // namespace attnprof::trace
