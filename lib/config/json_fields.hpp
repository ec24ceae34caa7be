// Typed reading of JSON values for the config parser. Every reader reports what it expected
// and what it found into an IssueList and carries on, so one pass reports every problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config.hpp"

namespace attnprof::config_fields {

using nlohmann::json;

class IssueList {
 public:
  void add(std::string pointer, std::string message);
  void add(ConfigIssue issue) { issues_.push_back(std::move(issue)); }
  std::size_t size() const { return issues_.size(); }
  bool empty() const { return issues_.empty(); }
  std::vector<ConfigIssue> take() { return std::move(issues_); }

 private:
  std::vector<ConfigIssue> issues_;
};

// RFC 6901 pointers: "/shapes" + "1" -> "/shapes/1"; "~" and "/" in keys are escaped.
std::string child_pointer(std::string_view parent, std::string_view key);
std::string child_pointer(std::string_view parent, std::size_t index);

// How a message names a value it found: `-3`, `64.5`, `the string "64"`, `an array`.
std::string describe_value(const json& value);

// `"a", "b", "c"`
std::string quoted_list(const std::vector<std::string>& names);

// ` (did you mean "x"?)`, or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// The member `key` of `object`, or nullptr when absent.
const json* find_member(const json& object, std::string_view key);

void report_missing(IssueList& issues, const std::string& pointer, std::string_view expected);

// Reports each member whose key is not in `known_keys`, with a did-you-mean hint.
void reject_unknown_keys(const json& object, const std::string& pointer,
                         const std::vector<std::string>& known_keys, IssueList& issues);

bool require_object(const json& value, const std::string& pointer, std::string_view what, IssueList& issues);

// Inclusive bounds; every integer in the config is non-negative, so unsigned bounds suffice.
struct IntegerRule {
  std::uint64_t minimum = 0;
  std::uint64_t maximum = UINT64_MAX;
};

std::optional<std::uint64_t> read_integer(const json& value, const std::string& pointer, IntegerRule rule,
                                          IssueList& issues);

struct NumberRule {
  double minimum = 0;
  double maximum = std::numeric_limits<double>::infinity();
  std::string_view expected = "a non-negative number";
};

std::optional<double> read_number(const json& value, const std::string& pointer, NumberRule rule,
                                  IssueList& issues);

std::optional<bool> read_boolean(const json& value, const std::string& pointer, IssueList& issues);

enum class Emptiness { allowed, rejected };

std::optional<std::string> read_string(const json& value, const std::string& pointer, Emptiness emptiness,
                                       IssueList& issues);

// A string that must be one of `choices`; a near miss gets a did-you-mean hint.
std::optional<std::string> read_choice(const json& value, const std::string& pointer,
                                       const std::vector<std::string>& choices, IssueList& issues);

template <typename T>
using ElementReader = std::function<std::optional<T>(const json& value, const std::string& pointer)>;

struct ListRule {
  std::string_view element_kind;  // "backend names", for "expected a non-empty array of ..."
  Emptiness emptiness = Emptiness::rejected;
};

// Reads every element of an array. An element equal to an earlier one is an issue, because
// it would run (and be reported as) the same case twice.
template <typename T, typename Same = std::equal_to<T>>
std::vector<T> read_list(const json& value, const std::string& pointer, ListRule rule, IssueList& issues,
                         const ElementReader<T>& read_element, Same same = {}) {
  std::vector<T> items;
  const bool empty_array_rejected =
      rule.emptiness == Emptiness::rejected && value.is_array() && value.empty();
  if (!value.is_array() || empty_array_rejected) {
    const std::string_view adjective = rule.emptiness == Emptiness::rejected ? "a non-empty" : "an";
    issues.add(pointer, fmt::format("expected {} array of {}, found {}", adjective, rule.element_kind,
                                    describe_value(value)));
    return items;
  }
  std::vector<std::size_t> item_indices;
  for (std::size_t index = 0; index < value.size(); ++index) {
    const std::string element_pointer = child_pointer(pointer, index);
    std::optional<T> item = read_element(value[index], element_pointer);
    if (!item) continue;
    for (std::size_t earlier = 0; earlier < items.size(); ++earlier) {
      if (same(items[earlier], *item)) {
        issues.add(element_pointer,
                   fmt::format("duplicate of {}", child_pointer(pointer, item_indices[earlier])));
        break;
      }
    }
    items.push_back(std::move(*item));
    item_indices.push_back(index);
  }
  return items;
}

}  // namespace attnprof::config_fields
