#include "process/scoped_signal_handlers.hpp"

namespace attnprof {

ScopedSignalHandlers::ScopedSignalHandlers(Handler handler) {
  struct sigaction ours {};
  ours.sa_sigaction = handler;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_SIGINFO | SA_RESTART;
  for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &ours, &previous_[i]);
}

ScopedSignalHandlers::~ScopedSignalHandlers() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

}  // namespace attnprof
