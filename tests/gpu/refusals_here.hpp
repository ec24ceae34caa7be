// The refusal policy (support/refusal_policy.hpp) on this machine: device 0, the loaded cuDNN,
// and `attnprof backends`' table of each backend here. A GPU test hands every refusal it meets
// to ATTNPROF_SKIP_OR_FAIL: an accepted one skips the test with its listed reason, any other
// fails it, naming the case and the refusal.
#pragma once

#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "commands/inventory.hpp"
#include "support/refusal_policy.hpp"
#include "support/skip_reasons.hpp"

namespace attnprof::test {

// Device 0 and the loaded cuDNN, read once.
const MachineFacts& machine_here();

// `attnprof backends`' row of the registered backend `name` on device 0, with `head_dim` among
// the head dims probed.
const BackendSupport& support_here(const std::string& name, int head_dim);

// nullopt when `backend` (registered as `name`) runs on device 0.
std::optional<RefusalVerdict> device_refusal_here(const std::string& name, const AttentionBackend& backend);

// nullopt when nothing was refused.
std::optional<RefusalVerdict> case_refusal_here(const std::string& name, const AttentionProblem& problem,
                                                const std::string& case_label, const Unsupported& refusal);

}  // namespace attnprof::test

// In a test body (it returns from the function it is written in): skips with the verdict's listed
// reason, or fails with its message; nothing when there was no refusal.
#define ATTNPROF_SKIP_OR_FAIL(verdict_expression)                                                      \
  do {                                                                                                 \
    if (const std::optional<::attnprof::test::RefusalVerdict> attnprof_verdict = (verdict_expression)) { \
      if (attnprof_verdict->accepted) ATTNPROF_SKIP_BECAUSE(attnprof_verdict->reason, attnprof_verdict->message); \
      GTEST_FAIL() << attnprof_verdict->message;                                                       \
    }                                                                                                  \
  } while (false)
