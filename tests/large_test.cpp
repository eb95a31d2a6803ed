// Large transactions (litetx/large_transaction.h, engine/large.h): chunked worklists, reads
// through the record, rollback, the collector settling them, action failures and skips.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/large.h"
#include "litetx/collector.h"
#include "test_util.h"

namespace litetx {
namespace {

using namespace std::chrono_literals;
using namespace ltxtest;
using engine::ChunkKey;
using engine::kChunksCollection;

constexpr const char* kC = "rows";

std::string Id(int i) { return "r" + std::to_string(i); }

LargeTransactionOptions Chunked(std::size_t n) {
  LargeTransactionOptions o;
  o.chunk_actions = n;
  return o;
}

// The committed image of rows 0..n-1 is `present` (each with "n": i), or none is found.
void ExpectRows(Database& db, int n, bool present) {
  for (int i = 0; i < n; ++i) {
    auto r = db.Read(kC, Id(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (present) {
      ASSERT_EQ(r->state, DocumentState::kFound) << Id(i);
      EXPECT_EQ(r->doc.at("n").as_int64(), i);
    } else {
      EXPECT_NE(r->state, DocumentState::kFound) << Id(i);
    }
  }
}

TEST(LargeTransaction, InsertsManyChunksAndSettles) {
  World w;
  auto db = w.Direct();
  auto txn = db->BeginLarge(Chunked(7));
  ASSERT_TRUE(txn.ok()) << txn.status().ToString();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*txn)->Insert(kC, Id(i), {{"n", i}}, i + 1).ok());
  }
  // 14 full chunks are written; nothing is visible yet.
  ExpectRows(*db, 100, false);
  auto info = (*txn)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->written, 100u);
  EXPECT_EQ(info->chunks, 15u);
  EXPECT_TRUE(info->settled);
  ExpectRows(*db, 100, true);
  ExpectClean(*w.mem, {kC});
  EXPECT_TRUE(ScanAll(*w.mem, std::string(kChunksCollection)).empty());
  EXPECT_EQ(OutcomeOf(*db, info->txn_id), TxnOutcome::kCommitted);
}

TEST(LargeTransaction, CommittedIsVisibleBeforeSettling) {
  World w;
  auto db = w.Direct();
  LargeTransactionOptions o = Chunked(4);
  o.settle = false;
  bool point = false;
  o.on_commit_point = [&] { point = true; };
  auto txn = db->BeginLarge(o);
  ASSERT_TRUE(txn.ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*txn)->Insert(kC, Id(i), {{"n", i}}).ok());
  auto info = (*txn)->Commit();
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(point);
  EXPECT_FALSE(info->settled);
  // Every document still carries the reference, and reads as committed.
  EXPECT_EQ(MetaOf(*w.mem, kC, Id(3)).txn, info->txn_id);
  ExpectRows(*db, 10, true);
  // The collector finishes it once its lease has passed.
  w.clock->Advance(130s);
  CollectorOptions co;
  co.engine = w.Opts();
  Collector gc(w.mem, co);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().finished, 1u);
  ExpectRows(*db, 10, true);
  ExpectClean(*w.mem, {kC});
  EXPECT_TRUE(ScanAll(*w.mem, std::string(kChunksCollection)).empty());
}

TEST(LargeTransaction, RollbackRestoresEveryKindOfAction) {
  World w;
  auto db = w.Direct();
  Transaction seed;
  for (int i = 0; i < 6; ++i) seed.Insert(kC, Id(i), {{"n", i}, {"keep", true}});
  ASSERT_TRUE(db->Commit(seed).ok());
  auto txn = db->BeginLarge(Chunked(2));
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE((*txn)->Update(kC, Id(0), {{"n", 100}}, {"keep"}).ok());
  ASSERT_TRUE((*txn)->Adjust(kC, Id(1), {{"n", 5}}).ok());
  ASSERT_TRUE((*txn)->Delete(kC, Id(2)).ok());
  ASSERT_TRUE((*txn)->Put(kC, Id(3), {{"n", 33}}).ok());
  ASSERT_TRUE((*txn)->Put(kC, Id(50), {{"n", 50}}).ok());
  ASSERT_TRUE((*txn)->Insert(kC, Id(51), {{"n", 51}}).ok());
  // Uncommitted: reads give the images before it.
  ExpectRows(*db, 6, true);
  ASSERT_TRUE((*txn)->Rollback().ok());
  ExpectRows(*db, 6, true);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(BodyOf(*w.mem, kC, Id(i)).at("keep").as_bool());
  EXPECT_NE(ReadImage(*db, kC, Id(50)).state, DocumentState::kFound);
  EXPECT_NE(ReadImage(*db, kC, Id(51)).state, DocumentState::kFound);
  ExpectClean(*w.mem, {kC});
  EXPECT_EQ(OutcomeOf(*db, (*txn)->id()), TxnOutcome::kAborted);
  EXPECT_FALSE((*txn)->Commit().ok());
}

TEST(LargeTransaction, EveryKindCommits) {
  World w;
  auto db = w.Direct();
  Transaction seed;
  for (int i = 0; i < 4; ++i) seed.Insert(kC, Id(i), {{"n", i}, {"keep", true}});
  ASSERT_TRUE(db->Commit(seed).ok());
  auto txn = db->BeginLarge(Chunked(3));
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE((*txn)->Update(kC, Id(0), {{"n", 100}}, {"keep"}).ok());
  ASSERT_TRUE((*txn)->Adjust(kC, Id(1), {{"n", 5}}).ok());
  ASSERT_TRUE((*txn)->Delete(kC, Id(2)).ok());
  ASSERT_TRUE((*txn)->Put(kC, Id(3), {{"n", 33}}).ok());
  ASSERT_TRUE((*txn)->Put(kC, Id(9), {{"n", 9}}).ok());
  auto info = (*txn)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->written, 5u);
  EXPECT_EQ(ReadImage(*db, kC, Id(0)).doc, Obj(R"({"n":100})"));
  EXPECT_EQ(ReadImage(*db, kC, Id(1)).doc, Obj(R"({"n":6,"keep":true})"));
  EXPECT_EQ(ReadImage(*db, kC, Id(2)).state, DocumentState::kDeleted);
  EXPECT_EQ(ReadImage(*db, kC, Id(3)).doc, Obj(R"({"n":33})"));
  EXPECT_EQ(ReadImage(*db, kC, Id(3)).version, V(2));
  EXPECT_EQ(ReadImage(*db, kC, Id(9)).doc, Obj(R"({"n":9})"));
  ExpectClean(*w.mem, {kC});
}

TEST(LargeTransaction, DuplicateAcrossChunksFailsWithItsTagAndRollsBack) {
  World w;
  auto db = w.Direct();
  auto txn = db->BeginLarge(Chunked(3));
  ASSERT_TRUE(txn.ok());
  Status last;
  for (int i = 0; i < 10 && last.ok(); ++i) {
    last = (*txn)->Insert(kC, i == 7 ? Id(1) : Id(i), {{"n", i}}, 100 + i);
  }
  auto info = (*txn)->Commit();
  Status end = last.ok() ? info.status() : last;
  ASSERT_EQ(end.code(), Code::kInvalidArgument) << end.ToString();
  EXPECT_NE(end.message().find("action 107"), std::string::npos) << end.message();
  EXPECT_NE(end.message().find("named twice"), std::string::npos) << end.message();
  ExpectRows(*db, 10, false);
  ExpectClean(*w.mem, {kC});
}

TEST(LargeTransaction, SkippedActionsAreReportedAndTheRestCommits) {
  World w;
  auto db = w.Direct();
  ASSERT_TRUE(db->Commit(Transaction().Insert(kC, Id(4), {{"n", -1}})).ok());
  LargeTransactionOptions o = Chunked(3);
  o.skip_failed_actions = true;
  std::vector<std::uint64_t> tags;
  o.on_skip = [&](std::uint64_t tag, const Status&) { tags.push_back(tag); };
  auto txn = db->BeginLarge(o);
  ASSERT_TRUE(txn.ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE((*txn)->Insert(kC, Id(i), {{"n", i}}, i).ok());
  ASSERT_TRUE((*txn)->Insert(kC, Id(2), {{"n", 2}}, 8).ok());        // named twice
  ASSERT_TRUE((*txn)->Update(kC, "missing", {{"n", 0}}, {}, 9).ok());  // not found
  auto info = (*txn)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->skipped, 3u);
  EXPECT_EQ(info->written, 7u);
  EXPECT_EQ(tags, (std::vector<std::uint64_t>{4, 8, 9}));
  EXPECT_EQ(ReadImage(*db, kC, Id(4)).doc, Obj(R"({"n":-1})"));
  ExpectClean(*w.mem, {kC});
}

TEST(LargeTransaction, ABadActionIsRefusedAndTheTransactionGoesOn) {
  World w;
  auto db = w.Direct();
  auto txn = db->BeginLarge();
  ASSERT_TRUE(txn.ok());
  EXPECT_EQ((*txn)->Insert(kC, "", {{"n", 1}}).code(), Code::kInvalidArgument);
  EXPECT_EQ((*txn)->Insert(kC, "a", {{"_ltx", 1}}).code(), Code::kInvalidArgument);
  Action check;
  check.type = ActionType::kCheck;
  check.key = Key{kC, "a"};
  check.expected_version = 1;
  EXPECT_EQ((*txn)->Add(check).code(), Code::kInvalidArgument);
  ASSERT_TRUE((*txn)->Insert(kC, "a", {{"n", 1}}).ok());
  ASSERT_TRUE((*txn)->Commit().ok());
  EXPECT_EQ(ReadImage(*db, kC, "a").doc, Obj(R"({"n":1})"));
}

TEST(LargeTransaction, AbandonedPendingIsReversedByTheCollector) {
  World w;
  auto db = w.Direct();
  std::string id;
  {
    // Crash after the 6th write: record, chunk CAS, chunk create, 3 applies.
    FaultOptions fo;
    fo.crash_after_writes = 9;
    auto faulty = std::make_shared<FaultInjectingStore>(w.mem, fo);
    Database crashing(faulty, w.Opts());
    auto txn = crashing.BeginLarge(Chunked(3));
    ASSERT_TRUE(txn.ok());
    id = (*txn)->id();
    EXPECT_THROW(
        {
          for (int i = 0; i < 20; ++i) (void)(*txn)->Insert(kC, Id(i), {{"n", i}});
        },
        SimulatedCrash);
    txn->release();  // a crashed process runs no destructor
  }
  ExpectRows(*db, 20, false);
  w.clock->Advance(130s);
  CollectorOptions co;
  co.engine = w.Opts();
  Collector gc(w.mem, co);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  ExpectRows(*db, 20, false);
  ExpectClean(*w.mem, {kC});
  // The stubs go with the marker once the outcome retention has passed.
  EXPECT_FALSE(ScanAll(*w.mem, std::string(kChunksCollection)).empty());
  w.clock->Advance(2h);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_TRUE(ScanAll(*w.mem, std::string(kChunksCollection)).empty());
  EXPECT_EQ(MarkerCount(*w.mem), 0u);
}

TEST(LargeTransaction, AClaimedTransactionLearnsItAtItsNextChunk) {
  World w;
  auto db = w.Direct();
  auto txn = db->BeginLarge(Chunked(2));
  ASSERT_TRUE(txn.ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*txn)->Insert(kC, Id(i), {{"n", i}}).ok());
  w.clock->Advance(130s);
  CollectorOptions co;
  co.engine = w.Opts();
  Collector gc(w.mem, co);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  Status s = (*txn)->Insert(kC, Id(4), {{"n", 4}});
  if (s.ok()) s = (*txn)->Insert(kC, Id(5), {{"n", 5}});
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
  EXPECT_EQ((*txn)->Commit().status().code(), Code::kAborted);
  ExpectRows(*db, 6, false);
  ExpectClean(*w.mem, {kC});
}

TEST(LargeTransaction, AWriterMeetingAStaleLargeHoldClaimsIt) {
  World w;
  auto db = w.Direct();
  ASSERT_TRUE(db->Commit(Transaction().Insert(kC, "x", {{"n", 1}})).ok());
  std::string id;
  {
    FaultOptions fo;
    fo.crash_after_writes = 4;  // record, chunk CAS, chunk create, the apply on x
    auto faulty = std::make_shared<FaultInjectingStore>(w.mem, fo);
    Database crashing(faulty, w.Opts());
    auto txn = crashing.BeginLarge(Chunked(1));
    ASSERT_TRUE(txn.ok());
    id = (*txn)->id();
    EXPECT_THROW((void)(*txn)->Update(kC, "x", {{"n", 2}}), SimulatedCrash);
    txn->release();
  }
  EXPECT_EQ(MetaOf(*w.mem, kC, "x").txn, id);
  EXPECT_EQ(ReadImage(*db, kC, "x").doc, Obj(R"({"n":1})"));
  w.clock->Advance(130s);
  auto r = db->Commit(Transaction().Adjust(kC, "x", {{"n", 10}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, kC, "x").doc, Obj(R"({"n":11})"));
  EXPECT_EQ(OutcomeOf(*db, id), TxnOutcome::kAborted);
}

}  // namespace
}  // namespace litetx
