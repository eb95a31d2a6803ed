// tests/collector_test.cpp — the garbage collector (include/litetx/collector.h): stale pending
// transactions are claimed and reversed (with fencing of documents a paused coordinator has not
// written yet), committed-but-unfinished ones are finished, records become outcome markers that
// are purged after the outcome retention, old tombstones are purged; lease extension keeps live
// transactions safe; corrupt records and store outages are counted and skipped; two collectors
// at once and a collector crashing mid-repair leave a correct state; the background thread.
#include <atomic>
#include <chrono>
#include <climits>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::CollectorStats;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;

// Thrown by a store hook to simulate the death of the process making the call.
struct Crash {};

constexpr std::chrono::milliseconds kLease = 10s;

litetx::Options EngineOptions(const World& w) {
  litetx::Options o = w.Opts();
  o.lease = kLease;
  return o;
}

CollectorOptions GcOptions(const World& w, std::string name = "gc-test") {
  CollectorOptions o;
  o.engine = EngineOptions(w);
  o.name = std::move(name);
  return o;
}

// Documents before the transactions under test (one-action commits: no records, version V(1)):
//   c/u {"x":1,"y":"keep"}  c/d {"z":1}  c/a {"n":100}  c/b {"n":0}
//   c/e {"w":0}             c/f {"n":0}  c/g {"q":1}
void Seed(const World& w) {
  litetx::Database d(w.mem, EngineOptions(w));
  MustCommit(d, Transaction().Insert("c", "u", Obj(R"({"x":1,"y":"keep"})")));
  MustCommit(d, Transaction().Insert("c", "d", Obj(R"({"z":1})")));
  MustCommit(d, Transaction().Insert("c", "a", Obj(R"({"n":100})")));
  MustCommit(d, Transaction().Insert("c", "b", Obj(R"({"n":0})")));
  MustCommit(d, Transaction().Insert("c", "e", Obj(R"({"w":0})")));
  MustCommit(d, Transaction().Insert("c", "f", Obj(R"({"n":0})")));
  MustCommit(d, Transaction().Insert("c", "g", Obj(R"({"q":1})")));
}

// One action of each writing kind. Writes of its commit, in order: 1 record create, 2-5 applies
// (u, new, d, a), 6 commit flip, 7-10 finishes (u, new, d, a), 11 outcome marker.
Transaction Mixed() {
  return Transaction()
      .Update("c", "u", Obj(R"({"x":2})"), {"y"})
      .Insert("c", "new", Obj(R"({"k":1})"))
      .Delete("c", "d")
      .Adjust("c", "a", {{"n", -10}});
}
constexpr int kMixedApplied = 5;  // crash after this write: pending, every action applied
constexpr int kMixedFlipped = 6;  // crash after this write: committed, nothing finished

// Runs `txn` as a coordinator that dies (throws Crash) right after its k-th write lands.
// Returns the transaction's id.
std::string CrashAfterWrite(const World& w, const Transaction& txn, int k,
                            litetx::Options options) {
  auto hook = std::make_shared<HookStore>(w.mem);
  std::string id;
  int writes = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && s.ok()) id = c.key.id;
    if (c.is_write() && s.ok() && ++writes == k) throw Crash{};
    return std::nullopt;
  };
  litetx::Database db(hook, std::move(options));
  EXPECT_THROW((void)db.Commit(txn), Crash) << "the coordinator was to die after write " << k;
  EXPECT_FALSE(id.empty()) << "no transaction record was written";
  return id;
}
std::string CrashAfterWrite(const World& w, const Transaction& txn, int k) {
  return CrashAfterWrite(w, txn, k, EngineOptions(w));
}

// No document of collection `c` refers to `id` (as holder or as last writer).
void ExpectUnreferenced(litetx::Store& store, const std::string& id) {
  for (const auto& [doc_id, doc] : ScanAll(store, "c")) {
    auto m = litetx::engine::DecodeMeta(doc.value);
    ASSERT_TRUE(m.ok()) << doc_id;
    EXPECT_NE(m->txn, id) << "c/" << doc_id << " is still held by " << id;
    EXPECT_NE(m->last_writer, id) << "c/" << doc_id << " carries a write of " << id;
  }
}

// Mixed() rolled back after every action was applied: +2 versions (apply, reversal) on the
// existing documents; the insert leaves a "gone" placeholder.
void ExpectMixedReversed(litetx::Database& db, litetx::Store& store, std::int64_t at_ms) {
  EXPECT_EQ(ReadImage(db, "c", "u"), Found(V(3), Obj(R"({"x":1,"y":"keep"})")));
  EXPECT_EQ(ReadImage(db, "c", "new"), NotFoundImage());
  EXPECT_EQ(ReadImage(db, "c", "d"), Found(V(3), Obj(R"({"z":1})")));
  EXPECT_EQ(ReadImage(db, "c", "a"), Found(V(3), Obj(R"({"n":100})")));
  auto gone = MetaOf(store, "c", "new");
  EXPECT_TRUE(gone.gone);
  EXPECT_EQ(gone.version, V(2));
  EXPECT_EQ(gone.at_ms, at_ms);
  auto d = MetaOf(store, "c", "d");
  EXPECT_FALSE(d.deleting);
  EXPECT_FALSE(d.deleted);
  for (const char* id : {"u", "new", "d", "a"}) EXPECT_EQ(MetaOf(store, "c", id).txn, "") << id;
}

// Mixed() committed and finished.
void ExpectMixedCommitted(litetx::Database& db, litetx::Store& store, std::int64_t deleted_at) {
  EXPECT_EQ(ReadImage(db, "c", "u"), Found(V(2), Obj(R"({"x":2})")));
  EXPECT_EQ(ReadImage(db, "c", "new"), Found(V(1), Obj(R"({"k":1})")));
  EXPECT_EQ(ReadImage(db, "c", "d"), DeletedImage(V(3)));
  EXPECT_EQ(ReadImage(db, "c", "a"), Found(V(2), Obj(R"({"n":90})")));
  auto d = MetaOf(store, "c", "d");
  EXPECT_TRUE(d.deleted);
  EXPECT_FALSE(d.deleting);
  EXPECT_EQ(d.version, V(3));
  EXPECT_EQ(d.at_ms, deleted_at);
  for (const char* id : {"u", "new", "d", "a"}) EXPECT_EQ(MetaOf(store, "c", id).txn, "") << id;
}

class CollectorTest : public ::testing::Test, public World {
 protected:
  void SetUp() override { Seed(*this); }
  litetx::Options Eng() const { return EngineOptions(*this); }
  CollectorOptions Gc() const { return GcOptions(*this); }

  std::unique_ptr<litetx::Database> reader = std::make_unique<litetx::Database>(mem, Eng());
};

// ---------------------------------------------------------------------------------------------
// 1. Pending transactions

TEST_F(CollectorTest, PendingWithinLeaseIsLeftAloneThenClaimedAndReversed) {
  const std::int64_t t0 = clock->NowMillis();
  const std::string id = CrashAfterWrite(*this, Mixed(), kMixedApplied);
  ASSERT_EQ(OutcomeOf(*reader, id), TxnOutcome::kPending);
  auto rec = RecordOf(*mem, id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->gc_at_ms, t0 + kLease.count());

  CollectorOptions o = Gc();
  o.fold_outcomes = false;  // the marker's own fields are checked below
  Collector gc(mem, o);
  // Just before the GC timestamp: nothing is touched.
  clock->Advance(kLease - 1ms);
  Dump before = DumpStore(*mem, {"c"});
  ASSERT_TRUE(gc.RunOnce().ok());
  CollectorStats s = gc.stats();
  EXPECT_EQ(s.runs, 1u);
  EXPECT_EQ(s.finished, 0u);
  EXPECT_EQ(s.reversed, 0u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.purged, 0u);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
  for (const char* doc : {"u", "new", "d", "a"}) EXPECT_EQ(MetaOf(*mem, "c", doc).txn, id) << doc;
  EXPECT_EQ(MetaOf(*mem, "c", "d").deleting, true);
  // Readers see the pre-images meanwhile.
  EXPECT_EQ(ReadImage(*reader, "c", "u"), Found(V(1), Obj(R"({"x":1,"y":"keep"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "new"), NotFoundImage());
  EXPECT_EQ(ReadImage(*reader, "c", "d"), Found(V(1), Obj(R"({"z":1})")));
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kPending);

  // At the GC timestamp it is stale: claimed and rolled back.
  clock->Advance(1ms);
  const std::int64_t now = clock->NowMillis();
  ASSERT_TRUE(gc.RunOnce().ok());
  s = gc.stats();
  EXPECT_EQ(s.runs, 2u);
  EXPECT_EQ(s.reversed, 1u);
  EXPECT_EQ(s.finished, 0u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.purged, 0u);
  ExpectMixedReversed(*reader, *mem, now);
  ExpectUnreferenced(*mem, id);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(RecordCount(*mem), 0u);
  EXPECT_EQ(MarkerCount(*mem), 1u);
  auto marker = RecordOf(*mem, id);
  ASSERT_TRUE(marker.has_value());
  EXPECT_TRUE(marker->done);
  EXPECT_EQ(marker->done_at_ms, now);
  EXPECT_EQ(marker->state, TxnState::kAborted);
  EXPECT_EQ(marker->aborted_by, "gc-test");
  EXPECT_TRUE(marker->actions.empty());
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kAborted);

  // A further run has nothing to do and writes nothing.
  Dump after = DumpStore(*mem, {"c"});
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_TRUE(SameDump(after, DumpStore(*mem, {"c"})));
}

TEST_F(CollectorTest, PartiallyAppliedPendingIsReversedAndTheRestFenced) {
  // The coordinator died after applying u and new; d and a were never written.
  const Revision d_rev = RevisionOf(*mem, {"c", "d"});
  const Revision a_rev = RevisionOf(*mem, {"c", "a"});
  const std::string id = CrashAfterWrite(*this, Mixed(), 3);
  EXPECT_EQ(MetaOf(*mem, "c", "u").txn, id);
  EXPECT_EQ(MetaOf(*mem, "c", "new").txn, id);
  EXPECT_EQ(MetaOf(*mem, "c", "d").txn, "");
  clock->Advance(kLease);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_EQ(gc.stats().failed, 0u);
  EXPECT_EQ(ReadImage(*reader, "c", "u"), Found(V(3), Obj(R"({"x":1,"y":"keep"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "new"), NotFoundImage());
  EXPECT_TRUE(MetaOf(*mem, "c", "new").gone);
  // Never written: same image, but rewritten (fenced) so the revision the coordinator read is
  // gone.
  EXPECT_EQ(ReadImage(*reader, "c", "d"), Found(V(1), Obj(R"({"z":1})")));
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  EXPECT_NE(RevisionOf(*mem, {"c", "d"}), d_rev);
  EXPECT_NE(RevisionOf(*mem, {"c", "a"}), a_rev);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kAborted);
}

TEST_F(CollectorTest, RecordOnlyPendingIsClaimedAndEveryDocumentFenced) {
  // The coordinator died right after creating its record.
  const std::string id = CrashAfterWrite(*this, Mixed(), 1);
  clock->Advance(kLease);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_EQ(ReadImage(*reader, "c", "u"), Found(V(1), Obj(R"({"x":1,"y":"keep"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "new"), NotFoundImage());
  auto placeholder = MetaOf(*mem, "c", "new");
  EXPECT_TRUE(placeholder.gone);
  EXPECT_EQ(placeholder.at_ms, clock->NowMillis());
  EXPECT_EQ(ReadImage(*reader, "c", "d"), Found(V(1), Obj(R"({"z":1})")));
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kAborted);
  // The placeholder does not stand in the way of a later insert.
  auto r = reader->Commit(Transaction().Insert("c", "new", Obj(R"({"k":9})")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*reader, "c", "new").doc, Obj(R"({"k":9})"));
}

// ---------------------------------------------------------------------------------------------
// 2. Committed but unfinished transactions

TEST_F(CollectorTest, CommittedButUnfinishedIsFinished) {
  // The coordinator dies after the commit flip, then after each document it finished.
  for (int k = kMixedFlipped; k < kMixedFlipped + 5; ++k) {
    SCOPED_TRACE("coordinator died after write " + std::to_string(k));
    World w;
    Seed(w);
    litetx::Database db(w.mem, EngineOptions(w));
    const std::string id = CrashAfterWrite(w, Mixed(), k);
    EXPECT_EQ(OutcomeOf(db, id), TxnOutcome::kCommitted);
    EXPECT_EQ(RecordCount(*w.mem), 1u);
    // Committed: readers already see the new images.
    EXPECT_EQ(ReadImage(db, "c", "a"), Found(V(2), Obj(R"({"n":90})")));
    EXPECT_EQ(ReadImage(db, "c", "d"), DeletedImage(V(3)));

    Collector gc(w.mem, GcOptions(w));
    ASSERT_TRUE(gc.RunOnce().ok());  // within the lease: untouched
    EXPECT_EQ(gc.stats().finished, 0u);
    EXPECT_EQ(RecordCount(*w.mem), 1u);

    w.clock->Advance(kLease);
    ASSERT_TRUE(gc.RunOnce().ok());
    CollectorStats s = gc.stats();
    EXPECT_EQ(s.finished, 1u);
    EXPECT_EQ(s.reversed, 0u);
    EXPECT_EQ(s.failed, 0u);
    // The delete was finished by the collector only if the coordinator had not got to it
    // (write 9 finishes d): its tombstone time tells who did.
    const std::int64_t deleted_at = k >= 9 ? w.clock->NowMillis() - kLease.count()
                                           : w.clock->NowMillis();
    ExpectMixedCommitted(db, *w.mem, deleted_at);
    ExpectClean(*w.mem, {"c"});
    EXPECT_EQ(MarkerCount(*w.mem), 1u);
    auto marker = RecordOf(*w.mem, id);
    ASSERT_TRUE(marker.has_value());
    EXPECT_TRUE(marker->done);
    EXPECT_EQ(marker->state, TxnState::kCommitted);
    EXPECT_EQ(OutcomeOf(db, id), TxnOutcome::kCommitted);
  }
}

// ---------------------------------------------------------------------------------------------
// 3. older_than

TEST_F(CollectorTest, OlderThanMakesAYoungPendingTransactionStale) {
  const std::string id = CrashAfterWrite(*this, Mixed(), kMixedApplied);
  clock->Advance(2s);  // well within the 10 s lease
  Dump before = DumpStore(*mem, {"c"});

  Collector plain(mem, Gc());
  ASSERT_TRUE(plain.RunOnce().ok());
  CollectorOptions patient_opts = Gc();
  patient_opts.older_than = 5s;
  Collector patient(mem, patient_opts);
  ASSERT_TRUE(patient.RunOnce().ok());
  EXPECT_EQ(plain.stats().reversed + patient.stats().reversed, 0u);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kPending);

  CollectorOptions eager_opts = Gc();
  eager_opts.older_than = 2s;
  Collector eager(mem, eager_opts);
  ASSERT_TRUE(eager.RunOnce().ok());
  EXPECT_EQ(eager.stats().reversed, 1u);
  EXPECT_EQ(eager.stats().failed, 0u);
  ExpectMixedReversed(*reader, *mem, clock->NowMillis());
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kAborted);
}

// ---------------------------------------------------------------------------------------------
// 4. Fencing a paused coordinator

// Runs `txn` in a thread whose coordinator blocks in its first `op` on `pause_key` (before the
// write reaches the store); meanwhile the lease passes and a collector runs. Returns what the
// coordinator's Commit reported once resumed, and the transaction id.
struct PausedRun {
  litetx::Result<litetx::CommitInfo> result = Status::Unknown("not run");
  std::string id;
  CollectorStats gc_stats;
};

// fold: whether the collector folds the outcome marker it writes into its outcome page (a test
// of the marker's own fields keeps it in the record collection).
PausedRun RunPausedPastLease(World& w, const Transaction& txn, Op op, const Key& pause_key,
                             const std::function<void()>& while_paused_checks, bool fold = true) {
  PausedRun out;
  auto hook = std::make_shared<HookStore>(w.mem);
  std::promise<void> paused_promise, release_promise;
  std::future<void> paused = paused_promise.get_future();
  std::shared_future<void> release = release_promise.get_future().share();
  std::string id;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) id = c.key.id;
    if (c.op == op && c.key == pause_key && c.nth == 1) {
      paused_promise.set_value();
      release.wait();
    }
    return std::nullopt;
  };
  litetx::Database db(hook, EngineOptions(w));
  std::thread coordinator([&] { out.result = db.Commit(txn); });
  const bool did_pause = paused.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(did_pause) << "the coordinator never reached its paused write";
  if (did_pause) {
    out.id = id;
    w.clock->Advance(kLease + 1ms);
    CollectorOptions o = GcOptions(w);
    o.fold_outcomes = fold;
    Collector gc(w.mem, o);
    EXPECT_TRUE(gc.RunOnce().ok());
    out.gc_stats = gc.stats();
    while_paused_checks();
  }
  release_promise.set_value();
  coordinator.join();
  return out;
}

TEST_F(CollectorTest, PausedCoordinatorIsFencedOnAnUpdate) {
  const Transaction transfer =
      Transaction().Adjust("c", "a", {{"n", -10}}).Adjust("c", "b", {{"n", 10}});
  const Revision b_rev = RevisionOf(*mem, {"c", "b"});
  PausedRun run = RunPausedPastLease(*this, transfer, Op::kReplace, Key{"c", "b"}, [&] {
    // The collector reversed a and fenced b (rewritten unchanged: new revision).
    EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":100})")));
    EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(1), Obj(R"({"n":0})")));
    EXPECT_NE(RevisionOf(*mem, {"c", "b"}), b_rev);
  });
  EXPECT_EQ(run.gc_stats.reversed, 1u);
  EXPECT_EQ(run.gc_stats.failed, 0u);
  // The resumed coordinator's late apply of c/b fails its CAS against the fence; it must report
  // that a collector rolled it back (kAborted), not the symptom (kConflict on c/b).
  EXPECT_EQ(run.result.code(), Code::kAborted) << run.result.status().ToString();
  EXPECT_FALSE(run.result.ok());
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":100})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(1), Obj(R"({"n":0})")));
  auto marker = RecordOf(*mem, run.id);
  ASSERT_TRUE(marker.has_value());
  EXPECT_TRUE(marker->done);
  EXPECT_EQ(marker->state, TxnState::kAborted);
  ExpectUnreferenced(*mem, run.id);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*reader, run.id), TxnOutcome::kAborted);
}

TEST_F(CollectorTest, PausedCoordinatorIsFencedOnAnInsert) {
  const Transaction txn =
      Transaction().Adjust("c", "a", {{"n", -10}}).Insert("c", "late", Obj(R"({"k":1})"));
  PausedRun run = RunPausedPastLease(*this, txn, Op::kCreate, Key{"c", "late"}, [&] {
    EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":100})")));
    // The key is taken by a "gone" placeholder: reads say not found.
    EXPECT_EQ(ReadImage(*reader, "c", "late"), NotFoundImage());
    EXPECT_TRUE(MetaOf(*mem, "c", "late").gone);
  });
  EXPECT_EQ(run.gc_stats.reversed, 1u);
  // The late Create fails against the placeholder: reported as kAborted, as above.
  EXPECT_EQ(run.result.code(), Code::kAborted) << run.result.status().ToString();
  EXPECT_FALSE(run.result.ok());
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":100})")));
  EXPECT_EQ(ReadImage(*reader, "c", "late"), NotFoundImage());
  auto placeholder = MetaOf(*mem, "c", "late");
  EXPECT_TRUE(placeholder.gone);
  EXPECT_EQ(placeholder.txn, "");
  EXPECT_EQ(placeholder.version, 0u);
  ExpectUnreferenced(*mem, run.id);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*reader, run.id), TxnOutcome::kAborted);
  // An insert over the fence starts from the clock, as one of an absent key does.
  clock->Advance(1ms);
  auto again = MustCommit(*reader, Transaction().Insert("c", "late", Obj(R"({"k":2})")));
  EXPECT_EQ(again.versions, std::vector<std::uint64_t>{FirstVersionAt(*clock)});
  EXPECT_EQ(ReadImage(*reader, "c", "late"), Found(FirstVersionAt(*clock), Obj(R"({"k":2})")));
}

// ENGINE BUG (reported; engine not patched here): when the resumed coordinator rolls back, its
// CommitRun::MarkAborted finds the collector's outcome marker (done, aborted, "by" = the
// collector) and adopts its revision, and CommitRun::Rollback then calls MarkDone, which
// replaces that marker with the coordinator's own (built from its original record: "by" empty,
// "done_at" reset). The record then no longer says who rolled the transaction back, against
// engine/record.h ("aborted_by: 'coordinator' or a collector's name").
TEST_F(CollectorTest, ResumedCoordinatorKeepsTheCollectorsOutcomeMarker) {
  const Transaction transfer =
      Transaction().Adjust("c", "a", {{"n", -10}}).Adjust("c", "b", {{"n", 10}});
  std::optional<TxnRecord> collector_marker;
  std::string id;
  PausedRun run = RunPausedPastLease(*this, transfer, Op::kReplace, Key{"c", "b"}, [&] {
    auto g = mem->Scan(litetx::kTransactionsCollection, "", 10);
    ASSERT_TRUE(g.ok());
    ASSERT_EQ(g->documents.size(), 1u);
    id = g->documents[0].first;
    collector_marker = RecordOf(*mem, id);
  }, /*fold=*/false);
  EXPECT_EQ(run.result.code(), Code::kAborted) << run.result.status().ToString();
  ASSERT_TRUE(collector_marker.has_value());
  EXPECT_TRUE(collector_marker->done);
  EXPECT_EQ(collector_marker->aborted_by, "gc-test");
  auto marker = RecordOf(*mem, id);
  ASSERT_TRUE(marker.has_value());
  EXPECT_TRUE(marker->done);
  EXPECT_EQ(marker->state, TxnState::kAborted);
  EXPECT_EQ(marker->aborted_by, "gc-test") << "the collector's outcome marker was overwritten";
  EXPECT_EQ(marker->done_at_ms, collector_marker->done_at_ms);
}

// ---------------------------------------------------------------------------------------------
// 5. Lease extension

TEST_F(CollectorTest, LeaseExtensionKeepsALiveTransactionFromTheCollector) {
  auto hook = std::make_shared<HookStore>(mem);
  std::string id;
  std::int64_t original_gc_at = 0;
  std::int64_t extended_gc_at = 0;
  CollectorStats during{};
  bool checked = false;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (!s.ok()) return std::nullopt;
    if (c.op == Op::kCreate && c.on_record()) {
      id = c.key.id;
      original_gc_at = c.value->at("gc_at").to_number<std::int64_t>();
      // Between the record create and the applies, 60% of the lease passes.
      clock->Advance(6s);
    }
    return std::nullopt;
  };
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "a"} && c.nth == 1) {
      // KeepLease ran before the applies: the record's gc_at moved out.
      auto rec = RecordOf(*mem, id);
      EXPECT_TRUE(rec.has_value());
      if (rec) {
        extended_gc_at = rec->gc_at_ms;
        EXPECT_EQ(rec->state, TxnState::kPending);
      }
      // A collector running at the original GC timestamp leaves it alone.
      clock->Advance(std::chrono::milliseconds(original_gc_at - clock->NowMillis()));
      Collector gc(mem, Gc());
      EXPECT_TRUE(gc.RunOnce().ok());
      during = gc.stats();
      auto still = RecordOf(*mem, id);
      EXPECT_TRUE(still.has_value() && still->state == TxnState::kPending);
      checked = true;
    }
    return std::nullopt;
  };
  litetx::Database db(hook, Eng());
  auto r = db.Commit(Transaction()
                         .Adjust("c", "a", {{"n", -10}})
                         .Adjust("c", "b", {{"n", 10}})
                         .Adjust("c", "f", {{"n", 1}}));
  ASSERT_TRUE(checked);
  EXPECT_GT(extended_gc_at, original_gc_at);
  EXPECT_EQ(extended_gc_at, original_gc_at + 6'000);  // now (start + 6 s) + lease
  EXPECT_EQ(during.reversed, 0u);
  EXPECT_EQ(during.finished, 0u);
  EXPECT_EQ(during.failed, 0u);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(2), Obj(R"({"n":90})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(2), Obj(R"({"n":10})")));
  EXPECT_EQ(ReadImage(*reader, "c", "f"), Found(V(2), Obj(R"({"n":1})")));
  ExpectClean(*mem, {"c"});
  auto marker = RecordOf(*mem, id);
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(marker->gc_at_ms, extended_gc_at);
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kCommitted);
}

// ---------------------------------------------------------------------------------------------
// 6. Corrupt records

TEST_F(CollectorTest, CorruptRecordIsSkippedAndTheRestRepaired) {
  // Scanned in id order: one corrupt record before the real ones, one after.
  PutRaw(*mem, TxnKey("0000corrupt"), Obj(R"({"state":"banana","actions":7})"));
  PutRaw(*mem, TxnKey("zzzzcorrupt"), Obj(R"({"garbage":true})"));
  const std::string pending = CrashAfterWrite(*this, Mixed(), kMixedApplied);
  const std::string committed = CrashAfterWrite(
      *this, Transaction().Adjust("c", "f", {{"n", 5}}).Delete("c", "g"), 4);
  clock->Advance(kLease);
  Collector gc(mem, Gc());
  Status s = gc.RunOnce();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  CollectorStats st = gc.stats();
  EXPECT_EQ(st.failed, 2u);
  EXPECT_EQ(st.reversed, 1u);
  EXPECT_EQ(st.finished, 1u);
  EXPECT_EQ(st.runs, 1u);
  ExpectMixedReversed(*reader, *mem, clock->NowMillis());
  EXPECT_EQ(ReadImage(*reader, "c", "f"), Found(V(2), Obj(R"({"n":5})")));
  EXPECT_EQ(ReadImage(*reader, "c", "g"), DeletedImage(V(3)));
  EXPECT_EQ(OutcomeOf(*reader, pending), TxnOutcome::kAborted);
  EXPECT_EQ(OutcomeOf(*reader, committed), TxnOutcome::kCommitted);
  // The corrupt records are left as they were.
  EXPECT_EQ(Raw(*mem, TxnKey("zzzzcorrupt")), Obj(R"({"garbage":true})"));
  EXPECT_EQ(RecordCount(*mem), 2u);

  // A later run still works: it repairs a new stale transaction and fails the same two.
  const std::string later = CrashAfterWrite(
      *this, Transaction().Adjust("c", "b", {{"n", 1}}).Update("c", "e", Obj(R"({"w":1})")), 3);
  clock->Advance(kLease);
  s = gc.RunOnce();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  st = gc.stats();
  EXPECT_EQ(st.failed, 4u);
  EXPECT_EQ(st.reversed, 2u);
  EXPECT_EQ(st.runs, 2u);
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(3), Obj(R"({"n":0})")));
  EXPECT_EQ(ReadImage(*reader, "c", "e"), Found(V(3), Obj(R"({"w":0})")));
  EXPECT_EQ(OutcomeOf(*reader, later), TxnOutcome::kAborted);
  ExpectUnreferenced(*mem, later);

  // Once the corrupt records are removed by hand, runs are clean again.
  for (const char* bad : {"0000corrupt", "zzzzcorrupt"}) {
    ASSERT_TRUE(mem->Erase(TxnKey(bad), RevisionOf(*mem, TxnKey(bad))).ok());
  }
  EXPECT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().failed, 4u);
  ExpectClean(*mem, {"c"});
}

TEST_F(CollectorTest, RecordNamingLitetxCollectionsIsCorruptAndNothingIsWritten) {
  // A hand-made aborted record whose worklist names another record and a reserved collection:
  // reversing or fencing it would write into litetx's own collections.
  const std::string victim = CrashAfterWrite(*this, Mixed(), kMixedApplied);
  const Revision victim_rev = RevisionOf(*mem, TxnKey(victim));
  PutRaw(*mem, TxnKey("0000hostile"),
         Obj(R"({"state":"aborted","created":0,"gc_at":0,"by":"x","actions":[
               {"op":"insert","c":"__litetx.txn","id":"zzzz-planted","prior":"absent","pv":0,"psv":0,"fields":{}},
               {"op":"insert","c":"__litetx.txn","id":")" + victim +
             R"(","prior":"absent","pv":0,"psv":0,"fields":{}},
               {"op":"insert","c":"__litetx.other","id":"k","prior":"absent","pv":0,"psv":0,"fields":{}}]})"));
  Collector gc(mem, Gc());
  Status s = gc.RunOnce();  // the victim is not stale yet: only the hostile record is looked at
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_EQ(gc.stats().failed, 1u);
  EXPECT_EQ(RevisionOf(*mem, TxnKey(victim)), victim_rev) << "the collector wrote into a record";
  EXPECT_FALSE(Raw(*mem, TxnKey("zzzz-planted")).has_value()) << "a fence was planted among the records";
  EXPECT_FALSE(Raw(*mem, "__litetx.other", "k").has_value());
}

TEST_F(CollectorTest, ExtremeTimestampsDoNotOverflow) {
  // Timestamps at the ends of the int64 range (damaged or hand-made documents): the collector
  // must neither overflow computing ages nor stop. INT64_MIN is infinitely old, INT64_MAX never
  // comes.
  PutRaw(*mem, TxnKey("old"), Obj(R"({"state":"aborted","created":-9223372036854775808,
      "gc_at":-9223372036854775808,"done":true,"done_at":-9223372036854775808,"actions":[]})"));
  PutRaw(*mem, TxnKey("future"), Obj(R"({"state":"aborted","created":9223372036854775807,
      "gc_at":9223372036854775807,"done":true,"done_at":9223372036854775807,"actions":[]})"));
  PutRaw(*mem, TxnKey("pending-old"), Obj(R"({"state":"pending","created":-9223372036854775808,
      "gc_at":9223372036854775807,"actions":[]})"));
  PutRaw(*mem, Key{"c", "tomb-old"}, Obj(R"({"_ltx":{"v":3,"sv":1,"del":true,"at":-9223372036854775808}})"));
  PutRaw(*mem, Key{"c", "tomb-future"}, Obj(R"({"_ltx":{"v":3,"sv":1,"del":true,"at":9223372036854775807}})"));
  CollectorOptions o = Gc();
  o.purge_collections = {"c"};
  o.older_than = 1h;
  Collector gc(mem, o);
  EXPECT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, TxnKey("old")).has_value());          // marker past retention: purged
  EXPECT_TRUE(Raw(*mem, TxnKey("future")).has_value());        // never old enough
  EXPECT_FALSE(Raw(*mem, "c", "tomb-old").has_value());        // purged
  EXPECT_TRUE(Raw(*mem, "c", "tomb-future").has_value());      // kept
  auto pending = RecordOf(*mem, "pending-old");                // older_than reached: settled
  ASSERT_TRUE(pending.has_value());
  EXPECT_TRUE(pending->done);
  EXPECT_EQ(pending->state, TxnState::kAborted);
}

// ---------------------------------------------------------------------------------------------
// 7. Store outage

TEST_F(CollectorTest, StoreOutageIsCountedAndALaterRunRepairs) {
  const std::string pending = CrashAfterWrite(*this, Mixed(), kMixedApplied);
  const std::string committed = CrashAfterWrite(
      *this, Transaction().Adjust("c", "f", {{"n", 5}}).Delete("c", "g"), 4);
  clock->Advance(kLease);

  enum class Outage { kNone, kTotal, kDocuments };
  std::atomic<Outage> outage{Outage::kTotal};
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [&](const Call& c) -> std::optional<Status> {
    Outage o = outage.load();
    if (o == Outage::kTotal || (o == Outage::kDocuments && !c.on_record())) {
      return Status::Unavailable("injected outage");
    }
    return std::nullopt;
  };
  CollectorOptions opts = Gc();
  opts.purge_collections = {"c"};
  Collector gc(hook, opts);

  // The whole store is down: the four scans fail (records, outcome pages, tombstone index,
  // sweep); nothing is written.
  Dump before = DumpStore(*mem, {"c"});
  Status s = gc.RunOnce();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_EQ(gc.stats().failed, 4u);
  EXPECT_EQ(gc.stats().reversed + gc.stats().finished, 0u);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));

  // Only the documents are unreachable: records are scanned (and the pending one claimed), but
  // neither transaction can be settled; the outcome page and tombstone index scans fail too
  // (the sweep waits for its sweep_interval).
  outage = Outage::kDocuments;
  s = gc.RunOnce();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_EQ(gc.stats().failed, 8u);
  EXPECT_EQ(gc.stats().reversed + gc.stats().finished, 0u);
  EXPECT_EQ(RecordCount(*mem), 2u);
  EXPECT_EQ(OutcomeOf(*reader, pending), TxnOutcome::kAborted);  // claimed
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, pending);
  // Readers still see the committed state meanwhile.
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  EXPECT_EQ(ReadImage(*reader, "c", "f"), Found(V(2), Obj(R"({"n":5})")));

  // Back up: a later run settles both.
  outage = Outage::kNone;
  s = gc.RunOnce();
  EXPECT_TRUE(s.ok()) << s.ToString();
  CollectorStats st = gc.stats();
  EXPECT_EQ(st.failed, 8u);
  EXPECT_EQ(st.reversed, 1u);
  EXPECT_EQ(st.finished, 1u);
  EXPECT_EQ(st.runs, 3u);
  ExpectMixedReversed(*reader, *mem, clock->NowMillis());
  EXPECT_EQ(ReadImage(*reader, "c", "f"), Found(V(2), Obj(R"({"n":5})")));
  EXPECT_EQ(ReadImage(*reader, "c", "g"), DeletedImage(V(3)));
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(OutcomeOf(*reader, pending), TxnOutcome::kAborted);
  EXPECT_EQ(OutcomeOf(*reader, committed), TxnOutcome::kCommitted);
}

// ---------------------------------------------------------------------------------------------
// 8. Two collectors at once

TEST(CollectorConcurrencyTest, TwoCollectorsSettleEveryTransactionExactlyOnce) {
  constexpr int kTxns = 50;
  constexpr std::int64_t kStart = 1000;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    World w;
    {
      litetx::Database d(w.mem, EngineOptions(w));
      for (int i = 0; i < kTxns; ++i) {
        MustCommit(d, Transaction().Insert("c", "p" + std::to_string(i), {{"n", kStart}}));
        MustCommit(d, Transaction().Insert("c", "q" + std::to_string(i), {{"n", kStart}}));
      }
    }
    // Transfer i moves i + 1 from p<i> to q<i>. i % 3 == 0: the coordinator died after the
    // commit flip (write 4); 1: after both applies (3); 2: after the first apply (2).
    std::vector<std::string> ids;
    int committed = 0;
    for (int i = 0; i < kTxns; ++i) {
      const std::string n = std::to_string(i);
      const int k = i % 3 == 0 ? 4 : i % 3 == 1 ? 3 : 2;
      committed += i % 3 == 0 ? 1 : 0;
      ids.push_back(CrashAfterWrite(
          w, Transaction().Adjust("c", "p" + n, {{"n", -(i + 1)}}).Adjust("c", "q" + n, {{"n", i + 1}}),
          k));
    }
    ASSERT_EQ(RecordCount(*w.mem), static_cast<std::size_t>(kTxns));
    w.clock->Advance(kLease);

    CollectorOptions o1 = GcOptions(w, "gc-one");
    CollectorOptions o2 = GcOptions(w, "gc-two");
    o1.scan_batch = 7;
    o2.scan_batch = 5;
    Collector one(w.mem, o1), two(w.mem, o2);
    std::latch go(2);
    Status s1, s2;
    std::thread t1([&] { go.arrive_and_wait(); s1 = one.RunOnce(); });
    std::thread t2([&] { go.arrive_and_wait(); s2 = two.RunOnce(); });
    t1.join();
    t2.join();
    EXPECT_TRUE(s1.ok()) << s1.ToString();
    EXPECT_TRUE(s2.ok()) << s2.ToString();
    const CollectorStats a = one.stats(), b = two.stats();
    EXPECT_EQ(a.failed + b.failed, 0u);
    // The outcome marker is written with a CAS on the record, so each transaction is counted
    // by exactly one of them.
    EXPECT_EQ(a.finished + b.finished, static_cast<std::uint64_t>(committed));
    EXPECT_EQ(a.reversed + b.reversed, static_cast<std::uint64_t>(kTxns - committed));
    ExpectClean(*w.mem, {"c"});
    EXPECT_EQ(MarkerCount(*w.mem), static_cast<std::size_t>(kTxns));

    litetx::Database db(w.mem, EngineOptions(w));
    std::int64_t total = 0;
    for (int i = 0; i < kTxns; ++i) {
      const std::string n = std::to_string(i);
      const bool was_committed = i % 3 == 0;
      const std::int64_t moved = was_committed ? i + 1 : 0;
      Image p = ReadImage(db, "c", "p" + n), q = ReadImage(db, "c", "q" + n);
      EXPECT_EQ(p.doc, json::object({{"n", kStart - moved}})) << "p" << n;
      EXPECT_EQ(q.doc, json::object({{"n", kStart + moved}})) << "q" << n;
      // Committed: +1 (apply). Reversed: +2 where the apply landed (apply, reversal), +0 for q
      // when the coordinator died before writing it (fenced only).
      EXPECT_EQ(p.version, was_committed ? V(2) : V(3)) << "p" << n;
      EXPECT_EQ(q.version, was_committed ? V(2) : i % 3 == 1 ? V(3) : V(1)) << "q" << n;
      total += p.doc.at("n").as_int64() + q.doc.at("n").as_int64();
      EXPECT_EQ(OutcomeOf(db, ids[i]), was_committed ? TxnOutcome::kCommitted : TxnOutcome::kAborted);
    }
    EXPECT_EQ(total, 2 * kStart * kTxns);
  }
}

// ---------------------------------------------------------------------------------------------
// 9. Retention: outcome markers and tombstones

TEST_F(CollectorTest, OutcomeMarkersArePurgedAfterTheRetention) {
  // A commit that the coordinator completes (its own marker) and one the collector reverses.
  auto done = MustCommit(*reader, Transaction().Adjust("c", "a", {{"n", -1}}).Adjust("c", "b", {{"n", 1}}));
  const std::int64_t t_done = clock->NowMillis();
  const std::string reversed = CrashAfterWrite(*this, Mixed(), 3);
  EXPECT_EQ(OutcomeOf(*reader, done.txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(MarkerCount(*mem), 1u);

  CollectorOptions opts = Gc();
  opts.outcome_retention = 1h;
  opts.fold_outcomes = false;  // markers in the record collection (outcome pages: outcome_pages_test)
  Collector gc(mem, opts);
  clock->Advance(kLease);
  const std::int64_t t_reversed = clock->NowMillis();
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_EQ(MarkerCount(*mem), 2u);
  EXPECT_EQ(gc.stats().purged, 0u);

  // Just before the first marker's retention ends: kept.
  clock->Advance(std::chrono::milliseconds(t_done + 3'600'000 - 1 - clock->NowMillis()));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 0u);
  EXPECT_EQ(OutcomeOf(*reader, done.txn_id), TxnOutcome::kCommitted);

  // At its end: the first one goes, the younger one stays.
  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 1u);
  EXPECT_EQ(OutcomeOf(*reader, done.txn_id), TxnOutcome::kNotFound);
  EXPECT_EQ(OutcomeOf(*reader, reversed), TxnOutcome::kAborted);
  EXPECT_EQ(MarkerCount(*mem), 1u);

  clock->Advance(std::chrono::milliseconds(t_reversed + 3'600'000 - clock->NowMillis()));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 2u);
  EXPECT_EQ(OutcomeOf(*reader, reversed), TxnOutcome::kNotFound);
  EXPECT_EQ(ScanAll(*mem, litetx::kTransactionsCollection).size(), 0u);
  EXPECT_EQ(gc.stats().failed, 0u);
  // Documents are untouched by the purge.
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(2), Obj(R"({"n":99})")));
}

TEST_F(CollectorTest, TombstonesArePurgedAfterTheRetention) {
  const std::int64_t t0 = clock->NowMillis();
  MustCommit(*reader, Transaction().Delete("c", "d"));  // tombstone at t0
  litetx::engine::Meta placeholder = LiveMeta(4, 0);  // a rolled-back insert's, at t0
  placeholder.gone = true;
  placeholder.at_ms = t0;
  PutMeta(*mem, {"c", "ph"}, {}, placeholder);
  litetx::engine::Meta undated = LiveMeta(2, 0);  // an old tombstone without a time: kept
  undated.deleted = true;
  PutMeta(*mem, {"c", "undated"}, {}, undated);
  clock->Advance(12h);
  MustCommit(*reader, Transaction().Delete("c", "b"));  // tombstone at t0 + 12 h
  EXPECT_EQ(MetaOf(*mem, "c", "d").at_ms, t0);
  EXPECT_EQ(MetaOf(*mem, "c", "b").at_ms, t0 + 12 * 3'600'000);

  CollectorOptions never_opts = Gc();
  never_opts.purge_collections = {"c"};
  never_opts.tombstone_retention = 0ms;
  Collector never(mem, never_opts);
  CollectorOptions opts = Gc();
  opts.purge_collections = {"c"};
  opts.tombstone_retention = 24h;
  opts.sweep_interval = 0ms;  // a sweep slice in every pass
  Collector gc(mem, opts);
  CollectorOptions other_opts = opts;
  other_opts.purge_collections = {"elsewhere"};
  Collector other(mem, other_opts);

  // Just before the retention of the older ones ends: nothing purged.
  clock->Advance(12h - 1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 0u);
  EXPECT_EQ(ReadImage(*reader, "c", "d"), DeletedImage(V(3)));

  clock->Advance(1ms);
  ASSERT_TRUE(never.RunOnce().ok());  // retention 0: never purges
  EXPECT_EQ(never.stats().purged, 0u);
  EXPECT_TRUE(Raw(*mem, "c", "d").has_value());
  // d's delete indexed its tombstone (docs/protocol.md §5.4): any collector purges it through
  // the tombstone index, whatever collections it sweeps. The placeholder (written here
  // directly, with no index entry) is only found by a sweep of "c".
  ASSERT_TRUE(other.RunOnce().ok());
  EXPECT_EQ(other.stats().purged, 1u);
  EXPECT_FALSE(Raw(*mem, "c", "d").has_value());
  EXPECT_TRUE(Raw(*mem, "c", "ph").has_value());

  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 1u);
  EXPECT_EQ(gc.stats().failed, 0u);
  EXPECT_FALSE(Raw(*mem, "c", "d").has_value());
  EXPECT_FALSE(Raw(*mem, "c", "ph").has_value());
  EXPECT_EQ(ReadImage(*reader, "c", "d"), NotFoundImage());
  EXPECT_EQ(ReadImage(*reader, "c", "ph"), NotFoundImage());
  // Younger than the retention, or of unknown age: kept. Live documents: kept.
  EXPECT_EQ(ReadImage(*reader, "c", "b"), DeletedImage(V(3)));
  EXPECT_EQ(ReadImage(*reader, "c", "undated"), DeletedImage(2));
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  EXPECT_EQ(ScanAll(*mem, "c").size(), 7u);  // u a b e f g undated

  // Much later: the second tombstone goes too; the retention-0 collector still purges nothing.
  clock->Advance(24h * 100);
  ASSERT_TRUE(never.RunOnce().ok());
  EXPECT_EQ(never.stats().purged, 0u);
  EXPECT_TRUE(Raw(*mem, "c", "b").has_value());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 2u);
  EXPECT_EQ(ReadImage(*reader, "c", "b"), NotFoundImage());
  EXPECT_EQ(ReadImage(*reader, "c", "undated"), DeletedImage(2));
}

TEST_F(CollectorTest, PlaceholderOfAReversedInsertIsPurgedLikeATombstone) {
  const std::string id = CrashAfterWrite(*this, Mixed(), kMixedApplied);
  clock->Advance(kLease);
  const std::int64_t reversed_at = clock->NowMillis();
  CollectorOptions opts = Gc();
  opts.purge_collections = {"c"};
  opts.tombstone_retention = 1h;
  opts.outcome_retention = 2h;
  Collector gc(mem, opts);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_EQ(gc.stats().purged, 0u);
  EXPECT_EQ(MetaOf(*mem, "c", "new").at_ms, reversed_at);
  clock->Advance(1h);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().purged, 1u);  // the placeholder; the marker is kept for 2 h
  EXPECT_FALSE(Raw(*mem, "c", "new").has_value());
  EXPECT_EQ(ReadImage(*reader, "c", "new"), NotFoundImage());
  EXPECT_EQ(OutcomeOf(*reader, id), TxnOutcome::kAborted);
  EXPECT_EQ(ReadImage(*reader, "c", "u"), Found(V(3), Obj(R"({"x":1,"y":"keep"})")));
}

// ---------------------------------------------------------------------------------------------
// 10. Background thread

// Polls `done` every millisecond for up to `limit`.
template <typename F>
bool WaitFor(F done, std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

TEST(CollectorBackgroundTest, StartRepairsStopsPromptlyAndIsIdempotent) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::Options eng;
  eng.clock = litetx::SystemClock();
  eng.lease = 1ms;
  eng.parallel_commit = false;  // the crash below falls after the record, before the flip
  litetx::Database db(mem, eng);
  // On the system clock: each insert's first version is the time in microseconds.
  const std::uint64_t a1 = MustCommit(db, Transaction().Insert("c", "a", {{"n", 100}})).versions.at(0);
  const std::uint64_t b1 = MustCommit(db, Transaction().Insert("c", "b", {{"n", 0}})).versions.at(0);
  EXPECT_GE(b1, a1);
  // A coordinator that dies right after its apply of c/b (any lease extension before it is
  // fine: the crash is keyed on the document, not on a write count).
  std::string id;
  {
    auto hook = std::make_shared<HookStore>(mem);
    hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.op == Op::kCreate && c.on_record() && s.ok()) id = c.key.id;
      if (s.ok() && c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1) throw Crash{};
      return std::nullopt;
    };
    litetx::Database dying(hook, eng);
    EXPECT_THROW((void)dying.Commit(Transaction().Adjust("c", "a", {{"n", -10}}).Adjust("c", "b", {{"n", 10}})),
                 Crash);
  }
  ASSERT_EQ(RecordCount(*mem), 1u);

  CollectorOptions opts;
  opts.engine = eng;
  opts.interval = 5ms;
  Collector gc(mem, opts);
  EXPECT_FALSE(gc.running());
  EXPECT_FALSE(gc.name().empty());  // a generated "gc-..." name
  EXPECT_EQ(gc.name().rfind("gc-", 0), 0u);
  gc.Start();
  gc.Start();  // no-op
  EXPECT_TRUE(gc.running());
  EXPECT_TRUE(WaitFor([&] { return gc.stats().reversed == 1; })) << "not repaired in 5 s";
  EXPECT_TRUE(WaitFor([&] { return gc.stats().runs >= 3; })) << "the loop does not repeat";
  EXPECT_TRUE(gc.running());
  const auto t0 = std::chrono::steady_clock::now();
  gc.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_FALSE(gc.running());
  gc.Stop();  // no-op
  EXPECT_FALSE(gc.running());
  const std::uint64_t runs = gc.stats().runs;
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(gc.stats().runs, runs) << "runs went on after Stop";
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_EQ(gc.stats().failed, 0u);
  EXPECT_EQ(ReadImage(db, "c", "a"), Found(a1 + 2, Obj(R"({"n":100})")));
  EXPECT_EQ(ReadImage(db, "c", "b"), Found(b1 + 2, Obj(R"({"n":0})")));
  ExpectClean(*mem, {"c"});
  auto outcome = db.Outcome(id);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, TxnOutcome::kAborted);

  // It can be started again after a Stop.
  gc.Start();
  EXPECT_TRUE(gc.running());
  EXPECT_TRUE(WaitFor([&] { return gc.stats().runs > runs; }));
  gc.Stop();
  EXPECT_FALSE(gc.running());
}

TEST(CollectorBackgroundTest, StopWakesALongPause) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  CollectorOptions opts;
  opts.interval = 1h;
  Collector gc(mem, opts);
  gc.Start();
  EXPECT_TRUE(gc.running());
  ASSERT_TRUE(WaitFor([&] { return gc.stats().runs >= 1; }));  // the first run is immediate
  const auto t0 = std::chrono::steady_clock::now();
  gc.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_FALSE(gc.running());
  EXPECT_EQ(gc.stats().runs, 1u);
}

TEST(CollectorBackgroundTest, DestructorStopsTheThread) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  auto hook = std::make_shared<HookStore>(mem);
  const std::string txns(litetx::kTransactionsCollection);
  CollectorOptions opts;
  opts.interval = 1ms;
  auto gc = std::make_unique<Collector>(hook, opts);
  gc->Start();
  ASSERT_TRUE(WaitFor([&] { return gc->stats().runs >= 2; }));
  const auto t0 = std::chrono::steady_clock::now();
  gc.reset();  // ~Collector stops and joins the thread
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  const int scans = hook->calls_in(Op::kScan, txns);
  EXPECT_GE(scans, 2);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(hook->calls_in(Op::kScan, txns), scans) << "the thread outlived its Collector";
}

// ---------------------------------------------------------------------------------------------
// 11. The collector itself crashing mid-repair

// Three stale transactions on distinct documents:
//   T1 Mixed(), died with every action applied (pending): claim, 4 reversals, marker = 6 writes;
//   T2 adjust b, insert new2, update e, died after applying b (pending): claim, 1 reversal,
//      2 fences, marker = 5 writes;
//   T3 adjust f, delete g, died after finishing f (committed): 1 finish, marker = 2 writes.
struct CrashScenario {
  std::string t1, t2, t3;
};

CrashScenario MakeCrashScenario(const World& w) {
  Seed(w);
  CrashScenario sc;
  sc.t1 = CrashAfterWrite(w, Mixed(), kMixedApplied);
  sc.t2 = CrashAfterWrite(w,
                          Transaction()
                              .Adjust("c", "b", {{"n", 5}})
                              .Insert("c", "new2", Obj(R"({"k":2})"))
                              .Update("c", "e", Obj(R"({"w":1})")),
                          2);
  sc.t3 = CrashAfterWrite(w, Transaction().Adjust("c", "f", {{"n", 1}}).Delete("c", "g"), 5);
  w.clock->Advance(kLease);
  return sc;
}

void ExpectCrashScenarioSettled(const World& w, const CrashScenario& sc) {
  litetx::Database db(w.mem, EngineOptions(w));
  ExpectMixedReversed(db, *w.mem, w.clock->NowMillis());
  EXPECT_EQ(ReadImage(db, "c", "b"), Found(V(3), Obj(R"({"n":0})")));
  EXPECT_EQ(ReadImage(db, "c", "new2"), NotFoundImage());
  EXPECT_TRUE(MetaOf(*w.mem, "c", "new2").gone);
  EXPECT_EQ(ReadImage(db, "c", "e"), Found(V(1), Obj(R"({"w":0})")));
  EXPECT_EQ(ReadImage(db, "c", "f"), Found(V(2), Obj(R"({"n":1})")));
  EXPECT_EQ(ReadImage(db, "c", "g"), DeletedImage(V(3)));
  ExpectClean(*w.mem, {"c"});
  EXPECT_EQ(MarkerCount(*w.mem), 3u);
  EXPECT_EQ(OutcomeOf(db, sc.t1), TxnOutcome::kAborted);
  EXPECT_EQ(OutcomeOf(db, sc.t2), TxnOutcome::kAborted);
  EXPECT_EQ(OutcomeOf(db, sc.t3), TxnOutcome::kCommitted);
  for (const std::string& id : {sc.t1, sc.t2}) ExpectUnreferenced(*w.mem, id);
}

// A collector over `w.mem` that dies (throws Crash) right after its k-th write lands.
struct CrashingCollector {
  CrashingCollector(const World& w, int k) : hook(std::make_shared<HookStore>(w.mem)) {
    hook->after = [this, k](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.is_write() && s.ok() && ++writes == k) throw Crash{};
      return std::nullopt;
    };
    gc = std::make_unique<Collector>(hook, GcOptions(w, "gc-doomed"));
  }
  std::shared_ptr<HookStore> hook;
  int writes = 0;
  std::unique_ptr<Collector> gc;
};

TEST(CollectorCrashTest, CrashAfterEveryWriteOfARepairIsFinishedByTheNextRun) {
  // How many writes a full repair takes.
  int total = 0;
  {
    World w;
    CrashScenario sc = MakeCrashScenario(w);
    CrashingCollector cc(w, INT_MAX);
    ASSERT_TRUE(cc.gc->RunOnce().ok());
    EXPECT_EQ(cc.gc->stats().reversed, 2u);
    EXPECT_EQ(cc.gc->stats().finished, 1u);
    total = cc.writes;
    ExpectCrashScenarioSettled(w, sc);
    // 6 + 5 + 2 (see CrashScenario), then the three markers are folded: one write per distinct
    // outcome page (the ids' partitions are random), one tombstone index entry per marker
    // (each names inserts rolled back or a delete committed), and one erase per marker.
    std::set<std::string> pages;
    for (const std::string& id : {sc.t1, sc.t2, sc.t3}) pages.insert(*litetx::engine::OutcomePageId(id));
    EXPECT_EQ(total, 13 + static_cast<int>(pages.size()) + 3 + 3);
    EXPECT_EQ(cc.gc->stats().folded, 3u);
    EXPECT_EQ(ScanAll(*w.mem, litetx::kTombstoneIndexCollection).size(), 3u);
  }
  ASSERT_GE(total, 20);

  // Each case makes new transactions, whose random partitions decide how many outcome pages
  // the fold writes: k runs until a case's pass needs fewer than k writes.
  for (int k = 1;; ++k) {
    ASSERT_LE(k, total + 3) << "the pass never ended";
    SCOPED_TRACE("collector died after write " + std::to_string(k));
    World w;
    CrashScenario sc = MakeCrashScenario(w);
    CrashingCollector cc(w, k);
    bool crashed = false;
    try {
      (void)cc.gc->RunOnce();
    } catch (const Crash&) {
      crashed = true;
    }
    if (!crashed) {
      EXPECT_GE(k, 20);  // 6 + 5 + 2 repairs, at least one page write, 3 entries, 3 erases
      ExpectCrashScenarioSettled(w, sc);
      break;
    }
    EXPECT_EQ(cc.writes, k);
    // Half-done, but every reader still sees a consistent committed state.
    litetx::Database db(w.mem, EngineOptions(w));
    EXPECT_EQ(ReadImage(db, "c", "a").doc, Obj(R"({"n":100})"));
    EXPECT_EQ(ReadImage(db, "c", "f").doc, Obj(R"({"n":1})"));

    Collector fresh(w.mem, GcOptions(w, "gc-fresh"));
    Status s = fresh.RunOnce();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(fresh.stats().failed, 0u);
    EXPECT_LE(fresh.stats().reversed, 2u);
    EXPECT_LE(fresh.stats().finished, 1u);
    ExpectCrashScenarioSettled(w, sc);
    // And the collector that crashed can run again (nothing left to do).
    cc.hook->after = nullptr;
    EXPECT_TRUE(cc.gc->RunOnce().ok());
    ExpectCrashScenarioSettled(w, sc);
  }
}

}  // namespace
}  // namespace ltxtest
