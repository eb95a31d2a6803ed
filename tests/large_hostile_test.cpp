// tests/large_hostile_test.cpp — LargeTransaction and Import attacked as a hostile user and a
// hostile scheduler would:
//   * misuse of the API: every call after Commit, after Rollback and after a failure; Settle
//     before Commit; a handle destroyed with buffered actions; chunk sizes of 0 and SIZE_MAX; a
//     tag of UINT64_MAX; actions on litetx's own collections; Put over a tombstone, over a
//     placeholder and over a document another transaction holds;
//   * concurrency: two large transactions crossing on the same keys; a large transaction
//     against ordinary writers of the same counters; a reader that must never see an
//     uncommitted row nor lose a committed one; a collector thread that must never claim a
//     live large transaction whose lease is renewed;
//   * the scheduler: the coordinator paused before every one of its store calls (and after
//     every lost write reply, before whatever it does next) past its lease while a writer and
//     a collector act; what it then reports is the truth and never changes;
//   * fork: a child forked while a large transaction is open;
//   * exotic input to Import: encodings, framing, ids, numbers, sizes, nesting, a stream that
//     fails, a line that never ends.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <latch>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "large_util.h"
#include "litetx/importer.h"

namespace ltxtest::large {
namespace {

using litetx::Collector;
using litetx::ImportOptions;
using litetx::ImportSummary;
using litetx::LargeCommitInfo;
using litetx::Transaction;
using litetx::engine::TxnState;

constexpr std::uint64_t kMaxTag = std::numeric_limits<std::uint64_t>::max();

// The store as it is: user rows, chunk documents and records, with revisions.
Dump DumpAll(LargeWorld& w) { return DumpStore(*w.mem, {kRows, ChunksCollection()}); }

// The state of the transaction record `id`: "absent", "pending", "committed", "aborted", with
// " done" for an outcome marker.
std::string RecordState(litetx::Store& store, const std::string& id) {
  auto r = RecordOf(store, id);
  if (!r) return "absent";
  return std::string(litetx::engine::TxnStateName(r->state)) + (r->done ? " done" : "");
}

// =============================================================================================
// Misuse of the API

TEST(LargeHostileApi, AfterCommitEveryCallIsRefusedAndWritesNothing) {
  LargeWorld w;
  Database db(w.mem, w.Opts());
  auto t = db.BeginLarge(Chunked(2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
  auto info = (*t)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_TRUE(info->settled);
  const std::string id = (*t)->id();

  const Dump before = DumpAll(w);
  EXPECT_EQ((*t)->Insert(kRows, "late", {{"n", 9}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Put(kRows, RowId(0), {{"n", 9}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Update(kRows, RowId(1), {{"n", 9}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Adjust(kRows, RowId(1), {{"n", 9}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Delete(kRows, RowId(2)).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Commit().status().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Rollback().code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*t)->Settle().ok());  // settled already: nothing to do
  EXPECT_EQ((*t)->added(), 3u);
  EXPECT_TRUE(SameDump(before, DumpAll(w))) << "a refused call wrote to the store";
  t->reset();  // the destructor of a committed transaction does nothing
  EXPECT_TRUE(SameDump(before, DumpAll(w))) << "the destructor wrote to the store";

  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ReadImage(*w.direct, kRows, RowId(i)).doc, json::object({{"n", i}}));
  }
  EXPECT_EQ(ReadImage(*w.direct, kRows, "late").state, DocumentState::kNotFound);
  EXPECT_EQ(OutcomeOf(*w.direct, id), TxnOutcome::kCommitted);
  ExpectClean(*w.mem, {kRows});
}

TEST(LargeHostileApi, AfterRollbackEveryCallIsRefusedAndWritesNothing) {
  LargeWorld w;
  const Workload wl = Mixed(6);
  const Expect e = Plan(wl, 2);
  w.Seed(wl);
  Database db(w.mem, w.Opts());
  auto t = db.BeginLarge(Chunked(2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (std::size_t i = 0; i < wl.acts.size(); ++i) ASSERT_TRUE(AddAct(**t, wl.acts[i], i + 1).ok());
  ASSERT_TRUE((*t)->Insert(kRows, "buffered", {{"n", 1}}).ok());  // never written
  const std::string id = (*t)->id();
  ASSERT_EQ(ChunksOf(*w.mem, id).size(), 3u) << "three chunks written before the rollback";
  ASSERT_TRUE((*t)->Rollback().ok());

  const Dump before = DumpAll(w);
  EXPECT_EQ((*t)->Insert(kRows, "late", {{"n", 9}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Put(kRows, RowId(0), {{"n", 9}}).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Commit().status().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Settle().code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*t)->Rollback().ok());  // a no-op once rolled back
  EXPECT_TRUE(SameDump(before, DumpAll(w))) << "a refused call wrote to the store";
  t->reset();
  EXPECT_TRUE(SameDump(before, DumpAll(w))) << "the destructor wrote to the store";

  EXPECT_EQ(ReadAll(*w.direct, e.ids), e.before);
  EXPECT_EQ(ReadImage(*w.direct, kRows, "buffered").state, DocumentState::kNotFound);
  EXPECT_EQ(RecordState(*w.mem, id), "aborted done");
  for (const auto& [key, chunk] : ChunksOf(*w.mem, id)) EXPECT_TRUE(chunk.fence) << key;
  ExpectClean(*w.mem, {kRows});
  ExpectSettled(w, e, id, Said::kFailed, "rolled back, then misused");
}

TEST(LargeHostileApi, AfterAFailureEveryCallReturnsItAndWritesNothing) {
  LargeWorld w;
  ASSERT_TRUE(w.direct->Commit(Transaction().Insert(kRows, "taken", {{"n", 5}})).ok());
  Database db(w.mem, w.Opts());
  auto t = db.BeginLarge(Chunked(2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string id = (*t)->id();
  ASSERT_TRUE((*t)->Insert(kRows, "a", {{"n", 1}}, 1).ok());
  ASSERT_TRUE((*t)->Insert(kRows, "b", {{"n", 2}}, 2).ok());  // chunk 0 written
  ASSERT_TRUE((*t)->Insert(kRows, "c", {{"n", 3}}, 3).ok());
  Status failed = (*t)->Insert(kRows, "taken", {{"n", 4}}, 4);  // chunk 1 fails on "taken"
  ASSERT_EQ(failed.code(), Code::kConflict) << failed.ToString();
  EXPECT_EQ(failed.message().rfind("action 4 (insert rows/taken)", 0), 0u) << failed.message();
  EXPECT_EQ(failed.txn_id(), id);

  const Dump before = DumpAll(w);
  for (Status s : {(*t)->Insert(kRows, "d", {{"n", 5}}), (*t)->Put(kRows, "a", {{"n", 6}}),
                   (*t)->Delete(kRows, "taken"), (*t)->Commit().status()}) {
    EXPECT_EQ(s.code(), Code::kConflict) << s.ToString();
    EXPECT_EQ(s.message(), failed.message());
  }
  EXPECT_EQ((*t)->Settle().code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*t)->Rollback().ok());  // rolled back already
  EXPECT_FALSE((*t)->Insert(kRows, "e", {{"n", 7}}).ok());
  EXPECT_FALSE((*t)->Commit().ok());
  t->reset();
  EXPECT_TRUE(SameDump(before, DumpAll(w))) << "a call after the failure wrote to the store";

  for (const char* row : {"a", "b", "c", "d", "e"}) {
    EXPECT_EQ(ReadImage(*w.direct, kRows, row).state, DocumentState::kNotFound) << row;
  }
  EXPECT_EQ(ReadImage(*w.direct, kRows, "taken").doc, json::object({{"n", 5}}));
  EXPECT_EQ(OutcomeOf(*w.direct, id), TxnOutcome::kAborted);
  ExpectClean(*w.mem, {kRows});
}

TEST(LargeHostileApi, SettleBeforeCommitIsRefusedAndWritesNothing) {
  LargeWorld w;
  Database db(w.mem, w.Opts());
  auto t = db.BeginLarge(Chunked(2, /*settle=*/false));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
  const Dump before = DumpAll(w);
  EXPECT_EQ((*t)->Settle().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(SameDump(before, DumpAll(w)));
  EXPECT_EQ(RecordState(*w.mem, (*t)->id()), "pending");
  auto info = (*t)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->settled);
  EXPECT_TRUE((*t)->Settle().ok());
  EXPECT_TRUE((*t)->Settle().ok());  // twice: nothing left to do
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ReadImage(*w.direct, kRows, RowId(i)).doc, json::object({{"n", i}}));
  }
  ExpectClean(*w.mem, {kRows});
}

TEST(LargeHostileApi, DestroyedWithBufferedActionsRollsBackEverything) {
  // (a) Nothing but buffered actions: no row is ever written; the record is aborted.
  {
    LargeWorld w;
    Database db(w.mem, w.Opts());
    std::string id;
    {
      auto t = db.BeginLarge(Chunked(10));
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      id = (*t)->id();
      for (int i = 0; i < 3; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
      EXPECT_TRUE(ScanAll(*w.mem, kRows).empty()) << "buffered actions were written";
    }
    EXPECT_TRUE(ScanAll(*w.mem, kRows).empty());
    EXPECT_EQ(RecordState(*w.mem, id), "aborted done");
    EXPECT_EQ(OutcomeOf(*w.direct, id), TxnOutcome::kAborted);
  }
  // (b) Three chunks written, one action buffered.
  {
    LargeWorld w;
    const Workload wl = Mixed(7);
    const Expect e = Plan(wl, 2);
    w.Seed(wl);
    Database db(w.mem, w.Opts());
    std::string id;
    {
      auto t = db.BeginLarge(Chunked(2));
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      id = (*t)->id();
      for (std::size_t i = 0; i < wl.acts.size(); ++i) {
        ASSERT_TRUE(AddAct(**t, wl.acts[i], i + 1).ok());
      }
      ASSERT_EQ(ChunksOf(*w.mem, id).size(), 3u);
    }
    EXPECT_EQ(ReadAll(*w.direct, e.ids), e.before);
    EXPECT_EQ(RecordState(*w.mem, id), "aborted done");
    ExpectSettled(w, e, id, Said::kFailed, "destroyed with a buffered action");
  }
}

TEST(LargeHostileApi, ChunkActionsBelowOneActAsOneAndAboveTenThousandAsTenThousand) {
  {
    LargeWorld w;
    Database db(w.mem, w.Opts());
    auto t = db.BeginLarge(Chunked(0));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
    EXPECT_EQ(ChunksOf(*w.mem, (*t)->id()).size(), 5u) << "chunk_actions 0 acts as 1";
    auto info = (*t)->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->chunks, 5u);
    EXPECT_EQ(info->written, 5u);
  }
  {
    LargeWorld w;
    Database db(w.mem, w.Opts());
    auto t = db.BeginLarge(Chunked(std::numeric_limits<std::size_t>::max()));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (int i = 0; i < 10'000; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
    EXPECT_EQ(ChunksOf(*w.mem, (*t)->id()).size(), 1u) << "the 10000th action writes a chunk";
    ASSERT_TRUE((*t)->Insert(kRows, RowId(10'000), {{"n", 10'000}}).ok());
    auto info = (*t)->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->chunks, 2u);
    EXPECT_EQ(info->written, 10'001u);
    EXPECT_EQ(ScanAll(*w.mem, kRows, 4096).size(), 10'001u);
  }
}

TEST(LargeHostileApi, ATagOfUint64MaxIsGivenBackExactly) {
  LargeWorld w;
  ASSERT_TRUE(w.direct->Commit(Transaction().Insert(kRows, "taken", {{"n", 5}})).ok());
  Database db(w.mem, w.Opts());
  const std::string tag_text = "action 18446744073709551615 ";

  // A bad action: refused at once, naming its tag.
  {
    auto t = db.BeginLarge(Chunked(2));
    ASSERT_TRUE(t.ok());
    Status bad = (*t)->Insert(kRows, "", {{"n", 1}}, kMaxTag);
    EXPECT_EQ(bad.code(), Code::kInvalidArgument);
    EXPECT_EQ(bad.message().rfind(tag_text, 0), 0u) << bad.message();
    ASSERT_TRUE((*t)->Rollback().ok());
  }
  // A skipped action: on_skip gets the tag.
  {
    std::vector<std::pair<std::uint64_t, std::string>> skips;
    LargeTransactionOptions o = Chunked(2);
    o.skip_failed_actions = true;
    o.on_skip = [&](std::uint64_t tag, const Status& why) { skips.emplace_back(tag, why.message()); };
    auto t = db.BeginLarge(o);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)->Insert(kRows, "taken", {{"n", 6}}, kMaxTag).ok());
    ASSERT_TRUE((*t)->Insert(kRows, "fresh", {{"n", 7}}, kMaxTag - 1).ok());
    auto info = (*t)->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->skipped, 1u);
    EXPECT_EQ(info->written, 1u);
    ASSERT_EQ(skips.size(), 1u);
    EXPECT_EQ(skips[0].first, kMaxTag);
    EXPECT_EQ(skips[0].second.rfind(tag_text + "(insert rows/taken)", 0), 0u) << skips[0].second;
  }
  // A failed action: the transaction's error names the tag.
  {
    auto t = db.BeginLarge(Chunked(2));
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)->Insert(kRows, "other", {{"n", 8}}, 1).ok());
    Status s = (*t)->Insert(kRows, "taken", {{"n", 9}}, kMaxTag);  // writes the chunk
    ASSERT_EQ(s.code(), Code::kConflict) << s.ToString();
    EXPECT_EQ(s.message().rfind(tag_text + "(insert rows/taken)", 0), 0u) << s.message();
    EXPECT_EQ((*t)->Commit().status().message(), s.message());
  }
  EXPECT_EQ(ReadImage(*w.direct, kRows, "taken").doc, json::object({{"n", 5}}));
  EXPECT_EQ(ReadImage(*w.direct, kRows, "other").state, DocumentState::kNotFound);
  EXPECT_EQ(ReadImage(*w.direct, kRows, "fresh").doc, json::object({{"n", 7}}));
}

TEST(LargeHostileApi, LitetxOwnCollectionsAndFieldsAreRefusedAndTheTransactionGoesOn) {
  LargeWorld w;
  Database db(w.mem, w.Opts());
  auto t = db.BeginLarge(Chunked(1));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string id = (*t)->id();
  const std::vector<std::string> reserved = {std::string(litetx::kTransactionsCollection),
                                             ChunksCollection(), "__litetx", "__litetxX",
                                             "__litetx.chunk/x"};
  std::uint64_t tag = 100;
  for (const std::string& c : reserved) {
    SCOPED_TRACE(c);
    // The chunk key of this very transaction, and its record's key.
    for (const std::string& target : {id + ".0", id}) {
      for (Status s : {(*t)->Insert(c, target, {{"n", 1}}, ++tag),
                       (*t)->Put(c, target, {{"txn", id}, {"k", 0}, {"fence", true}}, ++tag),
                       (*t)->Update(c, target, {{"state", "committed"}}, {}, ++tag),
                       (*t)->Adjust(c, target, {{"chunks", 1}}, ++tag),
                       (*t)->Delete(c, target, ++tag)}) {
        EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
        EXPECT_NE(s.message().find("reserved"), std::string::npos) << s.message();
      }
    }
  }
  for (Status s : {(*t)->Insert(kRows, "x", {{"_ltx", json::object{{"tx", id}}}}),
                   (*t)->Put(kRows, "x", {{"_ltxfoo", 1}}),
                   (*t)->Update(kRows, "x", {{"n", 1}}, {"_ltx"}),
                   (*t)->Insert(kRows, "", {{"n", 1}}), (*t)->Insert(kRows, "a\x01", {{"n", 1}}),
                   (*t)->Insert(kRows, "\xff", {{"n", 1}}),
                   (*t)->Insert(kRows, std::string(383, 'i'), {{"n", 1}})}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  }
  litetx::Action check;
  check.type = litetx::ActionType::kCheck;
  check.key = Key{kRows, "x"};
  check.expected_version = 1;
  EXPECT_EQ((*t)->Add(check, 7).code(), Code::kInvalidArgument);
  EXPECT_EQ((*t)->added(), 0u) << "refused actions are not counted";

  // The transaction goes on.
  ASSERT_TRUE((*t)->Insert(kRows, "x", {{"n", 1}}).ok());
  auto info = (*t)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->written, 1u);
  EXPECT_EQ(info->chunks, 1u);
  EXPECT_EQ(ReadImage(*w.direct, kRows, "x").doc, json::object({{"n", 1}}));
  for (const std::string& c : {ChunksCollection(), std::string("__litetx"),
                               std::string("__litetxX"), std::string("__litetx.chunk/x")}) {
    EXPECT_TRUE(ScanAll(*w.mem, c).empty()) << c;
  }
  EXPECT_EQ(ScanAll(*w.mem, litetx::kTransactionsCollection).size(), 1u);  // its own marker
  EXPECT_EQ(RecordState(*w.mem, id), "committed done");
}

TEST(LargeHostileApi, PutOverATombstoneOrAPlaceholderInsertsAgain) {
  LargeWorld w;
  ASSERT_TRUE(w.direct->Commit(Transaction().Insert(kRows, "gone", {{"n", 1}, {"old", true}})).ok());
  ASSERT_TRUE(w.direct->Commit(Transaction().Delete(kRows, "gone")).ok());
  const Image tomb = ReadImage(*w.direct, kRows, "gone");
  ASSERT_EQ(tomb.state, DocumentState::kDeleted);
  // A placeholder: the trace of a rolled-back insert.
  {
    Database db(w.mem, w.Opts());
    auto t = db.BeginLarge(Chunked(1));
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)->Insert(kRows, "ghost", {{"n", 1}}).ok());
    ASSERT_TRUE((*t)->Rollback().ok());
  }
  ASSERT_TRUE(Raw(*w.mem, kRows, "ghost").has_value()) << "no placeholder to put over";
  ASSERT_EQ(ReadImage(*w.direct, kRows, "ghost").state, DocumentState::kNotFound);

  Database db(w.mem, w.Opts());
  auto t = db.BeginLarge(Chunked(1));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Put(kRows, "gone", {{"n", 2}}).ok());
  ASSERT_TRUE((*t)->Put(kRows, "ghost", {{"n", 3}}).ok());
  auto info = (*t)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->written, 2u);
  const Image back = ReadImage(*w.direct, kRows, "gone");
  EXPECT_EQ(back.state, DocumentState::kFound);
  EXPECT_EQ(back.doc, json::object({{"n", 2}})) << "nothing of the deleted document comes back";
  EXPECT_GT(back.version, tomb.version);
  EXPECT_EQ(ReadImage(*w.direct, kRows, "ghost").doc, json::object({{"n", 3}}));

  // An update of a tombstone is an action failure (kDeleted), naming its tag.
  ASSERT_TRUE(w.direct->Commit(Transaction().Delete(kRows, "gone")).ok());
  auto u = db.BeginLarge(Chunked(1));
  ASSERT_TRUE(u.ok());
  Status s = (*u)->Update(kRows, "gone", {{"n", 4}}, {}, 42);
  EXPECT_EQ(s.code(), Code::kDeleted) << s.ToString();
  EXPECT_EQ(s.message().rfind("action 42 ", 0), 0u) << s.message();
  ExpectClean(*w.mem, {kRows});
}

TEST(LargeHostileApi, PutOverADocumentHeldByAnotherTransactionIsBusyAndRollsBack) {
  // The holder older than the large transaction (wait-die: it gives way at once) or younger
  // (it waits up to busy_timeout).
  for (const bool older : {true, false}) {
    SCOPED_TRACE(older ? "an older holder" : "a younger holder");
    LargeWorld w;
    const std::int64_t now = w.clock->NowMillis();
    HoldLive(*w.mem, Key{kRows, "held"}, {{"n", 1}}, 5, "other-txn",
             older ? now - 1000 : now + 1000);
    const json::object held_before = *Raw(*w.mem, kRows, "held");
    Database db(w.mem, w.Opts());
    auto t = db.BeginLarge(Chunked(1));
    ASSERT_TRUE(t.ok());
    const std::string id = (*t)->id();
    ASSERT_TRUE((*t)->Insert(kRows, "mine", {{"n", 2}}).ok());  // chunk 0 written
    const std::int64_t waited_from = w.clock->MonotonicMicros();
    Status s = (*t)->Put(kRows, "held", {{"n", 3}});
    const std::int64_t waited_us = w.clock->MonotonicMicros() - waited_from;
    EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
    if (older) {
      EXPECT_LT(waited_us, 50'000) << "wait-die: the younger gives way without waiting";
    } else {
      EXPECT_GE(waited_us, 50'000) << "a younger holder is waited for up to busy_timeout";
    }
    EXPECT_EQ((*t)->Commit().status().code(), Code::kBusy);
    EXPECT_EQ(*Raw(*w.mem, kRows, "held"), held_before) << "the other's document was touched";
    EXPECT_EQ(RecordState(*w.mem, "other-txn"), "pending");
    EXPECT_EQ(ReadImage(*w.direct, kRows, "mine").state, DocumentState::kNotFound);
    EXPECT_EQ(OutcomeOf(*w.direct, id), TxnOutcome::kAborted);
  }
  // Held by another large transaction, open on the same Database.
  {
    LargeWorld w;
    Database db(w.mem, w.Opts());
    auto a = db.BeginLarge(Chunked(1));
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE((*a)->Insert(kRows, "r", {{"by", "a"}}).ok());
    auto b = db.BeginLarge(Chunked(1));
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE((*b)->Insert(kRows, "b-only", {{"by", "b"}}).ok());
    EXPECT_EQ((*b)->Put(kRows, "r", {{"by", "b"}}).code(), Code::kBusy);
    auto info = (*a)->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(ReadImage(*w.direct, kRows, "r").doc, json::object({{"by", "a"}}));
    EXPECT_EQ(ReadImage(*w.direct, kRows, "b-only").state, DocumentState::kNotFound);
    EXPECT_EQ(OutcomeOf(*w.direct, (*b)->id()), TxnOutcome::kAborted);
    ExpectClean(*w.mem, {kRows});
  }
}

// on_skip throws (a caller's callback may) while its chunk is being written: the exception does
// not unwind past the chunk's actions. The transaction fails (kFailedPrecondition naming the
// callback) and is rolled back: nothing of it is in the store, and Commit reports the failure.
TEST(LargeHostileApi, AnExceptionFromOnSkipLosesNoAcceptedAction) {
  LargeWorld w;
  ASSERT_TRUE(w.direct->Commit(Transaction().Insert(kRows, "taken", {{"n", 5}})).ok());
  Database db(w.mem, w.Opts());
  LargeTransactionOptions o = Chunked(3);
  o.skip_failed_actions = true;
  o.on_skip = [](std::uint64_t, const Status&) { throw std::runtime_error("from on_skip"); };
  auto t = db.BeginLarge(o);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE((*t)->Insert(kRows, "a", {{"n", 1}}).ok());
  ASSERT_TRUE((*t)->Insert(kRows, "taken", {{"n", 2}}).ok());
  Status third = (*t)->Insert(kRows, "c", {{"n", 3}});
  EXPECT_EQ(third.code(), Code::kFailedPrecondition) << third.ToString();
  EXPECT_NE(third.message().find("on_skip threw"), std::string::npos) << third.message();
  EXPECT_EQ((*t)->added(), 3u);
  auto info = (*t)->Commit();
  EXPECT_FALSE(info.ok());
  EXPECT_EQ(ReadImage(*w.direct, kRows, "a").state, DocumentState::kNotFound);
  EXPECT_EQ(ReadImage(*w.direct, kRows, "c").state, DocumentState::kNotFound);
  EXPECT_EQ(ReadImage(*w.direct, kRows, "taken").doc, json::object({{"n", 5}}));
  EXPECT_EQ(OutcomeOf(*w.direct, (*t)->id()), TxnOutcome::kAborted);
  ExpectClean(*w.mem, {kRows});
}

// =============================================================================================
// Concurrency

TEST(LargeHostileConcurrency, TwoLargeTransactionsCrossingOnTheSameKeysNeverDeadlockNorMix) {
  constexpr int kKeys = 8;
  constexpr int kRounds = 12;
  int both = 0, one = 0, none = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    LargeWorld w;
    {
      Transaction seed;
      for (int i = 0; i < kKeys; ++i) seed.Insert(kRows, RowId(i), {{"v", "seed"}});
      MustCommit(*w.direct, seed);
    }
    Database db(w.mem, w.Opts());
    // Both begin, write their first chunk (two keys at opposite ends: no conflict), and wait
    // for each other there: from then on each walks into the keys the other holds.
    std::latch start(2), first_chunks(2);
    struct Side {
      std::string name, id;
      Status status;
    } sides[2] = {{"A", "", Status::Ok()}, {"B", "", Status::Ok()}};
    auto run = [&](Side& side, bool ascending) {
      start.arrive_and_wait();
      bool arrived = false;
      auto arrive = [&] {
        if (!arrived) first_chunks.arrive_and_wait();
        arrived = true;
      };
      auto t = db.BeginLarge(Chunked(2));
      if (!t.ok()) {
        side.status = t.status();
        arrive();
        return;
      }
      side.id = (*t)->id();
      for (int k = 0; k < kKeys; ++k) {
        if (k == 2) arrive();
        const int i = ascending ? k : kKeys - 1 - k;
        Status s = (*t)->Put(kRows, RowId(i), {{"v", side.name}, {"i", i}});
        if (!s.ok()) {
          side.status = s;
          arrive();
          return;
        }
      }
      side.status = (*t)->Commit().status();
    };
    const bool a_up = round % 2 == 0;
    {
      Async ta([&] { run(sides[0], a_up); });
      Async tb([&] { run(sides[1], !a_up); });
      ASSERT_TRUE(ta.Wait(20s)) << "A never returned (deadlock?)";
      ASSERT_TRUE(tb.Wait(20s)) << "B never returned (deadlock?)";
    }
    int committed = 0;
    for (const Side& s : sides) {
      EXPECT_TRUE(s.status.ok() || s.status.code() == Code::kBusy) << s.name << ": " << s.status.ToString();
      committed += s.status.ok() ? 1 : 0;
      ASSERT_FALSE(s.id.empty());
      EXPECT_EQ(OutcomeOf(*w.direct, s.id), s.status.ok() ? TxnOutcome::kCommitted : TxnOutcome::kAborted)
          << s.name;
    }
    // Every key holds the same writer's value: nobody's, the one that committed, or (both
    // committed, one after the other) the later one.
    std::set<std::string> values;
    for (int i = 0; i < kKeys; ++i) {
      values.insert(std::string(ReadImage(*w.direct, kRows, RowId(i)).doc.at("v").as_string()));
    }
    ASSERT_EQ(values.size(), 1u) << "the keys mix the two transactions' values";
    EXPECT_LE(committed, 1) << "each needs keys the other holds: both cannot commit";
    const std::string v = *values.begin();
    if (committed == 0) {
      EXPECT_EQ(v, "seed");
    } else if (committed == 1) {
      EXPECT_EQ(v, sides[0].status.ok() ? "A" : "B");
    } else {
      EXPECT_NE(v, "seed");
    }
    ExpectClean(*w.mem, {kRows});
    (committed == 2 ? both : committed == 1 ? one : none) += 1;
  }
  std::printf("two crossing large transactions, %d rounds: both committed %d, one %d, none %d\n",
              kRounds, both, one, none);
}

TEST(LargeHostileConcurrency, LargeTransactionsAndOrdinaryWritersOnTheSameCountersAddUp) {
  constexpr int kCounters = 16;
  constexpr int kLarge = 4;
  constexpr int kSmall = 80;
  LargeWorld w;
  {
    Transaction seed;
    for (int i = 0; i < kCounters; ++i) seed.Insert(kRows, RowId(i), {{"n", 0}});
    MustCommit(*w.direct, seed);
  }
  // In turns: after each chunk count of a large transaction (its earlier chunks' counters are
  // held) the writer makes two commits, then the large transaction goes on; so the writers
  // keep running into held counters.
  std::mutex mu;
  std::condition_variable cv;
  int ticks = 0, small_done = 0;
  bool large_over = false, small_over = false;
  auto link = std::make_shared<Link>(w.mem);
  link->afters.push_back([&](const Call& c, const Status&) -> std::optional<Status> {
    if (!IsAnyCount(c)) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu);
    const int target = 2 * ++ticks;
    cv.notify_all();
    cv.wait_for(lock, 10s, [&] { return small_done >= target || small_over; });
    return std::nullopt;
  });
  Database large_db(link, w.Opts());
  Database db(w.mem, w.Opts());
  int large_committed = 0;
  std::vector<Status> large_failures;
  std::vector<int> small_commits(kCounters, 0);
  std::map<Code, int> small_failures;
  std::latch start(2);
  {
    Async large([&] {
      start.arrive_and_wait();
      std::mt19937 rng(7);
      for (int round = 0; round < kLarge; ++round) {
        std::vector<int> order(kCounters);
        for (int i = 0; i < kCounters; ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        auto t = large_db.BeginLarge(Chunked(3));
        if (!t.ok()) {
          large_failures.push_back(t.status());
          continue;
        }
        Status s;
        for (int i : order) {
          s = (*t)->Adjust(kRows, RowId(i), {{"n", 1}});
          if (!s.ok()) break;
        }
        if (s.ok()) s = (*t)->Commit().status();
        if (s.ok()) {
          ++large_committed;
        } else {
          large_failures.push_back(s);
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        large_over = true;
      }
      cv.notify_all();
    });
    Async small([&] {
      start.arrive_and_wait();
      std::mt19937 rng(11);
      std::uniform_int_distribution<int> pick(0, kCounters - 1);
      for (int k = 0; k < kSmall; ++k) {
        const int a = pick(rng);
        int b = pick(rng);
        if (b == a) b = (a + 1) % kCounters;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait_for(lock, 10s, [&] { return ticks >= k / 2 + 1 || large_over; });
        }
        auto r = db.Commit(Transaction().Adjust(kRows, RowId(a), {{"n", 1}}).Adjust(kRows, RowId(b), {{"n", 1}}));
        if (r.ok()) {
          ++small_commits[a];
          ++small_commits[b];
        } else {
          ++small_failures[r.status().code()];
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          ++small_done;
          small_over = k + 1 == kSmall;
        }
        cv.notify_all();
      }
    });
    ASSERT_TRUE(large.Wait(30s));
    ASSERT_TRUE(small.Wait(30s));
  }
  for (const Status& s : large_failures) {
    EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  }
  for (const auto& [code, n] : small_failures) {
    EXPECT_TRUE(code == Code::kBusy || code == Code::kConflict) << litetx::CodeName(code) << " x" << n;
  }
  for (int i = 0; i < kCounters; ++i) {
    EXPECT_EQ(ReadImage(*w.direct, kRows, RowId(i)).doc.at("n").as_int64(),
              large_committed + small_commits[i])
        << RowId(i) << ": a lost or doubled increment";
  }
  ExpectClean(*w.mem, {kRows});
  int small_ok = 0;
  for (int c : small_commits) small_ok += c;
  int small_failed = 0;
  for (const auto& [code, n] : small_failures) small_failed += n;
  std::printf("counters: %d of %d large transactions committed, %d of %d small ones (%d failed)\n",
              large_committed, kLarge, small_ok / 2, kSmall, small_failed);
  EXPECT_GT(large_committed, 0) << "no large transaction ever got through";
}

// A reader reads every row after every store write of a coordinator (and while it runs on):
// a row of a transaction is visible only once the transaction's record is committed, within
// one pass the rows flip from old to new at most once and never back, and once every row is
// new it stays so. First a transaction that is rolled back (its values never show), then one
// that commits without settling, then is settled.
TEST(LargeHostileConcurrency, AReaderNeverSeesUncommittedRowsNorLosesCommittedOnes) {
  constexpr int kRowsEach = 10;
  LargeWorld w;
  {
    Transaction seed;
    for (int i = 0; i < kRowsEach; ++i) seed.Insert(kRows, "u" + std::to_string(i), {{"v", 0}});
    MustCommit(*w.direct, seed);
  }
  std::vector<std::string> keys;  // in reading order
  for (int i = 0; i < kRowsEach; ++i) keys.push_back("u" + std::to_string(i));
  for (int i = 0; i < kRowsEach; ++i) keys.push_back("n" + std::to_string(i));
  for (int i = 0; i < kRowsEach; ++i) keys.push_back("m" + std::to_string(i));

  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t passes = 0;
  bool done = false;
  std::string committing_id;  // the transaction that commits (set before its first write)
  std::vector<std::string> violations;
  auto violate = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    if (violations.size() < 20) violations.push_back(std::move(what));
  };

  // The coordinator's link: after each of its writes it waits until the reader has finished a
  // pass begun after the write.
  auto link = std::make_shared<Link>(w.mem);
  link->afters.push_back([&](const Call& c, const Status&) -> std::optional<Status> {
    if (!c.is_write()) return std::nullopt;
    std::unique_lock<std::mutex> lock(mu);
    const std::uint64_t target = passes + 2;
    if (!cv.wait_for(lock, 10s, [&] { return passes >= target || done; })) {
      if (violations.size() < 20) violations.push_back("the reader stopped making passes");
    }
    return std::nullopt;
  });

  Async reader([&] {
    bool all_new_seen = false;
    for (int pass = 0; pass < 100'000; ++pass) {
      bool last;
      std::string id;
      {
        std::lock_guard<std::mutex> lock(mu);
        last = done;
        id = committing_id;
      }
      bool seen_new = false;
      bool all_new = true;
      std::string where;
      for (const std::string& k : keys) {
        auto r = w.direct->Read(kRows, k);
        if (!r.ok()) {
          violate(k + ": " + r.status().ToString());
          continue;
        }
        bool is_new = false;
        if (k[0] == 'u') {
          const std::int64_t v = r->doc.at("v").as_int64();
          if (v != 0 && v != 1) violate(k + " shows v " + std::to_string(v) + " (rolled back)");
          is_new = v == 1;
        } else if (k[0] == 'n') {
          is_new = r->state == DocumentState::kFound;
        } else {
          if (r->state != DocumentState::kNotFound) violate(k + " shows a rolled-back insert");
          continue;
        }
        if (is_new) {
          if (!seen_new) {
            const std::string state = id.empty() ? "no transaction" : RecordState(*w.mem, id);
            if (state != "committed" && state != "committed done") {
              violate(k + " is new while the record is " + state);
            }
          }
          seen_new = true;
        } else {
          all_new = false;
          if (seen_new) violate(k + " is old after a new row in the same pass");
        }
      }
      if (all_new_seen && !all_new) violate("a committed row disappeared");
      all_new_seen = all_new_seen || all_new;
      {
        std::lock_guard<std::mutex> lock(mu);
        ++passes;
      }
      cv.notify_all();
      if (last) return;
    }
    violate("the reader ran out of passes");
  });

  Database db(link, w.Opts());
  {
    auto t = db.BeginLarge(Chunked(3));
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < kRowsEach; ++i) {
      ASSERT_TRUE((*t)->Update(kRows, "u" + std::to_string(i), {{"v", 2}}).ok());
      ASSERT_TRUE((*t)->Insert(kRows, "m" + std::to_string(i), {{"v", 2}}).ok());
    }
    ASSERT_TRUE((*t)->Rollback().ok());
  }
  {
    auto t = db.BeginLarge(Chunked(3, /*settle=*/false));
    ASSERT_TRUE(t.ok());
    {
      std::lock_guard<std::mutex> lock(mu);
      committing_id = (*t)->id();
    }
    for (int i = 0; i < kRowsEach; ++i) {
      ASSERT_TRUE((*t)->Update(kRows, "u" + std::to_string(i), {{"v", 1}}).ok());
      ASSERT_TRUE((*t)->Insert(kRows, "n" + std::to_string(i), {{"v", 1}}).ok());
    }
    auto info = (*t)->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    ASSERT_TRUE((*t)->Settle().ok());
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  ASSERT_TRUE(reader.Wait(20s));
  std::uint64_t total;
  {
    std::lock_guard<std::mutex> lock(mu);
    total = passes;
  }
  EXPECT_EQ(violations, std::vector<std::string>{});
  std::printf("reader: %llu passes of %zu rows around two large transactions\n",
              static_cast<unsigned long long>(total), keys.size());
  EXPECT_GT(total, 40u);
  ExpectClean(*w.mem, {kRows});
}

// A collector runs in a thread throughout, on real time, while a large transaction stays open
// for 2.5 leases with no store call of its own: its lease is renewed in the background, and the
// collector never claims it.
TEST(LargeHostileConcurrency, ACollectorThreadNeverClaimsALiveLargeTransactionWithRenewedLeases) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::Options o;
  o.logger = QuietLogger();
  o.clock = litetx::SystemClock();
  o.lease = 400ms;
  o.renew_leases = true;
  litetx::CollectorOptions co;
  co.engine = o;
  co.interval = 5ms;
  co.name = "gc-thread";
  Collector gc(mem, co);
  gc.Start();
  Database db(mem, o);
  auto t = db.BeginLarge(Chunked(5));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string id = (*t)->id();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
  const std::int64_t gc_at_then = RecordOf(*mem, id)->gc_at_ms;
  const auto runs_then = gc.stats().runs;
  // No store call of the coordinator for 2.5 leases: only the renewal keeps it alive.
  std::this_thread::sleep_for(1000ms);
  const auto rec = RecordOf(*mem, id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kPending) << "a collector claimed a live transaction";
  EXPECT_GT(rec->gc_at_ms, gc_at_then + 400) << "the lease was never renewed";
  EXPECT_GT(gc.stats().runs, runs_then + 10) << "the collector did not run meanwhile";
  for (int i = 5; i < 10; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
  auto info = (*t)->Commit();
  gc.Stop();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(gc.stats().reversed, 0u);
  EXPECT_EQ(info->written, 10u);
  Database check(mem, o);
  for (int i = 0; i < 10; ++i) {
    auto r = check.Read(kRows, RowId(i));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->doc, json::object({{"n", i}})) << RowId(i);
  }
  EXPECT_EQ(OutcomeOf(check, id), TxnOutcome::kCommitted);
}

// =============================================================================================
// The scheduler: the coordinator paused before every one of its store calls

// The coordinator's store calls in a fault-free run of `wl`: how many, which is the commit
// flip, and which are writes (1-based).
struct CallMap {
  int calls = 0;
  int flip = 0;
  std::vector<bool> write;  // [n]: call n is a write
};

CallMap MapCalls(const Workload& wl) {
  CallMap m;
  LargeWorld w;
  w.Seed(wl);
  auto link = std::make_shared<Link>(w.mem);
  std::mutex mu;
  m.write.push_back(false);
  link->befores.push_back([&](const Call& c) -> std::optional<Status> {
    std::lock_guard<std::mutex> lock(mu);
    ++m.calls;
    m.write.push_back(c.is_write());
    if (IsFlip(c)) m.flip = m.calls;
    return std::nullopt;
  });
  Drove d = Drive(w, link, wl);
  EXPECT_EQ(d.said, Said::kCommitted) << d.status.ToString();
  return m;
}

struct PauseRun {
  int pause_before = 0;  // the call (1-based) the coordinator is held before
  int lose_reply = 0;    // the write whose reply is lost (0: none)
};

// One attack: the coordinator held before call `pause_before` (after losing the reply of write
// `lose_reply`, if any); past its lease a writer adjusts r1 and a collector runs; then the
// coordinator resumes. Checks that what it reports is what is in the store, stays so through
// more collector runs, and that the outcome is the one the pause point implies.
void PauseAndAct(const Workload& wl, const Expect& plan, PauseRun pr, bool want_committed,
                 const std::string& where) {
  LargeWorld w;
  w.Seed(wl);
  auto link = std::make_shared<Link>(w.mem);
  Gate gate;
  std::atomic<int> calls{0};
  std::atomic<bool> held{false};
  link->befores.push_back([&](const Call&) -> std::optional<Status> {
    if (++calls == pr.pause_before && !held.exchange(true)) gate.Hold();
    return std::nullopt;
  });
  if (pr.lose_reply != 0) {
    link->afters.push_back([&, n = pr.lose_reply](const Call& c, const Status& s) -> std::optional<Status> {
      // `calls` counts this call already (befores ran first).
      if (s.ok() && c.is_write() && calls.load() == n) return Status::Unknown("injected lost reply");
      return std::nullopt;
    });
  }
  Drove d;
  Async run([&] { d = Drive(w, link, wl); });
  if (!gate.WaitHeld(1)) {
    gate.Open();
    ADD_FAILURE() << where << ": the coordinator never reached its pause";
    return;
  }
  Expect e = plan;
  // Past the lease, a writer adjusts r1 (settling or claiming the coordinator's hold on it),
  // then a collector runs.
  w.clock->Advance(130s);
  auto wr = w.direct->Commit(Transaction().Adjust(kRows, RowId(1), {{"n", 5}}));
  EXPECT_TRUE(wr.ok()) << where << ": the writer: " << wr.status().ToString();
  if (wr.ok()) {
    e.before[1].doc["n"] = e.before[1].doc["n"].as_int64() + 5;
    // The transaction updates r1 (sets "n"): a writer before that write is overwritten.
    if (pr.pause_before > 1 && e.after[1].state == DocumentState::kFound) {
      e.after[1].doc["n"] = e.after[1].doc["n"].as_int64() + 5;
    }
  }
  (void)CollectNow(w, "gc-meanwhile");
  gate.Open();
  ASSERT_TRUE(run.Wait(20s)) << where << ": the coordinator did not return";

  EXPECT_FALSE(d.crashed) << where;
  EXPECT_NE(d.said, Said::kUnknown) << where << ": " << d.status.ToString();
  EXPECT_EQ(d.said == Said::kCommitted, want_committed) << where << ": " << d.status.ToString();
  if (d.said == Said::kFailed) {
    EXPECT_EQ(d.status.code(), Code::kAborted) << where << ": " << d.status.ToString();
  }
  std::string id = d.id;
  if (id.empty()) {
    auto all = ScanAll(*w.mem, litetx::kTransactionsCollection);
    if (all.size() == 1) id = all[0].first;
  }
  ASSERT_FALSE(id.empty()) << where;
  const TxnOutcome reported = OutcomeOf(*w.direct, id);
  EXPECT_EQ(reported, want_committed ? TxnOutcome::kCommitted : TxnOutcome::kAborted) << where;
  // More collector runs, with the clock far on, change nothing; Outcome says the same.
  for (int i = 0; i < 3; ++i) (void)CollectNow(w, "gc-later-" + std::to_string(i));
  EXPECT_EQ(OutcomeOf(*w.direct, id), reported) << where << ": Outcome changed its answer";
  EXPECT_EQ(ReadAll(*w.direct, e.ids), want_committed ? e.after : e.before) << where;
  ExpectSettled(w, e, id, d.said, where);
}

TEST(LargeHostileScheduler, PausedBeforeEveryStoreCallPastTheLeaseTheReportIsTheTruth) {
  const Workload wl = Mixed(6);
  const Expect plan = Plan(wl, 2);
  const CallMap m = MapCalls(wl);
  ASSERT_GT(m.flip, 1);
  ASSERT_GT(m.calls, m.flip);
  int committed = 0, failed = 0;
  for (int n = 1; n <= m.calls; ++n) {
    // Before the record exists nobody can claim the transaction (the record then lands
    // already past its lease, and the coordinator's next count pushes it out); from the
    // record on up to the flip a collector claims it; after the flip it is committed.
    const bool want = n == 1 || n > m.flip;
    const std::string where = "paused before call " + std::to_string(n) + " of " +
                              std::to_string(m.calls) + " (flip " + std::to_string(m.flip) + ")";
    SCOPED_TRACE(where);
    PauseAndAct(wl, plan, PauseRun{n, 0}, want, where);
    (want ? committed : failed) += 1;
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("paused before each of %d calls: %d committed, %d rolled back\n", m.calls,
              committed, failed);
}

TEST(LargeHostileScheduler, ALostReplyThenPausedBeforeTheNextCallPastTheLeaseTheReportIsTheTruth) {
  const Workload wl = Mixed(6);
  const Expect plan = Plan(wl, 2);
  const CallMap m = MapCalls(wl);
  int attacks = 0;
  for (int n = 1; n <= m.calls; ++n) {
    if (!m.write[n]) continue;
    // A lost reply of the flip is the flip landed: committed, as everything after it.
    const bool want = n >= m.flip;
    const std::string where = "reply of write " + std::to_string(n) + " lost, paused before call " +
                              std::to_string(n + 1) + " (flip " + std::to_string(m.flip) + ")";
    SCOPED_TRACE(where);
    PauseAndAct(wl, plan, PauseRun{n + 1, n}, want, where);
    ++attacks;
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("lost reply then paused, at each of %d writes\n", attacks);
}

// =============================================================================================
// Fork

// A child forked while a large transaction is open inherits a copy of its handle. Nothing of
// litetx runs in the child by itself (fork copies no thread: the lease keeper stays in the
// parent), so a child that leaves the handle alone leaves the transaction alone; one that
// opens the store on its own sees none of the transaction's rows and its collector does not
// claim it (the parent renews the lease). The child must not use the inherited handle or
// store: that is the parent's transaction, and LMDB forbids using an environment across fork.
TEST(LargeHostileFork, AChildForkedWhileALargeTransactionIsOpenLeavesItAlone) {
  LmdbScratch scratch;
  ASSERT_TRUE(scratch.store() != nullptr);
  World world;
  litetx::Options o = world.Opts();
  o.renew_leases = true;  // a lease keeper thread runs in the parent
  Database db(scratch.store(), o);
  auto t = db.BeginLarge(Chunked(2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
  const std::string id = (*t)->id();

  auto wait_child = [](pid_t pid) {
    int status = -1;
    for (int i = 0; i < 2000; ++i) {  // at most 10 s
      if (::waitpid(pid, &status, WNOHANG) == pid) return status;
      std::this_thread::sleep_for(5ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "the child did not exit";
    return -1;
  };
  std::fflush(nullptr);
  // (a) A child that only exits.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(0);
  EXPECT_EQ(wait_child(pid), 0);
  // (b) A child that opens the store on its own, reads and collects.
  std::fflush(nullptr);
  pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    {
      litetx::LmdbOptions lo;
      lo.durability = litetx::LmdbDurability::kNoSync;
      auto own = litetx::LmdbStore::Open(scratch.dir(), lo);
      if (!own.ok()) ::_exit(10);
      Database child_db(*own, world.Opts());
      for (int i = 0; i < 5 && code == 0; ++i) {
        auto r = child_db.Read(kRows, RowId(i));
        if (!r.ok()) code = 11;
        else if (r->state != DocumentState::kNotFound) code = 12;
      }
      litetx::CollectorOptions co;
      co.engine = world.Opts();
      co.name = "gc-child";
      Collector gc(*own, co);
      if (code == 0 && !gc.RunOnce().ok()) code = 13;
      if (code == 0 && gc.stats().reversed != 0) code = 14;
    }
    ::_exit(code);
  }
  const int status = wait_child(pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: open, 11: read, 12: an uncommitted row visible, "
                                       "13: collector failed, 14: the collector claimed it";

  // The parent's transaction goes on as if nothing happened.
  for (int i = 5; i < 8; ++i) ASSERT_TRUE((*t)->Insert(kRows, RowId(i), {{"n", i}}).ok());
  auto info = (*t)->Commit();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->written, 8u);
  Database check(scratch.store(), world.Opts());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(ReadImage(check, kRows, RowId(i)).doc, json::object({{"n", i}})) << RowId(i);
  }
  EXPECT_EQ(OutcomeOf(check, id), TxnOutcome::kCommitted);
  ExpectClean(*scratch.store(), {kRows});
}

// =============================================================================================
// Exotic input to Import

constexpr const char* kPeople = "people";

ImportOptions ImportOpts(std::size_t chunk = 2) {
  ImportOptions o;
  o.collection = kPeople;
  o.id_field = "id";
  o.chunk_rows = chunk;
  return o;
}

// The found documents of `collection` (read committed), by id.
std::map<std::string, json::object> Live(World& w, Database& db, const std::string& collection) {
  std::map<std::string, json::object> out;
  for (const auto& [id, doc] : ScanAll(*w.mem, collection)) {
    auto r = db.Read(collection, id);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status().ToString();
    if (r.ok() && r->state == DocumentState::kFound) out[id] = r->doc;
  }
  return out;
}

struct ImportCase {
  const char* name;
  std::string text;
  // Committed: the ids expected (with their documents checked by `check`, if set). Otherwise
  // the line and a part of the reason.
  bool commits;
  std::vector<std::string> ids;
  std::uint64_t line = 0;
  const char* reason = "";
};

std::string Row(const std::string& id_json, const std::string& rest = "") {
  return "{\"id\":" + id_json + rest + "}";
}

// Rows {"id":"p1"}..{"id":"p<n>"}, one a line.
std::string Lines(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i) out += Row("\"p" + std::to_string(i) + "\"") + "\n";
  return out;
}

std::string Nest(std::size_t levels) {  // an object nested `levels` deep (the row is level 1)
  std::string open, close;
  for (std::size_t i = 1; i < levels; ++i) {
    open += "{\"a\":";
    close += "}";
  }
  return "{\"id\":\"deep\",\"x\":" + open + "1" + close + "}";
}

std::vector<ImportCase> ImportCases() {
  const std::string id382(382, 'i');
  std::vector<ImportCase> c = {
      {"BOM, then NDJSON with CRLF line ends",
       "\xEF\xBB\xBF" + Row("\"a\"") + "\r\n" + Row("\"b\"") + "\r\n", true, {"a", "b"}},
      {"BOM, then an array over CRLF lines",
       "\xEF\xBB\xBF[\r\n" + Row("\"a\"") + ",\r\n" + Row("\"b\"") + "\r\n]\r\n", true, {"a", "b"}},
      {"ids with slashes", Row("\"a/b\"") + "\n" + Row("\"/\"") + "\n" + Row("\"../x\"") + "\n",
       true, {"a/b", "/", "../x"}},
      {"a NUL character in a value", Row("\"z\"", ",\"s\":\"a\\u0000b\""), true, {"z"}},
      {"a 382-byte id", Row("\"" + id382 + "\""), true, {id382}},
      {"integer ids at the ends of int64 and uint64",
       Row("9223372036854775807") + "\n" + Row("9223372036854775808") + "\n" +
           Row("18446744073709551615") + "\n" + Row("-9223372036854775808") + "\n",
       true,
       {"9223372036854775807", "9223372036854775808", "18446744073709551615",
        "-9223372036854775808"}},
      {"-0 as an id is the integer 0", Row("-0"), true, {"0"}},
      {"1e-400 reads as zero", Row("\"u\"", ",\"x\":1e-400"), true, {"u"}},
      {"nesting at the limit of 64 levels", Nest(64), true, {"deep"}},

      {"invalid UTF-8 in a value", Lines(3) + Row("\"p4\"", ",\"s\":\"\xc3\x28\""), false, {}, 4,
       "not valid UTF-8"},
      {"invalid UTF-8 in an id", Lines(3) + Row("\"p\xff\""), false, {}, 4, "not valid UTF-8"},
      {"invalid UTF-8 in a key", Lines(3) + "{\"id\":\"p4\",\"\xed\xa0\x80\":1}", false, {}, 4,
       "not valid UTF-8"},
      {"a lone surrogate escape", Lines(3) + Row("\"p4\"", ",\"s\":\"\\ud800\""), false, {}, 4,
       "malformed JSON"},
      {"a BOM on line 2", Lines(1) + "\xEF\xBB\xBF" + Row("\"p2\""), false, {}, 2, "malformed JSON"},
      {"a control character in an id", Lines(3) + Row("\"p\\u0001\""), false, {}, 4,
       "control character"},
      {"DEL in an id", Lines(3) + Row("\"p\x7f\""), false, {}, 4, "control character"},
      {"a 383-byte id", Lines(3) + Row("\"" + std::string(383, 'i') + "\""), false, {}, 4,
       "over the limit of 382"},
      {"a 383-byte id ending in a 2-byte character",
       Lines(3) + Row("\"" + std::string(381, 'i') + "\xc3\xa9\""), false, {}, 4,
       "over the limit of 382"},
      {"an integer id over uint64", Lines(3) + Row("18446744073709551616"), false, {}, 4,
       "must be a string or an integer"},
      {"an integer id under int64", Lines(3) + Row("-9223372036854775809"), false, {}, 4,
       "must be a string or an integer"},
      {"1e400 as an id", Lines(3) + Row("1e400"), false, {}, 4, "must be a string or an integer"},
      {"1e400 as a value", Lines(3) + Row("\"p4\"", ",\"x\":1e400"), false, {}, 4, "not finite"},
      {"a key twice in a nested object", Lines(3) + Row("\"p4\"", ",\"o\":{\"b\":1,\"b\":2}"),
       false, {}, 4, "key \"b\" appears twice"},
      {"a key twice, once escaped", Lines(3) + Row("\"p4\"", ",\"a\":1,\"\\u0061\":2"), false, {},
       4, "key \"a\" appears twice"},
      {"a number row", Lines(3) + "42\n", false, {}, 4, "not a JSON object (a number)"},
      {"a string row", Lines(3) + "\"p4\"\n", false, {}, 4, "not a JSON object (a string)"},
      {"a null row", Lines(3) + "null\n", false, {}, 4, "not a JSON object (null)"},
      {"nested arrays", "[[" + Row("\"a\"") + "]]", false, {}, 1, "not a JSON object (an array)"},
      {"[,]", "[,]", false, {}, 1, "empty array element"},
      {"[ only", "[", false, {}, 1, "ends inside the array"},
      {"nesting one over the limit", Lines(3) + Nest(65), false, {}, 4, "deeper than 64"},
      {"nesting a million levels deep", Lines(3) + std::string(1'000'000, '['), false, {}, 4,
       "deeper than 64"},
      {"CR alone between two rows", Row("\"a\"") + "\r" + Row("\"b\"") + "\n", false, {}, 1,
       "malformed JSON"},
  };
  return c;
}

TEST(LargeHostileImport, ExoticInputImportsCorrectlyOrFailsWithItsLineAndWritesNothing) {
  for (const ImportCase& c : ImportCases()) {
    SCOPED_TRACE(c.name);
    World w;
    auto db = w.Direct();
    ASSERT_TRUE(db->Commit(Transaction().Insert(kPeople, "p0", {{"id", "p0"}})).ok());
    const auto before = Live(w, *db, kPeople);
    std::istringstream in(c.text);
    auto r = litetx::Import(*db, in, ImportOpts());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto after = Live(w, *db, kPeople);
    if (c.commits) {
      EXPECT_TRUE(r->committed) << r->outcome.ToString();
      EXPECT_EQ(r->imported, c.ids.size());
      EXPECT_EQ(after.size(), before.size() + c.ids.size());
      for (const std::string& id : c.ids) EXPECT_TRUE(after.contains(id)) << id;
    } else {
      EXPECT_FALSE(r->committed);
      EXPECT_EQ(r->imported, 0u);
      EXPECT_EQ(r->outcome.code(), Code::kInvalidArgument) << r->outcome.ToString();
      EXPECT_EQ(r->outcome.message().rfind("line " + std::to_string(c.line) + ": ", 0), 0u)
          << r->outcome.message();
      EXPECT_NE(r->outcome.message().find(c.reason), std::string::npos) << r->outcome.message();
      EXPECT_EQ(after, before) << "a failed import changed the collection";
      if (!r->txn_id.empty()) {
        EXPECT_EQ(OutcomeOf(*db, r->txn_id), TxnOutcome::kAborted);
      }
    }
    ExpectClean(*w.mem, {kPeople});
  }
}

TEST(LargeHostileImport, ExoticValuesReadBackExactly) {
  World w;
  auto db = w.Direct();
  const std::string text = Row("\"z\"", ",\"s\":\"a\\u0000b\",\"neg\":-0,\"negd\":-0.0,\"tiny\":1e-400") +
                           "\n" + Row("-0") + "\n" + Row("18446744073709551615") + "\n";
  std::istringstream in(text);
  auto r = litetx::Import(*db, in, ImportOpts());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->committed) << r->outcome.ToString();
  const json::object z = ReadImage(*db, kPeople, "z").doc;
  EXPECT_EQ(z.at("s").as_string(), std::string_view("a\0b", 3));
  EXPECT_TRUE(z.at("neg").is_int64());  // "-0" is the integer 0
  EXPECT_EQ(z.at("neg").as_int64(), 0);
  ASSERT_TRUE(z.at("negd").is_double());  // "-0.0" keeps its sign
  EXPECT_TRUE(std::signbit(z.at("negd").as_double()));
  EXPECT_EQ(z.at("tiny").as_double(), 0.0);
  EXPECT_EQ(ReadImage(*db, kPeople, "0").doc.at("id").as_int64(), 0);
  EXPECT_EQ(ReadImage(*db, kPeople, "18446744073709551615").doc.at("id").as_uint64(),
            std::numeric_limits<std::uint64_t>::max());
}

TEST(LargeHostileImport, EmptyInputsAreRefusedAndWriteNothing) {
  for (const std::string& text : {std::string(), std::string("[]"), std::string("\xEF\xBB\xBF[ ]\r\n")}) {
    World w;
    auto db = w.Direct();
    std::istringstream in(text);
    auto r = litetx::Import(*db, in, ImportOpts());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << text;
    EXPECT_NE(r.status().message().find("no rows"), std::string::npos) << r.status().message();
    EXPECT_TRUE(ScanAll(*w.mem, kPeople).empty());
    EXPECT_TRUE(ScanAll(*w.mem, litetx::kTransactionsCollection).empty()) << "a transaction began";
  }
  // "[" alone and "[,]": bad input and a bad row; no row written either way.
  for (const bool skip : {false, true}) {
    World w;
    auto db = w.Direct();
    ImportOptions o = ImportOpts();
    o.skip_bad_rows = skip;
    std::istringstream in("[,]");
    auto r = litetx::Import(*db, in, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->committed);
    EXPECT_EQ(r->outcome.message().rfind("line 1: ", 0), 0u) << r->outcome.message();
    EXPECT_TRUE(Live(w, *db, kPeople).empty());
  }
}

TEST(LargeHostileImport, ARowAtTheByteLimitImportsAndOneByteOverIsABadRow) {
  constexpr std::size_t kLimit = 100;
  const auto row_of = [](const std::string& id, std::size_t bytes) {
    std::string r = "{\"id\":\"" + id + "\",\"pad\":\"";
    const std::size_t fixed = r.size() + 2;  // the closing "}
    r += std::string(bytes - fixed, 'x') + "\"}";
    return r;
  };
  ASSERT_EQ(row_of("a", kLimit).size(), kLimit);
  struct Case {
    const char* name;
    std::string text;
    bool commits;
  } cases[] = {
      {"NDJSON, exactly at the limit", row_of("a", kLimit) + "\n" + row_of("b", 50) + "\n", true},
      {"NDJSON with CRLF, exactly at the limit", row_of("a", kLimit) + "\r\n" + row_of("b", 50), true},
      {"NDJSON, one byte over", row_of("a", kLimit + 1) + "\n" + row_of("b", 50) + "\n", false},
      {"NDJSON with CRLF, one byte over", row_of("a", kLimit + 1) + "\r\n", false},
      {"array, exactly at the limit", "[" + row_of("a", kLimit) + "," + row_of("b", 50) + "]", true},
      {"array, exactly at the limit, last", "[\n" + row_of("b", 50) + ",\n" + row_of("a", kLimit) + "]", true},
      {"array, one byte over", "[" + row_of("a", kLimit + 1) + "," + row_of("b", 50) + "]", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    auto db = w.Direct();
    ImportOptions o = ImportOpts();
    o.max_row_bytes = kLimit;
    std::istringstream in(c.text);
    auto r = litetx::Import(*db, in, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->committed, c.commits) << r->outcome.ToString();
    if (c.commits) {
      EXPECT_EQ(ReadImage(*db, kPeople, "a").doc.at("pad").as_string().size(), kLimit - 19);
    } else {
      EXPECT_EQ(r->outcome.message().rfind("line 1: ", 0), 0u) << r->outcome.message();
      // Read to its end (" bytes, more than the limit of N") or, as here without skipping,
      // stopped at the limit ("longer than the limit of N bytes").
      const std::string& m = r->outcome.message();
      EXPECT_TRUE(m.find(" bytes, more than the limit of " + std::to_string(kLimit)) != std::string::npos ||
                  m.find("longer than the limit of " + std::to_string(kLimit) + " bytes") != std::string::npos)
          << m;
      EXPECT_TRUE(Live(w, *db, kPeople).empty());
    }
  }
}

// An array element of exactly max_row_bytes followed by a blank (before its ',' or the closing
// ']', as in a pretty-printed array whose last element ends its line) imports: the blanks after
// an element are not part of it (ARowAtTheByteLimitImportsAndOneByteOverIsABadRow has the same
// element without the blank).
TEST(LargeHostileImport, ABlankAfterAnArrayElementAtTheLimitDoesNotCount) {
  ImportOptions o = ImportOpts();
  o.max_row_bytes = 20;
  const std::string row = "{\"id\":\"a\",\"p\":\"xxx\"}";  // 20 bytes
  ASSERT_EQ(row.size(), 20u);
  for (const std::string& text : {"[" + row + " , {\"id\":\"b\"}]", "[\n{\"id\":\"b\"},\n" + row + "\n]"}) {
    World w;
    auto db = w.Direct();
    std::istringstream in(text);
    auto r = litetx::Import(*db, in, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->committed) << text << ": " << r->outcome.ToString();
  }
}

// A stream that gives `data`, then fails: a read that needs more than `data` throws from the
// stream buffer, as std::filebuf does on a read error, which sets badbit.
class FailingBuf : public std::streambuf {
 public:
  explicit FailingBuf(std::string data) : data_(std::move(data)) {}

 protected:
  int_type underflow() override {
    if (!served_) {
      served_ = true;
      setg(data_.data(), data_.data(), data_.data() + data_.size());
      return traits_type::to_int_type(data_[0]);
    }
    throw std::ios_base::failure("injected read error");
  }

 private:
  std::string data_;
  bool served_ = false;
};

TEST(LargeHostileImport, AReadErrorMidwayRollsTheWholeImportBack) {
  // 1000 lines of 100 bytes; the stream serves them all, then fails at the next read: the
  // importer has read every row (and written ten chunks of 100) when it finds the error, at
  // the end of the input.
  std::string text;
  for (int i = 1; i <= 1000; ++i) {
    std::string row = "{\"id\":\"p" + std::to_string(i) + "\",\"pad\":\"";
    row += std::string(100 - row.size() - 3, 'x') + "\"}\n";
    text += row;
  }
  ASSERT_EQ(text.size(), 100'000u);
  World w;
  auto db = w.Direct();
  FailingBuf buf(text);
  std::istream in(&buf);
  auto r = litetx::Import(*db, in, ImportOpts(100));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->committed);
  EXPECT_EQ(r->rows_read, 1000u);
  EXPECT_EQ(r->outcome.code(), Code::kInvalidArgument);
  EXPECT_EQ(r->outcome.message(), "line 1001: the input could not be read after 100000 bytes");
  EXPECT_TRUE(Live(w, *db, kPeople).empty());
  EXPECT_EQ(ScanAll(*w.mem, kPeople).size(), 1000u) << "ten chunks were written before the error";
  EXPECT_EQ(OutcomeOf(*db, r->txn_id), TxnOutcome::kAborted);
  ExpectClean(*w.mem, {kPeople});
}

// A stream of `total` zero bytes (like /dev/zero, but ending), counting what was read of it.
class ZeroBuf : public std::streambuf {
 public:
  explicit ZeroBuf(std::uint64_t total) : left_(total), block_(1 << 16, '\0') {}
  std::uint64_t served() const { return served_; }

 protected:
  int_type underflow() override {
    if (left_ == 0) return traits_type::eof();
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, block_.size()));
    left_ -= n;
    served_ += n;
    setg(block_.data(), block_.data(), block_.data() + n);
    return traits_type::to_int_type(block_[0]);
  }

 private:
  std::uint64_t left_;
  std::uint64_t served_ = 0;
  std::string block_;
};

// An input whose first line never ends (/dev/zero): without skip_bad_rows the row is bad as
// soon as it is longer than max_row_bytes, so the import stops there with the row's line,
// without reading the line to its end (on /dev/zero that would be forever:
// tests/cli/cli_import_hostile_test.cpp). Here the line ends after 64 MiB.
TEST(LargeHostileImport, ALineLongerThanTheLimitStopsTheImportWithoutReadingItToItsEnd) {
  World w;
  auto db = w.Direct();
  ZeroBuf buf(64ull << 20);
  std::istream in(&buf);
  ImportOptions o = ImportOpts();
  o.max_row_bytes = 1 << 20;
  auto r = litetx::Import(*db, in, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->committed);
  EXPECT_EQ(r->outcome.message().rfind("line 1: ", 0), 0u) << r->outcome.message();
  EXPECT_LE(buf.served(), 4ull << 20) << "read " << buf.served() << " bytes of one bad row";
}

}  // namespace
}  // namespace ltxtest::large
