// tests/commit_test.cpp — successful commits of every action type, on the one-write fast path
// and through the full worklist protocol: resulting documents, versions, schema versions,
// CommitInfo, and inserts over tombstones and "gone" placeholders.
#include <cctype>
#include <limits>
#include <set>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::ActionType;
using litetx::DocumentState;
using litetx::Transaction;

class CommitTest : public ::testing::Test, public World {
 protected:
  std::unique_ptr<litetx::Database> db = Direct();
  const std::vector<std::string> colls = {"c", "d"};
};

TEST_F(CommitTest, TransactionBuilderRecordsActionsInOrder) {
  Transaction t;
  EXPECT_TRUE(t.empty());
  t.Insert("c", "a", Obj(R"({"x":1})"), 4)
      .Update("c", "b", Obj(R"({"y":2})"), {"z"}, 7, 9)
      .Adjust("c", "d", Obj(R"({"n":-1})"), 3)
      .Delete("c", "e", 5)
      .Check("c", "f", 6);
  ASSERT_EQ(t.size(), 5u);
  const auto& a = t.actions();
  EXPECT_EQ(a[0].type, ActionType::kInsert);
  EXPECT_EQ(a[0].key, (Key{"c", "a"}));
  EXPECT_EQ(a[0].schema_version, 4u);
  EXPECT_FALSE(a[0].expected_version.has_value());
  EXPECT_EQ(a[1].type, ActionType::kUpdate);
  EXPECT_EQ(a[1].fields, Obj(R"({"y":2})"));
  EXPECT_EQ(a[1].unset, std::vector<std::string>{"z"});
  EXPECT_EQ(a[1].expected_version, 7u);
  EXPECT_EQ(a[1].schema_version, 9u);
  EXPECT_EQ(a[2].type, ActionType::kAdjust);
  EXPECT_EQ(a[2].expected_version, 3u);
  EXPECT_EQ(a[3].type, ActionType::kDelete);
  EXPECT_EQ(a[3].expected_version, 5u);
  EXPECT_EQ(a[4].type, ActionType::kCheck);
  EXPECT_EQ(a[4].expected_version, 6u);
  EXPECT_STREQ(litetx::ActionTypeName(ActionType::kAdjust), "adjust");
}

TEST_F(CommitTest, FastPathInsert) {
  auto info = MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"x":1,"s":"t"})")));
  EXPECT_EQ(info.versions, std::vector<std::uint64_t>{V(1)});
  EXPECT_EQ(info.txn_id.size(), 28u);
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(1), Obj(R"({"x":1,"s":"t"})")));
  auto m = MetaOf(*mem, "c", "a");
  EXPECT_EQ(m.txn, "");
  EXPECT_EQ(m.last_writer, info.txn_id);
  EXPECT_FALSE(m.deleted || m.gone || m.deleting);
  EXPECT_EQ(mem->Size(), 1u);  // no transaction record
}

TEST_F(CommitTest, InsertSchemaVersionExplicitAndDefault) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"x":1})"), 3));
  EXPECT_EQ(ReadImage(*db, "c", "a").schema_version, 3u);
  auto o = Opts();
  o.default_schema_version = 7;
  litetx::Database db7(mem, o);
  MustCommit(db7, Transaction().Insert("c", "b", Obj(R"({"x":1})")));
  EXPECT_EQ(ReadImage(db7, "c", "b").schema_version, 7u);
  // Multi-action path too.
  MustCommit(db7, Transaction().Insert("c", "m1", {}).Insert("c", "m2", {}, 2));
  EXPECT_EQ(ReadImage(db7, "c", "m1"), Found(V(1), {}, 7));
  EXPECT_EQ(ReadImage(db7, "c", "m2"), Found(V(1), {}, 2));
}

TEST_F(CommitTest, FastPathUpdateSetsAndUnsets) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"a":1,"b":2,"c":3})")));
  auto info = MustCommit(
      *db, Transaction().Update("c", "a", Obj(R"({"a":10,"d":{"n":[1]}})"), {"b", "absent"}, V(1)));
  EXPECT_EQ(info.versions, std::vector<std::uint64_t>{V(2)});
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(2), Obj(R"({"a":10,"c":3,"d":{"n":[1]}})")));
  EXPECT_EQ(mem->Size(), 1u);
}

TEST_F(CommitTest, UpdateSchemaVersionChangesOnlyWhenGiven) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"a":1})")));
  MustCommit(*db, Transaction().Update("c", "a", Obj(R"({"a":2})"), {}, std::nullopt, 5));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(2), Obj(R"({"a":2})"), 5));
  MustCommit(*db, Transaction().Update("c", "a", Obj(R"({"a":3})")));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(3), Obj(R"({"a":3})"), 5));
}

TEST_F(CommitTest, FastPathAdjustIntegersAndDoubles) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"i":5,"d":1.5,"j":2,"k":-3,"s":"x"})")));
  auto info = MustCommit(
      *db, Transaction().Adjust("c", "a", Obj(R"({"i":3,"d":0.25,"j":0.5,"k":-10})"), V(1)));
  EXPECT_EQ(info.versions, std::vector<std::uint64_t>{V(2)});
  auto img = ReadImage(*db, "c", "a");
  EXPECT_EQ(img.version, V(2));
  ASSERT_TRUE(img.doc.at("i").is_int64());
  EXPECT_EQ(img.doc.at("i").as_int64(), 8);
  ASSERT_TRUE(img.doc.at("d").is_double());
  EXPECT_DOUBLE_EQ(img.doc.at("d").as_double(), 1.75);
  ASSERT_TRUE(img.doc.at("j").is_double());  // int + double -> double
  EXPECT_DOUBLE_EQ(img.doc.at("j").as_double(), 2.5);
  EXPECT_EQ(img.doc.at("k").as_int64(), -13);
  EXPECT_EQ(img.doc.at("s"), "x");  // untouched
}

TEST_F(CommitTest, AdjustBeyondInt64MaxBecomesUnsigned) {
  // engine/worklist.cpp: integer sums stay exact, as uint64 when positive and past int64.
  MustCommit(*db, Transaction().Insert("c", "a", json::object{
                                                     {"n", std::numeric_limits<std::int64_t>::max()}}));
  MustCommit(*db, Transaction().Adjust("c", "a", Obj(R"({"n":1})")));
  auto img = ReadImage(*db, "c", "a");
  ASSERT_TRUE(img.doc.at("n").is_uint64()) << img;
  EXPECT_EQ(img.doc.at("n").as_uint64(), std::uint64_t{1} << 63);
  MustCommit(*db, Transaction().Adjust("c", "a", Obj(R"({"n":-2})")));
  img = ReadImage(*db, "c", "a");
  ASSERT_TRUE(img.doc.at("n").is_int64()) << img;
  EXPECT_EQ(img.doc.at("n").as_int64(), std::numeric_limits<std::int64_t>::max() - 1);
}

TEST_F(CommitTest, FastPathDeleteLeavesTombstone) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"a":1})")));
  auto info = MustCommit(*db, Transaction().Delete("c", "a", V(1)));
  EXPECT_EQ(info.versions, std::vector<std::uint64_t>{V(3)});
  EXPECT_EQ(ReadImage(*db, "c", "a"), DeletedImage(V(3)));
  auto raw = Raw(*mem, "c", "a");
  ASSERT_TRUE(raw);
  EXPECT_EQ(litetx::engine::UserFields(*raw), json::object{});
  auto m = MetaOf(*mem, "c", "a");
  EXPECT_TRUE(m.deleted);
  EXPECT_FALSE(m.deleting);
  EXPECT_EQ(m.txn, "");
  EXPECT_EQ(m.version, V(3));
}

TEST_F(CommitTest, CheckAloneWritesNothingAndReportsVersion) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"a":1})")));
  MustCommit(*db, Transaction().Update("c", "a", Obj(R"({"a":2})")));
  Revision before = RevisionOf(*mem, {"c", "a"});
  auto info = MustCommit(*db, Transaction().Check("c", "a", V(2)));
  EXPECT_EQ(info.versions, std::vector<std::uint64_t>{V(2)});
  EXPECT_EQ(RevisionOf(*mem, {"c", "a"}), before);
}

TEST_F(CommitTest, MultiActionOfEveryType) {
  MustCommit(*db, Transaction()
                      .Insert("c", "upd", Obj(R"({"a":1,"b":2})"))
                      .Insert("c", "adj", Obj(R"({"n":10,"f":0.5})"))
                      .Insert("c", "del", Obj(R"({"z":1})"))
                      .Insert("d", "chk", Obj(R"({"k":1})")));
  auto info = MustCommit(*db, Transaction()
                                  .Insert("c", "new", Obj(R"({"hello":"world"})"), 2)
                                  .Update("c", "upd", Obj(R"({"a":5,"c":3})"), {"b"}, V(1), 4)
                                  .Adjust("c", "adj", Obj(R"({"n":-4,"f":1})"), V(1))
                                  .Delete("c", "del", V(1))
                                  .Check("d", "chk", V(1)));
  EXPECT_EQ(info.versions, (std::vector<std::uint64_t>{V(1), V(2), V(2), V(3), V(1)}));
  EXPECT_EQ(info.txn_id.size(), 28u);
  EXPECT_EQ(ReadImage(*db, "c", "new"), Found(V(1), Obj(R"({"hello":"world"})"), 2));
  EXPECT_EQ(ReadImage(*db, "c", "upd"), Found(V(2), Obj(R"({"a":5,"c":3})"), 4));
  EXPECT_EQ(ReadImage(*db, "c", "adj"), Found(V(2), Obj(R"({"n":6,"f":1.5})")));
  EXPECT_EQ(ReadImage(*db, "c", "del"), DeletedImage(V(3)));
  EXPECT_EQ(ReadImage(*db, "d", "chk"), Found(V(1), Obj(R"({"k":1})")));
  for (const char* id : {"new", "upd", "adj", "del"}) {
    EXPECT_EQ(MetaOf(*mem, "c", id).last_writer, info.txn_id) << id;
  }
  ExpectClean(*mem, colls);
}

TEST_F(CommitTest, VersionsCountEveryChange) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"n":0})")).Insert("c", "b", Obj(R"({"n":0})")));
  for (int i = 1; i <= 5; ++i) {
    auto info = MustCommit(*db, Transaction().Adjust("c", "a", Obj(R"({"n":1})"), V(i))
                                    .Update("c", "b", json::object{{"n", i}}, {}, V(i)));
    EXPECT_EQ(info.versions, (std::vector<std::uint64_t>{V(i + 1), V(i + 1)}));
  }
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(6), Obj(R"({"n":5})")));
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(6), Obj(R"({"n":5})")));
}

TEST_F(CommitTest, InsertOverTombstoneContinuesVersions) {
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"old":1})")).Insert("c", "b", Obj(R"({"old":1})")));
  MustCommit(*db, Transaction().Delete("c", "a").Delete("c", "b"));
  ASSERT_EQ(ReadImage(*db, "c", "a"), DeletedImage(V(3)));
  // Fast path.
  auto one = MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"new":2})"), 6));
  EXPECT_EQ(one.versions, std::vector<std::uint64_t>{V(4)});
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(4), Obj(R"({"new":2})"), 6));
  // Worklist path.
  auto two = MustCommit(*db, Transaction().Insert("c", "b", Obj(R"({"new":3})")).Insert("c", "x", {}));
  EXPECT_EQ(two.versions, (std::vector<std::uint64_t>{V(4), V(1)}));
  EXPECT_EQ(ReadImage(*db, "c", "b"), Found(V(4), Obj(R"({"new":3})")));
  auto m = MetaOf(*mem, "c", "b");
  EXPECT_FALSE(m.deleted);
  ExpectClean(*mem, colls);
}

TEST_F(CommitTest, InsertOverRolledBackInsertPlaceholder) {
  // Roll back an insert of c/a: the second action's apply fails for good.
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = FailCalls(Op::kCreate, {"c", "b"}, 1, Code::kUnavailable);
  litetx::Database faulty(hook, Opts());
  auto r = faulty.Commit(Transaction().Insert("c", "a", Obj(R"({"x":1})")).Insert("c", "b", {}));
  ASSERT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  auto m = MetaOf(*mem, "c", "a");
  ASSERT_TRUE(m.gone);
  ASSERT_EQ(m.version, V(2));
  ASSERT_EQ(ReadImage(*db, "c", "a"), NotFoundImage());

  auto info = MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"x":2})")));
  EXPECT_EQ(info.versions, std::vector<std::uint64_t>{V(3)});
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(3), Obj(R"({"x":2})")));
  EXPECT_FALSE(MetaOf(*mem, "c", "a").gone);

  // A hand-made placeholder, over the worklist path.
  litetx::engine::Meta gone = LiveMeta(7, 0);
  gone.gone = true;
  PutMeta(*mem, {"c", "p"}, {}, gone);
  ASSERT_EQ(ReadImage(*db, "c", "p"), NotFoundImage());
  const std::uint64_t first = FirstVersionAt(*clock);  // the rollback's backoff moved the clock
  ASSERT_GT(first, V(3));
  auto two = MustCommit(*db, Transaction().Insert("c", "p", Obj(R"({"y":1})")).Insert("c", "q", {}));
  EXPECT_EQ(two.versions, (std::vector<std::uint64_t>{8, first}));
  EXPECT_EQ(ReadImage(*db, "c", "p"), Found(8, Obj(R"({"y":1})")));
  ExpectClean(*mem, colls);
}

TEST_F(CommitTest, NestedLtxFieldsAreUserData) {
  json::object doc = Obj(R"({"inner":{"_ltx":{"v":"not meta"}},"list":[{"_ltx":1}],"ltx":1,"_lt":2})");
  MustCommit(*db, Transaction().Insert("c", "a", doc));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(1), doc));
}

TEST_F(CommitTest, TransactionIdsAreFreshHex) {
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto info = MustCommit(*db, Transaction().Insert("c", "a" + std::to_string(i), {}));
    ASSERT_EQ(info.txn_id.size(), 28u);
    for (char ch : info.txn_id) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(ch)));
    EXPECT_TRUE(ids.insert(info.txn_id).second) << "txn id reused";
  }
}

TEST_F(CommitTest, DatabasesSharingAStoreSeeEachOther) {
  litetx::Database other(mem, Opts());
  MustCommit(*db, Transaction().Insert("c", "a", Obj(R"({"n":1})")).Insert("c", "b", Obj(R"({"n":1})")));
  MustCommit(other, Transaction().Adjust("c", "a", Obj(R"({"n":1})"), V(1)).Delete("c", "b", V(1)));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(V(2), Obj(R"({"n":2})")));
  EXPECT_EQ(ReadImage(*db, "c", "b"), DeletedImage(V(3)));
}

}  // namespace
}  // namespace ltxtest
