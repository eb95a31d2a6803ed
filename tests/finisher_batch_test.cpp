// tests/finisher_batch_test.cpp — hostile schedules against three mechanisms: the
// read-committed reader meeting a committed outcome marker (and a dangling hold of it), the
// background finisher finishing several queued transactions in one batch of flips, one of
// documents and one of markers (with its linger), and the LMDB store's in-process writer turn
// (map growth from several threads, several store objects and a second process).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::BatchOp;
using litetx::BatchResult;
using litetx::Collector;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnState;

// Records every batch it is given: its size and whether it named one key twice (the store
// contract lets such operations run in any order; the engine promises never to send them).
class BatchSpy final : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::set<Key> keys;
      for (const BatchOp& op : ops) {
        if (!keys.insert(op.key).second) duplicates_.push_back(op.key);
      }
      sizes_.push_back(ops.size());
    }
    return ForwardingStore::Batch(ops);  // through the single calls (and their hooks)
  }
  std::vector<Key> duplicates() const {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicates_;
  }
  std::size_t largest() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t m = 0;
    for (std::size_t s : sizes_) m = std::max(m, s);
    return m;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Key> duplicates_;
  std::vector<std::size_t> sizes_;
};

// The ids of the transactions whose record is an outcome marker while some document of
// `collection` still carries their reference (looked at in `store`, directly).
std::vector<std::string> MarkedButStillHolding(litetx::Store& store, std::string_view collection) {
  std::vector<std::string> bad;
  for (const auto& [id, doc] : ScanAll(store, collection)) {
    auto m = litetx::engine::DecodeMeta(doc.value);
    if (!m.ok() || m->txn.empty()) continue;
    auto raw = store.Get(TxnKey(m->txn));
    if (!raw.ok() || !raw->has_value()) continue;
    auto rec = litetx::engine::DecodeRecord((*raw)->value);
    if (rec.ok() && rec->done) bad.push_back(m->txn + " (" + id + ")");
  }
  return bad;
}

class FinisherBatchTest : public ::testing::Test, public FinisherWorld {
 protected:
  // `n` documents c/k0.. and as many c/m0.. (each transaction below writes two documents: a
  // transaction of one document takes the fast path, with no record and nothing to finish),
  // all at {"n":0}, version V(1).
  void SeedKeys(int n) {
    Transaction t;
    for (int i = 0; i < n; ++i) t.Insert("c", K(i), {{"n", 0}}).Insert("c", M(i), {{"n", 0}});
    MustCommit(*direct, t);
  }
  static std::string K(int i) { return "k" + std::to_string(i); }
  static std::string M(int i) { return "m" + std::to_string(i); }
  // Adds `n` to c/k<i> and to c/m<i>.
  static Transaction Pair(int i, int n) {
    return Transaction().Adjust("c", K(i), {{"n", n}}).Adjust("c", M(i), {{"n", n}});
  }
  // Background finishing with one worker that lingers `linger` (long: until Flush).
  litetx::Options Lingering(std::chrono::microseconds linger, int threads = 1) const {
    litetx::Options o = Background();
    o.finisher_threads = threads;
    o.finisher_linger = linger;
    return o;
  }
  // After faults in the finisher's batch of the transactions `ids` (each added 1 to c/k<i>
  // and c/m<i>, inserted at version v0): no marker stands while a document still carries its
  // transaction, no document is finished while its record is staging, every transaction reads
  // as committed with its value applied once, and a collector pass past the lease cleans up.
  void ExpectCommittedThenCollected(const std::shared_ptr<litetx::MemoryStore>& base,
                                    const std::vector<std::string>& ids, std::uint64_t v0) {
    EXPECT_TRUE(MarkedButStillHolding(*base, "c").empty());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const int n = static_cast<int>(i);
      auto rec = RecordOf(*base, ids[i]);
      ASSERT_TRUE(rec.has_value());
      if (rec->state == TxnState::kStaging) {
        EXPECT_EQ(MetaOf(*base, "c", K(n)).txn, ids[i]) << "finished while staging";
        EXPECT_EQ(MetaOf(*base, "c", M(n)).txn, ids[i]) << "finished while staging";
      }
    }
    litetx::Database reader(base, Opts());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const int n = static_cast<int>(i);
      EXPECT_EQ(ReadImage(reader, "c", K(n)), Found(v0 + 1, Obj(R"({"n":1})")));
      EXPECT_EQ(ReadImage(reader, "c", M(n)), Found(v0 + 1, Obj(R"({"n":1})")));
      EXPECT_EQ(OutcomeOf(reader, ids[i]), TxnOutcome::kCommitted);
    }
    clock->Advance(std::chrono::seconds(121));
    Collector gc(base, Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    ExpectClean(*base, {"c"});
  }
};

// ---------------------------------------------------------------------------------------------
// Reads

// A reader reads a document held by a committed transaction, then stalls before reading the
// record while the finisher clears every hold and writes the committed outcome marker. On the
// marker the reader reads the document once more (no longer held: the first read's image was
// committed), and what it returns is exactly what every later read returns: the same content,
// the same version, for an update and for a delete (whose held image is not yet a tombstone).
TEST_F(FinisherBatchTest, CommittedMarkerAfterTheDocumentReadGivesTheImageLaterReadsGive) {
  SeedKeys(2);
  litetx::Database db(hook, Lingering(std::chrono::seconds(5)));
  auto r = db.Commit(Transaction().Adjust("c", K(0), {{"n", 7}}).Delete("c", K(1)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(K(i));
    ASSERT_EQ(MetaOf(*mem, "c", K(i)).txn, r->txn_id) << "the finisher ran before the reader";
  }
  // Two readers, each stalled at its first record read until the finish is complete.
  auto rstore = std::make_shared<HookStore>(mem);
  Gate gate;
  std::atomic<int> record_gets{0};
  rstore->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kGet && c.on_record()) {
      ++record_gets;
      gate.Hold();
    }
    return std::nullopt;
  };
  litetx::Database reader(rstore, Opts());
  std::vector<litetx::Result<litetx::ReadResult>> got(2, Status::Unknown(""));
  {
    Async r0([&] { got[0] = reader.Read("c", K(0)); });
    Async r1([&] { got[1] = reader.Read("c", K(1)); });
    ASSERT_TRUE(gate.WaitHeld(2));
    db.Flush();  // the linger ends; flip, finishes and marker land
    auto rec = RecordOf(*mem, r->txn_id);
    ASSERT_TRUE(rec.has_value());
    EXPECT_TRUE(rec->done);
    EXPECT_EQ(rec->state, TxnState::kCommitted);
    EXPECT_EQ(MetaOf(*mem, "c", K(0)).txn, "");
    gate.Open();
    EXPECT_TRUE(r0.Wait(5s));
    EXPECT_TRUE(r1.Wait(5s));
  }
  EXPECT_EQ(record_gets.load(), 2) << "a reader read a record again";
  EXPECT_EQ(rstore->calls(Op::kGet, Key{"c", K(0)}), 2) << "the document reads, before and after the record";
  EXPECT_EQ(rstore->calls(Op::kGet, Key{"c", K(1)}), 2) << "the document reads, before and after the record";
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  ASSERT_TRUE(got[1].ok()) << got[1].status().ToString();
  EXPECT_EQ(ImageOf(*got[0]), Found(V(2), Obj(R"({"n":7})")));
  EXPECT_EQ(ImageOf(*got[0]), ReadImage(*direct, "c", K(0)));
  EXPECT_EQ(ImageOf(*got[1]), DeletedImage(V(3)));
  EXPECT_EQ(ImageOf(*got[1]), ReadImage(*direct, "c", K(1)));
  ExpectClean(*mem, {"c"});
}

// A committed transaction's apply delivered after the transaction was over: T inserted x and
// committed; U deleted x; the tombstone was purged; then a copy of T's insert that had been on
// its way lands on the empty key (a pause longer than the tombstone retention, which §7 rules
// out, but §6.5 names as a source of dangling holds). T's committed marker is still kept (an
// outcome retention above the tombstone retention). The read must not resurrect x: per §6.5
// the hold is dangling and the document reads as before it (absent), and a writer that meets it
// undoes it to exactly that: the reader, on the committed marker, reads the document again and
// finds the same holder.
TEST_F(FinisherBatchTest, LateInsertOfACommittedTransactionIsNotResurrectedByAReader) {
  std::optional<json::object> late;
  hook->after = [&](const Call& c, const Status& st) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.key == Key{"c", "x"} && st.ok() && !late) late = *c.value;
    return std::nullopt;
  };
  std::string t_id;
  {
    litetx::Database db(hook, Opts());
    t_id = MustCommit(db, Transaction().Insert("c", "x", {{"n", 1}}).Insert("c", "y", {{"n", 1}}))
               .txn_id;
  }
  ASSERT_TRUE(late.has_value()) << "T's insert was not a Create";
  MustCommit(*direct, Transaction().Delete("c", "x"));
  const Image deleted = ReadImage(*direct, "c", "x");
  ASSERT_EQ(deleted.state, litetx::DocumentState::kDeleted);
  clock->Advance(std::chrono::hours(2));
  litetx::CollectorOptions go = Gc();
  go.collections = {"c"};
  go.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
  go.tombstone_retention = std::chrono::hours(1);
  go.outcome_retention = std::chrono::hours(48);
  Collector gc(mem, go);
  ASSERT_TRUE(gc.RunOnce().ok());
  ASSERT_FALSE(Raw(*mem, "c", "x").has_value()) << "the tombstone was not purged";
  auto marker = RecordOf(*mem, t_id);
  ASSERT_TRUE(marker.has_value() && marker->done && marker->state == TxnState::kCommitted);
  ASSERT_TRUE(mem->Create(Key{"c", "x"}, *late).ok());  // the late copy lands
  ASSERT_EQ(MetaOf(*mem, "c", "x").txn, t_id);
  const Image after = ReadImage(*direct, "c", "x");
  EXPECT_EQ(after, NotFoundImage()) << "a read after a read of " << deleted
                                    << " shows the deleted document alive";
  // A writer settles the hold as dangling: the document as before it.
  MustCommit(*direct, Transaction().Insert("c", "x", {{"n", 5}}));
  EXPECT_EQ(BodyOf(*mem, "c", "x"), Obj(R"({"n":5})"));
}

// ---------------------------------------------------------------------------------------------
// Finisher batches

// Six parallel commits finished in one batch; the flip of one of them cannot be written. The
// other five are finished and marked; the sixth keeps its record staging and every document
// held (no hold of it ends before its record says committed). A reader then proves it, and the
// collector finishes it.
TEST_F(FinisherBatchTest, OneFlipFailingInABatchLeavesThatJobIntactAndFinishesTheOthers) {
  constexpr int kJobs = 6, kBad = 2;
  SeedKeys(kJobs);
  auto spy = std::make_shared<BatchSpy>(hook);
  std::mutex mu;
  std::string bad_id;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    std::lock_guard<std::mutex> lock(mu);
    if (c.op == Op::kReplace && c.on_record() && c.key.id == bad_id && c.is_commit_point()) {
      return Status::Unavailable("injected: the flip cannot be written");
    }
    return std::nullopt;
  };
  std::vector<std::string> ids;
  {
    litetx::Database db(spy, Lingering(std::chrono::seconds(5)));
    for (int i = 0; i < kJobs; ++i) {
      auto r = db.Commit(Pair(i, i + 1));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ids.push_back(r->txn_id);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      bad_id = ids[kBad];
    }
    Async flush([&] { db.Flush(); });
    ASSERT_TRUE(flush.Wait(5s)) << "Flush did not return";
  }
  EXPECT_GE(spy->largest(), static_cast<std::size_t>(kJobs - 1))
      << "the jobs were not finished in one batch";
  EXPECT_TRUE(spy->duplicates().empty());
  for (int i = 0; i < kJobs; ++i) {
    SCOPED_TRACE(K(i));
    auto rec = RecordOf(*mem, ids[i]);
    ASSERT_TRUE(rec.has_value());
    if (i == kBad) {
      EXPECT_EQ(rec->state, TxnState::kStaging);
      EXPECT_FALSE(rec->done);
      EXPECT_EQ(MetaOf(*mem, "c", K(i)).txn, ids[i]) << "finished before its record was committed";
      EXPECT_EQ(MetaOf(*mem, "c", M(i)).txn, ids[i]) << "finished before its record was committed";
    } else {
      EXPECT_TRUE(rec->done);
      EXPECT_EQ(rec->state, TxnState::kCommitted);
      EXPECT_EQ(MetaOf(*mem, "c", K(i)).txn, "");
      EXPECT_EQ(MetaOf(*mem, "c", M(i)).txn, "");
    }
  }
  hook->before = nullptr;
  // A reader proves the staging record (every document held) and returns the new image at
  // once: the image every read returns once the transaction is finished.
  const Image proved = ReadImage(*direct, "c", K(kBad));
  EXPECT_EQ(proved, Found(V(2), json::object{{"n", kBad + 1}}));
  EXPECT_EQ(RecordOf(*mem, ids[kBad])->state, TxnState::kCommitted);  // the reader's proof
  clock->Advance(121s);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(ReadImage(*direct, "c", K(kBad)), proved);
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(BodyOf(*mem, "c", K(i)), (json::object{{"n", i + 1}}));
    EXPECT_EQ(BodyOf(*mem, "c", M(i)), (json::object{{"n", i + 1}}));
    EXPECT_EQ(OutcomeOf(*direct, ids[i]), TxnOutcome::kCommitted);
  }
}

// A crash (SimulatedCrash thrown by the store) at every write of a six-job batch: in the
// flips, in the documents, in the markers. The worker ends every job (Flush and the destructor
// return), no outcome marker stands while a document still carries its transaction, no
// document is finished while its record is staging, every transaction reads and stays
// committed, and the collector cleans up.
TEST_F(FinisherBatchTest, CrashAtEveryWriteOfAMultiJobBatch) {
  constexpr int kJobs = 6;
  for (std::uint64_t k = 1; k <= 4 * kJobs; ++k) {  // kJobs flips, 2 kJobs finishes, kJobs markers
    SCOPED_TRACE("crash after finisher write " + std::to_string(k));
    auto base = std::make_shared<litetx::MemoryStore>();
    const std::uint64_t v0 = FirstVersionAt(*clock);  // the inserts' version
    {
      litetx::Database seed(base, Opts());
      Transaction t;
      for (int i = 0; i < kJobs; ++i) t.Insert("c", K(i), {{"n", 0}}).Insert("c", M(i), {{"n", 0}});
      MustCommit(seed, t);
    }
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(base, litetx::FaultOptions{});
    std::vector<std::string> ids;
    {
      auto db = std::make_unique<litetx::Database>(faulty, Lingering(std::chrono::seconds(5)));
      for (int i = 0; i < kJobs; ++i) {
        auto r = db->Commit(Pair(i, 1));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ids.push_back(r->txn_id);
      }
      faulty->ArmCrash(faulty->writes() + k);
      Async end([&] {
        db->Flush();
        db.reset();
      });
      ASSERT_TRUE(end.Wait(5s)) << "Flush or the destructor did not return";
    }
    EXPECT_TRUE(faulty->crashed());
    ExpectCommittedThenCollected(base, ids, v0);
    if (HasFatalFailure()) return;
    litetx::Database reader(base, Opts());
    for (int i = 0; i < kJobs; ++i) EXPECT_EQ(OutcomeOf(reader, ids[i]), TxnOutcome::kCommitted);
  }
}

// Lost replies and transient failures on the finisher's calls (after the commits returned), 16
// seeds, one six-job batch each: Flush returns, no marker stands while a document still
// carries its transaction, no document is finished while its record is staging, every
// transaction reads and stays committed with its value applied once, and the collector cleans
// up.
TEST_F(FinisherBatchTest, LostRepliesAndTransientFailuresInAMultiJobBatch) {
  constexpr int kJobs = 6;
  int lost = 0, transient = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto base = std::make_shared<litetx::MemoryStore>();
    const std::uint64_t v0 = FirstVersionAt(*clock);
    {
      litetx::Database seeder(base, Opts());
      Transaction t;
      for (int i = 0; i < kJobs; ++i) t.Insert("c", K(i), {{"n", 0}}).Insert("c", M(i), {{"n", 0}});
      MustCommit(seeder, t);
    }
    std::mutex mu;
    std::mt19937_64 rng(seed);
    std::atomic<bool> armed{false};
    litetx::FaultOptions f;
    f.rule = [&](litetx::StoreOp op, const Key&, std::uint64_t) {
      if (!armed.load()) return litetx::Fault::kNone;
      std::lock_guard<std::mutex> lock(mu);
      const int roll = static_cast<int>(rng() % 100);
      const bool write = op == litetx::StoreOp::kCreate || op == litetx::StoreOp::kReplace ||
                         op == litetx::StoreOp::kErase;
      if (write && roll < 30) return litetx::Fault::kLostReply;
      if (roll >= 80) return litetx::Fault::kTransient;
      return litetx::Fault::kNone;
    };
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(base, f);
    std::vector<std::string> ids;
    {
      litetx::Database db(faulty, Lingering(std::chrono::seconds(5)));
      for (int i = 0; i < kJobs; ++i) {
        auto r = db.Commit(Pair(i, 1));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ids.push_back(r->txn_id);
      }
      armed = true;
      Async flush([&] { db.Flush(); });
      ASSERT_TRUE(flush.Wait(5s)) << "Flush did not return";
      armed = false;
    }
    lost += static_cast<int>(faulty->lost_replies());
    transient += static_cast<int>(faulty->transient_faults());
    ExpectCommittedThenCollected(base, ids, v0);
    if (HasFatalFailure()) return;
    litetx::Database reader(base, Opts());
    for (int i = 0; i < kJobs; ++i) {
      EXPECT_EQ(BodyOf(*base, "c", K(i)), Obj(R"({"n":1})"));
      EXPECT_EQ(OutcomeOf(reader, ids[i]), TxnOutcome::kCommitted);
    }
  }
  std::printf("[ info ] finisher batches met %d lost replies and %d transient failures\n", lost,
              transient);
  EXPECT_GT(lost, 0);
  EXPECT_GT(transient, 0);
}

// Two committed transactions on one document in the queue at once: A's committing thread
// stalls between its flip and handing A to the finisher; B meets A's hold, finds no job to
// help (not queued yet), settles the document itself, commits and queues; then A is queued.
// One worker then takes both. Both outcomes stand and nothing is left held. Returns the keys
// that a batch sent to the store named twice.
std::vector<Key> TwoQueuedOnOneDocument(FinisherWorld& w) {
  Transaction seed;
  for (const char* id : {"k0", "k1", "k2"}) seed.Insert("c", id, {{"n", 0}});
  MustCommit(*w.direct, seed);
  auto spy = std::make_shared<BatchSpy>(w.hook);
  Gate gate;
  std::atomic<bool> armed{true};
  w.hook->after = [&](const Call& c, const Status& st) -> std::optional<Status> {
    if (st.ok() && c.is_commit_point() && armed.exchange(false)) gate.Hold();
    return std::nullopt;
  };
  litetx::Options o = w.Background();
  o.finisher_threads = 1;
  o.finisher_linger = std::chrono::seconds(5);
  o.parallel_commit = false;  // the flip is the committing thread's own write
  litetx::Database db(spy, o);
  litetx::Result<litetx::CommitInfo> a = Status::Unknown("");
  {
    Async ta([&] {
      a = db.Commit(Transaction().Adjust("c", "k0", {{"n", 1}}).Adjust("c", "k1", {{"n", 1}}));
    });
    EXPECT_TRUE(gate.WaitHeld(1));
    auto b = db.Commit(Transaction().Adjust("c", "k0", {{"n", 10}}).Adjust("c", "k2", {{"n", 1}}));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    gate.Open();
    EXPECT_TRUE(ta.Wait(5s));
  }
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  {
    Async flush([&] { db.Flush(); });
    EXPECT_TRUE(flush.Wait(5s));
  }
  ExpectClean(*w.mem, {"c"});
  EXPECT_EQ(BodyOf(*w.mem, "c", "k0"), Obj(R"({"n":11})"));
  EXPECT_EQ(BodyOf(*w.mem, "c", "k1"), Obj(R"({"n":1})"));
  EXPECT_EQ(BodyOf(*w.mem, "c", "k2"), Obj(R"({"n":1})"));
  return spy->duplicates();
}

TEST_F(FinisherBatchTest, TwoQueuedTransactionsOnOneDocumentBothStand) {
  const std::vector<Key> dups = TwoQueuedOnOneDocument(*this);
  std::printf("[ info ] keys named twice in one finisher batch: %zu\n", dups.size());
}

// The same schedule: the store contract (litetx/store.h, Store::Batch) says the engine never
// sends two operations on one key in a batch; the finisher's batch of documents does here.
TEST_F(FinisherBatchTest, TwoQueuedTransactionsOnOneDocumentAreNotBatchedOnOneKey) {
  std::string dups;
  for (const Key& k : TwoQueuedOnOneDocument(*this)) dups += " " + k.collection + "/" + k.id;
  EXPECT_EQ(dups, "") << "a batch named these keys twice";
}

// A worker is stuck in the middle of a batch (one document's finish does not return). A
// transaction that meets a document of another job of that batch waits for it at most the
// busy timeout, then settles the document itself and commits; once the store answers again
// the worker ends every job, and everything is consistent.
TEST_F(FinisherBatchTest, HelperMeetingAJobOfAStuckBatchWaitsAtMostTheBusyTimeout) {
  SeedKeys(3);
  Gate gate;
  std::atomic<bool> armed{false};
  hook->before = [&](const Call& c) -> std::optional<Status> {
    // The finish of k0 (the first document of the batch): the second Replace of k0.
    if (c.op == Op::kReplace && c.key == Key{"c", K(0)} && c.nth == 2 && armed.load()) {
      gate.Hold();
    }
    return std::nullopt;
  };
  litetx::Options o = Lingering(std::chrono::seconds(5));
  o.busy_timeout = 200ms;
  litetx::Database db(hook, o);
  auto t0 = db.Commit(Pair(0, 1));
  auto t1 = db.Commit(Pair(1, 1));
  ASSERT_TRUE(t0.ok() && t1.ok());
  armed = true;
  Async flush([&] { db.Flush(); });
  ASSERT_TRUE(gate.WaitHeld(1));  // the worker holds both jobs; k1 still held by t1
  ASSERT_EQ(MetaOf(*mem, "c", K(1)).txn, t1->txn_id);
  const auto start = std::chrono::steady_clock::now();
  litetx::Result<litetx::CommitInfo> t2 = Status::Unknown("");
  std::atomic<long long> ms{-1};
  {
    Async commit([&] {
      t2 = db.Commit(Transaction().Adjust("c", K(1), {{"n", 10}}).Adjust("c", K(2), {{"n", 1}}));
      ms = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - start)
               .count();
    });
    const bool ended = commit.Wait(3s);
    gate.Open();  // (also lets a commit that waits on the worker go on, so that the test ends)
    ASSERT_TRUE(ended) << "the commit waited for the stuck batch";
  }
  ASSERT_TRUE(t2.ok()) << t2.status().ToString();
  std::printf("[ info ] a commit meeting a job of a stuck batch took %lld ms (busy timeout 200)\n",
              ms.load());
  EXPECT_GE(ms.load(), 150);  // it did wait for the worker first
  ASSERT_TRUE(flush.Wait(5s));
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(BodyOf(*mem, "c", K(0)), Obj(R"({"n":1})"));
  EXPECT_EQ(BodyOf(*mem, "c", K(1)), Obj(R"({"n":11})"));
  EXPECT_EQ(BodyOf(*mem, "c", M(1)), Obj(R"({"n":1})"));
  EXPECT_EQ(BodyOf(*mem, "c", K(2)), Obj(R"({"n":1})"));
  for (const auto& id : {t0->txn_id, t1->txn_id, t2->txn_id}) {
    EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  }
}

// A long linger never delays Flush or the destructor: both end the wait at once, from any
// number of threads committing and flushing at the same time.
TEST_F(FinisherBatchTest, LongLingerDelaysNeitherFlushNorTheDestructor) {
  SeedKeys(8);
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto db = std::make_unique<litetx::Database>(hook, Lingering(std::chrono::seconds(10), 2));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    std::atomic<int> failed{0};
    for (int w = 0; w < 4; ++w) {
      threads.emplace_back([&, w] {
        for (int i = 0; i < 5; ++i) {
          auto r = db->Commit(Pair(2 * w + i % 2, 1));
          if (!r.ok()) ++failed;
          if (i % 2 == 1) db->Flush();
        }
      });
    }
    for (auto& t : threads) t.join();
    if (round % 2 == 0) db->Flush();
    db.reset();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    EXPECT_EQ(failed.load(), 0);
    EXPECT_LT(ms, 3000) << "a 10 s linger held up Flush or the destructor";
    ExpectClean(*mem, {"c"});
  }
  int total = 0;
  for (int i = 0; i < 8; ++i) total += static_cast<int>(BodyOf(*mem, "c", K(i)).at("n").as_int64());
  EXPECT_EQ(total, 5 * 4 * 5);
}

// A burst of 8 commits on a finisher of 4 threads with a 100 ms linger: the first worker
// lingers; the others are not woken by Submit meanwhile. How long until every document is
// finished (without Flush, which ends lingering)? The lingering worker takes everything queued
// when its wait ends: about one linger. (A worker that took only a share, ceil(queued /
// threads), and lingered again for the rest would need about one linger per share: 400 ms.)
TEST_F(FinisherBatchTest, BurstIsFinishedWithinAboutOneLinger) {
  constexpr int kJobs = 8;
  SeedKeys(kJobs);
  litetx::Options o = Lingering(std::chrono::milliseconds(100), 4);
  litetx::Database db(mem, o);
  // Warm up: the workers are started, have finished a job and wait for the next one.
  ASSERT_TRUE(db.Commit(Pair(0, 1)).ok());
  db.Flush();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(db.Commit(Pair(i, 1)).ok());
  }
  long long ms = -1;
  for (int poll = 0; poll < 600; ++poll) {  // at most ~3 s
    bool held = false;
    for (int i = 0; i < kJobs && !held; ++i) {
      held = !MetaOf(*mem, "c", K(i)).txn.empty() || !MetaOf(*mem, "c", M(i)).txn.empty();
    }
    if (!held) {
      ms = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - start)
               .count();
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  std::printf("[ info ] 8 queued transactions finished after %lld ms (linger 100 ms, 4 threads)\n",
              ms);
  ASSERT_GE(ms, 0) << "not finished within 3 s";
  EXPECT_LT(ms, 350);
}

// ---------------------------------------------------------------------------------------------
// LMDB writer turn

// Map growth from a 64 KiB map while four threads write through two store objects on one
// directory (single calls and batches, the finisher's shape) and a second process writes to
// the same directory, growing the map under them (MDB_MAP_RESIZED). Every write lands, nothing
// deadlocks (a watchdog bounds the whole), and both processes see everything.
// Each round grows the map about 7 times; a writer that kept its turn while waiting for the
// resize would deadlock with a writer that holds the shared lock and waits for the turn, which
// a round hits about one time in three: 8 rounds.
void WriterTurnRound(int round);

TEST_F(FinisherBatchTest, WriterTurnSurvivesMapGrowthAcrossStoresThreadsAndAProcess) {
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    WriterTurnRound(round);
    if (HasFatalFailure()) return;
  }
}

void WriterTurnRound(int round) {
  TempDir dir;
  litetx::LmdbOptions lo;
  lo.initial_map_bytes = 64 << 10;
  lo.durability = litetx::LmdbDurability::kNoSync;
  auto blob = [](int n) {
    return json::object{{"n", n}, {"pad", std::string(8 << 10, static_cast<char>('a' + n % 26))}};
  };
  auto s1 = litetx::LmdbStore::Open(dir.str(), lo);
  ASSERT_TRUE(s1.ok()) << s1.status().ToString();
  auto s2 = litetx::LmdbStore::Open(dir.str(), lo);
  ASSERT_TRUE(s2.ok()) << s2.status().ToString();
  constexpr int kChild = 120, kThreads = 4, kEach = 40;
  std::fflush(nullptr);
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) std::_Exit(3);
    litetx::LmdbOptions co = lo;
    auto mine = litetx::LmdbStore::Open(dir.str(), co);
    // Open meets MDB_MAP_RESIZED (kUnavailable, "may be retried") when the parent grows the
    // map between Open's adoption of the recorded size and its first transaction.
    for (int retry = 0; retry < 200 && !mine.ok() && mine.code() == Code::kUnavailable; ++retry) {
      mine = litetx::LmdbStore::Open(dir.str(), co);
    }
    if (!mine.ok()) {
      std::fprintf(stderr, "child: %s\n", mine.status().ToString().c_str());
      std::_Exit(4);
    }
    for (int i = 0; i < kChild; ++i) {
      json::object v{{"n", i}, {"pad", std::string(20 << 10, 'c')}};
      if (!(*mine)->Create(Key{"child", std::to_string(1000 + i)}, v).ok()) std::_Exit(5);
    }
    std::_Exit(0);
  }
  ASSERT_GT(pid, 0);
  std::atomic<int> failures{0};
  {
    Async all([&] {
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          litetx::Store& s = t % 2 == 0 ? static_cast<litetx::Store&>(**s1) : **s2;
          for (int i = 0; i < kEach; ++i) {
            const std::string id = std::to_string(t) + "-" + std::to_string(1000 + i);
            if (i % 2 == 0) {
              if (!s.Create(Key{"p", id}, blob(i)).ok()) ++failures;
              continue;
            }
            json::object v1 = blob(i), v2 = blob(i + 1);
            std::vector<BatchOp> ops{BatchOp::Create(Key{"p", id}, v1),
                                     BatchOp::Create(Key{"q", id}, v2)};
            for (const BatchResult& r : s.Batch(ops)) {
              if (!r.status.ok()) ++failures;
            }
          }
        });
      }
      char c = 'g';
      if (::write(go[1], &c, 1) != 1) ++failures;
      for (auto& th : threads) th.join();
    });
    if (!all.Wait(20s)) {
      // Nothing can unblock deadlocked writers: end the run instead of hanging in ~Async.
      std::fprintf(stderr, "writers deadlocked on the LMDB store\n");
      std::abort();
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(go[0]);
  ::close(go[1]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ScanAll(**s2, "p", 64).size(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_EQ(ScanAll(**s1, "q", 64).size(), static_cast<std::size_t>(kThreads * kEach / 2));
  EXPECT_EQ(ScanAll(**s1, "child", 64).size(), static_cast<std::size_t>(kChild));
  if (round == 0) {
    std::printf("[ info ] map grew from 64 KiB to %zu KiB\n", (*s1)->map_bytes() >> 10);
  }
}

}  // namespace
}  // namespace ltxtest
