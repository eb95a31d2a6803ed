// tests/nesting_test.cpp — the nesting limit of documents (Options::max_nesting_depth): a
// document nested far deeper than the limit is refused with kInvalidArgument before anything
// copies it (Commit and Database::Run, on the memory and the LMDB store, no crash, nothing
// written); a document exactly at the limit commits, goes through a transaction record and
// reads back; the limit can be set and is capped. The stores' own depth checks are in
// store_contract.cpp and lmdb_store_test.cpp.
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "engine/json_text.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Transaction;
using litetx::engine::CheckJson;
using litetx::engine::JsonProblem;

constexpr std::size_t kDefaultLimit = 64;  // Options::max_nesting_depth's default
constexpr std::size_t kVeryDeep = 100'000;

class NestingTest : public ::testing::TestWithParam<std::string>, public World {
 protected:
  void SetUp() override {
    if (GetParam() == "Lmdb") {
      lmdb_ = std::make_unique<LmdbScratch>();
      ASSERT_NE(lmdb_->store(), nullptr);
      store_ = lmdb_->store();
    } else {
      store_ = mem;
    }
    litetx::Database seed(store_, Opts());
    MustCommit(seed, Transaction().Insert("c", "a", {{"n", 1}}).Insert("c", "b", {{"n", 2}}));
  }

  // Commits `t` through a CountingStore and requires kInvalidArgument (mentioning `words` if
  // not empty) with no write at all and the store unchanged.
  void ExpectRefused(const Transaction& t, const std::string& what, const std::string& words,
                     const litetx::Options& o) {
    SCOPED_TRACE(what);
    auto counting = std::make_shared<litetx::CountingStore>(store_);
    litetx::Database db(counting, o);
    const Dump before = DumpStore(*store_, {"c"});
    auto r = db.Commit(t);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
    if (!words.empty()) {
      EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().ToString();
    }
    EXPECT_EQ(counting->counts().writes(), 0u);
    EXPECT_TRUE(SameDump(before, DumpStore(*store_, {"c"}))) << "a refused commit wrote";
  }
  void ExpectRefused(const Transaction& t, const std::string& what,
                     const std::string& words = "nest") {
    ExpectRefused(t, what, words, Opts());
  }

  std::shared_ptr<litetx::Store> store_;
  std::unique_ptr<LmdbScratch> lmdb_;
};

TEST_P(NestingTest, DeepDocumentIsRefusedByCommit) {
  for (bool arrays : {false, true}) {
    SCOPED_TRACE(arrays ? "objects and arrays" : "objects");
    DeepStorage storage;  // outlives the transactions below; dropping them never recurses
    auto deep = [&] { return Nested(kVeryDeep, arrays, storage.ptr()); };
    ExpectRefused(Transaction().Insert("c", "new", deep()), "insert alone");
    ExpectRefused(Transaction().Update("c", "b", {{"n", 3}}).Insert("c", "new", deep()),
                  "insert after an update");
    ExpectRefused(Transaction().Update("c", "a", deep()), "update alone");
    ExpectRefused(Transaction().Insert("c", "new", {{"k", 1}}).Update("c", "a", deep()),
                  "update after an insert");
    ExpectRefused(Transaction().Adjust("c", "a", deep()), "adjust", "");
  }
}

TEST_P(NestingTest, RunRefusesDeepDocument) {
  DeepStorage storage;
  litetx::Database db(store_, Opts());
  const Dump before = DumpStore(*store_, {"c"});
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    auto r = db.Run([&](litetx::TxnContext& tx) -> Status {
      switch (which) {
        case 0: return tx.Insert("c", "new", Nested(kVeryDeep, false, storage.ptr()));
        case 1: return tx.Update("c", "a", Nested(kVeryDeep, true, storage.ptr()));
        default: return tx.Adjust("c", "a", Nested(kVeryDeep, false, storage.ptr()));
      }
    });
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
  }
  EXPECT_TRUE(SameDump(before, DumpStore(*store_, {"c"})));
}

// Exactly at the limit: commits alone and through a record, is updated and rolled back with
// its restore data in the record, and reads back as written. One more level is refused.
TEST_P(NestingTest, DocumentAtTheLimitCommitsAndReadsBack) {
  litetx::Database db(store_, Opts());
  for (bool arrays : {false, true}) {
    SCOPED_TRACE(arrays ? "objects and arrays" : "objects");
    const std::string alone = arrays ? "alone-arrays" : "alone";
    const std::string paired = arrays ? "paired-arrays" : "paired";
    const json::object at_limit = Nested(kDefaultLimit, arrays);
    MustCommit(db, Transaction().Insert("c", alone, at_limit));
    MustCommit(db, Transaction().Insert("c", paired, at_limit).Update("c", "b", {{"n", 5}}));
    // First versions come from the clock (never below it); later ones count up from there.
    const std::uint64_t v_alone = ReadImage(db, "c", alone).version;
    const std::uint64_t v_paired = ReadImage(db, "c", paired).version;
    EXPECT_GE(v_alone, kFirstVersion);
    EXPECT_GE(v_paired, kFirstVersion);
    EXPECT_EQ(ReadImage(db, "c", alone), Found(v_alone, at_limit));
    EXPECT_EQ(ReadImage(db, "c", paired), Found(v_paired, at_limit));
    // An update that sets a field at the limit, through a record (restore holds the old value).
    json::object replaced = Nested(kDefaultLimit, !arrays);
    MustCommit(db, Transaction().Update("c", paired, replaced).Adjust("c", "b", {{"n", 1}}));
    EXPECT_EQ(ReadImage(db, "c", paired), Found(v_paired + 1, replaced));
    // Rolled back: the deep value comes back from the record's restore data.
    auto hook = std::make_shared<HookStore>(store_);
    hook->before = FailCalls(Op::kReplace, Key{"c", "b"}, 1, Code::kUnavailable);
    litetx::Database failing(hook, Opts());
    auto r = failing.Commit(
        Transaction().Update("c", paired, at_limit).Adjust("c", "b", {{"n", 1}}));
    EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
    EXPECT_EQ(ReadImage(db, "c", paired), Found(v_paired + 3, replaced));
    ExpectClean(*store_, {"c"});

    json::object over = Nested(kDefaultLimit + 1, arrays);
    ExpectRefused(Transaction().Insert("c", "over", over), "one level over, insert");
    ExpectRefused(Transaction().Update("c", "a", over), "one level over, update");
    ExpectRefused(Transaction().Update("c", "a", {{"x", 1}}).Insert("c", "over", over),
                  "one level over, insert after an update");
  }
}

// The limit can be lowered and raised; a setting below 1 acts as 1 and one above
// kMaxNestingDepth as kMaxNestingDepth, which commits (through a record too) and reads back.
TEST_P(NestingTest, LimitIsConfigurableAndCapped) {
  EXPECT_EQ(litetx::Options{}.max_nesting_depth, kDefaultLimit);
  litetx::Options o = Opts();
  o.max_nesting_depth = 3;
  litetx::Database three(store_, o);
  MustCommit(three, Transaction().Insert("c", "three", Nested(3, true)));
  ExpectRefused(Transaction().Insert("c", "four", Nested(4)), "4 levels, limit 3", "nest", o);
  ExpectRefused(Transaction().Update("c", "a", Nested(4, true)), "update, limit 3", "nest", o);

  o.max_nesting_depth = 0;  // acts as 1: flat documents only
  litetx::Database flat(store_, o);
  MustCommit(flat, Transaction().Insert("c", "flat", {{"x", 1}, {"y", "z"}}));
  ExpectRefused(Transaction().Insert("c", "two", {{"x", json::array{}}}), "2 levels, limit 0", "nest", o);

  o.max_nesting_depth = std::size_t{1} << 40;  // acts as kMaxNestingDepth
  litetx::Database capped(store_, o);
  const json::object at_cap = Nested(litetx::kMaxNestingDepth, true);
  MustCommit(capped, Transaction().Insert("c", "cap", at_cap).Update("c", "b", {{"n", 7}}));
  const std::uint64_t v_cap = ReadImage(capped, "c", "cap").version;
  EXPECT_GE(v_cap, kFirstVersion);
  EXPECT_EQ(ReadImage(capped, "c", "cap"), Found(v_cap, at_cap));
  MustCommit(capped, Transaction().Update("c", "cap", Nested(litetx::kMaxNestingDepth)).Update("c", "b", {{"n", 8}}));
  EXPECT_EQ(ReadImage(capped, "c", "cap"), Found(v_cap + 1, Nested(litetx::kMaxNestingDepth)));
  ExpectRefused(Transaction().Insert("c", "over-cap", Nested(litetx::kMaxNestingDepth + 1)),
                "one level over the cap", "nest", o);
  ExpectClean(*store_, {"c"});
}

INSTANTIATE_TEST_SUITE_P(Stores, NestingTest, ::testing::Values("Memory", "Lmdb"),
                         [](const auto& info) { return info.param; });

// CheckJson counts levels as documented and walks a value of any depth without recursion.
TEST(CheckJsonTest, CountsLevelsAndFindsNonFiniteNumbers) {
  EXPECT_EQ(CheckJson(json::object{}, 1, true), JsonProblem::kNone);
  EXPECT_EQ(CheckJson(json::object{}, 0, true), JsonProblem::kTooDeep);
  for (bool arrays : {false, true}) {
    for (std::size_t levels : {1, 2, 3, 10, 64}) {
      const json::object doc = Nested(levels, arrays);
      EXPECT_EQ(CheckJson(doc, levels, true), JsonProblem::kNone) << levels;
      EXPECT_EQ(CheckJson(doc, levels - 1, true), JsonProblem::kTooDeep) << levels;
      EXPECT_EQ(CheckJson(json::value(doc), 5, levels + 4, true), JsonProblem::kNone) << levels;
      EXPECT_EQ(CheckJson(json::value(doc), 5, levels + 3, true), JsonProblem::kTooDeep) << levels;
    }
  }
  const json::object wide{{"a", json::array{1, 2, json::object{{"b", json::array{}}}}},
                          {"c", json::object{{"d", 1.5}}}};
  EXPECT_EQ(CheckJson(wide, 4, true), JsonProblem::kNone);
  EXPECT_EQ(CheckJson(wide, 3, true), JsonProblem::kTooDeep);
  const json::object nan{{"a", json::array{1, json::object{{"b", std::nan("")}}}}};
  EXPECT_EQ(CheckJson(nan, 64, true), JsonProblem::kNotFinite);
  EXPECT_EQ(CheckJson(nan, 64, false), JsonProblem::kNone);
  EXPECT_EQ(CheckJson(json::value(-std::numeric_limits<double>::infinity()), 2, 64, true),
            JsonProblem::kNotFinite);
  // Many containers side by side (the walk's queue grows past its first, fixed-size part).
  json::object wide_many;
  for (int i = 0; i < 200; ++i) {
    wide_many["f" + std::to_string(i)] = json::array{json::object{{"x", json::array{i, 0.5}}}};
  }
  EXPECT_EQ(CheckJson(wide_many, 4, true), JsonProblem::kNone);
  EXPECT_EQ(CheckJson(wide_many, 3, true), JsonProblem::kTooDeep);
  wide_many["f17"].as_array()[0].as_object()["x"].as_array().push_back(std::nan(""));
  EXPECT_EQ(CheckJson(wide_many, 4, true), JsonProblem::kNotFinite);
  EXPECT_EQ(CheckJson(wide_many, 4, false), JsonProblem::kNone);
  wide_many["f150"].as_array()[0].as_object()["x"].as_array().push_back(json::array{});
  EXPECT_EQ(CheckJson(wide_many, 4, false), JsonProblem::kTooDeep);
  EXPECT_EQ(CheckJson(wide_many, 5, false), JsonProblem::kNone);
  DeepStorage storage;
  const json::object deep = Nested(kVeryDeep, true, storage.ptr());
  EXPECT_EQ(CheckJson(deep, kDefaultLimit, false), JsonProblem::kTooDeep);
  EXPECT_EQ(CheckJson(deep, kVeryDeep, true), JsonProblem::kNone);  // walks all of it
}

}  // namespace
}  // namespace ltxtest
