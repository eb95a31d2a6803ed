// engine/backoff.h — exponential backoff on an injectable clock. Elapsed time is monotonic
// time (Clock::MonotonicMicros): a step of the wall clock does not change it.
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
      : clock_(clock), next_(options.initial), max_(options.max), start_us_(clock.MonotonicMicros()) {}

  // Sleeps for the current delay, then doubles it (capped).
  void Wait() {
    clock_.SleepFor(next_);
    next_ = std::min<std::chrono::milliseconds>(next_ * 2, max_);
  }
  // Milliseconds since this Backoff was created, on monotonic time.
  std::int64_t ElapsedMillis() const { return (clock_.MonotonicMicros() - start_us_) / 1000; }

 private:
  Clock& clock_;
  std::chrono::milliseconds next_;
  std::chrono::milliseconds max_;
  std::int64_t start_us_;
};

}  // namespace litetx::engine
