// litetx/clock.h — time, injectable.
//
// The engine reads wall-clock time (leases and GC timestamps are compared across processes)
// and sleeps (backoff) only through a Clock, so tests can run on virtual time.
//
// Thread safety: implementations must be safe to call from many threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace litetx {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual std::int64_t NowMillis() = 0;
  // Blocks the calling thread for `d` (a virtual clock may instead advance its time).
  virtual void SleepFor(std::chrono::microseconds d) = 0;
};

// The real clock: system_clock time, std::this_thread::sleep_for.
std::shared_ptr<Clock> SystemClock();

// A virtual clock for tests: time moves only by Advance or SleepFor, which returns at once.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_millis = 1'700'000'000'000) : now_us_(start_millis * 1000) {}
  std::int64_t NowMillis() override { return now_us_.load() / 1000; }
  void SleepFor(std::chrono::microseconds d) override { now_us_ += d.count(); }
  void Advance(std::chrono::microseconds d) { now_us_ += d.count(); }

 private:
  std::atomic<std::int64_t> now_us_;
};

}  // namespace litetx
