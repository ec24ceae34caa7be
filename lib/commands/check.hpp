// `attnprof check --baseline BASE.json SUMMARY.json`: the CI gate.
#pragma once

#include <optional>
#include <string>

#include "summary/render.hpp"

namespace attnprof {

struct CheckRequest {
  std::string baseline_path;
  std::string summary_path;
  std::string junit_path;
  std::optional<double> time_tolerance_percent;
  std::optional<double> throughput_tolerance_percent;
  std::optional<double> memory_tolerance_percent;
  bool expectations = false;
  bool update = false;
  std::string format{to_string(OutputFormat::table)};
};

int check_command(const CheckRequest& request);

}  // namespace attnprof
