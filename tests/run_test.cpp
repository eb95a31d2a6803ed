// tests/run_test.cpp — Database::Run and TxnContext: read-your-writes, how buffered writes
// become actions, re-running on contention, hooks (before_commit with every attempt that
// reaches its commit, after_commit and after_rollback once per logical transaction), optimistic
// locking, serializable checks, and every way a run ends.
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::CommitInfo;
using litetx::DocumentState;
using litetx::RunOptions;
using litetx::Transaction;
using litetx::TxnContext;

class RunTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    db = Direct();
    other = Direct();
    MustCommit(*db, Transaction()
                        .Insert("acct", "alice", {{"balance", 100}})
                        .Insert("acct", "bob", {{"balance", 50}}));
  }
  std::int64_t Balance(std::string_view id) {
    auto r = db->Read("acct", id);
    EXPECT_TRUE(r.ok() && r->state == DocumentState::kFound);
    return r.ok() ? r->doc.at("balance").as_int64() : -1;
  }
  std::unique_ptr<litetx::Database> db, other;  // `other` plays a concurrent writer
};

Status Transfer(TxnContext& tx, std::int64_t amount) {
  auto from = tx.Get("acct", "alice");
  if (!from.ok()) return from.status();
  if (from->doc.at("balance").as_int64() < amount) return Status::FailedPrecondition("funds");
  if (Status s = tx.Adjust("acct", "alice", {{"balance", -amount}}); !s.ok()) return s;
  return tx.Adjust("acct", "bob", {{"balance", amount}});
}

TEST_F(RunTest, CommitsAndReadsItsOwnWrites) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    if (Status s = tx.Insert("c", "n", {{"a", 1}}); !s.ok()) return s;
    if (Status s = tx.Adjust("c", "n", {{"a", 41}}); !s.ok()) return s;
    if (Status s = tx.Update("c", "n", {{"b", "x"}}); !s.ok()) return s;
    auto seen = tx.Get("c", "n");
    EXPECT_TRUE(seen.ok());
    EXPECT_EQ(seen->state, DocumentState::kFound);
    EXPECT_EQ(seen->doc, Obj(R"({"a":42,"b":"x"})"));
    EXPECT_EQ(db->Read("c", "n")->state, DocumentState::kNotFound);  // nothing written yet
    return Transfer(tx, 30);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->versions.size(), 3u);  // one action per document
  EXPECT_EQ(ReadImage(*db, "c", "n"), Found(V(1), Obj(R"({"a":42,"b":"x"})")));
  EXPECT_EQ(Balance("alice"), 70);
  EXPECT_EQ(Balance("bob"), 80);
  ExpectClean(*mem, {"acct", "c"});
}

TEST_F(RunTest, WritesCombineIntoOneActionPerDocument) {
  MustCommit(*db, Transaction().Insert("c", "gone", {{"x", 1}}));
  auto r = db->Run([&](TxnContext& tx) -> Status {
    if (Status s = tx.Insert("c", "tmp", {{"t", 1}}); !s.ok()) return s;
    if (Status s = tx.Delete("c", "tmp"); !s.ok()) return s;        // never written
    if (Status s = tx.Update("c", "gone", {{"x", 2}}); !s.ok()) return s;
    if (Status s = tx.Delete("c", "gone"); !s.ok()) return s;       // one delete
    if (Status s = tx.Adjust("c", "gone", {{"x", 1}}); s.code() != Code::kDeleted) {
      return Status::Corruption("adjust of a deleted document: " + s.ToString());
    }
    EXPECT_EQ(tx.Get("c", "gone")->state, DocumentState::kDeleted);
    return tx.Insert("c", "gone", {{"again", true}});               // insert over it: update
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, "c", "tmp"), NotFoundImage());
  EXPECT_FALSE(Raw(*mem, "c", "tmp").has_value());  // never stored
  EXPECT_EQ(ReadImage(*db, "c", "gone"), Found(V(2), Obj(R"({"again":true})")));
}

TEST_F(RunTest, ReadThenWrittenDocumentIsRerunWhenItChanged) {
  // Without the written-document cache the first attempt's commit reads alice, finds her
  // version changed and fails before writing anything, so the versions below are exact. (With
  // it, see the next test, the change is found at alice's apply, after bob and the audit
  // document were held; their rollback moves their versions on.)
  litetx::Options no_cache = Opts();
  no_cache.written_cache_bytes = 0;
  db = std::make_unique<litetx::Database>(mem, no_cache);
  int runs = 0, before = 0, after = 0, rolled = 0;
  RunOptions o;
  o.hooks.before_commit = [&](TxnContext& tx) {
    ++before;
    return tx.Insert("audit", "t1", {{"what", "transfer"}});  // made again on the re-run
  };
  o.hooks.after_commit = [&](const CommitInfo& info) { ++after; EXPECT_EQ(info.attempts, 2); };
  o.hooks.after_rollback = [&](const Status&) { ++rolled; };
  std::vector<std::string> ids;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    ids.push_back(tx.txn_id());
    EXPECT_EQ(tx.attempt(), runs);
    Status s = Transfer(tx, 10);
    if (runs == 1) MustCommit(*other, Transaction().Adjust("acct", "alice", {{"balance", 1}}));
    return s;
  }, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);                          // each attempt has its own record...
  EXPECT_EQ(ids[0].substr(0, 16), ids[1].substr(0, 16));  // ...and the same wait-die tie-break
  EXPECT_EQ(r->txn_id, ids[1]);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(before, 2);  // with each attempt
  EXPECT_EQ(after, 1);   // once
  EXPECT_EQ(rolled, 0);
  EXPECT_EQ(Balance("alice"), 91);  // the concurrent +1 is not lost
  EXPECT_EQ(Balance("bob"), 60);
  // Inserted by the second attempt's commit, after the re-run's backoff (which may have moved
  // the clock on).
  EXPECT_EQ(ReadImage(*db, "audit", "t1"), Found(FirstVersionAt(*clock), Obj(R"({"what":"transfer"})")));
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{V(3), V(2), FirstVersionAt(*clock)}));
}

// The same with the written-document cache (db wrote alice and bob in SetUp): the first
// attempt's commit evaluates alice on the image db wrote, and its compare-and-swap finds her
// changed; the attempt is rolled back and run again, and nothing is lost or doubled.
TEST_F(RunTest, ReadThenWrittenDocumentIsRerunWhenItChangedBehindTheCache) {
  int runs = 0;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    Status s = Transfer(tx, 10);
    if (runs == 1) MustCommit(*other, Transaction().Adjust("acct", "alice", {{"balance", 1}}));
    return s;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(Balance("alice"), 91);  // the concurrent +1 is not lost
  EXPECT_EQ(Balance("bob"), 60);
  db->Flush();
  ExpectClean(*mem, {"acct"});
}

TEST_F(RunTest, BeforeCommitReadsAgainOnEveryAttemptSoItsUpdateIsNotLost) {
  // The hook counts the transaction: it reads a counter and writes what it read plus one.
  // Another transaction adds 10 after the first attempt's hook ran and before its commit, so
  // that attempt fails kConflict. The second attempt's hook must read 10 and write 11.
  MustCommit(*db, Transaction().Insert("stats", "counter", {{"n", 0}}));
  int runs = 0, hooks = 0, after = 0, rolled = 0;
  std::vector<std::int64_t> seen;
  RunOptions o;
  o.hooks.before_commit = [&](TxnContext& tx) -> Status {
    ++hooks;
    EXPECT_EQ(tx.attempt(), runs);  // right after this attempt's callback
    auto c = tx.Get("stats", "counter");
    if (!c.ok()) return c.status();
    const std::int64_t n = c->doc.at("n").as_int64();
    seen.push_back(n);
    if (Status s = tx.Update("stats", "counter", {{"n", n + 1}}); !s.ok()) return s;
    if (tx.attempt() == 1) {
      MustCommit(*other, Transaction().Adjust("stats", "counter", {{"n", 10}}));
    }
    return Status::Ok();
  };
  o.hooks.after_commit = [&](const CommitInfo&) { ++after; };
  o.hooks.after_rollback = [&](const Status&) { ++rolled; };
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    return tx.Adjust("acct", "bob", {{"balance", 1}});
  }, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(hooks, 2);  // before every attempt's commit
  EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 10}));
  EXPECT_EQ(after, 1);  // once per logical transaction
  EXPECT_EQ(rolled, 0);
  EXPECT_EQ(ReadImage(*db, "stats", "counter"), Found(V(3), Obj(R"({"n":11})")));
  EXPECT_EQ(Balance("bob"), 51);
}

TEST_F(RunTest, GivesUpAfterMaxAttemptsWithTheLastStatus) {
  int runs = 0, rolled = 0, after = 0;
  RunOptions o;
  o.max_attempts = 3;
  o.hooks.after_rollback = [&](const Status& s) { ++rolled; EXPECT_EQ(s.code(), Code::kConflict); };
  o.hooks.after_commit = [&](const CommitInfo&) { ++after; };
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    Status s = Transfer(tx, 10);
    MustCommit(*other, Transaction().Adjust("acct", "alice", {{"balance", 1}}));
    return s;
  }, o);
  EXPECT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(rolled, 1);
  EXPECT_EQ(after, 0);
  EXPECT_EQ(Balance("alice"), 103);
  EXPECT_EQ(Balance("bob"), 50);
  ExpectClean(*mem, {"acct"});
}

TEST_F(RunTest, GivesUpAtTheTimeout) {
  RunOptions o;
  o.timeout = 200ms;
  int runs = 0;
  auto r = db->Run([&](TxnContext&) -> Status {
    ++runs;
    clock->Advance(60ms);
    return Status::Busy("always");
  }, o);
  EXPECT_EQ(r.code(), Code::kBusy);
  EXPECT_GE(runs, 2);
  EXPECT_LE(runs, 4);
}

TEST_F(RunTest, CallbackErrorEndsTheRunAndWritesNothing) {
  int runs = 0, rolled = 0;
  RunOptions o;
  o.hooks.after_rollback = [&](const Status& s) {
    ++rolled;
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  };
  Dump before = DumpStore(*mem, {"acct"});
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    if (Status s = tx.Adjust("acct", "bob", {{"balance", 5}}); !s.ok()) return s;
    return Transfer(tx, 1000);  // not enough funds
  }, o);
  EXPECT_EQ(r.code(), Code::kFailedPrecondition);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(rolled, 1);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"acct"})));
}

TEST_F(RunTest, BeforeCommitCanVetoAndBadInputIsRejectedAtTheCall) {
  RunOptions o;
  o.hooks.before_commit = [](TxnContext&) { return Status::InvalidArgument("vetoed"); };
  Dump before = DumpStore(*mem, {"acct"});
  auto r = db->Run([&](TxnContext& tx) -> Status {
    EXPECT_EQ(tx.Insert("c", "x", {{"_ltx", 1}}).code(), Code::kInvalidArgument);
    EXPECT_EQ(tx.Get("", "x").code(), Code::kInvalidArgument);
    EXPECT_EQ(tx.Adjust("acct", "bob", {{"balance", "x"}}).code(), Code::kInvalidArgument);
    EXPECT_EQ(tx.Adjust("acct", "bob", {{"nope", 1}}).code(), Code::kFailedPrecondition);
    EXPECT_EQ(tx.Update("acct", "nobody", {{"a", 1}}).code(), Code::kNotFound);
    EXPECT_EQ(tx.Insert("acct", "bob", {{"a", 1}}).code(), Code::kConflict);
    return tx.Adjust("acct", "bob", {{"balance", 1}});
  }, o);
  EXPECT_EQ(r.code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "vetoed");
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"acct"})));
}

TEST_F(RunTest, BeforeCommitStatusIsHandledLikeTheCallbacks) {
  // A retryable status from the hook runs the attempt again; the failed attempt wrote nothing.
  int runs = 0, rolled = 0;
  RunOptions o;
  o.hooks.before_commit = [&](TxnContext& tx) -> Status {
    if (Status s = tx.Adjust("acct", "alice", {{"balance", -1}}); !s.ok()) return s;
    return tx.attempt() == 1 ? Status::Busy("not now") : Status::Ok();
  };
  o.hooks.after_rollback = [&](const Status&) { ++rolled; };
  auto r = db->Run([&](TxnContext& tx) {
    ++runs;
    return tx.Adjust("acct", "bob", {{"balance", 1}});
  }, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(rolled, 0);
  EXPECT_EQ(Balance("alice"), 99);
  EXPECT_EQ(Balance("bob"), 51);
}

TEST_F(RunTest, OptimisticLockReportsTheCurrentVersionAndIsNotRerun) {
  int runs = 0;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    auto doc = tx.Get("acct", "alice", /*expected_version=*/7);
    return doc.status();
  });
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(r.status().current_version(), V(1));
  EXPECT_EQ(runs, 1);  // a version pinned by the caller will not come back by re-running

  runs = 0;  // likewise an insert over a live document
  r = db->Run([&](TxnContext& tx) { ++runs; return tx.Insert("acct", "bob", {{"balance", 1}}); });
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(runs, 1);

  // Checked again at commit: someone changes it after the lock.
  runs = 0;
  r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    if (Status s = tx.LockOptimistic("acct", "alice", V(1)); !s.ok()) return s;
    if (runs == 1) MustCommit(*other, Transaction().Adjust("acct", "alice", {{"balance", 1}}));
    return tx.Adjust("acct", "bob", {{"balance", 1}});
  });
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(r.status().current_version(), V(2));
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(Balance("bob"), 50);
}

TEST_F(RunTest, SerializableChecksWhatWasReadButNotWritten) {
  for (bool serializable : {false, true}) {
    SCOPED_TRACE(serializable);
    int runs = 0;
    RunOptions o;
    o.serializable = serializable;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      ++runs;
      auto a = tx.Get("acct", "alice");  // read only
      if (!a.ok()) return a.status();
      if (runs == 1) MustCommit(*other, Transaction().Adjust("acct", "alice", {{"balance", -1}}));
      return tx.Update("acct", "bob", {{"seen", a->doc.at("balance")}});
    }, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(runs, serializable ? 2 : 1);
    auto bob = db->Read("acct", "bob");
    auto alice = db->Read("acct", "alice");
    if (serializable) {
      EXPECT_EQ(bob->doc.at("seen"), alice->doc.at("balance"));
    }
  }
}

TEST_F(RunTest, ReadOnlyRunWritesNothing) {
  auto counting = std::make_shared<litetx::CountingStore>(mem);
  litetx::Database cdb(counting, Opts());
  RunOptions o;
  o.serializable = true;  // one check, no write
  auto r = cdb.Run([&](TxnContext& tx) { return tx.Get("acct", "alice").status(); }, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(counting->counts().writes(), 0u);
  r = cdb.Run([&](TxnContext&) { return Status::Ok(); });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->versions.empty());
}

TEST_F(RunTest, UnknownOutcomeIsReturnedAtOnceNeverRerun) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->after = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.on_record() && s.ok()) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kGet && c.on_record()) return Status::Unavailable("down");
    return std::nullopt;
  };
  litetx::Database hdb(hook, Opts());
  int runs = 0, rolled = 0;
  RunOptions o;
  o.hooks.after_rollback = [&](const Status&) { ++rolled; };
  auto r = hdb.Run([&](TxnContext& tx) { ++runs; return Transfer(tx, 5); }, o);
  EXPECT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  EXPECT_FALSE(r.status().txn_id().empty());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(rolled, 0);
  EXPECT_EQ(db->Outcome(r.status().txn_id()).value(), litetx::TxnOutcome::kCommitted);
}

}  // namespace
}  // namespace ltxtest
