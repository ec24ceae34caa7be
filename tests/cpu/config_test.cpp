// Config parsing: every bad input names its JSON pointer and says what was expected and found;
// good input gets its defaults; the shipped configs parse.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/config.hpp"

namespace attnprof {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// accepted_backend_names() of lib/backends/registry.cpp (the GPU library; tests/host checks the list).
const std::vector<std::string> kKnownBackends = {"math",  "manual",    "manual:out_of_place", "manual:in_place", "efficient",
                                                 "flash", "flash:fa2", "flash:hopper",        "cudnn"};

// The smallest valid document; each bad case changes one thing in it.
json minimal_document() {
  return json::parse(R"({
    "backends": ["flash"],
    "shapes": [{"batch": 4, "heads": 16, "seq_q": 1024, "head_dim": 64}]
  })");
}

Config parse_text(const std::string& text) { return parse_config(text, "test.json", kKnownBackends); }
Config parse_json(const json& document) { return parse_text(document.dump()); }

// The issues `text` is rejected with; fails the test when it is accepted.
std::vector<ConfigIssue> issues_of(const std::string& text) {
  try {
    parse_text(text);
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.source(), "test.json");
    return error.issues();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

std::string all_issues(const std::vector<ConfigIssue>& issues) {
  std::string text;
  for (const ConfigIssue& issue : issues) text += "  " + issue.pointer + ": " + issue.message + "\n";
  return text;
}

void expect_issue(const std::vector<ConfigIssue>& issues, const std::string& pointer, const std::string& message_part) {
  for (const ConfigIssue& issue : issues) {
    if (issue.pointer == pointer && issue.message.find(message_part) != std::string::npos) return;
  }
  ADD_FAILURE() << "no issue at \"" << pointer << "\" containing '" << message_part << "'; got:\n"
                << all_issues(issues);
}

// ---- one edit to a valid document -------------------------------------------------------------

constexpr const char* kRemove = "<remove>";

struct EditCase {
  std::string name;
  std::string edit_pointer;  // where the minimal document is changed
  std::string edit_value;    // JSON text of the new value, or kRemove
  std::string pointer;       // where the issue must be reported
  std::string message_part;
};

void PrintTo(const EditCase& c, std::ostream* out) { *out << c.name; }

json edited(const EditCase& c) {
  json document = minimal_document();
  const json::json_pointer where(c.edit_pointer);
  if (c.edit_value == kRemove) {
    document[where.parent_pointer()].erase(where.back());
  } else {
    document[where] = json::parse(c.edit_value);
  }
  return document;
}

const std::string kShape0 = "/shapes/0";
const std::string kExpect0 = "/expect/0";
const std::string kFlashCheck = R"({"backend": "flash", "kernels_per_iter": 1})";

std::string expectation_with(const std::string& members) {
  return R"({"backend": "flash", "kernels_per_iter": 1, )" + members + "}";
}

const EditCase kEditCases[] = {
    // top level
    {"unknown_key_with_hint", "/iteratons", "20", "/iteratons", R"(unknown key "iteratons" (did you mean "iterations"?))"},
    {"unknown_key_without_hint", "/zzzzzz", "1", "/zzzzzz", R"(unknown key "zzzzzz"; known keys are "name", "backends")"},
    {"unknown_key_is_pointer_escaped", "/a~1b", "1", "/a~1b", R"(unknown key "a/b")"},
    {"name_not_string", "/name", "3", "/name", "expected a string, found 3"},
    {"warmup_negative", "/warmup", "-1", "/warmup", "expected a non-negative integer, found -1"},
    {"warmup_too_large", "/warmup", "10001", "/warmup", "expected a non-negative integer no greater than 10000, found 10001"},
    {"warmup_fraction", "/warmup", "2.5", "/warmup", "expected a non-negative integer, found 2.5"},
    {"iterations_zero", "/iterations", "0", "/iterations", "expected a positive integer, found 0"},
    {"iterations_string", "/iterations", R"("20")", "/iterations", R"(expected a positive integer, found the string "20")"},
    {"iterations_too_large", "/iterations", "100001", "/iterations", "no greater than 100000, found 100001"},
    {"verify_string", "/verify", R"("yes")", "/verify", R"(expected true or false, found the string "yes")"},
    {"verify_null", "/verify", "null", "/verify", "expected true or false, found null"},
    {"passes_unknown_with_hint", "/passes", R"(["forward", "backwards"])", "/passes/1", R"(found "backwards" (did you mean "backward"?))"},
    {"passes_unknown", "/passes", R"(["training"])", "/passes/0", R"(expected one of "forward", "backward", found "training")"},
    {"passes_duplicate", "/passes", R"(["backward", "forward", "backward"])", "/passes/2", "duplicate of /passes/0"},
    {"passes_empty", "/passes", "[]", "/passes", "expected a non-empty array of pass names"},
    {"passes_not_array", "/passes", R"("backward")", "/passes", R"(found the string "backward")"},
    {"passes_number", "/passes", "[1]", "/passes/0", R"(expected one of "forward", "backward", found 1)"},
    {"expect_pass_unknown", "/expect/0", expectation_with(R"("pass": "bwd")"), "/expect/0/pass", R"(found "bwd")"},
    {"seed_negative", "/seed", "-5", "/seed", "expected a non-negative integer, found -5"},
    {"seed_fraction", "/seed", "1.5", "/seed", "expected a non-negative integer, found 1.5"},
    // backends
    {"backends_missing", "/backends", kRemove, "/backends", "required key is missing; expected a non-empty array of backend names"},
    {"backends_empty", "/backends", "[]", "/backends", "expected a non-empty array of backend names, found an empty array"},
    {"backends_single_string", "/backends", R"("flash")", "/backends", R"(expected a non-empty array of backend names, found the string "flash")"},
    {"backend_misspelt", "/backends", R"(["flsh"])", "/backends/0", R"(found "flsh" (did you mean "flash"?))"},
    {"backend_unknown_lists_known", "/backends", R"(["tensorrt"])", "/backends/0", R"(expected one of "math", "manual", "manual:out_of_place")"},
    {"backend_variant_misspelt", "/backends", R"(["manual:inplace"])", "/backends/0", R"((did you mean "manual:in_place"?))"},
    {"backend_not_string", "/backends", "[3]", "/backends/0", "found 3"},
    {"backend_duplicate", "/backends", R"(["flash", "math", "flash"])", "/backends/2", "duplicate of /backends/0"},
    // dtypes
    {"dtype_misspelt", "/dtypes", R"(["bf61"])", "/dtypes/0", R"(expected one of "bf16", "fp16", "fp32", found "bf61" (did you mean "bf16"?))"},
    {"dtype_upper_case", "/dtypes", R"(["fp16", "BF16"])", "/dtypes/1", R"(found "BF16" (did you mean "bf16"?))"},
    {"dtype_unknown", "/dtypes", R"(["int8"])", "/dtypes/0", R"(found "int8")"},
    {"dtypes_empty", "/dtypes", "[]", "/dtypes", "expected a non-empty array of dtype names, found an empty array"},
    {"dtypes_object", "/dtypes", "{}", "/dtypes", "found an empty object"},
    {"dtype_duplicate", "/dtypes", R"(["bf16", "bf16"])", "/dtypes/1", "duplicate of /dtypes/0"},
    // causal
    {"causal_unknown_word", "/causal", R"("yes")", "/causal", R"(expected one of "top_left", "bottom_right", found "yes")"},
    {"causal_misspelt_word", "/causal", R"(["bottom_rigth"])", "/causal/0", R"((did you mean "bottom_right"?))"},
    {"causal_empty", "/causal", "[]", "/causal", "found an empty array"},
    {"causal_number_element", "/causal", "[true, 1]", "/causal/1", R"(expected false, true, "top_left" or "bottom_right", found 1)"},
    {"causal_duplicate", "/causal", "[false, false]", "/causal/1", "duplicate of /causal/0"},
    {"causal_true_is_top_left", "/causal", R"([true, "top_left"])", "/causal/1", "duplicate of /causal/0"},
    // heads_kv and window (grouped-query heads, sliding windows)
    {"heads_kv_not_a_divisor", "/shapes/0/heads_kv", "5", "/shapes/0/heads_kv", "expected a divisor of heads (16): each K/V head serves the same number of query heads; found 5"},
    {"heads_kv_above_heads", "/shapes/0/heads_kv", "32", "/shapes/0/heads_kv", "expected a divisor of heads (16)"},
    {"heads_kv_zero", "/shapes/0/heads_kv", "0", "/shapes/0/heads_kv", "expected a positive integer, found 0"},
    {"window_not_a_pair", "/shapes/0/window", "[4096]", "/shapes/0/window", "expected [left, right] (keys before and after the diagonal, -1 for no bound), found"},
    {"window_below_minus_one", "/shapes/0/window", "[-2, 0]", "/shapes/0/window/0", "expected -1 (unbounded) or a number of keys from 0 to max(seq_q, seq_kv) = 1024, found -2"},
    {"window_beyond_the_sequence", "/shapes/0/window", "[0, 5000]", "/shapes/0/window/1", "max(seq_q, seq_kv) = 1024, found 5000"},
    {"window_not_integers", "/shapes/0/window", R"(["4096", 0])", "/shapes/0/window/0", R"(found the string "4096")"},
    // ragged batches and paged caches (batch 4, seq_q = seq_kv = 1024)
    {"seq_lens_q_wrong_count", "/shapes/0/seq_lens_q", "[1, 17, 1024]", "/shapes/0/seq_lens_q", "expected an array of batch = 4 lengths, one per sequence, found 3 entries"},
    {"seq_lens_q_not_an_array", "/shapes/0/seq_lens_q", "17", "/shapes/0/seq_lens_q", "expected an array of batch = 4 lengths, one per sequence, found 17"},
    {"seq_lens_q_above_the_maximum", "/shapes/0/seq_lens_q", "[1, 17, 1025, 3]", "/shapes/0/seq_lens_q/2", "expected a length from 1 to seq_q = 1024, found 1025"},
    {"seq_lens_kv_zero", "/shapes/0/seq_lens_kv", "[1, 0, 5, 3]", "/shapes/0/seq_lens_kv/1", "expected a length from 1 to seq_kv = 1024, found 0"},
    {"seq_lens_kv_fraction", "/shapes/0/seq_lens_kv", "[1, 2.5, 5, 3]", "/shapes/0/seq_lens_kv/1", "found 2.5"},
    {"page_size_zero", "/shapes/0/page_size", "0", "/shapes/0/page_size", "expected a page size in tokens from 1 to 1048576, found 0"},
    {"page_size_string", "/shapes/0/page_size", R"("16")", "/shapes/0/page_size", R"(found the string "16")"},
    {"page_size_huge", "/shapes/0/page_size", "2097152", "/shapes/0/page_size", "from 1 to 1048576, found 2097152"},
    // shapes
    {"shapes_missing", "/shapes", kRemove, "/shapes", "required key is missing; expected a non-empty array of shape objects"},
    {"shapes_empty", "/shapes", "[]", "/shapes", "found an empty array"},
    {"shapes_object", "/shapes", R"({"batch": 1})", "/shapes", "expected a non-empty array of shape objects, found an object"},
    {"shape_not_object", "/shapes/0", "4", kShape0, "expected a shape object, found 4"},
    {"head_dim_negative", "/shapes/0/head_dim", "-3", "/shapes/0/head_dim", "expected a positive integer, found -3"},
    {"head_dim_string", "/shapes/0/head_dim", R"("64")", "/shapes/0/head_dim", R"(expected a positive integer, found the string "64")"},
    {"head_dim_fraction", "/shapes/0/head_dim", "64.5", "/shapes/0/head_dim", "expected a positive integer, found 64.5"},
    {"head_dim_whole_float", "/shapes/0/head_dim", "64.0", "/shapes/0/head_dim", "expected a positive integer, found 64.0"},
    {"head_dim_too_large", "/shapes/0/head_dim", "2048", "/shapes/0/head_dim", "expected a positive integer no greater than 1024, found 2048"},
    {"head_dim_bool", "/shapes/0/head_dim", "true", "/shapes/0/head_dim", "expected a positive integer, found true"},
    {"batch_zero", "/shapes/0/batch", "0", "/shapes/0/batch", "expected a positive integer, found 0"},
    {"batch_missing", "/shapes/0/batch", kRemove, "/shapes/0/batch", "required key is missing; expected a positive integer"},
    {"batch_beyond_uint64", "/shapes/0/batch", "1e30", "/shapes/0/batch", "expected a positive integer, found 1e+30"},
    {"batch_beyond_int", "/shapes/0/batch", "4294967296", "/shapes/0/batch", "no greater than 2147483647, found 4294967296"},
    {"heads_array", "/shapes/0/heads", "[16]", "/shapes/0/heads", "expected a positive integer, found an array"},
    {"seq_q_too_long", "/shapes/0/seq_q", "16777217", "/shapes/0/seq_q", "no greater than 16777216, found 16777217"},
    {"seq_kv_zero", "/shapes/0/seq_kv", "0", "/shapes/0/seq_kv", "expected a positive integer, found 0"},
    {"seq_is_not_shorthand", "/shapes/0/seq", "1024", "/shapes/0/seq", R"(unknown key "seq" (did you mean "seq_q"?))"},
    {"shape_key_misspelt", "/shapes/0/head_dmi", "64", "/shapes/0/head_dmi", R"((did you mean "head_dim"?))"},
    {"bias_string", "/shapes/0/bias", R"("no")", "/shapes/0/bias", R"(expected true or false, found the string "no")"},
    {"batch_times_heads_overflow", "/shapes/0", R"({"batch": 65536, "heads": 65536, "seq_q": 1, "head_dim": 1})",
     kShape0, "expected batch * heads to be at most 2147483647, found 65536 * 65536 = 4294967296"},
    {"element_count_overflow", "/shapes/0",
     R"({"batch": 32768, "heads": 65535, "seq_q": 16, "seq_kv": 16777216, "head_dim": 1024})", kShape0,
     "expected batch * heads * max(seq_q, seq_kv) * head_dim to fit in a 64-bit integer, found 32768 * 65535 * 16777216 * 1024"},
    {"shape_duplicate_after_seq_kv_default", "/shapes/1", R"({"batch": 4, "heads": 16, "seq_q": 1024, "seq_kv": 1024, "head_dim": 64})",
     "/shapes/1", "duplicate of /shapes/0"},
    {"shape_duplicate_through_its_own_causal", "/shapes",
     R"([{"batch": 4, "heads": 16, "seq_q": 1024, "head_dim": 64},
         {"batch": 4, "heads": 16, "seq_q": 1024, "head_dim": 64, "causal": [true, false]}])",
     "/shapes/1", "duplicate of /shapes/0"},
    {"window_beyond_int64", "/shapes/0/window", "[18446744073709551615, 0]", "/shapes/0/window/0",
     "expected -1 (unbounded) or a number of keys from 0 to max(seq_q, seq_kv) = 1024, found 18446744073709551615"},
    {"page_size_beyond_int64", "/shapes/0/page_size", "18446744073709551615", "/shapes/0/page_size",
     "expected a page size in tokens from 1 to 1048576"},
    // metrics
    {"metrics_string", "/metrics", R"("dram")", "/metrics", R"(expected an array of metric names, found the string "dram")"},
    {"metric_misspelt", "/metrics", R"(["dram", "tensr"])", "/metrics/1", R"(expected one of "occupancy", "dram", "tensor", found "tensr" (did you mean "tensor"?))"},
    // trace_format
    {"trace_format_misspelt", "/trace_format", R"("json.gzip")", "/trace_format", R"(expected one of "json", "json.gz", found "json.gzip" (did you mean "json.gz"?))"},
    {"trace_format_upper_case", "/trace_format", R"("JSON.GZ")", "/trace_format", R"(found "JSON.GZ" (did you mean "json.gz"?))"},
    {"trace_format_unknown", "/trace_format", R"("zstd")", "/trace_format", R"(expected one of "json", "json.gz", found "zstd")"},
    {"trace_format_boolean", "/trace_format", "true", "/trace_format", R"(expected one of "json", "json.gz", found true)"},
    {"trace_format_array", "/trace_format", R"(["json.gz"])", "/trace_format", "found an array"},
    {"trace_format_key_misspelt", "/trace_fromat", R"("json.gz")", "/trace_fromat", R"(unknown key "trace_fromat" (did you mean "trace_format"?))"},
    // expect
    {"expect_object", "/expect", kFlashCheck, "/expect", "expected an array of expectation objects, found an object"},
    {"expect_entry_string", "/expect", R"(["flash"])", kExpect0, R"(expected an expectation object, found the string "flash")"},
    {"expect_backend_missing", "/expect", R"([{"kernels_per_iter": 1}])", "/expect/0/backend", "required key is missing; expected one of \"math\""},
    {"expect_backend_misspelt", "/expect", R"([{"backend": "flashh", "kernels_per_iter": 1}])", "/expect/0/backend", R"((did you mean "flash"?))"},
    {"expect_nothing_checked", "/expect", R"([{"backend": "flash", "dtype": "bf16", "note": "hm"}])", kExpect0, "nothing to check; expected at least one of \"kernels_per_iter\""},
    {"expect_kernels_negative", "/expect/0", expectation_with(R"("memcpy_per_iter": -1)"), "/expect/0/memcpy_per_iter", "expected a non-negative number, found -1"},
    {"expect_kernels_string", "/expect/0", R"({"backend": "flash", "kernels_per_iter": "1"})", "/expect/0/kernels_per_iter", R"(expected a non-negative number, found the string "1")"},
    {"expect_registers_bool", "/expect/0", expectation_with(R"("max_registers": true)"), "/expect/0/max_registers", "found true"},
    {"expect_occupancy_above_100", "/expect/0", expectation_with(R"("max_theoretical_occupancy": 150)"), "/expect/0/max_theoretical_occupancy", "expected a percentage from 0 to 100, found 150"},
    {"expect_occupancy_negative", "/expect/0", expectation_with(R"("min_theoretical_occupancy": -0.5)"), "/expect/0/min_theoretical_occupancy", "found -0.5"},
    {"expect_occupancy_bounds_reversed", "/expect/0", expectation_with(R"("min_theoretical_occupancy": 60, "max_theoretical_occupancy": 50)"), kExpect0, "found 60 > 50"},
    {"expect_launch_api_empty", "/expect/0", expectation_with(R"("launch_api": "")"), "/expect/0/launch_api", R"(expected a non-empty string, found the string "")"},
    {"expect_launch_api_number", "/expect/0", R"({"backend": "cudnn", "launch_api": 7})", "/expect/0/launch_api", "expected a non-empty string, found 7"},
    {"expect_note_number", "/expect/0", expectation_with(R"("note": 5)"), "/expect/0/note", "expected a string, found 5"},
    {"expect_unknown_key", "/expect/0", expectation_with(R"("kernels_per_iteration": 1)"), "/expect/0/kernels_per_iteration", R"((did you mean "kernels_per_iter"?))"},
    {"expect_dtype_unknown", "/expect/0", expectation_with(R"("dtype": "fp8")"), "/expect/0/dtype", R"(found "fp8")"},
    {"expect_causal_string", "/expect/0", expectation_with(R"("causal": "true")"), "/expect/0/causal", R"(expected one of "top_left", "bottom_right", found "true")"},
    {"expect_shape_not_object", "/expect/0", expectation_with(R"("shape": "4x16x1024x1024x64")"), "/expect/0/shape", "expected a shape object"},
    {"expect_shape_bias_unknown", "/expect/0", expectation_with(R"("shape": {"batch": 1, "heads": 1, "seq_q": 8, "head_dim": 8, "bias": true})"), "/expect/0/shape/bias", R"(unknown key "bias")"},
    {"expect_shape_head_dim_zero", "/expect/0", expectation_with(R"("shape": {"batch": 1, "heads": 1, "seq_q": 8, "head_dim": 0})"), "/expect/0/shape/head_dim", "expected a positive integer, found 0"},
    {"expect_shape_seq_shorthand", "/expect/0", expectation_with(R"("shape": {"batch": 1, "heads": 1, "seq": 8, "head_dim": 8})"), "/expect/0/shape/seq", R"((did you mean "seq_q"?))"},
};

class ConfigEditTest : public ::testing::TestWithParam<EditCase> {};

TEST_P(ConfigEditTest, ReportsPointerAndMessage) {
  const EditCase& c = GetParam();
  expect_issue(issues_of(edited(c).dump()), c.pointer, c.message_part);
}

INSTANTIATE_TEST_SUITE_P(BadField, ConfigEditTest, ::testing::ValuesIn(kEditCases),
                         [](const auto& info) { return info.param.name; });

// ---- whole documents that are not valid JSON, or not objects ----------------------------------

struct TextCase {
  std::string name;
  std::string text;
  int line;    // 0: no position expected (the issue has a pointer instead)
  int column;
  std::string message_part;
};

void PrintTo(const TextCase& c, std::ostream* out) { *out << c.name; }

// The position is that of the last character nlohmann read: the end of the offending token, or
// one past the end of the text when it ended too soon.
const TextCase kTextCases[] = {
    {"missing_value", "{\n  \"backends\": [\"flash\"],\n  \"shapes\": ,\n}", 3, 13, "malformed JSON: syntax error while parsing value - unexpected ','"},
    {"unterminated_object", R"({"backends": ["flash"])", 1, 23, "malformed JSON: syntax error while parsing object - unexpected end of input"},
    {"trailing_comma", "{\n  \"warmup\": 3,\n}", 3, 1, "malformed JSON: syntax error while parsing object key"},
    {"bad_literal", "{\n  \"verify\": tru\n}", 2, 16, "invalid literal"},  // at the newline that ends "tru"
    {"garbage_after_document", "{}\nx", 2, 1, "expected end of input"},
    {"newline_in_string", "{\"name\": \"a\nb\"}", 1, 12, "invalid string: control character"},
    {"column_counts_characters", "{\"name\": \"\xC3\xA9\xC3\xA9\", x}", 1, 16, "malformed JSON"},
    {"empty_text", "", 0, 0, "the document is empty; expected a JSON object"},
    {"only_whitespace", " \n\t ", 0, 0, "the document is empty"},
    {"top_level_array", R"([{"backends": ["flash"]}])", 0, 0, "expected a JSON object at the top level, found an array"},
    {"top_level_number", "42", 0, 0, "expected a JSON object at the top level, found 42"},
    {"top_level_null", "null", 0, 0, "found null"},
};

class ConfigTextTest : public ::testing::TestWithParam<TextCase> {};

TEST_P(ConfigTextTest, ReportsPlaceAndMessage) {
  const TextCase& c = GetParam();
  try {
    parse_text(c.text);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    ASSERT_EQ(error.issues().size(), 1u) << error.what();
    const ConfigIssue& issue = error.issues()[0];
    EXPECT_EQ(issue.pointer, "");
    EXPECT_THAT(issue.message, HasSubstr(c.message_part));
    EXPECT_EQ(issue.line, c.line);
    EXPECT_EQ(issue.column, c.column);
    const std::string place = c.line > 0 ? fmt::format("test.json:{}:{}: ", c.line, c.column) : "test.json: (document): ";
    EXPECT_EQ(std::string(error.what()), place + issue.message);
  }
}

INSTANTIATE_TEST_SUITE_P(BadText, ConfigTextTest, ::testing::ValuesIn(kTextCases),
                         [](const auto& info) { return info.param.name; });

TEST(ConfigErrors, MalformedJsonMessageDropsNlohmannPrefix) {
  const std::vector<ConfigIssue> issues = issues_of("{\"a\": }");
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_THAT(issues[0].message, ::testing::Not(HasSubstr("json.exception")));
  EXPECT_THAT(issues[0].message, ::testing::Not(HasSubstr("parse error at line")));
}

// Found by tests/fuzz/config_fuzz.cpp: nlohmann rejects 1e999 with out_of_range, not parse_error.
TEST(ConfigErrors, ANumberBeyondADoubleIsAnIssueNotACrash) {
  const std::vector<ConfigIssue> issues = issues_of(R"({"backends": ["flash"], "warmup": 1e999})");
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_THAT(issues[0].message, HasSubstr("malformed JSON: number overflow parsing '1e999'"));
}

// ---- many issues at once ----------------------------------------------------------------------

TEST(ConfigErrors, ReportsEveryIssueInOnePass) {
  const std::string text = R"({
    "backends": ["flash", "flsh"],
    "dtypes": ["bf61"],
    "iteratons": 5,
    "warmup": -1,
    "shapes": [
      {"batch": 4, "heads": 16, "seq_q": 1024, "head_dim": 64},
      {"batch": 4, "heads": 16, "seq_q": 1024, "head_dim": "64", "seq": 3}
    ],
    "expect": [{"backend": "flash", "kernels_per_iter": 1}, {"backend": "flash"}]
  })";
  try {
    parse_text(text);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    const std::vector<std::string> expected_lines = {
        "test.json: /iteratons: unknown key \"iteratons\" (did you mean \"iterations\"?)",
        "test.json: /warmup: expected a non-negative integer, found -1",
        "test.json: /backends/1: expected one of \"math\", \"manual\", \"manual:out_of_place\", \"manual:in_place\", "
        "\"efficient\", \"flash\", \"flash:fa2\", \"flash:hopper\", \"cudnn\", found \"flsh\" (did you mean \"flash\"?)",
        "test.json: /dtypes/0: expected one of \"bf16\", \"fp16\", \"fp32\", found \"bf61\" (did you mean \"bf16\"?)",
        "test.json: /shapes/1/seq: unknown key \"seq\" (did you mean \"seq_q\"?)",
        "test.json: /shapes/1/head_dim: expected a positive integer, found the string \"64\"",
        "test.json: /expect/1: nothing to check; expected at least one of \"kernels_per_iter\", \"memcpy_per_iter\", "
        "\"memset_per_iter\", \"max_registers\", \"min_theoretical_occupancy\", \"max_theoretical_occupancy\", "
        "\"launch_api\"",
    };
    std::string expected_what;
    for (const std::string& line : expected_lines) expected_what += (expected_what.empty() ? "" : "\n") + line;
    EXPECT_EQ(std::string(error.what()), expected_what);
    EXPECT_EQ(error.issues().size(), expected_lines.size());
  }
}

TEST(ConfigErrors, ErrorsInSeveralShapesAndExpectationsAreAllReported) {
  json document = minimal_document();
  document["shapes"].push_back({{"batch", 0}, {"heads", -1}, {"seq_q", 8}, {"head_dim", 8}});
  document["shapes"].push_back({{"batch", 1}, {"heads", 1}, {"seq_q", 8}, {"head_dim", 4096}});
  document["expect"] = json::parse(R"([{"backend": "flash"}, {"backend": "nope", "memcpy_per_iter": -2}])");
  const std::vector<ConfigIssue> issues = issues_of(document.dump());
  expect_issue(issues, "/shapes/1/batch", "found 0");
  expect_issue(issues, "/shapes/1/heads", "found -1");
  expect_issue(issues, "/shapes/2/head_dim", "found 4096");
  expect_issue(issues, "/expect/0", "nothing to check");
  expect_issue(issues, "/expect/1/backend", "found \"nope\"");
  expect_issue(issues, "/expect/1/memcpy_per_iter", "found -2");
  EXPECT_EQ(issues.size(), 6u) << all_issues(issues);
}

TEST(ConfigErrors, DocumentPointerIsSpelledOutInMessages) {
  const ConfigError error("x.json", {ConfigIssue{"", "broken"}, ConfigIssue{"/a/0", "bad"}});
  EXPECT_EQ(std::string(error.what()), "x.json: (document): broken\nx.json: /a/0: bad");
}

// ---- good documents ---------------------------------------------------------------------------

TEST(ConfigParse, AppliesDefaults) {
  const json document = minimal_document();
  const Config config = parse_json(document);
  EXPECT_EQ(config.source, "test.json");
  EXPECT_EQ(config.name, "");
  EXPECT_EQ(config.backends, std::vector<std::string>{"flash"});
  EXPECT_EQ(config.dtypes, std::vector<DType>{DType::bf16});
  EXPECT_EQ(config.causal, std::vector<CausalMode>{CausalMode::none});
  EXPECT_EQ(config.warmup, 3);
  EXPECT_EQ(config.iterations, 20);
  EXPECT_TRUE(config.verify);
  EXPECT_EQ(config.seed, 20261202u);
  EXPECT_TRUE(config.metrics.empty());
  EXPECT_TRUE(config.expect.empty());
  EXPECT_EQ(config.trace_format, trace::TraceFormat::json);
  EXPECT_EQ(config.document, document);
}

TEST(ConfigParse, PassesDefaultToForwardAndKeepTheGivenOrder) {
  EXPECT_EQ(parse_json(minimal_document()).passes, std::vector<AttentionPass>{AttentionPass::forward});
  json document = minimal_document();
  document["passes"] = {"backward"};
  EXPECT_EQ(parse_json(document).passes, std::vector<AttentionPass>{AttentionPass::backward});
  document["passes"] = {"backward", "forward"};
  EXPECT_EQ(parse_json(document).passes, (std::vector<AttentionPass>{AttentionPass::backward, AttentionPass::forward}));
}

TEST(ConfigParse, AnExpectationIsAboutTheForwardUnlessItNamesThePass) {
  json document = minimal_document();
  document["expect"] = {json::parse(kFlashCheck), json::parse(expectation_with(R"("pass": "backward")"))};
  const Config config = parse_json(document);
  ASSERT_EQ(config.expect.size(), 2u);
  EXPECT_EQ(config.expect[0].pass, AttentionPass::forward);
  EXPECT_EQ(config.expect[1].pass, AttentionPass::backward);
}

TEST(ConfigParse, SeqKvDefaultsToSeqQ) {
  const Config config = parse_json(minimal_document());
  ASSERT_EQ(config.shapes.size(), 1u);
  const AttentionShape expected{4, 16, 1024, 1024, 64};
  EXPECT_EQ(config.shapes[0].shape, expected);
  EXPECT_FALSE(config.shapes[0].bias);
}

TEST(ConfigParse, ExplicitSeqKvAndBias) {
  json document = minimal_document();
  document["shapes"][0]["seq_kv"] = 4096;
  document["shapes"][0]["bias"] = true;
  const Config config = parse_json(document);
  const AttentionShape expected{4, 16, 1024, 4096, 64};
  EXPECT_EQ(config.shapes[0].shape, expected);
  EXPECT_TRUE(config.shapes[0].bias);
}

TEST(ConfigParse, SingleBooleanCausal) {
  json document = minimal_document();
  document["causal"] = true;
  EXPECT_EQ(parse_json(document).causal, std::vector<CausalMode>{CausalMode::top_left});
  document["causal"] = "bottom_right";
  EXPECT_EQ(parse_json(document).causal, std::vector<CausalMode>{CausalMode::bottom_right});
}

TEST(ConfigParse, ReadsEveryField) {
  const Config config = parse_text(R"({
    "name": "sweep",
    "backends": ["math", "manual:in_place", "cudnn"],
    "dtypes": ["fp16", "fp32"],
    "causal": [true, false, "bottom_right"],
    "shapes": [{"batch": 1, "heads": 2, "seq_q": 3, "seq_kv": 5, "head_dim": 8},
               {"batch": 1, "heads": 2, "seq_q": 3, "seq_kv": 5, "head_dim": 8, "bias": true},
               {"batch": 1, "heads": 2, "seq_q": 3, "seq_kv": 5, "head_dim": 8, "heads_kv": 1, "window": [2, -1]}],
    "warmup": 0, "iterations": 100000, "verify": false, "seed": 18446744073709551615,
    "metrics": ["occupancy", "tensor"],
    "expect": [],
    "trace_format": "json.gz"
  })");
  EXPECT_EQ(config.name, "sweep");
  EXPECT_EQ(config.backends, (std::vector<std::string>{"math", "manual:in_place", "cudnn"}));
  EXPECT_EQ(config.dtypes, (std::vector<DType>{DType::fp16, DType::fp32}));
  EXPECT_EQ(config.causal, (std::vector<CausalMode>{CausalMode::top_left, CausalMode::none, CausalMode::bottom_right}));
  ASSERT_EQ(config.shapes.size(), 3u);  // same sizes, different bias or heads or window: distinct cases
  EXPECT_TRUE(config.shapes[1].bias);
  EXPECT_EQ(config.shapes[2].shape.kv_heads(), 1);
  EXPECT_EQ(config.shapes[2].window, (AttentionWindow{2, -1}));
  EXPECT_EQ(config.warmup, 0);
  EXPECT_EQ(config.iterations, 100000);
  EXPECT_FALSE(config.verify);
  EXPECT_EQ(config.seed, UINT64_MAX);
  EXPECT_EQ(config.metrics, (std::vector<std::string>{"occupancy", "tensor"}));
  EXPECT_EQ(config.trace_format, trace::TraceFormat::json_gz);
}

TEST(ConfigParse, LargestAcceptedShape) {
  json document = minimal_document();
  document["shapes"][0] = {{"batch", 1}, {"heads", 1}, {"seq_q", 1 << 24}, {"head_dim", 1024}};
  const Config config = parse_json(document);
  EXPECT_EQ(config.shapes[0].shape.seq_kv, 1 << 24);
}

TEST(ConfigParse, ReadsExpectations) {
  json document = minimal_document();
  document["expect"] = json::parse(R"([
    {"backend": "flash", "dtype": "bf16", "causal": true,
     "shape": {"batch": 4, "heads": 16, "seq_q": 1024, "head_dim": 64},
     "kernels_per_iter": 1, "memcpy_per_iter": 0, "memset_per_iter": 0, "max_registers": 255,
     "min_theoretical_occupancy": 12.5, "max_theoretical_occupancy": 50,
     "launch_api": "cuLaunchKernelEx", "note": "a guess"},
    {"backend": "manual:out_of_place", "memcpy_per_iter": 1}
  ])");
  const Config config = parse_json(document);
  ASSERT_EQ(config.expect.size(), 2u);
  const Expectation& flash = config.expect[0];
  EXPECT_EQ(flash.backend, "flash");
  EXPECT_EQ(flash.pointer, "/expect/0");
  EXPECT_EQ(flash.dtype, DType::bf16);
  EXPECT_EQ(flash.causal, CausalMode::top_left);
  ASSERT_TRUE(flash.shape.has_value());
  EXPECT_EQ(*flash.shape, (AttentionShape{4, 16, 1024, 1024, 64}));
  EXPECT_EQ(flash.kernels_per_iter, 1.0);
  EXPECT_EQ(flash.memcpy_per_iter, 0.0);
  EXPECT_EQ(flash.memset_per_iter, 0.0);
  EXPECT_EQ(flash.max_registers, 255.0);
  EXPECT_EQ(flash.min_theoretical_occupancy, 12.5);
  EXPECT_EQ(flash.max_theoretical_occupancy, 50.0);
  EXPECT_EQ(flash.launch_api, "cuLaunchKernelEx");

  const Expectation& manual = config.expect[1];
  EXPECT_EQ(manual.pointer, "/expect/1");
  EXPECT_EQ(manual.backend, "manual:out_of_place");
  EXPECT_FALSE(manual.dtype.has_value());
  EXPECT_FALSE(manual.causal.has_value());
  EXPECT_FALSE(manual.shape.has_value());
  EXPECT_FALSE(manual.kernels_per_iter.has_value());
  EXPECT_EQ(manual.memcpy_per_iter, 1.0);
}

TEST(ConfigParse, EmbeddedDefaultConfigIsValid) {
  const Config config = parse_config(embedded_default_config(), "<embedded default>", kKnownBackends);
  EXPECT_EQ(config.source, "<embedded default>");
  EXPECT_EQ(config.backends, (std::vector<std::string>{"math", "manual", "efficient", "flash", "cudnn"}));
  EXPECT_FALSE(config.shapes.empty());
  EXPECT_FALSE(config.expect.empty());
  for (const Expectation& expectation : config.expect) EXPECT_TRUE(expectation.pointer.has_value());
}

TEST(ConfigParse, EveryShippedConfigIsValid) {
  const std::filesystem::path configs = std::filesystem::path(ATTNPROF_SOURCE_DIR) / "configs";
  int parsed = 0;
  // Top level only: configs/baselines/ holds summaries (the input of `attnprof check`), not configs.
  for (const auto& entry : std::filesystem::directory_iterator(configs)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_config_file(entry.path().string(), kKnownBackends));
    ++parsed;
  }
  EXPECT_GE(parsed, 1);
}

// ---- files ------------------------------------------------------------------------------------

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("attnprof_config_test_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = directory_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path directory_;
};

TEST_F(ConfigFileTest, LoadsAFile) {
  const std::string path = write("good.json", minimal_document().dump(2));
  const Config config = load_config_file(path, kKnownBackends);
  EXPECT_EQ(config.source, path);
  EXPECT_EQ(config.backends, std::vector<std::string>{"flash"});
}

TEST_F(ConfigFileTest, MissingFileNamesPathAndReason) {
  const std::string path = (directory_ / "absent.json").string();
  try {
    load_config_file(path, kKnownBackends);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.source(), path);
    ASSERT_EQ(error.issues().size(), 1u);
    EXPECT_EQ(error.issues()[0].pointer, "");
    EXPECT_THAT(error.issues()[0].message, HasSubstr(path));
    EXPECT_THAT(error.issues()[0].message, HasSubstr("No such file or directory"));
  }
}

TEST_F(ConfigFileTest, DirectoryIsUnreadable) {
  try {
    load_config_file(directory_.string(), kKnownBackends);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    ASSERT_EQ(error.issues().size(), 1u);
    EXPECT_THAT(error.issues()[0].message, HasSubstr("Is a directory"));
  }
}

TEST_F(ConfigFileTest, MalformedFileIsNamedWithLineAndColumn) {
  const std::string path = write("bad.json", "{\n  \"backends\": [\"flash\"]\n  \"shapes\": []\n}");
  try {
    load_config_file(path, kKnownBackends);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    // 3:10 is the end of the unexpected "shapes" token (a comma is missing before it).
    EXPECT_THAT(std::string(error.what()), ::testing::StartsWith(path + ":3:10: malformed JSON: "));
  }
}

// ---- did you mean -----------------------------------------------------------------------------

struct MatchCase {
  std::string word;
  std::vector<std::string> candidates;
  std::optional<std::string> expected;
};

TEST(ClosestMatch, Table) {
  const std::vector<std::string> dtypes = {"bf16", "fp16", "fp32"};
  const std::vector<MatchCase> cases = {
      {"bf61", dtypes, "bf16"},
      {"BF16", dtypes, "bf16"},
      {"fp3", dtypes, "fp32"},
      {"int8", dtypes, std::nullopt},
      {"", dtypes, std::nullopt},
      {"seq", {"batch", "heads", "seq_q", "seq_kv", "head_dim"}, "seq_q"},
      {"Flash", kKnownBackends, "flash"},
      {"manual:inplace", kKnownBackends, "manual:in_place"},
      {"flash:hoper", kKnownBackends, "flash:hopper"},
      {"flash:fa3", kKnownBackends, "flash:fa2"},
      {"ab", {"cd"}, std::nullopt},                    // every character changed: no hint
      {"xy", {"xz", "ab"}, "xz"},
      {"theoretical_occupncy_max", {"max_theoretical_occupancy"}, std::nullopt},
      {"min_theoretical_ocupancy", {"min_theoretical_occupancy", "max_theoretical_occupancy"}, "min_theoretical_occupancy"},
      {"anything", {}, std::nullopt},
  };
  for (const MatchCase& c : cases) {
    EXPECT_EQ(closest_match(c.word, c.candidates), c.expected) << c.word;
  }
}

}  // namespace
}  // namespace attnprof

namespace attnprof {
namespace {

TEST(ShapeOption, TheOneLineFormIsTheShapeOfAConfig) {
  const nlohmann::json doc = shape_option_document("b=8,h=32,hkv=8,sq=1,skv=32768,d=128,causal=bottom_right,window=4096:0");
  EXPECT_EQ(doc.at("shapes"), nlohmann::json::parse(R"([{"batch": 8, "heads": 32, "heads_kv": 8, "seq_q": 1,
      "seq_kv": 32768, "head_dim": 128, "window": [4096, 0]}])"));
  EXPECT_EQ(doc.at("causal"), "bottom_right");
  EXPECT_EQ(shape_option_document("b=1,h=2,sq=3,d=64,causal=true,dtype=fp16").at("dtypes"), nlohmann::json({"fp16"}));
  EXPECT_EQ(shape_option_document("b=3,h=8,hkv=2,sq=1,skv=4096,d=128,lkv=1:17:4096,page=16").at("shapes"),
            nlohmann::json::parse(R"([{"batch": 3, "heads": 8, "heads_kv": 2, "seq_q": 1, "seq_kv": 4096,
                "head_dim": 128, "seq_lens_kv": [1, 17, 4096], "page_size": 16}])"));
  EXPECT_EQ(shape_option_document("b=2,h=4,sq=64,d=64,lq=1:64").at("shapes")[0].at("seq_lens_q"),
            nlohmann::json::parse("[1, 64]"));
}

TEST(ConfigParse, ReadsARaggedPagedShape) {
  const Config config = parse_text(R"({"backends": ["flash"], "shapes": [{"batch": 3, "heads": 8, "heads_kv": 2,
      "seq_q": 64, "seq_kv": 4096, "head_dim": 128, "seq_lens_q": [1, 17, 64], "seq_lens_kv": [1, 17, 4096],
      "page_size": 16}]})");
  ASSERT_EQ(config.shapes.size(), 1u);
  const AttentionShape& s = config.shapes[0].shape;
  EXPECT_EQ(s.seq_lens_q, (std::vector<int>{1, 17, 64}));
  EXPECT_EQ(s.seq_lens_kv, (std::vector<int>{1, 17, 4096}));
  EXPECT_EQ(s.page_size, 16);
  EXPECT_EQ(s.q_len(1), 17);
  EXPECT_EQ(s.kv_len(2), 4096);
  EXPECT_EQ(s.total_q(), 82);
  EXPECT_TRUE(s.packed_q());
  EXPECT_FALSE(s.packed_kv());  // paged: K/V live in pages, not packed
  EXPECT_EQ(s.pages_per_sequence(), 256);
}

TEST(ConfigErrors, AKeyGivenTwiceInOneObjectIsNamedByItsPointer) {
  const std::vector<ConfigIssue> issues = issues_of(R"({"warmup": 1, "backends": ["flash"], "warmup": 5,
      "shapes": [{"batch": 1, "heads": 2, "seq_q": 64, "head_dim": 64},
                 {"batch": 1, "heads": 2, "seq_q": 64, "head_dim": 64, "batch": 7}],
      "expect": [{"backend": "flash", "shape": {"batch": 1, "heads": 2, "seq_q": 64, "head_dim": 64,
                  "a/b": 1, "a/b": 2}}]})");
  expect_issue(issues, "/warmup", "duplicate key");
  expect_issue(issues, "/shapes/1/batch", "duplicate key");
  expect_issue(issues, "/expect/0/shape/a~1b", "duplicate key");
  EXPECT_EQ(std::count_if(issues.begin(), issues.end(),
                          [](const ConfigIssue& i) { return i.message.find("duplicate key") != std::string::npos; }),
            3) << all_issues(issues);
}

TEST(ConfigParse, EqualKeysInDifferentObjectsAreNotDuplicates) {
  const Config config = parse_text(R"({"backends": ["flash"],
      "shapes": [{"batch": 1, "heads": 2, "seq_q": 64, "head_dim": 64}, {"batch": 2, "heads": 2, "seq_q": 64, "head_dim": 64}]})");
  EXPECT_EQ(config.shapes.size(), 2u);
}

TEST(ConfigParse, ShapesThatShareNoCausalSettingAreNotDuplicates) {
  json document = minimal_document();
  json shape = document["shapes"][0];
  shape["causal"] = true;
  document["shapes"].push_back(shape);  // the first runs the config's causal (false), this one true
  EXPECT_EQ(parse_json(document).shapes.size(), 2u);
}

TEST(ConfigErrors, RaggedLengthsMustSumToA32BitOffset) {
  json document = minimal_document();
  json& shape = document["shapes"][0];
  shape = {{"batch", 200}, {"heads", 1}, {"seq_q", 1 << 24}, {"head_dim", 64}};
  shape["seq_lens_q"] = json(std::vector<int>(200, 1 << 24));
  expect_issue(issues_of(document.dump()), "/shapes/0/seq_lens_q",
               "expected lengths that sum to at most 2147483647 tokens (the packed batch's offsets are 32-bit), "
               "found a sum of 3355443200");
}

TEST(ConfigParse, AnExpectationShapeMayNameLengthsAndAPageSize) {
  json document = minimal_document();
  document["expect"] = json::parse(R"([{"backend": "flash", "kernels_per_iter": 2,
      "shape": {"batch": 2, "heads": 4, "seq_q": 1, "seq_kv": 64, "head_dim": 64, "heads_kv": 2,
                "seq_lens_kv": [17, 64], "page_size": 16}}])");
  const Config config = parse_json(document);
  ASSERT_EQ(config.expect.size(), 1u);
  ASSERT_TRUE(config.expect[0].shape.has_value());
  EXPECT_EQ(config.expect[0].shape->seq_lens_kv, (std::vector<int>{17, 64}));
  EXPECT_EQ(config.expect[0].shape->page_size, 16);
  EXPECT_EQ(config.expect[0].shape->kv_heads(), 2);
}

TEST(ShapeOption, WhatItCannotReadIsAConfigErrorNamingThePart) {
  auto message = [](const char* text) {
    try {
      shape_option_document(text);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("b=8,hh=32").find("unknown key 'hh' (did you mean 'h'?)"), std::string::npos) << message("b=8,hh=32");
  EXPECT_NE(message("b=eight").find("b=eight: expected an integer"), std::string::npos);
  EXPECT_NE(message("window=4096").find("expected LEFT:RIGHT"), std::string::npos);
  EXPECT_NE(message("b8").find("expected key=value"), std::string::npos);
  EXPECT_NE(message("b=1,h=2,sq=64,d=64,bias=yes").find("bias=yes: expected true, false, 1 or 0"), std::string::npos);
  EXPECT_NE(message("b=1,h=2,sq=64,d=64,b=4").find("'b=4': b is given twice"), std::string::npos);
}

}  // namespace
}  // namespace attnprof
