// tests/tombstone_index_test.cpp — the tombstone index (engine/tombstones.h): tombstones and
// placeholders are purged once their retention has passed, in every collection, without a
// sweep, and never earlier; a one-write delete indexes its tombstone in the same round; larger
// transactions through their outcome markers (folded or expired); a crash or a failed write at
// every write of the coordinator, of the collector or of the one-write delete loses no
// tombstone (each is purged in the end, by the index alone) and purges none early; a tombstone
// made again later is purged at its own time; a malformed entry is reported and skipped; a
// tombstone without an entry is found by the sweep, which runs once per sweep_interval.
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/tombstones.h"
#include "tombstone_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;

struct Crash {};

constexpr std::chrono::milliseconds kLease = TombstoneWorld::kLease;
constexpr std::chrono::milliseconds kRetention = TombstoneWorld::kRetention;

class TombstoneIndexTest : public ::testing::Test, public TombstoneWorld {
 protected:
  CollectorOptions Gc(std::string name = "gc-tomb") const { return TombstoneWorld::Gc(name); }
  // Every document the index names, entry id -> keys.
  bool IsTombstone(const std::string& c, const std::string& id) { return IsDeadDoc(*mem, c, id); }
  void Seed(const std::vector<std::string>& ids) {
    auto db = Direct();
    for (const auto& id : ids) MustCommit(*db, Transaction().Insert("c", id, Obj(R"({"n":1})")));
  }
  Status Pass(CollectorOptions o) {
    Collector gc(mem, std::move(o));
    return gc.RunOnce();
  }
};

TEST_F(TombstoneIndexTest, AOneWriteDeleteIsIndexedInTheSameRoundAndPurgedAtItsRetention) {
  Seed({"a", "b"});
  auto counting = std::make_shared<litetx::CountingStore>(mem);
  litetx::Database db(counting, Eng());
  const auto before = counting->counts();
  MustCommit(db, Transaction().Delete("c", "a"));
  const auto after = counting->counts();
  // One write round: the delete and its entry in one batch (and the read before it).
  EXPECT_EQ(after.batches - before.batches, 1u);
  EXPECT_EQ(after.creates - before.creates, 1u);   // the entry
  EXPECT_EQ(after.replaces - before.replaces, 1u);  // the tombstone
  auto index = Index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index.begin()->second, std::set<std::string>{"c/a"});
  const auto at = litetx::engine::TombEntryTime(index.begin()->first);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(*at, MetaOf(*mem, "c", "a").at_ms);

  // Just before the retention: kept (also the entry).
  clock->Advance(kRetention - 1ms);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsTombstone("c", "a"));
  EXPECT_EQ(Index().size(), 1u);
  EXPECT_EQ(gc.last_pass().tombstones.due, 0u);
  EXPECT_EQ(gc.last_pass().index_read, 1u);  // the one entry, not due: the purge stops there

  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_TRUE(Raw(*mem, "c", "b").has_value());
  EXPECT_TRUE(Index().empty());
  EXPECT_EQ(gc.last_pass().tombstones.due, 1u);
  EXPECT_EQ(gc.last_pass().tombstones.done, 1u);
  EXPECT_EQ(gc.last_pass().index_read, 2u);  // the entry and its document
  EXPECT_EQ(gc.stats().swept, 0u);           // no sweep: nothing listed
  // The id is free again: a new insert starts above the versions it had.
  litetx::Database again(mem, Eng());
  MustCommit(again, Transaction().Insert("c", "a", Obj("{}")));
}

TEST_F(TombstoneIndexTest, IndexingOffLeavesTheTombstoneToTheSweep) {
  Seed({"a"});
  litetx::Options o = Eng();
  o.index_tombstones = false;
  litetx::Database db(mem, o);
  MustCommit(db, Transaction().Delete("c", "a"));
  EXPECT_TRUE(Index().empty());
  clock->Advance(kRetention + 1ms);
  ASSERT_TRUE(Pass(Gc()).ok());
  EXPECT_TRUE(IsTombstone("c", "a"));  // nothing names it
  CollectorOptions sweep = Gc();
  sweep.collections = {"c"};
  ASSERT_TRUE(Pass(sweep).ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
}

TEST_F(TombstoneIndexTest, ATransactionsDeletesAreIndexedFromItsMarkerWhenItIsFolded) {
  Seed({"a", "b", "u"});
  litetx::Database db(mem, Eng());
  auto info = MustCommit(db, Transaction()
                                 .Delete("c", "a")
                                 .Delete("c", "b")
                                 .Update("c", "u", Obj(R"({"n":2})")));
  // The transaction wrote no entry; its marker names its deletes.
  EXPECT_TRUE(Index().empty());
  auto marker = RecordOf(*mem, info.txn_id);
  ASSERT_TRUE(marker.has_value());
  ASSERT_EQ(marker->tomb_keys.size(), 2u);
  const std::int64_t done_at = marker->done_at_ms;

  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.last_pass().markers.done, 1u);  // folded
  auto index = Index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index.begin()->first, litetx::engine::TombEntryForTxn(done_at, info.txn_id).id);
  EXPECT_EQ(index.begin()->second, (std::set<std::string>{"c/a", "c/b"}));

  clock->Advance(kRetention - 1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsTombstone("c", "a"));
  EXPECT_TRUE(IsTombstone("c", "b"));
  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_FALSE(Raw(*mem, "c", "b").has_value());
  EXPECT_EQ(BodyOf(*mem, "c", "u"), Obj(R"({"n":2})"));
  EXPECT_TRUE(Index().empty());
  EXPECT_EQ(gc.last_pass().tombstones.done, 2u);
}

TEST_F(TombstoneIndexTest, ARolledBackTransactionsInsertsArePurgedAsPlaceholders) {
  // The coordinator dies after its record and one insert: the collector reverses that insert
  // (a placeholder) and fences the other (a "gone" fence); both go at the retention.
  const std::string id = CommitDyingAfterWrite(
      mem, Eng(), Transaction().Insert("c", "x", Obj("{}")).Insert("c", "y", Obj("{}")), 2);
  ASSERT_FALSE(id.empty());
  clock->Advance(kLease + 1ms);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_TRUE(IsTombstone("c", "x"));
  EXPECT_TRUE(IsTombstone("c", "y"));
  ASSERT_EQ(Index().size(), 1u);
  EXPECT_EQ(Index().begin()->second, (std::set<std::string>{"c/x", "c/y"}));
  clock->Advance(kRetention);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "x").has_value());
  EXPECT_FALSE(Raw(*mem, "c", "y").has_value());
  EXPECT_TRUE(Index().empty());
}

TEST_F(TombstoneIndexTest, WithoutFoldingTheEntryIsWrittenBeforeTheExpiredMarkerIsErased) {
  Seed({"a", "b"});
  litetx::Database db(mem, Eng());
  auto info = MustCommit(db, Transaction().Delete("c", "a").Delete("c", "b"));
  CollectorOptions o = Gc();
  o.fold_outcomes = false;
  o.outcome_retention = 30min;
  Collector gc(mem, o);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(Index().empty());  // the marker still names them
  clock->Advance(30min);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(RecordOf(*mem, info.txn_id).has_value());  // the marker is gone...
  EXPECT_EQ(Index().size(), 1u);                          // ...after its entry was written
  clock->Advance(30min);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_FALSE(Raw(*mem, "c", "b").has_value());
}

TEST_F(TombstoneIndexTest, ATombstoneMadeAgainLaterIsPurgedAtItsOwnTime) {
  Seed({"a"});
  litetx::Database db(mem, Eng());
  MustCommit(db, Transaction().Delete("c", "a"));
  // Made live again and deleted again, 40 minutes later, by a path that writes no entry (the
  // index is off for this database): the first entry now names a younger tombstone.
  clock->Advance(40min);
  litetx::Options off = Eng();
  off.index_tombstones = false;
  litetx::Database quiet(mem, off);
  MustCommit(quiet, Transaction().Insert("c", "a", Obj("{}")));
  MustCommit(quiet, Transaction().Delete("c", "a"));
  const std::int64_t second = MetaOf(*mem, "c", "a").at_ms;
  clock->Advance(kRetention - 40min);  // the first entry is due, the tombstone is not
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsTombstone("c", "a"));
  auto index = Index();
  ASSERT_EQ(index.size(), 1u);  // moved to the tombstone's own time
  EXPECT_EQ(*litetx::engine::TombEntryTime(index.begin()->first), second);
  clock->Advance(40min - 1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(IsTombstone("c", "a"));
  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_TRUE(Index().empty());
}

TEST_F(TombstoneIndexTest, AnEntryWhoseDocumentWasWrittenAgainIsDroppedAndTheDocumentKept) {
  Seed({"a"});
  litetx::Database db(mem, Eng());
  MustCommit(db, Transaction().Delete("c", "a"));
  MustCommit(db, Transaction().Insert("c", "a", Obj(R"({"n":5})")));
  clock->Advance(kRetention + 1ms);
  ASSERT_TRUE(Pass(Gc()).ok());
  EXPECT_EQ(BodyOf(*mem, "c", "a"), Obj(R"({"n":5})"));
  EXPECT_TRUE(Index().empty());
}

TEST_F(TombstoneIndexTest, ZeroRetentionNeverPurgesAndKeepsTheEntriesForOthers) {
  Seed({"a"});
  litetx::Database db(mem, Eng());
  MustCommit(db, Transaction().Delete("c", "a"));
  clock->Advance(48h);
  CollectorOptions o = Gc();
  o.tombstone_retention = 0ms;
  Collector never(mem, o);
  ASSERT_TRUE(never.RunOnce().ok());
  EXPECT_TRUE(IsTombstone("c", "a"));
  EXPECT_EQ(Index().size(), 1u);
  EXPECT_EQ(never.last_pass().index_read, 0u);
  ASSERT_TRUE(Pass(Gc()).ok());  // a collector with a retention purges it
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
}

TEST_F(TombstoneIndexTest, MalformedEntriesAreReportedAndSkipped) {
  Seed({"a", "b"});
  litetx::Database db(mem, Eng());
  MustCommit(db, Transaction().Delete("c", "a"));
  MustCommit(db, Transaction().Delete("c", "b"));
  const std::string t = ScanAll(*mem, litetx::kTombstoneIndexCollection).front().first.substr(0, 12);
  PutRaw(*mem, Key{std::string(litetx::kTombstoneIndexCollection), t + "0bad"}, Obj(R"({"k":7})"));
  PutRaw(*mem, Key{std::string(litetx::kTombstoneIndexCollection), t + "1bad"},
         Obj(R"({"k":[["c"]]})"));
  PutRaw(*mem, Key{std::string(litetx::kTombstoneIndexCollection), "zz-no-time"}, Obj(R"({"k":[]})"));
  clock->Advance(kRetention + 1ms);
  Collector gc(mem, Gc());
  Status s = gc.RunOnce();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_EQ(gc.last_pass().failed, 3u);
  // The well-formed entries were still purged; the malformed ones are kept for an operator.
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  EXPECT_FALSE(Raw(*mem, "c", "b").has_value());
  EXPECT_EQ(Index().size(), 1u);  // of the three kept, only "zz-no-time" has a key list
  EXPECT_EQ(ScanAll(*mem, litetx::kTombstoneIndexCollection).size(), 3u);
}

TEST_F(TombstoneIndexTest, TheBudgetBoundsAPassAndTheNextPassGoesOn) {
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back("d" + std::to_string(i));
  Seed(ids);
  litetx::Database db(mem, Eng());
  for (const auto& id : ids) MustCommit(db, Transaction().Delete("c", id));
  clock->Advance(kRetention + 1ms);
  CollectorOptions o = Gc();
  o.tombstone_purge_budget = 10;  // 5 entries and their documents per pass
  o.scan_batch = 4;
  Collector gc(mem, o);
  int passes = 0;
  while (!Index().empty() && passes < 10) {
    ASSERT_TRUE(gc.RunOnce().ok());
    ++passes;
    EXPECT_EQ(gc.last_pass().index_read, 10u);
    EXPECT_EQ(gc.last_pass().tombstones.done, 5u);
    // Stopped by the budget (backlog 1: "not read to its end"), except the last one.
    EXPECT_EQ(gc.last_pass().complete, Index().empty()) << "pass " << passes;
  }
  EXPECT_EQ(passes, 4);
  for (const auto& id : ids) EXPECT_FALSE(Raw(*mem, "c", id).has_value()) << id;
}

TEST_F(TombstoneIndexTest, TheSweepRunsOncePerIntervalAndFindsTombstonesWithoutAnEntry) {
  Seed({"a"});
  litetx::Options off = Eng();
  off.index_tombstones = false;
  litetx::Database db(mem, off);
  MustCommit(db, Transaction().Delete("c", "a"));
  CollectorOptions o = Gc();
  o.collections = {"c"};
  o.sweep_interval = 10min;
  Collector gc(mem, o);
  ASSERT_TRUE(gc.RunOnce().ok());  // the first pass sweeps
  EXPECT_EQ(gc.stats().swept, 1u);
  clock->Advance(kRetention + 1ms);  // the next slice is due: it purges
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().swept, 2u);
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
  ASSERT_TRUE(gc.RunOnce().ok());  // within the interval: no slice
  EXPECT_EQ(gc.stats().swept, 2u);
  clock->Advance(10min);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().swept, 2u + 0u);  // the collection is empty now: nothing to look at
  EXPECT_EQ(gc.stats().runs, 4u);
}

TEST_F(TombstoneIndexTest, ACoordinatorDyingAfterEachWriteLosesNoTombstoneAndPurgesNoneEarly) {
  int points = 0;
  for (int k = 1;; ++k) {
    mem = std::make_shared<litetx::MemoryStore>();
    clock = std::make_shared<litetx::ManualClock>();
    Seed({"a", "b", "u"});
    litetx::Options o = Eng();
    o.parallel_commit = true;  // the default path; its finishing writes are crash points too
    std::string id;
    bool died = true;
    {
      auto hook = std::make_shared<HookStore>(mem);
      int writes = 0;
      hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
        if (c.is_write() && s.ok() && ++writes == k) throw CoordinatorDied{};
        return std::nullopt;
      };
      litetx::Database doomed(hook, o);
      try {
        auto r = doomed.Commit(Transaction().Delete("c", "a").Delete("c", "b").Update(
            "c", "u", Obj(R"({"n":2})")));
        if (r.ok()) id = r->txn_id;
        died = false;
      } catch (const CoordinatorDied&) {
      }
      if (!died) break;  // k is past the last write
    }
    ++points;
    // Collectors settle it (commit or roll back) before any tombstone retention.
    clock->Advance(kLease + 1ms);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(Pass(Gc()).ok()) << "k=" << k;
    const bool deleted = !MetaOf(*mem, "c", "a").live();
    EXPECT_EQ(!MetaOf(*mem, "c", "b").live(), deleted) << "k=" << k;
    if (deleted) {
      EXPECT_TRUE(IsTombstone("c", "a")) << "k=" << k;
      EXPECT_TRUE(IsTombstone("c", "b")) << "k=" << k;
    }
    clock->Advance(kRetention - kLease - 2ms);  // just before any retention: nothing purged
    ASSERT_TRUE(Pass(Gc()).ok());
    EXPECT_TRUE(Raw(*mem, "c", "a").has_value()) << "k=" << k;
    EXPECT_TRUE(Raw(*mem, "c", "b").has_value()) << "k=" << k;
    clock->Advance(kLease + 2ms);  // past every retention: the index alone purges them all
    ASSERT_TRUE(Pass(Gc()).ok());
    EXPECT_EQ(Raw(*mem, "c", "a").has_value(), !deleted) << "k=" << k;
    EXPECT_EQ(Raw(*mem, "c", "b").has_value(), !deleted) << "k=" << k;
    EXPECT_TRUE(Raw(*mem, "c", "u").has_value()) << "k=" << k;
    EXPECT_TRUE(Index().empty()) << "k=" << k;
  }
  EXPECT_GE(points, 6);
}

TEST_F(TombstoneIndexTest, ACollectorDyingAfterEachWriteLosesNoTombstoneAndPurgesNoneEarly) {
  int points = 0;
  for (int k = 1; k < 200; ++k) {
    mem = std::make_shared<litetx::MemoryStore>();
    clock = std::make_shared<litetx::ManualClock>();
    Seed({"a", "b", "u", "x0"});
    // A committed deleter whose coordinator died before finishing (after its flip), and an
    // aborted inserter (after its record and one insert): the collector finishes the first
    // and reverses the second, folds both markers and writes their entries.
    litetx::Options o = Eng();
    const std::string committed_id = CommitDyingAfterWrite(
        mem, o, Transaction().Delete("c", "a").Delete("c", "b").Update("c", "u", Obj(R"({"n":2})")), 5);
    const std::string aborted_id = CommitDyingAfterWrite(
        mem, o, Transaction().Insert("c", "x1", Obj("{}")).Insert("c", "x2", Obj("{}")), 2);
    ASSERT_FALSE(committed_id.empty());
    ASSERT_FALSE(aborted_id.empty());
    {
      litetx::Database db(mem, o);
      MustCommit(db, Transaction().Delete("c", "x0"));
    }
    clock->Advance(kLease + 1ms);
    // The collector dies after its k-th write, in its first pass (before any retention) or in
    // its second (past the retention of everything).
    bool died = false;
    bool second = false;
    {
      auto hook = std::make_shared<HookStore>(mem);
      int writes = 0;
      hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
        if (c.is_write() && s.ok() && ++writes == k) throw Crash{};
        return std::nullopt;
      };
      Collector doomed(hook, Gc("gc-doomed"));
      try {
        (void)doomed.RunOnce();
        clock->Advance(kRetention);
        second = true;
        (void)doomed.RunOnce();
      } catch (const Crash&) {
        died = true;
      }
      if (!died) break;
    }
    ++points;
    // A fresh collector goes on. Before the retention has passed, nothing may be purged.
    ASSERT_TRUE(Pass(Gc()).ok());
    if (!second) {
      for (const char* id : {"a", "b", "x0", "x1", "x2"}) {
        EXPECT_TRUE(Raw(*mem, "c", id).has_value()) << id << " purged early, k=" << k;
      }
    }
    clock->Advance(kRetention + 1ms);
    ASSERT_TRUE(Pass(Gc()).ok());
    ASSERT_TRUE(Pass(Gc()).ok());
    for (const char* id : {"a", "b", "x0", "x1", "x2"}) {
      EXPECT_FALSE(Raw(*mem, "c", id).has_value()) << id << " never purged, k=" << k;
    }
    EXPECT_EQ(BodyOf(*mem, "c", "u"), Obj(R"({"n":2})")) << "k=" << k;
    EXPECT_TRUE(Index().empty()) << "k=" << k;
  }
  EXPECT_GE(points, 8);
}

TEST_F(TombstoneIndexTest, AOneWriteDeleteDyingBetweenItsEntryAndItsTombstoneLosesNothing) {
  // The batch sends the entry first: a crash after it leaves an entry naming a live document,
  // which the purge drops and leaves the document alone. The reverse (the tombstone lands, the
  // entry does not: a failed entry write) leaves a tombstone the sweep finds.
  for (int k = 1; k <= 2; ++k) {
    mem = std::make_shared<litetx::MemoryStore>();
    clock = std::make_shared<litetx::ManualClock>();
    Seed({"a"});
    auto hook = std::make_shared<HookStore>(mem);
    int writes = 0;
    hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.is_write() && s.ok() && ++writes == k) throw CoordinatorDied{};
      return std::nullopt;
    };
    {
      litetx::Database doomed(hook, Eng());
      EXPECT_THROW((void)doomed.Commit(Transaction().Delete("c", "a")), CoordinatorDied);
    }
    EXPECT_EQ(Index().size(), 1u) << "k=" << k;
    EXPECT_EQ(MetaOf(*mem, "c", "a").live(), k == 1);
    clock->Advance(kRetention + 1ms);
    ASSERT_TRUE(Pass(Gc()).ok());
    EXPECT_EQ(Raw(*mem, "c", "a").has_value(), k == 1) << "k=" << k;
    EXPECT_TRUE(Index().empty()) << "k=" << k;
  }
  // The entry write fails every time and the delete lands.
  mem = std::make_shared<litetx::MemoryStore>();
  clock = std::make_shared<litetx::ManualClock>();
  Seed({"a"});
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.key.collection == litetx::kTombstoneIndexCollection) return Status::Unavailable("down");
    return std::nullopt;
  };
  {
    litetx::Database db(hook, Eng());
    MustCommit(db, Transaction().Delete("c", "a"));
  }
  EXPECT_TRUE(Index().empty());
  EXPECT_TRUE(IsTombstone("c", "a"));
  clock->Advance(kRetention + 1ms);
  ASSERT_TRUE(Pass(Gc()).ok());
  EXPECT_TRUE(IsTombstone("c", "a"));  // the index does not know it
  CollectorOptions sweep = Gc();
  sweep.collections = {"c"};
  ASSERT_TRUE(Pass(sweep).ok());
  EXPECT_FALSE(Raw(*mem, "c", "a").has_value());
}

TEST_F(TombstoneIndexTest, AFailingIndexKeepsTheMarkerUntilItsEntryIsWritten) {
  Seed({"a", "b"});
  litetx::Database db(mem, Eng());
  auto info = MustCommit(db, Transaction().Delete("c", "a").Delete("c", "b"));
  auto hook = std::make_shared<HookStore>(mem);
  bool down = true;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (down && c.key.collection == litetx::kTombstoneIndexCollection && c.is_write()) {
      return Status::Unavailable("down");
    }
    return std::nullopt;
  };
  Collector gc(hook, Gc());
  (void)gc.RunOnce();
  EXPECT_TRUE(RecordOf(*mem, info.txn_id).has_value());  // the marker is kept
  EXPECT_TRUE(ScanAll(*mem, litetx::kTransactionsCollection).size() == 1u);
  EXPECT_EQ(OutcomeOf(db, info.txn_id), litetx::TxnOutcome::kCommitted);
  down = false;
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(ScanAll(*mem, litetx::kTransactionsCollection).empty());
  EXPECT_EQ(Index().size(), 1u);
  EXPECT_EQ(OutcomeOf(db, info.txn_id), litetx::TxnOutcome::kCommitted);
}

}  // namespace
}  // namespace ltxtest
