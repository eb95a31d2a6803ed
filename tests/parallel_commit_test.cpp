// tests/parallel_commit_test.cpp — the parallel commit (Options::parallel_commit): the staging
// record written in one batch with every apply, committed once all of them landed, flipped to
// committed afterwards. One test per outcome of that path, each provoked deterministically
// through store hooks (a write failed, delayed, lost before or after it landed, a coordinator
// that dies or is held between two writes), asserting the reported result, every write made and
// the record's state right after it, the stored documents, Database::Outcome before and after,
// and that the store is clean once a collector ran. Everything runs on a ManualClock.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "engine/record.h"
#include "engine/worklist.h"

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::CollectorStats;
using litetx::CountingStore;
using litetx::Database;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnState;

// Thrown by a store hook to simulate the death of the coordinator making the call.
struct Crash {};

// The ids of the documents the tests use (all in collection "c"); "n" starts absent.
const std::vector<std::string> kIds = {"a", "b", "c", "d", "n"};

// What the record of `id` is in `store` right now: "absent", or its state with "/done" for an
// outcome marker and "/fence" for a fence (a marker folded into its outcome page included).
std::string RecordState(litetx::Store& store, const std::string& id) {
  auto g = EffectiveRecord(store, id);
  if (!g.ok()) return "unreadable";
  if (!g->has_value()) return "absent";
  auto rec = litetx::engine::DecodeRecord((*g)->value);
  if (!rec.ok()) return "corrupt";
  std::string s = litetx::engine::TxnStateName(rec->state);
  if (rec->done) s += "/done";
  if (rec->fence) s += "/fence";
  return s;
}

// A write call in short: "R+staging" (record create), "R=committed" (record replace),
// "R=marker:aborted" (outcome marker), "+n" / "=a" / "-a" (document create / replace / erase).
std::string Describe(const Call& c) {
  const char* op = c.op == Op::kCreate ? "+" : c.op == Op::kReplace ? "=" : "-";
  if (!c.on_record()) return op + c.key.id;
  return std::string("R") + op + (c.is_marker() ? "marker:" : "") + c.record_state();
}

class ParallelCommitTest : public ::testing::Test, public World {
 protected:
  std::shared_ptr<HookStore> hook = std::make_shared<HookStore>(mem);
  std::shared_ptr<CountingStore> counting = std::make_shared<CountingStore>(hook);
  std::unique_ptr<Database> direct = Direct();

  // Every write that goes through `hook`, in order: Describe, then "!code" if it failed as the
  // caller saw it, or "~code" if it failed without reaching the store, then "@" and the
  // record's state in the store right after it. The transaction is the one whose record create
  // came first through the hook.
  std::mutex log_mu;
  std::vector<std::string> log;
  std::string txn;  // the id of that transaction
  // The tests' hooks: before_extra may fail a call (it is then not sent) or interfere;
  // after_extra may replace a result (e.g. kUnknown: the write landed, its reply was lost).
  HookStore::Before before_extra;
  HookStore::After after_extra;

  void SetUp() override {
    MustCommit(*direct, Transaction().Insert("c", "a", Obj(R"({"n":100})")));
    MustCommit(*direct, Transaction().Insert("c", "b", Obj(R"({"n":0})")));
    MustCommit(*direct, Transaction().Insert("c", "c", Obj(R"({"s":"x"})")));
    MustCommit(*direct, Transaction().Insert("c", "d", Obj(R"({"k":1})")));
    hook->before = [this](const Call& c) -> std::optional<Status> {
      if (c.is_write() && c.on_record() && c.op == Op::kCreate) {
        std::lock_guard<std::mutex> lock(log_mu);
        if (txn.empty()) txn = c.key.id;
      }
      auto failed = before_extra ? before_extra(c) : std::nullopt;
      if (failed && c.is_write()) Note(c, "~" + std::string(litetx::CodeName(failed->code())));
      return failed;
    };
    hook->after = [this](const Call& c, const Status& s) -> std::optional<Status> {
      auto over = after_extra ? after_extra(c, s) : std::nullopt;
      const Status& seen = over ? *over : s;
      if (c.is_write()) Note(c, seen.ok() ? "" : "!" + std::string(litetx::CodeName(seen.code())));
      return over;
    };
  }

  void Note(const Call& c, const std::string& result) {
    std::lock_guard<std::mutex> lock(log_mu);
    log.push_back(Describe(c) + result + "@" +
                  (txn.empty() ? std::string("?") : RecordState(*mem, txn)));
  }
  std::string Txn() {
    std::lock_guard<std::mutex> lock(log_mu);
    return txn;
  }
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(log_mu);
    return log;
  }
  void ResetLog() {
    std::lock_guard<std::mutex> lock(log_mu);
    log.clear();
    txn.clear();
    counting->Reset();
  }

  // The engine options under test: World's, with the parallel commit on (finishing inline).
  litetx::Options Par() const {
    litetx::Options o = Opts();
    o.parallel_commit = true;
    return o;
  }
  litetx::Options ParBackground() const {
    litetx::Options o = Par();
    o.finish_in_background = true;
    return o;
  }

  // One collector run over the records and collection "c"; its counters.
  CollectorStats Collect(std::chrono::milliseconds outcome_retention = std::chrono::hours(1)) {
    CollectorOptions o;
    o.engine = Par();
    o.name = "gc-test";
    o.collections = {"c"};
    o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    o.outcome_retention = outcome_retention;
    Collector gc(mem, o);
    Status s = gc.RunOnce();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return gc.stats();
  }
  void PastTheLease() { clock->Advance(Opts().lease + 1s); }

  // The read-committed image of every document, read through `direct`.
  std::map<std::string, Image> Images() {
    std::map<std::string, Image> out;
    for (const auto& id : kIds) out[id] = ReadImage(*direct, "c", id);
    return out;
  }
  // Images() before any transaction under test.
  static std::map<std::string, Image> Seeded() {
    return {{"a", Found(V(1), Obj(R"({"n":100})"))},
            {"b", Found(V(1), Obj(R"({"n":0})"))},
            {"c", Found(V(1), Obj(R"({"s":"x"})"))},
            {"d", Found(V(1), Obj(R"({"k":1})"))},
            {"n", NotFoundImage()}};
  }
  Dump DumpAll() { return DumpStore(*mem, {"c"}); }

  // Whether every document named is held by `id` in the store.
  bool AllHeldBy(const std::string& id, const std::vector<std::string>& docs) {
    for (const auto& d : docs) {
      if (MetaOf(*mem, "c", d).txn != id) return false;
    }
    return true;
  }

  // Runs `t` with the parallel commit on a coordinator that dies (throws Crash) right after
  // its k-th write landed. Returns the transaction's id.
  std::string CrashAfterWrite(const Transaction& t, int k) {
    auto h = std::make_shared<HookStore>(mem);
    std::string id;
    int writes = 0;
    h->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.op == Op::kCreate && c.on_record() && s.ok()) id = c.key.id;
      if (c.is_write() && s.ok() && ++writes == k) throw Crash{};
      return std::nullopt;
    };
    Database db(h, Par());
    EXPECT_THROW((void)db.Commit(t), Crash) << "the coordinator was to die after write " << k;
    EXPECT_EQ(writes, k);
    EXPECT_FALSE(id.empty()) << "no transaction record was written";
    return id;
  }
};

Transaction Transfer() {
  return Transaction().Adjust("c", "a", {{"n", -10}}).Adjust("c", "b", {{"n", 10}});
}
// Images() once Transfer() committed (nothing else written).
std::map<std::string, Image> Transferred() {
  auto m = std::map<std::string, Image>{{"a", Found(V(2), Obj(R"({"n":90})"))},
                                        {"b", Found(V(2), Obj(R"({"n":10})"))},
                                        {"c", Found(V(1), Obj(R"({"s":"x"})"))},
                                        {"d", Found(V(1), Obj(R"({"k":1})"))},
                                        {"n", NotFoundImage()}};
  return m;
}

// A store whose Batch runs its operations last to first (through its single calls, so that a
// HookStore under it sees each one): a store that does not run a batch in order (a cluster,
// each shard on its own) may land a parallel commit's applies before its record.
class ReversedBatchStore : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<litetx::BatchResult> Batch(std::span<const litetx::BatchOp> ops) override {
    std::vector<litetx::BatchResult> out(ops.size());
    for (std::size_t i = ops.size(); i-- > 0;) out[i] = std::move(Store::Batch(ops.subspan(i, 1))[0]);
    return out;
  }
};

// Opens a gate and joins a thread when the scope ends, so that a failed assertion never leaves
// a thread held (or a Database destructor waiting for one).
struct Release {
  Gate& gate;
  std::thread* thread = nullptr;
  ~Release() {
    gate.Open();
    if (thread != nullptr && thread->joinable()) thread->join();
  }
};

// ---------------------------------------------------------------------------------------------
// Round trips and writes.

// N = 2 and N = 4 write actions, finished inline: 5 round trips (the read batch, the record with
// every apply in one batch, the flip, the finish batch, the marker) and 2N+3 writes. The record
// is created first, staging; every apply lands while it is staging; the flip makes it committed
// before any document is finished; the marker comes last.
TEST_F(ParallelCommitTest, InlineCommitIsFiveRoundTripsAnd2NPlus3Writes) {
  Database db(counting, Par());

  MustCommit(db, Transfer());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b@staging",
                       "R=committed@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  auto n = counting->counts();
  EXPECT_EQ(n.round_trips, 5u);
  EXPECT_EQ(n.batches, 3u);  // reads, record + applies, finishes
  EXPECT_EQ(n.writes(), 7u);
  EXPECT_EQ(n.gets, 2u);
  EXPECT_EQ(Images(), Transferred());
  ExpectClean(*mem, {"c"});

  ResetLog();
  auto info = MustCommit(db, Transaction()
                                 .Adjust("c", "a", {{"n", -10}})
                                 .Update("c", "c", Obj(R"({"s":"y"})"))
                                 .Delete("c", "d")
                                 .Insert("c", "n", Obj(R"({"k":7})")));
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=c@staging", "=d@staging",
                       "+n@staging", "R=committed@committed", "=a@committed", "=c@committed",
                       "=d@committed", "=n@committed", "R=marker:committed@committed/done"}));
  n = counting->counts();
  EXPECT_EQ(n.round_trips, 5u);
  EXPECT_EQ(n.batches, 3u);
  EXPECT_EQ(n.writes(), 11u);  // 2*4 + 3
  EXPECT_EQ(n.creates, 2u);    // the record and the insert
  EXPECT_EQ(n.gets, 3u);       // not a: db wrote it last (the written-document cache)
  EXPECT_EQ(info.versions, (std::vector<std::uint64_t>{V(3), V(2), V(3), V(1)}));
  auto want = Transferred();
  want["a"] = Found(V(3), Obj(R"({"n":80})"));
  want["c"] = Found(V(2), Obj(R"({"s":"y"})"));
  want["d"] = DeletedImage(V(3));  // the pending delete, then the tombstone
  want["n"] = Found(V(1), Obj(R"({"k":7})"));
  EXPECT_EQ(Images(), want);
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
  EXPECT_EQ(MarkerCount(*mem), 2u);
}

// Finished in the background, with the finisher held before its flip: Commit has returned
// while the record is still staging; a reader finds every document held, proves the commit
// (the record then says committed) and reads the new images. The finisher's flip then finds the
// record committed and finishes from there: still 2N+3 writes, nothing written twice.
TEST_F(ParallelCommitTest, BackgroundCommitReturnsWhileStagingAndAReaderProvesIt) {
  Gate gate;
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point() && !once.exchange(true)) gate.Hold();
    return std::nullopt;
  };
  Database db(counting, ParBackground());
  Release release{gate};

  auto r = db.Commit(Transfer());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(gate.WaitHeld(1));
  EXPECT_EQ(RecordState(*mem, r->txn_id), "staging");
  EXPECT_TRUE(AllHeldBy(r->txn_id, {"a", "b"}));
  // Each hold carries its deadline: the record's GC timestamp, a lease from now.
  auto staging = RecordOf(*mem, r->txn_id);
  ASSERT_TRUE(staging.has_value());
  EXPECT_EQ(staging->gc_at_ms, clock->NowMillis() + Opts().lease.count());
  for (const char* d : {"a", "b"}) {
    EXPECT_EQ(litetx::engine::HoldDeadline(*Raw(*mem, "c", d)), staging->gc_at_ms) << d;
  }

  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(2), Obj(R"({"n":90})")));
  EXPECT_EQ(RecordState(*mem, r->txn_id), "committed") << "the reader did not record its proof";
  EXPECT_EQ(ReadImage(*direct, "c", "b"), Found(V(2), Obj(R"({"n":10})")));
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);

  gate.Open();
  db.Flush();
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b@staging",
                       "R=committed!conflict@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  EXPECT_EQ(counting->counts().writes(), 7u);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// A coordinator that dies right after its batch (every document held, the record staging).

// Before the lease the collector leaves it alone; after it, the collector proves it (every
// document held) and finishes it: committed, and it stays so.
TEST_F(ParallelCommitTest, CrashAfterTheBatchCollectorProvesItCommittedAfterTheLease) {
  const std::string id = CrashAfterWrite(Transfer(), 3);
  EXPECT_EQ(RecordState(*mem, id), "staging");
  EXPECT_TRUE(AllHeldBy(id, {"a", "b"}));

  Dump before = DumpAll();
  CollectorStats early = Collect();
  EXPECT_EQ(early.finished + early.reversed + early.undone, 0u);
  EXPECT_TRUE(SameDump(before, DumpAll())) << "the collector touched a live staging record";

  PastTheLease();
  CollectorStats late = Collect();
  EXPECT_EQ(late.finished, 1u);
  EXPECT_EQ(late.reversed, 0u);
  EXPECT_EQ(RecordState(*mem, id), "committed/done");
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_EQ(Images(), Transferred());
  ExpectClean(*mem, {"c"});

  clock->Advance(std::chrono::minutes(10));
  Collect();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_EQ(Images(), Transferred());
}

// Before the lease, a reader proves it: the new images, the record committed; the collector
// finishes it after the lease.
TEST_F(ParallelCommitTest, CrashAfterTheBatchReaderProvesItBeforeTheLease) {
  const std::string id = CrashAfterWrite(Transfer(), 3);
  ASSERT_EQ(RecordState(*mem, id), "staging");
  EXPECT_EQ(ReadImage(*direct, "c", "b"), Found(V(2), Obj(R"({"n":10})")));
  EXPECT_EQ(RecordState(*mem, id), "committed");
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_TRUE(AllHeldBy(id, {"a", "b"}));  // proven, not yet finished

  PastTheLease();
  EXPECT_EQ(Collect().finished, 1u);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// Before the lease, a writer that meets one of its documents proves it, finishes that document
// and writes over the committed image; the collector finishes the other after the lease.
TEST_F(ParallelCommitTest, CrashAfterTheBatchWriterProvesItBeforeTheLease) {
  const std::string id = CrashAfterWrite(Transfer(), 3);
  ASSERT_EQ(RecordState(*mem, id), "staging");
  Database writer(mem, Par());
  MustCommit(writer, Transaction().Adjust("c", "a", {{"n", 1}}).Update("c", "c", Obj(R"({"s":"w"})")));
  EXPECT_EQ(RecordState(*mem, id), "committed");
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, id);  // not the writer's: still held
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);

  PastTheLease();
  EXPECT_EQ(Collect().finished, 1u);
  auto want = Transferred();
  want["a"] = Found(V(3), Obj(R"({"n":91})"));
  want["c"] = Found(V(2), Obj(R"({"s":"w"})"));
  EXPECT_EQ(Images(), want);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// A coordinator that dies after its record and some applies.

// The record and the apply on "a" landed; the create of "n" was lost on its way and the
// coordinator died sending the apply on "b" (both captured, to be delivered late). Before the
// lease: Outcome says pending and writes nothing, a reader sees the before-image, the collector
// leaves it. After it, the collector fences "n" and "b", aborts the record and reverses "a".
// The late deliveries then fail their compare-and-swap.
TEST_F(ParallelCommitTest, CrashAfterSomeAppliesCollectorFencesAbortsAndLateAppliesFail) {
  auto h = std::make_shared<HookStore>(mem);
  std::string id;
  std::optional<json::object> late_n, late_b;
  Revision late_b_rev = 0;
  h->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) id = c.key.id;
    if (id.empty() || c.on_record()) return std::nullopt;
    if (c.op == Op::kCreate && c.key.id == "n") {
      late_n = *c.value;
      return Status::Unknown("lost on its way");
    }
    if (c.op == Op::kReplace && c.key.id == "b") {
      late_b = *c.value;
      late_b_rev = c.expected;
      throw Crash{};
    }
    return std::nullopt;
  };
  {
    Database db(h, Par());
    EXPECT_THROW((void)db.Commit(Transaction()
                                     .Adjust("c", "a", {{"n", -10}})
                                     .Insert("c", "n", Obj(R"({"k":1})"))
                                     .Adjust("c", "b", {{"n", 10}})),
                 Crash);
  }
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(late_n.has_value() && late_b.has_value());
  EXPECT_EQ(RecordState(*mem, id), "staging");
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, id);
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, "");
  EXPECT_FALSE(Raw(*mem, "c", "n").has_value());

  Dump before = DumpAll();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kPending);
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  CollectorStats early = Collect();
  EXPECT_EQ(early.finished + early.reversed + early.undone, 0u);
  EXPECT_TRUE(SameDump(before, DumpAll())) << "written before the lease";

  PastTheLease();
  CollectorStats late = Collect();
  EXPECT_EQ(late.reversed, 1u);
  EXPECT_EQ(late.finished, 0u);
  auto rec = RecordOf(*mem, id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kAborted);
  EXPECT_TRUE(rec->done);
  // Its marker was folded into its outcome page in the same pass (which does not keep who
  // rolled it back: "by").
  EXPECT_EQ(late.folded, 1u);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));  // applied, then reversed
  EXPECT_EQ(Images(), want);
  EXPECT_TRUE(MetaOf(*mem, "c", "n").gone) << "the absent key was not fenced";
  ExpectClean(*mem, {"c"});

  Dump settled = DumpAll();
  EXPECT_EQ(mem->Create(Key{"c", "n"}, *late_n).code(), Code::kConflict);
  EXPECT_EQ(mem->Replace(Key{"c", "b"}, late_b_rev, *late_b).code(), Code::kConflict);
  EXPECT_TRUE(SameDump(settled, DumpAll())) << "a late apply landed";
  clock->Advance(std::chrono::minutes(10));
  Collect();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  EXPECT_EQ(Images(), want);
}

// ---------------------------------------------------------------------------------------------
// An apply conflict: the fallback to the classic path.

// Another writer changes "b" between the coordinator's read and its batch: the apply on "b"
// fails its compare-and-swap; the coordinator moves its record staging -> pending, reads "b"
// again, records the new reversing data, applies it, and commits the classic way. Writes: 2N+3
// plus the fallback, the record update and the second apply.
TEST_F(ParallelCommitTest, ApplyConflictFallsBackToPendingAndCommits) {
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && !once.exchange(true)) {
      MustCommit(*direct, Transaction().Adjust("c", "b", {{"n", 5}}));
    }
    return std::nullopt;
  };
  Database db(counting, Par());
  auto info = MustCommit(db, Transfer());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b!conflict@staging",
                       "R=pending@pending", "R=pending@pending", "=b@pending",
                       "R=committed@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  auto n = counting->counts();
  EXPECT_EQ(n.writes(), 10u);  // 2N+3 + fallback + record update + the apply again
  EXPECT_EQ(n.round_trips, 9u);
  auto want = Transferred();
  want["b"] = Found(V(3), Obj(R"({"n":15})"));
  EXPECT_EQ(Images(), want);
  EXPECT_EQ(info.versions, (std::vector<std::uint64_t>{V(2), V(3)}));
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// An insert whose key was made live by another writer between the read and the batch: after
// the fallback its precondition fails. kConflict; the record is settled aborted (by the
// coordinator), "a" reversed, the other writer's "n" untouched.
TEST_F(ParallelCommitTest, PreconditionFailureAfterFallbackReportsConflictAndRollsBack) {
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && !once.exchange(true)) {
      MustCommit(*direct, Transaction().Insert("c", "n", Obj(R"({"k":2})")));
    }
    return std::nullopt;
  };
  Database db(counting, Par());
  auto r = db.Commit(Transaction().Insert("c", "n", Obj(R"({"k":1})")).Adjust("c", "a", {{"n", -10}}));
  ASSERT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  const std::string id = r.status().txn_id();
  ASSERT_EQ(id, Txn());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "+n!conflict@staging", "=a@staging",
                       "R=pending@pending", "R=aborted@aborted", "=a@aborted",
                       "R=marker:aborted@aborted/done"}));
  auto rec = RecordOf(*mem, id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_TRUE(rec->done);
  EXPECT_EQ(rec->state, TxnState::kAborted);
  EXPECT_EQ(rec->aborted_by, "coordinator");
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));
  want["n"] = Found(V(1), Obj(R"({"k":2})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
  PastTheLease();
  Collect();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  EXPECT_EQ(Images(), want);
}

// The coordinator is held before its fallback (an apply conflict) until a collector past the
// lease has fenced the document it did not hold, aborted the record and reversed the other:
// the fallback's compare-and-swap finds the record aborted, and the coordinator reports
// kAborted; none of its writes after the release lands (its reversal of "a" finds it
// reversed already).
TEST_F(ParallelCommitTest, FallbackFindsTheRecordAbortedByACollector) {
  Gate gate;
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.record_state() == "staging") {
      MustCommit(*direct, Transaction().Adjust("c", "b", {{"n", 5}}));
    }
    if (c.op == Op::kReplace && c.record_state() == "pending" && !once.exchange(true)) gate.Hold();
    return std::nullopt;
  };
  Database db(counting, Par());
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  std::thread coordinator([&] { r = db.Commit(Transfer()); });
  Release release{gate, &coordinator};
  ASSERT_TRUE(gate.WaitHeld(1));
  const std::string id = Txn();
  EXPECT_EQ(RecordState(*mem, id), "staging");

  PastTheLease();
  EXPECT_EQ(Collect().reversed, 1u);
  EXPECT_EQ(RecordState(*mem, id), "aborted/done");
  Dump settled = DumpAll();

  gate.Open();
  coordinator.join();
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b!conflict@staging",
                       "R=pending!conflict@aborted/done", "R=aborted!conflict@aborted/done",
                       "=a!conflict@aborted/done"}));
  EXPECT_TRUE(SameDump(settled, DumpAll()));
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));
  want["b"] = Found(V(2), Obj(R"({"n":5})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// The record create: a lost reply, a create that never lands.

// It landed: the coordinator reads it back, finds its own record and goes on: committed, with
// one read more and no write more.
TEST_F(ParallelCommitTest, LostReplyOnALandedRecordCreateIsAdopted) {
  after_extra = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.nth == 1 && s.ok()) {
      return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };
  Database db(counting, Par());
  auto info = MustCommit(db, Transfer());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging!unknown@staging", "=a@staging", "=b@staging",
                       "R=committed@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  EXPECT_EQ(counting->counts().writes(), 7u);
  EXPECT_EQ(counting->counts().round_trips, 6u);  // the record read back
  EXPECT_EQ(hook->calls(Op::kGet, TxnKey(info.txn_id)), 1);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// It never landed (lost on its way; delivered late): the coordinator finds no record, fences
// it with an aborted outcome marker of its own ("fence": true), reverses both applies and
// reports kUnavailable. The late record create fails; a collector with an outcome retention of
// zero purges an ordinary marker but never the fence.
TEST_F(ParallelCommitTest, LostRecordCreateNotLandedIsFencedByTheCoordinator) {
  // An ordinary outcome marker, for the collector to purge.
  auto seeded = MustCommit(*direct, Transaction().Update("c", "c", Obj(R"({"s":"y"})")).Update("c", "d", Obj(R"({"k":2})")));
  ASSERT_EQ(RecordState(*mem, seeded.txn_id), "committed/done");

  std::optional<json::object> late_record;
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.record_state() == "staging" && !late_record) {
      late_record = *c.value;
      return Status::Unknown("lost on its way");
    }
    return std::nullopt;
  };
  Database db(counting, Par());
  auto r = db.Commit(Transfer());
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  const std::string id = r.status().txn_id();
  ASSERT_EQ(id, Txn());
  ASSERT_TRUE(late_record.has_value());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging~unknown@absent", "=a@absent", "=b@absent",
                       "R+marker:aborted@aborted/done/fence", "=b@aborted/done/fence",
                       "=a@aborted/done/fence"}));
  auto raw = Raw(*mem, TxnKey(id));
  ASSERT_TRUE(raw.has_value());
  ASSERT_NE(raw->if_contains("fence"), nullptr);
  EXPECT_EQ(raw->at("fence"), json::value(true));
  auto rec = RecordOf(*mem, id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kAborted);
  EXPECT_EQ(rec->aborted_by, "coordinator");
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));
  want["b"] = Found(V(3), Obj(R"({"n":0})"));
  want["c"] = Found(V(2), Obj(R"({"s":"y"})"));
  want["d"] = Found(V(2), Obj(R"({"k":2})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});

  EXPECT_EQ(mem->Create(TxnKey(id), *late_record).code(), Code::kConflict);
  clock->Advance(std::chrono::hours(2));
  CollectorStats gc = Collect(/*outcome_retention=*/0ms);
  EXPECT_EQ(gc.purged, 1u);
  EXPECT_EQ(RecordState(*mem, seeded.txn_id), "absent") << "retention 0 purges ordinary markers";
  EXPECT_EQ(RecordState(*mem, id), "aborted/done/fence") << "the fence was purged";
  EXPECT_EQ(mem->Create(TxnKey(id), *late_record).code(), Code::kConflict);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  EXPECT_EQ(Images(), want);
}

// It landed, and before the coordinator reads it back a reader (Outcome) proves the commit:
// the coordinator finds its record committed, reports OK and finishes without a flip.
TEST_F(ParallelCommitTest, LostReplyOnALandedRecordCreateFoundProvenMeanwhile) {
  after_extra = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.nth == 1 && s.ok()) {
      return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kGet && c.on_record() && !once.exchange(true)) {
      EXPECT_EQ(OutcomeOf(*direct, c.key.id), TxnOutcome::kCommitted);
    }
    return std::nullopt;
  };
  Database db(counting, Par());
  auto info = MustCommit(db, Transfer());
  EXPECT_TRUE(once.load());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging!unknown@staging", "=a@staging", "=b@staging", "=a@committed",
                       "=b@committed", "R=marker:committed@committed/done"}));
  EXPECT_EQ(counting->counts().writes(), 6u);  // no flip: Outcome made it
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// The record can never be written (every create of it fails kUnavailable, the coordinator's
// fence too): kUnavailable, and the holds are left with their deadline. Until it passes,
// readers see the before-images and the collector leaves them; then the collector's sweep
// fences the record and undoes both holds.
TEST_F(ParallelCommitTest, RecordNeverWrittenLeavesHoldsUntilTheirDeadline) {
  before_extra = [](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) return Status::Unavailable("record shard down");
    return std::nullopt;
  };
  Database db(counting, Par());
  const std::int64_t deadline = clock->NowMillis() + Opts().lease.count();
  auto r = db.Commit(Transfer());
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  const std::string id = r.status().txn_id();
  ASSERT_EQ(id, Txn());
  EXPECT_EQ(RecordState(*mem, id), "absent");
  EXPECT_TRUE(AllHeldBy(id, {"a", "b"}));
  EXPECT_EQ(litetx::engine::HoldDeadline(*Raw(*mem, "c", "a")), deadline);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kNotFound);

  Dump before = DumpAll();
  EXPECT_EQ(Images(), Seeded());
  CollectorStats early = Collect();
  EXPECT_EQ(early.undone, 0u);
  EXPECT_TRUE(SameDump(before, DumpAll())) << "written before the holds' deadline";

  PastTheLease();
  CollectorStats late = Collect();
  EXPECT_EQ(late.undone, 2u);
  EXPECT_EQ(RecordState(*mem, id), "aborted/done/fence");
  EXPECT_EQ(RecordOf(*mem, id)->aborted_by, "gc-test");
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));
  want["b"] = Found(V(3), Obj(R"({"n":0})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
}

// The record create is lost on its way and the coordinator, held, reads its record back only
// past half its lease: absent, "never landed" can no longer be told from "landed, resolved,
// settled and purged", so it reports kUnknown and leaves its holds (they carry their deadline).
class LostRecordLateInTheLeaseTest : public ParallelCommitTest {
 protected:
  std::string id;
  std::optional<json::object> late_record;

  void RunToUnknown() {
    Gate gate;
    std::atomic<bool> lost{false};
    before_extra = [&](const Call& c) -> std::optional<Status> {
      if (c.op == Op::kCreate && c.on_record() && !lost.load()) {
        late_record = *c.value;
        lost = true;
        return Status::Unknown("lost on its way");
      }
      if (c.op == Op::kGet && c.on_record() && lost.load() && c.nth == 1) gate.Hold();
      return std::nullopt;
    };
    Database db(counting, Par());
    litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
    std::thread coordinator([&] { r = db.Commit(Transfer()); });
    Release release{gate, &coordinator};
    ASSERT_TRUE(gate.WaitHeld(1));
    clock->Advance(Opts().lease / 2 + 1s);
    gate.Open();
    coordinator.join();
    ASSERT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
    id = r.status().txn_id();
    ASSERT_EQ(id, Txn());
    ASSERT_TRUE(late_record.has_value());
    EXPECT_EQ(Log(), (std::vector<std::string>{"R+staging~unknown@absent", "=a@absent",
                                               "=b@absent"}));
    EXPECT_TRUE(AllHeldBy(id, {"a", "b"}));
    EXPECT_EQ(Images(), Seeded());  // no record: the pre-images
  }
};

// The delayed create lands before the holds' deadline: every document is held with the record
// staging, so the transaction is committed; Outcome proves it and the collector finishes it.
TEST_F(LostRecordLateInTheLeaseTest, CreateLandingLaterCommitsIt) {
  RunToUnknown();
  ASSERT_TRUE(mem->Create(TxnKey(id), *late_record).ok());
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_EQ(Images(), Transferred());
  PastTheLease();
  EXPECT_EQ(Collect().finished, 1u);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// The create never lands: past the holds' deadline the collector's sweep fences the record and
// undoes both holds; the create delivered after that fails.
TEST_F(LostRecordLateInTheLeaseTest, CreateNeverLandingAbortsItAfterTheDeadline) {
  RunToUnknown();
  PastTheLease();
  EXPECT_EQ(Collect().undone, 2u);
  EXPECT_EQ(RecordState(*mem, id), "aborted/done/fence");
  EXPECT_EQ(mem->Create(TxnKey(id), *late_record).code(), Code::kConflict);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));
  want["b"] = Found(V(3), Obj(R"({"n":0})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// A lost reply on an apply; on the flip.

// It landed: the coordinator finds the document held by its transaction and commits without
// falling back (2N+3 writes).
TEST_F(ParallelCommitTest, LostReplyOnALandedApplyIsFoundHeld) {
  after_extra = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1 && s.ok()) {
      return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };
  Database db(counting, Par());
  auto info = MustCommit(db, Transfer());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b!unknown@staging",
                       "R=committed@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  EXPECT_EQ(counting->counts().writes(), 7u);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// It never landed (lost on its way; delivered late): the coordinator fences the document (a
// Replace rewritten unchanged, a Create taken by a "gone" placeholder), so that its lost write
// can never land, then falls back to the classic path and commits. The late delivery fails.
class LostApplyTest : public ParallelCommitTest {
 protected:
  void Run(Op op, const std::string& doc, const Transaction& t,
           const std::vector<std::string>& want_log, const std::map<std::string, Image>& want) {
    std::optional<json::object> late;
    Revision late_rev = 0;
    before_extra = [&](const Call& c) -> std::optional<Status> {
      if (c.op == op && c.key == Key{"c", doc} && c.nth == 1) {
        late = *c.value;
        late_rev = c.expected;
        return Status::Unknown("lost on its way");
      }
      return std::nullopt;
    };
    Database db(counting, Par());
    auto info = MustCommit(db, t);
    EXPECT_EQ(Log(), want_log);
    EXPECT_EQ(counting->counts().writes(), 11u);  // 2N+3 + fence + fallback + update + apply
    ASSERT_TRUE(late.has_value());
    Dump settled = DumpAll();
    Status delivered = op == Op::kCreate ? mem->Create(Key{"c", doc}, *late).status()
                                         : mem->Replace(Key{"c", doc}, late_rev, *late).status();
    EXPECT_EQ(delivered.code(), Code::kConflict) << "the lost apply landed late";
    EXPECT_TRUE(SameDump(settled, DumpAll()));
    EXPECT_EQ(Images(), want);
    EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
    ExpectClean(*mem, {"c"});
  }
};

TEST_F(LostApplyTest, ReplaceNotLandedIsFencedThenCommittedTheClassicWay) {
  Run(Op::kReplace, "b", Transfer(),
      {"R+staging@staging", "=a@staging", "=b~unknown@staging", "=b@staging",
       "R=pending@pending", "R=pending@pending", "=b@pending", "R=committed@committed",
       "=a@committed", "=b@committed", "R=marker:committed@committed/done"},
      Transferred());
}

TEST_F(LostApplyTest, CreateNotLandedIsFencedThenCommittedTheClassicWay) {
  auto want = Transferred();
  want["b"] = Found(V(1), Obj(R"({"n":0})"));
  want["n"] = Found(V(1), Obj(R"({"k":1})"));
  Run(Op::kCreate, "n",
      Transaction().Adjust("c", "a", {{"n", -10}}).Insert("c", "n", Obj(R"({"k":1})")),
      {"R+staging@staging", "=a@staging", "+n~unknown@staging", "+n@staging",
       "R=pending@pending", "R=pending@pending", "=n@pending", "R=committed@committed",
       "=a@committed", "=n@committed", "R=marker:committed@committed/done"},
      want);
}

// The flip's reply is lost after it landed: the coordinator reads the record back, finds it
// committed and finishes. 2N+3 writes.
TEST_F(ParallelCommitTest, LostReplyOnTheFlipIsFoundCommitted) {
  after_extra = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.is_commit_point() && s.ok()) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  Database db(counting, Par());
  auto info = MustCommit(db, Transfer());
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b@staging",
                       "R=committed!unknown@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  EXPECT_EQ(counting->counts().writes(), 7u);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// The flip cannot be written (every attempt fails kUnavailable): the transaction committed at
// its batch, so Commit reports OK and leaves the record staging with every document held. Its
// first reader proves it; the collector finishes it after the lease.
TEST_F(ParallelCommitTest, FlipThatCannotBeWrittenIsLeftToAResolver) {
  before_extra = [](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) return Status::Unavailable("record shard down");
    return std::nullopt;
  };
  Database db(counting, Par());
  auto info = MustCommit(db, Transfer());
  const std::vector<std::string> flips(Par().max_attempts, "R=committed~unavailable@staging");
  std::vector<std::string> want_log = {"R+staging@staging", "=a@staging", "=b@staging"};
  want_log.insert(want_log.end(), flips.begin(), flips.end());
  EXPECT_EQ(Log(), want_log);
  EXPECT_EQ(RecordState(*mem, info.txn_id), "staging");
  EXPECT_TRUE(AllHeldBy(info.txn_id, {"a", "b"}));

  EXPECT_EQ(Images(), Transferred());  // the first read proves it
  EXPECT_EQ(RecordState(*mem, info.txn_id), "committed");
  PastTheLease();
  EXPECT_EQ(Collect().finished, 1u);
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, info.txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// Holds without a record.

// The record create is lost on its way (delivered late), both applies land, and the
// coordinator is held as it reads its record back. A writer meeting "a" before the hold's
// deadline waits for it (kBusy) and writes nothing; after the deadline it fences the record
// (an aborted marker), undoes the hold and commits. The late record create fails; the
// coordinator, released, finds the fence and reports kAborted, reversing "b": the final store
// holds the writer's change and nothing of the transaction.
TEST_F(ParallelCommitTest, HoldWithoutRecordBlocksUntilItsDeadlineThenIsFenced) {
  Gate gate;
  std::atomic<bool> lost{false};
  std::optional<json::object> late_record;
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && !lost.load()) {
      late_record = *c.value;
      lost = true;
      return Status::Unknown("lost on its way");
    }
    if (c.op == Op::kGet && c.on_record() && lost.load() && c.nth == 1) gate.Hold();
    return std::nullopt;
  };
  Database db(counting, Par());
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  std::thread coordinator([&] { r = db.Commit(Transfer()); });
  Release release{gate, &coordinator};
  ASSERT_TRUE(gate.WaitHeld(1));
  const std::string id = Txn();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(RecordState(*mem, id), "absent");
  EXPECT_TRUE(AllHeldBy(id, {"a", "b"}));

  Database writer(mem, Par());
  Transaction w = Transaction().Adjust("c", "a", {{"n", 1}}).Update("c", "c", Obj(R"({"s":"w"})"));
  Dump before = DumpAll();
  auto busy = writer.Commit(w);
  EXPECT_EQ(busy.code(), Code::kBusy) << busy.status().ToString();
  EXPECT_EQ(ReadImage(*direct, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  EXPECT_TRUE(SameDump(before, DumpAll())) << "written before the hold's deadline";

  PastTheLease();
  auto ok = writer.Commit(w);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto fence = RecordOf(*mem, id);
  ASSERT_TRUE(fence.has_value());
  EXPECT_TRUE(fence->fence);
  EXPECT_TRUE(fence->done);
  EXPECT_EQ(fence->state, TxnState::kAborted);
  EXPECT_EQ(fence->aborted_by, "txn " + ok->txn_id);
  EXPECT_EQ(mem->Create(TxnKey(id), *late_record).code(), Code::kConflict);

  gate.Open();
  coordinator.join();
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(4), Obj(R"({"n":101})"));  // applied, undone, then the writer's
  want["b"] = Found(V(3), Obj(R"({"n":0})"));    // applied, reversed by its coordinator
  want["c"] = Found(V(2), Obj(R"({"s":"w"})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
  Collect();  // folds the writer's outcome marker into its page; the documents stay
  EXPECT_EQ(Images(), want);
  Dump settled = DumpAll();
  Collect();
  EXPECT_TRUE(SameDump(settled, DumpAll()));
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
}

// The same on a store that lands the applies before the record (ReversedBatchStore): the
// record create is held in a hook while both holds are in the store. A writer before the
// deadline: kBusy; after it, it fences the record and commits. The held create, released, then
// fails (kConflict): the coordinator reports kAborted and reverses "b".
TEST_F(ParallelCommitTest, RecordCreateDelayedBehindItsAppliesIsFencedByAWriter) {
  Gate gate;
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && !once.exchange(true)) gate.Hold();
    return std::nullopt;
  };
  Database db(std::make_shared<ReversedBatchStore>(counting), Par());
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  std::thread coordinator([&] { r = db.Commit(Transfer()); });
  Release release{gate, &coordinator};
  ASSERT_TRUE(gate.WaitHeld(1));
  const std::string id = Txn();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(RecordState(*mem, id), "absent");
  EXPECT_TRUE(AllHeldBy(id, {"a", "b"}));

  Database writer(mem, Par());
  Transaction w = Transaction().Adjust("c", "a", {{"n", 1}}).Update("c", "c", Obj(R"({"s":"w"})"));
  Dump before = DumpAll();
  EXPECT_EQ(writer.Commit(w).code(), Code::kBusy);
  EXPECT_TRUE(SameDump(before, DumpAll())) << "written before the hold's deadline";
  PastTheLease();
  auto ok = writer.Commit(w);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(RecordState(*mem, id), "aborted/done/fence");

  gate.Open();
  coordinator.join();
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "=b@?", "=a@?", "R+staging!conflict@aborted/done/fence",
                       "=b@aborted/done/fence", "=a!conflict@aborted/done/fence"}));
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(4), Obj(R"({"n":101})"));
  want["b"] = Found(V(3), Obj(R"({"n":0})"));
  want["c"] = Found(V(2), Obj(R"({"s":"w"})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// A staging record resolved while its coordinator is held before the flip.

// Inline: a collector past the lease proves and finishes the transaction; the coordinator's
// flip, released, finds it committed and done, its finishing writes find nothing left to do,
// and Commit reports OK. Nothing it writes afterwards lands.
TEST_F(ParallelCommitTest, CollectorResolvesWhileTheCoordinatorIsHeldBeforeItsFlip) {
  Gate gate;
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point() && !once.exchange(true)) gate.Hold();
    return std::nullopt;
  };
  Database db(counting, Par());
  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  std::thread coordinator([&] { r = db.Commit(Transfer()); });
  Release release{gate, &coordinator};
  ASSERT_TRUE(gate.WaitHeld(1));
  const std::string id = Txn();
  EXPECT_EQ(RecordState(*mem, id), "staging");

  PastTheLease();
  EXPECT_EQ(Collect().finished, 1u);
  EXPECT_EQ(RecordState(*mem, id), "committed/done");
  Dump settled = DumpAll();

  gate.Open();
  coordinator.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->txn_id, id);
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b@staging",
                       "R=committed!conflict@committed/done", "=a!conflict@committed/done",
                       "=b!conflict@committed/done"}));
  EXPECT_TRUE(SameDump(settled, DumpAll()));
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// In the background: while the finisher is held before the flip, Outcome proves the commit
// (the record committed, not yet done); the finisher's flip finds it committed and finishes
// from the revision it finds, writing the marker itself.
TEST_F(ParallelCommitTest, OutcomeProvesWhileTheFinisherIsHeldBeforeItsFlip) {
  Gate gate;
  std::atomic<bool> once{false};
  before_extra = [&](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point() && !once.exchange(true)) gate.Hold();
    return std::nullopt;
  };
  Database db(counting, ParBackground());
  Release release{gate};
  auto r = db.Commit(Transfer());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(gate.WaitHeld(1));
  EXPECT_EQ(RecordState(*mem, r->txn_id), "staging");
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(RecordState(*mem, r->txn_id), "committed");
  EXPECT_TRUE(AllHeldBy(r->txn_id, {"a", "b"}));

  gate.Open();
  db.Flush();
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+staging@staging", "=a@staging", "=b@staging",
                       "R=committed!conflict@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  EXPECT_EQ(Images(), Transferred());
  EXPECT_EQ(OutcomeOf(*direct, r->txn_id), TxnOutcome::kCommitted);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// Database::Outcome on a staging record.

// Every document held: Outcome proves it, records it (staging -> committed) and says committed;
// the collector finishes it after the lease and it stays committed.
TEST_F(ParallelCommitTest, OutcomeOfAStagingRecordWithEveryDocumentHeldIsCommitted) {
  const std::string id = CrashAfterWrite(Transfer(), 3);
  ASSERT_EQ(RecordState(*mem, id), "staging");
  const Revision staged = RevisionOf(*mem, TxnKey(id));
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_EQ(RecordState(*mem, id), "committed");
  EXPECT_NE(RevisionOf(*mem, TxnKey(id)), staged);
  Dump proven = DumpAll();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_TRUE(SameDump(proven, DumpAll())) << "a committed record was written again";

  PastTheLease();
  EXPECT_EQ(Collect().finished, 1u);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
  EXPECT_EQ(Images(), Transferred());
  ExpectClean(*mem, {"c"});
}

// A document not held: Outcome says pending and writes nothing; after the lease the collector
// fences and aborts it, and from then on Outcome says aborted.
TEST_F(ParallelCommitTest, OutcomeOfAStagingRecordWithADocumentNotHeldIsPending) {
  const std::string id = CrashAfterWrite(Transfer(), 2);  // the record and "a"
  ASSERT_EQ(RecordState(*mem, id), "staging");
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, "");
  Dump before = DumpAll();
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kPending);
  EXPECT_TRUE(SameDump(before, DumpAll())) << "Outcome wrote without a proof";

  PastTheLease();
  EXPECT_EQ(Collect().reversed, 1u);
  EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kAborted);
  auto want = Seeded();
  want["a"] = Found(V(3), Obj(R"({"n":100})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
}

// ---------------------------------------------------------------------------------------------
// The classic path.

// Options::parallel_commit = false: the record is created pending, alone, before the applies:
// 6 round trips inline, 2N+3 writes, no staging record ever. A transaction with a check takes
// the classic path with the parallel commit on (7 round trips: the check is read again before
// the flip). A single write takes the one-write path (no record at all).
TEST_F(ParallelCommitTest, ClassicPathWhenOffOrWithACheck) {
  {
    litetx::Options o = Par();
    o.parallel_commit = false;
    Database db(counting, o);
    MustCommit(db, Transfer());
    EXPECT_EQ(Log(), (std::vector<std::string>{
                         "R+pending@pending", "=a@pending", "=b@pending",
                         "R=committed@committed", "=a@committed", "=b@committed",
                         "R=marker:committed@committed/done"}));
    EXPECT_EQ(counting->counts().round_trips, 6u);
    EXPECT_EQ(counting->counts().writes(), 7u);
  }
  Database db(counting, Par());
  ResetLog();
  MustCommit(db, Transfer().Check("c", "c", V(1)));
  EXPECT_EQ(Log(), (std::vector<std::string>{
                       "R+pending@pending", "=a@pending", "=b@pending",
                       "R=committed@committed", "=a@committed", "=b@committed",
                       "R=marker:committed@committed/done"}));
  EXPECT_EQ(counting->counts().round_trips, 7u);
  EXPECT_EQ(counting->counts().writes(), 7u);

  ResetLog();
  MustCommit(db, Transaction().Adjust("c", "a", {{"n", 1}}));
  EXPECT_EQ(Log(), (std::vector<std::string>{"=a@?"}));
  // The write alone: db wrote a last, so the written-document cache gives its image.
  EXPECT_EQ(counting->counts().round_trips, 1u);
  EXPECT_EQ(counting->counts().gets, 0u);

  auto want = Transferred();
  want["a"] = Found(V(4), Obj(R"({"n":81})"));
  want["b"] = Found(V(3), Obj(R"({"n":20})"));
  EXPECT_EQ(Images(), want);
  ExpectClean(*mem, {"c"});
}

}  // namespace
}  // namespace ltxtest
