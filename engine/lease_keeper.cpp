#include "engine/lease_keeper.h"

#include <algorithm>
#include <exception>

namespace litetx::engine {

struct LeaseKeeper::Entry {
  std::mutex mu;  // held while its renewal runs
  bool active = true;
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

LeaseKeeper::LeaseKeeper(std::chrono::milliseconds period, spdlog::logger& log)
    : period_(period), log_(log) {}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

LeaseKeeper::Handle LeaseKeeper::Register(std::function<void()> renew) {
  auto e = std::make_shared<Entry>();
  e->renew = std::move(renew);
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_back(e);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  return Handle(std::move(e));
}

std::uint64_t LeaseKeeper::renewals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return renewals_;
}

void LeaseKeeper::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, period_, [this] { return stop_; })) return;
    // Drop registrations that ended; renew the others without holding the registry lock.
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [](const std::weak_ptr<Entry>& w) { return w.expired(); }),
                   entries_.end());
    std::vector<std::shared_ptr<Entry>> live;
    live.reserve(entries_.size());
    for (const auto& w : entries_) {
      if (auto e = w.lock()) live.push_back(std::move(e));
    }
    lock.unlock();
    std::uint64_t called = 0;
    for (const auto& e : live) {
      std::lock_guard<std::mutex> entry_lock(e->mu);
      if (!e->active) continue;
      try {
        e->renew();
        ++called;
      } catch (const std::exception& ex) {
        log_.error("lease renewal failed: {}; no longer renewed", ex.what());
        e->active = false;
      }
    }
    live.clear();
    lock.lock();
    renewals_ += called;
  }
}

}  // namespace litetx::engine
