#include "config/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config_sections.hpp"
#include "config/json_fields.hpp"

namespace attnprof {

using namespace config_fields;
using config_sections::kDTypeNames;
using config_sections::kPassNames;
using config_sections::read_causal_mode;
using config_sections::read_expectation;
using config_sections::read_shape_spec;
using config_sections::same_case;

namespace {

const std::vector<std::string> kDocumentKeys = {"name",   "backends", "dtypes",     "causal",
                                                "passes", "shapes",   "warmup",     "iterations",
                                                "verify", "seed",     "metrics",    "expect",
                                                "trace_format"};
const std::vector<std::string> kMetricNames = {"occupancy", "dram", "tensor"};

constexpr IntegerRule kWarmupRule{0, 10000};
constexpr IntegerRule kIterationsRule{1, 100000};
constexpr IntegerRule kSeedRule{0, UINT64_MAX};

// ---- malformed JSON -------------------------------------------------------------------------

struct TextPosition {
  int line = 1;
  int column = 1;
};

bool is_utf8_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// nlohmann's byte offset is 1-based and points one past the end for "unexpected end of
// input". Columns count characters, not bytes, as editors do.
TextPosition position_of(std::string_view text, std::size_t byte) {
  const std::size_t offset = std::min(byte == 0 ? 0 : byte - 1, text.size());
  const std::string_view before = text.substr(0, offset);
  const std::size_t last_newline = before.rfind('\n');
  const std::string_view line_text =
      last_newline == std::string_view::npos ? before : before.substr(last_newline + 1);
  TextPosition position;
  position.line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
  position.column = 1 + static_cast<int>(std::count_if(line_text.begin(), line_text.end(),
                                                       [](char c) { return !is_utf8_continuation_byte(c); }));
  return position;
}

// "[json.exception.parse_error.101] parse error at line 3, column 8: syntax error ..." ->
// "syntax error ...": the position is ours (nlohmann's column can be 0 after a newline).
std::string parse_error_reason(const json::parse_error& error) {
  const std::string_view what = error.what();
  const std::size_t parse_error = what.find("parse error");
  const std::size_t colon =
      parse_error == std::string_view::npos ? parse_error : what.find(": ", parse_error);
  if (colon != std::string_view::npos) return std::string(what.substr(colon + 2));
  const std::size_t bracket = what.find("] ");
  return std::string(bracket == std::string_view::npos ? what : what.substr(bracket + 2));
}

// nlohmann keeps the last of two equal keys in an object, so a config that says "warmup" twice
// would run with whichever came last, unnoticed. The parser's events rebuild each key's pointer.
class DuplicateKeys {
 public:
  bool on_event(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.emplace_back();
        frames_.back().array = event == json::parse_event_t::array_start;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        element_done();
        break;
      case json::parse_event_t::key: {
        Frame& object = frames_.back();
        object.key = parsed.get<std::string>();
        if (!object.keys.insert(object.key).second) pointers_.push_back(pointer());
        break;
      }
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  }
  const std::vector<std::string>& pointers() const { return pointers_; }

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;      // arrays: the element being read
    std::string key;            // objects: the member being read
    std::set<std::string> keys;  // objects: the keys so far
  };
  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::string pointer() const {
    std::string result;
    for (const Frame& f : frames_) result = f.array ? child_pointer(result, f.index) : child_pointer(result, f.key);
    return result;
  }
  std::vector<Frame> frames_;
  std::vector<std::string> pointers_;
};

std::optional<json> parse_json_text(std::string_view text, IssueList& issues) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    issues.add("", "the document is empty; expected a JSON object");
    return std::nullopt;
  }
  try {
    DuplicateKeys duplicates;
    json document = json::parse(
        text, [&](int, json::parse_event_t event, json& parsed) { return duplicates.on_event(event, parsed); });
    for (const std::string& pointer : duplicates.pointers())
      issues.add(pointer, "duplicate key: it is given twice in one object, and only one of the values would be used");
    if (!document.is_object()) {
      issues.add("",
                 fmt::format("expected a JSON object at the top level, found {}", describe_value(document)));
      return std::nullopt;
    }
    return document;
  } catch (const json::parse_error& error) {
    const TextPosition position = position_of(text, error.byte);
    ConfigIssue issue{"", "malformed JSON: " + parse_error_reason(error)};
    issue.line = position.line;
    issue.column = position.column;
    issues.add(std::move(issue));
    return std::nullopt;
  } catch (const json::out_of_range& error) {
    // A number beyond what a double holds (1e999) is an out_of_range, not a parse_error.
    const std::string_view what = error.what();
    const std::size_t bracket = what.find("] ");
    issues.add("", "malformed JSON: " + std::string(bracket == std::string_view::npos ? what : what.substr(bracket + 2)));
    return std::nullopt;
  }
}

// ---- the top level --------------------------------------------------------------------------

void read_backends(const json& document, const std::vector<std::string>& known_backends, Config& config,
                   IssueList& issues) {
  const json* backends = find_member(document, "backends");
  if (!backends) {
    report_missing(issues, "/backends", "a non-empty array of backend names");
    return;
  }
  const ElementReader<std::string> read_backend = [&](const json& value, const std::string& pointer) {
    return read_choice(value, pointer, known_backends, issues);
  };
  config.backends =
      read_list<std::string>(*backends, "/backends", ListRule{"backend names"}, issues, read_backend);
}

void read_dtypes(const json& document, Config& config, IssueList& issues) {
  const json* dtypes = find_member(document, "dtypes");
  if (!dtypes) return;  // keeps the default
  const ElementReader<DType> read_dtype = [&](const json& value,
                                              const std::string& pointer) -> std::optional<DType> {
    const std::optional<std::string> name = read_choice(value, pointer, kDTypeNames, issues);
    return name ? parse_dtype(*name) : std::nullopt;
  };
  config.dtypes = read_list<DType>(*dtypes, "/dtypes", ListRule{"dtype names"}, issues, read_dtype);
}

// A single setting is accepted too: "causal": true is the natural way to ask for one.
void read_causal(const json& document, Config& config, IssueList& issues) {
  const json* causal = find_member(document, "causal");
  if (!causal) return;
  if (!causal->is_array()) {
    if (const auto mode = read_causal_mode(*causal, "/causal", issues)) config.causal = {*mode};
    return;
  }
  const ElementReader<CausalMode> read_setting = [&](const json& value, const std::string& pointer) {
    return read_causal_mode(value, pointer, issues);
  };
  config.causal = read_list<CausalMode>(*causal, "/causal", ListRule{"causal settings (false, true, \"top_left\", "
                                                                      "\"bottom_right\")"},
                                        issues, read_setting);
}

// "passes": ["forward"] (the default), ["backward"], or both in either order (sweep order).
void read_passes(const json& document, Config& config, IssueList& issues) {
  const json* passes = find_member(document, "passes");
  if (!passes) return;  // keeps the default
  const ElementReader<AttentionPass> read_pass = [&](const json& value,
                                                     const std::string& pointer) -> std::optional<AttentionPass> {
    const std::optional<std::string> name = read_choice(value, pointer, kPassNames, issues);
    return name ? parse_pass(*name) : std::nullopt;
  };
  config.passes = read_list<AttentionPass>(*passes, "/passes", ListRule{"pass names (\"forward\", \"backward\")"},
                                           issues, read_pass);
}

void read_shapes(const json& document, Config& config, IssueList& issues) {
  const json* shapes = find_member(document, "shapes");
  if (!shapes) {
    report_missing(issues, "/shapes", "a non-empty array of shape objects");
    return;
  }
  const ElementReader<ShapeSpec> read_shape = [&](const json& value, const std::string& pointer) {
    return read_shape_spec(value, pointer, issues);
  };
  config.shapes =
      read_list<ShapeSpec>(*shapes, "/shapes", ListRule{"shape objects"}, issues, read_shape,
                           [&](const ShapeSpec& a, const ShapeSpec& b) { return same_case(a, b, config.causal); });
}

void read_run_settings(const json& document, Config& config, IssueList& issues) {
  if (const json* name = find_member(document, "name")) {
    config.name = read_string(*name, "/name", Emptiness::allowed, issues).value_or("");
  }
  if (const json* warmup = find_member(document, "warmup")) {
    config.warmup =
        static_cast<int>(read_integer(*warmup, "/warmup", kWarmupRule, issues).value_or(config.warmup));
  }
  if (const json* iterations = find_member(document, "iterations")) {
    const auto count = read_integer(*iterations, "/iterations", kIterationsRule, issues);
    config.iterations = static_cast<int>(count.value_or(config.iterations));
  }
  if (const json* verify = find_member(document, "verify")) {
    config.verify = read_boolean(*verify, "/verify", issues).value_or(config.verify);
  }
  if (const json* seed = find_member(document, "seed")) {
    config.seed = read_integer(*seed, "/seed", kSeedRule, issues).value_or(config.seed);
  }
}

void read_metrics(const json& document, Config& config, IssueList& issues) {
  const json* metrics = find_member(document, "metrics");
  if (!metrics) return;
  const ElementReader<std::string> read_metric = [&](const json& value, const std::string& pointer) {
    return read_choice(value, pointer, kMetricNames, issues);
  };
  config.metrics = read_list<std::string>(*metrics, "/metrics", ListRule{"metric names", Emptiness::allowed},
                                          issues, read_metric);
}

void read_trace_format(const json& document, Config& config, IssueList& issues) {
  const json* format = find_member(document, "trace_format");
  if (!format) return;
  const std::optional<std::string> name = read_choice(*format, "/trace_format", trace::kTraceFormatNames, issues);
  if (name) config.trace_format = trace::parse_trace_format(*name).value_or(config.trace_format);
}

void read_expectations(const json& document, const std::vector<std::string>& known_backends, Config& config,
                       IssueList& issues) {
  const json* expect = find_member(document, "expect");
  if (!expect) return;
  const ElementReader<Expectation> read_entry = [&](const json& value, const std::string& pointer) {
    return read_expectation(value, pointer, known_backends, issues);
  };
  // Two identical guesses are harmless, so duplicates are not looked for here.
  const auto never_same = [](const Expectation&, const Expectation&) { return false; };
  config.expect =
      read_list<Expectation>(*expect, "/expect", ListRule{"expectation objects", Emptiness::allowed}, issues,
                             read_entry, never_same);
}

Config read_document(const json& document, const std::vector<std::string>& known_backends,
                     IssueList& issues) {
  Config config;
  config.dtypes = {DType::bf16};
  config.causal = {CausalMode::none};
  reject_unknown_keys(document, "", kDocumentKeys, issues);
  read_run_settings(document, config, issues);
  read_backends(document, known_backends, config, issues);
  read_dtypes(document, config, issues);
  read_causal(document, config, issues);
  read_passes(document, config, issues);
  read_shapes(document, config, issues);
  read_metrics(document, config, issues);
  read_trace_format(document, config, issues);
  read_expectations(document, known_backends, config, issues);
  return config;
}

// ---- files ----------------------------------------------------------------------------------

[[noreturn]] void throw_unreadable(const std::string& path, int error_number) {
  const std::string reason = std::generic_category().message(error_number);
  throw ConfigError(path, {ConfigIssue{"", fmt::format("cannot read \"{}\": {}", path, reason)}});
}

std::string read_whole_file(const std::string& path) {
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw_unreadable(path, errno);
  std::string text;
  char buffer[1 << 16];
  std::size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, read);
  if (std::ferror(file.get())) throw_unreadable(path, errno);  // e.g. EISDIR: fopen accepts a directory
  return text;
}

}  // namespace

Config parse_config(std::string_view text, std::string_view source,
                    const std::vector<std::string>& known_backends) {
  IssueList issues;
  std::optional<json> document = parse_json_text(text, issues);
  if (!document) throw ConfigError(std::string(source), issues.take());

  Config config = read_document(*document, known_backends, issues);
  if (!issues.empty()) throw ConfigError(std::string(source), issues.take());
  config.source = source;
  config.document = std::move(*document);
  return config;
}

nlohmann::json shape_option_document(std::string_view text) {
  static const std::vector<std::pair<std::string, std::string>> kSizes = {
      {"b", "batch"}, {"h", "heads"}, {"hkv", "heads_kv"}, {"sq", "seq_q"}, {"skv", "seq_kv"}, {"d", "head_dim"}};
  static const std::vector<std::string> kKeys = {"b",      "h",      "hkv",   "sq",   "skv", "d",   "causal",
                                                 "window", "dtype",  "bias",  "lq",   "lkv", "page"};
  std::vector<ConfigIssue> issues;
  auto fail = [&](std::string message) { issues.push_back({"", std::move(message)}); };
  auto integer = [&](const std::string& key, const std::string& value) -> std::optional<std::int64_t> {
    try {
      std::size_t used = 0;
      const long long n = std::stoll(value, &used);
      if (used == value.size()) return n;
    } catch (const std::exception&) {
    }
    fail(fmt::format("{}={}: expected an integer", key, value));
    return std::nullopt;
  };
  nlohmann::json shape = nlohmann::json::object();
  nlohmann::json document = nlohmann::json::object();
  std::set<std::string> seen;  // a key given twice would silently keep only its last value
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string part(text.substr(start, comma - start));
    start = comma + 1;
    if (part.empty()) continue;
    const std::size_t equals = part.find('=');
    const std::string key = part.substr(0, equals);
    if (equals == std::string::npos) {
      fail(fmt::format("'{}': expected key=value (keys: {})", part, fmt::join(kKeys, ", ")));
      continue;
    }
    const std::string value = part.substr(equals + 1);
    if (!seen.insert(key).second) {
      fail(fmt::format("'{}': {} is given twice", part, key));
      continue;
    }
    if (const auto size = std::find_if(kSizes.begin(), kSizes.end(), [&](const auto& s) { return s.first == key; });
        size != kSizes.end()) {
      if (const auto n = integer(key, value)) shape[size->second] = *n;
    } else if (key == "causal") {
      if (value == "false" || value == "true") document["causal"] = value == "true";
      else document["causal"] = value;  // the config's validation names what it expected
    } else if (key == "window") {
      const std::size_t colon = value.find(':');
      if (colon == std::string::npos) {
        fail(fmt::format("window={}: expected LEFT:RIGHT, e.g. 4096:0 (-1 for no bound)", value));
        continue;
      }
      const auto left = integer(key, value.substr(0, colon)), right = integer(key, value.substr(colon + 1));
      if (left && right) shape["window"] = {*left, *right};
    } else if (key == "lq" || key == "lkv") {  // ragged lengths, one per sequence: lq=1:17:64
      nlohmann::json lens = nlohmann::json::array();
      std::size_t from = 0;
      while (from <= value.size()) {
        const std::size_t colon = std::min(value.find(':', from), value.size());
        if (const auto n = integer(key, value.substr(from, colon - from))) lens.push_back(*n);
        from = colon + 1;
      }
      shape[key == "lq" ? "seq_lens_q" : "seq_lens_kv"] = lens;
    } else if (key == "page") {
      if (const auto n = integer(key, value)) shape["page_size"] = *n;
    } else if (key == "dtype") {
      document["dtypes"] = {value};
    } else if (key == "bias") {
      if (value == "1" || value == "true" || value == "0" || value == "false")
        shape["bias"] = value == "1" || value == "true";
      else
        fail(fmt::format("bias={}: expected true, false, 1 or 0", value));
    } else {
      const std::optional<std::string> hint = closest_match(key, kKeys);
      fail(fmt::format("unknown key '{}'{} (keys: {})", key, hint ? fmt::format(" (did you mean '{}'?)", *hint) : "",
                       fmt::join(kKeys, ", ")));
    }
  }
  if (!issues.empty()) throw ConfigError("--shape", std::move(issues));
  document["shapes"] = {shape};
  return document;
}

Config load_config_file(const std::string& path, const std::vector<std::string>& known_backends) {
  return parse_config(read_whole_file(path), path, known_backends);
}

}  // namespace attnprof
