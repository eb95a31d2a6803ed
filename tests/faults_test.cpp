// tests/faults_test.cpp — store failures around the commit protocol: kUnavailable before the
// commit point (nothing or everything rolled back), lost replies (kUnknown from the store) on
// the fast path, on applies, on the record and at the commit point (applied exactly once,
// resolved to ok, or reported kUnknown), and failures after the commit point (still ok).
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Transaction;

class FaultTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    MustCommit(*reader, Transaction()
                            .Insert("c", "a", Obj(R"({"n":100})"))
                            .Insert("c", "b", Obj(R"({"n":0})")));
  }
  std::shared_ptr<HookStore> hook = std::make_shared<HookStore>(mem);
  litetx::Database db{hook, Opts()};
  std::unique_ptr<litetx::Database> reader = Direct();
  const Transaction transfer =
      Transaction().Adjust("c", "a", {{"n", -10}}).Adjust("c", "b", {{"n", 10}});

  // Captures the id of the transaction record the engine creates.
  std::string txn;
  HookStore::Before CaptureTxn(HookStore::Before inner = nullptr) {
    return [this, inner](const Call& c) -> std::optional<Status> {
      if (c.op == Op::kCreate && c.on_record()) txn = c.key.id;
      return inner ? inner(c) : std::nullopt;
    };
  }
  void ExpectUnchanged() {
    EXPECT_EQ(ReadImage(*reader, "c", "a").doc, Obj(R"({"n":100})"));
    EXPECT_EQ(ReadImage(*reader, "c", "b").doc, Obj(R"({"n":0})"));
    ExpectClean(*mem, {"c"});
  }
  void ExpectTransferred(std::uint64_t version = V(2)) {
    EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(version, Obj(R"({"n":90})")));
    EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(version, Obj(R"({"n":10})")));
  }
};

// A lost reply: the write lands, the caller hears kUnknown.
HookStore::After LoseReply(Op op, Key key, int nth) {
  return [=](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == op && c.key == key && c.nth == nth) return Status::Unknown("reply lost");
    return std::nullopt;
  };
}

TEST_F(FaultTest, RecordCreateUnavailableWritesNothing) {
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) return Status::Unavailable("injected");
    return std::nullopt;
  };
  Dump before = DumpStore(*mem, {"c"});
  auto r = db.Commit(transfer);
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(r.status().IsRetryableCall());
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
  EXPECT_EQ(hook->calls_in(Op::kCreate, litetx::kTransactionsCollection), Opts().max_attempts);
}

TEST_F(FaultTest, RecordIdCollisionIsUnavailable) {
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) return Status::Conflict("injected: key exists");
    return std::nullopt;
  };
  Dump before = DumpStore(*mem, {"c"});
  EXPECT_EQ(db.Commit(transfer).code(), Code::kUnavailable);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
}

TEST_F(FaultTest, PreReadUnavailableWritesNothing) {
  hook->before = FailCalls(Op::kGet, {"c", "b"}, 1, Code::kUnavailable);
  Dump before = DumpStore(*mem, {"c"});
  EXPECT_EQ(db.Commit(transfer).code(), Code::kUnavailable);
  EXPECT_EQ(db.Commit(Transaction().Adjust("c", "b", {{"n", 1}})).code(), Code::kUnavailable);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
}

TEST_F(FaultTest, TransientFailuresAreRetried) {
  // Every kind of write fails once with kUnavailable, then works.
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.is_write() && c.nth == 1 && !c.on_record()) return Status::Unavailable("injected");
    if (c.on_record() && c.op != Op::kGet && c.nth == 1) return Status::Unavailable("injected");
    return std::nullopt;
  };
  auto r = db.Commit(transfer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTransferred();
  ExpectClean(*mem, {"c"});
  auto one = db.Commit(Transaction().Insert("c", "x", {{"k", 1}}));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(hook->calls(Op::kCreate, {"c", "x"}), 2);
}

TEST_F(FaultTest, FastPathUnavailableGivesUpUnchanged) {
  hook->before = FailCalls(Op::kReplace, {"c", "a"}, 1, Code::kUnavailable);
  Dump before = DumpStore(*mem, {"c"});
  EXPECT_EQ(db.Commit(Transaction().Adjust("c", "a", {{"n", 1}})).code(), Code::kUnavailable);
  EXPECT_EQ(hook->calls(Op::kReplace, {"c", "a"}), Opts().max_attempts);
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
}

TEST_F(FaultTest, FastPathLostReplyThatLandedIsAppliedOnce) {
  hook->after = LoseReply(Op::kReplace, {"c", "a"}, 1);
  auto r = db.Commit(Transaction().Adjust("c", "a", {{"n", 10}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, std::vector<std::uint64_t>{V(2)});
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(2), Obj(R"({"n":110})")));
  EXPECT_EQ(hook->calls(Op::kReplace, {"c", "a"}), 1);
  // Same for an insert's Create and a delete.
  hook->after = LoseReply(Op::kCreate, {"c", "x"}, 1);
  ASSERT_TRUE(db.Commit(Transaction().Insert("c", "x", {{"k", 1}})).ok());
  EXPECT_EQ(ReadImage(*reader, "c", "x"), Found(V(1), Obj(R"({"k":1})")));
  hook->after = LoseReply(Op::kReplace, {"c", "x"}, 1);
  ASSERT_TRUE(db.Commit(Transaction().Delete("c", "x")).ok());
  EXPECT_EQ(ReadImage(*reader, "c", "x"), DeletedImage(V(3)));
}

TEST_F(FaultTest, FastPathLostReplyThatDidNotLandIsRetriedOnce) {
  hook->before = FailCalls(Op::kReplace, {"c", "a"}, 1, Code::kUnknown, 1);
  auto r = db.Commit(Transaction().Adjust("c", "a", {{"n", 10}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(2), Obj(R"({"n":110})")));
  EXPECT_EQ(hook->calls(Op::kReplace, {"c", "a"}), 2);
}

TEST_F(FaultTest, FastPathLostReplyThenConcurrentChangeIsUnknown) {
  // Our write lands, then someone else overwrites the document before we can look.
  hook->after = [this](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == Op::kReplace && c.key == Key{"c", "a"} && c.nth == 1) {
      PutMeta(*mem, c.key, Obj(R"({"n":7})"), LiveMeta(3));
      return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };
  auto r = db.Commit(Transaction().Adjust("c", "a", {{"n", 10}}));
  EXPECT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  EXPECT_FALSE(r.status().IsRetryableTransaction());
}

TEST_F(FaultTest, FastPathLostReplyUnresolvableIsUnknown) {
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.key == Key{"c", "a"} && c.op == Op::kReplace) return Status::Unknown("reply lost");
    if (c.key == Key{"c", "a"} && c.op == Op::kGet && c.nth > 1) return Status::Unavailable("down");
    return std::nullopt;
  };
  EXPECT_EQ(db.Commit(Transaction().Adjust("c", "a", {{"n", 10}})).code(), Code::kUnknown);
}

TEST_F(FaultTest, LostApplyReplyThatLandedIsAppliedOnce) {
  hook->after = LoseReply(Op::kReplace, {"c", "b"}, 1);
  auto r = db.Commit(transfer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTransferred();
  ExpectClean(*mem, {"c"});
  // Also on an insert's Create.
  hook->after = LoseReply(Op::kCreate, {"c", "x"}, 1);
  ASSERT_TRUE(db.Commit(Transaction().Insert("c", "x", {{"k", 1}}).Adjust("c", "b", {{"n", 10}})).ok());
  EXPECT_EQ(ReadImage(*reader, "c", "x"), Found(V(1), Obj(R"({"k":1})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b").doc, Obj(R"({"n":20})"));
  EXPECT_EQ(hook->calls(Op::kCreate, {"c", "x"}), 1);
  ExpectClean(*mem, {"c"});
}

TEST_F(FaultTest, LostApplyReplyThatDidNotLandIsRetried) {
  hook->before = FailCalls(Op::kReplace, {"c", "b"}, 1, Code::kUnknown, 2);
  auto r = db.Commit(transfer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTransferred();
  EXPECT_EQ(hook->calls(Op::kReplace, {"c", "b"}), 4);  // 3 applies + finish
  ExpectClean(*mem, {"c"});
}

TEST_F(FaultTest, LostRecordCreateReplyThatLandedIsOk) {
  hook->after = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == Op::kCreate && c.on_record()) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  ASSERT_TRUE(db.Commit(transfer).ok());
  ExpectTransferred();
  ExpectClean(*mem, {"c"});
}

TEST_F(FaultTest, CommitPointUnavailableRollsBack) {
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) return Status::Unavailable("injected");
    return std::nullopt;
  };
  auto r = db.Commit(transfer);
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":100})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(3), Obj(R"({"n":0})")));
  ExpectClean(*mem, {"c"});
}

TEST_F(FaultTest, CommitPointUnknownUnresolvableIsUnknown) {
  // The flip does not land, its reply is lost, and the record cannot be read afterwards.
  hook->before = CaptureTxn([](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) return Status::Unknown("reply lost");
    if (c.on_record() && c.op == Op::kGet) return Status::Unavailable("down");
    return std::nullopt;
  });
  auto r = db.Commit(transfer);
  ASSERT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  EXPECT_FALSE(r.status().IsRetryableCall());
  // Nothing was decided: the record is pending, both documents held, left for the collector;
  // readers see the last committed state.
  ASSERT_FALSE(txn.empty());
  auto rec = Raw(*mem, TxnKey(txn));
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->at("state"), "pending");
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, txn);
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, txn);
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":100})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(1), Obj(R"({"n":0})")));
}

TEST_F(FaultTest, CommitPointUnknownThatLandedResolvesToOk) {
  hook->after = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.is_commit_point()) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  auto r = db.Commit(transfer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTransferred();
  ExpectClean(*mem, {"c"});
}

TEST_F(FaultTest, CommitPointUnknownThatDidNotLandIsRetried) {
  int flips = 0;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point() && ++flips == 1) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  auto r = db.Commit(transfer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(flips, 2);
  ExpectTransferred();
  ExpectClean(*mem, {"c"});
}

TEST_F(FaultTest, CommitPointUnknownEveryTimeIsUnknown) {
  hook->before = CaptureTxn([](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) return Status::Unknown("reply lost");
    return std::nullopt;
  });
  auto r = db.Commit(transfer);
  ASSERT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  // Not committed: every reader sees the old state, consistently.
  EXPECT_EQ(ReadImage(*reader, "c", "a").doc, Obj(R"({"n":100})"));
  EXPECT_EQ(ReadImage(*reader, "c", "b").doc, Obj(R"({"n":0})"));
}

TEST_F(FaultTest, FailuresAfterTheCommitPointStillCommit) {
  // Finishing c/b fails for good: the commit stands, c/b keeps its reference and the
  // committed record stays for the collector; readers see the new state.
  hook->before = CaptureTxn(FailCalls(Op::kReplace, {"c", "b"}, 2, Code::kUnavailable));
  auto r = db.Commit(transfer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTransferred();
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, "");
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, txn);
  auto rec = Raw(*mem, TxnKey(txn));
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->at("state"), "committed");
}

TEST_F(FaultTest, OutcomeMarkerFailureStillCommits) {
  hook->before = CaptureTxn([](const Call& c) -> std::optional<Status> {
    // Record writes: create, commit flip, then the outcome marker (the third).
    if (c.is_marker()) return Status::Unavailable("injected");
    return std::nullopt;
  });
  ASSERT_TRUE(db.Commit(transfer).ok());
  ExpectTransferred();
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, "");
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, "");
  EXPECT_EQ(RecordCount(*mem), 1u);
}

TEST_F(FaultTest, LostFinishAndEraseRepliesAreHarmless) {
  hook->after = [](const Call& c, const Status& s) -> std::optional<Status> {
    bool finish = c.op == Op::kReplace && !c.on_record() && c.nth == 2;
    bool erase = c.is_marker();
    if (s.ok() && (finish || erase)) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  ASSERT_TRUE(db.Commit(transfer).ok());
  ExpectTransferred();
  ExpectClean(*mem, {"c"});
}

}  // namespace
}  // namespace ltxtest
