// Handlers for the signals that end a run (SIGINT, SIGTERM, SIGHUP), installed for a scope and
// the previous ones restored after it: how `profile` and `run --devices` pass a signal sent to
// attnprof on to the processes it started.
#pragma once

#include <signal.h>

#include <array>

namespace attnprof {

class ScopedSignalHandlers {
 public:
  using Handler = void (*)(int, siginfo_t*, void*);  // SA_SIGINFO form: si_code tells kill() from the tty
  explicit ScopedSignalHandlers(Handler handler);
  ~ScopedSignalHandlers();
  ScopedSignalHandlers(const ScopedSignalHandlers&) = delete;
  ScopedSignalHandlers& operator=(const ScopedSignalHandlers&) = delete;

  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};

 private:
  std::array<struct sigaction, kSignals.size()> previous_{};
};

}  // namespace attnprof
