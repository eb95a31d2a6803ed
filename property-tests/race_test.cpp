// property-tests/race_test.cpp — races between coordinators and collectors, on real threads:
//   - a coordinator paused before each of its writes while a collector, past the lease,
//     claims and reverses (or finishes) its transaction, then resumed: it ends aborted before
//     the commit point (no trace left: documents at their before images) and committed after;
//   - two collectors at once on transactions left by crashed coordinators;
//   - a collector looping beside healthy coordinators, which it must never touch.
#include <condition_variable>
#include <cstdio>
#include <functional>
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

// Calls `after` once each write returns from the target (whatever its result), before the
// result goes back to the caller: the caller "pauses" for as long as `after` runs.
class AfterWriteStore final : public litetx::ForwardingStore {
 public:
  AfterWriteStore(std::shared_ptr<litetx::Store> target, std::function<void()> after)
      : ForwardingStore(std::move(target)), after_(std::move(after)) {}
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    auto r = ForwardingStore::Create(k, v);
    after_();
    return r;
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    auto r = ForwardingStore::Replace(k, e, v);
    after_();
    return r;
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    auto r = ForwardingStore::Erase(k, e);
    after_();
    return r;
  }

 private:
  std::function<void()> after_;
};
bool paused_done_ = false;  // the pause of the current case has run

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

// Every coordinator write k, in turn, lands but loses its reply; before the coordinator
// re-reads, it pauses past its lease while a collector claims and repairs — crashing after
// each possible number j of its own writes, or not at all. Then the coordinator resumes. What
// Commit reports must match the store after a healthy collector (OK: after; an error other
// than kUnknown: before), and Database::Outcome, once it says committed or aborted, never
// changes again.
TEST(RaceTest, LostReplyThenPausePastTheLeaseAtEveryWrite) {
  std::mt19937_64 rng(20261124);
  std::printf("lost-reply race seed 20261124\n");
  int cases = 0, ok_after = 0, failed_before = 0, unknown = 0, collector_crashes = 0;
  for (int round = 0; round < 40; ++round) {
    Scenario s;
    int n = 2 + static_cast<int>(rng() % 2);
    for (int d = 0; d < n; ++d) {
      Init init = std::vector<Init>{Init::kLive, Init::kLive, Init::kAbsent, Init::kDeleted}[rng() % 4];
      s.docs.push_back(DocSpec{init, static_cast<std::int64_t>(rng() % 50)});
      ActionType t = init != Init::kLive
                         ? ActionType::kInsert
                         : std::vector<ActionType>{ActionType::kUpdate, ActionType::kAdjust,
                                                   ActionType::kDelete}[rng() % 3];
      s.acts.push_back(ActSpec{t, d, static_cast<std::int64_t>(rng() % 9) - 4, VersionMode::kNone});
    }
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t k = 1; k <= o.writes; ++k) {
      // The collector dies after its j-th write; the loop ends once a collector finished
      // without reaching its crash point (that case is the uncrashed run).
      for (std::uint64_t j = 1;; ++j) {
        auto clock = std::make_shared<litetx::ManualClock>();
        auto mem = std::make_shared<litetx::MemoryStore>();
        SeedStore(*mem, s, clock);
        std::uint64_t writes = 0;
        bool fired = false, gc_crashed = false;
        std::string during;  // the record's state seen while the coordinator was paused
        litetx::FaultOptions f;
        f.rule = [&](litetx::StoreOp op, const litetx::Key&, std::uint64_t) {
          bool write = op == litetx::StoreOp::kCreate || op == litetx::StoreOp::kReplace ||
                       op == litetx::StoreOp::kErase;
          if (!write || fired || ++writes != k) return litetx::Fault::kNone;
          fired = true;
          return litetx::Fault::kLostReply;
        };
        auto lossy = std::make_shared<litetx::FaultInjectingStore>(mem, f);
        // Runs right after the k-th write landed, before its (lost) reply reaches the
        // coordinator: the pause past the lease, and a collector.
        auto paused = std::make_shared<AfterWriteStore>(lossy, [&] {
          if (!fired || paused_done_) return;
          paused_done_ = true;
          clock->Advance(kLease * 2);
          litetx::FaultOptions cf;
          cf.crash_after_writes = j;
          litetx::Collector gc(std::make_shared<litetx::FaultInjectingStore>(mem, cf),
                               TestCollectorOptions(clock));
          try {
            (void)gc.RunOnce();
          } catch (const litetx::SimulatedCrash&) {
            gc_crashed = true;
          }
          // What Database::Outcome would answer now, while the coordinator is still paused.
          auto page = mem->Scan(litetx::kTransactionsCollection, "", 10);
          if (page.ok() && page->documents.size() == 1) {
            const boost::json::value* st = page->documents[0].second.value.if_contains("state");
            if (st != nullptr && st->is_string()) during = std::string(st->get_string());
          }
        });
        paused_done_ = false;
        litetx::Database db(paused, TestOptions(clock));
        auto r = db.Commit(BuildTxn(*mem, s));
        ASSERT_TRUE(fired) << s.Describe() << " k=" << k;
        const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
        litetx::Database reader(mem, TestOptions(clock));
        auto first = reader.Outcome(id);
        ASSERT_TRUE(first.ok());
        clock->Advance(kLease * 4);
        litetx::Collector healthy(mem, TestCollectorOptions(clock));
        ASSERT_TRUE(healthy.RunOnce().ok());
        auto last = reader.Outcome(id);
        ASSERT_TRUE(last.ok());
        const std::string where = s.Describe() + " lost reply of write " + std::to_string(k) +
                                  ", collector crash after " + std::to_string(j) + ": " +
                                  r.status().ToString();
        if (during == "aborted") {
          EXPECT_EQ(*first, litetx::TxnOutcome::kAborted) << where << ": reported aborted, then not";
          EXPECT_FALSE(r.ok()) << where << ": committed after a collector had aborted it";
        }
        if (during == "committed") {
          EXPECT_EQ(*first, litetx::TxnOutcome::kCommitted) << where;
        }
        if (*first == litetx::TxnOutcome::kCommitted || *first == litetx::TxnOutcome::kAborted) {
          EXPECT_EQ(*last, *first) << where << ": outcome changed after it was reported";
        }
        char must = 0;
        if (r.ok()) {
          must = 'a';
          ++ok_after;
        } else if (r.code() != Code::kUnknown) {
          must = 'b';
          ++failed_before;
        } else {
          ++unknown;
          // One-action transactions have no record: kNotFound; settle by the last writer.
          if (*last == litetx::TxnOutcome::kCommitted) must = 'a';
          if (*last == litetx::TxnOutcome::kAborted) must = 'b';
        }
        ASSERT_EQ(CheckFinal(*mem, o, s.docs.size(), must), "") << where;
        ++cases;
        collector_crashes += gc_crashed ? 1 : 0;
        if (!gc_crashed) break;
      }
    }
  }
  std::printf("lost-reply pause cases: %d (OK and after: %d, failed and before: %d, unknown: %d; "
              "collector crashed in %d)\n",
              cases, ok_after, failed_before, unknown, collector_crashes);
  EXPECT_GT(failed_before, 0);
  EXPECT_GT(ok_after, 0);
  EXPECT_GT(collector_crashes, 0);
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
