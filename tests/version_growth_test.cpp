// tests/version_growth_test.cpp — versions only grow for an id, across its whole life: after
// its tombstone (or "gone" placeholder) is purged by the collector, or over a collector's fence
// on an absent key, a new insert starts above every version the id had before, so an
// expected_version kept from an earlier life never matches the new document. Run on the memory
// store and on LMDB, through Commit's one-write and full paths and through Database::Run.
// Documents stored with small versions keep working.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "litetx/lmdb_store.h"
#include "test_util.h"

namespace ltxtest {
namespace {

namespace fs = std::filesystem;
using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnContext;

// Thrown by a store hook to simulate the death of the process making the call.
struct Crash {};

struct StoreParam {
  const char* name;
  bool lmdb;
  friend void PrintTo(const StoreParam& p, std::ostream* os) { *os << p.name; }
};

class VersionGrowthTest : public ::testing::TestWithParam<StoreParam> {
 protected:
  void SetUp() override {
    if (GetParam().lmdb) {
      litetx::LmdbOptions lo;
      lo.durability = litetx::LmdbDurability::kNoSync;
      auto s = litetx::LmdbStore::Open(dir_.str(), lo);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store = *s;
    } else {
      store = std::make_shared<litetx::MemoryStore>();
    }
    db = std::make_unique<litetx::Database>(store, Opts());
  }

  litetx::Options Opts() const {
    litetx::Options o;
    o.clock = clock;
    o.busy_timeout = 50ms;
    o.lease = 10s;
    return o;
  }
  CollectorOptions Gc() const {
    CollectorOptions o;
    o.engine = Opts();
    o.name = "gc-versions";
    o.purge_collections = {"c"};
    o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    o.tombstone_retention = 24h;
    return o;
  }
  // The version an insert of an absent id gets now: the clock in microseconds.
  std::uint64_t FreshNow() const { return static_cast<std::uint64_t>(clock->NowMillis()) * 1000; }

  std::uint64_t Commit1(const Transaction& txn) {
    auto r = db->Commit(txn);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && !r->versions.empty() ? r->versions.front() : 0;
  }
  std::uint64_t VersionOf(const std::string& id) {
    auto r = db->Read("c", id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->version : 0;
  }
  // Waits out the tombstone retention and purges; `id` must then be gone from the store.
  void Purge(const std::string& id) {
    clock->Advance(24h);
    Collector gc(store, Gc());
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_GE(gc.stats().purged, 1u);
    EXPECT_FALSE(Raw(*store, "c", id).has_value()) << "c/" << id << " was not purged";
  }
  // A first life of `id`: insert, two updates, delete. Returns every version it had.
  std::vector<std::uint64_t> FirstLife(const std::string& id) {
    std::vector<std::uint64_t> seen;
    seen.push_back(Commit1(Transaction().Insert("c", id, Obj(R"({"n":1})"))));
    seen.push_back(Commit1(Transaction().Update("c", id, Obj(R"({"n":2})"), {}, seen.back())));
    seen.push_back(Commit1(Transaction().Adjust("c", id, {{"n", 1}}, seen.back())));
    seen.push_back(Commit1(Transaction().Delete("c", id, seen.back())));
    EXPECT_EQ(seen[1], seen[0] + 1);
    EXPECT_EQ(seen[2], seen[0] + 2);
    EXPECT_EQ(seen[3], seen[0] + 4);  // pending delete +1, tombstone +1
    return seen;
  }
  // Every version of an earlier life, used as expected_version against the new life, fails.
  void ExpectStaleVersionsConflict(const std::string& id, const std::vector<std::uint64_t>& old,
                                   std::uint64_t now) {
    for (std::uint64_t v : old) {
      auto u = db->Commit(Transaction().Update("c", id, Obj(R"({"stale":true})"), {}, v));
      EXPECT_EQ(u.code(), Code::kConflict) << "expected_version " << v << " of the earlier life";
      ASSERT_TRUE(u.status().current_version().has_value());
      EXPECT_EQ(*u.status().current_version(), now);
      auto c = db->Commit(Transaction()
                              .Check("c", id, v)
                              .Update("c", "other", Obj(R"({"k":1})")));
      EXPECT_EQ(c.code(), Code::kConflict) << "check of version " << v;
    }
    EXPECT_EQ(BodyOf(*store, "c", id).if_contains("stale"), nullptr);
  }

  TempDir dir_;
  std::shared_ptr<litetx::ManualClock> clock = std::make_shared<litetx::ManualClock>();
  std::shared_ptr<litetx::Store> store;
  std::unique_ptr<litetx::Database> db;
};

INSTANTIATE_TEST_SUITE_P(Stores, VersionGrowthTest,
                         ::testing::Values(StoreParam{"Memory", false}, StoreParam{"Lmdb", true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_P(VersionGrowthTest, FreshInsertStartsAtTheClockInMicroseconds) {
  const std::uint64_t t0 = FreshNow();
  EXPECT_EQ(t0, 1'700'000'000'000'000u);  // ManualClock's start, in µs: exact in a double
  EXPECT_LT(t0, std::uint64_t{1} << 53);
  // One-write path, full path, and their reads agree.
  EXPECT_EQ(Commit1(Transaction().Insert("c", "one", Obj(R"({"n":1})"))), t0);
  clock->Advance(5ms);
  auto two = db->Commit(Transaction()
                            .Insert("c", "a", Obj(R"({"n":1})"))
                            .Insert("c", "b", Obj(R"({"n":2})")));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->versions, (std::vector<std::uint64_t>{t0 + 5000, t0 + 5000}));
  EXPECT_EQ(ReadImage(*db, "c", "one"), Found(t0, Obj(R"({"n":1})")));
  EXPECT_EQ(ReadImage(*db, "c", "a"), Found(t0 + 5000, Obj(R"({"n":1})")));
  EXPECT_EQ(MetaOf(*store, "c", "b").version, t0 + 5000);
  // Every other rule steps from there.
  EXPECT_EQ(Commit1(Transaction().Update("c", "one", Obj(R"({"n":2})"), {}, t0)), t0 + 1);
  EXPECT_EQ(Commit1(Transaction().Delete("c", "one", t0 + 1)), t0 + 3);
  EXPECT_EQ(Commit1(Transaction().Insert("c", "one", Obj(R"({"n":3})"))), t0 + 4);  // over the tombstone
}

TEST_P(VersionGrowthTest, ReinsertAfterTheTombstoneIsPurgedRejectsStaleVersions) {
  const std::vector<std::uint64_t> old = FirstLife("x");
  Purge("x");
  EXPECT_EQ(ReadImage(*db, "c", "x"), NotFoundImage());
  const std::uint64_t expected = FreshNow();
  const std::uint64_t now = Commit1(Transaction().Insert("c", "x", Obj(R"({"n":10})")));
  EXPECT_EQ(now, expected);
  EXPECT_GT(now, *std::max_element(old.begin(), old.end()));
  EXPECT_EQ(VersionOf("x"), now);
  ExpectStaleVersionsConflict("x", old, now);
  // The new life's own version works.
  EXPECT_EQ(Commit1(Transaction().Update("c", "x", Obj(R"({"n":11})"), {}, now)), now + 1);
}

TEST_P(VersionGrowthTest, ReinsertOnTheFullPathAfterThePurgeRejectsStaleVersions) {
  const std::vector<std::uint64_t> old = FirstLife("x");
  Purge("x");
  const std::uint64_t expected = FreshNow();
  auto r = db->Commit(Transaction()
                          .Insert("c", "x", Obj(R"({"n":10})"))
                          .Insert("c", "y", Obj(R"({"n":20})")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{expected, expected}));
  EXPECT_GT(r->versions[0], *std::max_element(old.begin(), old.end()));
  EXPECT_EQ(VersionOf("x"), expected);
  ExpectStaleVersionsConflict("x", old, expected);
}

TEST_P(VersionGrowthTest, ReinsertThroughRunAfterThePurgeRejectsStaleVersions) {
  const std::vector<std::uint64_t> old = FirstLife("x");
  Purge("x");
  const std::uint64_t expected = FreshNow();
  // Inserted and read back in one Run (the read-your-writes image), with a second insert.
  auto r = db->Run([](TxnContext& ctx) -> Status {
    if (Status s = ctx.Insert("c", "x", Obj(R"({"n":10})")); !s.ok()) return s;
    auto mine = ctx.Get("c", "x");
    if (!mine.ok()) return mine.status();
    if (mine->state != litetx::DocumentState::kFound) return Status::Corruption("own insert unseen");
    return ctx.Insert("c", "y", Obj(R"({"n":20})"));
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{expected, expected}));
  EXPECT_EQ(VersionOf("x"), expected);
  ExpectStaleVersionsConflict("x", old, expected);
  // Run's optimistic lock with an old version fails too.
  auto stale = db->Run([&](TxnContext& ctx) -> Status {
    return ctx.Update("c", "x", Obj(R"({"n":0})"), {}, old.front());
  });
  EXPECT_EQ(stale.code(), Code::kConflict);
  EXPECT_EQ(VersionOf("x"), expected);
}

TEST_P(VersionGrowthTest, ReinsertOverACollectorFenceOnAPurgedIdRejectsStaleVersions) {
  const std::vector<std::uint64_t> old = FirstLife("x");
  Purge("x");
  // A coordinator inserting x (and y) dies right after writing its record: the collector
  // claims it and fences the absent keys with "gone" placeholders at version 0.
  auto hook = std::make_shared<HookStore>(store);
  hook->after = [](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.is_write() && c.on_record() && s.ok()) throw Crash{};
    return std::nullopt;
  };
  {
    litetx::Options classic = Opts();
    classic.parallel_commit = false;  // the record lands alone, before any apply
    litetx::Database dying(hook, classic);
    EXPECT_THROW((void)dying.Commit(Transaction()
                                        .Insert("c", "x", Obj(R"({"n":5})"))
                                        .Insert("c", "y", Obj(R"({"n":6})"))),
                 Crash);
  }
  clock->Advance(10s);
  CollectorOptions go = Gc();
  go.purge_collections.clear();
  Collector gc(store, go);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
  const litetx::engine::Meta fence = MetaOf(*store, "c", "x");
  ASSERT_TRUE(fence.gone);
  ASSERT_EQ(fence.version, 0u);
  EXPECT_EQ(ReadImage(*db, "c", "x"), NotFoundImage());

  // One-write path over the fence on x; full path over the fence on y.
  const std::uint64_t expected = FreshNow();
  const std::uint64_t now = Commit1(Transaction().Insert("c", "x", Obj(R"({"n":10})")));
  EXPECT_EQ(now, expected);
  EXPECT_GT(now, *std::max_element(old.begin(), old.end()));
  ExpectStaleVersionsConflict("x", old, now);
  auto y = db->Commit(Transaction()
                          .Insert("c", "y", Obj(R"({"n":20})"))
                          .Update("c", "x", Obj(R"({"n":11})"), {}, now));
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->versions, (std::vector<std::uint64_t>{expected, now + 1}));
  EXPECT_EQ(VersionOf("y"), expected);
}

TEST_P(VersionGrowthTest, RolledBackInsertOfAPurgedIdKeepsCounting) {
  const std::vector<std::uint64_t> old = FirstLife("x");
  Purge("x");
  const std::uint64_t base = FreshNow();
  // The insert of x lands (held at base) and is rolled back because the commit point keeps
  // failing: a placeholder at base + 1.
  auto hook = std::make_shared<HookStore>(store);
  hook->before = [](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) return Status(Code::kUnavailable, "injected commit point failure");
    return std::nullopt;
  };
  litetx::Options classic = Opts();
  classic.parallel_commit = false;  // a commit point that fails before the commit
  litetx::Database failing(hook, classic);
  auto r = failing.Commit(Transaction()
                              .Insert("c", "x", Obj(R"({"n":5})"))
                              .Insert("c", "y", Obj(R"({"n":6})")));
  EXPECT_EQ(r.code(), Code::kUnavailable);
  EXPECT_EQ(ReadImage(*db, "c", "x"), NotFoundImage());
  const litetx::engine::Meta ph = MetaOf(*store, "c", "x");
  EXPECT_TRUE(ph.gone);
  EXPECT_EQ(ph.version, base + 1);
  // The next insert continues from the placeholder.
  clock->Advance(1ms);
  const std::uint64_t now = Commit1(Transaction().Insert("c", "x", Obj(R"({"n":10})")));
  EXPECT_EQ(now, base + 2);
  ExpectStaleVersionsConflict("x", old, now);
}

TEST_P(VersionGrowthTest, EveryLifeOfAnIdStartsAboveTheLastOne) {
  std::uint64_t highest = 0;
  for (int life = 0; life < 4; ++life) {
    SCOPED_TRACE("life " + std::to_string(life));
    const std::vector<std::uint64_t> seen = FirstLife("x");
    EXPECT_GT(seen.front(), highest);
    highest = *std::max_element(seen.begin(), seen.end());
    Purge("x");
  }
}

TEST_P(VersionGrowthTest, DocumentsStoredWithSmallVersionsKeepWorking) {
  // Stored before versions started from the clock: small numbers, read and written as before.
  PutMeta(*store, {"c", "live"}, Obj(R"({"n":1})"), LiveMeta(3));
  litetx::engine::Meta tomb = LiveMeta(5, 0);
  tomb.deleted = true;
  PutMeta(*store, {"c", "tomb"}, {}, tomb);
  litetx::engine::Meta gone = LiveMeta(2, 0);
  gone.gone = true;
  PutMeta(*store, {"c", "gone"}, {}, gone);

  EXPECT_EQ(ReadImage(*db, "c", "live"), Found(3, Obj(R"({"n":1})")));
  EXPECT_EQ(ReadImage(*db, "c", "tomb"), DeletedImage(5));
  EXPECT_EQ(Commit1(Transaction().Update("c", "live", Obj(R"({"n":2})"), {}, 3)), 4u);
  EXPECT_EQ(Commit1(Transaction().Insert("c", "tomb", Obj(R"({"n":1})"))), 6u);
  EXPECT_EQ(Commit1(Transaction().Insert("c", "gone", Obj(R"({"n":1})"))), 3u);
  auto r = db->Commit(Transaction().Check("c", "live", 4).Adjust("c", "tomb", {{"n", 1}}, 6));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, (std::vector<std::uint64_t>{4, 7}));
}

}  // namespace
}  // namespace ltxtest
