// tests/savepoint_test.cpp — TxnContext::Nested: nested scopes (savepoints) of a Database::Run
// transaction. A scope that fails undoes its own buffered writes, pinned versions and recorded
// reads, and the transaction goes on; a scope that succeeds commits only with the transaction.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::CommitInfo;
using litetx::DocumentState;
using litetx::RunOptions;
using litetx::Transaction;
using litetx::TxnContext;

// Returns from the enclosing function with `expr`'s status if it is not OK.
#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    if (Status s_ = (expr); !s_.ok()) return s_; \
  } while (false)

class SavepointTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    db = Direct();
    other = Direct();
    MustCommit(*db, Transaction()
                        .Insert("acct", "alice", {{"balance", 100}})
                        .Insert("acct", "bob", {{"balance", 50}})
                        .Insert("acct", "carol", {{"balance", 10}})
                        .Insert("acct", "dave", {{"balance", 1}}));
  }
  // The document as the transaction sees it.
  static Image Seen(TxnContext& tx, std::string_view c, std::string_view id) {
    auto r = tx.Get(c, id);
    EXPECT_TRUE(r.ok()) << c << "/" << id << ": " << r.status().ToString();
    return r.ok() ? ImageOf(*r) : Image{};
  }
  std::unique_ptr<litetx::Database> db, other;  // `other` plays a concurrent writer
};

TEST_F(SavepointTest, FailedScopeUndoesEveryWriteKindAndTheOuterWritesCommit) {
  Status inner;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Adjust("acct", "alice", {{"balance", -10}}));  // before the scope
    inner = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Insert("c", "new", {{"a", 1}}));
      RETURN_IF_ERROR(in.Update("acct", "bob", {{"x", 1}}));
      RETURN_IF_ERROR(in.Adjust("acct", "carol", {{"balance", 5}}));
      RETURN_IF_ERROR(in.Delete("acct", "dave"));
      RETURN_IF_ERROR(in.Adjust("acct", "alice", {{"balance", -1}}));
      // The scope sees its own writes.
      EXPECT_EQ(Seen(in, "c", "new"), Found(0, Obj(R"({"a":1})")));
      EXPECT_EQ(Seen(in, "acct", "dave"), DeletedImage(V(1)));
      return Status::FailedPrecondition("the step fails");
    });
    // After the undo: the image from before the scope.
    EXPECT_EQ(Seen(tx, "c", "new"), NotFoundImage());
    EXPECT_EQ(Seen(tx, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
    EXPECT_EQ(Seen(tx, "acct", "carol"), Found(V(1), Obj(R"({"balance":10})")));
    EXPECT_EQ(Seen(tx, "acct", "dave"), Found(V(1), Obj(R"({"balance":1})")));
    EXPECT_EQ(Seen(tx, "acct", "alice"), Found(V(1), Obj(R"({"balance":90})")));
    return tx.Insert("c", "after", {{"b", 2}});  // after the scope
  });
  EXPECT_EQ(inner.code(), Code::kFailedPrecondition);
  EXPECT_EQ(inner.message(), "the step fails");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 1);
  // The outer writes' actions only: acct/alice and c/after (documents only read are not
  // checked without RunOptions::serializable).
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{V(2), V(1)}));
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":90})")));
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
  EXPECT_EQ(ReadImage(*db, "acct", "carol"), Found(V(1), Obj(R"({"balance":10})")));
  EXPECT_EQ(ReadImage(*db, "acct", "dave"), Found(V(1), Obj(R"({"balance":1})")));
  EXPECT_EQ(ReadImage(*db, "c", "after"), Found(V(1), Obj(R"({"b":2})")));
  EXPECT_EQ(ReadImage(*db, "c", "new"), NotFoundImage());
  EXPECT_FALSE(Raw(*mem, "c", "new").has_value());  // never stored
  ExpectClean(*mem, {"acct", "c"});
}

TEST_F(SavepointTest, FailedScopeLeavesOnlyTheOuterWritesInTheCommit) {
  // Without reads after the scope, the commit has exactly the outer writes' actions.
  auto r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Adjust("acct", "alice", {{"balance", -10}}));
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Insert("c", "new", {{"a", 1}}));
      RETURN_IF_ERROR(in.Delete("acct", "bob"));
      return Status::Aborted("undo");
    });
    EXPECT_EQ(s.code(), Code::kAborted);
    return tx.Adjust("acct", "carol", {{"balance", 1}});
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 1);  // the scope's kAborted does not re-run the attempt
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{V(2), V(2)}));  // alice, carol
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
  EXPECT_EQ(ReadImage(*db, "acct", "carol"), Found(V(2), Obj(R"({"balance":11})")));
  EXPECT_FALSE(Raw(*mem, "c", "new").has_value());
}

TEST_F(SavepointTest, SucceededScopeCommitsWithTheOuterTransactionOnly) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Adjust("acct", "bob", {{"balance", 5}}));
      return in.Insert("c", "n", {{"a", 1}});
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Seen(tx, "acct", "bob"), Found(V(1), Obj(R"({"balance":55})")));
    return tx.Adjust("acct", "alice", {{"balance", -5}});
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions.size(), 3u);
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(2), Obj(R"({"balance":55})")));
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":95})")));
  EXPECT_EQ(ReadImage(*db, "c", "n"), Found(V(1), Obj(R"({"a":1})")));

  // The scope succeeds, the outer callback then fails: nothing commits.
  int runs = 0;
  r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Adjust("acct", "bob", {{"balance", 7}}));
      return in.Insert("c", "m", {{"a", 2}});
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return Status::FailedPrecondition("the outer step fails");
  });
  EXPECT_EQ(r.code(), Code::kFailedPrecondition);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(2), Obj(R"({"balance":55})")));
  EXPECT_EQ(ReadImage(*db, "c", "m"), NotFoundImage());
  EXPECT_FALSE(Raw(*mem, "c", "m").has_value());
}

TEST_F(SavepointTest, SameDocumentWrittenBeforeInsideAndAfterAnUndoneScope) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Update("acct", "alice", {{"a", 1}}));
    EXPECT_EQ(Seen(tx, "acct", "bob").state, DocumentState::kFound);  // read before
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Update("acct", "alice", {{"b", 2}}, {"a"}));
      RETURN_IF_ERROR(in.Adjust("acct", "alice", {{"balance", 1000}}));
      RETURN_IF_ERROR(in.Delete("acct", "bob"));
      RETURN_IF_ERROR(in.Insert("acct", "bob", {{"reborn", true}}));
      return Status::FailedPrecondition("undo");
    });
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    EXPECT_EQ(Seen(tx, "acct", "alice"), Found(V(1), Obj(R"({"balance":100,"a":1})")));
    EXPECT_EQ(Seen(tx, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
    RETURN_IF_ERROR(tx.Adjust("acct", "alice", {{"balance", 1}}));
    RETURN_IF_ERROR(tx.Update("acct", "alice", {{"c", 3}}));
    return tx.Adjust("acct", "bob", {{"balance", 1}});
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":101,"a":1,"c":3})")));
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(2), Obj(R"({"balance":51})")));
}

TEST_F(SavepointTest, ThreeDeepTheMiddleScopeUndoesTheInnerSuccessWithIt) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Adjust("acct", "alice", {{"balance", -1}}));
    // Middle fails after an inner scope that succeeded; both wrote bob.
    Status middle = tx.Nested([&](TxnContext& m) -> Status {
      RETURN_IF_ERROR(m.Adjust("acct", "bob", {{"balance", 10}}));
      Status inner = m.Nested([&](TxnContext& in) -> Status {
        RETURN_IF_ERROR(in.Adjust("acct", "bob", {{"balance", 100}}));
        RETURN_IF_ERROR(in.Adjust("acct", "carol", {{"balance", 100}}));
        return in.Insert("c", "inner", {{"depth", 3}});
      });
      EXPECT_TRUE(inner.ok()) << inner.ToString();
      EXPECT_EQ(Seen(m, "acct", "bob"), Found(V(1), Obj(R"({"balance":160})")));
      EXPECT_EQ(Seen(m, "acct", "carol"), Found(V(1), Obj(R"({"balance":110})")));
      return Status::FailedPrecondition("middle fails");
    });
    EXPECT_EQ(middle.code(), Code::kFailedPrecondition);
    EXPECT_EQ(Seen(tx, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
    EXPECT_EQ(Seen(tx, "acct", "carol"), Found(V(1), Obj(R"({"balance":10})")));
    EXPECT_EQ(Seen(tx, "c", "inner"), NotFoundImage());
    // The other way round: the middle succeeds, the inner fails.
    middle = tx.Nested([&](TxnContext& m) -> Status {
      RETURN_IF_ERROR(m.Adjust("acct", "dave", {{"balance", 10}}));
      Status inner = m.Nested([&](TxnContext& in) -> Status {
        RETURN_IF_ERROR(in.Adjust("acct", "dave", {{"balance", 100}}));
        RETURN_IF_ERROR(in.Insert("c", "inner2", {{"depth", 3}}));
        return Status::FailedPrecondition("inner fails");
      });
      EXPECT_EQ(inner.code(), Code::kFailedPrecondition);
      return m.Insert("c", "middle2", {{"depth", 2}});
    });
    EXPECT_TRUE(middle.ok()) << middle.ToString();
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":99})")));
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
  EXPECT_EQ(ReadImage(*db, "acct", "carol"), Found(V(1), Obj(R"({"balance":10})")));
  EXPECT_EQ(ReadImage(*db, "acct", "dave"), Found(V(2), Obj(R"({"balance":11})")));
  EXPECT_EQ(ReadImage(*db, "c", "inner"), NotFoundImage());
  EXPECT_EQ(ReadImage(*db, "c", "inner2"), NotFoundImage());
  EXPECT_EQ(ReadImage(*db, "c", "middle2"), Found(V(1), Obj(R"({"depth":2})")));
}

TEST_F(SavepointTest, ExceptionUndoesTheScopeAndPropagates) {
  int caught = 0;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Adjust("acct", "alice", {{"balance", -1}}));
    try {
      (void)tx.Nested([&](TxnContext& in) -> Status {
        RETURN_IF_ERROR(in.Adjust("acct", "bob", {{"balance", 1}}));
        RETURN_IF_ERROR(in.Insert("c", "x", {{"a", 1}}));
        throw std::runtime_error("boom");
      });
      ADD_FAILURE() << "the exception did not propagate";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "boom");
      ++caught;
    }
    // Thrown two scopes deep, caught outside both: both undone.
    try {
      (void)tx.Nested([&](TxnContext& m) -> Status {
        RETURN_IF_ERROR(m.Adjust("acct", "carol", {{"balance", 1}}));
        return m.Nested([&](TxnContext& in) -> Status {
          RETURN_IF_ERROR(in.Adjust("acct", "dave", {{"balance", 1}}));
          throw std::logic_error("deep");
        });
      });
      ADD_FAILURE() << "the exception did not propagate";
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "deep");
      ++caught;
    }
    EXPECT_EQ(Seen(tx, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
    EXPECT_EQ(Seen(tx, "c", "x"), NotFoundImage());
    EXPECT_EQ(Seen(tx, "acct", "carol"), Found(V(1), Obj(R"({"balance":10})")));
    EXPECT_EQ(Seen(tx, "acct", "dave"), Found(V(1), Obj(R"({"balance":1})")));
    return tx.Insert("c", "y", {{"a", 2}});
  });
  EXPECT_EQ(caught, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":99})")));
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(1), Obj(R"({"balance":50})")));
  EXPECT_EQ(ReadImage(*db, "acct", "carol"), Found(V(1), Obj(R"({"balance":10})")));
  EXPECT_EQ(ReadImage(*db, "acct", "dave"), Found(V(1), Obj(R"({"balance":1})")));
  EXPECT_EQ(ReadImage(*db, "c", "y"), Found(V(1), Obj(R"({"a":2})")));
  EXPECT_FALSE(Raw(*mem, "c", "x").has_value());
}

TEST_F(SavepointTest, VersionsPinnedInAnUndoneScopeAreNotChecked) {
  // A pin that matched: undone with the scope, so a concurrent change of the document before
  // the commit does not fail it.
  int runs = 0;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    RETURN_IF_ERROR(tx.Get("acct", "carol").status());  // known before the scope, not pinned
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.LockOptimistic("acct", "carol", V(1)));
      RETURN_IF_ERROR(in.Get("acct", "dave", V(1)).status());
      return Status::FailedPrecondition("undo");
    });
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    if (runs == 1) {
      MustCommit(*other, Transaction()
                             .Adjust("acct", "carol", {{"balance", 1}})
                             .Adjust("acct", "dave", {{"balance", 1}}));
    }
    // The scope's first read of dave is undone too: dave is read afresh.
    EXPECT_EQ(Seen(tx, "acct", "dave"), Found(V(2), Obj(R"({"balance":2})")));
    return tx.Adjust("acct", "alice", {{"balance", 1}});
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{V(2)}));  // alice only
}

TEST_F(SavepointTest, ReadInAnUndoneScopeLeavesABlindWriteBlind) {
  // Written without a read before the scope, read inside it: after the undo the write is
  // committed as given (an adjust, no expected version), so a concurrent change of the
  // document does not fail it; with the read kept it would be committed at the version read.
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep);
    int runs = 0;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      ++runs;
      RETURN_IF_ERROR(tx.Adjust("acct", "carol", {{"balance", 5}}));
      (void)tx.Nested([&](TxnContext& in) -> Status {
        RETURN_IF_ERROR(in.Get("acct", "carol").status());
        return keep ? Status::Ok() : Status::FailedPrecondition("undo");
      });
      if (runs == 1) MustCommit(*other, Transaction().Adjust("acct", "carol", {{"balance", 100}}));
      return Status::Ok();
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(runs, keep ? 2 : 1);
  }
  // 10, +5 and +100 (undone read), +100 and then +5 (kept read, re-run).
  EXPECT_EQ(ReadImage(*db, "acct", "carol"), Found(V(5), Obj(R"({"balance":220})")));
}

TEST_F(SavepointTest, ConflictMetInAnUndoneScopeDoesNotPinTheAttempt) {
  // The scope meets a conflict of its own (a wrong pinned version, a Get with a wrong
  // expected version, an insert over a live document) and is undone; the outer transaction
  // goes on. A concurrent change then fails its first commit: Run re-runs it, and it commits.
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    int runs = 0;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      ++runs;
      Status s = tx.Nested([&](TxnContext& in) -> Status {
        if (variant == 0) return in.LockOptimistic("acct", "carol", 7);
        if (variant == 1) return in.Get("acct", "carol", 7).status();
        return in.Insert("acct", "carol", {{"balance", 0}});
      });
      EXPECT_EQ(s.code(), Code::kConflict);
      auto bob = tx.Get("acct", "bob");
      if (!bob.ok()) return bob.status();
      if (runs == 1) MustCommit(*other, Transaction().Adjust("acct", "bob", {{"balance", 1}}));
      return tx.Update("acct", "bob", {{"seen", bob->doc.at("balance")}});
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(runs, 2);
    EXPECT_EQ(r->attempts, 2);
    auto bob = db->Read("acct", "bob");
    ASSERT_TRUE(bob.ok());
    EXPECT_EQ(bob->doc.at("seen"), bob->doc.at("balance"));
  }
}

TEST_F(SavepointTest, ConflictOfAnUndoneScopeReturnedByTheCallbackEndsTheRun) {
  // The callback returns the scope's own conflict: re-running would meet it again, so the run
  // ends with it as it would without a scope.
  RunOptions o;
  o.max_attempts = 5;  // bounds the run if it were re-run
  int runs = 0;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    RETURN_IF_ERROR(tx.Adjust("acct", "alice", {{"balance", 1}}));
    return tx.Nested([&](TxnContext& in) { return in.LockOptimistic("acct", "carol", 7); });
  }, o);
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(r.status().current_version(), V(1));
  EXPECT_EQ(runs, 1);
  // An enclosing scope that returns it too passes it on.
  runs = 0;
  r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    return tx.Nested([&](TxnContext& m) {
      return m.Nested([&](TxnContext& in) { return in.Insert("acct", "carol", {{"x", 1}}); });
    });
  }, o);
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(runs, 1);
  // A conflict of the callback's own making, not met by the store, is re-run as before.
  runs = 0;
  r = db->Run([&](TxnContext& tx) -> Status {
    ++runs;
    (void)tx.Nested([&](TxnContext& in) { return in.LockOptimistic("acct", "carol", 7); });
    return Status::Conflict("application conflict");
  }, o);
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(1), Obj(R"({"balance":100})")));
}

TEST_F(SavepointTest, SerializableChecksReadsOfSucceededScopesOnly) {
  RunOptions o;
  o.serializable = true;
  o.max_attempts = 1;  // the first commit's outcome is the run's
  // Read in an undone scope: not checked, the concurrent change does not fail the commit.
  auto r = db->Run([&](TxnContext& tx) -> Status {
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Get("acct", "carol").status());
      return Status::FailedPrecondition("undo");
    });
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    MustCommit(*other, Transaction().Adjust("acct", "carol", {{"balance", 1}}));
    return tx.Adjust("acct", "alice", {{"balance", 1}});
  }, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{V(2)}));  // no check of carol
  EXPECT_EQ(ReadImage(*db, "acct", "carol"), Found(V(2), Obj(R"({"balance":11})")));

  // Read in a scope that succeeded: checked.
  r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Nested([&](TxnContext& in) { return in.Get("acct", "carol").status(); }));
    MustCommit(*other, Transaction().Adjust("acct", "carol", {{"balance", 1}}));
    return tx.Adjust("acct", "alice", {{"balance", 1}});
  }, o);
  EXPECT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(r.status().current_version(), V(3));

  // Read before the scope, read and written again in the undone scope: still checked.
  r = db->Run([&](TxnContext& tx) -> Status {
    RETURN_IF_ERROR(tx.Get("acct", "dave").status());
    Status s = tx.Nested([&](TxnContext& in) -> Status {
      RETURN_IF_ERROR(in.Get("acct", "dave").status());
      RETURN_IF_ERROR(in.Adjust("acct", "dave", {{"balance", 1}}));
      return Status::FailedPrecondition("undo");
    });
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    MustCommit(*other, Transaction().Adjust("acct", "dave", {{"balance", 1}}));
    return tx.Adjust("acct", "alice", {{"balance", 1}});
  }, o);
  EXPECT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":101})")));
}

TEST_F(SavepointTest, StatelessRetryOfAStepCommitsOneAttemptsWrites) {
  // A store step retried in place: each try posts the same entry, the first two fail after
  // writing. Only the third try's writes commit.
  int tries = 0;
  auto r = db->Run([&](TxnContext& tx) -> Status {
    tries = 0;
    Status s;
    for (int i = 0; i < 3; ++i) {
      s = tx.Nested([&](TxnContext& in) -> Status {
        ++tries;
        RETURN_IF_ERROR(in.Adjust("acct", "alice", {{"balance", -10}}));
        RETURN_IF_ERROR(in.Insert("ledger", "entry-1", {{"try", tries}, {"amount", 10}}));
        RETURN_IF_ERROR(in.Adjust("acct", "bob", {{"balance", 10}}));
        return tries < 3 ? Status::Unavailable("the step's service is down") : Status::Ok();
      });
      if (s.ok()) break;
      EXPECT_EQ(s.code(), Code::kUnavailable);
    }
    return s;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(tries, 3);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(ReadImage(*db, "acct", "alice"), Found(V(2), Obj(R"({"balance":90})")));
  EXPECT_EQ(ReadImage(*db, "acct", "bob"), Found(V(2), Obj(R"({"balance":60})")));
  EXPECT_EQ(ReadImage(*db, "ledger", "entry-1"), Found(V(1), Obj(R"({"try":3,"amount":10})")));
}

// ---------------------------------------------------------------------------------------------
// Random sequences of writes and nested scopes against a model.

// A document as the model sees it.
struct MDoc {
  DocumentState state = DocumentState::kNotFound;
  json::object doc;
};
using MState = std::map<std::string, MDoc>;

enum class MKind { kInsert, kUpdate, kAdjust, kDelete };
struct MWrite {
  MKind kind = MKind::kInsert;
  std::string id;
  std::int64_t v = 0;
  bool unset_m = false;  // update: unset "m" instead of setting it
  int scope = 0;         // the scope it was made in (0: the callback itself)
  bool accepted = false;  // the context accepted it (OK)
};

// Applies `w` to `m` as the engine's rules say; returns the code the write must return.
Code ApplyModel(MState& m, const MWrite& w) {
  MDoc& d = m[w.id];
  if (w.kind == MKind::kInsert) {
    if (d.state == DocumentState::kFound) return Code::kConflict;
    d = MDoc{DocumentState::kFound, {{"n", w.v}}};
    return Code::kOk;
  }
  if (d.state == DocumentState::kNotFound) return Code::kNotFound;
  if (d.state == DocumentState::kDeleted) return Code::kDeleted;
  switch (w.kind) {
    case MKind::kUpdate:
      d.doc["n"] = w.v;
      if (w.unset_m) {
        d.doc.erase("m");
      } else {
        d.doc["m"] = w.v;
      }
      break;
    case MKind::kAdjust:
      d.doc["n"] = d.doc.at("n").as_int64() + w.v;
      break;
    default:
      d = MDoc{DocumentState::kDeleted, {}};
      break;
  }
  return Code::kOk;
}

struct Thrown {};  // an exception of the random callback

class RandomScopes {
 public:
  RandomScopes(TxnContext& tx, std::mt19937& rng, std::string collection, MState start)
      : tx_(tx), rng_(rng), c_(std::move(collection)), view_(std::move(start)) {
    scopes_.push_back(ScopeRec{-1, true});
  }

  void Steps(int scope, int depth) {
    const int n = Pick(1, 6);
    for (int i = 0; i < n && !::testing::Test::HasFailure(); ++i) {
      if (depth < 3 && Pick(0, 4) == 0) {
        Nest(scope, depth);
      } else if (Pick(0, 5) == 0) {
        CheckView();
      } else {
        Write(scope);
      }
    }
  }
  // Every document as the transaction sees it must be the model's.
  void CheckView() {
    for (const auto& [id, d] : view_) {
      auto r = tx_.Get(c_, id);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->state, d.state) << id;
      if (d.state == DocumentState::kFound) {
        EXPECT_EQ(r->doc, d.doc) << id;
      }
    }
  }
  // The model's final state: the start with the writes of scopes that all succeeded replayed.
  // Counts the accepted writes that survive in `survived`, the others in `dropped`.
  MState Replay(MState start, int& survived, int& dropped) const {
    for (const MWrite& w : writes_) {
      if (!Survives(w.scope)) {
        if (w.accepted) ++dropped;
        continue;
      }
      if (ApplyModel(start, w) == Code::kOk) ++survived;
    }
    return start;
  }

  int kept = 0, undone = 0, thrown = 0;

 private:
  struct ScopeRec {
    int parent;
    bool ok;
  };

  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  bool Survives(int scope) const {
    for (; scope >= 0; scope = scopes_[scope].parent) {
      if (!scopes_[scope].ok) return false;
    }
    return true;
  }

  void Write(int scope) {
    MWrite w;
    w.kind = static_cast<MKind>(Pick(0, 3));
    w.id = "d" + std::to_string(Pick(0, static_cast<int>(view_.size()) - 1));
    w.v = Pick(-5, 5);
    w.unset_m = Pick(0, 1) == 1;
    w.scope = scope;
    const Code want = ApplyModel(view_, w);
    Status s;
    switch (w.kind) {
      case MKind::kInsert: s = tx_.Insert(c_, w.id, {{"n", w.v}}); break;
      case MKind::kUpdate:
        s = w.unset_m ? tx_.Update(c_, w.id, {{"n", w.v}}, {"m"})
                      : tx_.Update(c_, w.id, {{"n", w.v}, {"m", w.v}});
        break;
      case MKind::kAdjust: s = tx_.Adjust(c_, w.id, {{"n", w.v}}); break;
      case MKind::kDelete: s = tx_.Delete(c_, w.id); break;
    }
    EXPECT_EQ(s.code(), want) << "write " << static_cast<int>(w.kind) << " of " << w.id << ": "
                              << s.ToString();
    w.accepted = s.ok();
    writes_.push_back(std::move(w));
  }

  void Nest(int parent, int depth) {
    const int id = static_cast<int>(scopes_.size());
    scopes_.push_back(ScopeRec{parent, false});
    const int fate = Pick(0, 5);  // 0-2: OK, 3-4: a failed status, 5: an exception
    const MState before = view_;
    try {
      Status s = tx_.Nested([&](TxnContext& in) -> Status {
        EXPECT_EQ(&in, &tx_);
        Steps(id, depth + 1);
        if (fate == 5) throw Thrown{};
        return fate < 3 ? Status::Ok() : Status::FailedPrecondition("random failure");
      });
      if (fate < 3) {
        EXPECT_TRUE(s.ok()) << s.ToString();
        scopes_[id].ok = true;
        ++kept;
      } else {
        EXPECT_EQ(s.code(), Code::kFailedPrecondition);
        view_ = before;
        ++undone;
      }
    } catch (const Thrown&) {
      EXPECT_EQ(fate, 5);
      view_ = before;
      ++thrown;
    }
    CheckView();
  }

  TxnContext& tx_;
  std::mt19937& rng_;
  std::string c_;
  MState view_;
  std::vector<ScopeRec> scopes_;
  std::vector<MWrite> writes_;
};

TEST_F(SavepointTest, RandomScopesCommitExactlyTheSurvivingWrites) {
  std::uint32_t seed = 20261122;
  if (const char* e = std::getenv("LITETX_SAVEPOINT_SEED")) {
    seed = static_cast<std::uint32_t>(std::strtoul(e, nullptr, 10));
  }
  std::printf("seed=%u (replay: LITETX_SAVEPOINT_SEED=%u)\n", seed, seed);
  std::mt19937 rng(seed);
  int kept = 0, undone = 0, thrown = 0, survived = 0, dropped = 0, flipped = 0;
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds && !HasFailure(); ++round) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round));
    // d0, d1 live; d2 a tombstone; d3 never written.
    const std::string c = "p" + std::to_string(round);
    MustCommit(*db, Transaction()
                        .Insert(c, "d0", {{"n", 0}})
                        .Insert(c, "d1", {{"n", 1}, {"m", 1}})
                        .Insert(c, "d2", {{"n", 2}}));
    MustCommit(*db, Transaction().Delete(c, "d2"));
    const MState start{{"d0", {DocumentState::kFound, {{"n", 0}}}},
                       {"d1", {DocumentState::kFound, {{"n", 1}, {"m", 1}}}},
                       {"d2", {DocumentState::kDeleted, {}}},
                       {"d3", {DocumentState::kNotFound, {}}}};
    MState want;
    auto r = db->Run([&](TxnContext& tx) -> Status {
      RandomScopes random(tx, rng, c, start);
      random.Steps(0, 0);
      random.CheckView();
      want = random.Replay(start, survived, dropped);
      kept += random.kept;
      undone += random.undone;
      thrown += random.thrown;
      return Status::Ok();
    });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->attempts, 1);
    for (const auto& [id, d] : want) {
      auto got = db->Read(c, id);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const DocumentState base = start.at(id).state;
      if (d.state == DocumentState::kFound) {
        EXPECT_EQ(got->state, DocumentState::kFound) << id;
        EXPECT_EQ(got->doc, d.doc) << id;
      } else {
        // A document that was live is deleted; one that was not stays as it was.
        EXPECT_EQ(got->state, base == DocumentState::kFound ? DocumentState::kDeleted : base) << id;
      }
      if ((d.state == DocumentState::kFound) != (base == DocumentState::kFound)) ++flipped;
    }
  }
  std::printf("%d rounds: scopes kept %d, undone by status %d, by exception %d; accepted "
              "writes committed %d, undone %d; documents live before and not after or the "
              "reverse %d\n",
              kRounds, kept, undone, thrown, survived, dropped, flipped);
  // Every kind of scope ending occurred, and writes were both kept and undone, so the
  // comparison with the model covered each.
  EXPECT_GT(kept, 0);
  EXPECT_GT(undone, 0);
  EXPECT_GT(thrown, 0);
  EXPECT_GT(survived, 0);
  EXPECT_GT(dropped, 0);
  EXPECT_GT(flipped, 0);
}

}  // namespace
}  // namespace ltxtest
