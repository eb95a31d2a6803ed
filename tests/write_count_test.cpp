// tests/write_count_test.cpp — store round trips per transaction, counted with CountingStore:
// one write on the fast path, 2N+3 for N write actions, none for checks only; and nothing left
// behind (no references, no records) afterwards.
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::CountingStore;
using litetx::Transaction;

class WriteCountTest : public ::testing::Test, public World {
 protected:
  std::shared_ptr<CountingStore> counting = std::make_shared<CountingStore>(mem);
  litetx::Database db{counting, Opts()};
  std::unique_ptr<litetx::Database> direct = Direct();

  void Seed(int n) {
    for (int i = 0; i < n; ++i) {
      MustCommit(*direct, Transaction().Insert("c", "d" + std::to_string(i),
                                               json::object{{"n", 100}, {"s", "x"}}));
    }
  }
};

TEST_F(WriteCountTest, FastPathIsOneWriteAndNoRecord) {
  Seed(1);
  struct Case {
    const char* name;
    Transaction txn;
  };
  std::vector<Case> cases;
  cases.push_back({"insert", Transaction().Insert("c", "fresh", {{"a", 1}})});
  cases.push_back({"update", Transaction().Update("c", "d0", {{"a", 1}}, {"s"})});
  cases.push_back({"adjust", Transaction().Adjust("c", "d0", {{"n", 5}})});
  cases.push_back({"delete", Transaction().Delete("c", "d0")});
  cases.push_back({"insert over tombstone", Transaction().Insert("c", "d0", {{"b", 2}})});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    counting->Reset();
    MustCommit(db, c.txn);
    auto n = counting->counts();
    // A delete also writes its tombstone index entry, in the same batch (one round trip).
    const bool del = std::string(c.name) == "delete";
    EXPECT_EQ(n.writes(), del ? 2u : 1u);
    EXPECT_EQ(n.creates, del ? 1u : (std::string(c.name) == "insert" ? 1u : 0u));
    EXPECT_EQ(n.batches, del ? 1u : 0u);
    EXPECT_EQ(n.scans, 0u);
    EXPECT_EQ(RecordCount(*mem), 0u);
  }
  ExpectClean(*mem, {"c"});
}

TEST_F(WriteCountTest, NWriteActionsCost2NPlus3Writes) {
  for (int n : {2, 3, 5, 8}) {
    SCOPED_TRACE("N=" + std::to_string(n));
    World fresh;
    auto cs = std::make_shared<CountingStore>(fresh.mem);
    litetx::Database d(cs, fresh.Opts());
    auto direct_db = fresh.Direct();
    // Existing documents for the update/adjust/delete actions.
    for (int i = 0; i < n; ++i) {
      MustCommit(*direct_db, Transaction().Insert("c", "d" + std::to_string(i), {{"n", 1}}));
    }
    Transaction t;
    for (int i = 0; i < n; ++i) {
      std::string id = "d" + std::to_string(i);
      switch (i % 4) {
        case 0: t.Insert("c", "new" + std::to_string(i), {{"a", i}}); break;
        case 1: t.Update("c", id, {{"u", i}}, {"n"}); break;
        case 2: t.Adjust("c", id, {{"n", i}}); break;
        case 3: t.Delete("c", id); break;
      }
    }
    auto info = MustCommit(d, t);
    auto counts = cs->counts();
    EXPECT_EQ(counts.writes(), static_cast<std::uint64_t>(2 * n + 3));
    EXPECT_EQ(counts.erases, 0u);  // the record becomes an outcome marker, erased by the GC
    EXPECT_EQ(counts.creates, 1u + static_cast<std::uint64_t>(n / 4 + (n % 4 > 0)));  // record + inserts
    EXPECT_EQ(info.versions.size(), static_cast<std::size_t>(n));
    ExpectClean(*fresh.mem, {"c"});
  }
}

TEST_F(WriteCountTest, OneWritePlusChecksUsesTheWorklist) {
  Seed(3);
  counting->Reset();
  MustCommit(db, Transaction().Adjust("c", "d0", {{"n", 1}}).Check("c", "d1", V(1)).Check("c", "d2", V(1)));
  EXPECT_EQ(counting->counts().writes(), 5u);  // 2*1 + 3
  ExpectClean(*mem, {"c"});
}

TEST_F(WriteCountTest, MixedWritesAndChecksCountOnlyWrites) {
  Seed(4);
  counting->Reset();
  MustCommit(db, Transaction()
                     .Adjust("c", "d0", {{"n", 1}})
                     .Check("c", "d1", V(1))
                     .Update("c", "d2", {{"x", 1}})
                     .Check("c", "d3", V(1)));
  EXPECT_EQ(counting->counts().writes(), 7u);  // 2*2 + 3
  ExpectClean(*mem, {"c"});
}

TEST_F(WriteCountTest, OnlyChecksWriteNothing) {
  Seed(5);
  for (int n : {1, 2, 5}) {
    counting->Reset();
    Transaction t;
    for (int i = 0; i < n; ++i) t.Check("c", "d" + std::to_string(i), V(1));
    auto info = MustCommit(db, t);
    EXPECT_EQ(counting->counts().writes(), 0u) << n << " checks";
    EXPECT_EQ(info.versions, std::vector<std::uint64_t>(n, V(1)));
  }
  // A failing check writes nothing either.
  counting->Reset();
  auto r = db.Commit(Transaction().Check("c", "d0", V(1)).Check("c", "d1", 9));
  EXPECT_EQ(r.code(), Code::kConflict);
  EXPECT_EQ(counting->counts().writes(), 0u);
}

TEST_F(WriteCountTest, PreconditionFailuresWriteNothing) {
  Seed(2);
  counting->Reset();
  EXPECT_EQ(db.Commit(Transaction().Adjust("c", "d0", {{"n", 1}}).Adjust("c", "missing", {{"n", 1}}))
                .code(),
            Code::kNotFound);
  EXPECT_EQ(db.Commit(Transaction().Update("c", "d0", {{"n", 1}}, {}, 7)).code(), Code::kConflict);
  EXPECT_EQ(db.Commit(Transaction().Insert("c", "d1", {}).Insert("c", "z", {})).code(),
            Code::kConflict);
  EXPECT_EQ(counting->counts().writes(), 0u);
}

}  // namespace
}  // namespace ltxtest
