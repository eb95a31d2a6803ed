// tests/tombstone_attack_test.cpp — the tombstone index (engine/tombstones.h, docs/protocol.md
// §5.4) under a hostile scheduler and a hostile user: a tombstone or placeholder is never purged
// early (re-inserts between a purge's read and its erase, paused coordinators, entries naming
// the engine's own collections or exotic keys), never lost (every tombstone of this release is
// purged by the index alone, with `collections` empty: self-fenced parallel commits, dangling
// holds undone by a writer, collectors with other settings, crashes, lost replies, two
// collectors racing with one paused at every store call), outcomes never change while markers
// are indexed, folded and purged, the collector never dies on malformed data, and the purge's
// work is bounded and makes progress.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/tombstones.h"
#include "tombstone_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Database;
using litetx::Transaction;
using litetx::TxnOutcome;

struct Crash {};

constexpr std::chrono::milliseconds kLease = TombstoneWorld::kLease;
constexpr std::chrono::milliseconds kRetention = TombstoneWorld::kRetention;
const std::string kTomb(litetx::kTombstoneIndexCollection);
const std::string kTxn(litetx::kTransactionsCollection);

// Pauses the thread that calls Hold (from a store hook) until Open; the test thread waits until
// that thread holds, or has finished without ever holding.
class Pause {
 public:
  void Hold() {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void Finished() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }
  // True if the thread holds; false if it finished first (or 10 s passed).
  bool Held() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [this] { return held_ || finished_; });
    return held_;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool finished_ = false;
  bool open_ = false;
};

class TombstoneAttackTest : public ::testing::Test, public TombstoneWorld {
 protected:
  CollectorOptions Gc(std::string name = "gc-attack") const { return TombstoneWorld::Gc(name); }
  void Fresh() {
    mem = std::make_shared<litetx::MemoryStore>();
    clock = std::make_shared<litetx::ManualClock>();
  }
  // A tombstone or placeholder that no transaction holds.
  bool IsDead(const std::string& c, const std::string& id) { return IsDeadDoc(*mem, c, id); }
  // The tombstones and placeholders of collection `c`, held or not.
  std::vector<std::string> DeadIn(const std::string& c) {
    std::vector<std::string> out;
    for (const auto& [id, doc] : ScanAll(*mem, c)) {
      auto m = litetx::engine::DecodeMeta(doc.value);
      if (m.ok() && !m->live()) out.push_back(id);
    }
    return out;
  }
  std::string Show(const std::vector<std::string>& ids) {
    std::string s;
    for (const auto& id : ids) s += id + " ";
    return s;
  }
  void Seed(const std::vector<std::string>& ids) {
    auto db = Direct();
    for (const auto& id : ids) MustCommit(*db, Transaction().Insert("c", id, Obj(R"({"n":1})")));
  }
  Status Pass(CollectorOptions o) {
    Collector gc(mem, std::move(o));
    return gc.RunOnce();
  }
  // Passes of an index-only collector until the index is empty (at most `n`).
  void Passes(int n, CollectorOptions o) {
    Collector gc(mem, std::move(o));
    for (int i = 0; i < n; ++i) (void)gc.RunOnce();
  }
};

// ---------------------------------------------------------------------------------------------
// Never lost.

// A parallel commit whose record create keeps failing (kUnavailable, never applied) fences its
// own record (SettleStagingRecord) and reverses the holds that landed: its inserts become
// placeholders. A fence is never folded nor erased, so its "tk" never reaches the index: the
// coordinator indexes each placeholder itself (ReverseSent) before writing it. Past the
// retention, a collector that does not sweep purges them. (Found by this review: they were
// left to the sweep.)
TEST_F(TombstoneAttackTest, ASelfFencedParallelCommitsPlaceholdersAreIndexed) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.value != nullptr && !c.value->contains("fence")) {
      return Status::Unavailable("the record's shard is down");
    }
    return std::nullopt;
  };
  litetx::Options o = Eng();
  o.parallel_commit = true;
  {
    Database db(hook, o);
    auto r = db.Commit(
        Transaction().Insert("c", "x", Obj(R"({"n":1})")).Insert("c", "y", Obj(R"({"n":2})")));
    EXPECT_FALSE(r.ok());
  }
  auto records = ScanAll(*mem, kTxn);
  ASSERT_EQ(records.size(), 1u);
  auto fence = litetx::engine::DecodeRecord(records[0].second.value);
  ASSERT_TRUE(fence.ok());
  EXPECT_TRUE(fence->fence);
  EXPECT_EQ(fence->tomb_keys.size(), 2u);  // it knows them...
  EXPECT_TRUE(IsDead("c", "x"));           // ...and reversed them into placeholders
  EXPECT_TRUE(IsDead("c", "y"));
  clock->Advance(kRetention + kLease + 1s);
  Passes(3, Gc());
  EXPECT_TRUE(DeadIn("c").empty())
      << "never purged by the index: " << Show(DeadIn("c")) << "(index entries: "
      << Index().size() << ")";
}

// A parallel commit's holds with no record (every record create failed, the fence too): a
// writer past the hold's deadline fences the record (no "tk") and undoes the hold of an insert
// into a "gone" placeholder; UndoDanglingHold indexes it before writing it, so the index alone
// purges it. (Found by this review: it was left to the sweep.)
TEST_F(TombstoneAttackTest, AWriterUndoingAHoldWithNoRecordIndexesThePlaceholder) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) return Status::Unavailable("the record's shard is down");
    return std::nullopt;
  };
  litetx::Options o = Eng();
  o.parallel_commit = true;
  std::string holder;
  {
    Database db(hook, o);
    auto r = db.Commit(
        Transaction().Insert("c", "x", Obj(R"({"n":1})")).Insert("c", "y", Obj(R"({"n":2})")));
    EXPECT_FALSE(r.ok());
  }
  holder = MetaOf(*mem, "c", "x").txn;
  ASSERT_FALSE(holder.empty()) << "the hold should be left to its deadline";
  clock->Advance(kLease + 1s);
  {
    Database writer(mem, Eng());
    auto w = writer.Commit(Transaction().Update("c", "x", Obj(R"({"n":5})")));
    EXPECT_FALSE(w.ok());  // x never existed
  }
  ASSERT_TRUE(IsDead("c", "x")) << "the writer undid the hold into a placeholder";
  clock->Advance(kRetention + 1s);
  Passes(3, Gc());
  EXPECT_FALSE(Raw(*mem, "c", "x").has_value())
      << "placeholder made by a writer's undo of a dangling hold is never purged by the index "
      << "(index entries: " << Index().size() << ")";
}

// Two collectors on one store: one with tombstone_retention 0 ("never purge"), one that purges.
// The first folds a marker and still copies its "tk" into the index, so the second one, which
// does not sweep, finds the transaction's tombstones. (Found by this review: the first dropped
// them.)
TEST_F(TombstoneAttackTest, ARetentionZeroCollectorStillIndexesTheMarkersItFolds) {
  Seed({"a", "b"});
  Database db(mem, Eng());
  auto info = MustCommit(db, Transaction().Delete("c", "a").Delete("c", "b"));
  CollectorOptions keeper = Gc("gc-keeper");
  keeper.tombstone_retention = 0ms;
  ASSERT_TRUE(Pass(keeper).ok());
  EXPECT_EQ(OutcomeOf(db, info.txn_id), TxnOutcome::kCommitted);
  EXPECT_TRUE(ScanAll(*mem, kTxn).empty());  // the marker was folded away
  clock->Advance(kRetention + 1s);
  Passes(3, Gc("gc-purger"));
  EXPECT_TRUE(DeadIn("c").empty()) << "tombstones no entry names: " << Show(DeadIn("c"));
}

// A far-future clock (past 2^48 ms): an entry id's time is written as 2^48 - 1 at most, so the
// entry is not due before that; and the purge never erases an entry while "moving" its
// tombstone to an entry of the very same id. (Found by this review: the time kept only its low
// 48 bits, the entry read as due at once and was erased, and the tombstone lost its entry.)
TEST_F(TombstoneAttackTest, AnEntryTimePast48BitsIsNotDroppedSilently) {
  Seed({"a"});
  const std::int64_t far = (std::int64_t{1} << 48) + 5'000;
  auto future = std::make_shared<litetx::ManualClock>(far);
  litetx::Options o = Eng();
  o.clock = future;
  {
    Database db(mem, o);
    MustCommit(db, Transaction().Delete("c", "a"));
  }
  ASSERT_TRUE(IsDead("c", "a"));
  ASSERT_EQ(Index().size(), 1u);
  ASSERT_TRUE(Pass(Gc()).ok());  // the collector's clock: now, far before the tombstone
  EXPECT_TRUE(IsDead("c", "a"));  // not purged early...
  EXPECT_EQ(Index().size(), 1u) << "...but its only entry was erased";
  // Once the collectors' clocks reach the tombstone's time plus the retention:
  CollectorOptions later = Gc();
  auto late_clock = std::make_shared<litetx::ManualClock>(far + kRetention.count() + 1'000);
  later.engine.clock = late_clock;
  Passes(2, later);
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value()) << "the tombstone was lost to the index";
}

// ---------------------------------------------------------------------------------------------
// Bounded work, and progress.

// Entries the purge keeps (malformed ones are "kept for an operator") count against
// tombstone_purge_budget; a pass stopped by the budget leaves a cursor, so the next one goes on
// after them instead of starting over at the head. (Found by this review: every pass started
// over and never reached the due entry behind them.)
TEST_F(TombstoneAttackTest, KeptEntriesAtTheHeadOfTheIndexMustNotStarveTheRest) {
  Seed({"a"});
  {
    Database db(mem, Eng());
    MustCommit(db, Transaction().Delete("c", "a"));
  }
  for (int i = 0; i < 4; ++i) {
    PutRaw(*mem, Key{kTomb, "000000000000bad" + std::to_string(i)}, Obj(R"({"k":7})"));
  }
  clock->Advance(kRetention + 1s);
  CollectorOptions o = Gc();
  o.tombstone_purge_budget = 4;
  Collector gc(mem, o);
  for (int i = 0; i < 10; ++i) (void)gc.RunOnce();
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value())
      << "10 passes, and the due entry behind 4 malformed ones was never reached";
  EXPECT_LE(gc.last_pass().index_read, 4u);
}

// One entry of 1000 keys (a transaction of 1000 deletes) against a budget of 50: an entry is
// dealt with whole (engine/tombstones.h), so the pass that meets it reads it and its documents,
// and nothing more; the entry after it waits for the next pass.
TEST_F(TombstoneAttackTest, AHugeEntryIsPurgedAndTheBudgetIsHonoured) {
  constexpr int kDocs = 1000;
  {
    auto db = Direct();
    Transaction ins;
    for (int i = 0; i < kDocs; ++i) ins.Insert("c", "d" + std::to_string(i), Obj("{}"));
    MustCommit(*db, ins);
    MustCommit(*db, Transaction().Insert("c", "z", Obj("{}")));
  }
  Database db(mem, Eng());
  Transaction del;
  for (int i = 0; i < kDocs; ++i) del.Delete("c", "d" + std::to_string(i));
  MustCommit(db, del);
  ASSERT_TRUE(Pass(Gc()).ok());  // folds the marker: one entry of 1000 keys
  auto index = Index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index.begin()->second.size(), static_cast<std::size_t>(kDocs));
  clock->Advance(1ms);
  MustCommit(db, Transaction().Delete("c", "z"));  // an entry after it
  clock->Advance(kRetention + 1s);
  CollectorOptions o = Gc();
  o.tombstone_purge_budget = 50;
  Collector gc(mem, o);
  std::uint64_t most = 0;
  for (int i = 0; i < 5 && !Index().empty(); ++i) {
    ASSERT_TRUE(gc.RunOnce().ok());
    most = std::max(most, gc.last_pass().index_read);
  }
  EXPECT_TRUE(Index().empty());
  EXPECT_TRUE(DeadIn("c").empty());
  EXPECT_EQ(ScanAll(*mem, "c").size(), 0u);
  EXPECT_LE(most, 1u + kDocs) << "one pass read " << most << " with a budget of "
                               << o.tombstone_purge_budget;
}

// ---------------------------------------------------------------------------------------------
// Never purged early: races between the purge's read and its erase.

// The document is re-inserted between the purge's read (a due tombstone) and its erase: the
// erase's compare-and-swap fails, the document stays, and the next pass drops the entry.
TEST_F(TombstoneAttackTest, AReinsertBetweenThePurgesReadAndItsEraseKeepsTheDocument) {
  Seed({"a"});
  {
    Database db(mem, Eng());
    MustCommit(db, Transaction().Delete("c", "a"));
  }
  clock->Advance(kRetention + 1s);
  auto hook = std::make_shared<HookStore>(mem);
  int interfered = 0;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kErase && c.key == Key{"c", "a"} && interfered++ == 0) {
      auto direct = Direct();
      MustCommit(*direct, Transaction().Insert("c", "a", Obj(R"({"n":9})")));
    }
    return std::nullopt;
  };
  Collector gc(hook, Gc());
  (void)gc.RunOnce();
  EXPECT_EQ(interfered, 1);
  EXPECT_TRUE(MetaOf(*mem, "c", "a").live());
  EXPECT_EQ(BodyOf(*mem, "c", "a"), Obj(R"({"n":9})"));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(BodyOf(*mem, "c", "a"), Obj(R"({"n":9})"));
  EXPECT_TRUE(Index().empty());
}

// Re-inserted and deleted again (by a transaction of several actions, whose marker is not yet
// indexed) between the purge's read and its erase: the younger tombstone is purged only at its
// own time, and is purged then.
TEST_F(TombstoneAttackTest, AReinsertAndRedeleteBetweenReadAndEraseIsPurgedAtItsOwnTime) {
  Seed({"a", "b"});
  {
    Database db(mem, Eng());
    MustCommit(db, Transaction().Delete("c", "a"));
  }
  clock->Advance(kRetention + 1s);
  auto hook = std::make_shared<HookStore>(mem);
  int interfered = 0;
  std::int64_t second = 0;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kErase && c.key == Key{"c", "a"} && interfered++ == 0) {
      litetx::Options off = Eng();
      off.index_tombstones = false;
      Database quiet(mem, off);
      MustCommit(quiet, Transaction().Insert("c", "a", Obj(R"({"n":9})")));
      MustCommit(quiet, Transaction().Delete("c", "a").Update("c", "b", Obj(R"({"n":2})")));
      second = MetaOf(*mem, "c", "a").at_ms;
    }
    return std::nullopt;
  };
  {
    Collector gc(hook, Gc());
    (void)gc.RunOnce();
  }
  ASSERT_EQ(interfered, 1);
  ASSERT_NE(second, 0);
  EXPECT_TRUE(IsDead("c", "a"));
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());  // the marker of the second delete is indexed; nothing due
  EXPECT_TRUE(IsDead("c", "a"));
  clock->Advance(std::chrono::milliseconds(second + kRetention.count() - clock->NowMillis() - 1));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsDead("c", "a")) << "purged before its own retention";
  clock->Advance(1s);
  ASSERT_TRUE(gc.RunOnce().ok());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_TRUE(Index().empty());
}

// A transaction that inserts over a due tombstone is paused right before its apply lands; a
// collector purges the tombstone meanwhile. The apply's compare-and-swap must fail, and the
// commit must end consistent (committed and live, or not committed and not live), on the
// one-write, classic and parallel paths.
TEST_F(TombstoneAttackTest, AnInsertOverADueTombstonePausedBeforeItsApplyStaysConsistent) {
  for (int path = 0; path < 3; ++path) {
    SCOPED_TRACE(path == 0 ? "one-write" : path == 1 ? "classic" : "parallel");
    Fresh();
    Seed({"a", "b"});
    {
      Database db(mem, Eng());
      MustCommit(db, Transaction().Delete("c", "a"));
      MustCommit(db, Transaction().Delete("c", "b"));
    }
    clock->Advance(kRetention + 1s);
    auto hook = std::make_shared<HookStore>(mem);
    Pause pause;
    std::atomic<bool> paused{false};
    hook->before = [&](const Call& c) -> std::optional<Status> {
      if (c.key == Key{"c", "a"} && (c.op == Op::kReplace || c.op == Op::kCreate) &&
          !paused.exchange(true)) {
        pause.Hold();
      }
      return std::nullopt;
    };
    litetx::Options o = Eng();
    o.parallel_commit = path == 2;
    Transaction t = Transaction().Insert("c", "a", Obj(R"({"n":3})"));
    if (path > 0) t.Insert("c", "b", Obj(R"({"n":4})"));
    litetx::Result<litetx::CommitInfo> r = Status::Unknown("not run");
    {
      Database db(hook, o);
      Async run([&] {
        r = db.Commit(t);
        pause.Finished();
      });
      ASSERT_TRUE(pause.Held());
      ASSERT_TRUE(Pass(Gc("gc-purger")).ok() || true);
      EXPECT_FALSE(Raw(*mem, "c", "a").has_value()) << "the due tombstone was purged meanwhile";
      pause.Open();
      EXPECT_TRUE(run.Wait(10s));
    }
    // Settle whatever is left (no retention passes: the clock moves by a lease only).
    clock->Advance(kLease + 1s);
    ASSERT_TRUE(Pass(Gc()).ok());
    ExpectClean(*mem, {"c"});
    const bool a_live = Raw(*mem, "c", "a").has_value() && MetaOf(*mem, "c", "a").live();
    const bool b_live = Raw(*mem, "c", "b").has_value() && MetaOf(*mem, "c", "b").live();
    RecordProperty("path" + std::to_string(path), r.ok() ? "OK" : r.status().ToString());
    if (r.ok()) {
      EXPECT_TRUE(a_live);
      EXPECT_EQ(BodyOf(*mem, "c", "a"), Obj(R"({"n":3})"));
      if (path > 0) {
        EXPECT_EQ(BodyOf(*mem, "c", "b"), Obj(R"({"n":4})"));
      }
    } else {
      EXPECT_FALSE(a_live) << r.status().ToString();
      if (path > 0) {
        EXPECT_FALSE(b_live) << r.status().ToString();
      }
    }
  }
}

// A classic coordinator paused (before its apply Create of an absent id) for longer than the
// tombstone retention, the documented limit: a collector claims it, fences the id with a "gone"
// placeholder, folds and indexes the marker, then purges the placeholder; the late Create
// lands. The commit must not report OK, and nothing may stay held or live.
TEST_F(TombstoneAttackTest, ACoordinatorPausedPastTheRetentionIsNotCommitted) {
  auto hook = std::make_shared<HookStore>(mem);
  Pause pause;
  std::atomic<bool> paused{false};
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.key == Key{"c", "x"} && !paused.exchange(true)) pause.Hold();
    return std::nullopt;
  };
  litetx::Result<litetx::CommitInfo> r = Status::Unknown("not run");
  std::string id;
  {
    Database db(hook, Eng());
    Async run([&] {
      r = db.Commit(Transaction().Insert("c", "x", Obj("{}")).Insert("c", "y", Obj("{}")));
      pause.Finished();
    });
    ASSERT_TRUE(pause.Held());
    auto recs = ScanAll(*mem, kTxn);
    ASSERT_EQ(recs.size(), 1u);
    id = recs[0].first;
    clock->Advance(kLease + 1s);
    ASSERT_TRUE(Pass(Gc()).ok());  // claims, fences x and y, folds, indexes
    EXPECT_TRUE(IsDead("c", "x"));
    EXPECT_EQ(Index().size(), 1u);
    clock->Advance(kRetention + 1s);
    ASSERT_TRUE(Pass(Gc()).ok());  // purges the fences
    EXPECT_FALSE(Raw(*mem, "c", "x").has_value());
    pause.Open();
    EXPECT_TRUE(run.Wait(10s));
  }
  EXPECT_FALSE(r.ok()) << "a transaction claimed and reversed reported committed";
  {
    Database db(mem, Eng());
    EXPECT_EQ(OutcomeOf(db, id), TxnOutcome::kAborted);
  }
  clock->Advance(kLease + 1s);
  ASSERT_TRUE(Pass(Gc()).ok());
  ExpectClean(*mem, {"c"});
  for (const char* k : {"x", "y"}) {
    auto raw = Raw(*mem, "c", k);
    EXPECT_TRUE(!raw || !MetaOf(*mem, "c", k).live()) << k;
  }
  RecordProperty("commit", r.ok() ? "OK" : r.status().ToString());
  // (Outside the model: the late coordinator's own reversal leaves placeholders no entry names.)
  clock->Advance(kRetention + 10s);
  Passes(2, Gc());
  RecordProperty("left_after_retention", Show(DeadIn("c")));
}

// ---------------------------------------------------------------------------------------------
// Hostile entries and markers.

// An entry naming the engine's own documents (a running transaction's record, a fence marker,
// an outcome page, another index entry, the entry itself, a partition claim, a chunk): the
// purge must erase none of them (none has "_ltx" metadata), and go on with the rest.
TEST_F(TombstoneAttackTest, AnEntryNamingEngineDocumentsErasesNone) {
  Seed({"a", "b", "live"});
  Database db(mem, Eng());
  auto info = MustCommit(db, Transaction().Delete("c", "a").Update("c", "b", Obj(R"({"n":2})")));
  ASSERT_TRUE(Pass(Gc()).ok());  // folds: an outcome page and an index entry
  const auto pages = ScanAll(*mem, litetx::kOutcomesCollection);
  ASSERT_EQ(pages.size(), 1u);
  const std::string running = "f000000000000000000000000000";
  HoldLive(*mem, Key{"c", "live"}, Obj(R"({"n":1})"), V(2), running, clock->NowMillis());
  const std::string fence_id = "e000000000000000000000000000";
  PutRaw(*mem, TxnKey(fence_id),
         Obj(R"({"state":"aborted","created":1,"gc_at":1,"done":true,"done_at":1,"fence":true})"));
  const Key claim{"__litetx.gc", "p0"};
  PutRaw(*mem, claim, Obj(R"({"by":"x","until":0,"swept":0,"cursor":""})"));
  const Key chunk{"__litetx.chunk", "t-0"};
  PutRaw(*mem, chunk, Obj(R"({"a":[]})"));
  const Key future{kTomb, "ffffffffffff~0000000000000000"};
  PutRaw(*mem, future, Obj(R"({"k":[["c","b"]]})"));
  const Key attack{kTomb, "000000000001~attack"};
  const Key first_entry{kTomb, Index().begin()->first};
  const Key page{std::string(litetx::kOutcomesCollection), pages[0].first};
  json::array k;
  for (const Key& key : std::vector<Key>{TxnKey(running), TxnKey(fence_id), page, future, attack,
                                         first_entry, claim, chunk}) {
    k.push_back(json::array{json::string(key.collection), json::string(key.id)});
  }
  PutRaw(*mem, attack, json::object{{"k", k}});
  std::vector<Key> engine_docs = {TxnKey(running), TxnKey(fence_id), page, future, claim, chunk};
  std::map<Key, Revision> before;
  for (const Key& key : engine_docs) before[key] = RevisionOf(*mem, key);
  for (int i = 0; i < 2; ++i) {
    Collector gc(mem, Gc());
    Status s = gc.RunOnce();  // reports what it could not read as a document
    (void)s;
  }
  for (const Key& key : engine_docs) {
    auto g = mem->Get(key);
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(g->has_value()) << key.collection << "/" << key.id << " erased";
    if (g->has_value()) {
      EXPECT_EQ((**g).revision, before[key]) << key.collection << "/" << key.id;
    }
  }
  EXPECT_EQ(OutcomeOf(db, info.txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(MetaOf(*mem, "c", "live").txn, running);
}

// Keys no validated transaction can name (NUL, 100,000 bytes, invalid UTF-8, empty names,
// twice the same key, a key of the index itself): reported and skipped, never a crash, and the
// real tombstone named next to them is purged. On the memory store and on LMDB (which refuses
// keys above 511 bytes).
TEST_F(TombstoneAttackTest, ExoticKeysInAnEntryAreSkippedNotFatal) {
  for (int backend = 0; backend < 2; ++backend) {
    SCOPED_TRACE(backend == 0 ? "memory" : "lmdb");
    Fresh();
    LmdbScratch lmdb;
    std::shared_ptr<litetx::Store> store = mem;
    if (backend == 1) store = lmdb.store();
    {
      Database seed(store, Eng());
      MustCommit(seed, Transaction().Insert("c", "a", Obj("{}")));
      MustCommit(seed, Transaction().Insert("c", "b", Obj("{}")));
      MustCommit(seed, Transaction().Delete("c", "a"));
    }
    const std::string self = "000000000001~exotic";
    json::array k;
    for (const auto& [c, id] : std::vector<std::pair<std::string, std::string>>{
             {"c", std::string("a\0b", 3)},
             {"c", std::string(100'000, 'x')},
             {"c", "\xff\xfe\xc0"},
             {"", ""},
             {"c", ""},
             {std::string(1000, 'c'), "a"},
             {"c", "a"},
             {"c", "a"},
             {kTomb, self}}) {
      k.push_back(json::array{json::string(c), json::string(id)});
    }
    ASSERT_TRUE(store->Create(Key{kTomb, self}, json::object{{"k", k}}).ok());
    clock->Advance(kRetention + 1s);
    CollectorOptions o = Gc();
    for (int i = 0; i < 3; ++i) {
      Collector gc(store, o);
      (void)gc.RunOnce();
    }
    auto a = store->Get(Key{"c", "a"});
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(a->has_value()) << "the real tombstone next to the exotic keys was not purged";
    auto b = store->Get(Key{"c", "b"});
    ASSERT_TRUE(b.ok());
    EXPECT_TRUE(b->has_value());
    // Whatever the collector made of the entry, a pass still runs to its end.
    Collector gc(store, o);
    Status last = gc.RunOnce();
    EXPECT_EQ(gc.stats().runs, 1u);
    auto left = store->Get(Key{kTomb, self});
    ASSERT_TRUE(left.ok());
    RecordProperty(backend == 0 ? "memory" : "lmdb",
                   std::string(left->has_value() ? "entry kept" : "entry erased") + "; " +
                       last.ToString());
  }
}

// Markers whose "tk" is malformed: the collector reports them, keeps them (they are outcomes),
// and still folds, indexes and purges a well-formed transaction's marker next to them.
TEST_F(TombstoneAttackTest, MalformedMarkerTombstoneKeysAreReportedAndTheRestGoesOn) {
  Seed({"a", "b"});
  Database db(mem, Eng());
  auto info = MustCommit(db, Transaction().Delete("c", "a").Delete("c", "b"));
  const std::int64_t now = clock->NowMillis();
  const char* shapes[] = {R"(7)", R"("x")", R"([["c"]])", R"([[1,2]])", R"([["c","a","b"]])",
                          R"([null])", R"({"c":"a"})"};
  std::vector<std::string> bad;
  int i = 0;
  for (const char* tk : shapes) {
    std::string id = info.txn_id.substr(0, 20) + "bad" + std::to_string(i++);
    id.resize(info.txn_id.size(), '0');
    bad.push_back(id);
    PutRaw(*mem, TxnKey(id),
           Obj(std::string(R"({"state":"committed","created":)") + std::to_string(now) +
               R"(,"gc_at":)" + std::to_string(now) + R"(,"done":true,"done_at":)" +
               std::to_string(now) + R"(,"tk":)" + tk + "}"));
  }
  Collector gc(mem, Gc());
  Status s = gc.RunOnce();
  EXPECT_FALSE(s.ok());
  EXPECT_GE(gc.last_pass().failed, std::size(shapes));
  for (const auto& id : bad) EXPECT_TRUE(Raw(*mem, TxnKey(id)).has_value()) << id;
  EXPECT_EQ(OutcomeOf(db, info.txn_id), TxnOutcome::kCommitted);
  EXPECT_EQ(Index().size(), 1u);
  clock->Advance(kRetention + 1s);
  (void)gc.RunOnce();
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_FALSE(Raw(*mem, "c", "b").has_value());
  clock->Advance(3h);  // past every retention: still reported, still kept, never a crash
  (void)gc.RunOnce();
  for (const auto& id : bad) EXPECT_TRUE(Raw(*mem, TxnKey(id)).has_value()) << id;
  EXPECT_EQ(gc.stats().runs, 3u);
}

// Store failures inside the purge: the index Scan fails (one pass), then the documents' reads,
// the index creates (the "move" of a younger tombstone) and the index erases fail (another
// pass). Each is reported and kept; a healthy pass then purges what is due, moves the younger
// tombstone, and purges it at its own time, never before.
TEST_F(TombstoneAttackTest, StoreFailuresInThePurgeAreReportedAndTheNextPassGoesOn) {
  Seed({"a", "b", "e"});
  {
    Database db(mem, Eng());
    MustCommit(db, Transaction().Delete("c", "a"));
    MustCommit(db, Transaction().Delete("c", "b").Delete("c", "e"));
  }
  ASSERT_TRUE(Pass(Gc()).ok());  // folds the marker: two entries
  ASSERT_EQ(Index().size(), 2u);
  clock->Advance(40min);
  {
    litetx::Options off = Eng();
    off.index_tombstones = false;
    Database quiet(mem, off);
    MustCommit(quiet, Transaction().Insert("c", "a", Obj("{}")));
    MustCommit(quiet, Transaction().Delete("c", "a"));
  }
  const std::int64_t second = MetaOf(*mem, "c", "a").at_ms;
  clock->Advance(kRetention - 40min + 1s);  // the entries are due; a's tombstone is not
  auto hook = std::make_shared<HookStore>(mem);
  int mode = 1;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (mode == 1 && c.op == Op::kScan && c.key.collection == kTomb) {
      return Status::Unavailable("index down");
    }
    if (mode == 2 && ((c.op == Op::kGet && c.key == Key{"c", "b"}) ||
                      (c.key.collection == kTomb && c.is_write()))) {
      return Status::Unavailable("shard down");
    }
    return std::nullopt;
  };
  Collector gc(hook, Gc());
  Status s1 = gc.RunOnce();
  EXPECT_EQ(s1.code(), Code::kUnavailable) << s1.ToString();
  EXPECT_GE(gc.last_pass().failed, 1u);
  EXPECT_EQ(Index().size(), 2u);
  mode = 2;
  Status s2 = gc.RunOnce();
  EXPECT_FALSE(s2.ok());
  EXPECT_EQ(Index().size(), 2u);     // both entries kept
  EXPECT_TRUE(IsDead("c", "a"));     // young: never purged
  EXPECT_TRUE(IsDead("c", "b"));     // unread: kept
  EXPECT_FALSE(Raw(*mem, "c", "e").has_value());  // read and due: purged all the same
  mode = 0;
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsDead("c", "a"));
  EXPECT_FALSE(Raw(*mem, "c", "b").has_value());
  auto index = Index();
  ASSERT_EQ(index.size(), 1u);  // a, at its own time
  EXPECT_EQ(*litetx::engine::TombEntryTime(index.begin()->first), second);
  clock->Advance(std::chrono::milliseconds(second + kRetention.count() - clock->NowMillis() - 1));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsDead("c", "a")) << "purged before its own retention";
  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_TRUE(Index().empty());
}

// ---------------------------------------------------------------------------------------------
// Outcomes never change.

// Committed and aborted transactions (classic, parallel, reversed by a collector) answer the
// same outcome through every pass that indexes, folds and purges (collectors that fold and
// collectors that do not, alternately), until their outcome retention ends: then not found,
// for good.
TEST_F(TombstoneAttackTest, OutcomesNeverChangeWhileMarkersAreIndexedFoldedAndPurged) {
  Seed({"a", "b", "c1", "u"});
  std::map<std::string, TxnOutcome> want;
  {
    Database db(mem, Eng());
    want[MustCommit(db, Transaction().Delete("c", "a").Delete("c", "b")).txn_id] =
        TxnOutcome::kCommitted;
    litetx::Options par = Eng();
    par.parallel_commit = true;
    Database pdb(mem, par);
    want[MustCommit(pdb, Transaction().Delete("c", "c1").Update("c", "u", Obj(R"({"n":2})")))
             .txn_id] = TxnOutcome::kCommitted;
  }
  const std::string aborted = CommitDyingAfterWrite(
      mem, Eng(), Transaction().Insert("c", "x1", Obj("{}")).Insert("c", "x2", Obj("{}")), 2);
  ASSERT_FALSE(aborted.empty());
  want[aborted] = TxnOutcome::kAborted;
  const std::int64_t start = clock->NowMillis();
  Database db(mem, Eng());
  std::map<std::string, bool> gone;
  clock->Advance(kLease + 1s);
  for (int step = 0; step < 30; ++step) {
    CollectorOptions o = Gc(step % 2 == 0 ? "gc-fold" : "gc-nofold");
    o.fold_outcomes = step % 2 == 0;
    ASSERT_TRUE(Pass(o).ok()) << "step " << step;
    const std::int64_t age = clock->NowMillis() - start;
    for (const auto& [id, outcome] : want) {
      const TxnOutcome got = OutcomeOf(db, id);
      if (gone[id] || got == TxnOutcome::kNotFound) {
        EXPECT_EQ(got, TxnOutcome::kNotFound) << id << " came back at step " << step;
        EXPECT_GE(age, 2 * 3'600'000 - 60'000) << id << " forgotten early, step " << step;
        gone[id] = true;
      } else {
        EXPECT_EQ(got, outcome) << id << " changed at step " << step;
      }
    }
    clock->Advance(10min);
  }
  for (const auto& [id, outcome] : want) EXPECT_TRUE(gone[id]) << id << " never purged";
  EXPECT_TRUE(DeadIn("c").empty()) << Show(DeadIn("c"));
  EXPECT_TRUE(Index().empty());
}

// ---------------------------------------------------------------------------------------------
// Crashes, lost replies and races.

// Lost replies (the write landed) on every index entry create, every index entry erase, every
// record erase (the marker folds) and every document erase of the purge: no tombstone purged
// early, none left, and the index drained, within a few passes.
TEST_F(TombstoneAttackTest, LostRepliesOnEntriesMarkerErasesAndPurgeErasesLoseNothing) {
  Seed({"a", "b", "d", "u"});
  auto hook = std::make_shared<HookStore>(mem);
  int lost = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (!s.ok() || !c.is_write()) return std::nullopt;
    const bool hit = c.key.collection == kTomb ||
                     (c.op == Op::kErase && (c.on_record() || c.key.collection == "c"));
    if (!hit) return std::nullopt;
    ++lost;
    return Status::Unknown("reply lost");
  };
  {
    Database db(hook, Eng());
    MustCommit(db, Transaction().Delete("c", "a").Delete("c", "b").Update("c", "u", Obj(R"({"n":2})")));
    MustCommit(db, Transaction().Delete("c", "d"));  // its entry create's reply is lost
  }
  const std::string aborted = CommitDyingAfterWrite(
      hook, Eng(), Transaction().Insert("c", "x1", Obj("{}")).Insert("c", "x2", Obj("{}")), 2);
  ASSERT_FALSE(aborted.empty());
  clock->Advance(kLease + 1s);
  {
    Collector gc(hook, Gc());
    for (int i = 0; i < 3; ++i) (void)gc.RunOnce();
  }
  for (const char* id : {"a", "b", "d", "x1", "x2"}) {
    EXPECT_TRUE(IsDead("c", id)) << id << " purged early or not settled";
  }
  EXPECT_TRUE(ScanAll(*mem, kTxn).empty()) << "markers left";
  clock->Advance(kRetention + 1s);
  {
    Collector gc(hook, Gc());
    for (int i = 0; i < 4; ++i) (void)gc.RunOnce();
  }
  EXPECT_GT(lost, 5);
  EXPECT_TRUE(DeadIn("c").empty()) << Show(DeadIn("c"));
  EXPECT_TRUE(Index().empty());
  EXPECT_EQ(BodyOf(*mem, "c", "u"), Obj(R"({"n":2})"));
}

// The coordinator (classic and parallel, finishing in the foreground) dies after each of its
// writes in turn, committing a transaction that inserts over a tombstone, deletes, and updates.
// Whatever the outcome, every tombstone and placeholder left is purged by the index alone, and
// none before its retention.
TEST_F(TombstoneAttackTest, ACoordinatorDyingAfterEachWriteOverATombstoneLosesNothing) {
  for (int parallel = 0; parallel < 2; ++parallel) {
    int points = 0;
    for (int k = 1; k < 60; ++k) {
      SCOPED_TRACE((parallel ? "parallel k=" : "classic k=") + std::to_string(k));
      Fresh();
      Seed({"t", "a", "u"});
      {
        Database db(mem, Eng());
        MustCommit(db, Transaction().Delete("c", "t"));
      }
      litetx::Options o = Eng();
      o.parallel_commit = parallel == 1;
      bool died = true;
      {
        auto hook = std::make_shared<HookStore>(mem);
        int writes = 0;
        hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
          if (c.is_write() && s.ok() && ++writes == k) throw CoordinatorDied{};
          return std::nullopt;
        };
        Database doomed(hook, o);
        try {
          (void)doomed.Commit(Transaction()
                                  .Insert("c", "t", Obj(R"({"n":7})"))
                                  .Delete("c", "a")
                                  .Update("c", "u", Obj(R"({"n":2})")));
          died = false;
        } catch (const CoordinatorDied&) {
        }
      }
      if (!died) break;
      ++points;
      clock->Advance(kLease + 1s);
      for (int i = 0; i < 2; ++i) ASSERT_TRUE(Pass(Gc()).ok());
      ExpectClean(*mem, {"c"});
      const bool committed = MetaOf(*mem, "c", "t").live();
      EXPECT_EQ(IsDead("c", "a"), committed);
      // Just before the first retention (the first delete of t): nothing purged.
      clock->Advance(kRetention - kLease - 2s);
      ASSERT_TRUE(Pass(Gc()).ok());
      for (const char* id : {"t", "a", "u"}) EXPECT_TRUE(Raw(*mem, "c", id).has_value()) << id;
      clock->Advance(kLease + 10s);
      Passes(3, Gc());
      EXPECT_TRUE(DeadIn("c").empty()) << "never purged: " << Show(DeadIn("c"));
      EXPECT_TRUE(Index().empty());
      EXPECT_EQ(Raw(*mem, "c", "t").has_value(), committed);
      EXPECT_EQ(Raw(*mem, "c", "a").has_value(), !committed);
    }
    EXPECT_GE(points, 4);
    RecordProperty(parallel ? "parallel_points" : "classic_points", points);
  }
}

// Background finishing (the default; the finisher's threads must not throw): the k-th write of
// the commit and its finishing fails (kUnavailable, not applied) or loses its reply (applied),
// in turn. Collectors settle what is left; every tombstone is then purged by the index alone.
TEST_F(TombstoneAttackTest, BackgroundFinishingWithAFailedOrLostWriteLosesNoTombstone) {
  for (int lost = 0; lost < 2; ++lost) {
    int points = 0;
    for (int k = 1; k < 40; ++k) {
      SCOPED_TRACE((lost ? "lost reply k=" : "failed write k=") + std::to_string(k));
      Fresh();
      Seed({"a", "b", "u"});
      litetx::Options o = Eng();
      o.parallel_commit = true;
      o.finish_in_background = true;
      auto hook = std::make_shared<HookStore>(mem);
      std::mutex mu;
      int writes = 0;
      auto nth = [&](const Call& c) {
        if (!c.is_write()) return false;
        std::lock_guard<std::mutex> lock(mu);
        return ++writes == k;
      };
      if (lost) {
        hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
          if (s.ok() && nth(c)) return Status::Unknown("reply lost");
          return std::nullopt;
        };
      } else {
        hook->before = [&](const Call& c) -> std::optional<Status> {
          if (nth(c)) return Status::Unavailable("injected");
          return std::nullopt;
        };
      }
      {
        Database db(hook, o);
        (void)db.Commit(
            Transaction().Delete("c", "a").Delete("c", "b").Update("c", "u", Obj(R"({"n":2})")));
        db.Flush();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        if (writes < k) break;
      }
      ++points;
      clock->Advance(kLease + 1s);
      for (int i = 0; i < 2; ++i) ASSERT_TRUE(Pass(Gc()).ok());
      ExpectClean(*mem, {"c"});
      const bool deleted = IsDead("c", "a");
      EXPECT_EQ(IsDead("c", "b"), deleted);
      clock->Advance(kRetention - kLease - 2s);
      ASSERT_TRUE(Pass(Gc()).ok());
      for (const char* id : {"a", "b", "u"}) EXPECT_TRUE(Raw(*mem, "c", id).has_value()) << id;
      clock->Advance(kLease + 10s);
      Passes(3, Gc());
      EXPECT_TRUE(DeadIn("c").empty()) << "never purged: " << Show(DeadIn("c"));
      EXPECT_TRUE(Index().empty());
    }
    EXPECT_GE(points, 4);
    RecordProperty(lost ? "lost_points" : "failed_points", points);
  }
}

// Two collectors: A is paused before its n-th store call (every n in turn) while B runs a whole
// pass and a user re-inserts a deleted id; then A goes on. In the pass that settles and indexes
// (before any retention) and in the pass that purges (past every retention). No tombstone
// purged early, the re-inserted document kept, and everything else purged in the end by the
// index alone.
TEST_F(TombstoneAttackTest, TwoCollectorsOnePausedAtEveryStoreCallLoseAndPurgeNothingWrongly) {
  for (int phase = 0; phase < 2; ++phase) {
    int points = 0;
    for (int n = 1; n < 400; ++n) {
      SCOPED_TRACE((phase ? "purge pass, call " : "settle pass, call ") + std::to_string(n));
      Fresh();
      Seed({"a", "b", "u", "d", "x0"});
      litetx::Options o = Eng();
      ASSERT_FALSE(CommitDyingAfterWrite(
          mem, o, Transaction().Delete("c", "a").Delete("c", "b").Update("c", "u", Obj(R"({"n":2})")),
          5).empty());
      ASSERT_FALSE(CommitDyingAfterWrite(
          mem, o, Transaction().Insert("c", "x1", Obj("{}")).Insert("c", "x2", Obj("{}")), 2).empty());
      {
        Database db(mem, o);
        MustCommit(db, Transaction().Delete("c", "d"));
        MustCommit(db, Transaction().Delete("c", "x0").Update("c", "u", Obj(R"({"n":2})")));
      }
      clock->Advance(kLease + 1s);
      if (phase == 1) {
        ASSERT_TRUE(Pass(Gc("gc-first")).ok());
        clock->Advance(kRetention + 10s);
      }
      auto hook = std::make_shared<HookStore>(mem);
      Pause pause;
      int calls = 0;
      hook->before = [&](const Call&) -> std::optional<Status> {
        if (++calls == n) pause.Hold();
        return std::nullopt;
      };
      bool held = false;
      {
        Collector a(hook, Gc("gc-A"));
        Async run([&] {
          (void)a.RunOnce();
          pause.Finished();
        });
        held = pause.Held();
        if (held) {
          (void)Pass(Gc("gc-B"));
          auto user = Direct();
          MustCommit(*user, Transaction().Insert("c", "a", Obj(R"({"n":7})")));
        }
        pause.Open();
        EXPECT_TRUE(run.Wait(10s));
      }
      if (!held) break;
      ++points;
      EXPECT_EQ(BodyOf(*mem, "c", "a"), Obj(R"({"n":7})"));
      EXPECT_TRUE(MetaOf(*mem, "c", "a").live());
      EXPECT_EQ(BodyOf(*mem, "c", "u"), Obj(R"({"n":2})"));
      if (phase == 0) {
        for (const char* id : {"b", "d", "x0", "x1", "x2"}) {
          EXPECT_TRUE(IsDead("c", id)) << id << " purged early (or not settled)";
        }
      }
      clock->Advance(kRetention + 10s);
      Passes(3, Gc("gc-B"));
      EXPECT_TRUE(DeadIn("c").empty()) << "never purged: " << Show(DeadIn("c"));
      EXPECT_TRUE(Index().empty());
      EXPECT_TRUE(ScanAll(*mem, kTxn).empty());
      EXPECT_EQ(BodyOf(*mem, "c", "a"), Obj(R"({"n":7})"));
    }
    EXPECT_GE(points, 10) << "phase " << phase;
    RecordProperty(phase ? "purge_points" : "settle_points", points);
  }
}

}  // namespace
}  // namespace ltxtest
