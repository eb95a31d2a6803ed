// tests/batch_finisher_attack_test.cpp — hostile schedules and hostile inputs against batched
// commits (one Store::Batch for the pre-reads, one for the applies, one for the finishes) and
// the background finisher (Options::finish_in_background).
//
// Each test pauses, crashes or misleads one actor at a chosen point and asserts what the
// protocol promises there: the outcome a Commit reports is the outcome the store keeps, a
// paused actor that resumes after someone else settled its transaction writes nothing, read
// committed never shows an image from before a commit that returned, and quiescence leaves no
// reference, no pending record and no write made twice.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/record.h"

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::BatchOp;
using litetx::BatchResult;
using litetx::Collector;
using litetx::CountingStore;
using litetx::Transaction;
using litetx::TxnOutcome;

// A store whose Batch misbehaves within the contract's letter: kDropReplies runs every
// operation but returns results for the first half only (the rest read as lost replies to the
// engine); kRunHalf sends only the first half to the target and returns only their results.
class ShortBatchStore final : public litetx::ForwardingStore {
 public:
  enum class Mode { kDropReplies, kRunHalf };
  ShortBatchStore(std::shared_ptr<litetx::Store> target, Mode mode)
      : ForwardingStore(std::move(target)), mode_(mode) {}

  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    if (ops.size() < 2) return ForwardBatch(ops);
    shortened_.fetch_add(1);
    const std::size_t half = ops.size() / 2;
    if (mode_ == Mode::kRunHalf) return ForwardBatch(ops.first(half));
    std::vector<BatchResult> all = ForwardBatch(ops);
    all.resize(half);
    return all;
  }
  int shortened() const { return shortened_.load(); }

 private:
  Mode mode_;
  std::atomic<int> shortened_{0};
};

class BatchFinisherAttackTest : public ::testing::Test, public FinisherWorld {
 protected:
  void Seed3() {
    MustCommit(*direct, Transaction()
                            .Insert("c", "a", {{"n", 100}})
                            .Insert("c", "b", {{"n", 0}})
                            .Insert("c", "d", {{"n", 0}}));
  }
  static Transaction Spread(int amount) {
    return Transaction()
        .Adjust("c", "a", {{"n", -2 * amount}})
        .Adjust("c", "b", {{"n", amount}})
        .Adjust("c", "d", {{"n", amount}});
  }
};

// The finisher's worker is paused inside its finish batch past the lease; a collector finishes
// the same transaction and a later transaction writes its documents again. Throughout, the
// outcome is committed and readers see the new images; when the worker resumes it writes
// nothing at all (its compare-and-swaps fail, its re-reads find the documents no longer its
// own, its marker write finds the collector's marker).
TEST_F(BatchFinisherAttackTest, FinisherPausedPastTheLeaseWhileACollectorFinishesWritesNothing) {
  Seed3();
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 2) gate.Hold();  // mid-batch
    return std::nullopt;
  };
  litetx::Database db(counting, Background());
  auto r = db.Commit(Spread(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(gate.WaitHeld(1));
  // The finish of "a" landed before the pause; "b" and "d" are still held.
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, "");
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, r->txn_id);
  EXPECT_EQ(MetaOf(*mem, "c", "d").txn, r->txn_id);
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(ReadImage(*direct, "c", "b"), Found(V(2), Obj(R"({"n":10})")));

  clock->Advance(121s);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().finished, 1u);
  ExpectClean(*mem, {"c"});
  MustCommit(*direct, Spread(1));  // the documents move on
  const Dump before = DumpStore(*mem, {"c"});
  const auto writes_before = counting->counts().writes();

  gate.Open();
  db.Flush();
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"}))) << "the resumed finisher wrote something";
  // Its finish batch was counted when it was sent; after the pause it tried one more write,
  // the marker, refused.
  EXPECT_EQ(counting->counts().writes() - writes_before, 1u);
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(3), Obj(R"({"n":78})")));
  EXPECT_EQ(ReadImage(*direct, "c", "b"), Found(V(3), Obj(R"({"n":11})")));
  EXPECT_EQ(MarkerCount(*mem), 3u);  // seed, r, the later transaction
}

// A collector claims the transaction while its apply batch is half landed ("a" applied, the
// batch paused before "b"). The coordinator resumes: its remaining applies meet the fences,
// it learns the claim and reports kAborted, and writes nothing after the collector settled.
TEST_F(BatchFinisherAttackTest, CollectorClaimsWhileTheApplyBatchIsHalfLanded) {
  Seed3();
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1) gate.Hold();
    return std::nullopt;
  };
  litetx::Database db(hook, Background());
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  {
    Async commit([&] { r = db.Commit(Spread(10)); });
    ASSERT_TRUE(gate.WaitHeld(1));
    EXPECT_NE(MetaOf(*mem, "c", "a").txn, "");  // the first apply of the batch landed
    EXPECT_EQ(MetaOf(*mem, "c", "b").txn, "");
    clock->Advance(121s);
    Collector gc(mem, Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().reversed, 1u);
    ExpectClean(*mem, {"c"});
    const Dump settled = DumpStore(*mem, {"c"});
    gate.Open();
    ASSERT_TRUE(commit.Wait(10s));
    EXPECT_TRUE(SameDump(settled, DumpStore(*mem, {"c"})))
        << "the coordinator wrote after the collector settled its transaction";
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  EXPECT_EQ(OutcomeOf(*direct, r.status().txn_id()), TxnOutcome::kAborted);
  EXPECT_EQ(ReadImage(*direct, "c", "a").doc, Obj(R"({"n":100})"));
  EXPECT_EQ(ReadImage(*direct, "c", "b").doc, Obj(R"({"n":0})"));
  EXPECT_EQ(ReadImage(*direct, "c", "d").doc, Obj(R"({"n":0})"));
}

// An apply in the batch lands but its reply is lost; the coordinator is paused between that
// reply and its re-read of the document, past the lease, while a collector claims and reverses
// the transaction. The re-read must not take the reversed document for its own apply.
TEST_F(BatchFinisherAttackTest, LostApplyReplyThenPauseBeforeTheReReadWhileACollectorClaims) {
  Seed3();
  Gate gate;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1) {
      return Status::Unknown("injected lost reply");
    }
    return std::nullopt;
  };
  hook->before = [&](const Call& c) -> std::optional<Status> {
    // Gets of "b": the pre-read batch, then the re-read after the lost reply.
    if (c.op == Op::kGet && c.key == Key{"c", "b"} && c.nth == 2) gate.Hold();
    return std::nullopt;
  };
  // The classic path: its record is pending while the applies land, so the collector claims
  // it. (On the parallel path every apply landed with the staging record, so a collector finds
  // every document held and commits it: the coordinator then reports OK.)
  litetx::Options o = Background();
  o.parallel_commit = false;
  litetx::Database db(hook, o);
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  {
    Async commit([&] { r = db.Commit(Spread(10)); });
    ASSERT_TRUE(gate.WaitHeld(1));
    for (const char* id : {"a", "b", "d"}) EXPECT_NE(MetaOf(*mem, "c", id).txn, "") << id;
    clock->Advance(121s);
    Collector gc(mem, Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().reversed, 1u);
    ExpectClean(*mem, {"c"});
    const Dump settled = DumpStore(*mem, {"c"});
    gate.Open();
    ASSERT_TRUE(commit.Wait(10s));
    EXPECT_TRUE(SameDump(settled, DumpStore(*mem, {"c"})))
        << "the coordinator wrote after the collector settled its transaction";
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  EXPECT_EQ(OutcomeOf(*direct, r.status().txn_id()), TxnOutcome::kAborted);
  EXPECT_EQ(ReadImage(*direct, "c", "a").doc, Obj(R"({"n":100})"));
  EXPECT_EQ(ReadImage(*direct, "c", "b").doc, Obj(R"({"n":0})"));
}

// A store whose Batch returns fewer results than operations (every operation ran, or only the
// first half did). Every batch the engine sends (pre-reads, applies, check revalidation,
// finishes) is cut short; each transaction still commits, with finishing inline and in the
// background, and no write reaches the store twice: exactly 2N+3 per transaction.
TEST_F(BatchFinisherAttackTest, BatchReturningFewerResultsThanOperations) {
  for (auto mode : {ShortBatchStore::Mode::kDropReplies, ShortBatchStore::Mode::kRunHalf}) {
    for (bool background : {false, true}) {
      SCOPED_TRACE(std::string(mode == ShortBatchStore::Mode::kRunHalf ? "run half" : "drop replies") +
                   (background ? ", background" : ", inline"));
      auto base = std::make_shared<litetx::MemoryStore>();
      const std::uint64_t v0 = FirstVersionAt(*clock);  // retry backoffs move the clock
      {
        litetx::Database seed(base, Opts());
        MustCommit(seed, Transaction()
                             .Insert("c", "a", {{"n", 100}})
                             .Insert("c", "b", {{"n", 0}})
                             .Insert("c", "d", {{"n", 0}})
                             .Insert("c", "e", {{"n", 0}}));
      }
      auto count = std::make_shared<CountingStore>(base);
      auto shorty = std::make_shared<ShortBatchStore>(count, mode);
      litetx::Options o = background ? Background() : Opts();
      o.written_cache_bytes = 0;  // every commit pre-reads: three batches each to cut short
      std::string last;
      {
        litetx::Database db(shorty, o);
        for (int i = 1; i <= 3; ++i) {
          auto r = db.Commit(Transaction()
                                 .Adjust("c", "a", {{"n", -3}})
                                 .Adjust("c", "b", {{"n", 1}})
                                 .Adjust("c", "d", {{"n", 1}})
                                 .Check("c", "e", v0));
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          last = r->txn_id;
        }
        db.Flush();
      }
      EXPECT_GE(shorty->shortened(), 3 * 3);  // pre-reads, applies, revalidation at least
      EXPECT_EQ(count->counts().writes(), 3u * (2 * 3 + 3)) << "a write was sent twice";
      ExpectClean(*base, {"c"});
      litetx::Database reader(base, Opts());
      EXPECT_EQ(ReadImage(reader, "c", "a"), Found(v0 + 3, Obj(R"({"n":91})")));
      EXPECT_EQ(ReadImage(reader, "c", "d"), Found(v0 + 3, Obj(R"({"n":3})")));
      EXPECT_EQ(OutcomeOf(reader, last), TxnOutcome::kCommitted);
    }
  }
}

// A transaction naming one document twice (which would put one key twice into a batch) is
// refused before any store call.
TEST_F(BatchFinisherAttackTest, DuplicateKeysAreRefusedBeforeAnyStoreCall) {
  Seed3();
  litetx::Database db(counting, Background());
  counting->Reset();
  const Dump before = DumpStore(*mem, {"c"});
  for (const Transaction& t :
       {Transaction().Adjust("c", "a", {{"n", 1}}).Adjust("c", "a", {{"n", 1}}),
        Transaction().Adjust("c", "a", {{"n", 1}}).Check("c", "a", V(1)),
        Transaction().Check("c", "b", V(1)).Check("c", "b", V(1)),
        Transaction().Delete("c", "d").Adjust("c", "b", {{"n", 1}}).Insert("c", "d", {{"n", 5}})}) {
    auto r = db.Commit(t);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
  }
  db.Flush();
  EXPECT_EQ(counting->counts().round_trips, 0u);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
}

// Out-of-range finisher options (no threads, negative threads, no queue) still finish every
// committed transaction, and Flush returns.
TEST_F(BatchFinisherAttackTest, DegenerateFinisherOptionsStillFinishEverything) {
  Seed3();
  struct Case {
    int threads;
    std::size_t queue;
  };
  int commits = 1;  // the seed
  for (Case k : {Case{0, 4096}, Case{-1, 4096}, Case{2, 0}, Case{0, 0}, Case{-7, 1}}) {
    SCOPED_TRACE("threads " + std::to_string(k.threads) + ", queue " + std::to_string(k.queue));
    litetx::Options o = Background();
    o.finisher_threads = k.threads;
    o.finisher_queue = k.queue;
    litetx::Database db(mem, o);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(db.Commit(Spread(1)).ok());
      ++commits;
    }
    db.Flush();
    ExpectClean(*mem, {"c"});
    EXPECT_EQ(MarkerCount(*mem), static_cast<std::size_t>(commits));
  }
  EXPECT_EQ(ReadImage(*direct, "c", "a").doc, Obj(R"({"n":60})"));
}

// The coordinator crashes (kThrow) after each write of its apply batch in turn, and at the
// flip: a crash before the flip leaves the transaction for the collector to reverse, a crash
// right after it one to finish; nothing else is ever seen.
TEST_F(BatchFinisherAttackTest, CrashInsideTheApplyBatch) {
  // One batch: 1 the staging record, 2..4 the applies; once all four landed the transaction is
  // committed (the flip comes after, on the finisher).
  for (std::uint64_t k = 1; k <= 4; ++k) {
    SCOPED_TRACE("crash after write " + std::to_string(k));
    auto base = std::make_shared<litetx::MemoryStore>();
    {
      litetx::Database seed(base, Opts());
      MustCommit(seed, Transaction()
                           .Insert("c", "a", {{"n", 100}})
                           .Insert("c", "b", {{"n", 0}})
                           .Insert("c", "d", {{"n", 0}}));
    }
    litetx::FaultOptions f;
    f.crash_after_writes = k;
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(base, f);
    bool threw = false;
    {
      litetx::Database db(faulty, Background());
      try {
        (void)db.Commit(Spread(10));
      } catch (const litetx::SimulatedCrash& e) {
        threw = true;
        EXPECT_EQ(e.write_index(), k);
      }
    }
    EXPECT_TRUE(threw);
    litetx::Database reader(base, Opts());
    const bool committed = k == 4;
    EXPECT_EQ(ReadImage(reader, "c", "a").doc, committed ? Obj(R"({"n":80})") : Obj(R"({"n":100})"));
    clock->Advance(121s);
    Collector gc(base, Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().finished, committed ? 1u : 0u);
    EXPECT_EQ(gc.stats().reversed, committed ? 0u : 1u);
    ExpectClean(*base, {"c"});
    EXPECT_EQ(ReadImage(reader, "c", "a").doc, committed ? Obj(R"({"n":80})") : Obj(R"({"n":100})"));
    EXPECT_EQ(ReadImage(reader, "c", "d").doc, committed ? Obj(R"({"n":10})") : Obj(R"({"n":0})"));
  }
}

// Read-your-writes right after Commit returns, while its finish still waits in the queue (the
// only worker is held on an unrelated job): reads see the new images and the pending delete as
// a tombstone, and a transaction built on the returned versions commits at once (it takes the
// queued job and finishes it). The reported outcome never changes.
TEST_F(BatchFinisherAttackTest, ReadYourWritesWhileTheFinishIsQueued) {
  Seed3();
  MustCommit(*direct, Transaction().Insert("c", "u", {{"n", 0}}).Insert("c", "v", {{"n", 0}}));
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "u"} && c.nth == 2) gate.Hold();
    return std::nullopt;
  };
  litetx::Options o = Background();
  o.finisher_threads = 1;
  litetx::Database db(hook, o);
  ASSERT_TRUE(db.Commit(Transaction().Adjust("c", "u", {{"n", 1}}).Adjust("c", "v", {{"n", 1}}))
                  .ok());
  ASSERT_TRUE(gate.WaitHeld(1));
  auto t1 = db.Commit(Transaction()
                          .Update("c", "a", {{"n", 7}}, {}, V(1))
                          .Delete("c", "b")
                          .Insert("c", "x", {{"n", 1}}));
  ASSERT_TRUE(t1.ok()) << t1.status().ToString();
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, t1->txn_id);  // still queued
  EXPECT_EQ(OutcomeOf(db, t1->txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(ReadImage(db, "c", "a"), Found(t1->versions[0], Obj(R"({"n":7})")));
  EXPECT_EQ(ReadImage(db, "c", "b"), DeletedImage(t1->versions[1]));
  EXPECT_EQ(ReadImage(db, "c", "x").doc, Obj(R"({"n":1})"));
  auto t2 = db.Commit(Transaction()
                          .Update("c", "a", {{"n", 8}}, {}, t1->versions[0])
                          .Insert("c", "b", {{"n", 2}})
                          .Check("c", "x", t1->versions[2]));
  ASSERT_TRUE(t2.ok()) << t2.status().ToString();
  EXPECT_EQ(OutcomeOf(db, t1->txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(OutcomeOf(db, t2->txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(ReadImage(db, "c", "a"), Found(t2->versions[0], Obj(R"({"n":8})")));
  EXPECT_EQ(ReadImage(db, "c", "b").doc, Obj(R"({"n":2})"));
  gate.Open();
  db.Flush();
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(db, t1->txn_id), TxnOutcome::kCommitted);
}

// Database::Run with pessimistic locks and background finishing: each run locks documents the
// previous run wrote (whose finish may still be queued or running) and must get them at its
// first attempt, neither timing out nor dying. The busy timeout is long: a lock that meets a
// finish in progress waits for the finisher worker up to busy_timeout, and on a loaded machine
// a worker may not be scheduled within the suite's usual 50 ms (the run then gets kBusy and
// succeeds at its second attempt, as documented; that is not what this test is about).
TEST_F(BatchFinisherAttackTest, RunWithLocksOverQueuedFinishes) {
  Seed3();
  litetx::Options o = Background();
  o.finisher_threads = 1;
  o.busy_timeout = 5s;
  litetx::Database db(hook, o);
  for (int i = 0; i < 20; ++i) {
    auto r = db.Run([](litetx::TxnContext& tx) -> Status {
      if (Status s = tx.Lock("c", "a", litetx::LockMode::kWrite); !s.ok()) return s;
      if (Status s = tx.Lock("c", "b", litetx::LockMode::kWrite); !s.ok()) return s;
      if (Status s = tx.Lock("c", "d", litetx::LockMode::kRead); !s.ok()) return s;
      if (Status s = tx.Adjust("c", "a", {{"n", -1}}); !s.ok()) return s;
      return tx.Adjust("c", "b", {{"n", 1}});
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->attempts, 1);
  }
  db.Flush();
  ExpectClean(*mem, {"c"});
  for (const char* id : {"a", "b", "d"}) {
    EXPECT_TRUE(MetaOf(*mem, "c", id).locks.empty()) << id << " keeps a lock";
  }
  EXPECT_EQ(ReadImage(*direct, "c", "a").doc, Obj(R"({"n":80})"));
  EXPECT_EQ(ReadImage(*direct, "c", "b").doc, Obj(R"({"n":20})"));
}

// Threads committing on overlapping documents through one Database with two finisher threads:
// helpers and workers race for the same jobs. Every acknowledged transfer is in the final
// state, nothing else is, and quiescence is clean with one marker per commit.
TEST_F(BatchFinisherAttackTest, HelpersAndWorkersRaceForTheSameJobs) {
  constexpr int kDocs = 4, kThreads = 4, kPerThread = 30;
  {
    Transaction seed;
    for (int i = 0; i < kDocs; ++i) seed.Insert("c", "k" + std::to_string(i), {{"n", 0}});
    MustCommit(*direct, seed);
  }
  litetx::Options o = Background();
  o.clock = litetx::SystemClock();
  o.busy_timeout = 5s;
  o.finisher_threads = 2;
  litetx::Database db(mem, o);
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::atomic<long>> expected(kDocs);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const int from = (t + i) % kDocs, to = (t + 2 * i + 1) % kDocs;
          if (from == to) continue;
          auto r = db.Commit(Transaction()
                                 .Adjust("c", "k" + std::to_string(from), {{"n", -1}})
                                 .Adjust("c", "k" + std::to_string(to), {{"n", 1}}));
          if (r.ok()) {
            ++ok;
            expected[from] -= 1;
            expected[to] += 1;
          } else {
            ++failed;
            EXPECT_EQ(r.code(), Code::kBusy) << r.status().ToString();  // wait-die only
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  db.Flush();
  ExpectClean(*mem, {"c"});
  EXPECT_GT(ok.load(), kThreads * kPerThread / 2);
  // One marker per transaction: the seed, each commit, each rollback (committed or aborted).
  EXPECT_EQ(MarkerCount(*mem), static_cast<std::size_t>(1 + ok.load() + failed.load()));
  for (int i = 0; i < kDocs; ++i) {
    EXPECT_EQ(ReadImage(*direct, "c", "k" + std::to_string(i)).doc,
              Obj("{\"n\":" + std::to_string(expected[i].load()) + "}"));
  }
  std::printf("[ figures  ] %d committed, %d wait-die kBusy\n", ok.load(), failed.load());
}

// A transaction that meets a document held by a transaction a finisher worker of its own
// Database is finishing waits for that worker at most busy_timeout; then it settles the
// document itself (a compare-and-swap), as it would a committed holder of another process,
// instead of waiting as long as the worker is stuck.
TEST_F(BatchFinisherAttackTest, WaiterOnAStuckWorkerHonoursBusyTimeout) {
  Seed3();
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "a"} && c.nth == 2) gate.Hold();  // finish
    return std::nullopt;
  };
  litetx::Options o = Background();
  o.finisher_threads = 1;
  litetx::Database db(hook, o);  // busy_timeout 50 ms
  ASSERT_TRUE(db.Commit(Spread(10)).ok());
  ASSERT_TRUE(gate.WaitHeld(1));  // the worker is finishing it, held
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  {
    Async next([&] { r = db.Commit(Spread(1)); });
    const bool returned = next.Wait(2s);
    EXPECT_TRUE(returned) << "Commit still blocked after 2 s with busy_timeout 50 ms";
    gate.Open();
  }
  db.Flush();
  ExpectClean(*mem, {"c"});
}

// The same with busy_timeout = 0 ("fails at once"): no wait for the worker and no spinning
// on the document while it is held (one look, then the document is settled on the spot).
TEST_F(BatchFinisherAttackTest, ZeroBusyTimeoutDoesNotSpinOnAStuckWorker) {
  Seed3();
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "a"} && c.nth == 2) gate.Hold();
    return std::nullopt;
  };
  litetx::Options o = Background();
  o.finisher_threads = 1;
  o.busy_timeout = 0ms;
  litetx::Database db(hook, o);
  ASSERT_TRUE(db.Commit(Spread(10)).ok());
  ASSERT_TRUE(gate.WaitHeld(1));
  const int gets_before = hook->calls(Op::kGet, Key{"c", "a"});
  {
    Async next([&] { (void)db.Commit(Spread(1)); });
    std::this_thread::sleep_for(300ms);  // the length of the hold, not a synchronisation
    const int gets = hook->calls(Op::kGet, Key{"c", "a"}) - gets_before;
    EXPECT_LE(gets, 10) << gets << " reads of c/a while the worker was held";
    gate.Open();
  }
  db.Flush();
  ExpectClean(*mem, {"c"});
}

}  // namespace
}  // namespace ltxtest
