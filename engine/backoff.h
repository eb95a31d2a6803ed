// engine/backoff.h — exponential backoff on an injectable clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "litetx/clock.h"
#include "litetx/options.h"

namespace litetx::engine {

class Backoff {
 public:
  Backoff(Clock& clock, const BackoffOptions& options)
      : clock_(clock), next_(options.initial), max_(options.max), start_ms_(clock.NowMillis()) {}

  // Sleeps for the current delay, then doubles it (capped).
  void Wait() {
    clock_.SleepFor(next_);
    next_ = std::min<std::chrono::milliseconds>(next_ * 2, max_);
  }
  // Milliseconds since this Backoff was created.
  std::int64_t ElapsedMillis() const { return clock_.NowMillis() - start_ms_; }

 private:
  Clock& clock_;
  std::chrono::milliseconds next_;
  std::chrono::milliseconds max_;
  std::int64_t start_ms_;
};

}  // namespace litetx::engine
