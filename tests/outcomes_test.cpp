// tests/outcomes_test.cpp — the precondition outcomes of Database::Commit, each provoked on the
// fast path and on the worklist path: conflict (stale expected version with current_version,
// insert over a live document, a document changed between pre-read and apply), not_found,
// deleted, busy, aborted, failed_precondition and corruption. Failures found at the pre-read
// leave the store untouched; later ones are rolled back.
#include <condition_variable>
#include <limits>
#include <thread>

#include "engine/worklist.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Transaction;

class OutcomeTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    MustCommit(*db, Transaction()
                        .Insert("c", "a", Obj(R"({"n":1,"s":"str","b":true,"z":null,"o":{}})"))
                        .Insert("c", "b", Obj(R"({"n":2})"))
                        .Insert("c", "t", Obj(R"({"n":3})")));
    MustCommit(*db, Transaction().Update("c", "a", Obj(R"({"n":1})")));  // c/a is at version V(2)
    MustCommit(*db, Transaction().Delete("c", "t"));                      // tombstone V(3)
    litetx::engine::Meta gone = LiveMeta(2, 0);
    gone.gone = true;
    PutMeta(*mem, {"c", "g"}, {}, gone);
  }
  // Commits `t` and requires `want`, with the store left exactly as it was.
  void ExpectUntouched(const Transaction& t, Code want, Status* out = nullptr) {
    Dump before = DumpStore(*mem, {"c"});
    auto r = db->Commit(t);
    EXPECT_EQ(r.code(), want) << r.status().ToString();
    EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"}))) << "the store was written";
    if (out != nullptr) *out = r.status();
  }
  std::unique_ptr<litetx::Database> db = Direct();
};

TEST_F(OutcomeTest, StaleExpectedVersionConflictsWithCurrentVersion) {
  std::vector<std::pair<const char*, Transaction>> cases;
  cases.emplace_back("update", Transaction().Update("c", "a", {{"x", 1}}, {}, V(1)));
  cases.emplace_back("adjust", Transaction().Adjust("c", "a", {{"n", 1}}, V(1)));
  cases.emplace_back("delete", Transaction().Delete("c", "a", V(1)));
  cases.emplace_back("check", Transaction().Check("c", "a", V(1)));
  cases.emplace_back("check ahead", Transaction().Check("c", "a", V(3)));
  cases.emplace_back("multi update", Transaction().Adjust("c", "b", {{"n", 1}}).Update("c", "a", {{"x", 1}}, {}, V(1)));
  cases.emplace_back("multi adjust", Transaction().Adjust("c", "a", {{"n", 1}}, 7).Adjust("c", "b", {{"n", 1}}));
  cases.emplace_back("multi delete", Transaction().Delete("c", "b").Delete("c", "a", V(1)));
  cases.emplace_back("multi check", Transaction().Adjust("c", "b", {{"n", 1}}).Check("c", "a", V(1)));
  for (const auto& [name, t] : cases) {
    SCOPED_TRACE(name);
    Status s;
    ExpectUntouched(t, Code::kConflict, &s);
    EXPECT_EQ(s.current_version(), V(2));
    EXPECT_TRUE(s.IsRetryableTransaction());
  }
}

TEST_F(OutcomeTest, InsertOverLiveDocumentConflicts) {
  Status one, multi;
  ExpectUntouched(Transaction().Insert("c", "a", {{"x", 1}}), Code::kConflict, &one);
  EXPECT_EQ(one.current_version(), V(2));
  ExpectUntouched(Transaction().Insert("c", "new", {}).Insert("c", "b", {}), Code::kConflict, &multi);
  EXPECT_EQ(multi.current_version(), V(1));
}

// Right before our apply CAS on c/b, another writer commits a change to it ({"n":50}, V(2)).
std::shared_ptr<HookStore> ChangeBBeforeItsApply(const std::shared_ptr<litetx::MemoryStore>& mem) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [mem](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1) {
      auto cur = mem->Get(c.key);
      EXPECT_TRUE(mem->Replace(c.key, (*cur)->revision,
                               litetx::engine::MakeStored(Obj(R"({"n":50})"), LiveMeta(V(2))))
                      .ok());
    }
    return std::nullopt;
  };
  return hook;
}

TEST_F(OutcomeTest, DocumentChangedBetweenPreReadAndApplyWithExpectedVersionConflicts) {
  litetx::Database hdb(ChangeBBeforeItsApply(mem), Opts());
  auto r = hdb.Commit(Transaction().Adjust("c", "a", {{"n", 10}}).Adjust("c", "b", {{"n", 10}}, V(1)));
  ASSERT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(r.status().current_version(), V(2));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(4), Obj(R"({"n":1,"s":"str","b":true,"z":null,"o":{}})")));
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(2), Obj(R"({"n":50})")));  // the other writer's
  ExpectClean(*mem, {"c"});
}

TEST_F(OutcomeTest, DocumentChangedBetweenPreReadAndApplyIsEvaluatedAgainWithoutExpectedVersion) {
  // A blind adjust does not depend on what was read: it is evaluated again on the newer
  // document, its reversing data re-recorded, and the transaction commits.
  auto hook = ChangeBBeforeItsApply(mem);
  litetx::Database hdb(hook, Opts());
  auto r = hdb.Commit(Transaction().Adjust("c", "a", {{"n", 10}}).Adjust("c", "b", {{"n", 10}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{V(3), V(3)}));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(3), Obj(R"({"n":11,"s":"str","b":true,"z":null,"o":{}})")));
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(3), Obj(R"({"n":60})")));
  ExpectClean(*mem, {"c"});
}

TEST_F(OutcomeTest, FastPathRereadsAfterAConcurrentChange) {
  auto hook = std::make_shared<HookStore>(mem);
  int interfere = 1;  // how many of our CAS writes meet a concurrent change
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"c", "b"} && interfere > 0) {
      --interfere;
      auto cur = mem->Get(c.key);
      auto m = litetx::engine::DecodeMeta((*cur)->value);
      json::object body = litetx::engine::UserFields((*cur)->value);
      body["n"] = body["n"].as_int64() + 100;
      EXPECT_TRUE(mem->Replace(c.key, (*cur)->revision,
                               litetx::engine::MakeStored(body, LiveMeta(m->version + 1)))
                      .ok());
    }
    return std::nullopt;
  };
  litetx::Database hdb(hook, Opts());
  // Once: re-read and applied on top of the other change.
  auto r = hdb.Commit(Transaction().Adjust("c", "b", {{"n", 1}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, std::vector<std::uint64_t>{V(3)});
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(3), Obj(R"({"n":103})")));
  // With an expected version, the re-read reports the conflict and the current version.
  interfere = 1;
  auto stale = hdb.Commit(Transaction().Adjust("c", "b", {{"n", 1}}, V(3)));
  ASSERT_EQ(stale.code(), Code::kConflict);
  EXPECT_EQ(stale.status().current_version(), V(4));
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(4), Obj(R"({"n":203})")));
  // Changing on every attempt: gives up with kConflict after 16 lost races (the coordinator's
  // kMaxRaces), looking again at once each time (no store-error backoff).
  interfere = 1000;
  const auto t0 = clock->NowMillis();
  auto busy = hdb.Commit(Transaction().Adjust("c", "b", {{"n", 1}}));
  EXPECT_EQ(busy.code(), Code::kConflict) << busy.status().ToString();
  EXPECT_EQ(clock->NowMillis(), t0);
  EXPECT_EQ(hook->calls(Op::kReplace, {"c", "b"}), 3 + 16);
  EXPECT_EQ(BodyOf(*mem, "c", "b").at("n").as_int64(), 203 + 100 * 16);
}

TEST_F(OutcomeTest, FastPathInsertRacedByAnotherInsertConflicts) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [this](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.key == Key{"c", "x"}) {
      EXPECT_TRUE(mem->Create(c.key, litetx::engine::MakeStored(Obj(R"({"w":1})"), LiveMeta(V(1)))).ok());
    }
    return std::nullopt;
  };
  litetx::Database hdb(hook, Opts());
  auto r = hdb.Commit(Transaction().Insert("c", "x", {{"mine", 1}}));
  ASSERT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(r.status().current_version(), V(1));
  EXPECT_EQ(ReadImage(*db, "c", "x"), Found(V(1), Obj(R"({"w":1})")));
}

TEST_F(OutcomeTest, MissingDocumentsAreNotFound) {
  for (const char* id : {"nope", "g"}) {  // never existed; rolled-back insert placeholder
    SCOPED_TRACE(id);
    ExpectUntouched(Transaction().Update("c", id, {{"x", 1}}), Code::kNotFound);
    ExpectUntouched(Transaction().Adjust("c", id, {{"n", 1}}), Code::kNotFound);
    ExpectUntouched(Transaction().Delete("c", id), Code::kNotFound);
    ExpectUntouched(Transaction().Check("c", id, 1), Code::kNotFound);
    ExpectUntouched(Transaction().Adjust("c", "a", {{"n", 1}}).Delete("c", id), Code::kNotFound);
    ExpectUntouched(Transaction().Check("c", id, 2).Insert("c", "new", {}), Code::kNotFound);
  }
}

TEST_F(OutcomeTest, TombstonesAreDeleted) {
  ExpectUntouched(Transaction().Update("c", "t", {{"x", 1}}), Code::kDeleted);
  ExpectUntouched(Transaction().Adjust("c", "t", {{"n", 1}}), Code::kDeleted);
  ExpectUntouched(Transaction().Delete("c", "t"), Code::kDeleted);
  ExpectUntouched(Transaction().Check("c", "t", V(3)), Code::kDeleted);
  ExpectUntouched(Transaction().Adjust("c", "a", {{"n", 1}}).Update("c", "t", {{"x", 1}}, {}, V(3)),
                  Code::kDeleted);
  ExpectUntouched(Transaction().Insert("c", "new", {}).Check("c", "t", V(3)), Code::kDeleted);
}

TEST_F(OutcomeTest, DocumentHeldByAnotherTransactionIsBusy) {
  HoldLive(*mem, {"c", "h"}, Obj(R"({"n":1})"), 5, "0123456789abcdef01234567", clock->NowMillis());
  std::int64_t t0 = clock->NowMillis();
  Status s;
  ExpectUntouched(Transaction().Adjust("c", "h", {{"n", 1}}), Code::kBusy, &s);
  EXPECT_TRUE(s.IsRetryableTransaction());
  EXPECT_GE(clock->NowMillis() - t0, 50) << "gave up before busy_timeout";
  EXPECT_LT(clock->NowMillis() - t0, 50 + 200) << "waited far past busy_timeout";
  ExpectUntouched(Transaction().Check("c", "h", 5), Code::kBusy);
  ExpectUntouched(Transaction().Insert("c", "h", {}), Code::kBusy);
  ExpectUntouched(Transaction().Adjust("c", "a", {{"n", 1}}).Delete("c", "h"), Code::kBusy);
}

TEST_F(OutcomeTest, ZeroBusyTimeoutFailsAtFirstLook) {
  HoldLive(*mem, {"c", "h"}, Obj(R"({"n":1})"), 5, "0123456789abcdef01234567", clock->NowMillis());
  auto hook = std::make_shared<HookStore>(mem);
  auto o = Opts();
  o.busy_timeout = std::chrono::milliseconds{0};
  litetx::Database hdb(hook, o);
  EXPECT_EQ(hdb.Commit(Transaction().Adjust("c", "h", {{"n", 1}})).code(), Code::kBusy);
  EXPECT_EQ(hook->calls(Op::kGet, {"c", "h"}), 1);
}

TEST_F(OutcomeTest, WaitsForAHolderThatLetsGo) {
  HoldLive(*mem, {"c", "h"}, Obj(R"({"n":1})"), 5, "0123456789abcdef01234567", clock->NowMillis());
  auto hook = std::make_shared<HookStore>(mem);
  // The holder finishes (clears its reference) at our third look.
  hook->before = [this](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kGet && c.key == Key{"c", "h"} && c.nth == 3) PutMeta(*mem, c.key, Obj(R"({"n":7})"), LiveMeta(6));
    return std::nullopt;
  };
  auto o = Opts();
  o.busy_timeout = std::chrono::milliseconds{1000};
  litetx::Database hdb(hook, o);
  auto r = hdb.Commit(Transaction().Adjust("c", "h", {{"n", 1}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(*db, "c", "h"), Found(7, Obj(R"({"n":8})")));
}

TEST_F(OutcomeTest, DocumentHeldByAPausedTransactionIsBusy) {
  auto hook = std::make_shared<HookStore>(mem);
  std::mutex mu;
  std::condition_variable cv;
  bool paused = false, release = false;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == Op::kReplace && c.key == Key{"c", "b"} && c.nth == 1) {
      std::unique_lock<std::mutex> lock(mu);
      paused = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }
    return std::nullopt;
  };
  litetx::Database holder(hook, Opts());
  litetx::Result<litetx::CommitInfo> held_result = Status::Unknown("not run");
  std::thread t([&] {
    held_result = holder.Commit(Transaction().Adjust("c", "a", {{"n", 1}}).Adjust("c", "b", {{"n", 1}}));
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return paused; });
  }
  // c/b is now held by the paused transaction.
  EXPECT_FALSE(MetaOf(*mem, "c", "b").txn.empty());
  auto other = db->Commit(Transaction().Adjust("c", "b", {{"n", 100}}));
  EXPECT_EQ(other.code(), Code::kBusy) << other.status().ToString();
  auto other2 = db->Commit(Transaction().Check("c", "b", V(1)));
  EXPECT_EQ(other2.code(), Code::kBusy) << other2.status().ToString();
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  t.join();
  ASSERT_TRUE(held_result.ok()) << held_result.status().ToString();
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(2), Obj(R"({"n":3})")));
  ExpectClean(*mem, {"c"});
}

TEST_F(OutcomeTest, CollectorRemovingTheRecordAborts) {
  auto hook = std::make_shared<HookStore>(mem);
  // A collector rolls the transaction back completely (record erased) just before our flip.
  hook->before = [this](const Call& c) -> std::optional<Status> {
    if (!c.is_commit_point()) return std::nullopt;
    auto rec = mem->Get(c.key);
    auto decoded = litetx::engine::DecodeRecord((*rec)->value);
    EXPECT_TRUE(decoded.ok());
    for (const auto& w : decoded->actions) {
      auto cur = mem->Get(w.key);
      auto m = litetx::engine::DecodeMeta((*cur)->value);
      EXPECT_TRUE(mem->Replace(w.key, (*cur)->revision,
                               litetx::engine::Reversed((*cur)->value, *m, w)).ok());
    }
    EXPECT_TRUE(mem->Erase(c.key, (*rec)->revision).ok());
    return std::nullopt;
  };
  litetx::Database hdb(hook, Opts());
  auto r = hdb.Commit(Transaction().Adjust("c", "a", {{"n", 5}}).Insert("c", "new", {{"x", 1}}));
  ASSERT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  EXPECT_TRUE(r.status().IsRetryableTransaction());
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(4), Obj(R"({"n":1,"s":"str","b":true,"z":null,"o":{}})")));
  EXPECT_EQ(ReadImage(*db, "c", "new"), NotFoundImage());
  ExpectClean(*mem, {"c"});
}

TEST_F(OutcomeTest, AdjustOfMissingOrNonNumericFieldFailsPrecondition) {
  for (const char* f : {"missing", "s", "b", "z", "o"}) {
    SCOPED_TRACE(f);
    json::object by{{f, 1}};
    ExpectUntouched(Transaction().Adjust("c", "a", by), Code::kFailedPrecondition);
    ExpectUntouched(Transaction().Adjust("c", "b", {{"n", 1}}).Adjust("c", "a", by),
                    Code::kFailedPrecondition);
  }
  // One good field does not save a bad one.
  ExpectUntouched(Transaction().Adjust("c", "a", {{"n", 1}, {"s", 1}}), Code::kFailedPrecondition);
}

TEST_F(OutcomeTest, AdjustOverflowFailsPrecondition) {
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  constexpr auto kUMax = std::numeric_limits<std::uint64_t>::max();
  MustCommit(*db, Transaction().Insert("c", "big", {{"lo", kMin}, {"hi", kUMax}, {"d", 1e308}}));
  ExpectUntouched(Transaction().Adjust("c", "big", {{"lo", -1}}), Code::kFailedPrecondition);
  ExpectUntouched(Transaction().Adjust("c", "big", {{"lo", kMin}}), Code::kFailedPrecondition);
  ExpectUntouched(Transaction().Adjust("c", "big", {{"hi", 1}}), Code::kFailedPrecondition);
  ExpectUntouched(Transaction().Adjust("c", "big", {{"d", 1e308}}), Code::kFailedPrecondition);
  ExpectUntouched(Transaction().Adjust("c", "a", {{"n", 1}}).Adjust("c", "big", {{"hi", kUMax}}),
                  Code::kFailedPrecondition);
  // The edges themselves are fine.
  MustCommit(*db, Transaction().Adjust("c", "big", {{"lo", 0}, {"hi", 0}, {"d", -1e308}}));
  auto img = ReadImage(*db, "c", "big");
  EXPECT_EQ(img.doc.at("lo").as_int64(), kMin);
  EXPECT_EQ(img.doc.at("hi").as_uint64(), kUMax);
  EXPECT_EQ(img.doc.at("d").as_double(), 0.0);
}

// Malformed "_ltx" metadata, each stored under c/bad.
class CorruptionTest : public OutcomeTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(CorruptionTest, CommitAndReadReportCorruption) {
  PutRaw(*mem, {"c", "bad"}, Obj(GetParam()));
  ExpectUntouched(Transaction().Update("c", "bad", {{"x", 1}}), Code::kCorruption);
  ExpectUntouched(Transaction().Check("c", "bad", 1), Code::kCorruption);
  ExpectUntouched(Transaction().Insert("c", "bad", {}), Code::kCorruption);
  ExpectUntouched(Transaction().Adjust("c", "a", {{"n", 1}}).Delete("c", "bad"), Code::kCorruption);
  EXPECT_EQ(db->Read("c", "bad").code(), Code::kCorruption);
  EXPECT_EQ(db->Read("c", "bad", {litetx::Isolation::kReadUncommitted}).code(), Code::kCorruption);
}

INSTANTIATE_TEST_SUITE_P(
    MalformedMeta, CorruptionTest,
    ::testing::Values(R"({"x":1})", R"({"_ltx":1})", R"({"_ltx":[]})", R"({"_ltx":{}})",
                      R"({"_ltx":{"v":1}})", R"({"_ltx":{"sv":1}})", R"({"_ltx":{"v":"1","sv":1}})",
                      R"({"_ltx":{"v":-1,"sv":1}})", R"({"_ltx":{"v":1.5,"sv":1}})",
                      R"({"_ltx":{"v":1,"sv":8589934592}})", R"({"_ltx":{"v":1,"sv":1,"tx":5}})",
                      R"({"_ltx":{"v":1,"sv":1,"dlg":"yes"}})", R"({"_ltx":{"v":1,"sv":1,"del":1}})",
                      R"({"_ltx":{"v":1,"sv":1,"gone":null}})", R"({"_ltx":{"v":1,"sv":1,"lw":[]}})",
                      R"({"_ltx":{"v":1,"sv":1,"del":true,"gone":true}})"));

}  // namespace
}  // namespace ltxtest
