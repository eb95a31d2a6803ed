// litetx/clock.h — time, injectable.
//
// The engine reads time and sleeps only through a Clock, so tests can run on virtual time. It
// reads two kinds of time:
//   * wall-clock time (NowMillis), for every time that is stored or compared across processes:
//     GC timestamps and leases, lock expiries, transaction ages, tombstone and marker times;
//   * monotonic time (MonotonicMicros), for every duration measured within one process:
//     Options::busy_timeout, Options::rollback_timeout, RunOptions::timeout and backoff.
// A step of the wall clock (an NTP correction, an operator setting the time) therefore moves
// leases and expiries, as it must for every process to agree, but does not stretch or shrink a
// wait or a timeout.
//
// Ownership: Options and CollectorOptions keep their Clock alive (shared_ptr).
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
  // Wall-clock time: milliseconds since the Unix epoch. It may jump forwards or backwards.
  virtual std::int64_t NowMillis() = 0;
  // Monotonic time: microseconds since an arbitrary origin fixed for the Clock object. Never
  // decreases and does not follow steps of the wall clock; only the difference between two
  // readings of one Clock means anything.
  virtual std::int64_t MonotonicMicros() = 0;
  // Blocks the calling thread for `d` (a virtual clock may instead advance its time).
  virtual void SleepFor(std::chrono::microseconds d) = 0;
};

// The real clock: std::chrono::system_clock for wall time, std::chrono::steady_clock for
// monotonic time, std::this_thread::sleep_for.
std::shared_ptr<Clock> SystemClock();

// A virtual clock for tests. Time moves only by Advance or SleepFor (which returns at once),
// and both move wall and monotonic time together. StepWall moves the wall clock alone.
class ManualClock final : public Clock {
 public:
  // Wall and monotonic time both start at `start_millis` (as milliseconds and microseconds).
  explicit ManualClock(std::int64_t start_millis = 1'700'000'000'000)
      : mono_us_(start_millis * 1000) {}
  std::int64_t NowMillis() override { return (mono_us_.load() + wall_step_us_.load()) / 1000; }
  std::int64_t MonotonicMicros() override { return mono_us_.load(); }
  void SleepFor(std::chrono::microseconds d) override { mono_us_ += d.count(); }
  void Advance(std::chrono::microseconds d) { mono_us_ += d.count(); }
  // Steps the wall clock by `d` (negative: back) without moving monotonic time, like an NTP
  // correction or an operator setting the system time.
  void StepWall(std::chrono::microseconds d) { wall_step_us_ += d.count(); }

 private:
  std::atomic<std::int64_t> mono_us_;
  std::atomic<std::int64_t> wall_step_us_{0};  // wall time minus monotonic time
};

}  // namespace litetx
