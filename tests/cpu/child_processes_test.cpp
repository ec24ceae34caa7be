// The child processes attnprof starts: the signals forwarded to them.
#include <climits>

#include <gtest/gtest.h>

#include "process/child_processes.hpp"

namespace attnprof {
namespace {

// Children come and go: the pids removed free their places for the next ones.
TEST(ChildProcesses, ForwardingTakesMoreChildrenOverTimeThanAtOnce) {
  ChildSignalForwarding forwarding;
  for (std::size_t i = 0; i < 2 * ChildSignalForwarding::kMaxChildren; ++i) {
    const pid_t unused = INT_MAX - static_cast<pid_t>(i);  // never signalled: no signal comes in this test
    ASSERT_NO_THROW(forwarding.add(unused));
    forwarding.remove(unused);
  }
}

}  // namespace
}  // namespace attnprof
