// property-tests/race_test.cpp — races between coordinators and collectors, on real threads:
//   - a coordinator paused before each of its writes while a collector, past the lease,
//     claims and reverses (or finishes) its transaction, then resumed: it ends aborted before
//     the commit point (no trace left: documents at their before images) and committed after;
//   - two collectors at once on transactions left by crashed coordinators;
//   - a collector looping beside healthy coordinators, which it must never touch.
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "harness.h"

namespace ptest {
namespace {
using litetx::ActionType;
using litetx::Code;

// Blocks the `pause_at`-th write (counted from 1) until Release().
class PauseStore final : public litetx::ForwardingStore {
 public:
  PauseStore(std::shared_ptr<litetx::Store> target, std::uint64_t pause_at)
      : ForwardingStore(std::move(target)), pause_at_(pause_at) {}
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    Gate();
    return ForwardingStore::Create(k, v);
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    Gate();
    return ForwardingStore::Replace(k, e, v);
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    Gate();
    return ForwardingStore::Erase(k, e);
  }
  // Waits until the coordinator is paused (true) or finished without pausing (false).
  bool WaitPaused(const bool& done_flag) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return paused_ || done_flag; });
    return paused_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  void NotifyDone() { cv_.notify_all(); }
  std::mutex mu_;

 private:
  void Gate() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++writes_ != pause_at_) return;
    paused_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  std::uint64_t pause_at_;
  std::uint64_t writes_ = 0;
  bool paused_ = false;
  bool released_ = false;
  std::condition_variable cv_;
};

// Index (1-based) of the commit flip among the coordinator's writes: record create, N applies.
std::uint64_t CommitFlipIndex(const Scenario& s) {
  std::uint64_t writes = 0;
  for (const ActSpec& a : s.acts) writes += a.type == ActionType::kCheck ? 0 : 1;
  return writes + 2;
}

TEST(RaceTest, CoordinatorPausedPastItsLeaseEndsAbortedOrCommittedNeverMixed) {
  std::mt19937_64 rng(20261122);
  std::printf("race seed 20261122\n");
  int cases = 0, aborted = 0, committed = 0;
  // Committing transactions of 2-3 documents with at least two writes (a record is used).
  for (int round = 0; round < 60; ++round) {
    Scenario s;
    int n = 2 + static_cast<int>(rng() % 2);
    for (int d = 0; d < n; ++d) {
      bool live = rng() % 3 != 0;
      s.docs.push_back(DocSpec{live ? Init::kLive : Init::kAbsent, static_cast<std::int64_t>(rng() % 50)});
      ActionType t = !live ? ActionType::kInsert
                           : std::vector<ActionType>{ActionType::kUpdate, ActionType::kAdjust,
                                                     ActionType::kDelete}[rng() % 3];
      s.acts.push_back(ActSpec{t, d, static_cast<std::int64_t>(rng() % 9) - 4, VersionMode::kNone});
    }
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t p = 1; p <= o.writes; ++p) {
      auto clock = std::make_shared<litetx::ManualClock>();
      auto mem = std::make_shared<litetx::MemoryStore>();
      SeedStore(*mem, s, clock);
      auto pause = std::make_shared<PauseStore>(mem, p);
      litetx::Transaction txn = BuildTxn(*mem, s);
      Code code = Code::kOk;
      bool done = false;
      std::thread coordinator([&] {
        litetx::Database db(pause, TestOptions(clock));
        Code c = db.Commit(txn).code();
        std::lock_guard<std::mutex> lock(pause->mu_);
        code = c;
        done = true;
        pause->NotifyDone();
      });
      ASSERT_TRUE(pause->WaitPaused(done));
      clock->Advance(kLease * 2);
      litetx::Collector gc(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(gc.RunOnce().ok());
      pause->Release();
      coordinator.join();
      ++cases;
      // Paused before the record exists: nothing to collect, the commit goes on. Paused
      // after it and up to the commit flip: the collector claimed it. After: it committed.
      bool before_point = p > 1 && p <= CommitFlipIndex(s);
      if (before_point) {
        ++aborted;
        EXPECT_EQ(code, Code::kAborted) << s.Describe() << " paused at write " << p;
      } else {
        ++committed;
        EXPECT_EQ(code, Code::kOk) << s.Describe() << " paused at write " << p;
      }
      litetx::Collector after(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(after.RunOnce().ok());
      EXPECT_EQ(CheckFinal(*mem, o, s.docs.size(), before_point ? 'b' : 'a'), "")
          << s.Describe() << " paused at write " << p;
    }
  }
  std::printf("paused-coordinator cases: %d (%d aborted by the collector, %d committed)\n", cases,
              aborted, committed);
}

TEST(RaceTest, TwoCollectorsAtOnceOnCrashedCoordinators) {
  std::mt19937_64 rng(777);
  int cases = 0;
  for (int round = 0; round < 300; ++round) {
    Scenario s;
    int n = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < n; ++d) {
      bool live = rng() % 3 != 0;
      s.docs.push_back(DocSpec{live ? Init::kLive : Init::kDeleted, static_cast<std::int64_t>(rng() % 50)});
      ActionType t = !live ? ActionType::kInsert
                           : std::vector<ActionType>{ActionType::kUpdate, ActionType::kAdjust,
                                                     ActionType::kDelete}[rng() % 3];
      s.acts.push_back(ActSpec{t, d, static_cast<std::int64_t>(rng() % 9) - 4, VersionMode::kNone});
    }
    Oracle o = RunOracle(s);
    std::uint64_t k = 1 + rng() % o.writes;
    auto clock = std::make_shared<litetx::ManualClock>();
    auto mem = std::make_shared<litetx::MemoryStore>();
    SeedStore(*mem, s, clock);
    litetx::FaultOptions f;
    f.crash_after_writes = k;
    try {
      litetx::Database db(std::make_shared<litetx::FaultInjectingStore>(mem, f), TestOptions(clock));
      (void)db.Commit(BuildTxn(*mem, s));
    } catch (const litetx::SimulatedCrash&) {
    }
    clock->Advance(kLease * 2);
    litetx::Collector a(mem, TestCollectorOptions(clock)), b(mem, TestCollectorOptions(clock));
    litetx::Status sa, sb;
    std::thread ta([&] { sa = a.RunOnce(); });
    std::thread tb([&] { sb = b.RunOnce(); });
    ta.join();
    tb.join();
    ASSERT_TRUE(sa.ok()) << sa.ToString();
    ASSERT_TRUE(sb.ok()) << sb.ToString();
    ASSERT_EQ(CheckFinal(*mem, o, s.docs.size(), 0), "") << s.Describe() << " crash_k=" << k;
    ++cases;
  }
  std::printf("two-collector cases: %d\n", cases);
}

TEST(RaceTest, CollectorBesideHealthyCoordinatorsTouchesNothing) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  auto clock = litetx::SystemClock();
  litetx::Options opts = TestOptions(clock);
  opts.lease = std::chrono::minutes(5);
  opts.busy_timeout = std::chrono::seconds(2);
  opts.retry_backoff = {std::chrono::milliseconds{1}, std::chrono::milliseconds{10}};
  litetx::Database db(mem, opts);
  constexpr int kAccounts = 6;
  for (int i = 0; i < kAccounts; ++i) {
    ASSERT_TRUE(db.Commit(litetx::Transaction().Insert("bank", "a" + std::to_string(i), {{"balance", 100}})).ok());
  }
  litetx::CollectorOptions co = TestCollectorOptions(clock);
  co.engine.lease = opts.lease;
  co.interval = std::chrono::milliseconds(0);
  litetx::Collector gc(mem, co);
  gc.Start();
  std::atomic<int> ok{0}, retryable{0}, other{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int i = 0; i < 250; ++i) {
        int from = static_cast<int>(rng() % kAccounts), to = static_cast<int>(rng() % (kAccounts - 1));
        if (to >= from) ++to;
        auto r = db.Commit(litetx::Transaction()
                               .Adjust("bank", "a" + std::to_string(from), {{"balance", -1}})
                               .Adjust("bank", "a" + std::to_string(to), {{"balance", 1}}));
        if (r.ok()) ++ok;
        else if (r.status().IsRetryableTransaction()) ++retryable;
        else ++other;
      }
    });
  }
  for (auto& t : workers) t.join();
  gc.Stop();
  auto stats = gc.stats();
  std::printf("beside healthy traffic: %d committed, %d retryable, %d other; gc runs %llu\n",
              ok.load(), retryable.load(), other.load(), static_cast<unsigned long long>(stats.runs));
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(stats.runs, 0u);
  EXPECT_EQ(stats.finished, 0u);
  EXPECT_EQ(stats.reversed, 0u);
  EXPECT_EQ(stats.failed, 0u);
  std::int64_t total = 0;
  for (int i = 0; i < kAccounts; ++i) {
    auto r = db.Read("bank", "a" + std::to_string(i));
    ASSERT_TRUE(r.ok());
    total += r->doc.at("balance").as_int64();
  }
  EXPECT_EQ(total, 100 * kAccounts);
  EXPECT_EQ(CheckClean(*mem), "");
}

}  // namespace
}  // namespace ptest
