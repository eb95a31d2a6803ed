// property-tests/race_test.cpp — races between coordinators and collectors, on real threads,
// made deterministic by holding one party at a chosen store write while the other runs:
//   - a coordinator held before each of its writes while a collector, past the lease, claims
//     and reverses (or finishes) its transaction, then released: it ends aborted before the
//     commit point (documents at their before images) and committed after;
//   - a lost reply at every coordinator write, and a collector (crashing after each of its
//     writes in turn) during the pause that follows;
//   - two collectors at once on transactions left by crashed coordinators: one held at each
//     of its writes (before it, after it landed, after it landed with its reply lost) while the
//     other runs to completion; and one held at each of its writes while the other crashes
//     after each of its writes in turn, or completes;
//   - a collector looping beside healthy coordinators, which it must never touch.
// Built into litetx_race_tests (no RapidCheck), which the ThreadSanitizer run also builds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/record.h"
#include "harness.h"

namespace ptest {
namespace {
using litetx::ActionType;
using litetx::Code;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;

// More store writes than any collector or coordinator run here makes: the loops over "the
// i-th write" stop there at the latest (and fail).
constexpr std::uint64_t kMaxWrites = 64;

// ThreadSanitizer makes every case about ten times slower: its build runs an eighth of the
// rounds (the same kinds of interleavings over fewer random transactions), and says so.
#if defined(__SANITIZE_THREAD__)
constexpr int kRoundDivisor = 8;
#else
constexpr int kRoundDivisor = 1;
#endif
int Rounds(int n) {
  if (kRoundDivisor > 1) std::printf("(ThreadSanitizer build: 1/%d of the rounds)\n", kRoundDivisor);
  return std::max(1, n / kRoundDivisor);
}

enum class Hold : std::uint8_t {
  kBefore,     // the write has not reached the store yet
  kLanded,     // the write landed; its reply has not reached the caller yet
  kLostReply,  // the write landed; the caller then gets kUnknown instead of its reply
};
const char* HoldName(Hold h) {
  switch (h) {
    case Hold::kBefore: return "before";
    case Hold::kLanded: return "after-landed";
    case Hold::kLostReply: return "lost-reply";
  }
  return "?";
}

// Holds the thread making the `at`-th write (Create, Replace or Erase, counted from 1) until
// Release(), at the point `hold` names. Every write from the held one on is recorded with the
// result the store gave (before a lost reply replaced it).
class HoldingStore final : public litetx::ForwardingStore {
 public:
  struct Write {
    litetx::Key key;
    Code code;
    bool after_release;  // sent to the store after Release()
  };

  HoldingStore(std::shared_ptr<litetx::Store> target, std::uint64_t at, Hold hold)
      : ForwardingStore(std::move(target)), at_(at), hold_(hold) {}

  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    return Wrap(k, [&] { return ForwardingStore::Create(k, v); });
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    return Wrap(k, [&] { return ForwardingStore::Replace(k, e, v); });
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    auto r = Wrap(k, [&]() -> litetx::Result<litetx::Revision> {
      litetx::Status s = ForwardingStore::Erase(k, e);
      if (!s.ok()) return s;
      return litetx::Revision{0};
    });
    return r.ok() ? litetx::Status::Ok() : r.status();
  }

  // Waits until the caller is held (true) or has called Finished() without being held (false).
  // A caller that does neither within a minute is stuck: the test binary aborts rather than
  // hang until the ctest timeout.
  bool WaitHeldOrFinished() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::minutes(1), [&] { return held_ || finished_; })) {
      std::fprintf(stderr, "the held thread neither reached write %llu nor finished in 1 min\n",
                   static_cast<unsigned long long>(at_));
      std::abort();
    }
    return held_;
  }
  // The caller's thread is done with the store (it was never held, or it was released).
  void Finished() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Valid once the caller's thread has been joined.
  const std::vector<Write>& writes() const { return log_; }
  const litetx::Key& held_key() const { return held_key_; }

 private:
  litetx::Result<litetx::Revision> Wrap(const litetx::Key& k,
                                        const std::function<litetx::Result<litetx::Revision>()>& write) {
    std::uint64_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = ++count_;
    }
    if (n == at_ && hold_ == Hold::kBefore) Wait(k);
    auto r = write();
    if (n >= at_) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(Write{k, r.code(), released_});
    }
    if (n == at_ && hold_ != Hold::kBefore) {
      Wait(k);
      if (hold_ == Hold::kLostReply && r.ok()) {
        return litetx::Status::Unknown("lost reply (the write landed)");
      }
    }
    return r;
  }
  void Wait(const litetx::Key& k) {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    held_key_ = k;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }

  const std::uint64_t at_;
  const Hold hold_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t count_ = 0;
  bool held_ = false, released_ = false, finished_ = false;
  litetx::Key held_key_;
  std::vector<Write> log_;
};

// Runs `body` on its own thread, which calls store->Finished() when `body` returns. Join()
// (also run by the destructor, so that a failed assertion never leaves the thread held)
// releases the store first.
class Runner {
 public:
  Runner(std::shared_ptr<HoldingStore> store, std::function<void()> body)
      : store_(std::move(store)), thread_([store = store_, body = std::move(body)] {
          body();
          store->Finished();
        }) {}
  ~Runner() { Join(); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  void Join() {
    if (!thread_.joinable()) return;
    store_->Release();
    thread_.join();
  }

 private:
  std::shared_ptr<HoldingStore> store_;
  std::thread thread_;
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

// The one ActiveTransaction record of a scenario store, if there is one.
std::optional<TxnRecord> TheRecord(litetx::Store& store) {
  auto page = store.Scan(litetx::kTransactionsCollection, "", 10);
  if (!page.ok() || page->documents.empty()) return std::nullopt;
  auto r = litetx::engine::DecodeRecord(page->documents[0].second.value);
  if (!r.ok()) return std::nullopt;
  return *r;
}

// "" if no version in `now` is below the one in `then`.
std::string VersionsUp(const std::vector<std::uint64_t>& then, const std::vector<std::uint64_t>& now,
                       const char* when) {
  for (std::size_t i = 0; i < then.size(); ++i) {
    if (now[i] < then[i]) {
      return Id(static_cast<int>(i)) + " version went down " + when + ": " + std::to_string(then[i]) +
             " -> " + std::to_string(now[i]);
    }
  }
  return "";
}

// "" if the record moved forward only: once out of pending its state stays, once a marker it
// stays one (claim finality, docs/protocol.md §6.4).
std::string RecordForward(const std::optional<TxnRecord>& then, const std::optional<TxnRecord>& now,
                          const char* when) {
  if (!then) return "";
  if (!now) return std::string("record vanished ") + when;
  if (then->state != TxnState::kPending && now->state != then->state) {
    return std::string("record went from ") + litetx::engine::TxnStateName(then->state) + " to " +
           litetx::engine::TxnStateName(now->state) + " " + when;
  }
  if (then->done && !now->done) return std::string("record stopped being a marker ") + when;
  return "";
}

// A random committing transaction of `min_docs` to `max_docs` documents: a live document is
// updated, adjusted or deleted, one that starts as `not_live` (absent or a tombstone) inserted.
Scenario RandomCommit(std::mt19937_64& rng, int min_docs, int max_docs, Init not_live) {
  Scenario s;
  int n = min_docs + static_cast<int>(rng() % static_cast<std::uint64_t>(max_docs - min_docs + 1));
  for (int d = 0; d < n; ++d) {
    bool live = rng() % 3 != 0;
    s.docs.push_back(DocSpec{live ? Init::kLive : not_live, static_cast<std::int64_t>(rng() % 50)});
    ActionType t = !live ? ActionType::kInsert
                         : std::vector<ActionType>{ActionType::kUpdate, ActionType::kAdjust,
                                                   ActionType::kDelete}[rng() % 3];
    s.acts.push_back(ActSpec{t, d, static_cast<std::int64_t>(rng() % 9) - 4, VersionMode::kNone});
  }
  return s;
}

// For the collector races: 1-4 documents, live or tombstones.
Scenario CollectorScenario(std::mt19937_64& rng) { return RandomCommit(rng, 1, 4, Init::kDeleted); }

// For the coordinator races: 2-3 documents, live or absent; at least two writes, so a record
// is used.
Scenario TwoOrThreeDocumentCommit(std::mt19937_64& rng) { return RandomCommit(rng, 2, 3, Init::kAbsent); }

// A store seeded with `s` whose coordinator crashed right after its `k`-th write, the clock
// then moved past the lease. `must` is the side the collectors must settle it on, read from the
// store (not derived from k): after if the commit point landed, before otherwise.
struct Crashed {
  std::shared_ptr<litetx::ManualClock> clock = std::make_shared<litetx::ManualClock>();
  std::shared_ptr<litetx::MemoryStore> mem = std::make_shared<litetx::MemoryStore>();
  char must = 0;
  std::optional<TxnRecord> record;
  std::vector<std::uint64_t> versions;
};
Crashed CrashCoordinator(const Scenario& s, std::uint64_t k) {
  Crashed c;
  SeedStore(*c.mem, s, c.clock);
  litetx::FaultOptions f;
  f.crash_after_writes = k;
  try {
    litetx::Database db(std::make_shared<litetx::FaultInjectingStore>(c.mem, f), TestOptions(c.clock));
    (void)db.Commit(BuildTxn(*c.mem, s));
  } catch (const litetx::SimulatedCrash&) {
  }
  c.record = TheRecord(*c.mem);
  // No record after a crash at write k >= 1: the one-action fast path, whose write is its
  // commit point.
  c.must = !c.record ? 'a' : c.record->state == TxnState::kCommitted ? 'a' : 'b';
  c.versions = RawVersions(*c.mem, s.docs.size());
  c.clock->Advance(kLease * 2);
  return c;
}

litetx::CollectorOptions NamedCollector(std::shared_ptr<litetx::Clock> clock, const char* name) {
  litetx::CollectorOptions o = TestCollectorOptions(std::move(clock));
  o.name = name;
  return o;
}

TEST(RaceTest, CoordinatorPausedPastItsLeaseEndsAbortedOrCommittedNeverMixed) {
  std::mt19937_64 rng(20261122);
  std::printf("race seed 20261122\n");
  int cases = 0, aborted = 0, finished_by_gc = 0, untouched = 0, refused = 0;
  // Committing transactions of 2-3 documents with at least two writes (a record is used).
  for (int round = 0, rounds = Rounds(60); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t p = 1; p <= o.writes; ++p) {
      const std::string where = s.Describe() + " held before write " + std::to_string(p);
      auto clock = std::make_shared<litetx::ManualClock>();
      auto mem = std::make_shared<litetx::MemoryStore>();
      SeedStore(*mem, s, clock);
      auto hold = std::make_shared<HoldingStore>(mem, p, Hold::kBefore);
      litetx::Transaction txn = BuildTxn(*mem, s);
      Code code = Code::kOk;
      Runner coordinator(hold, [&] {
        litetx::Database db(hold, TestOptions(clock));
        code = db.Commit(txn).code();
      });
      ASSERT_TRUE(hold->WaitHeldOrFinished()) << where;
      // Held: what the store says now decides what the collector must do.
      const std::optional<TxnRecord> at_pause = TheRecord(*mem);
      clock->Advance(kLease * 2);
      litetx::Collector gc(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(gc.RunOnce().ok()) << where;
      const litetx::CollectorStats st = gc.stats();
      coordinator.Join();
      ++cases;
      // Held before the record exists: nothing to collect, the commit goes on. Held while the
      // record is pending: the collector claims and reverses it. Held after the commit flip:
      // the collector finishes it, and the coordinator still reports OK.
      char must;
      if (!at_pause) {
        ++untouched;
        must = 'a';
        EXPECT_EQ(code, Code::kOk) << where;
        EXPECT_EQ(st.finished + st.reversed, 0u) << where;
      } else if (at_pause->state == TxnState::kPending) {
        ++aborted;
        must = 'b';
        EXPECT_EQ(code, Code::kAborted) << where;
        EXPECT_EQ(st.reversed, 1u) << where;
      } else {
        ++finished_by_gc;
        must = 'a';
        EXPECT_EQ(at_pause->state, TxnState::kCommitted) << where;
        EXPECT_EQ(code, Code::kOk) << where;
        EXPECT_EQ(st.finished, 1u) << where;
      }
      // Once the collector acted, nothing the coordinator sends after its release may land:
      // the held write meets a claimed record, a fenced, reversed or finished document, or a
      // marker.
      bool any_landed = false;
      for (const HoldingStore::Write& w : hold->writes()) any_landed |= w.code == Code::kOk;
      if (at_pause) {
        EXPECT_FALSE(any_landed) << where << ": a write of the released coordinator landed";
        ASSERT_FALSE(hold->writes().empty()) << where;
        EXPECT_EQ(hold->writes()[0].code, Code::kConflict) << where;
        refused += hold->writes()[0].code == Code::kConflict ? 1 : 0;
      }
      litetx::Collector after(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(after.RunOnce().ok()) << where;
      EXPECT_EQ(after.stats().finished + after.stats().reversed, 0u) << where << ": left work behind";
      EXPECT_EQ(CheckFinal(*mem, o, s.docs.size(), must), "") << where;
    }
  }
  std::printf("paused-coordinator cases: %d (%d aborted and reversed by the collector, %d finished "
              "by the collector and reported OK, %d held before the record existed); the held "
              "write was refused with kConflict in %d\n",
              cases, aborted, finished_by_gc, untouched, refused);
  EXPECT_GT(aborted, 0);
  EXPECT_GT(finished_by_gc, 0);
  EXPECT_GT(untouched, 0);
  EXPECT_EQ(refused, aborted + finished_by_gc);
}

// The reverse interleaving: the coordinator is held before each of its writes once its record
// exists and is still pending; past its lease a collector starts the repair and is held in
// turn right after each of its own writes landed; the coordinator is released and runs to
// its end while the collector is held; then the collector is released. The collector's first
// write is its claim, so whatever step it is held at, the coordinator must end kAborted (it
// may still reverse its own writes meanwhile) with every document at its before image, and
// the record aborted.
TEST(RaceTest, CollectorHeldMidRepairWhileItsCoordinatorResumes) {
  std::mt19937_64 rng(20261125);
  std::printf("held-collector-resumed-coordinator seed 20261125\n");
  int cases = 0;
  for (int round = 0, rounds = Rounds(30); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    // Write 1 creates the record; write commit_write is the flip. Held before writes 2..flip,
    // the record is pending.
    for (std::uint64_t p = 2; p <= o.commit_write; ++p) {
      for (std::uint64_t i = 1; i <= kMaxWrites; ++i) {
        const std::string where = s.Describe() + " coordinator held before write " + std::to_string(p) +
                                  ", collector held after its write " + std::to_string(i);
        auto clock = std::make_shared<litetx::ManualClock>();
        auto mem = std::make_shared<litetx::MemoryStore>();
        SeedStore(*mem, s, clock);
        auto coord_hold = std::make_shared<HoldingStore>(mem, p, Hold::kBefore);
        litetx::Transaction txn = BuildTxn(*mem, s);
        Code code = Code::kOk;
        Runner coordinator(coord_hold, [&] {
          litetx::Database db(coord_hold, TestOptions(clock));
          code = db.Commit(txn).code();
        });
        ASSERT_TRUE(coord_hold->WaitHeldOrFinished()) << where;
        const std::optional<TxnRecord> at_pause = TheRecord(*mem);
        ASSERT_TRUE(at_pause && at_pause->state == TxnState::kPending) << where;
        clock->Advance(kLease * 2);
        auto gc_hold = std::make_shared<HoldingStore>(mem, i, Hold::kLanded);
        litetx::Status gc_status;
        Runner collector(gc_hold, [&] {
          litetx::Collector gc(gc_hold, TestCollectorOptions(clock));
          gc_status = gc.RunOnce();
        });
        if (!gc_hold->WaitHeldOrFinished()) {
          // The collector made fewer than i writes: every step has been held at.
          collector.Join();
          EXPECT_TRUE(gc_status.ok()) << where << ": " << gc_status.ToString();
          EXPECT_GT(i, 1u) << where << ": the collector wrote nothing";
          break;
        }
        ++cases;
        // The collector is held with i of its writes landed; the coordinator runs to its end.
        coordinator.Join();
        const std::optional<TxnRecord> mid = TheRecord(*mem);
        collector.Join();
        EXPECT_TRUE(gc_status.ok()) << where << ": " << gc_status.ToString();
        EXPECT_EQ(code, Code::kAborted) << where;
        ASSERT_TRUE(mid.has_value()) << where;
        EXPECT_EQ(mid->state, TxnState::kAborted) << where << ": the record while the collector was held";
        litetx::Collector healthy(mem, TestCollectorOptions(clock));
        ASSERT_TRUE(healthy.RunOnce().ok()) << where;
        EXPECT_EQ(CheckFinal(*mem, o, s.docs.size(), 'b'), "") << where;
        auto record = TheRecord(*mem);
        ASSERT_TRUE(record.has_value()) << where;
        EXPECT_EQ(record->state, TxnState::kAborted) << where;
      }
    }
  }
  std::printf("held-collector-resumed-coordinator cases: %d (each must end aborted and before)\n", cases);
  EXPECT_GT(cases, 0);
}

// Every coordinator write k, in turn, lands but loses its reply; before the coordinator
// re-reads, it pauses past its lease while a collector claims and repairs — crashing after
// each possible number j of its own writes, or not at all. Then the coordinator resumes. What
// Commit reports must match the store after a healthy collector (OK: after; an error other
// than kUnknown: before), and Database::Outcome, once it says committed or aborted, never
// changes again. The pause runs inside the coordinator's call (no second thread is needed).
TEST(RaceTest, LostReplyThenPausePastTheLeaseAtEveryWrite) {
  std::mt19937_64 rng(20261124);
  std::printf("lost-reply race seed 20261124\n");
  int cases = 0, ok_after = 0, failed_before = 0, unknown = 0, collector_crashes = 0;
  std::map<std::string, int> seen_during;
  for (int round = 0, rounds = Rounds(40); round < rounds; ++round) {
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
        ASSERT_LE(j, kMaxWrites) << s.Describe() << " k=" << k << ": the collector never finished";
        auto clock = std::make_shared<litetx::ManualClock>();
        auto mem = std::make_shared<litetx::MemoryStore>();
        SeedStore(*mem, s, clock);
        std::uint64_t writes = 0;
        bool fired = false, paused = false, gc_crashed = false;
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
        auto hook = [&] {
          if (!fired || paused) return;
          paused = true;
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
          if (auto rec = TheRecord(*mem)) during = litetx::engine::TxnStateName(rec->state);
        };
        litetx::Database db(std::make_shared<AfterWriteStore>(lossy, hook), TestOptions(clock));
        auto r = db.Commit(BuildTxn(*mem, s));
        db.Flush();  // a write after the flip is the finisher's: it may still be on its way
        ASSERT_TRUE(fired && paused) << s.Describe() << " k=" << k;
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
        // Every case has a record by the pause (its create is the first write), so the state
        // seen during it is always known.
        ASSERT_FALSE(during.empty()) << where << ": no record during the pause";
        ++seen_during[during];
        if (during == "aborted") {
          EXPECT_EQ(*first, litetx::TxnOutcome::kAborted) << where << ": reported aborted, then not";
          EXPECT_FALSE(r.ok()) << where << ": committed after a collector had aborted it";
        }
        if (during == "committed") {
          EXPECT_EQ(*first, litetx::TxnOutcome::kCommitted) << where;
          EXPECT_TRUE(r.ok()) << where << ": committed during the pause, then reported failed";
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
              "collector crashed in %d); record seen during the pause:",
              cases, ok_after, failed_before, unknown, collector_crashes);
  for (const auto& [state, count] : seen_during) std::printf(" %s %d", state.c_str(), count);
  std::printf("\n");
  EXPECT_GT(failed_before, 0);
  EXPECT_GT(ok_after, 0);
  EXPECT_GT(collector_crashes, 0);
  EXPECT_GT(seen_during["aborted"], 0);
  EXPECT_GT(seen_during["committed"], 0);
}

// Two collectors on one transaction left by a crashed coordinator, the race forced: collector
// A is held at its i-th write (before it, once it landed, or once it landed with its reply
// lost) while collector B runs to completion; then A is released. For every coordinator crash
// point k, every hold mode and every i that A reaches. Both runs must return OK; the end state
// (already after B, and after A) must be all before or all after as the crash point decides,
// clean, with no version going down at any step and the record only moving forward; at most
// one of them counts it settled (B whenever A was held mid-repair); and once B has settled it,
// nothing A sends after its release may land.
TEST(RaceTest, TwoCollectorsAtOnceOnCrashedCoordinators) {
  std::mt19937_64 rng(777);
  std::printf("two-collector seed 777\n");
  int cases = 0, held = 0, held_mid_repair = 0, held_after_marker = 0, alone = 0;
  int b_settled = 0, a_claim_lost = 0, a_doc_write_lost = 0, a_marker_lost = 0, a_no_write = 0;
  int marker_reply_lost = 0;
  for (int round = 0, rounds = Rounds(24); round < rounds; ++round) {
    Scenario s = CollectorScenario(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t k = 1; k <= o.writes; ++k) {
      for (Hold mode : {Hold::kBefore, Hold::kLanded, Hold::kLostReply}) {
        for (std::uint64_t i = 1;; ++i) {
          ASSERT_LE(i, kMaxWrites) << s.Describe() << ": collector A never finished";
          const std::string where = s.Describe() + " coordinator crash after write " +
                                    std::to_string(k) + ", A held " + HoldName(mode) +
                                    " its write " + std::to_string(i);
          Crashed c = CrashCoordinator(s, k);
          auto hold = std::make_shared<HoldingStore>(c.mem, i, mode);
          litetx::Collector a(hold, NamedCollector(c.clock, "gc-a"));
          litetx::Status sa;
          Runner ta(hold, [&] { sa = a.RunOnce(); });
          const bool was_held = hold->WaitHeldOrFinished();
          ++cases;
          if (!was_held) {  // A never reaches write i: it settled everything alone
            ta.Join();
            ++alone;
            ASSERT_TRUE(sa.ok()) << where << ": " << sa.ToString();
            ASSERT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where;
            ASSERT_EQ(VersionsUp(c.versions, RawVersions(*c.mem, s.docs.size()), "under A alone"), "")
                << where;
            break;
          }
          ++held;
          const std::optional<TxnRecord> at_pause = TheRecord(*c.mem);
          const std::vector<std::uint64_t> v_pause = RawVersions(*c.mem, s.docs.size());
          ASSERT_TRUE(at_pause.has_value()) << where;  // A writes only when there is a record
          const bool mid_repair = !at_pause->done;
          held_mid_repair += mid_repair ? 1 : 0;
          held_after_marker += mid_repair ? 0 : 1;

          litetx::Collector b(c.mem, NamedCollector(c.clock, "gc-b"));
          const litetx::Status sb = b.RunOnce();
          ASSERT_TRUE(sb.ok()) << where << ": B " << sb.ToString();
          const std::optional<TxnRecord> after_b = TheRecord(*c.mem);
          const std::vector<std::uint64_t> v_b = RawVersions(*c.mem, s.docs.size());
          // B alone took it to the end while A was held.
          EXPECT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where << " (after B)";

          ta.Join();
          ASSERT_TRUE(sa.ok()) << where << ": A " << sa.ToString();
          const std::vector<std::uint64_t> v_a = RawVersions(*c.mem, s.docs.size());
          EXPECT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where << " (after A)";
          EXPECT_EQ(VersionsUp(c.versions, v_pause, "before the pause"), "") << where;
          EXPECT_EQ(VersionsUp(v_pause, v_b, "under B"), "") << where;
          EXPECT_EQ(VersionsUp(v_b, v_a, "under the released A"), "") << where;
          EXPECT_EQ(RecordForward(c.record, at_pause, "before the pause"), "") << where;
          EXPECT_EQ(RecordForward(at_pause, after_b, "under B"), "") << where;
          EXPECT_EQ(RecordForward(after_b, TheRecord(*c.mem), "under the released A"), "") << where;

          const litetx::CollectorStats sta = a.stats(), stb = b.stats();
          EXPECT_EQ(sta.failed + stb.failed, 0u) << where;
          const std::uint64_t by_a = sta.finished + sta.reversed, by_b = stb.finished + stb.reversed;
          const std::uint64_t* side = c.must == 'a' ? &stb.finished : &stb.reversed;
          if (mid_repair) {
            // B found the work unfinished and settled it; A, released, found it settled.
            EXPECT_EQ(by_b, 1u) << where << ": B did not settle it";
            EXPECT_EQ(*side, 1u) << where << ": B settled it on the wrong side";
            EXPECT_EQ(by_a, 0u) << where << ": both counted it";
            b_settled += by_b == 1 ? 1 : 0;
            // Nothing A sends after B settled the transaction may land; count what stopped it.
            bool any = false;
            for (const HoldingStore::Write& w : hold->writes()) {
              const bool after = w.after_release;
              if (!after) continue;
              any = true;
              EXPECT_EQ(w.code, Code::kConflict)
                  << where << ": A's write to " << w.key.collection << "/" << w.key.id
                  << " after its release got " << litetx::CodeName(w.code);
              if (w.code != Code::kConflict) continue;
              if (w.key.collection != litetx::kTransactionsCollection) {
                ++a_doc_write_lost;
              } else if (at_pause->state == TxnState::kPending) {
                ++a_claim_lost;
              } else {
                ++a_marker_lost;
              }
            }
            a_no_write += any ? 0 : 1;
          } else {
            // A's held write was its own marker, which landed: B found nothing to do. A counts it;
            // when the marker's reply was lost, A re-reads a marker it cannot tell from another
            // collector's, and today counts nothing (tallied below).
            EXPECT_NE(mode, Hold::kBefore) << where;
            EXPECT_EQ(by_b, 0u) << where;
            if (mode == Hold::kLostReply) {
              EXPECT_LE(by_a, 1u) << where;
              marker_reply_lost += by_a == 0 ? 1 : 0;
            } else {
              EXPECT_EQ(by_a, 1u) << where;
            }
          }
        }
      }
    }
  }
  std::printf("two-collector cases: %d; A held at its write in %d (mid-repair %d, after its own "
              "marker landed %d), A alone to the end in %d\n",
              cases, held, held_mid_repair, held_after_marker, alone);
  std::printf("  held mid-repair: B settled it in %d; A's writes after its release refused: claim "
              "%d, document %d, marker %d; A re-read a settled record and wrote nothing in %d; "
              "A's own marker landed with a lost reply and neither counted it: %d\n",
              b_settled, a_claim_lost, a_doc_write_lost, a_marker_lost, a_no_write, marker_reply_lost);
  EXPECT_GT(held_mid_repair, 0);
  EXPECT_EQ(b_settled, held_mid_repair);
  EXPECT_GT(a_claim_lost, 0);
  EXPECT_GT(a_doc_write_lost, 0);
  EXPECT_GT(a_marker_lost, 0);
  EXPECT_GT(a_no_write, 0);
}

// The other order: collector B is held at its j-th write (before it reaches the store) while
// collector A crashes after each of its writes in turn, or completes; then B is released and
// must take the transaction to the end by itself (no third collector runs).
TEST(RaceTest, HeldCollectorFinishesWhatACrashedOneLeft) {
  std::mt19937_64 rng(778);
  std::printf("held-collector seed 778\n");
  int cases = 0, a_crashed = 0, a_completed = 0, b_settled = 0, b_found_settled = 0;
  for (int round = 0, rounds = Rounds(16); round < rounds; ++round) {
    Scenario s = CollectorScenario(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t k = 1; k <= o.writes; ++k) {
      bool b_reached = true;
      for (std::uint64_t j = 1; b_reached; ++j) {
        ASSERT_LE(j, kMaxWrites) << s.Describe() << ": collector B never finished";
        for (std::uint64_t m = 1;; ++m) {
          ASSERT_LE(m, kMaxWrites) << s.Describe() << ": collector A never finished";
          const std::string where = s.Describe() + " coordinator crash after write " +
                                    std::to_string(k) + ", B held before its write " +
                                    std::to_string(j) + ", A crash after its write " + std::to_string(m);
          Crashed c = CrashCoordinator(s, k);
          auto hold = std::make_shared<HoldingStore>(c.mem, j, Hold::kBefore);
          litetx::Collector b(hold, NamedCollector(c.clock, "gc-b"));
          litetx::Status sb;
          Runner tb(hold, [&] { sb = b.RunOnce(); });
          if (!hold->WaitHeldOrFinished()) {
            tb.Join();
            b_reached = false;
            break;
          }
          ++cases;
          const std::vector<std::uint64_t> v_pause = RawVersions(*c.mem, s.docs.size());
          litetx::FaultOptions f;
          f.crash_after_writes = m;
          bool crashed = false;
          litetx::Collector a(std::make_shared<litetx::FaultInjectingStore>(c.mem, f),
                              NamedCollector(c.clock, "gc-a"));
          try {
            EXPECT_TRUE(a.RunOnce().ok()) << where;
          } catch (const litetx::SimulatedCrash&) {
            crashed = true;
          }
          const std::vector<std::uint64_t> v_a = RawVersions(*c.mem, s.docs.size());
          const bool settled_by_a = TheRecord(*c.mem).has_value() && TheRecord(*c.mem)->done;
          tb.Join();
          ASSERT_TRUE(sb.ok()) << where << ": B " << sb.ToString();
          EXPECT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where;
          EXPECT_EQ(VersionsUp(c.versions, v_pause, "before the pause"), "") << where;
          EXPECT_EQ(VersionsUp(v_pause, v_a, "under A"), "") << where;
          EXPECT_EQ(VersionsUp(v_a, RawVersions(*c.mem, s.docs.size()), "under the released B"), "")
              << where;
          const litetx::CollectorStats stb = b.stats();
          EXPECT_EQ(stb.failed, 0u) << where;
          if (settled_by_a) {
            ++b_found_settled;
            EXPECT_EQ(stb.finished + stb.reversed, 0u) << where;
          } else {
            ++b_settled;
            EXPECT_EQ(c.must == 'a' ? stb.finished : stb.reversed, 1u) << where;
          }
          if (!crashed) {
            ++a_completed;
            break;
          }
          ++a_crashed;
        }
      }
    }
  }
  std::printf("held-collector cases: %d (A crashed in %d, completed in %d); the released B settled "
              "it in %d, found it settled in %d\n",
              cases, a_crashed, a_completed, b_settled, b_found_settled);
  EXPECT_GT(a_crashed, 0);
  EXPECT_GT(b_settled, 0);
  EXPECT_GT(b_found_settled, 0);
}

// Counts what a collector does to the store: the writes it attempts (record erases apart from
// the rest), and the pending records its scans return (transactions in flight that it saw and
// had to leave alone).
class WatchStore final : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    ++writes;
    return ForwardingStore::Create(k, v);
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    ++writes;
    return ForwardingStore::Replace(k, e, v);
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    ++(k.collection == litetx::kTransactionsCollection ? record_erases : writes);
    return ForwardingStore::Erase(k, e);
  }
  litetx::Result<litetx::ScanPage> Scan(std::string_view c, std::string_view cursor,
                                        std::size_t limit) override {
    auto page = ForwardingStore::Scan(c, cursor, limit);
    if (page.ok() && c == litetx::kTransactionsCollection) {
      for (const auto& [id, doc] : page->documents) {
        auto r = litetx::engine::DecodeRecord(doc.value);
        if (r.ok() && !r->done && r->state == TxnState::kPending) ++pending_seen;
      }
    }
    return page;
  }
  std::atomic<std::uint64_t> writes{0}, record_erases{0}, pending_seen{0};
};

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
  co.collections = {"bank"};  // the sweep looks at the held documents too
  // Outcome markers are erased as soon as the collector sees them (the one kind of write it
  // may make here), so that the record collection stays small and each pass is short.
  co.outcome_retention = std::chrono::milliseconds(0);
  auto watch = std::make_shared<WatchStore>(mem);
  litetx::Collector gc(watch, co);
  gc.Start();
  std::atomic<int> ok{0}, retryable{0}, other{0};
  std::uint64_t runs_at_start = 0, runs_at_end = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  {
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&, w] {
        std::mt19937 rng(w);
        // 250 transfers each, then more (up to 5,000, for at most 10 s) until the collector
        // has seen at least 20 transactions in flight.
        for (int i = 0; i < 5000; ++i) {
          if (i >= 250 && (watch->pending_seen.load() >= 20 || std::chrono::steady_clock::now() > deadline)) {
            break;
          }
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
    runs_at_start = gc.stats().runs;
    for (auto& t : workers) t.join();
    runs_at_end = gc.stats().runs;
  }
  gc.Stop();
  auto stats = gc.stats();
  std::printf("beside healthy traffic: %d committed, %d retryable, %d other; gc runs %llu (%llu "
              "while the coordinators ran), pending records seen %llu, markers erased %llu, other "
              "gc writes %llu, undone %llu\n",
              ok.load(), retryable.load(), other.load(), static_cast<unsigned long long>(stats.runs),
              static_cast<unsigned long long>(runs_at_end - runs_at_start),
              static_cast<unsigned long long>(watch->pending_seen.load()),
              static_cast<unsigned long long>(stats.purged),
              static_cast<unsigned long long>(watch->writes.load()),
              static_cast<unsigned long long>(stats.undone));
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  // It really ran beside them and saw transactions in flight, and wrote nothing but the
  // erase of markers: no claim, no document write (every record erase was a marker purge).
  EXPECT_GT(stats.runs, 0u);
  EXPECT_GE(watch->pending_seen.load(), 20u);
  EXPECT_EQ(watch->writes.load(), 0u);
  EXPECT_EQ(watch->record_erases.load(), stats.purged);
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
