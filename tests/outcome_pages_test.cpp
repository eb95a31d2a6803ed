// tests/outcome_pages_test.cpp — outcome pages (engine/outcomes.h): the collector folds outcome
// markers into pages of many outcomes and erases the markers; Database::Outcome, readers,
// writers and coordinators answer from the pages as they did from the markers; a crash or a lost
// reply at any write of a fold loses no outcome and changes none; two collectors fold at once;
// pages are purged after the outcome retention; a fence made after a fold is not the outcome;
// what cannot be folded stays; a corrupt page is reported, never fatal; the pass report.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/outcomes.h"
#include "engine/repair.h"
#include "engine/txn_id.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;

struct Crash {};

constexpr std::chrono::milliseconds kLease = 10s;

class OutcomePagesTest : public ::testing::Test, public World {
 protected:
  litetx::Options Eng() const {
    litetx::Options o = Opts();
    o.lease = kLease;
    return o;
  }
  CollectorOptions Gc(std::string name = "gc-pages") const {
    CollectorOptions o;
    o.engine = Eng();
    o.name = std::move(name);
    return o;
  }
  litetx::engine::Env Env() {
    return litetx::engine::Env{*mem, opts_, *opts_.clock, *opts_.logger};
  }

  // `n` committed two-document transactions (each leaves an outcome marker), and `aborted`
  // rolled back ones (a crash after the record and one apply, reversed by a collector). Returns
  // every id with its outcome.
  std::map<std::string, TxnOutcome> Make(int n, int aborted = 0) {
    std::map<std::string, TxnOutcome> out;
    litetx::Database db(mem, Eng());
    for (int i = 0; i < n; ++i) {
      auto r = MustCommit(db, Transaction()
                                  .Insert("c", "k" + std::to_string(serial_), Obj(R"({"n":1})"))
                                  .Insert("c", "l" + std::to_string(serial_), Obj(R"({"n":2})")));
      ++serial_;
      out[r.txn_id] = TxnOutcome::kCommitted;
    }
    for (int i = 0; i < aborted; ++i, ++serial_) {
      const std::string id = CommitDyingAfterWrite(
          mem, Eng(),
          Transaction()
              .Insert("c", "m" + std::to_string(serial_), Obj("{}"))
              .Insert("c", "o" + std::to_string(serial_), Obj("{}")),
          2);
      out[id] = TxnOutcome::kAborted;
    }
    if (aborted > 0) {
      clock->Advance(kLease + 1ms);
      CollectorOptions o = Gc("gc-settle");
      o.fold_outcomes = false;  // markers only: the folding is the test's
      Collector settle(mem, o);
      EXPECT_TRUE(settle.RunOnce().ok());
      EXPECT_EQ(settle.stats().reversed, static_cast<std::uint64_t>(aborted));
    }
    return out;
  }

  void ExpectOutcomes(const std::map<std::string, TxnOutcome>& want, const std::string& where) {
    litetx::Database reader(mem, Eng());
    for (const auto& [id, o] : want) EXPECT_EQ(OutcomeOf(reader, id), o) << where << ": " << id;
  }

  std::size_t PageEntries() {
    std::size_t n = 0;
    for (const auto& [id, doc] : ScanAll(*mem, litetx::kOutcomesCollection)) {
      n += doc.value.at("e").as_string().size() / litetx::engine::kOutcomeEntryChars;
    }
    return n;
  }
  std::size_t Records() { return ScanAll(*mem, litetx::kTransactionsCollection).size(); }

  litetx::Options opts_ = Eng();
  int serial_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Folding and answering

TEST_F(OutcomePagesTest, APassFoldsEveryMarkerAndOutcomesStillAnswer) {
  auto want = Make(40, 5);
  ASSERT_EQ(Records(), 45u);
  ExpectOutcomes(want, "before the fold");
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().folded, 45u);
  EXPECT_EQ(gc.stats().failed, 0u);
  EXPECT_EQ(Records(), 0u);
  EXPECT_EQ(PageEntries(), 45u);
  const litetx::CollectorPass p = gc.last_pass();
  EXPECT_EQ(p.markers.due, 45u);
  EXPECT_EQ(p.markers.done, 45u);
  EXPECT_EQ(p.records_read, 45u);
  EXPECT_EQ(p.backlog, 0u);
  EXPECT_TRUE(p.complete);
  ExpectOutcomes(want, "after the fold");
  // Every page holds only its own partition and 256 ms of ids.
  for (const auto& [id, doc] : ScanAll(*mem, litetx::kOutcomesCollection)) {
    EXPECT_EQ(id.size(), litetx::engine::kOutcomePageIdChars);
  }
  for (const auto& [id, o] : want) {
    EXPECT_TRUE(Raw(*mem, std::string(litetx::kOutcomesCollection), *litetx::engine::OutcomePageId(id))
                    .has_value())
        << id;
  }
  // A second pass reads nothing of the record collection and writes nothing.
  Dump before = DumpStore(*mem, {"c", std::string(litetx::kOutcomesCollection)});
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.last_pass().records_read, 0u);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c", std::string(litetx::kOutcomesCollection)})));
}

TEST_F(OutcomePagesTest, StorageIsUnderSixtyFourBytesPerTransaction) {
  // Many transactions in a short time: pages of many entries, as in a busy service.
  auto want = Make(400);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  ASSERT_EQ(PageEntries(), 400u);
  std::size_t bytes = 0;
  for (const auto& [id, doc] : ScanAll(*mem, litetx::kOutcomesCollection)) {
    bytes += id.size() + boost::json::serialize(doc.value).size();
  }
  const double per_txn = static_cast<double>(bytes) / 400.0;
  std::printf("[ info ] outcome pages: %zu bytes (ids and JSON values) for 400 transactions in "
              "%zu pages: %.1f bytes per transaction\n",
              bytes, ScanAll(*mem, litetx::kOutcomesCollection).size(), per_txn);
  EXPECT_LT(per_txn, 64.0);
  ExpectOutcomes(want, "after the fold");
}

TEST_F(OutcomePagesTest, ReadersAndWritersMeetFoldedTransactionsAsOver) {
  auto want = Make(3);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  ASSERT_EQ(Records(), 0u);
  litetx::Database db(mem, Eng());
  // The committed documents read committed, and can be written again.
  EXPECT_EQ(ReadImage(db, "c", "k0").doc, Obj(R"({"n":1})"));
  MustCommit(db, Transaction().Update("c", "k0", Obj(R"({"n":5})")).Update("c", "l0", Obj(R"({"n":6})")));
  EXPECT_EQ(ReadImage(db, "c", "k0").doc, Obj(R"({"n":5})"));
  // The coordinator's own view of its record (engine/outcomes.h GetRecordDoc) is the marker.
  for (const auto& [id, o] : want) {
    auto env = Env();
    auto rec = litetx::engine::GetRecordDoc(env, id);
    ASSERT_TRUE(rec.ok());
    ASSERT_TRUE(rec->has_value()) << id;
    auto decoded = litetx::engine::DecodeRecord((**rec).value);
    ASSERT_TRUE(decoded.ok());
    EXPECT_TRUE(decoded->done);
    EXPECT_EQ(decoded->state, TxnState::kCommitted);
    EXPECT_EQ((**rec).revision, 0u);  // no document: a compare-and-swap on it fails
  }
}

// ---------------------------------------------------------------------------------------------
// Crashes and lost replies

TEST_F(OutcomePagesTest, CrashAfterEveryWriteOfAFoldLosesAndChangesNoOutcome) {
  // A collector dying after its k-th write, for k = 1, 2, ... until a pass needs fewer writes
  // (each case makes new transactions, whose random partitions decide how many pages they
  // share: a fold writes each page once, then erases each marker).
  int crashes = 0;
  for (int k = 1;; ++k) {
    ASSERT_LE(k, 100) << "the fold never ended";
    SCOPED_TRACE("collector died after write " + std::to_string(k));
    mem = std::make_shared<litetx::MemoryStore>();
    auto want = Make(6, 2);
    ExpectOutcomes(want, "before the fold");
    auto hook = std::make_shared<HookStore>(mem);
    int writes = 0;
    hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.is_write() && s.ok() && ++writes == k) throw Crash{};
      return std::nullopt;
    };
    Collector doomed(hook, Gc("gc-doomed"));
    bool crashed = false;
    try {
      (void)doomed.RunOnce();
    } catch (const Crash&) {
      crashed = true;
    }
    ExpectOutcomes(want, "after the crash");
    Collector fresh(mem, Gc("gc-fresh"));
    ASSERT_TRUE(fresh.RunOnce().ok());
    EXPECT_EQ(fresh.stats().failed, 0u);
    EXPECT_EQ(Records(), 0u);
    EXPECT_EQ(PageEntries(), want.size()) << "an entry lost or written twice";
    ExpectOutcomes(want, "after the next pass");
    if (!crashed) {
      EXPECT_EQ(doomed.stats().folded, want.size());
      break;
    }
    ++crashes;
  }
  std::printf("[ info ] a collector died after each of %d fold writes\n", crashes);
  EXPECT_GE(crashes, 9);  // at least one page write and the 8 erases
}

TEST_F(OutcomePagesTest, LostRepliesAndTransientFailuresNeverDuplicateOrLoseAnEntry) {
  auto want = Make(30, 3);
  litetx::FaultOptions f;
  f.seed = 20261129;
  f.lost_reply_probability = 0.3;
  f.transient_probability = 0.2;
  std::printf("[ info ] fault seed %llu\n", static_cast<unsigned long long>(f.seed));
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
  Collector gc(faulty, Gc());
  for (int i = 0; i < 50 && Records() > 0; ++i) (void)gc.RunOnce();
  EXPECT_EQ(Records(), 0u);
  EXPECT_EQ(PageEntries(), want.size());
  ExpectOutcomes(want, "after faulty passes");
}

TEST_F(OutcomePagesTest, TwoCollectorsFoldingAtOnceWriteEachEntryOnce) {
  for (int round = 0; round < 20; ++round) {
    mem = std::make_shared<litetx::MemoryStore>();
    auto want = Make(60, 2);
    Collector a(mem, Gc("gc-a")), b(mem, Gc("gc-b"));
    std::thread ta([&] { EXPECT_TRUE(a.RunOnce().ok()); });
    std::thread tb([&] { EXPECT_TRUE(b.RunOnce().ok()); });
    ta.join();
    tb.join();
    EXPECT_EQ(a.stats().failed + b.stats().failed, 0u);
    EXPECT_EQ(Records(), 0u);
    EXPECT_EQ(PageEntries(), want.size());
    EXPECT_LE(a.stats().folded + b.stats().folded, want.size());
    ExpectOutcomes(want, "round " + std::to_string(round));
  }
}

// ---------------------------------------------------------------------------------------------
// Retention

TEST_F(OutcomePagesTest, PagesArePurgedOnceTheirRetentionHasPassed) {
  auto first = Make(10);
  CollectorOptions o = Gc();
  o.outcome_retention = 1h;
  Collector gc(mem, o);
  ASSERT_TRUE(gc.RunOnce().ok());
  const std::size_t first_pages = ScanAll(*mem, litetx::kOutcomesCollection).size();
  ASSERT_GT(first_pages, 0u);
  clock->Advance(30min);
  // Ids carry the wall-clock millisecond and pages span 256 ms of it: without this pause the
  // second fold's ids could fall on every page of the first, whose "at" would then all move on.
  // (A sleep never ends early, so the two sets of ids are at least 300 ms apart.)
  std::this_thread::sleep_for(300ms);
  auto second = Make(10);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().pages_purged, 0u);

  // Just before the first fold's retention ends: all kept. Pages that received entries of both
  // folds keep the later "at", so they outlive the first retention.
  clock->Advance(30min - 1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().pages_purged, 0u);
  ExpectOutcomes(first, "within retention");
  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  const std::uint64_t purged = gc.stats().pages_purged;
  EXPECT_GT(purged, 0u);
  EXPECT_EQ(gc.last_pass().expired.done, purged);
  litetx::Database reader(mem, Eng());
  int gone = 0;
  for (const auto& [id, o2] : first) {
    const TxnOutcome now = OutcomeOf(reader, id);
    EXPECT_TRUE(now == TxnOutcome::kCommitted || now == TxnOutcome::kNotFound) << id;
    gone += now == TxnOutcome::kNotFound ? 1 : 0;
  }
  EXPECT_GT(gone, 0);
  ExpectOutcomes(second, "within the second retention");
  // Past the second fold's retention: everything goes.
  clock->Advance(30min);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(ScanAll(*mem, litetx::kOutcomesCollection).size(), 0u);
  for (const auto& [id, o2] : second) EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kNotFound);
  EXPECT_EQ(gc.stats().failed, 0u);
}

TEST_F(OutcomePagesTest, PurgeReadsOnlyADueFewPagesAndStepsOverALateEntry) {
  // Pages laid out directly: partition 3 holds an old page that got a late entry (its "at" is
  // recent), then two old pages that are due, then a recent one.
  auto env = Env();
  const std::int64_t now = clock->NowMillis();
  const std::int64_t old_ms = now - 3'600'000 * 3;
  auto page_id = [](std::int64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "3%010llx", static_cast<unsigned long long>(ms >> 8));
    return std::string(buf);
  };
  auto put = [&](std::int64_t page_ms, std::int64_t at) {
    boost::json::object v;
    v["e"] = std::string(17, '0') + "c";
    v["at"] = at;
    ASSERT_TRUE(mem->Create(Key{std::string(litetx::kOutcomesCollection), page_id(page_ms)}, v).ok());
  };
  put(old_ms, now - 1000);               // late entry: kept
  put(old_ms + 1000, old_ms + 1000);     // due
  put(old_ms + 2000, old_ms + 2000);     // due
  put(now - 1000, now - 1000);           // recent: the scan stops here
  put(now + 600'000, now + 600'000);     // never read
  std::uint64_t read = 0;
  auto purged = litetx::engine::PurgeOutcomePages(env, now, 3'600'000, 0, &read);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(*purged, 2u);
  EXPECT_LE(read, 5u);
  EXPECT_TRUE(Raw(*mem, std::string(litetx::kOutcomesCollection), page_id(old_ms)).has_value());
  EXPECT_FALSE(Raw(*mem, std::string(litetx::kOutcomesCollection), page_id(old_ms + 1000)).has_value());
  EXPECT_TRUE(Raw(*mem, std::string(litetx::kOutcomesCollection), page_id(now - 1000)).has_value());
  // A budget stops it early; the rest is the next call's.
  put(old_ms + 3000, old_ms + 3000);
  put(old_ms + 4000, old_ms + 4000);
  purged = litetx::engine::PurgeOutcomePages(env, now, 3'600'000, 1);
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 1u);
  purged = litetx::engine::PurgeOutcomePages(env, now, 3'600'000, 0);
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 1u);
}

// ---------------------------------------------------------------------------------------------
// Fences and absent records

TEST_F(OutcomePagesTest, AFenceMadeAfterTheFoldIsNotTheOutcome) {
  auto want = Make(1);
  const std::string id = want.begin()->first;
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  ASSERT_EQ(Records(), 0u);
  // A fence at the record key, as a resolver that met a late hold would create after the fold
  // (FenceAbsentRecord's look at the page came before the fold landed).
  TxnRecord fence;
  fence.state = TxnState::kAborted;
  fence.done = true;
  fence.fence = true;
  fence.aborted_by = "a late resolver";
  ASSERT_TRUE(mem->Create(TxnKey(id), litetx::engine::EncodeRecord(fence)).ok());
  ExpectOutcomes(want, "with a late fence");
  // The collector erases it: its transaction's record landed long ago (it was folded), so the
  // fence blocks nothing, and it must not outlive the page (it would then read as an abort).
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, TxnKey(id)).has_value());
  EXPECT_EQ(gc.last_pass().expired.done, 1u);
  ExpectOutcomes(want, "after a pass");
  // A fence with no page entry is the outcome: aborted.
  const std::string other = litetx::engine::NewTxnId();
  ASSERT_TRUE(mem->Create(TxnKey(other), litetx::engine::EncodeRecord(fence)).ok());
  litetx::Database reader(mem, Eng());
  EXPECT_EQ(OutcomeOf(reader, other), TxnOutcome::kAborted);
}

TEST_F(OutcomePagesTest, AHoldOfAFoldedTransactionIsDanglingWithoutAFence) {
  auto want = Make(1);
  const std::string id = want.begin()->first;
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  // A late write of the folded transaction, with a parallel commit's deadline, on a document.
  boost::json::object held = Obj(R"({"n":7,"_ltx":{"v":2,"sv":0,"txn":"TXN","dl":1}})");
  held["_ltx"].as_object()["txn"] = id;
  auto rev = mem->Create(Key{"c", "late"}, held);
  ASSERT_TRUE(rev.ok());
  auto env = Env();
  auto r = litetx::engine::FenceAbsentRecord(env, id, Key{"c", "late"}, held, *rev, "test",
                                             clock->NowMillis());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, litetx::engine::AbsentRecord::kDangling);
  EXPECT_FALSE(Raw(*mem, TxnKey(id)).has_value()) << "a fence was written for a folded transaction";
  ExpectOutcomes(want, "after the look");
}

// ---------------------------------------------------------------------------------------------
// What is not folded, bad pages, the switch

TEST_F(OutcomePagesTest, EarlierIdsFencesAndLargeMarkersStayInTheRecordCollection) {
  TxnRecord marker;
  marker.state = TxnState::kCommitted;
  marker.done = true;
  marker.done_at_ms = clock->NowMillis();
  const std::string old_id = "0123456789abcdef01234567";  // an earlier release's 24 digits
  ASSERT_TRUE(mem->Create(TxnKey(old_id), litetx::engine::EncodeRecord(marker)).ok());
  TxnRecord large = marker;
  large.large = true;
  const std::string large_id = litetx::engine::NewTxnId();
  ASSERT_TRUE(mem->Create(TxnKey(large_id), litetx::engine::EncodeRecord(large)).ok());
  TxnRecord fence = marker;
  fence.state = TxnState::kAborted;
  fence.fence = true;
  const std::string fence_id = litetx::engine::NewTxnId();
  ASSERT_TRUE(mem->Create(TxnKey(fence_id), litetx::engine::EncodeRecord(fence)).ok());
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().folded, 0u);
  EXPECT_EQ(Records(), 3u);
  litetx::Database reader(mem, Eng());
  EXPECT_EQ(OutcomeOf(reader, old_id), TxnOutcome::kCommitted);
  EXPECT_EQ(OutcomeOf(reader, fence_id), TxnOutcome::kAborted);
  // Past the retention the earlier id's marker is erased as before; the fence stays.
  clock->Advance(2h);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_FALSE(Raw(*mem, TxnKey(old_id)).has_value());
  EXPECT_TRUE(Raw(*mem, TxnKey(fence_id)).has_value());
}

TEST_F(OutcomePagesTest, ACorruptPageIsReportedAndTheCollectorGoesOn) {
  auto want = Make(4);
  // Every page these ids would go to holds garbage.
  for (const auto& [id, o] : want) {
    (void)mem->Create(Key{std::string(litetx::kOutcomesCollection), *litetx::engine::OutcomePageId(id)},
                      Obj(R"({"e":"torn","at":1})"));
  }
  Collector gc(mem, Gc());
  Status s = gc.RunOnce();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_GT(gc.stats().failed, 0u);
  EXPECT_EQ(gc.stats().folded, 0u);
  EXPECT_EQ(Records(), 4u);  // nothing erased: the markers still answer
  ExpectOutcomes(want, "with corrupt pages");
  // An id whose marker is gone and whose page is corrupt: Outcome says so, never guesses.
  const std::string id = want.begin()->first;
  ASSERT_TRUE(mem->Erase(TxnKey(id), RevisionOf(*mem, TxnKey(id))).ok());
  litetx::Database reader(mem, Eng());
  auto r = reader.Outcome(id);
  EXPECT_EQ(r.code(), Code::kCorruption) << (r.ok() ? TxnOutcomeName(*r) : r.status().ToString());
}

TEST_F(OutcomePagesTest, FoldingOffKeepsMarkersAndStillReadsPages) {
  auto first = Make(3);
  Collector folding(mem, Gc());
  ASSERT_TRUE(folding.RunOnce().ok());
  auto second = Make(3);
  CollectorOptions o = Gc();
  o.fold_outcomes = false;
  Collector keeping(mem, o);
  ASSERT_TRUE(keeping.RunOnce().ok());
  EXPECT_EQ(keeping.stats().folded, 0u);
  EXPECT_EQ(Records(), 3u);
  ExpectOutcomes(first, "folded");
  ExpectOutcomes(second, "kept");
}

// ---------------------------------------------------------------------------------------------
// The pass report and the record budget

TEST_F(OutcomePagesTest, PassReportCountsDueDoneAndTheOldestAbandoned) {
  auto want = Make(2, 0);
  // Two abandoned transactions: one pending (reversed), one committed and not finished.
  for (int k : {2, 4}) {
    (void)CommitDyingAfterWrite(mem, Eng(),
                                Transaction()
                                    .Insert("c", "p" + std::to_string(k), Obj("{}"))
                                    .Insert("c", "q" + std::to_string(k), Obj("{}")),
                                k);
  }
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());  // within the lease: only the two markers are work
  litetx::CollectorPass p = gc.last_pass();
  EXPECT_EQ(p.abandoned.due, 0u);
  EXPECT_EQ(p.unfinished.due, 0u);
  EXPECT_EQ(p.markers.due, 2u);
  EXPECT_EQ(p.oldest_abandoned_ms, 0);
  clock->Advance(kLease + 5s);
  ASSERT_TRUE(gc.RunOnce().ok());
  p = gc.last_pass();
  EXPECT_EQ(p.records_read, 2u);
  EXPECT_EQ(p.abandoned.due, 1u);
  EXPECT_EQ(p.abandoned.done, 1u);
  EXPECT_EQ(p.unfinished.due, 1u);
  EXPECT_EQ(p.unfinished.done, 1u);
  EXPECT_EQ(p.markers.due, 2u);  // their markers, folded in the same pass
  EXPECT_EQ(p.markers.done, 2u);
  EXPECT_EQ(p.backlog, 0u);
  EXPECT_GE(p.oldest_abandoned_ms, 5'000);
  EXPECT_LE(p.oldest_abandoned_ms, 5'001);
  EXPECT_EQ(Records(), 0u);
}

TEST_F(OutcomePagesTest, RecordBudgetWorksABacklogOffInSteps) {
  auto want = Make(25);
  CollectorOptions o = Gc();
  o.record_budget = 10;
  o.scan_batch = 4;
  Collector gc(mem, o);
  std::vector<std::uint64_t> read;
  for (int i = 0; i < 10 && Records() > 0; ++i) {
    ASSERT_TRUE(gc.RunOnce().ok());
    read.push_back(gc.last_pass().records_read);
    EXPECT_LE(gc.last_pass().records_read, 10u);
  }
  EXPECT_EQ(Records(), 0u);
  EXPECT_EQ(read, (std::vector<std::uint64_t>{10, 10, 5}));
  EXPECT_EQ(PageEntries(), 25u);
  ExpectOutcomes(want, "after the budgeted passes");
}

}  // namespace
}  // namespace ltxtest
