#include "engine/lease_keeper.h"

#include <algorithm>
#include <exception>

namespace litetx::engine {

struct LeaseKeeper::Entry {
  std::mutex mu;  // held while its renewal runs
  bool active = true;
  bool queued = false;  // waiting in the queue or running (guarded by the keeper's mu_)
  std::function<void()> renew;
};

LeaseKeeper::Handle& LeaseKeeper::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    Reset();
    entry_ = std::move(other.entry_);
  }
  return *this;
}

void LeaseKeeper::Handle::Reset() {
  if (!entry_) return;
  {
    std::lock_guard<std::mutex> lock(entry_->mu);
    entry_->active = false;
  }
  entry_.reset();
}

LeaseKeeper::LeaseKeeper(std::chrono::milliseconds period, spdlog::logger& log, int workers)
    : period_(period), log_(log), workers_(workers < 1 ? 1 : workers) {}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

LeaseKeeper::Handle LeaseKeeper::Register(std::function<void()> renew) {
  auto e = std::make_shared<Entry>();
  e->renew = std::move(renew);
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back(e);
  if (threads_.empty()) {
    threads_.emplace_back([this] { Schedule(); });
    for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
  }
  return Handle(std::move(e));
}

std::uint64_t LeaseKeeper::renewals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return renewals_;
}

void LeaseKeeper::Schedule() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, period_, [this] { return stop_; })) return;
    // Drop registrations that ended; queue the others unless still queued or running.
    std::erase_if(entries_, [](const std::weak_ptr<Entry>& w) { return w.expired(); });
    bool any = false;
    for (const auto& w : entries_) {
      auto e = w.lock();
      if (!e || e->queued) continue;
      e->queued = true;
      queue_.push_back(std::move(e));
      any = true;
    }
    if (any) work_cv_.notify_all();
  }
}

void LeaseKeeper::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::shared_ptr<Entry> e = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    bool called = false;
    {
      std::lock_guard<std::mutex> entry_lock(e->mu);
      if (e->active) {
        try {
          e->renew();
          called = true;
        } catch (const std::exception& ex) {
          log_.error("lease renewal failed: {}; no longer renewed", ex.what());
          e->active = false;
        }
      }
    }
    lock.lock();
    e->queued = false;
    if (called) ++renewals_;
  }
}

}  // namespace litetx::engine
