#include <algorithm>

#include <fmt/format.h>

#include "config/config_sections.hpp"

namespace attnprof::config_sections {

using namespace config_fields;

namespace {

const std::vector<std::string> kCheckedKeys = {
    "kernels_per_iter",          "memcpy_per_iter",           "memset_per_iter", "max_registers",
    "min_theoretical_occupancy", "max_theoretical_occupancy", "launch_api"};
const std::vector<std::string> kScopeKeys = {"backend", "dtype", "causal", "pass", "shape"};

constexpr NumberRule kCountRule{0, std::numeric_limits<double>::infinity(), "a non-negative number"};
constexpr NumberRule kPercentRule{0, 100, "a percentage from 0 to 100"};

std::vector<std::string> expectation_keys() {
  std::vector<std::string> keys = kScopeKeys;
  keys.insert(keys.end(), kCheckedKeys.begin(), kCheckedKeys.end());
  keys.push_back("note");
  return keys;
}

std::optional<double> read_optional_number(const json& object, const std::string& pointer,
                                           std::string_view key, NumberRule rule, IssueList& issues) {
  const json* value = find_member(object, key);
  if (!value) return std::nullopt;
  return read_number(*value, child_pointer(pointer, key), rule, issues);
}

// backend, dtype, causal, pass and shape: which cases the expectation is about.
void read_scope(const json& object, const std::string& pointer,
                const std::vector<std::string>& known_backends, Expectation& expectation, IssueList& issues) {
  const std::string backend_pointer = child_pointer(pointer, "backend");
  if (const json* backend = find_member(object, "backend")) {
    expectation.backend = read_choice(*backend, backend_pointer, known_backends, issues).value_or("");
  } else {
    report_missing(issues, backend_pointer, fmt::format("one of {}", quoted_list(known_backends)));
  }
  if (const json* dtype = find_member(object, "dtype")) {
    const std::optional<std::string> name =
        read_choice(*dtype, child_pointer(pointer, "dtype"), kDTypeNames, issues);
    if (name) expectation.dtype = parse_dtype(*name);
  }
  if (const json* causal = find_member(object, "causal")) {
    expectation.causal = read_causal_mode(*causal, child_pointer(pointer, "causal"), issues);
  }
  if (const json* pass = find_member(object, "pass")) {
    const std::optional<std::string> name = read_choice(*pass, child_pointer(pointer, "pass"), kPassNames, issues);
    if (name) expectation.pass = parse_pass(*name).value_or(AttentionPass::forward);
  }
  if (const json* shape = find_member(object, "shape")) {
    expectation.shape = read_expected_shape(*shape, child_pointer(pointer, "shape"), issues);
  }
}

// The fields compared against the trace.
void read_checks(const json& object, const std::string& pointer, Expectation& expectation,
                 IssueList& issues) {
  expectation.kernels_per_iter =
      read_optional_number(object, pointer, "kernels_per_iter", kCountRule, issues);
  expectation.memcpy_per_iter = read_optional_number(object, pointer, "memcpy_per_iter", kCountRule, issues);
  expectation.memset_per_iter = read_optional_number(object, pointer, "memset_per_iter", kCountRule, issues);
  expectation.max_registers = read_optional_number(object, pointer, "max_registers", kCountRule, issues);
  expectation.min_theoretical_occupancy =
      read_optional_number(object, pointer, "min_theoretical_occupancy", kPercentRule, issues);
  expectation.max_theoretical_occupancy =
      read_optional_number(object, pointer, "max_theoretical_occupancy", kPercentRule, issues);
  if (const json* launch_api = find_member(object, "launch_api")) {
    expectation.launch_api =
        read_string(*launch_api, child_pointer(pointer, "launch_api"), Emptiness::rejected, issues);
  }
}

// An expectation that checks nothing can never be surprised, so it is almost surely a typo.
void require_some_check(const json& object, const std::string& pointer, IssueList& issues) {
  const bool has_check = std::any_of(kCheckedKeys.begin(), kCheckedKeys.end(),
                                     [&](const std::string& key) { return object.contains(key); });
  if (has_check) return;
  issues.add(pointer,
             fmt::format("nothing to check; expected at least one of {}", quoted_list(kCheckedKeys)));
}

void require_ordered_occupancy_bounds(const Expectation& expectation, const std::string& pointer,
                                      IssueList& issues) {
  const auto& low = expectation.min_theoretical_occupancy;
  const auto& high = expectation.max_theoretical_occupancy;
  if (!low || !high || *low <= *high) return;
  issues.add(pointer,
             fmt::format("expected min_theoretical_occupancy <= max_theoretical_occupancy, found {} > {}",
                         *low, *high));
}

}  // namespace

std::optional<Expectation> read_expectation(const json& value, const std::string& pointer,
                                            const std::vector<std::string>& known_backends,
                                            IssueList& issues) {
  if (!require_object(value, pointer, "an expectation object", issues)) return std::nullopt;
  const std::size_t issues_before = issues.size();
  static const std::vector<std::string> keys = expectation_keys();
  reject_unknown_keys(value, pointer, keys, issues);

  Expectation expectation;
  expectation.pointer = pointer;
  read_scope(value, pointer, known_backends, expectation, issues);
  read_checks(value, pointer, expectation, issues);
  if (const json* note = find_member(value, "note")) {
    expectation.note = read_string(*note, child_pointer(pointer, "note"), Emptiness::allowed, issues);
  }
  require_some_check(value, pointer, issues);
  require_ordered_occupancy_bounds(expectation, pointer, issues);
  if (issues.size() != issues_before) return std::nullopt;
  return expectation;
}

}  // namespace attnprof::config_sections
