// tests/written_cache_test.cpp — Options::written_cache_bytes (engine/doc_cache.h) under a
// hostile user and scheduler: a Database evaluates a write on the image it last wrote and sends
// its compare-and-swap without reading. Whatever another Database, a raw store write, a lost
// reply or a concurrent thread did meanwhile, every outcome (code, current_version, data,
// versions) must be the one a fresh read would have given.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/doc_cache.h"
#include "engine/json_text.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::CountingStore;
using litetx::Database;
using litetx::DocumentState;
using litetx::Options;
using litetx::Transaction;

constexpr const char* kC = "c";

Key K(const std::string& id) { return Key{kC, id}; }

// Rewrites the stored document through the raw Store API: `field` set to `v`, metadata (and so
// the engine's version number) untouched. Only the store revision changes.
void RawSet(litetx::Store& store, const std::string& id, const std::string& field,
            json::value v) {
  auto g = store.Get(K(id));
  ASSERT_TRUE(g.ok() && g->has_value());
  json::object val = (*g)->value;
  val[field] = std::move(v);
  ASSERT_TRUE(store.Replace(K(id), (*g)->revision, val).ok());
}
// Erases the stored document through the raw Store API (a purge).
void RawErase(litetx::Store& store, const std::string& id) {
  auto g = store.Get(K(id));
  ASSERT_TRUE(g.ok() && g->has_value());
  ASSERT_TRUE(store.Erase(K(id), (*g)->revision).ok());
}

struct Mode {
  bool parallel;
  bool background;
  std::string Name() const {
    return std::string(parallel ? "parallel" : "classic") + "/" +
           (background ? "background" : "inline");
  }
};
const std::vector<Mode> kModes = {{false, false}, {true, false}, {false, true}, {true, true}};

Options WithMode(Options o, Mode m) {
  o.parallel_commit = m.parallel;
  o.finish_in_background = m.background;
  return o;
}

class WrittenCacheTest : public ::testing::Test, public World {
 protected:
  std::shared_ptr<CountingStore> counting = std::make_shared<CountingStore>(mem);
  // The Database under test (its cache on, the default budget) and another one on the same
  // store (its own cache): each one's writes make the other's images stale.
  std::unique_ptr<Database> a = std::make_unique<Database>(counting, Opts());
  std::unique_ptr<Database> b = Direct();

  Image Read(const std::string& id) { return ReadImage(*b, kC, id); }

  // A inserts `id`, then writes it once more; the second write must come from the cache (no
  // read), so that the tests below do exercise cached images.
  void Warm(const std::string& id, json::object body) {
    MustCommit(*a, Transaction().Insert(kC, id, body));
    counting->Reset();
    MustCommit(*a, Transaction().Update(kC, id, {{"warm", true}}));
    EXPECT_EQ(counting->counts().gets, 0u) << "the cache was not used";
    EXPECT_EQ(counting->counts().writes(), 1u);
  }
};

// ---------------------------------------------------------------------------------------------
// The cache is in use at all (otherwise the other tests prove nothing).

TEST_F(WrittenCacheTest, SecondWriteIsSentWithoutARead) {
  MustCommit(*a, Transaction().Insert(kC, "x", {{"n", 1}}));
  for (int i = 0; i < 3; ++i) {
    counting->Reset();
    MustCommit(*a, Transaction().Adjust(kC, "x", {{"n", 1}}));
    EXPECT_EQ(counting->counts().gets, 0u);
    EXPECT_EQ(counting->counts().writes(), 1u);
  }
  EXPECT_EQ(Read("x"), Found(V(4), {{"n", 4}}));
  // Budget 0: no cache, every write reads first.
  auto o = Opts();
  o.written_cache_bytes = 0;
  Database off(counting, o);
  for (int i = 0; i < 3; ++i) {
    counting->Reset();
    MustCommit(off, Transaction().Adjust(kC, "x", {{"n", 1}}));
    EXPECT_EQ(counting->counts().gets, 1u);
  }
  EXPECT_EQ(Read("x"), Found(V(7), {{"n", 7}}));
}

// ---------------------------------------------------------------------------------------------
// 1. Stale images after another Database or a raw store write.

TEST_F(WrittenCacheTest, StaleImageUpdateAdjustDeleteApplyToTheCurrentDocument) {
  Warm("x", {{"n", 1}, {"s", "a"}});  // V2, cached
  MustCommit(*b, Transaction().Update(kC, "x", {{"s", "b"}, {"m", 7}}));  // V3
  counting->Reset();
  auto r = MustCommit(*a, Transaction().Adjust(kC, "x", {{"n", 10}}));
  EXPECT_EQ(r.versions, std::vector<std::uint64_t>{V(4)});
  EXPECT_EQ(Read("x"), Found(V(4), {{"n", 11}, {"s", "b"}, {"warm", true}, {"m", 7}}));
  // One failed compare-and-swap at the stale revision, one read, one write that lands.
  EXPECT_EQ(counting->counts().gets, 1u);
  EXPECT_EQ(counting->counts().replaces, 2u);
  EXPECT_EQ(counting->counts().writes(), 2u);

  MustCommit(*b, Transaction().Adjust(kC, "x", {{"n", 100}}));  // V5
  r = MustCommit(*a, Transaction().Update(kC, "x", {{"u", 1}}, {"m", "warm"}));
  EXPECT_EQ(r.versions, std::vector<std::uint64_t>{V(6)});
  EXPECT_EQ(Read("x"), Found(V(6), {{"n", 111}, {"s", "b"}, {"u", 1}}));

  MustCommit(*b, Transaction().Update(kC, "x", {{"v", 2}}));  // V7
  r = MustCommit(*a, Transaction().Delete(kC, "x"));
  EXPECT_EQ(r.versions, std::vector<std::uint64_t>{V(9)});  // pending delete V8, tombstone V9
  EXPECT_EQ(Read("x"), DeletedImage(V(9)));
  ExpectClean(*mem, {kC});
  EXPECT_EQ(RecordCount(*mem), 0u);
}

TEST_F(WrittenCacheTest, RawStoreWriteKeepingTheVersionIsNotOverwritten) {
  Warm("x", {{"n", 1}, {"s", "a"}});  // V2
  // A hostile raw write: same engine version, different content, new store revision.
  RawSet(*mem, "x", "n", 500);
  RawSet(*mem, "x", "extra", "raw");
  auto r = MustCommit(*a, Transaction().Adjust(kC, "x", {{"n", 1}}, V(2)));
  EXPECT_EQ(r.versions, std::vector<std::uint64_t>{V(3)});
  Image img = Read("x");
  EXPECT_EQ(img.version, V(3));
  EXPECT_EQ(img.doc.at("n"), json::value(501));
  EXPECT_EQ(img.doc.at("extra"), json::value("raw"));
  EXPECT_EQ(img.doc.at("s"), json::value("a"));
  // A raw rewrite of the very same bytes: only the revision moves; still right.
  RawSet(*mem, "x", "n", 501);
  MustCommit(*a, Transaction().Update(kC, "x", {{"s", "z"}}));
  img = Read("x");
  EXPECT_EQ(img.version, V(4));
  EXPECT_EQ(img.doc.at("n"), json::value(501));
  EXPECT_EQ(img.doc.at("s"), json::value("z"));
}

// ---------------------------------------------------------------------------------------------
// 2. Expected versions decided on the current document.

TEST_F(WrittenCacheTest, ExpectedVersionsOnTheOneWritePath) {
  Warm("x", {{"n", 1}});                                          // V2, cached
  MustCommit(*b, Transaction().Update(kC, "x", {{"b", 1}}));      // V3
  // The new version: must succeed although the cached image says V2.
  auto r = a->Commit(Transaction().Update(kC, "x", {{"a", 1}}, {}, V(3)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->versions, std::vector<std::uint64_t>{V(4)});
  EXPECT_EQ(Read("x"), Found(V(4), {{"n", 1}, {"warm", true}, {"b", 1}, {"a", 1}}));

  MustCommit(*b, Transaction().Update(kC, "x", {{"b", 2}}));  // V5
  // The old version, which is exactly the cached image's: kConflict naming V5.
  for (auto txn : {Transaction().Update(kC, "x", {{"a", 2}}, {}, V(4)),
                   Transaction().Adjust(kC, "x", {{"n", 1}}, V(4)),
                   Transaction().Delete(kC, "x", V(4))}) {
    Dump before = DumpStore(*mem, {kC});
    auto bad = a->Commit(txn);
    ASSERT_EQ(bad.code(), Code::kConflict) << bad.status().ToString();
    EXPECT_EQ(bad.status().current_version(), V(5));
    EXPECT_TRUE(SameDump(before, DumpStore(*mem, {kC}))) << "a failed commit wrote something";
    // The next try with the same stale expectation (the image was taken, then re-read).
    bad = a->Commit(txn);
    EXPECT_EQ(bad.code(), Code::kConflict);
  }
  EXPECT_EQ(Read("x"), Found(V(5), {{"n", 1}, {"warm", true}, {"b", 2}, {"a", 1}}));
  // Deletes with the right version after a stale image.
  MustCommit(*a, Transaction().Update(kC, "x", {{"c", 1}}));  // V6, cached
  MustCommit(*b, Transaction().Update(kC, "x", {{"c", 2}}));  // V7
  auto d = a->Commit(Transaction().Delete(kC, "x", V(7)));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(Read("x"), DeletedImage(V(9)));
}

TEST(WrittenCacheMulti, ExpectedVersionsWithOneStaleDocument) {
  for (Mode m : kModes) {
    SCOPED_TRACE(m.Name());
    World w;
    Database a(w.mem, WithMode(w.Opts(), m));
    auto b = w.Direct();
    MustCommit(a, Transaction().Insert(kC, "x", {{"n", 0}}).Insert(kC, "y", {{"n", 0}}));
    a.Flush();
    MustCommit(a, Transaction().Adjust(kC, "x", {{"n", 1}}).Adjust(kC, "y", {{"n", 1}}));  // V2
    a.Flush();
    MustCommit(*b, Transaction().Adjust(kC, "x", {{"n", 10}}));  // x V3
    // Old expected version (the cached one): kConflict naming V3, nothing changes.
    auto bad = a.Commit(
        Transaction().Adjust(kC, "x", {{"n", 1}}, V(2)).Adjust(kC, "y", {{"n", 1}}, V(2)));
    ASSERT_EQ(bad.code(), Code::kConflict) << bad.status().ToString();
    EXPECT_EQ(bad.status().current_version(), V(3));
    a.Flush();
    Image x = ReadImage(*b, kC, "x"), y = ReadImage(*b, kC, "y");
    EXPECT_EQ(x, Found(V(3), {{"n", 11}}));
    EXPECT_EQ(y.doc, json::object({{"n", 1}}));
    // The new expected versions: commits.
    MustCommit(*b, Transaction().Adjust(kC, "x", {{"n", 10}}));  // x V4
    auto ok = a.Commit(Transaction()
                           .Adjust(kC, "x", {{"n", 1}}, V(4))
                           .Adjust(kC, "y", {{"n", 1}}, y.version));
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ(ok->versions, (std::vector<std::uint64_t>{V(5), y.version + 1}));
    a.Flush();
    EXPECT_EQ(ReadImage(*b, kC, "x"), Found(V(5), {{"n", 22}}));
    EXPECT_EQ(ReadImage(*b, kC, "y"), Found(y.version + 1, {{"n", 2}}));
    ExpectClean(*w.mem, {kC});
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Deleted, re-inserted and purged behind the cache.

TEST_F(WrittenCacheTest, DeletedByAnotherDatabaseIsReportedDeleted) {
  Warm("x", {{"n", 1}});                               // V2, cached as live
  MustCommit(*b, Transaction().Delete(kC, "x"));       // tombstone V4
  for (auto txn : {Transaction().Update(kC, "x", {{"a", 1}}),
                   Transaction().Adjust(kC, "x", {{"n", 1}}),
                   Transaction().Delete(kC, "x"),
                   Transaction().Update(kC, "x", {{"a", 1}}, {}, V(2))}) {
    MustCommit(*a, Transaction().Insert(kC, "pad", {{"i", 0}}));  // unrelated traffic
    MustCommit(*a, Transaction().Delete(kC, "pad"));
    Dump before = DumpStore(*mem, {kC});
    auto r = a->Commit(txn);
    EXPECT_EQ(r.code(), Code::kDeleted) << r.status().ToString();
    EXPECT_TRUE(SameDump(before, DumpStore(*mem, {kC})));
  }
  EXPECT_EQ(Read("x"), DeletedImage(V(4)));
  // Multi-document, the stale document second and first.
  for (Mode m : kModes) {
    SCOPED_TRACE(m.Name());
    World w;
    Database a2(w.mem, WithMode(w.Opts(), m));
    auto b2 = w.Direct();
    MustCommit(a2, Transaction().Insert(kC, "x", {{"n", 0}}).Insert(kC, "y", {{"n", 0}}));
    a2.Flush();
    MustCommit(*b2, Transaction().Delete(kC, "x"));
    for (auto txn : {Transaction().Adjust(kC, "y", {{"n", 1}}).Adjust(kC, "x", {{"n", 1}}),
                     Transaction().Adjust(kC, "x", {{"n", 1}}).Adjust(kC, "y", {{"n", 1}})}) {
      auto r = a2.Commit(txn);
      EXPECT_EQ(r.code(), Code::kDeleted) << r.status().ToString();
      a2.Flush();
      EXPECT_EQ(ReadImage(*b2, kC, "x"), DeletedImage(V(3)));
      EXPECT_EQ(ReadImage(*b2, kC, "y").doc, json::object({{"n", 0}}));
      ExpectClean(*w.mem, {kC});
    }
  }
}

TEST_F(WrittenCacheTest, CachedTombstoneButReinsertedByAnotherDatabase) {
  MustCommit(*a, Transaction().Insert(kC, "x", {{"n", 1}}));  // V1
  MustCommit(*a, Transaction().Delete(kC, "x"));              // tombstone V3, cached
  MustCommit(*b, Transaction().Insert(kC, "x", {{"n", 2}}));  // V4
  Dump before = DumpStore(*mem, {kC});
  auto r = a->Commit(Transaction().Insert(kC, "x", {{"n", 3}}));
  ASSERT_EQ(r.code(), Code::kConflict) << r.status().ToString();
  EXPECT_EQ(r.status().current_version(), V(4));
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {kC})));
  EXPECT_EQ(Read("x"), Found(V(4), {{"n", 2}}));

  // A cached tombstone, and an update of the re-inserted document: applies to B's document.
  MustCommit(*a, Transaction().Delete(kC, "x"));              // tombstone V6, cached
  MustCommit(*b, Transaction().Insert(kC, "x", {{"n", 5}}));  // V7
  auto u = a->Commit(Transaction().Adjust(kC, "x", {{"n", 1}}, V(7)));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(Read("x"), Found(V(8), {{"n", 6}}));

  // Multi-document: a cached tombstone re-inserted elsewhere, the insert must conflict.
  for (Mode m : kModes) {
    SCOPED_TRACE(m.Name());
    World w;
    Database a2(w.mem, WithMode(w.Opts(), m));
    auto b2 = w.Direct();
    MustCommit(a2, Transaction().Insert(kC, "x", {{"n", 0}}).Insert(kC, "y", {{"n", 0}}));
    MustCommit(a2, Transaction().Delete(kC, "x").Adjust(kC, "y", {{"n", 1}}));  // x V3
    a2.Flush();
    MustCommit(*b2, Transaction().Insert(kC, "x", {{"n", 9}}));  // x V4
    auto c = a2.Commit(Transaction().Adjust(kC, "y", {{"n", 1}}).Insert(kC, "x", {{"n", 1}}));
    ASSERT_EQ(c.code(), Code::kConflict) << c.status().ToString();
    EXPECT_EQ(c.status().current_version(), V(4));
    a2.Flush();
    EXPECT_EQ(ReadImage(*b2, kC, "x"), Found(V(4), {{"n", 9}}));
    EXPECT_EQ(ReadImage(*b2, kC, "y").doc, json::object({{"n", 1}}));
    ExpectClean(*w.mem, {kC});
  }
}

TEST_F(WrittenCacheTest, PurgedBehindTheCache) {
  // A live image cached, the document erased: an update finds nothing, an insert succeeds and
  // starts a new version history (from the clock, not from the cached version).
  Warm("x", {{"n", 1}});
  RawErase(*mem, "x");
  auto u = a->Commit(Transaction().Update(kC, "x", {{"a", 1}}));
  EXPECT_EQ(u.code(), Code::kNotFound) << u.status().ToString();
  Warm("y", {{"n", 1}});
  MustCommit(*a, Transaction().Update(kC, "y", {{"a", 1}}));  // V3, cached
  RawErase(*mem, "y");
  clock->Advance(std::chrono::seconds(10));
  auto i = a->Commit(Transaction().Insert(kC, "y", {{"n", 2}}));
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_EQ(i->versions, std::vector<std::uint64_t>{FirstVersionAt(*clock)});
  EXPECT_EQ(Read("y"), Found(FirstVersionAt(*clock), {{"n", 2}}));
  // A cached tombstone purged: the insert lands on the absent key.
  MustCommit(*a, Transaction().Insert(kC, "z", {{"n", 1}}));
  MustCommit(*a, Transaction().Delete(kC, "z"));  // tombstone cached
  RawErase(*mem, "z");
  clock->Advance(std::chrono::seconds(10));
  auto z = a->Commit(Transaction().Insert(kC, "z", {{"n", 3}}));
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(Read("z"), Found(FirstVersionAt(*clock), {{"n", 3}}));
}

// ---------------------------------------------------------------------------------------------
// 4. Adjust preconditions decided on the real state.

TEST_F(WrittenCacheTest, AdjustPreconditionsAreDecidedOnTheRealState) {
  Warm("x", {{"n", 1}});                                            // cached without "m"
  MustCommit(*b, Transaction().Update(kC, "x", {{"m", 40}}));        // V3
  auto r = a->Commit(Transaction().Adjust(kC, "x", {{"m", 2}}));    // missing only in the cache
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read("x"), Found(V(4), {{"n", 1}, {"warm", true}, {"m", 42}}));

  MustCommit(*a, Transaction().Update(kC, "x", {{"k", 1}}));         // V5, cached with "k"
  MustCommit(*b, Transaction().Update(kC, "x", {}, {"k"}));          // V6: "k" gone
  Dump before = DumpStore(*mem, {kC});
  r = a->Commit(Transaction().Adjust(kC, "x", {{"k", 1}}));
  EXPECT_EQ(r.code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {kC})));

  MustCommit(*a, Transaction().Update(kC, "x", {{"t", "text"}}));    // V7, "t" not a number
  MustCommit(*b, Transaction().Update(kC, "x", {{"t", 5}}));         // V8
  r = a->Commit(Transaction().Adjust(kC, "x", {{"t", 1}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read("x").doc.at("t"), json::value(6));

  // Overflow on the cached image only.
  MustCommit(*a, Transaction().Update(kC, "x", {{"big", std::numeric_limits<std::uint64_t>::max()}}));
  MustCommit(*b, Transaction().Update(kC, "x", {{"big", 0}}));
  r = a->Commit(Transaction().Adjust(kC, "x", {{"big", 1}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Read("x").doc.at("big"), json::value(1));
  // ... and on the real state only.
  MustCommit(*a, Transaction().Update(kC, "x", {{"big", 0}}));
  MustCommit(*b, Transaction().Update(kC, "x", {{"big", std::numeric_limits<std::uint64_t>::max()}}));
  r = a->Commit(Transaction().Adjust(kC, "x", {{"big", 1}}));
  EXPECT_EQ(r.code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_EQ(Read("x").doc.at("big"), json::value(std::numeric_limits<std::uint64_t>::max()));

  // Multi-document, both directions.
  for (Mode m : kModes) {
    SCOPED_TRACE(m.Name());
    World w;
    Database a2(w.mem, WithMode(w.Opts(), m));
    auto b2 = w.Direct();
    MustCommit(a2, Transaction().Insert(kC, "p", {{"n", 0}}).Insert(kC, "q", {{"n", 0}}));
    a2.Flush();
    MustCommit(*b2, Transaction().Update(kC, "p", {{"m", 5}}));
    MustCommit(a2, Transaction().Adjust(kC, "q", {{"n", 1}}).Adjust(kC, "p", {{"m", 1}}));
    a2.Flush();
    EXPECT_EQ(ReadImage(*b2, kC, "p").doc, json::object({{"n", 0}, {"m", 6}}));
    MustCommit(*b2, Transaction().Update(kC, "p", {}, {"m"}));
    auto f = a2.Commit(Transaction().Adjust(kC, "q", {{"n", 1}}).Adjust(kC, "p", {{"m", 1}}));
    EXPECT_EQ(f.code(), Code::kFailedPrecondition) << f.status().ToString();
    a2.Flush();
    EXPECT_EQ(ReadImage(*b2, kC, "p").doc, json::object({{"n", 0}}));
    EXPECT_EQ(ReadImage(*b2, kC, "q").doc, json::object({{"n", 1}}));
    ExpectClean(*w.mem, {kC});
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Checks never use the cache; multi-document commits with stale documents.

TEST_F(WrittenCacheTest, ChecksAreDecidedOnTheStoreNotOnTheCache) {
  Warm("x", {{"n", 1}});                                        // V2, cached
  MustCommit(*a, Transaction().Insert(kC, "y", {{"n", 0}}));
  MustCommit(*b, Transaction().Update(kC, "x", {{"b", 1}}));    // V3
  // Only checks.
  auto c = a->Commit(Transaction().Check(kC, "x", V(2)));
  ASSERT_EQ(c.code(), Code::kConflict) << c.status().ToString();
  EXPECT_EQ(c.status().current_version(), V(3));
  // A check and a write (classic path).
  Dump before = DumpStore(*mem, {kC});
  c = a->Commit(Transaction().Check(kC, "x", V(2)).Adjust(kC, "y", {{"n", 1}}));
  ASSERT_EQ(c.code(), Code::kConflict) << c.status().ToString();
  EXPECT_EQ(c.status().current_version(), V(3));
  EXPECT_TRUE(SameDump(before, DumpStore(*mem, {kC})));
  auto ok = a->Commit(Transaction().Check(kC, "x", V(3)).Adjust(kC, "y", {{"n", 1}}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->versions, (std::vector<std::uint64_t>{V(3), V(2)}));
  // A check of a document deleted behind the cache.
  MustCommit(*a, Transaction().Update(kC, "x", {{"c", 1}}));    // V4, cached
  MustCommit(*b, Transaction().Delete(kC, "x"));                // tombstone V6
  c = a->Commit(Transaction().Check(kC, "x", V(4)).Adjust(kC, "y", {{"n", 1}}));
  EXPECT_EQ(c.code(), Code::kDeleted) << c.status().ToString();
  EXPECT_EQ(Read("y"), Found(V(2), {{"n", 1}}));
  ExpectClean(*mem, {kC});
}

TEST(WrittenCacheMulti, StaleDocumentsInMultiDocumentCommits) {
  for (Mode m : kModes) {
    SCOPED_TRACE(m.Name());
    World w;
    auto counting = std::make_shared<CountingStore>(w.mem);
    Database a(counting, WithMode(w.Opts(), m));
    auto b = w.Direct();
    const std::vector<std::string> ids = {"x", "y", "z"};
    std::map<std::string, std::int64_t> n;
    std::map<std::string, std::uint64_t> ver;
    Transaction ins;
    for (const auto& id : ids) ins.Insert(kC, id, {{"n", 0}});
    MustCommit(a, ins);
    for (const auto& id : ids) ver[id] = V(1);
    for (int round = 0; round < 24; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      // Another Database changes 0, 1 or 2 of the documents first.
      int stale = round % 3;
      for (int s = 0; s < stale; ++s) {
        const std::string& id = ids[(round + s) % ids.size()];
        MustCommit(*b, Transaction().Adjust(kC, id, {{"n", 1000}}));
        n[id] += 1000;
        ++ver[id];
      }
      if (round % 4 == 0) a.Flush();  // the finisher's images are cached by now
      counting->Reset();
      Transaction t;
      for (const auto& id : ids) t.Adjust(kC, id, {{"n", 1}});
      auto r = a.Commit(t);
      // Taken before b reads below: b's reads may prove the staging record before a's
      // finisher flips it, and the finisher then reads the record (a Get through `counting`).
      const std::uint64_t gets = counting->counts().gets;
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::vector<std::uint64_t> want;
      for (const auto& id : ids) {
        n[id] += 1;
        want.push_back(++ver[id]);
      }
      EXPECT_EQ(r->versions, want);
      for (const auto& id : ids) {
        EXPECT_EQ(ReadImage(*b, kC, id), Found(ver[id], {{"n", n[id]}})) << id;
      }
      if (round % 4 == 0 && stale == 0 && round > 0) {
        // Nothing stale after a flush: every image came from the cache.
        EXPECT_EQ(gets, 0u);
      }
    }
    a.Flush();
    ExpectClean(*w.mem, {kC});
  }
}

// Two failing actions, the first failing only on the real state (stale image says live), the
// second failing on a read. The first one's error is reported, with the cache as without it:
// once a later action fails, earlier ones evaluated on cached images are decided again on a
// read. Nothing is written.
TEST(WrittenCacheMulti, WhichErrorWhenSeveralActionsFail) {
  for (std::size_t budget : {std::size_t{0}, std::size_t{4} << 20}) {
    World w;
    Options o = WithMode(w.Opts(), Mode{true, false});
    o.written_cache_bytes = budget;
    Database a(w.mem, o);
    auto b = w.Direct();
    MustCommit(a, Transaction().Insert(kC, "x", {{"n", 0}}));
    MustCommit(a, Transaction().Insert(kC, "y", {{"n", 0}}));
    MustCommit(*b, Transaction().Delete(kC, "x"));
    Dump before = DumpStore(*w.mem, {kC});
    auto r = a.Commit(Transaction().Update(kC, "x", {{"a", 1}}).Insert(kC, "y", {{"n", 1}}));
    std::printf("[ precedence ] budget %zu: %s\n", budget, r.status().ToString().c_str());
    EXPECT_EQ(r.code(), Code::kDeleted) << r.status().ToString();
    EXPECT_TRUE(SameDump(before, DumpStore(*w.mem, {kC})));
  }
}

// ---------------------------------------------------------------------------------------------
// A differential run: two Databases (each with its own cache) and raw store writes interleave
// random transactions on a few documents; a model says what every commit must answer.

struct ModelDoc {
  bool live = true;
  std::uint64_t version = 0;
  json::object body;
};

struct FuzzStats {
  int commits = 0, failed = 0, multi_failed = 0, not_first_error = 0;
};

void Fuzz(Options a_opts, std::uint64_t seed, int rounds, std::size_t pad, FuzzStats& stats) {
  World w;
  auto counting = std::make_shared<CountingStore>(w.mem);
  a_opts.clock = w.clock;
  Database a(counting, a_opts);
  Options b_opts = w.Opts();  // B: the same budget as A (no cache at all when it is 0)
  b_opts.written_cache_bytes = a_opts.written_cache_bytes;
  auto b = std::make_unique<Database>(w.mem, b_opts);
  std::mt19937_64 rng(seed);
  const std::vector<std::string> ids = {"k0", "k1", "k2", "k3"};
  const std::string padding(pad, 'p');
  std::map<std::string, ModelDoc> model;
  Transaction ins;
  for (const auto& id : ids) {
    json::object body{{"n", 0}, {"s", "init"}};
    if (pad > 0) body["pad"] = padding;
    ins.Insert(kC, id, body);
    model[id] = ModelDoc{true, V(1), body};
  }
  MustCommit(a, ins);

  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round));
    const int who = static_cast<int>(rng() % 10);
    if (who == 9) {
      // A raw store write: content changed (or not), metadata kept.
      a.Flush();
      const std::string& id = ids[rng() % ids.size()];
      if (!model[id].live) continue;
      std::string s = (rng() % 2) ? model[id].body.at("s").as_string().c_str()
                                  : "raw" + std::to_string(round);
      RawSet(*w.mem, id, "s", json::value(s));
      model[id].body["s"] = s;
      continue;
    }
    Database& db = who < 6 ? a : *b;
    // 1 to 3 actions on distinct documents.
    std::vector<std::string> pick = ids;
    std::shuffle(pick.begin(), pick.end(), rng);
    pick.resize(1 + rng() % 3);
    Transaction t;
    struct Want {
      Code code = Code::kOk;
      std::uint64_t cv = 0;
      ModelDoc after;
    };
    std::vector<Want> want;
    for (const auto& id : pick) {
      const ModelDoc& d = model[id];
      Want wnt{Code::kOk, 0, d};
      std::optional<std::uint64_t> ev;
      switch (rng() % 5) {
        case 3: ev = d.version; break;
        case 4: ev = d.version - 1; break;
        default: break;
      }
      // insert 15%, update 35%, adjust 35%, delete 15%
      const int draw = static_cast<int>(rng() % 20);
      const int kind = draw < 3 ? 0 : draw < 10 ? 1 : draw < 17 ? 2 : 3;
      auto precheck = [&]() -> bool {
        if (!d.live) {
          wnt.code = Code::kDeleted;
          return false;
        }
        if (ev && *ev != d.version) {
          wnt.code = Code::kConflict;
          wnt.cv = d.version;
          return false;
        }
        return true;
      };
      if (kind == 0) {  // insert
        json::object body{{"n", static_cast<std::int64_t>(rng() % 10)},
                          {"s", "i" + std::to_string(round)}};
        if (pad > 0) body["pad"] = padding;
        t.Insert(kC, id, body);
        if (d.live) {
          wnt.code = Code::kConflict;
          wnt.cv = d.version;
        } else {
          wnt.after = ModelDoc{true, d.version + 1, body};
        }
      } else if (kind == 1) {  // update
        json::object set{{"s", "u" + std::to_string(round)}};
        std::vector<std::string> unset;
        if (rng() % 4 == 0) {
          unset.push_back("n");
        } else if (rng() % 3 == 0) {
          set["n"] = static_cast<std::int64_t>(rng() % 100);
        }
        t.Update(kC, id, set, unset, ev);
        if (precheck()) {
          wnt.after.version = d.version + 1;
          for (const auto& kv : set) wnt.after.body[kv.key()] = kv.value();
          for (const auto& f : unset) wnt.after.body.erase(f);
        }
      } else if (kind == 2) {  // adjust
        std::int64_t by = static_cast<std::int64_t>(rng() % 11) - 5;
        t.Adjust(kC, id, {{"n", by}}, ev);
        if (precheck()) {
          if (!d.body.contains("n")) {
            wnt.code = Code::kFailedPrecondition;
          } else {
            wnt.after.version = d.version + 1;
            wnt.after.body["n"] = d.body.at("n").as_int64() + by;
          }
        }
      } else {  // delete
        t.Delete(kC, id, ev);
        if (precheck()) wnt.after = ModelDoc{false, d.version + 2, {}};
      }
      want.push_back(std::move(wnt));
    }
    std::set<Code> failing;
    Code first_failing = Code::kOk;
    for (const auto& x : want) {
      if (x.code == Code::kOk) continue;
      failing.insert(x.code);
      if (first_failing == Code::kOk) first_failing = x.code;
    }
    auto r = db.Commit(t);
    ++stats.commits;
    if (failing.empty()) {
      ASSERT_TRUE(r.ok()) << (who < 6 ? "A" : "B") << ": " << r.status().ToString();
      ASSERT_EQ(r->versions.size(), pick.size());
      for (std::size_t i = 0; i < pick.size(); ++i) {
        EXPECT_EQ(r->versions[i], want[i].after.version) << pick[i];
        model[pick[i]] = want[i].after;
      }
    } else {
      ++stats.failed;
      ASSERT_FALSE(r.ok()) << "committed although an action must fail";
      ASSERT_TRUE(failing.count(r.code())) << r.status().ToString();
      if (r.code() != first_failing) ++stats.not_first_error;
      if (failing.size() == 1 && r.code() == Code::kConflict) {
        // Unambiguous when exactly one action conflicts.
        int conflicts = 0;
        std::uint64_t cv = 0;
        for (const auto& x : want) {
          if (x.code == Code::kConflict) {
            ++conflicts;
            cv = x.cv;
          }
        }
        if (conflicts == 1) {
          EXPECT_EQ(r.status().current_version(), cv);
        }
      }
      if (pick.size() > 1) ++stats.multi_failed;
      // Nothing applied; a rolled-back hold adds 2 to a version.
      for (const auto& id : pick) {
        Image img = ReadImage(*b, kC, id);
        ASSERT_GE(img.version, model[id].version);
        EXPECT_EQ((img.version - model[id].version) % 2, 0u) << id;
        model[id].version = img.version;
      }
    }
    for (const auto& id : ids) {
      const ModelDoc& d = model[id];
      Image img = ReadImage(*b, kC, id);
      if (d.live) {
        ASSERT_EQ(img, Found(d.version, d.body)) << id;
      } else {
        ASSERT_EQ(img, DeletedImage(d.version)) << id;
      }
    }
  }
  a.Flush();
  ExpectClean(*w.mem, {kC});
}

TEST(WrittenCacheFuzz, TwoDatabasesAndRawWritesMatchTheModel) {
  for (std::size_t budget : {std::size_t{4} << 20, std::size_t{0}}) {
    FuzzStats stats;
    std::uint64_t seed = 1;
    for (Mode m : kModes) {
      SCOPED_TRACE(m.Name() + " budget " + std::to_string(budget));
      World w;
      Options o = WithMode(w.Opts(), m);
      o.written_cache_bytes = budget;
      Fuzz(o, seed++, 500, 0, stats);
      if (HasFatalFailure()) return;
    }
    std::printf("[ fuzz ] budget %zu: commits %d, failed %d (multi %d), error not the first "
                "failing action's: %d\n",
                budget, stats.commits, stats.failed, stats.multi_failed, stats.not_first_error);
    EXPECT_GT(stats.failed, 100);
    EXPECT_GT(stats.commits - stats.failed, 300);
    if (budget == 0) {
      EXPECT_EQ(stats.not_first_error, 0) << "without any cache, the first failing action's "
                                              "error is reported";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 6. No cache, a tiny budget, a budget that keeps evicting.

TEST(WrittenCacheFuzz, BudgetsZeroTinyAndEvicting) {
  FuzzStats stats;
  std::uint64_t seed = 100;
  struct Budget {
    std::size_t bytes;
    std::size_t pad;
  };
  for (Budget bu : {Budget{0, 0}, Budget{200, 20'000}, Budget{16 * 9'000, 8'000},
                    Budget{16 * 30'000, 8'000}}) {
    for (Mode m : {Mode{true, true}, Mode{false, false}}) {
      SCOPED_TRACE("budget " + std::to_string(bu.bytes) + " pad " + std::to_string(bu.pad) +
                   " " + m.Name());
      World w;
      Options o = WithMode(w.Opts(), m);
      o.written_cache_bytes = bu.bytes;
      Fuzz(o, seed++, 150, bu.pad, stats);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(WrittenCache, TinyBudgetWithBigDocumentsStaleAndFresh) {
  World w;
  auto counting = std::make_shared<CountingStore>(w.mem);
  Options o = w.Opts();
  o.written_cache_bytes = 200;
  Database a(counting, o);
  auto b = w.Direct();
  const std::string big(50'000, 'b');
  MustCommit(a, Transaction().Insert(kC, "x", {{"n", 0}, {"big", big}}));
  for (int i = 1; i <= 5; ++i) {
    counting->Reset();
    MustCommit(a, Transaction().Adjust(kC, "x", {{"n", 1}}));
    EXPECT_EQ(counting->counts().gets, 1u) << "a 50 KB image kept under a 200-byte budget";
    MustCommit(*b, Transaction().Adjust(kC, "x", {{"n", 10}}));
  }
  EXPECT_EQ(ReadImage(*b, kC, "x"), Found(V(11), {{"n", 55}, {"big", big}}));
}

// ---------------------------------------------------------------------------------------------
// 7. Lost replies with stale images.

TEST(WrittenCacheFaults, LostRepliesWithStaleImagesReportTheTruth) {
  for (Mode m : kModes) {
    for (int phase = 0; phase < 2; ++phase) {  // 0: lost replies only; 1: and transient faults
      SCOPED_TRACE(m.Name() + (phase ? " lost+transient" : " lost"));
      World w;
      std::mutex mu;
      std::mt19937_64 rng(7 + phase);
      litetx::FaultOptions fo;
      fo.clock = w.clock;
      fo.rule = [&](litetx::StoreOp op, const Key& key, std::uint64_t) {
        if (key.collection != kC) return litetx::Fault::kNone;
        bool write = op == litetx::StoreOp::kCreate || op == litetx::StoreOp::kReplace ||
                     op == litetx::StoreOp::kErase;
        if (!write) return litetx::Fault::kNone;
        std::lock_guard<std::mutex> lock(mu);
        std::uint64_t u = rng() % 100;
        if (u < 30) return litetx::Fault::kLostReply;
        if (phase == 1 && u < 40) return litetx::Fault::kTransient;
        return litetx::Fault::kNone;
      };
      auto faulty = std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
      Database a(faulty, WithMode(w.Opts(), m));
      auto b = w.Direct();
      MustCommit(*b, Transaction().Insert(kC, "x", {{"n", 0}}).Insert(kC, "y", {{"n", 0}}));
      std::int64_t x = 0, y = 0;
      std::map<Code, int> codes;
      for (int round = 0; round < 120; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        if (round % 2 == 0) {  // make A's image of x stale
          MustCommit(*b, Transaction().Adjust(kC, "x", {{"n", 1000}}));
          x += 1000;
        }
        const bool multi = round % 3 == 0;
        Transaction t;
        t.Adjust(kC, "x", {{"n", 1}});
        if (multi) t.Adjust(kC, "y", {{"n", 1}});
        auto r = a.Commit(t);
        ++codes[r.code()];
        if (r.code() == Code::kUnknown) {
          // Allowed only with transient faults; settle: past every lease, the reads decide.
          EXPECT_EQ(phase, 1) << r.status().ToString();
          w.clock->Advance(std::chrono::seconds(600));
          a.Flush();
          std::int64_t nx = ReadImage(*b, kC, "x").doc.at("n").as_int64();
          std::int64_t ny = ReadImage(*b, kC, "y").doc.at("n").as_int64();
          ASSERT_TRUE(nx == x || nx == x + 1) << nx << " vs " << x;
          if (multi) {
            ASSERT_EQ(nx - x, ny - y) << "half a transaction";
          }
          x = nx;
          y = ny;
          continue;
        }
        if (r.ok()) {
          x += 1;
          if (multi) y += 1;
        } else {
          ASSERT_TRUE(r.code() == Code::kUnavailable || r.code() == Code::kConflict)
              << r.status().ToString();
          EXPECT_EQ(phase, 1) << "failed without transient faults: " << r.status().ToString();
        }
        a.Flush();
        ASSERT_EQ(ReadImage(*b, kC, "x").doc.at("n").as_int64(), x);
        ASSERT_EQ(ReadImage(*b, kC, "y").doc.at("n").as_int64(), y);
      }
      EXPECT_GT(faulty->lost_replies(), 20u);
      EXPECT_GT(codes[Code::kOk], 60);
      a.Flush();
      if (codes[Code::kUnknown] == 0) ExpectClean(*w.mem, {kC});
    }
  }
}

// A compare-and-swap at a stale cached revision fails; the store loses that (failed) reply.
// The engine must not report a success, and must not apply the action twice. (Without the
// cache there is no failing compare-and-swap here at all, and the commit is OK.)
TEST(WrittenCacheFaults, FailedStaleCasWhoseReplyIsLost) {
  for (std::size_t budget : {std::size_t{0}, std::size_t{4} << 20}) {
    for (bool multi : {false, true}) {
      SCOPED_TRACE("budget " + std::to_string(budget) + (multi ? " multi" : " single"));
      World w;
      auto hook = std::make_shared<HookStore>(w.mem);
      Options o = WithMode(w.Opts(), Mode{true, false});
      o.written_cache_bytes = budget;
      Database a(hook, o);
      auto b = w.Direct();
      MustCommit(a, Transaction().Insert(kC, "x", {{"n", 0}}));
      MustCommit(a, Transaction().Insert(kC, "y", {{"n", 0}}));
      MustCommit(*b, Transaction().Adjust(kC, "x", {{"n", 100}}));
      std::atomic<int> lost{0};
      hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
        if (c.key == K("x") && c.is_write() && s.code() == Code::kConflict && lost++ == 0) {
          return Status::Unknown("injected: reply of a failed write lost");
        }
        return std::nullopt;
      };
      Transaction t;
      t.Adjust(kC, "x", {{"n", 1}});
      if (multi) t.Adjust(kC, "y", {{"n", 1}});
      auto r = a.Commit(t);
      hook->after = nullptr;
      litetx::ReadResult rx = *b->Read(kC, "x");
      std::int64_t nx = rx.doc.at("n").as_int64();
      std::int64_t ny = b->Read(kC, "y")->doc.at("n").as_int64();
      std::printf("[ lost failed CAS ] budget %zu %s: %s\n", budget, multi ? "multi" : "single",
                  r.ok() ? "ok" : r.status().ToString().c_str());
      if (r.ok()) {
        EXPECT_EQ(nx, 101);
        EXPECT_EQ(ny, multi ? 1 : 0);
      } else {
        ASSERT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
        // Honest kUnknown: in fact nothing landed.
        EXPECT_EQ(nx, 100);
        EXPECT_EQ(ny, 0);
        EXPECT_NE(rx.last_writer, r.status().txn_id());
      }
      if (budget == 0 || multi) {
        // No stale image (budget 0), or a hold that tells whose write it is (multi): no doubt.
        EXPECT_TRUE(r.ok()) << r.status().ToString();
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 8. Concurrency: threads of one Database and a second Database on the same counters.

TEST(WrittenCacheConcurrency, CountersEqualTheCommitsThatTouchedThem) {
  World w;
  Options o = w.Opts();
  o.busy_timeout = std::chrono::milliseconds{20};
  o.lease = std::chrono::hours{10};  // sleeps move the manual clock: keep leases out of play
  Options oa = WithMode(o, Mode{true, true});
  Options ob = WithMode(o, Mode{false, false});
  // Counts A's compare-and-swaps on the counters that fail: stale images (and races).
  auto hook = std::make_shared<HookStore>(w.mem);
  std::atomic<int> failed_cas{0};
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.key.collection == kC && c.op == Op::kReplace && s.code() == Code::kConflict) {
      ++failed_cas;
    }
    return std::nullopt;
  };
  Database a(hook, oa);
  Database b(w.mem, ob);
  constexpr int kCounters = 3, kThreadsA = 3, kTotal = 2000;
  auto id = [](int i) { return "k" + std::to_string(i); };
  {
    Transaction ins;
    for (int i = 0; i < kCounters; ++i) ins.Insert(kC, id(i), {{"n", 0}});
    MustCommit(a, ins);
  }
  std::atomic<int> committed{0};
  std::atomic<bool> go{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  struct PerThread {
    std::vector<std::int64_t> touched = std::vector<std::int64_t>(kCounters, 0);
    std::map<Code, int> codes;
    std::vector<std::string> unexpected;
  };
  std::vector<PerThread> per(kThreadsA + 1);
  auto body = [&](int t) {
    Database& db = t < kThreadsA ? a : b;
    std::mt19937 rng(99 + t);
    PerThread& me = per[t];
    while (!go.load()) std::this_thread::yield();
    while (committed.load() < kTotal && std::chrono::steady_clock::now() < deadline) {
      int first = static_cast<int>(rng() % kCounters);
      int kind = static_cast<int>(rng() % 4);
      std::vector<int> touched{first};
      Status st;
      if (kind == 3) {
        // Read-modify-write through Run: the expected version is the one read.
        auto r = db.Run([&](litetx::TxnContext& tx) -> Status {
          auto g = tx.Get(kC, id(first));
          if (!g.ok()) return g.status();
          std::int64_t n = g->doc.at("n").as_int64();
          return tx.Update(kC, id(first), {{"n", n + 1}});
        });
        st = r.status();
        if (r.ok()) ++me.codes[Code::kOk];
      } else {
        Transaction txn;
        txn.Adjust(kC, id(first), {{"n", 1}});
        if (kind >= 1) {
          int second = (first + 1 + static_cast<int>(rng() % (kCounters - 1))) % kCounters;
          txn.Adjust(kC, id(second), {{"n", 1}});
          touched.push_back(second);
        }
        auto r = db.Commit(txn);
        st = r.status();
        ++me.codes[r.code()];
      }
      if (st.ok()) {
        for (int k : touched) ++me.touched[k];
        ++committed;
      } else if (!st.IsRetryableTransaction()) {
        me.unexpected.push_back(st.ToString());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t <= kThreadsA; ++t) threads.emplace_back(body, t);
  go = true;
  for (auto& th : threads) th.join();
  a.Flush();
  b.Flush();
  std::vector<std::int64_t> touched(kCounters, 0);
  std::map<Code, int> codes;
  for (const auto& p : per) {
    for (const auto& u : p.unexpected) ADD_FAILURE() << "non-retryable outcome: " << u;
    for (int i = 0; i < kCounters; ++i) touched[i] += p.touched[i];
    for (const auto& [c, n] : p.codes) codes[c] += n;
  }
  EXPECT_EQ(codes[Code::kUnknown], 0);
  EXPECT_GE(committed.load(), 300) << "too little progress to mean anything";
  for (int i = 0; i < kCounters; ++i) {
    Image img = ReadImage(b, kC, id(i));
    ASSERT_EQ(img.state, DocumentState::kFound);
    EXPECT_EQ(img.doc.at("n").as_int64(), touched[i]) << id(i);
    // +1 per committed write, +2 per rolled-back hold; a failed stale CAS adds nothing.
    ASSERT_GE(img.version, V(1) + static_cast<std::uint64_t>(touched[i]));
    EXPECT_EQ((img.version - V(1) - touched[i]) % 2, 0u) << id(i);
  }
  ExpectClean(*w.mem, {kC});
  EXPECT_GT(failed_cas.load(), 0) << "no stale image was ever met: the test proves nothing";
  std::printf("[ concurrency ] committed %d, ok %d conflict %d busy %d aborted %d, A's failed "
              "CAS %d\n",
              committed.load(), codes[Code::kOk], codes[Code::kConflict], codes[Code::kBusy],
              codes[Code::kAborted], failed_cas.load());
}

// ---------------------------------------------------------------------------------------------
// The pieces: DocCache's tickets and budget, and the size counted without serialising.

TEST(WrittenCacheUnit, TicketsDropImagesOfSupersededWriters) {
  using litetx::engine::DocCache;
  DocCache cache(std::size_t{1} << 20);
  const Key k = K("x");
  auto t1 = cache.Take(k);
  EXPECT_FALSE(t1.doc.has_value());
  cache.Put(k, {{"v", 1}}, 10, 100, t1.ticket);
  EXPECT_EQ(cache.size(), 1u);
  auto t2 = cache.Take(k);
  ASSERT_TRUE(t2.doc.has_value());
  EXPECT_EQ(t2.doc->revision, 10u);
  EXPECT_EQ(t2.doc->value, json::object({{"v", 1}}));
  EXPECT_FALSE(cache.Take(k).doc.has_value()) << "an image handed out twice";
  // Two writers: the one that began earlier (t2) puts last; its image must be dropped.
  auto t3 = cache.Take(k);
  cache.Put(k, {{"v", 3}}, 30, 100, t3.ticket);
  cache.Put(k, {{"v", 2}}, 20, 100, t2.ticket);
  auto t4 = cache.Take(k);
  ASSERT_TRUE(t4.doc.has_value());
  EXPECT_EQ(t4.doc->revision, 30u);
  // A Put whose ticket was never handed out for this key, or a ticket 0, is dropped.
  cache.Put(k, {{"v", 0}}, 40, 100, 0);
  EXPECT_FALSE(cache.Take(k).doc.has_value());
}

TEST(WrittenCacheUnit, BudgetBoundsTheImagesKept) {
  using litetx::engine::DocCache;
  DocCache cache(16 * 1000);  // 1000 bytes a shard
  // An image larger than a shard's share is not kept.
  auto t = cache.Take(K("big"));
  cache.Put(K("big"), {{"v", 1}}, 1, 1001, t.ticket);
  EXPECT_FALSE(cache.Take(K("big")).doc.has_value());
  // Many keys: the budget holds at most 16 shards * 1000 / 300 images of 300 bytes.
  for (int i = 0; i < 500; ++i) {
    Key k = K("d" + std::to_string(i));
    auto tk = cache.Take(k);
    cache.Put(k, {{"i", i}}, static_cast<Revision>(i + 1), 300, tk.ticket);
  }
  EXPECT_LE(cache.size(), 16u * 3u);
  EXPECT_GT(cache.size(), 0u);
  // Whatever is kept is the image put for that key (newest first: a Take of a key without an
  // image takes room for its ticket, which may push the oldest images out).
  int kept = 0;
  for (int i = 499; i >= 0; --i) {
    auto tk = cache.Take(K("d" + std::to_string(i)));
    if (!tk.doc) continue;
    ++kept;
    EXPECT_EQ(tk.doc->revision, static_cast<Revision>(i + 1));
    EXPECT_EQ(tk.doc->value, json::object({{"i", i}}));
  }
  EXPECT_GT(kept, 0);
}

TEST(WrittenCacheUnit, SerializedSizeIsTheSerializedLength) {
  std::vector<json::object> docs;
  docs.emplace_back();
  docs.push_back(Obj(R"({"a":1})"));
  for (std::size_t n : {4000u, 4090u, 4095u, 4096u, 4097u, 8191u, 8192u, 100'000u}) {
    json::object s, e;
    s["s"] = std::string(n, 'x');
    e["e"] = std::string(n / 2, '"');
    e["u"] = "\xc3\xa9\x01\t";
    docs.push_back(std::move(s));
    docs.push_back(std::move(e));
  }
  json::object numbers;
  numbers["d"] = HardDoubles(500);
  numbers["i"] = ExtremeIntegers();
  docs.push_back(std::move(numbers));
  docs.push_back(Nested(60, true));
  for (const auto& d : docs) {
    EXPECT_EQ(litetx::engine::SerializedSize(d), json::serialize(d).size());
  }
}

TEST(WrittenCache, DocumentSizeLimitIsExactAboveTheSerializerBuffer) {
  for (std::size_t limit : {std::size_t{5000}, std::size_t{9000}}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    World w;
    Options o = w.Opts();
    o.max_document_bytes = limit;
    Database db(w.mem, o);
    // The largest padding accepted on the one-write path stores exactly `limit` bytes.
    std::size_t best = 0;
    for (std::size_t pad = limit - 400; pad < limit; ++pad) {
      auto r = db.Commit(
          Transaction().Insert(kC, "p" + std::to_string(pad), {{"s", std::string(pad, 'x')}}));
      if (r.ok()) {
        best = pad;
      } else {
        ASSERT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
        break;
      }
    }
    ASSERT_GT(best, 0u);
    auto raw = Raw(*w.mem, K("p" + std::to_string(best)));
    ASSERT_TRUE(raw.has_value());
    EXPECT_EQ(json::serialize(*raw).size(), limit);
  }
}

}  // namespace
}  // namespace ltxtest
