// tests/large_failure_test.cpp — the failure table of large transactions (docs/protocol.md
// §9.3), row by row: each row's exception column (store errors after the retries, lost replies
// that landed or did not, a collector that got there first) and its crash column (the process
// dies right after the step's write landed), then the "who finishes it" column: collectors past
// the lease leave every row of the transaction written or none (read committed and raw), no
// reference, no open record, the outcome Database::Outcome reports agrees with what the
// coordinator reported and never changes, and after the purge no chunk document or marker.
//
// The workload (large_util.h Mixed(6), chunks of 2 actions) is three chunks:
//   chunk 0: insert r0 (absent), update r1      chunk 1: adjust r2, delete r3
//   chunk 2: put r4 (over a live row), put r5 (absent)
// Most failures aim at chunk 1, the middle one, so that a chunk before it is complete and one
// after it was never started.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "large_util.h"

namespace ltxtest::large {
namespace {

using litetx::Collector;
using litetx::SimulatedCrash;
using litetx::Transaction;
using litetx::engine::TxnState;

struct Fixture {
  LargeWorld w;
  Workload wl = Mixed(6);
  Expect e = Plan(wl, 2);
  std::shared_ptr<Link> link = std::make_shared<Link>(w.mem);
  Fixture() { w.Seed(wl); }
};

bool Key2(const Call& c) { return c.key == Key{kRows, "r2"}; }

// ---------------------------------------------------------------------------------------------
// L1 record

TEST(LargeFailure, L1) {
  {
    SCOPED_TRACE("record create unavailable: nothing written");
    Fixture f;
    f.link->befores.push_back(Refuse(IsRecordCreate, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    EXPECT_TRUE(ScanAll(*f.w.mem, litetx::kTransactionsCollection).empty());
    EXPECT_EQ(f.link->calls_in(Op::kCreate, litetx::kTransactionsCollection), 4);  // max_attempts
    ExpectSettled(f.w, f.e, d.id, d.said, "unavailable");
  }
  {
    SCOPED_TRACE("lost reply, the create landed: sent again, its own value found");
    Fixture f;
    f.link->afters.push_back(LoseReply(IsRecordCreate, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.info.settled);
    ExpectSettled(f.w, f.e, d.id, d.said, "lost reply");
  }
  {
    SCOPED_TRACE("lost reply never resolved: kUnknown, a pending record with no chunk landed");
    Fixture f;
    auto after_loss = std::make_shared<std::atomic<bool>>(false);
    f.link->afters.push_back(LoseReply(IsRecordCreate));
    f.link->befores.push_back([after_loss](const Call& c) -> std::optional<Status> {
      if (c.op == Op::kCreate && c.on_record()) after_loss->store(true);
      if (*after_loss && c.op == Op::kGet && c.on_record()) return Status::Unavailable("injected");
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_EQ(d.status.code(), Code::kUnknown) << d.status.ToString();
    ASSERT_FALSE(d.id.empty()) << "kUnknown must name the transaction";
    auto rec = RecordOf(*f.w.mem, d.id);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->state, TxnState::kPending);
    EXPECT_TRUE(rec->large);
    EXPECT_EQ(rec->chunks, 0u);
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kPending);
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "unknown");
    EXPECT_FALSE(s.committed);
  }
}

TEST(LargeFailure, L1_CrashRightAfterTheRecord) {
  // The process dies right after the record create landed: its next store call never happens.
  Fixture f;
  f.link->DieBefore([&](const Call& c) { return !IsRecordCreate(c); });
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  auto rec = RecordOf(*f.w.mem, d.id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kPending);
  EXPECT_EQ(rec->chunks, 0u);
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash after L1");
  EXPECT_FALSE(s.committed);
}

// A crash that unwinds out of BeginLarge itself (the record create landed, its reply never came
// back): the half-made run is destroyed while SimulatedCrash propagates, without starting a
// rollback; the collector reverses the pending record.
TEST(LargeFailure, L1_CrashInsideBeginLarge) {
  Fixture f;
  f.link->DieAfter(IsRecordCreate);
  Database db(f.link, f.w.Opts());
  EXPECT_THROW((void)db.BeginLarge(Chunked(2)), SimulatedCrash);
  ExpectSettled(f.w, f.e, "", Said::kNothing, "crash inside BeginLarge");
}

// ---------------------------------------------------------------------------------------------
// L2 reads

TEST(LargeFailure, L2) {
  {
    SCOPED_TRACE("a read of chunk 1 keeps failing: rollback, kUnavailable");
    Fixture f;
    f.link->befores.push_back(
        Refuse([](const Call& c) { return c.op == Op::kGet && Key2(c); }, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    // The coordinator rolled back itself: the marker is there before any collector.
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
    EXPECT_EQ(RecordCount(*f.w.mem), 0u);
    ExpectSettled(f.w, f.e, d.id, d.said, "read unavailable");
  }
  {
    SCOPED_TRACE("a read failing once is retried alone");
    Fixture f;
    f.link->befores.push_back(
        Refuse([](const Call& c) { return c.op == Op::kGet && Key2(c); }, Code::kUnavailable, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "read retried");
  }
}

TEST(LargeFailure, L2_HeldPastTheBusyTimeoutIsBusy) {
  Fixture f;
  // An older live large transaction holds r2.
  auto other = f.w.direct->BeginLarge(Chunked(1));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Adjust(kRows, "r2", {{"n", 1}}).ok());
  f.w.clock->Advance(1ms);
  Drove d = Drive(f.w, f.link, f.wl);
  EXPECT_EQ(d.status.code(), Code::kBusy) << d.status.ToString();
  EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
  ASSERT_TRUE((*other)->Rollback().ok());
  ExpectSettled(f.w, f.e, d.id, d.said, "busy");
}

TEST(LargeFailure, L2_Crash) {
  // Dies while reading chunk 1: nothing new, chunk 0 is written and applied.
  Fixture f;
  f.link->DieBefore([](const Call& c) { return c.op == Op::kGet && Key2(c); });
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r1").txn, d.id);
  EXPECT_EQ(RecordOf(*f.w.mem, d.id)->chunks, 1u);
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash in L2");
  EXPECT_FALSE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// L3 count

TEST(LargeFailure, L3) {
  auto count1 = [](const Call& c) { return IsCount(c, 1); };
  {
    SCOPED_TRACE("claimed by a collector before the count: kAborted");
    Fixture f;
    Once once;
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (count1(c) && once()) {
        EXPECT_EQ(CollectNow(f.w).reversed, 1u);
      }
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kAborted) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "claimed");
  }
  {
    SCOPED_TRACE("count unavailable after the retries: rollback, kUnavailable");
    Fixture f;
    f.link->befores.push_back(Refuse(count1, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
    ExpectSettled(f.w, f.e, d.id, d.said, "count unavailable");
  }
  {
    SCOPED_TRACE("lost reply, landed: its own value adopted");
    Fixture f;
    f.link->afters.push_back(LoseReply(count1, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "count lost reply");
  }
  {
    SCOPED_TRACE("lost reply, not landed: the re-read shows it did not land, sent again");
    Fixture f;
    f.link->befores.push_back(Refuse(count1, Code::kUnknown, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "count lost, not landed");
  }
  {
    SCOPED_TRACE("lost reply, landed, re-read fails: rollback adopts it later (counts chunk 1)");
    Fixture f;
    auto reads_left = std::make_shared<std::atomic<int>>(0);
    f.link->afters.push_back(
        [reads_left, count1](const Call& c, const Status& s) -> std::optional<Status> {
          if (s.ok() && count1(c) && c.nth == 2) {  // nth: the second replace of the record
            reads_left->store(4);                   // GetWithRetry's max_attempts
            return Status::Unknown("injected lost reply");
          }
          return std::nullopt;
        });
    f.link->befores.push_back([reads_left](const Call& c) -> std::optional<Status> {
      if (c.op == Op::kGet && c.on_record() && reads_left->fetch_sub(1) > 0) {
        return Status::Unavailable("injected");
      }
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    // The rollback adopted the count it could not confirm, and stubbed chunk 1 (never created).
    auto rec = RecordOf(*f.w.mem, d.id);
    ASSERT_TRUE(rec.has_value());
    EXPECT_TRUE(rec->done);
    EXPECT_EQ(rec->chunks, 2u);
    auto stub = Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1));
    ASSERT_TRUE(stub.has_value());
    EXPECT_TRUE(stub->contains("fence"));
    ExpectSettled(f.w, f.e, d.id, d.said, "count adopted later");
  }
}

TEST(LargeFailure, L3_Crash) {
  Fixture f;
  f.link->DieAfter([](const Call& c) { return IsCount(c, 1); });
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  EXPECT_EQ(RecordOf(*f.w.mem, d.id)->chunks, 2u);
  EXPECT_FALSE(Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1)).has_value());
  EXPECT_EQ(Collect(f.w), 0u);
  // The collector took chunk 1's key with a stub, so its create can never land.
  auto stub = Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1));
  ASSERT_TRUE(stub.has_value());
  EXPECT_TRUE(stub->contains("fence"));
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash after L3");
  EXPECT_FALSE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// L4 chunk

TEST(LargeFailure, L4) {
  auto chunk1 = [](const Call& c) { return IsChunkCreate(c, 1); };
  {
    SCOPED_TRACE("a collector stubbed the chunk first: kAborted");
    Fixture f;
    Once once;
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (chunk1(c) && once()) {
        EXPECT_EQ(CollectNow(f.w).reversed, 1u);
      }
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kAborted) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "stubbed");
  }
  {
    SCOPED_TRACE("chunk create unavailable: rollback, kUnavailable");
    Fixture f;
    f.link->befores.push_back(Refuse(chunk1, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "chunk unavailable");
  }
  {
    SCOPED_TRACE("lost reply, landed: the conflict on the resend finds its own chunk");
    Fixture f;
    f.link->afters.push_back(LoseReply(chunk1, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "chunk lost reply");
  }
  {
    SCOPED_TRACE("lost replies that never land, after the retries: rollback, kUnavailable");
    Fixture f;
    f.link->befores.push_back(Refuse(chunk1, Code::kUnknown));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    auto stub = Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1));
    ASSERT_TRUE(stub.has_value());
    EXPECT_TRUE(stub->contains("fence")) << "a stub takes the key of the chunk never written";
    ExpectSettled(f.w, f.e, d.id, d.said, "chunk lost, not landed");
  }
}

TEST(LargeFailure, L4_Crash) {
  // Chunk 2 (put r4 over a live row, put r5 over an absent one) written, none of its documents.
  Fixture f;
  f.link->DieAfter([](const Call& c) { return IsChunkCreate(c, 2); });
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  const Revision r4 = RevisionOf(*f.w.mem, {kRows, "r4"});
  EXPECT_FALSE(Raw(*f.w.mem, kRows, "r5").has_value());
  EXPECT_EQ(Collect(f.w), 0u);
  // Fenced: r4 rewritten unchanged at a new revision, r5 taken by a "gone" placeholder.
  EXPECT_GT(RevisionOf(*f.w.mem, {kRows, "r4"}), r4);
  EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r4").version, f.e.before_versions[4]);
  EXPECT_TRUE(MetaOf(*f.w.mem, kRows, "r5").gone);
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash after L4");
  EXPECT_FALSE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// L5 applies

// r2 (adjust n by 1000, seeded n 2) changed by another writer: n + 5.
void BumpR2(LargeWorld& w) {
  ASSERT_TRUE(w.direct->Commit(Transaction().Adjust(kRows, "r2", {{"n", 5}})).ok());
}
Expect WithR2Bumped(Expect e) {
  e.before[2].doc["n"] = 7;
  e.after[2].doc["n"] = 1007;
  return e;
}

TEST(LargeFailure, L5) {
  auto apply2 = [](const Call& c) { return IsApply(c) && Key2(c); };
  {
    SCOPED_TRACE("conflict: r2 changed by another writer, evaluated again (L5a), committed");
    Fixture f;
    Once once;
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (apply2(c) && once()) BumpR2(f.w);
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(f.link->calls_in(Op::kReplace, ChunksCollection()), 1) << "one chunk rewrite";
    ExpectSettled(f.w, WithR2Bumped(f.e), d.id, d.said, "conflict");
  }
  {
    SCOPED_TRACE("lost reply, landed: found held by it");
    Fixture f;
    f.link->afters.push_back(LoseReply(apply2, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(d.info.written, 6u);
    ExpectSettled(f.w, f.e, d.id, d.said, "apply lost reply");
  }
  {
    SCOPED_TRACE("lost reply, not landed, unchanged: sent again");
    Fixture f;
    f.link->befores.push_back(Refuse(apply2, Code::kUnknown, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(f.link->calls(Op::kReplace, {kRows, "r2"}), 3) << "apply, resend, finish";
    ExpectSettled(f.w, f.e, d.id, d.said, "apply lost, resent");
  }
  {
    SCOPED_TRACE("lost reply, not landed, changed meanwhile: L5a");
    Fixture f;
    Once once;
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (apply2(c) && once()) {
        BumpR2(f.w);
        return Status::Unknown("injected lost write");
      }
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ExpectSettled(f.w, WithR2Bumped(f.e), d.id, d.said, "apply lost, changed");
  }
  {
    SCOPED_TRACE("apply unavailable after the retries: rollback, kUnavailable");
    Fixture f;
    f.link->befores.push_back(Refuse(apply2, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "apply unavailable");
  }
}

TEST(LargeFailure, L5_ActionFailureAtL5aRollsBackNamingItsTag) {
  // r0 (insert, tag 1) is inserted by someone else just before the coordinator's create.
  auto make = [](Fixture& f, Once& once) {
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsApply(c) && c.key == Key{kRows, "r0"} && once()) {
        EXPECT_TRUE(f.w.direct->Commit(Transaction().Insert(kRows, "r0", {{"n", -1}})).ok());
      }
      return std::nullopt;
    });
  };
  {
    Fixture f;
    Once once;
    make(f, once);
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_FALSE(d.status.ok());
    EXPECT_NE(d.status.message().find("action 1 "), std::string::npos) << d.status.ToString();
    Expect e = f.e;
    e.before[0] = Content{DocumentState::kFound, Obj(R"({"n":-1})")};
    ExpectSettled(f.w, e, d.id, d.said, "action failure");
  }
  {
    SCOPED_TRACE("with skip_failed_actions: skipped, the rest commits");
    Fixture f;
    Once once;
    make(f, once);
    DriveOptions o;
    o.txn.skip_failed_actions = true;
    std::vector<std::uint64_t> skipped;
    o.txn.on_skip = [&](std::uint64_t tag, const Status&) { skipped.push_back(tag); };
    Drove d = Drive(f.w, f.link, f.wl, o);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(skipped, std::vector<std::uint64_t>{1});
    EXPECT_EQ(d.info.skipped, 1u);
    Expect e = f.e;
    e.before[0] = e.after[0] = Content{DocumentState::kFound, Obj(R"({"n":-1})")};
    ExpectSettled(f.w, e, d.id, d.said, "skipped");
  }
}

TEST(LargeFailure, L5_Crash) {
  {
    SCOPED_TRACE("r2 held, r3 not: r2 reversed, r3 fenced");
    Fixture f;
    f.link->DieAfter([](const Call& c) { return IsApply(c) && Key2(c); });
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.crashed);
    const Revision r3 = RevisionOf(*f.w.mem, {kRows, "r3"});
    EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r2").txn, d.id);
    EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r3").txn, "");
    EXPECT_EQ(Collect(f.w), 0u);
    EXPECT_GT(RevisionOf(*f.w.mem, {kRows, "r3"}), r3) << "r3 not fenced";
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash in L5");
    EXPECT_FALSE(s.committed);
  }
  {
    SCOPED_TRACE("r4 held, r5 (absent) not: r5 taken by a placeholder");
    Fixture f;
    f.link->DieAfter([](const Call& c) { return IsApply(c) && c.key == Key{kRows, "r4"}; });
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.crashed);
    EXPECT_FALSE(Raw(*f.w.mem, kRows, "r5").has_value());
    EXPECT_EQ(Collect(f.w), 0u);
    EXPECT_TRUE(MetaOf(*f.w.mem, kRows, "r5").gone);
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash in L5, last chunk");
    EXPECT_FALSE(s.committed);
  }
}

// ---------------------------------------------------------------------------------------------
// L5a rewrite

TEST(LargeFailure, L5a) {
  auto bump_before_apply = [](Fixture& f, Once& once) {
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsApply(c) && Key2(c) && once()) BumpR2(f.w);
      return std::nullopt;
    });
  };
  {
    SCOPED_TRACE("the chunk was stubbed meanwhile: kAborted");
    Fixture f;
    Once once, stubbed;
    bump_before_apply(f, once);
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsChunkRewrite(c) && stubbed()) {
        EXPECT_EQ(CollectNow(f.w).reversed, 1u);
      }
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kAborted) << d.status.ToString();
    ExpectSettled(f.w, WithR2Bumped(f.e), d.id, d.said, "stubbed at L5a");
  }
  {
    SCOPED_TRACE("the rewrite unavailable after the retries: rollback, kUnavailable");
    Fixture f;
    Once once;
    bump_before_apply(f, once);
    f.link->befores.push_back(Refuse(IsChunkRewrite, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    ExpectSettled(f.w, WithR2Bumped(f.e), d.id, d.said, "rewrite unavailable");
  }
  {
    SCOPED_TRACE("the rewrite's reply lost (landed): its own chunk found, committed");
    Fixture f;
    Once once;
    bump_before_apply(f, once);
    f.link->afters.push_back(LoseReply(IsChunkRewrite, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    ExpectSettled(f.w, WithR2Bumped(f.e), d.id, d.said, "rewrite lost reply");
  }
}

TEST(LargeFailure, L5a_Crash) {
  // The chunk names r2's new revision; r2 not written yet: the collector fences it there.
  Fixture f;
  Once once;
  f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
    if (IsApply(c) && Key2(c) && once()) BumpR2(f.w);
    return std::nullopt;
  });
  f.link->DieAfter(IsChunkRewrite);
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  const Revision r2 = RevisionOf(*f.w.mem, {kRows, "r2"});
  EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r2").txn, "");
  auto chunk = litetx::engine::DecodeChunk(*Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1)));
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->entries[0].rev, r2) << "the rewritten chunk names the revision read again";
  EXPECT_EQ(Collect(f.w), 0u);
  EXPECT_GT(RevisionOf(*f.w.mem, {kRows, "r2"}), r2) << "r2 not fenced at its new revision";
  Settled s = ExpectSettled(f.w, WithR2Bumped(f.e), d.id, d.said, "crash after L5a");
  EXPECT_FALSE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// L6 flip

TEST(LargeFailure, L6) {
  {
    SCOPED_TRACE("flip unavailable after the retries, no lost reply: rollback, kUnavailable");
    Fixture f;
    f.link->befores.push_back(Refuse(IsFlip, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
    ExpectSettled(f.w, f.e, d.id, d.said, "flip unavailable");
  }
  {
    SCOPED_TRACE("found aborted (claimed past the lease): kAborted");
    Fixture f;
    Once once;
    f.link->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsFlip(c) && once()) {
        EXPECT_EQ(CollectNow(f.w).reversed, 1u);
      }
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kAborted) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "claimed before the flip");
  }
  {
    SCOPED_TRACE("lost reply, landed, resolved by the re-read: OK");
    Fixture f;
    f.link->afters.push_back(LoseReply(IsFlip, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.info.settled);
    ExpectSettled(f.w, f.e, d.id, d.said, "flip lost reply resolved");
  }
}

TEST(LargeFailure, L6_LostReplyUnresolvedIsUnknown) {
  for (bool landed : {true, false}) {
    SCOPED_TRACE(landed ? "the flip landed" : "the flip never landed");
    Fixture f;
    auto lost = std::make_shared<std::atomic<bool>>(false);
    if (landed) {
      f.link->afters.push_back([lost](const Call& c, const Status& s) -> std::optional<Status> {
        if (s.ok() && IsFlip(c)) {
          lost->store(true);
          return Status::Unknown("injected lost reply");
        }
        return std::nullopt;
      });
    } else {
      f.link->befores.push_back([lost](const Call& c) -> std::optional<Status> {
        if (IsFlip(c)) {
          lost->store(true);
          return Status::Unknown("injected lost write");
        }
        return std::nullopt;
      });
    }
    // After the first lost flip reply the record cannot be read back.
    f.link->befores.push_back([lost](const Call& c) -> std::optional<Status> {
      if (*lost && c.op == Op::kGet && c.on_record()) return Status::Unavailable("injected");
      return std::nullopt;
    });
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_EQ(d.status.code(), Code::kUnknown) << d.status.ToString();
    EXPECT_EQ(d.status.txn_id(), d.id);
    // No rollback: the documents are still held, and Outcome tells.
    EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r1").txn, d.id);
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), landed ? TxnOutcome::kCommitted : TxnOutcome::kPending);
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, landed ? "unknown, landed" : "unknown, lost");
    EXPECT_EQ(s.committed, landed);
  }
}

TEST(LargeFailure, L6_Crash) {
  Fixture f;
  f.link->DieAfter(IsFlip);
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  // Committed, every document still held; reads already give the new images.
  for (const std::string& id : f.e.ids) EXPECT_EQ(MetaOf(*f.w.mem, kRows, id).txn, d.id) << id;
  EXPECT_EQ(ReadAll(*f.w.direct, f.e.ids), f.e.after);
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash after L6");
  EXPECT_TRUE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// L7 finish

TEST(LargeFailure, L7) {
  auto finish2 = [](const Call& c) { return IsRowRelease(c) && Key2(c); };
  {
    SCOPED_TRACE("finishing r2 keeps failing: OK, settled false, the collector finishes");
    Fixture f;
    f.link->befores.push_back(Refuse(finish2, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_FALSE(d.info.settled);
    EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r2").txn, d.id);
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kCommitted);
    ExpectSettled(f.w, f.e, d.id, d.said, "finish unavailable");
  }
  {
    SCOPED_TRACE("the batch write fails once: retried alone, settled");
    Fixture f;
    f.link->befores.push_back(Refuse(finish2, Code::kUnavailable, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.info.settled);
    ExpectSettled(f.w, f.e, d.id, d.said, "finish retried");
  }
  {
    SCOPED_TRACE("every finishing write and chunk erase loses its reply: harmless");
    Fixture f;
    f.link->afters.push_back(
        LoseReply([](const Call& c) { return IsRowRelease(c) || IsChunkErase(c); }));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.info.settled);
    ExpectSettled(f.w, f.e, d.id, d.said, "finish lost replies");
  }
}

TEST(LargeFailure, L7_Crash) {
  for (bool settle_in_commit : {true, false}) {
    SCOPED_TRACE(settle_in_commit ? "Commit settles" : "Commit returned OK, Settle() dies");
    Fixture f;
    // Chunk 0 finished and erased, chunk 1 partly finished (r2 yes, r3 no).
    f.link->DieAfter([](const Call& c) { return IsRowRelease(c) && Key2(c); });
    DriveOptions o;
    o.txn.settle = settle_in_commit;
    o.settle_after = !settle_in_commit;
    Drove d = Drive(f.w, f.link, f.wl, o);
    ASSERT_TRUE(d.crashed);
    EXPECT_EQ(d.said, settle_in_commit ? Said::kNothing : Said::kCommitted);
    EXPECT_FALSE(Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 0)).has_value());
    EXPECT_TRUE(Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1)).has_value());
    EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r2").txn, "");
    EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r3").txn, d.id);
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash in L7");
    EXPECT_TRUE(s.committed);
  }
}

// ---------------------------------------------------------------------------------------------
// L8 marker

TEST(LargeFailure, L8) {
  {
    SCOPED_TRACE("the marker's reply lost: the re-read finds the marker, done");
    Fixture f;
    f.link->afters.push_back(LoseReply(IsMarkerWrite, 1));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_TRUE(d.info.settled);
    EXPECT_EQ(RecordCount(*f.w.mem), 0u);
    ExpectSettled(f.w, f.e, d.id, d.said, "marker lost reply");
  }
  {
    SCOPED_TRACE("the marker keeps failing: OK, settled false, the collector writes it");
    Fixture f;
    f.link->befores.push_back(Refuse(IsMarkerWrite, Code::kUnavailable));
    Drove d = Drive(f.w, f.link, f.wl);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_FALSE(d.info.settled);
    EXPECT_EQ(RecordCount(*f.w.mem), 1u);
    EXPECT_TRUE(ScanAll(*f.w.mem, ChunksCollection()).empty()) << "every chunk finished";
    ExpectSettled(f.w, f.e, d.id, d.said, "marker unavailable");
  }
}

TEST(LargeFailure, L8_Crash) {
  Fixture f;
  f.link->DieAfter(IsMarkerWrite);
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  EXPECT_EQ(RecordCount(*f.w.mem), 0u);
  EXPECT_EQ(MarkerCount(*f.w.mem), 1u);
  f.w.clock->Advance(130s);
  Collector gc(f.w.mem, f.w.Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().finished + gc.stats().reversed, 0u) << "nothing left to settle";
  EXPECT_EQ(MarkerCount(*f.w.mem), 1u) << "kept for the outcome retention";
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash after L8");
  EXPECT_TRUE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// R rollback

// The workload with a last action that fails on its document (an update of a missing row, tag
// 7): Commit reports kNotFound after the rollback.
Workload FailingAtTheEnd() {
  Workload wl = Mixed(6);
  wl.acts.push_back(Act{Kind::kUpdate, "missing", 0});
  return wl;
}

TEST(LargeFailure, R) {
  {
    SCOPED_TRACE("reversal writes fail for a while: retried with backoff until they land");
    Fixture f;
    f.wl = FailingAtTheEnd();
    f.link->befores.push_back(Refuse(IsRowRelease, Code::kUnavailable, 9));
    const std::int64_t t0 = f.w.clock->MonotonicMicros();
    Drove d = Drive(f.w, f.link, f.wl);
    EXPECT_EQ(d.status.code(), Code::kNotFound) << d.status.ToString();
    EXPECT_NE(d.status.message().find("action 7 "), std::string::npos) << d.status.ToString();
    // Completed by the coordinator itself, after backing off (100 ms doubling) on the clock.
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
    EXPECT_EQ(RecordCount(*f.w.mem), 0u);
    EXPECT_GE(f.w.clock->MonotonicMicros() - t0, 700'000);
    ExpectSettled(f.w, f.e, d.id, d.said, "rollback retried");
  }
  {
    SCOPED_TRACE("reversal of r2 fails for good, rollback_timeout 2 s: left to the collector");
    Fixture f;
    f.wl = FailingAtTheEnd();
    f.link->befores.push_back(
        Refuse([](const Call& c) { return IsRowRelease(c) && Key2(c); }, Code::kUnavailable));
    litetx::Options o = f.w.Opts();
    o.rollback_timeout = 2s;
    Drove d = Drive(f.w, f.link, f.wl, {}, o);
    EXPECT_EQ(d.status.code(), Code::kNotFound) << d.status.ToString();
    auto rec = RecordOf(*f.w.mem, d.id);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->state, TxnState::kAborted);
    EXPECT_FALSE(rec->done);
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
    ExpectSettled(f.w, f.e, d.id, d.said, "rollback gave up");
  }
  {
    SCOPED_TRACE("explicit Rollback() that gives up reports the error");
    Fixture f;
    f.link->befores.push_back(
        Refuse([](const Call& c) { return IsRowRelease(c) && Key2(c); }, Code::kUnavailable));
    litetx::Options o = f.w.Opts();
    o.rollback_timeout = 2s;
    DriveOptions dopt;
    dopt.rollback_instead = true;
    Drove d = Drive(f.w, f.link, f.wl, dopt, o);
    EXPECT_EQ(d.status.code(), Code::kUnavailable) << d.status.ToString();
    ExpectSettled(f.w, f.e, d.id, d.said, "Rollback gave up");
  }
}

TEST(LargeFailure, R_Crash) {
  // Rolling back: chunk 0 reversed and stubbed, r2 of chunk 1 reversed, then the process dies.
  Fixture f;
  f.wl = FailingAtTheEnd();
  auto aborted = std::make_shared<std::atomic<bool>>(false);
  f.link->afters.push_back([aborted](const Call& c, const Status&) -> std::optional<Status> {
    if (IsAbort(c)) aborted->store(true);
    return std::nullopt;
  });
  f.link->DieAfter([aborted](const Call& c) { return *aborted && IsRowRelease(c) && Key2(c); });
  Drove d = Drive(f.w, f.link, f.wl);
  ASSERT_TRUE(d.crashed);
  auto rec = RecordOf(*f.w.mem, d.id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kAborted);
  EXPECT_FALSE(rec->done);
  EXPECT_TRUE(Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 0))->contains("fence"));
  EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r3").txn, d.id);
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "crash in R");
  EXPECT_FALSE(s.committed);
}

// ---------------------------------------------------------------------------------------------
// Collector rows. The coordinator died after applying chunk 1 (r2, r3 held; chunk 2 never
// started), or after its flip (committed, every row held).

Drove Abandon(Fixture& f, bool committed) {
  f.link->DieAfter(committed ? std::function<bool(const Call&)>(IsFlip) : [](const Call& c) {
    return IsApply(c) && c.key == Key{kRows, "r3"};
  });
  Drove d = Drive(f.w, f.link, f.wl);
  EXPECT_TRUE(d.crashed);
  return d;
}

TEST(LargeFailure, C1) {
  {
    SCOPED_TRACE("the claim meets a conflict: the record is read again and claimed");
    Fixture f;
    Drove d = Abandon(f, false);
    auto gl = std::make_shared<Link>(f.w.mem);
    gl->befores.push_back(Refuse(IsAbort, Code::kConflict, 1));
    f.w.clock->Advance(130s);
    Collector gc(gl, f.w.Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().reversed, 1u);
    EXPECT_EQ(gc.stats().failed, 0u);
    EXPECT_EQ(gl->calls(Op::kReplace, TxnKey(d.id)), 3) << "claim, claim again, marker";
    ExpectSettled(f.w, f.e, d.id, d.said, "claim conflict");
  }
  {
    SCOPED_TRACE("the claim loses to the coordinator's next count: not stale, it commits");
    Fixture f;
    Database db(f.link, f.w.Opts());
    auto t = db.BeginLarge(Chunked(2));
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(AddAct(**t, f.wl.acts[i], i + 1).ok());
    auto gl = std::make_shared<Link>(f.w.mem);
    Once once;
    gl->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsAbort(c) && once()) {
        // The coordinator wakes first: its next chunk counts it and pushes the lease out.
        EXPECT_TRUE(AddAct(**t, f.wl.acts[4], 5).ok());
        EXPECT_TRUE(AddAct(**t, f.wl.acts[5], 6).ok());
      }
      return std::nullopt;
    });
    f.w.clock->Advance(130s);
    Collector gc(gl, f.w.Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().reversed, 0u);
    auto info = (*t)->Commit();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    const std::string id = (*t)->id();
    t->reset();
    ExpectSettled(f.w, f.e, id, Said::kCommitted, "claim lost to the coordinator");
  }
}

TEST(LargeFailure, C1_Crash) {
  Fixture f;
  Drove d = Abandon(f, false);
  auto gl = std::make_shared<Link>(f.w.mem);
  gl->DieAfter(IsAbort);
  f.w.clock->Advance(130s);
  Collector dying(gl, f.w.Gc("gc-dies"));
  EXPECT_THROW((void)dying.RunOnce(), SimulatedCrash);
  // An aborted record, nothing reversed: reads give the images before.
  EXPECT_EQ(RecordOf(*f.w.mem, d.id)->state, TxnState::kAborted);
  EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r2").txn, d.id);
  Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "collector died after its claim");
  EXPECT_FALSE(s.committed);
}

TEST(LargeFailure, C2) {
  for (bool committed : {false, true}) {
    SCOPED_TRACE(committed ? "committed" : "aborted");
    {
      SCOPED_TRACE("a row keeps failing: the record is left for the next run");
      Fixture f;
      Drove d = Abandon(f, committed);
      auto gl = std::make_shared<Link>(f.w.mem);
      gl->befores.push_back(Refuse(
          [](const Call& c) {
            return IsRowRelease(c) && c.key == Key{kRows, "r3"};
          },
          Code::kUnavailable));
      f.w.clock->Advance(130s);
      Collector gc(gl, f.w.Gc());
      EXPECT_EQ(gc.RunOnce().code(), Code::kUnavailable);
      EXPECT_EQ(gc.stats().failed, 1u);
      EXPECT_EQ(RecordCount(*f.w.mem), 1u);
      EXPECT_EQ(MetaOf(*f.w.mem, kRows, "r3").txn, d.id);
      ExpectSettled(f.w, f.e, d.id, d.said, "collector chunk unavailable");
    }
    {
      SCOPED_TRACE("a batch write failing once: retried alone in the same run");
      Fixture f;
      Drove d = Abandon(f, committed);
      auto gl = std::make_shared<Link>(f.w.mem);
      gl->befores.push_back(Refuse(
          [](const Call& c) {
            return IsRowRelease(c) && c.key == Key{kRows, "r3"};
          },
          Code::kUnavailable, 1));
      f.w.clock->Advance(130s);
      Collector gc(gl, f.w.Gc());
      ASSERT_TRUE(gc.RunOnce().ok());
      EXPECT_EQ(gc.stats().failed, 0u);
      EXPECT_EQ(RecordCount(*f.w.mem), 0u);
      ExpectSettled(f.w, f.e, d.id, d.said, "collector chunk retried");
    }
  }
}

TEST(LargeFailure, C2_Crash) {
  for (bool committed : {false, true}) {
    for (bool at_once : {false, true}) {
      SCOPED_TRACE(std::string(committed ? "committed" : "aborted") +
                   (at_once ? ", another collector at once" : ", the next run"));
      Fixture f;
      Drove d = Abandon(f, committed);
      // The collector dies after settling r2 (chunk 1 partly settled).
      auto gl = std::make_shared<Link>(f.w.mem);
      gl->DieAfter([](const Call& c) { return IsRowRelease(c) && Key2(c); });
      f.w.clock->Advance(130s);
      if (at_once) {
        // Two collectors start together; the one that dies may die midway (or find the work
        // done by the other first).
        Collector dying(gl, f.w.Gc("gc-dies"));
        Collector other(f.w.mem, f.w.Gc("gc-other"));
        Async a([&] {
          try {
            (void)dying.RunOnce();
          } catch (const SimulatedCrash&) {
          }
        });
        Async b([&] { (void)other.RunOnce(); });
        ASSERT_TRUE(a.Wait(10s));
        ASSERT_TRUE(b.Wait(10s));
        EXPECT_EQ(other.stats().failed, 0u);
      } else {
        Collector dying(gl, f.w.Gc("gc-dies"));
        EXPECT_THROW((void)dying.RunOnce(), SimulatedCrash);
        EXPECT_EQ(RecordCount(*f.w.mem), 1u);
      }
      Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "collector died in a chunk");
      EXPECT_EQ(s.committed, committed);
    }
  }
}

TEST(LargeFailure, C3) {
  for (bool committed : {false, true}) {
    SCOPED_TRACE(committed ? "committed: the erase conflicts" : "aborted: the stub conflicts");
    Fixture f;
    Drove d = Abandon(f, committed);
    const Key chunk1 = litetx::engine::ChunkKey(d.id, 1);
    auto gl = std::make_shared<Link>(f.w.mem);
    Once once;
    gl->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (c.key == chunk1 && (c.op == Op::kErase || IsStubWrite(c)) && once()) {
        // The chunk is rewritten under the collector (as its coordinator's L5a would).
        auto g = f.w.mem->Get(chunk1);
        EXPECT_TRUE(g.ok() && g->has_value());
        EXPECT_TRUE(f.w.mem->Replace(chunk1, (*g)->revision, (*g)->value).ok());
      }
      return std::nullopt;
    });
    f.w.clock->Advance(130s);
    Collector gc(gl, f.w.Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().failed, 0u);
    EXPECT_EQ(gc.stats().finished + gc.stats().reversed, 1u);
    // The chunk was read again and settled: two reads of it at least.
    EXPECT_GE(gl->calls(Op::kGet, chunk1), 2);
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "chunk conflict");
    EXPECT_EQ(s.committed, committed);
  }
  {
    SCOPED_TRACE("another collector settled the chunk first");
    Fixture f;
    Drove d = Abandon(f, false);
    auto gl = std::make_shared<Link>(f.w.mem);
    Once once;
    gl->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsStubWrite(c) && once()) {
        EXPECT_EQ(CollectNow(f.w, "gc-first").reversed, 1u);
      }
      return std::nullopt;
    });
    f.w.clock->Advance(130s);
    Collector gc(gl, f.w.Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().failed, 0u);
    ExpectSettled(f.w, f.e, d.id, d.said, "settled by another");
  }
}

TEST(LargeFailure, C3_Crash) {
  for (bool committed : {false, true}) {
    SCOPED_TRACE(committed ? "dies after erasing chunk 1" : "dies after stubbing chunk 1");
    Fixture f;
    Drove d = Abandon(f, committed);
    const Key chunk1 = litetx::engine::ChunkKey(d.id, 1);
    auto gl = std::make_shared<Link>(f.w.mem);
    gl->DieAfter([chunk1](const Call& c) { return c.key == chunk1; });
    f.w.clock->Advance(130s);
    Collector dying(gl, f.w.Gc("gc-dies"));
    EXPECT_THROW((void)dying.RunOnce(), SimulatedCrash);
    EXPECT_EQ(RecordCount(*f.w.mem), 1u);
    Settled s = ExpectSettled(f.w, f.e, d.id, d.said, "collector died after a chunk");
    EXPECT_EQ(s.committed, committed);
  }
}

TEST(LargeFailure, C4) {
  {
    SCOPED_TRACE("the marker meets another repairer's marker: done");
    Fixture f;
    Drove d = Abandon(f, false);
    auto gl = std::make_shared<Link>(f.w.mem);
    Once once;
    gl->befores.push_back([&](const Call& c) -> std::optional<Status> {
      if (IsMarkerWrite(c) && once()) {
        EXPECT_EQ(CollectNow(f.w, "gc-first").reversed, 1u);
      }
      return std::nullopt;
    });
    f.w.clock->Advance(130s);
    Collector gc(gl, f.w.Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(gc.stats().failed, 0u);
    EXPECT_EQ(RecordCount(*f.w.mem), 0u);
    ExpectSettled(f.w, f.e, d.id, d.said, "marker conflict");
  }
  {
    SCOPED_TRACE("the purge fails on a stub: the marker is kept, the next purge ends it");
    Fixture f;
    Drove d = Abandon(f, false);
    EXPECT_EQ(Collect(f.w), 0u);
    f.w.clock->Advance(25h);
    auto gl = std::make_shared<Link>(f.w.mem);
    gl->befores.push_back(Refuse(
        [&](const Call& c) {
          return IsChunkErase(c) && c.key == litetx::engine::ChunkKey(d.id, 1);
        },
        Code::kUnavailable));
    Collector gc(gl, f.w.Gc());
    EXPECT_FALSE(gc.RunOnce().ok());
    EXPECT_EQ(MarkerCount(*f.w.mem), 1u);
    EXPECT_FALSE(Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 0)).has_value());
    EXPECT_TRUE(Raw(*f.w.mem, litetx::engine::ChunkKey(d.id, 1)).has_value());
    EXPECT_EQ(OutcomeOf(*f.w.direct, d.id), TxnOutcome::kAborted);
    ExpectSettled(f.w, f.e, d.id, d.said, "purge failed");
  }
}

TEST(LargeFailure, C4_Crash) {
  for (bool in_purge : {false, true}) {
    SCOPED_TRACE(in_purge ? "dies after erasing the first stub" : "dies after the marker");
    Fixture f;
    Drove d = Abandon(f, false);
    auto gl = std::make_shared<Link>(f.w.mem);
    if (in_purge) {
      EXPECT_EQ(Collect(f.w), 0u);
      f.w.clock->Advance(25h);
      gl->DieAfter(IsChunkErase);
    } else {
      f.w.clock->Advance(130s);
      gl->DieAfter(IsMarkerWrite);
    }
    Collector dying(gl, f.w.Gc("gc-dies"));
    EXPECT_THROW((void)dying.RunOnce(), SimulatedCrash);
    EXPECT_EQ(MarkerCount(*f.w.mem), 1u);
    if (in_purge) {
      EXPECT_EQ(ChunksOf(*f.w.mem, d.id).size(), 1u) << "one stub erased, one left";
    }
    ExpectSettled(f.w, f.e, d.id, d.said, "collector died in C4");
  }
}

}  // namespace
}  // namespace ltxtest::large
