// Why a GPU test may skip, kept in one table: a test skips only through ATTNPROF_SKIP_BECAUSE
// with one of these reasons, and the GPU test main counts every other skip as a failure (a
// suite must not pass by skipping). Pure: tests/cpu/skip_policy_test.cpp checks the matching.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace attnprof::test {

enum class SkipReason {
  needs_compute_capability,  // the device lacks the compute capability the code needs
  needs_shared_memory,       // the device's blocks cannot have the shared memory the kernel needs
  needs_newer_cudnn,         // a version gate of the loaded cuDNN
  counters_unavailable,      // the range profiler cannot read counters here
  refused_as_documented,     // a backend refuses a case, as `attnprof backends`' table or its rule says
};

struct SkipReasonText {
  SkipReason reason;
  std::string_view tag;   // in the skip message, as "[skip: tag]"
  std::string_view text;  // in the summary line
};

inline constexpr std::array<SkipReasonText, 5> kSkipReasons = {{
    {SkipReason::needs_compute_capability, "needs_compute_capability", "needs a compute capability this GPU lacks"},
    {SkipReason::needs_shared_memory, "needs_shared_memory", "needs more shared memory per block than this GPU has"},
    {SkipReason::needs_newer_cudnn, "needs_newer_cudnn", "needs a newer cuDNN than the one loaded"},
    {SkipReason::counters_unavailable, "counters_unavailable", "range profiler counters not available on this device"},
    {SkipReason::refused_as_documented, "refused_as_documented",
     "the backend refuses the case, as `attnprof backends`' table or its documented rule says"},
}};

inline const SkipReasonText& text_of(SkipReason reason) {
  for (const SkipReasonText& r : kSkipReasons)
    if (r.reason == reason) return r;
  return kSkipReasons[0];  // unreachable: every enumerator has a row
}

// "[skip: needs_newer_cudnn] needs a newer cuDNN than the one loaded: <detail>"
inline std::string skip_message(SkipReason reason, std::string_view detail) {
  const SkipReasonText& r = text_of(reason);
  std::string message = "[skip: " + std::string(r.tag) + "] " + std::string(r.text);
  if (!detail.empty()) message += ": " + std::string(detail);
  return message;
}

// The listed reason a skip message carries, or nullopt (a bare GTEST_SKIP, or an unknown tag).
inline std::optional<SkipReason> listed_skip_reason(std::string_view message) {
  constexpr std::string_view open = "[skip: ";
  const std::size_t at = message.find(open);
  if (at == std::string_view::npos) return std::nullopt;
  const std::size_t close = message.find(']', at + open.size());
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view tag = message.substr(at + open.size(), close - at - open.size());
  for (const SkipReasonText& r : kSkipReasons)
    if (r.tag == tag) return r.reason;
  return std::nullopt;
}

// The skips of one run: counted by listed reason; the others named (each a failure).
class SkipTally {
 public:
  void record(const std::string& test, std::string_view skip_message) {
    if (const std::optional<SkipReason> reason = listed_skip_reason(skip_message)) {
      ++counts_[*reason];
      ++listed_;
    } else {
      unlisted_.push_back(test + ": " + std::string(skip_message));
    }
  }
  int listed() const { return listed_; }
  const std::vector<std::string>& unlisted() const { return unlisted_; }

  // "skipped with reason: 3 (needs a compute capability this GPU lacks: 2; ...: 1)", or
  // "skipped with reason: 0".
  std::string summary_line() const {
    std::string line = "skipped with reason: " + std::to_string(listed_);
    std::string parts;
    for (const SkipReasonText& r : kSkipReasons) {
      const auto found = counts_.find(r.reason);
      if (found == counts_.end()) continue;
      if (!parts.empty()) parts += "; ";
      parts += std::string(r.text) + ": " + std::to_string(found->second);
    }
    return parts.empty() ? line : line + " (" + parts + ")";
  }

 private:
  std::map<SkipReason, int> counts_;
  int listed_ = 0;
  std::vector<std::string> unlisted_;
};

}  // namespace attnprof::test

// Skips the current test (returns from the function it is written in) with a listed reason.
#define ATTNPROF_SKIP_BECAUSE(reason, detail) GTEST_SKIP() << ::attnprof::test::skip_message((reason), (detail))
