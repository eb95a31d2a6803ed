// tests/finisher_test.cpp — finishing committed transactions in the background
// (Options::finish_in_background): Commit returns after the commit flip, the Database's
// finisher clears the references and writes the outcome marker, Flush and the destructor wait
// for it, a full queue makes the committing thread finish its own transaction, the next
// transaction on the same documents helps instead of racing, and a finisher that fails or
// dies leaves a committed transaction that the collector finishes.
#include <condition_variable>
#include <mutex>

#include "engine/record.h"

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CountingStore;
using litetx::Transaction;
using litetx::TxnOutcome;

class FinisherTest : public ::testing::Test, public FinisherWorld {
 protected:
  void Seed() {
    MustCommit(*direct, Transaction().Insert("c", "a", {{"n", 100}}));
    MustCommit(*direct, Transaction().Insert("c", "b", {{"n", 0}}));
  }
  static Transaction Transfer(int amount) {
    return Transaction().Adjust("c", "a", {{"n", -amount}}).Adjust("c", "b", {{"n", amount}});
  }
};

// Commit returns once the flip landed, while the finisher is held before its first write:
// the documents are still held, a read-committed reader already sees the new images, and the
// outcome is committed. Flush waits for the finish; then everything is clean.
TEST_F(FinisherTest, CommitReturnsAtTheFlipAndReadersSeeTheNewImagesBeforeTheFinish) {
  Seed();
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    // The finish batch: the second replace of "a" (the first is the apply).
    if (c.op == Op::kReplace && c.key == Key{"c", "a"} && c.nth == 2) gate.Hold();
    return std::nullopt;
  };
  litetx::Database db(counting, Background());
  auto r = db.Commit(Transfer(30));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(gate.WaitHeld(1));
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, r->txn_id) << "finished before Commit returned";
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, r->txn_id);
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(2), Obj(R"({"n":70})")));
  EXPECT_EQ(ReadImage(*direct, "c", "b"), Found(V(2), Obj(R"({"n":30})")));
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
  gate.Open();
  db.Flush();
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(MarkerCount(*mem), 1u);
  EXPECT_EQ(counting->counts().writes(), 7u);  // 2N+3, none twice
}

// The destructor finishes what is queued before it returns.
TEST_F(FinisherTest, DestructorFinishesEveryQueuedTransaction) {
  Seed();
  {
    litetx::Database db(counting, Background());
    for (int i = 1; i <= 20; ++i) ASSERT_TRUE(db.Commit(Transfer(1)).ok());
  }
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(MarkerCount(*mem), 20u);
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(21), Obj(R"({"n":80})")));
  // Each transaction met the previous one's documents, finished or still queued; whoever
  // finished them, no write was made twice and none was refused.
  EXPECT_EQ(counting->counts().writes(), 20u * 7u);
}

// A full queue (finisher_queue = 1, its one worker held) makes the next committing thread
// finish its own transaction before returning.
TEST_F(FinisherTest, FullQueueMakesTheCommitterFinishItself) {
  MustCommit(*direct, Transaction().Insert("c", "a", {{"n", 0}}).Insert("c", "b", {{"n", 0}}));
  for (const char* id : {"x", "y", "z", "w"}) {
    MustCommit(*direct, Transaction().Insert("c", id, {{"n", 0}}));
  }
  Gate gate;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    // Hold the finisher's worker at the finish of the first transaction (on "a").
    if (c.op == Op::kReplace && c.key == Key{"c", "a"} && c.nth == 2) gate.Hold();
    return std::nullopt;
  };
  litetx::Options o = Background();
  o.finisher_threads = 1;
  o.finisher_queue = 1;
  litetx::Database db(counting, o);
  auto t1 = db.Commit(Transaction().Adjust("c", "a", {{"n", 1}}).Adjust("c", "b", {{"n", 1}}));
  ASSERT_TRUE(t1.ok());
  ASSERT_TRUE(gate.WaitHeld(1));  // the worker took t1 and is held: the queue is empty
  auto t2 = db.Commit(Transaction().Adjust("c", "x", {{"n", 1}}).Adjust("c", "y", {{"n", 1}}));
  ASSERT_TRUE(t2.ok());  // queued: the queue is full now
  auto t3 = db.Commit(Transaction().Adjust("c", "z", {{"n", 1}}).Adjust("c", "w", {{"n", 1}}));
  ASSERT_TRUE(t3.ok());
  // t3 found the queue full and finished itself: clean and marked already.
  EXPECT_EQ(MetaOf(*mem, "c", "z").txn, "");
  EXPECT_EQ(MetaOf(*mem, "c", "w").txn, "");
  auto marker = RecordOf(*mem, t3->txn_id);
  ASSERT_TRUE(marker.has_value());
  EXPECT_TRUE(marker->done);
  // t2 is still queued behind the held worker.
  EXPECT_EQ(MetaOf(*mem, "c", "x").txn, t2->txn_id);
  gate.Open();
  db.Flush();
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(MarkerCount(*mem), 4u);  // the seeding transaction's and t1..t3
}

// The next transaction on the same documents while the previous one still waits in the queue
// takes that job and finishes it itself (no write refused, none twice); while a worker is
// finishing it, it waits for the worker.
TEST_F(FinisherTest, NextTransactionOnTheSameDocumentsHelpsInsteadOfRacing) {
  Seed();
  Gate gate;
  std::atomic<bool> hold{true};
  hook->before = [&](const Call& c) -> std::optional<Status> {
    // The worker is held at its first call for an unrelated job, so the next job stays queued.
    if (hold && c.op == Op::kReplace && c.key == Key{"c", "u"} && c.nth == 2) gate.Hold();
    return std::nullopt;
  };
  MustCommit(*direct, Transaction().Insert("c", "u", {{"n", 0}}).Insert("c", "v", {{"n", 0}}));
  litetx::Options o = Background();
  o.finisher_threads = 1;
  litetx::Database db(counting, o);
  ASSERT_TRUE(db.Commit(Transaction().Adjust("c", "u", {{"n", 1}}).Adjust("c", "v", {{"n", 1}}))
                  .ok());
  // The apply of u is the first Replace on it; the finish (held) the second.
  ASSERT_TRUE(gate.WaitHeld(1));
  counting->Reset();
  auto t1 = db.Commit(Transfer(10));  // queued behind the held job
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, t1->txn_id);
  auto t2 = db.Commit(Transfer(5));  // meets t1's documents, takes t1's job
  ASSERT_TRUE(t2.ok());
  auto m1 = RecordOf(*mem, t1->txn_id);
  ASSERT_TRUE(m1.has_value());
  EXPECT_TRUE(m1->done) << "t2 did not finish t1 on the spot";
  // t1's 7 and t2's 3 up to its acknowledgement (its staging record and two applies; its flip
  // and finish wait in the queue): none refused or made twice.
  EXPECT_EQ(counting->counts().writes(), 7u + 3u);
  hold = false;
  gate.Open();
  db.Flush();
  // Then t2's flip and finish (4) and the held job's marker (its finish batch was counted when
  // it was sent, before the reset).
  EXPECT_EQ(counting->counts().writes(), 7u + 7u + 1u);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(3), Obj(R"({"n":85})")));
}

// A finisher whose store keeps failing gives up (logged) and leaves a committed record that
// holds its documents; readers see the new images all along, and the collector finishes it.
TEST_F(FinisherTest, FinisherThatKeepsFailingLeavesTheRestToTheCollector) {
  Seed();
  hook->before = FailCalls(Op::kReplace, Key{"c", "a"}, 2, Code::kUnavailable);
  litetx::Database db(hook, Background());
  auto r = db.Commit(Transfer(30));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  db.Flush();
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, r->txn_id);
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, "");  // the other finish landed
  auto rec = RecordOf(*mem, r->txn_id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_FALSE(rec->done);
  EXPECT_EQ(rec->state, litetx::engine::TxnState::kCommitted);
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(2), Obj(R"({"n":70})")));
  hook->before = nullptr;
  clock->Advance(121s);  // past the lease
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().finished, 1u);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
}

// A crash on the finisher's thread (the process dying after Commit returned OK): the commit
// stands, and the collector finishes it.
TEST_F(FinisherTest, CrashWhileFinishingLeavesACommittedTransactionForTheCollector) {
  Seed();
  for (std::uint64_t k = 5; k <= 7; ++k) {  // the two finishes and the marker
    SCOPED_TRACE("crash after write " + std::to_string(k));
    litetx::FaultOptions f;
    f.crash_after_writes = k;
    auto base = std::make_shared<litetx::MemoryStore>();
    const std::uint64_t v0 = FirstVersionAt(*clock);  // the inserts' version
    {
      litetx::Database seed(base, Opts());
      MustCommit(seed, Transaction().Insert("c", "a", {{"n", 100}}).Insert("c", "b", {{"n", 0}}));
    }
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(base, f);
    std::string id;
    {
      litetx::Database db(faulty, Background());
      auto r = db.Commit(Transfer(30));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      id = r->txn_id;
    }  // the destructor waits for the finisher, which crashes
    EXPECT_TRUE(faulty->crashed());
    litetx::Database reader(base, Opts());
    EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kCommitted);
    EXPECT_EQ(ReadImage(reader, "c", "a"), Found(v0 + 1, Obj(R"({"n":70})")));
    clock->Advance(121s);
    Collector gc(base, Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    ExpectClean(*base, {"c"});
    EXPECT_EQ(ReadImage(reader, "c", "b"), Found(v0 + 1, Obj(R"({"n":30})")));
    EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kCommitted);
  }
}

}  // namespace
}  // namespace ltxtest
