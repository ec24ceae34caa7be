#include "config/json_fields.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace attnprof::config_fields {

namespace {

// Long strings are cut so that one bad value cannot flood the terminal.
constexpr std::size_t kLongestQuotedString = 48;

bool is_utf8_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string shortened(const std::string& text) {
  if (text.size() <= kLongestQuotedString) return text;
  std::size_t cut = kLongestQuotedString - 3;
  while (cut > 0 && is_utf8_continuation_byte(text[cut])) --cut;  // never split a UTF-8 character
  return text.substr(0, cut) + "...";
}

std::string json_quoted(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string integer_phrase(const IntegerRule& rule) {
  if (rule.minimum == 0) return "a non-negative integer";
  if (rule.minimum == 1) return "a positive integer";
  return fmt::format("an integer of at least {}", rule.minimum);
}

bool is_whole_number(const json& value) {
  if (!value.is_number_float()) return false;
  const double number = value.get<double>();
  return std::isfinite(number) && std::trunc(number) == number;
}

}  // namespace

void IssueList::add(std::string pointer, std::string message) {
  issues_.push_back(ConfigIssue{std::move(pointer), std::move(message)});
}

std::string child_pointer(std::string_view parent, std::string_view key) {
  std::string pointer(parent);
  pointer += '/';
  for (char c : key) {
    if (c == '~')
      pointer += "~0";
    else if (c == '/')
      pointer += "~1";
    else
      pointer += c;
  }
  return pointer;
}

std::string child_pointer(std::string_view parent, std::size_t index) {
  return fmt::format("{}/{}", parent, index);
}

std::string describe_value(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return "the string " + json_quoted(shortened(value.get<std::string>()));
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::null:
      return "null";
    case json::value_t::array:
      return value.empty() ? "an empty array" : "an array";
    case json::value_t::object:
      return value.empty() ? "an empty object" : "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return value.dump();
    case json::value_t::binary:
    case json::value_t::discarded:
      break;
  }
  return "nothing";
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) {
    if (!list.empty()) list += ", ";
    list += json_quoted(name);
  }
  return list;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::optional<std::string> match = closest_match(word, candidates);
  return match ? fmt::format(" (did you mean {}?)", json_quoted(*match)) : "";
}

const json* find_member(const json& object, std::string_view key) {
  const auto member = object.find(key);
  return member == object.end() ? nullptr : &*member;
}

void report_missing(IssueList& issues, const std::string& pointer, std::string_view expected) {
  issues.add(pointer, fmt::format("required key is missing; expected {}", expected));
}

void reject_unknown_keys(const json& object, const std::string& pointer,
                         const std::vector<std::string>& known_keys, IssueList& issues) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known_keys.begin(), known_keys.end(), key) != known_keys.end()) continue;
    std::string hint = did_you_mean(key, known_keys);
    if (hint.empty()) hint = fmt::format("; known keys are {}", quoted_list(known_keys));
    issues.add(child_pointer(pointer, key),
               fmt::format("unknown key {}{}", json_quoted(shortened(key)), hint));
  }
}

bool require_object(const json& value, const std::string& pointer, std::string_view what, IssueList& issues) {
  if (value.is_object()) return true;
  issues.add(pointer, fmt::format("expected {}, found {}", what, describe_value(value)));
  return false;
}

std::optional<std::uint64_t> read_integer(const json& value, const std::string& pointer, IntegerRule rule,
                                          IssueList& issues) {
  const std::string expected = integer_phrase(rule);
  if (!value.is_number_integer()) {
    const std::string_view hint = is_whole_number(value) ? " (write it without a decimal point)" : "";
    issues.add(pointer, fmt::format("expected {}, found {}{}", expected, describe_value(value), hint));
    return std::nullopt;
  }
  const bool negative = !value.is_number_unsigned() && value.get<std::int64_t>() < 0;
  if (negative || value.get<std::uint64_t>() < rule.minimum) {
    issues.add(pointer, fmt::format("expected {}, found {}", expected, describe_value(value)));
    return std::nullopt;
  }
  const std::uint64_t number = value.get<std::uint64_t>();
  if (number > rule.maximum) {
    issues.add(pointer,
               fmt::format("expected {} no greater than {}, found {}", expected, rule.maximum, number));
    return std::nullopt;
  }
  return number;
}

std::optional<double> read_number(const json& value, const std::string& pointer, NumberRule rule,
                                  IssueList& issues) {
  const bool in_range = value.is_number() && std::isfinite(value.get<double>()) &&
                        value.get<double>() >= rule.minimum && value.get<double>() <= rule.maximum;
  if (!in_range) {
    issues.add(pointer, fmt::format("expected {}, found {}", rule.expected, describe_value(value)));
    return std::nullopt;
  }
  return value.get<double>();
}

std::optional<bool> read_boolean(const json& value, const std::string& pointer, IssueList& issues) {
  if (value.is_boolean()) return value.get<bool>();
  issues.add(pointer, fmt::format("expected true or false, found {}", describe_value(value)));
  return std::nullopt;
}

std::optional<std::string> read_string(const json& value, const std::string& pointer, Emptiness emptiness,
                                       IssueList& issues) {
  const bool rejected_empty =
      emptiness == Emptiness::rejected && value.is_string() && value.get_ref<const std::string&>().empty();
  if (!value.is_string() || rejected_empty) {
    const std::string_view expected = emptiness == Emptiness::rejected ? "a non-empty string" : "a string";
    issues.add(pointer, fmt::format("expected {}, found {}", expected, describe_value(value)));
    return std::nullopt;
  }
  return value.get<std::string>();
}

std::optional<std::string> read_choice(const json& value, const std::string& pointer,
                                       const std::vector<std::string>& choices, IssueList& issues) {
  if (!value.is_string()) {
    issues.add(pointer,
               fmt::format("expected one of {}, found {}", quoted_list(choices), describe_value(value)));
    return std::nullopt;
  }
  const std::string& text = value.get_ref<const std::string&>();
  if (std::find(choices.begin(), choices.end(), text) != choices.end()) return text;
  issues.add(pointer, fmt::format("expected one of {}, found {}{}", quoted_list(choices),
                                  json_quoted(shortened(text)), did_you_mean(text, choices)));
  return std::nullopt;
}

}  // namespace attnprof::config_fields
