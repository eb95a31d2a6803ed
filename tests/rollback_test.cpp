// tests/rollback_test.cpp — active rollback before the commit point: every action type is
// reversed to its exact prior user fields (versions bumped by the rollback, no references or
// flags left, record erased), whatever made the transaction fail; store errors during the
// rollback are retried with backoff on Options::clock until Options::rollback_timeout.
#include <chrono>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Transaction;

// Documents before the transaction under test (set up by SeedAll):
//   c/upd  live V(1) {"a":1,"b":2}         -> update set a, c; unset b; schema 5
//   c/adj  live V(1) {"n":10,"f":1.5}      -> adjust n -7, f +1
//   c/del  live V(1) {"z":"keep"}          -> delete
//   c/tomb tombstone V(3)                  -> insert over tombstone
//   c/gone placeholder v7                  -> insert over placeholder
//   c/new  absent                          -> insert
//   c/last live V(1) {"l":0}               -> update (the last action: failures aim here)
//   d/chk  live V(1) {"k":1}               -> check version V(1) (only in some modes)
enum class Failure {
  kLastApplyUnavailable,    // the last apply fails kUnavailable for good -> kUnavailable
  kLastApplyConflict,       // the last apply's CAS reports kConflict       -> kConflict
  kCommitPointUnavailable,  // every action applied; commit flag fails      -> kUnavailable
  kCheckChanged,            // a checked document changes during the apply  -> kConflict
  kCollectorAborted,        // the record is flipped to aborted before the commit point
};

struct RollbackCase {
  const char* name;
  Failure failure;
  Code want;
  bool last_applied;  // whether c/last was written (and so reversed, version + 2)
};

void PrintTo(const RollbackCase& c, std::ostream* os) { *os << c.name; }

class RollbackTest : public ::testing::TestWithParam<RollbackCase>, public World {
 protected:
  void SetUp() override {
    auto d = Direct();
    MustCommit(*d, Transaction()
                       .Insert("c", "upd", Obj(R"({"a":1,"b":2})"))
                       .Insert("c", "adj", Obj(R"({"n":10,"f":1.5})"))
                       .Insert("c", "del", Obj(R"({"z":"keep"})"))
                       .Insert("c", "tomb", Obj(R"({"t":1})"))
                       .Insert("c", "last", Obj(R"({"l":0})"))
                       .Insert("d", "chk", Obj(R"({"k":1})")));
    MustCommit(*d, Transaction().Delete("c", "tomb"));
    litetx::engine::Meta gone = LiveMeta(7, 0);
    gone.gone = true;
    PutMeta(*mem, {"c", "gone"}, {}, gone);
  }
};

TEST_P(RollbackTest, EveryActionIsReversed) {
  const RollbackCase& tc = GetParam();
  auto hook = std::make_shared<HookStore>(mem);
  switch (tc.failure) {
    case Failure::kLastApplyUnavailable:
      hook->before = FailCalls(Op::kReplace, {"c", "last"}, 1, Code::kUnavailable);
      break;
    case Failure::kLastApplyConflict:
      hook->before = FailCalls(Op::kReplace, {"c", "last"}, 1, Code::kConflict);
      break;
    case Failure::kCommitPointUnavailable:
      hook->before = [](const Call& c) -> std::optional<Status> {
        if (c.is_commit_point()) return Status::Unavailable("injected");
        return std::nullopt;
      };
      break;
    case Failure::kCheckChanged:
      hook->after = [this](const Call& c, const Status& s) -> std::optional<Status> {
        if (s.ok() && c.op == Op::kReplace && c.key == Key{"c", "last"} && c.nth == 1) {
          // Someone else commits a change to the checked document.
          auto cur = mem->Get({"d", "chk"});
          EXPECT_TRUE(cur.ok() && cur->has_value());
          EXPECT_TRUE(mem->Replace({"d", "chk"}, (*cur)->revision,
                                   litetx::engine::MakeStored(Obj(R"({"k":2})"), LiveMeta(V(2))))
                          .ok());
        }
        return std::nullopt;
      };
      break;
    case Failure::kCollectorAborted:
      hook->before = [this](const Call& c) -> std::optional<Status> {
        if (!c.is_commit_point()) return std::nullopt;
        auto cur = mem->Get(c.key);
        EXPECT_TRUE(cur.ok() && cur->has_value());
        json::object v = (*cur)->value;
        v["state"] = "aborted";
        EXPECT_TRUE(mem->Replace(c.key, (*cur)->revision, v).ok());
        return std::nullopt;  // our flip now meets a changed record
      };
      break;
  }
  litetx::Database db(hook, Opts());
  Transaction t;
  t.Insert("c", "new", Obj(R"({"fresh":true})"))
      .Insert("c", "tomb", Obj(R"({"again":1})"), 3)
      .Insert("c", "gone", Obj(R"({"back":1})"))
      .Update("c", "upd", Obj(R"({"a":9,"c":3})"), {"b"}, V(1), 5)
      .Adjust("c", "adj", Obj(R"({"n":-7,"f":1})"), V(1))
      .Delete("c", "del", V(1))
      .Update("c", "last", Obj(R"({"l":1})"));
  if (tc.failure == Failure::kCheckChanged) t.Check("d", "chk", V(1));

  auto r = db.Commit(t);
  ASSERT_EQ(r.code(), tc.want) << r.status().ToString();

  auto reader = Direct();
  EXPECT_EQ(ReadImage(*reader, "c", "new"), NotFoundImage());
  EXPECT_EQ(ReadImage(*reader, "c", "tomb"), DeletedImage(V(5)));
  EXPECT_EQ(ReadImage(*reader, "c", "gone"), NotFoundImage());
  EXPECT_EQ(ReadImage(*reader, "c", "upd"), Found(V(3), Obj(R"({"a":1,"b":2})")));
  EXPECT_EQ(ReadImage(*reader, "c", "adj"), Found(V(3), Obj(R"({"n":10,"f":1.5})")));
  EXPECT_EQ(ReadImage(*reader, "c", "del"), Found(V(3), Obj(R"({"z":"keep"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "last"), Found(tc.last_applied ? V(3) : V(1), Obj(R"({"l":0})")));

  // The raw documents: exact bodies, placeholder / tombstone flags, nothing pending.
  auto new_meta = MetaOf(*mem, "c", "new");
  EXPECT_TRUE(new_meta.gone);
  EXPECT_EQ(new_meta.version, V(2));
  EXPECT_EQ(BodyOf(*mem, "c", "new"), json::object{});
  auto tomb_meta = MetaOf(*mem, "c", "tomb");
  EXPECT_TRUE(tomb_meta.deleted);
  EXPECT_EQ(tomb_meta.version, V(5));
  EXPECT_EQ(BodyOf(*mem, "c", "tomb"), json::object{});
  auto gone_meta = MetaOf(*mem, "c", "gone");
  EXPECT_TRUE(gone_meta.gone);
  EXPECT_EQ(gone_meta.version, 9u);
  EXPECT_EQ(MetaOf(*mem, "c", "upd").schema_version, 1u);
  EXPECT_FALSE(MetaOf(*mem, "c", "del").deleted);
  for (const char* id : {"upd", "adj", "del", "last"}) {
    auto m = MetaOf(*mem, "c", id);
    EXPECT_TRUE(m.live()) << id;
    EXPECT_FALSE(m.deleting) << id;
  }
  ExpectClean(*mem, {"c", "d"});

  // The store is usable again: the same transaction without the fault commits.
  hook->before = nullptr;
  hook->after = nullptr;
  Transaction again;
  again.Insert("c", "new", Obj(R"({"fresh":true})"))
      .Update("c", "upd", Obj(R"({"a":9})"), {}, V(3))
      .Delete("c", "del", V(3));
  auto ok = db.Commit(again);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->versions, (std::vector<std::uint64_t>{V(3), V(4), V(5)}));
}

INSTANTIATE_TEST_SUITE_P(
    Failures, RollbackTest,
    ::testing::Values(
        RollbackCase{"LastApplyUnavailable", Failure::kLastApplyUnavailable, Code::kUnavailable, false},
        RollbackCase{"LastApplyConflict", Failure::kLastApplyConflict, Code::kConflict, false},
        RollbackCase{"CommitPointUnavailable", Failure::kCommitPointUnavailable, Code::kUnavailable, true},
        RollbackCase{"CheckChanged", Failure::kCheckChanged, Code::kConflict, true},
        RollbackCase{"CollectorAborted", Failure::kCollectorAborted, Code::kAborted, true}),
    [](const ::testing::TestParamInfo<RollbackCase>& i) { return std::string(i.param.name); });

class RollbackRetryTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    MustCommit(*Direct(), Transaction()
                              .Insert("c", "a", Obj(R"({"n":1,"s":"a"})"))
                              .Insert("c", "b", Obj(R"({"n":2,"s":"b"})")));
  }
  static std::optional<Status> FailCommitPoint(const Call& c) {
    if (c.is_commit_point()) return Status::Unavailable("injected commit-point failure");
    return std::nullopt;
  }
};

TEST_F(RollbackRetryTest, StoreErrorsDuringRollbackAreRetriedWithBackoff) {
  auto hook = std::make_shared<HookStore>(mem);
  auto fail_reverse = FailCalls(Op::kReplace, {"c", "a"}, 2, Code::kUnavailable, 6);
  int abort_flips = 0;  // the first three attempts to mark the record aborted fail
  auto fail_abort_flip = [&](const Call& c) -> std::optional<Status> {
    if (c.is_abort_flip() && ++abort_flips <= 3) return Status::Unavailable("injected");
    return std::nullopt;
  };
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (auto s = FailCommitPoint(c)) return s;
    if (auto s = fail_abort_flip(c)) return s;
    return fail_reverse(c);
  };
  auto opts = Opts();
  opts.rollback_timeout = std::chrono::milliseconds{0};  // never give up
  litetx::Database db(hook, opts);
  std::int64_t t0 = clock->NowMillis();
  auto wall0 = std::chrono::steady_clock::now();

  auto r = db.Commit(Transaction().Adjust("c", "a", Obj(R"({"n":5})")).Update("c", "b", Obj(R"({"s":"x"})")));
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();

  // Reverse of c/a: 1 apply + 6 failed reverses + 1 good one.
  EXPECT_EQ(hook->calls(Op::kReplace, {"c", "a"}), 8);
  EXPECT_EQ(abort_flips, 4);
  auto reader = Direct();
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":1,"s":"a"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(3), Obj(R"({"n":2,"s":"b"})")));
  ExpectClean(*mem, {"c"});
  // The waits went through the ManualClock: at least 100+200+...+3200 ms for the six
  // reverse failures, and no real time.
  EXPECT_GE(clock->NowMillis() - t0, 6300);
  EXPECT_LT(std::chrono::steady_clock::now() - wall0, std::chrono::seconds(5));
}

TEST_F(RollbackRetryTest, RollbackGivesUpAfterTimeoutAndLeavesAConsistentState) {
  auto hook = std::make_shared<HookStore>(mem);
  std::string txn;
  auto fail_reverse = FailCalls(Op::kReplace, {"c", "a"}, 2, Code::kUnavailable);  // forever
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record()) txn = c.key.id;
    if (auto s = FailCommitPoint(c)) return s;
    return fail_reverse(c);
  };
  auto opts = Opts();
  opts.rollback_timeout = std::chrono::milliseconds{1000};
  litetx::Database db(hook, opts);
  std::int64_t t0 = clock->NowMillis();

  auto r = db.Commit(Transaction().Adjust("c", "a", Obj(R"({"n":5})")).Update("c", "b", Obj(R"({"s":"x"})")));
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  ASSERT_FALSE(txn.empty());
  std::int64_t elapsed = clock->NowMillis() - t0;
  EXPECT_GE(elapsed, 1000);
  EXPECT_LT(elapsed, 60'000) << "rollback kept retrying long past rollback_timeout";

  // c/b (reversed first) is restored; c/a is still held by the aborted transaction, whose
  // record is kept for the collector; read committed shows the pre-image either way.
  EXPECT_EQ(MetaOf(*mem, "c", "b").txn, "");
  EXPECT_EQ(MetaOf(*mem, "c", "a").txn, txn);
  auto rec = Raw(*mem, TxnKey(txn));
  ASSERT_TRUE(rec);
  auto decoded = litetx::engine::DecodeRecord(*rec);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->state, litetx::engine::TxnState::kAborted);
  auto reader = Direct();
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(1), Obj(R"({"n":1,"s":"a"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(3), Obj(R"({"n":2,"s":"b"})")));
}

TEST_F(RollbackRetryTest, LostApplyReplyThatLandedIsReversed) {
  auto hook = std::make_shared<HookStore>(mem);
  // c/b's apply lands but its reply is lost, and the follow-up reads fail (Get #1 is the
  // pre-read, #2..#5 the engine's attempts to resolve the reply).
  hook->after = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1) {
      return Status::Unknown("injected lost reply");
    }
    return std::nullopt;
  };
  hook->before = FailCalls(Op::kGet, {"c", "b"}, 2, Code::kUnavailable, 4);
  litetx::Database db(hook, Opts());
  auto r = db.Commit(Transaction().Adjust("c", "a", Obj(R"({"n":10})")).Adjust("c", "b", Obj(R"({"n":10})")));
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  auto reader = Direct();
  EXPECT_EQ(ReadImage(*reader, "c", "a"), Found(V(3), Obj(R"({"n":1,"s":"a"})")));
  EXPECT_EQ(ReadImage(*reader, "c", "b"), Found(V(3), Obj(R"({"n":2,"s":"b"})")));
  ExpectClean(*mem, {"c"});
}

TEST_F(RollbackRetryTest, InsertRacedByAnotherWriterKeepsTheOtherDocument) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [this](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.key == Key{"c", "x"} && c.nth == 1) {
      EXPECT_TRUE(mem->Create(c.key, litetx::engine::MakeStored(Obj(R"({"other":1})"), LiveMeta(V(1)))).ok());
    }
    return std::nullopt;
  };
  litetx::Database db(hook, Opts());
  auto r = db.Commit(Transaction().Insert("c", "w", Obj(R"({"mine":1})")).Insert("c", "x", Obj(R"({"mine":2})")));
  ASSERT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  auto reader = Direct();
  EXPECT_EQ(ReadImage(*reader, "c", "w"), NotFoundImage());
  EXPECT_EQ(ReadImage(*reader, "c", "x"), Found(V(1), Obj(R"({"other":1})")));
  ExpectClean(*mem, {"c"});
}

}  // namespace
}  // namespace ltxtest
