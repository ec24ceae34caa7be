#include "process/scoped_signal_handlers.hpp"

namespace attnprof {

ScopedSignalHandlers::ScopedSignalHandlers(Handler handler) {
  struct sigaction ours {};
  ours.sa_sigaction = handler;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_SIGINFO | SA_RESTART;
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    sigaction(kSignals[i], nullptr, &previous_[i]);
    // A signal ignored when we were started (nohup's SIGHUP) stays ignored: passing it on would
    // undo what the user asked for.
    if (previous_[i].sa_handler == SIG_IGN) continue;
    sigaction(kSignals[i], &ours, nullptr);
  }
}

ScopedSignalHandlers::~ScopedSignalHandlers() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

}  // namespace attnprof
