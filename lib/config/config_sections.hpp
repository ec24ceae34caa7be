// The parts of a config document with structure of their own: shapes and expectations.
// config.cpp reads the top level and hands each entry here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/json_fields.hpp"

namespace attnprof::config_sections {

using config_fields::IssueList;
using nlohmann::json;

// The names DType parses from; messages list them in this order.
inline const std::vector<std::string> kDTypeNames = {"bf16", "fp16", "fp32"};
// The names AttentionPass parses from.
inline const std::vector<std::string> kPassNames = {"forward", "backward"};

// The causal words: false, true (= "top_left"), "top_left", "bottom_right".
std::optional<CausalMode> read_causal_mode(const json& value, const std::string& pointer, IssueList& issues);

// One entry of "shapes": the five sizes, "heads_kv", "window" and "bias".
std::optional<ShapeSpec> read_shape_spec(const json& value, const std::string& pointer, IssueList& issues);

// The "shape" of an expectation: the five sizes and heads_kv, and where given a ragged batch's
// lengths and a page size (absent, they are not checked: see expected_shape_matches).
std::optional<AttentionShape> read_expected_shape(const json& value, const std::string& pointer,
                                                  IssueList& issues);

// Whether two shape entries would run a case twice: the same sizes, window and bias, and a causal
// setting in common (a shape without its own causal list runs the config's, `config_causal`).
bool same_case(const ShapeSpec& a, const ShapeSpec& b, const std::vector<CausalMode>& config_causal);

// One entry of "expect".
std::optional<Expectation> read_expectation(const json& value, const std::string& pointer,
                                            const std::vector<std::string>& known_backends,
                                            IssueList& issues);

}  // namespace attnprof::config_sections
