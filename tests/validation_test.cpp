// tests/validation_test.cpp — every input Commit must refuse with kInvalidArgument, and the
// proof that a refused transaction writes nothing (CountingStore writes == 0, the memory
// store's content and revisions unchanged).
#include <cmath>
#include <limits>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Action;
using litetx::ActionType;
using litetx::Transaction;

class ValidationTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    MustCommit(*Direct(), Transaction().Insert("c", "a", Obj(R"({"n":1})")).Insert("c", "b", Obj(R"({"n":2})")));
  }
  // Commits `t` through a CountingStore and requires kInvalidArgument with no write at all.
  void ExpectInvalid(const Transaction& t, const litetx::Options& o, const std::string& what) {
    SCOPED_TRACE(what);
    auto counting = std::make_shared<litetx::CountingStore>(mem);
    litetx::Database db(counting, o);
    std::size_t size = mem->Size();
    Dump before = DumpStore(*mem, {"c"});
    auto r = db.Commit(t);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_FALSE(r.status().message().empty());
    EXPECT_EQ(counting->counts().writes(), 0u);
    EXPECT_EQ(mem->Size(), size);
    EXPECT_TRUE(SameDump(before, DumpStore(*mem, {"c"})));
  }
  void ExpectInvalid(const Transaction& t, const std::string& what) { ExpectInvalid(t, Opts(), what); }
  // The same single action alone (fast path) and after a valid one (worklist path).
  void ExpectInvalidBothPaths(const Action& a, const std::string& what) {
    ExpectInvalid(Transaction().Add(a), what + " (alone)");
    ExpectInvalid(Transaction().Adjust("c", "a", {{"n", 1}}).Add(a), what + " (second)");
  }
};

Action Make(ActionType type, std::string c, std::string id, json::object fields = {},
            std::vector<std::string> unset = {}, std::optional<std::uint64_t> expected = std::nullopt,
            std::optional<std::uint32_t> schema = std::nullopt) {
  return Action{type, {std::move(c), std::move(id)}, std::move(fields), std::move(unset), expected, schema};
}

TEST_F(ValidationTest, EmptyTransaction) { ExpectInvalid(Transaction(), "empty"); }

TEST_F(ValidationTest, TooManyActions) {
  auto o = Opts();
  o.max_actions = 3;
  Transaction t;
  for (int i = 0; i < 4; ++i) t.Insert("c", "n" + std::to_string(i), {});
  ExpectInvalid(t, o, "4 actions, limit 3");
  Transaction checks;
  for (int i = 0; i < 4; ++i) checks.Check("c", i % 2 ? "a" : "b", 1);  // also duplicates
  ExpectInvalid(checks, o, "4 checks, limit 3");
  // At the limit it commits.
  Transaction ok;
  for (int i = 0; i < 3; ++i) ok.Insert("c", "n" + std::to_string(i), {});
  litetx::Database db(mem, o);
  EXPECT_TRUE(db.Commit(ok).ok());
}

TEST_F(ValidationTest, BadCollectionNames) {
  const std::string too_long(litetx::kMaxCollectionBytes + 1, 'x');
  for (const std::string& c : {std::string(), too_long, std::string("a\x01"), std::string("a\nb"),
                               std::string("\x7f"), std::string("\xc3"), std::string("\xc3\x28"),
                               std::string("\xf8\x88\x80\x80\x80"), std::string("__litetx"),
                               std::string("__litetx.txn"), std::string("__litetx_mine")}) {
    std::string what = "collection " + json::serialize(json::string(c));
    ExpectInvalidBothPaths(Make(ActionType::kInsert, c, "id"), what + " insert");
    ExpectInvalidBothPaths(Make(ActionType::kCheck, c, "id", {}, {}, 1), what + " check");
  }
}

TEST_F(ValidationTest, BadIds) {
  const std::string too_long(litetx::kMaxIdBytes + 1, 'x');
  for (const std::string& id : {std::string(), too_long, std::string("a\x1f"), std::string(1, '\0'),
                                std::string("\x80x"), std::string("\xe2\x82"), std::string("\xed\xa0")}) {
    std::string what = "id " + json::serialize(json::string(id));
    ExpectInvalidBothPaths(Make(ActionType::kInsert, "c", id), what + " insert");
    ExpectInvalidBothPaths(Make(ActionType::kUpdate, "c", id, {{"x", 1}}), what + " update");
    ExpectInvalidBothPaths(Make(ActionType::kDelete, "c", id), what + " delete");
  }
}

TEST_F(ValidationTest, OverlongAndSurrogateUtf8AreNotValidNames) {
  // RFC 3629: overlong forms (C0 80 is an overlong NUL), UTF-16 surrogates (ED A0 80) and
  // code points past U+10FFFF (F4 90 80 80, F5..F7 lead bytes) are not UTF-8.
  for (const std::string& s : {std::string("a\xc0\x80"), std::string("\xc1\xbf"),
                               std::string("\xe0\x80\xaf"), std::string("\xed\xa0\x80"),
                               std::string("\xf4\x90\x80\x80"), std::string("\xf5\x80\x80\x80")}) {
    std::string shown = json::serialize(json::string(s));
    EXPECT_FALSE(litetx::ValidateId(s).ok()) << shown;
    EXPECT_FALSE(litetx::ValidateCollection(s).ok()) << shown;
  }
}

TEST_F(ValidationTest, ReservedFields) {
  for (const char* f : {"_ltx", "_ltxv", "_ltx.v", "_ltx_anything"}) {
    std::string what = std::string("field ") + f;
    json::object fields{{f, 1}};
    ExpectInvalidBothPaths(Make(ActionType::kInsert, "c", "new", fields), what + " insert");
    ExpectInvalidBothPaths(Make(ActionType::kUpdate, "c", "b", fields), what + " update set");
    ExpectInvalidBothPaths(Make(ActionType::kUpdate, "c", "b", {{"ok", 1}}, {f}), what + " update unset");
    ExpectInvalidBothPaths(Make(ActionType::kAdjust, "c", "b", fields), what + " adjust");
  }
}

TEST_F(ValidationTest, MalformedActions) {
  ExpectInvalidBothPaths(Make(ActionType::kUpdate, "c", "b", {{"x", 1}, {"y", 2}}, {"z", "y"}), "set/unset overlap");
  ExpectInvalidBothPaths(Make(ActionType::kInsert, "c", "new", {}, {"x"}), "insert with unset");
  ExpectInvalidBothPaths(Make(ActionType::kInsert, "c", "new", {}, {}, 1), "insert with expected version");
  ExpectInvalidBothPaths(Make(ActionType::kAdjust, "c", "b"), "adjust without fields");
  ExpectInvalidBothPaths(Make(ActionType::kAdjust, "c", "b", {{"n", 1}}, {"m"}), "adjust with unset");
  ExpectInvalidBothPaths(Make(ActionType::kAdjust, "c", "b", {{"n", 1}}, {}, std::nullopt, 2), "adjust with schema");
  for (const char* delta : {R"({"n":"1"})", R"({"n":true})", R"({"n":null})", R"({"n":[1]})", R"({"n":{}})"}) {
    ExpectInvalidBothPaths(Make(ActionType::kAdjust, "c", "b", Obj(delta)), std::string("adjust delta ") + delta);
  }
  for (double d : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                   std::nan("")}) {
    ExpectInvalidBothPaths(Make(ActionType::kAdjust, "c", "b", {{"n", d}}), "adjust delta " + std::to_string(d));
  }
  ExpectInvalidBothPaths(Make(ActionType::kDelete, "c", "b", {{"x", 1}}), "delete with fields");
  ExpectInvalidBothPaths(Make(ActionType::kDelete, "c", "b", {}, {"x"}), "delete with unset");
  ExpectInvalidBothPaths(Make(ActionType::kDelete, "c", "b", {}, {}, std::nullopt, 2), "delete with schema");
  ExpectInvalidBothPaths(Make(ActionType::kCheck, "c", "b"), "check without expected version");
  ExpectInvalidBothPaths(Make(ActionType::kCheck, "c", "b", {{"x", 1}}, {}, 1), "check with fields");
  ExpectInvalidBothPaths(Make(ActionType::kCheck, "c", "b", {}, {}, 1, 2), "check with schema");
}

TEST_F(ValidationTest, SameDocumentTwice) {
  ExpectInvalid(Transaction().Adjust("c", "a", {{"n", 1}}).Adjust("c", "a", {{"n", 1}}), "adjust twice");
  ExpectInvalid(Transaction().Update("c", "a", {{"x", 1}}).Check("c", "a", 1), "update and check");
  ExpectInvalid(Transaction().Check("c", "a", 1).Check("c", "a", 1), "check twice");
  ExpectInvalid(Transaction().Insert("c", "new", {}).Adjust("c", "b", {{"n", 1}}).Delete("c", "new"),
                "insert then delete");
  // Same id in another collection is another document.
  litetx::Database db(mem, Opts());
  EXPECT_TRUE(db.Commit(Transaction().Insert("c", "x", {}).Insert("d", "x", {})).ok());
}

TEST_F(ValidationTest, OversizedDocument) {
  auto o = Opts();
  o.max_document_bytes = 200;
  json::object big{{"s", std::string(250, 'x')}};
  ExpectInvalid(Transaction().Insert("c", "new", big), o, "insert alone");
  ExpectInvalid(Transaction().Insert("c", "new", big).Adjust("c", "a", {{"n", 1}}), o, "insert in worklist");
  ExpectInvalid(Transaction().Update("c", "b", big), o, "update alone");
  ExpectInvalid(Transaction().Adjust("c", "a", {{"n", 1}}).Update("c", "b", big), o, "update in worklist");
  // Growing a stored document past the limit in steps fails at the step that crosses it.
  litetx::Database db(mem, o);
  json::object part{{"p", std::string(60, 'y')}};
  ASSERT_TRUE(db.Commit(Transaction().Update("c", "b", part)).ok());
  ExpectInvalid(Transaction().Update("c", "b", {{"q", std::string(120, 'z')}}), o, "update crossing");
}

TEST_F(ValidationTest, OversizedWorklist) {
  auto o = Opts();
  o.max_record_bytes = 400;
  Transaction t;
  for (int i = 0; i < 4; ++i) t.Insert("c", "n" + std::to_string(i), {{"s", std::string(100, 'x')}});
  ExpectInvalid(t, o, "4 inserts of ~100 bytes, 400-byte worklist");
  o.max_record_bytes = 8 << 20;
  litetx::Database db(mem, o);
  EXPECT_TRUE(db.Commit(t).ok());
}

}  // namespace
}  // namespace ltxtest
