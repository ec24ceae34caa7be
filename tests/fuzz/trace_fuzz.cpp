// `attnprof report` on arbitrary bytes: the streaming tokenizer, the Chrome/Kineto reader, the
// conversion to activities and the per-case aggregation. Rejection is a TraceFormatError with a
// message; any other exception, a crash or undefined behaviour is a bug. Bytes that start like
// gzip (1f 8b; the corpus has *.json.gz seeds) go through the inflater first, as a .json.gz does.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "summary/trace_report.hpp"
#include "trace/json_pull_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attnprof::trace::JsonPullParser parser(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  attnprof::TraceReportOptions options;
  options.known_backends = {"math",  "manual",    "manual:out_of_place", "manual:in_place", "efficient",
                            "flash", "flash:fa2", "flash:hopper",        "cudnn"};
  try {
    attnprof::report_from_trace(parser, options);
  } catch (const attnprof::trace::TraceFormatError& e) {
    if (std::string_view(e.what()).empty()) {
      std::fprintf(stderr, "trace_fuzz: a TraceFormatError without a message\n");
      std::abort();
    }
  }
  return 0;
}
