// engine/lease_keeper.h — keeps the leases of live work alive from a background thread.
//
// A coordinator's record carries a GC timestamp (gc_at): once a collector's clock passes it,
// the transaction may be claimed and rolled back. With a short lease, a crashed process frees
// its documents within seconds; so that a live but slow transaction (waiting on a busy
// document, a slow store, a long Database::Run holding pessimistic locks) is never taken for a
// dead one, the Database's LeaseKeeper calls every registered renewal once per `period`
// (Options::lease / 4) for as long as the registration lives. Renewals run on a small pool of
// worker threads, so that one renewal stuck in a slow store call does not hold up the others;
// a renewal still running when its next period comes is not started twice. A renewal
// decides itself whether anything is due (it extends only when a quarter of the lease has gone
// since its last extension) and must be short and thread-safe with its owner.
//
// Only a process that is dead or paused as a whole (every thread stopped: SIGSTOP, a frozen
// VM) stops renewing; then a collector may claim its work, and the claim is final
// (docs/protocol.md §6).
//
// Ownership: owned by the Database; registrations must not outlive it.
// Thread safety: Register and Handle destruction may be called from any thread. A Handle's
// destructor waits for a renewal of it that is running, and none starts afterwards.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/logger.h>

namespace litetx::engine {

class LeaseKeeper {
 public:
  // period: how often every renewal is called (real time). workers: renewals that may run at
  // once. REQUIRES: period > 0, workers > 0.
  LeaseKeeper(std::chrono::milliseconds period, spdlog::logger& log, int workers = 4);
  ~LeaseKeeper();  // stops and joins the threads
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  struct Entry;
  // Unregisters on destruction.
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&& other) noexcept : entry_(std::move(other.entry_)) {}
    Handle& operator=(Handle&& other) noexcept;
    ~Handle() { Reset(); }
    // Unregisters now: waits for a running renewal, and no further one starts.
    void Reset();
    // True while registered.
    explicit operator bool() const { return entry_ != nullptr; }

   private:
    friend class LeaseKeeper;
    explicit Handle(std::shared_ptr<Entry> e) : entry_(std::move(e)) {}
    std::shared_ptr<Entry> entry_;
  };

  // Calls `renew` every period until the handle is reset or destroyed. The threads start on
  // the first registration. An exception thrown by `renew` is logged and ends its registration.
  Handle Register(std::function<void()> renew);

  // Renewals called so far (for tests and stats).
  std::uint64_t renewals() const;

 private:
  void Schedule();  // the scheduler thread: queues every live registration once per period
  void Work();      // a worker thread: runs queued renewals

  const std::chrono::milliseconds period_;
  spdlog::logger& log_;
  const int workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the scheduler (stop)
  std::condition_variable work_cv_;  // wakes the workers (queue, stop)
  bool stop_ = false;
  std::vector<std::weak_ptr<Entry>> entries_;
  std::deque<std::shared_ptr<Entry>> queue_;
  std::uint64_t renewals_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace litetx::engine
