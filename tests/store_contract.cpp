// tests/store_contract.cpp — the Store contract tests (see store_contract.h). Instantiated per
// backend elsewhere (store_contract_test.cpp for the memory store).
#include "store_contract.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::ScanPage;

json::object Body(int n) { return json::object{{"n", n}}; }

// Scans `collection` with page size `limit`, checking every page's shape.
std::vector<std::pair<std::string, StoredDocument>> ScanPaged(litetx::Store& s,
                                                              std::string_view collection,
                                                              std::size_t limit,
                                                              int* pages = nullptr) {
  std::vector<std::pair<std::string, StoredDocument>> out;
  std::string cursor;
  int n = 0;
  for (;;) {
    auto p = s.Scan(collection, cursor, limit);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) break;
    ++n;
    EXPECT_LE(p->documents.size(), limit) << "page over the limit";
    for (auto& d : p->documents) out.push_back(std::move(d));
    if (p->next_cursor.empty()) break;
    if (n > 10000) {
      ADD_FAILURE() << "scan does not end";
      break;
    }
    cursor = p->next_cursor;
  }
  if (pages != nullptr) *pages = n;
  return out;
}

std::vector<std::string> IdsOf(const std::vector<std::pair<std::string, StoredDocument>>& docs) {
  std::vector<std::string> ids;
  for (const auto& d : docs) ids.push_back(d.first);
  return ids;
}

TEST_P(StoreContractTest, GetAbsentReturnsNullopt) {
  auto r = store().Get(Key{"c", "nope"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
}

TEST_P(StoreContractTest, CreateThenGetReturnsValueAndRevision) {
  json::object v = Obj(R"({"a": 1, "b": {"c": [1, "x", null, true]}, "d": 2.5})");
  auto rev = store().Create(Key{"c", "k"}, v);
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  auto g = store().Get(Key{"c", "k"});
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(g->has_value());
  EXPECT_EQ((*g)->value, v);
  EXPECT_EQ((*g)->revision, *rev);
  // Same id in another collection is another key.
  auto other = store().Get(Key{"d", "k"});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST_P(StoreContractTest, CreateExistingKeyConflictsAndWritesNothing) {
  auto rev = store().Create(Key{"c", "k"}, Body(1));
  ASSERT_TRUE(rev.ok());
  auto again = store().Create(Key{"c", "k"}, Body(2));
  EXPECT_EQ(again.code(), Code::kConflict);
  auto g = store().Get(Key{"c", "k"});
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->value, Body(1));
  EXPECT_EQ((*g)->revision, *rev);
}

TEST_P(StoreContractTest, ReplaceWithRightRevisionWrites) {
  Key k{"c", "k"};
  auto r1 = store().Create(k, Body(1));
  ASSERT_TRUE(r1.ok());
  auto r2 = store().Replace(k, *r1, Body(2));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_NE(*r2, *r1);
  auto g = store().Get(k);
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->value, Body(2));
  EXPECT_EQ((*g)->revision, *r2);
}

TEST_P(StoreContractTest, ReplaceWithWrongRevisionConflictsAndWritesNothing) {
  Key k{"c", "k"};
  auto r1 = store().Create(k, Body(1));
  ASSERT_TRUE(r1.ok());
  auto r2 = store().Replace(k, *r1, Body(2));
  ASSERT_TRUE(r2.ok());
  // The stale revision no longer matches.
  EXPECT_EQ(store().Replace(k, *r1, Body(3)).code(), Code::kConflict);
  EXPECT_EQ(store().Replace(k, *r2 + 12345, Body(3)).code(), Code::kConflict);
  auto g = store().Get(k);
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->value, Body(2));
  EXPECT_EQ((*g)->revision, *r2);
}

TEST_P(StoreContractTest, ReplaceAbsentKeyConflictsAndCreatesNothing) {
  Key k{"c", "k"};
  EXPECT_EQ(store().Replace(k, 1, Body(1)).code(), Code::kConflict);
  EXPECT_EQ(store().Replace(k, 0, Body(1)).code(), Code::kConflict);
  auto g = store().Get(k);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
}

TEST_P(StoreContractTest, EraseWithRightRevisionRemoves) {
  Key k{"c", "k"};
  auto r1 = store().Create(k, Body(1));
  ASSERT_TRUE(r1.ok());
  Status s = store().Erase(k, *r1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto g = store().Get(k);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
  // Erasing again: absent.
  EXPECT_EQ(store().Erase(k, *r1).code(), Code::kConflict);
}

TEST_P(StoreContractTest, EraseWithWrongRevisionConflictsAndKeepsDocument) {
  Key k{"c", "k"};
  auto r1 = store().Create(k, Body(1));
  ASSERT_TRUE(r1.ok());
  auto r2 = store().Replace(k, *r1, Body(2));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(store().Erase(k, *r1).code(), Code::kConflict);
  auto g = store().Get(k);
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->value, Body(2));
  EXPECT_EQ((*g)->revision, *r2);
}

TEST_P(StoreContractTest, EraseAbsentKeyConflicts) {
  EXPECT_EQ(store().Erase(Key{"c", "nope"}, 1).code(), Code::kConflict);
}

TEST_P(StoreContractTest, RevisionsChangeOnEveryWriteAndAreNeverReused) {
  Key k{"c", "k"};
  std::set<Revision> seen;
  auto remember = [&](Revision r) {
    EXPECT_TRUE(seen.insert(r).second) << "revision " << r << " reused";
  };
  for (int round = 0; round < 5; ++round) {
    auto c = store().Create(k, Body(round));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    remember(*c);
    Revision cur = *c;
    for (int i = 0; i < 3; ++i) {
      // Writing the very same value must still change the revision.
      auto r = store().Replace(k, cur, Body(round));
      ASSERT_TRUE(r.ok());
      remember(*r);
      cur = *r;
    }
    ASSERT_TRUE(store().Erase(k, cur).ok());
    // No stale revision of the erased incarnation applies to the next one.
    for (Revision old : seen) {
      EXPECT_EQ(store().Replace(k, old, Body(-1)).code(), Code::kConflict);
    }
  }
  EXPECT_EQ(seen.size(), 20u);
}

TEST_P(StoreContractTest, ScanEmptyCollection) {
  auto p = store().Scan("empty", "", 10);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->documents.empty());
  EXPECT_TRUE(p->next_cursor.empty());
  // A collection whose documents were all erased is empty again.
  auto r = store().Create(Key{"gone", "x"}, Body(1));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(store().Erase(Key{"gone", "x"}, *r).ok());
  auto q = store().Scan("gone", "", 10);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->documents.empty());
  EXPECT_TRUE(q->next_cursor.empty());
}

TEST_P(StoreContractTest, ScanReturnsAscendingIdsWithValuesAndRevisions) {
  std::vector<std::string> ids = {"b", "a", "10", "9", "B", "a0", "a.b", "zz", "\xC3\xA9t\xC3\xA9"};
  std::map<std::string, Revision> revs;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto r = store().Create(Key{"c", ids[i]}, Body(static_cast<int>(i)));
    ASSERT_TRUE(r.ok());
    revs[ids[i]] = *r;
  }
  auto docs = ScanPaged(store(), "c", 100);
  std::vector<std::string> want = ids;
  std::sort(want.begin(), want.end());  // byte-wise
  EXPECT_EQ(IdsOf(docs), want);
  for (const auto& [id, doc] : docs) {
    auto i = std::find(ids.begin(), ids.end(), id) - ids.begin();
    EXPECT_EQ(doc.value, Body(static_cast<int>(i))) << id;
    EXPECT_EQ(doc.revision, revs[id]) << id;
  }
}

TEST_P(StoreContractTest, ScanPagesWithCursorAndLimitAmongOtherCollections) {
  // Neighbouring collection names on both sides, including prefixes of "c".
  for (const char* other : {"b", "c0", "cc", "d", "", "C"}) {
    if (*other == '\0') continue;
    for (int i = 0; i < 7; ++i) {
      ASSERT_TRUE(store().Create(Key{other, "id" + std::to_string(i)}, Body(i)).ok());
    }
  }
  std::vector<std::string> want;
  for (int i = 0; i < 203; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "doc%05d", (i * 37) % 203);  // created out of order
    ASSERT_TRUE(store().Create(Key{"c", id}, Body(i)).ok());
    want.emplace_back(id);
  }
  std::sort(want.begin(), want.end());
  for (std::size_t limit : {1u, 2u, 7u, 50u, 202u, 203u, 204u, 1000u}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    int pages = 0;
    auto docs = ScanPaged(store(), "c", limit, &pages);
    EXPECT_EQ(IdsOf(docs), want);
    EXPECT_GE(pages, static_cast<int>((want.size() + limit - 1) / limit));
  }
  // The other collections are intact and separate.
  EXPECT_EQ(ScanPaged(store(), "cc", 3).size(), 7u);
  EXPECT_EQ(ScanPaged(store(), "c0", 100).size(), 7u);
}

TEST_P(StoreContractTest, ScanSeesWritesBetweenPagesOfUnvisitedRange) {
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_TRUE(store().Create(Key{"c", id}, Body(1)).ok());
  auto p1 = store().Scan("c", "", 2);
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(IdsOf(p1->documents), (std::vector<std::string>{"a", "b"}));
  ASSERT_FALSE(p1->next_cursor.empty());
  // Erase "c" before continuing: the rest of the scan must not return it.
  auto rc = store().Get(Key{"c", "c"});
  ASSERT_TRUE(rc.ok() && rc->has_value());
  ASSERT_TRUE(store().Erase(Key{"c", "c"}, (*rc)->revision).ok());
  std::vector<std::string> rest;
  std::string cursor = p1->next_cursor;
  for (int guard = 0; guard < 10 && !cursor.empty(); ++guard) {
    auto p = store().Scan("c", cursor, 2);
    ASSERT_TRUE(p.ok());
    for (auto& d : p->documents) rest.push_back(d.first);
    cursor = p->next_cursor;
  }
  EXPECT_EQ(rest, (std::vector<std::string>{"d"}));
}

// Lists every collection name with page size `limit`, checking every page's shape.
std::vector<std::string> ListPaged(litetx::Store& s, std::size_t limit, int* pages = nullptr) {
  std::vector<std::string> out;
  std::string cursor;
  int n = 0;
  for (;;) {
    auto p = s.ListCollections(cursor, limit);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) break;
    ++n;
    EXPECT_LE(p->names.size(), limit) << "page over the limit";
    EXPECT_TRUE(std::is_sorted(p->names.begin(), p->names.end())) << "page not in order";
    if (!p->names.empty() && !out.empty()) {
      EXPECT_LT(out.back(), p->names.front()) << "pages overlap";
    }
    for (auto& name : p->names) out.push_back(std::move(name));
    if (p->next_cursor.empty()) break;
    if (n > 10000) {
      ADD_FAILURE() << "listing does not end";
      break;
    }
    cursor = p->next_cursor;
  }
  if (pages != nullptr) *pages = n;
  return out;
}

TEST_P(StoreContractTest, ListCollectionsOfEmptyStoreIsEmpty) {
  auto p = store().ListCollections("", 10);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->names.empty());
  EXPECT_TRUE(p->next_cursor.empty());
  auto q = store().ListCollections("zzz", 1);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(q->names.empty());
  EXPECT_TRUE(q->next_cursor.empty());
}

TEST_P(StoreContractTest, ListCollectionsNamesEachCollectionOnceInByteOrder) {
  // Prefixes of one another, a ':' (part of some backends' key syntax), upper case, UTF-8,
  // the engine's own prefix; several documents each (ids that look like key syntax too).
  std::vector<std::string> names = {"c",  "c0",    "cc",  "C",          "b", "c:1",
                                    "d.e", "__litetx.txn", "\xC3\xA9t\xC3\xA9", "a b"};
  for (const std::string& name : names) {
    for (const char* id : {"1", "x}i", "{c:0}i", "z"}) {
      ASSERT_TRUE(store().Create(Key{name, id}, Body(1)).ok()) << name << "/" << id;
    }
  }
  std::vector<std::string> want = names;
  std::sort(want.begin(), want.end());  // byte-wise
  EXPECT_EQ(ListPaged(store(), 100), want);
  // A cursor need not be a listed name: the listing continues after it.
  auto p = store().ListCollections("c/", 100);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<std::string> after;
  for (const auto& n : want) {
    if (n > "c/") after.push_back(n);
  }
  EXPECT_EQ(p->names, after);
  EXPECT_TRUE(p->next_cursor.empty());
}

TEST_P(StoreContractTest, ListCollectionsPagesWithLimitOne) {
  std::vector<std::string> want = {"alpha", "beta", "beta0", "gamma"};
  for (const std::string& name : want) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(store().Create(Key{name, "id" + std::to_string(i)}, Body(i)).ok());
    }
  }
  for (std::size_t limit : {1u, 2u, 3u, 4u, 5u}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    int pages = 0;
    EXPECT_EQ(ListPaged(store(), limit, &pages), want);
    EXPECT_GE(pages, static_cast<int>((want.size() + limit - 1) / limit));
    EXPECT_LE(pages, static_cast<int>(want.size() / limit + 1));
  }
  auto first = store().ListCollections("", 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->names, std::vector<std::string>{"alpha"});
  EXPECT_EQ(first->next_cursor, "alpha");
}

TEST_P(StoreContractTest, ListCollectionsDropsACollectionOnceItsDocumentsAreErased) {
  std::map<std::string, Revision> revs;
  for (const char* id : {"a", "b", "c"}) {
    auto r = store().Create(Key{"going", id}, Body(1));
    ASSERT_TRUE(r.ok());
    revs[id] = *r;
  }
  ASSERT_TRUE(store().Create(Key{"staying", "a"}, Body(1)).ok());
  EXPECT_EQ(ListPaged(store(), 10), (std::vector<std::string>{"going", "staying"}));
  ASSERT_TRUE(store().Erase(Key{"going", "a"}, revs["a"]).ok());
  ASSERT_TRUE(store().Erase(Key{"going", "b"}, revs["b"]).ok());
  EXPECT_EQ(ListPaged(store(), 10), (std::vector<std::string>{"going", "staying"}))
      << "a collection with one document left is listed";
  ASSERT_TRUE(store().Erase(Key{"going", "c"}, revs["c"]).ok());
  EXPECT_EQ(ListPaged(store(), 10), std::vector<std::string>{"staying"})
      << "a collection whose documents were all erased is not listed";
}

TEST_P(StoreContractTest, ListCollectionsWithZeroLimitIsRefused) {
  ASSERT_TRUE(store().Create(Key{"c", "a"}, Body(1)).ok());
  auto p = store().ListCollections("", 0);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), litetx::Code::kInvalidArgument) << p.status().ToString();
}

TEST_P(StoreContractTest, ConcurrentCompareAndSwapIncrementsLoseNoUpdate) {
  Key k{"c", "counter"};
  ASSERT_TRUE(store().Create(k, json::object{{"n", 0}}).ok());
  constexpr int kThreads = 4;
  constexpr int kEach = 300;
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach;) {
        auto g = store().Get(k);
        if (!g.ok() || !g->has_value()) {
          ADD_FAILURE() << "get failed";
          return;
        }
        std::int64_t n = (*g)->value.at("n").as_int64();
        auto r = store().Replace(k, (*g)->revision, json::object{{"n", n + 1}});
        if (r.ok()) {
          ++i;
        } else if (r.code() == Code::kConflict) {
          ++conflicts;
        } else {
          ADD_FAILURE() << r.status().ToString();
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  auto g = store().Get(k);
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->value.at("n").as_int64(), kThreads * kEach)
      << "lost updates (" << conflicts.load() << " conflicts seen)";
}

TEST_P(StoreContractTest, ConcurrentCreatesOfOneKeyHaveOneWinner) {
  constexpr int kThreads = 4;
  for (int round = 0; round < 50; ++round) {
    Key k{"c", "k" + std::to_string(round)};
    std::atomic<int> wins{0}, conflicts{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto r = store().Create(k, Body(t));
        if (r.ok()) ++wins;
        else if (r.code() == Code::kConflict) ++conflicts;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(conflicts.load(), kThreads - 1);
  }
}

// ---- Batch ------------------------------------------------------------------------------------

using litetx::BatchOp;
using litetx::BatchResult;

// The document at `key`, or nullopt; fails the test on a read error.
std::optional<StoredDocument> Read(litetx::Store& s, const Key& key) {
  auto r = s.Get(key);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::nullopt;
}

TEST_P(StoreContractTest, BatchEmptyReturnsNoResults) {
  EXPECT_TRUE(store().Batch({}).empty());
}

TEST_P(StoreContractTest, BatchMixedOperationsAnswerAsTheirSingleCalls) {
  auto ra = store().Create(Key{"b", "a"}, Body(1));
  auto rb = store().Create(Key{"b", "b"}, Body(2));
  auto re = store().Create(Key{"b", "e"}, Body(3));
  auto rf = store().Create(Key{"b", "f"}, Body(4));
  auto rg = store().Create(Key{"other", "g"}, Body(5));
  ASSERT_TRUE(ra.ok() && rb.ok() && re.ok() && rf.ok() && rg.ok());
  const json::object v10 = Body(10), v11 = Body(11), v12 = Body(12), v13 = Body(13);
  std::vector<BatchOp> ops{
      BatchOp::Get(Key{"other", "g"}),           // 0: present
      BatchOp::Get(Key{"b", "absent"}),          // 1: absent
      BatchOp::Create(Key{"b", "new"}, v10),     // 2: created
      BatchOp::Create(Key{"b", "b"}, v11),       // 3: exists: conflict
      BatchOp::Replace(Key{"b", "a"}, *ra, v12), // 4: right revision
      BatchOp::Replace(Key{"b", "f"}, *rf + 1000, v13),  // 5: wrong revision: conflict
      BatchOp::Replace(Key{"b", "gone"}, *ra, v13),      // 6: absent: conflict
      BatchOp::Erase(Key{"b", "e"}, *re),        // 7: right revision
      BatchOp::Erase(Key{"other", "g"}, *rg + 1000),     // 8: wrong revision: conflict
      BatchOp::Erase(Key{"b", "nothing"}, 1),    // 9: absent: conflict
      BatchOp::Get(Key{"b", "b"}),               // 10: present, unchanged by op 3
  };
  std::vector<BatchResult> res = store().Batch(ops);
  ASSERT_EQ(res.size(), ops.size());
  ASSERT_TRUE(res[0].status.ok()) << res[0].status.ToString();
  ASSERT_TRUE(res[0].document.has_value());
  EXPECT_EQ(res[0].document->value, Body(5));
  EXPECT_EQ(res[0].document->revision, *rg);
  ASSERT_TRUE(res[1].status.ok()) << res[1].status.ToString();
  EXPECT_FALSE(res[1].document.has_value());
  ASSERT_TRUE(res[2].status.ok()) << res[2].status.ToString();
  EXPECT_EQ(res[3].status.code(), Code::kConflict) << res[3].status.ToString();
  ASSERT_TRUE(res[4].status.ok()) << res[4].status.ToString();
  EXPECT_EQ(res[5].status.code(), Code::kConflict) << res[5].status.ToString();
  EXPECT_EQ(res[6].status.code(), Code::kConflict) << res[6].status.ToString();
  EXPECT_TRUE(res[7].status.ok()) << res[7].status.ToString();
  EXPECT_EQ(res[8].status.code(), Code::kConflict) << res[8].status.ToString();
  EXPECT_EQ(res[9].status.code(), Code::kConflict) << res[9].status.ToString();
  ASSERT_TRUE(res[10].status.ok()) << res[10].status.ToString();
  ASSERT_TRUE(res[10].document.has_value());
  EXPECT_EQ(res[10].document->value, Body(2));
  EXPECT_EQ(res[10].document->revision, *rb);

  // The store now holds exactly what the single calls would have left.
  auto created = Read(store(), Key{"b", "new"});
  ASSERT_TRUE(created.has_value());
  EXPECT_EQ(created->value, v10);
  EXPECT_EQ(created->revision, res[2].revision);
  auto replaced = Read(store(), Key{"b", "a"});
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->value, v12);
  EXPECT_EQ(replaced->revision, res[4].revision);
  EXPECT_FALSE(Read(store(), Key{"b", "e"}).has_value());
  EXPECT_EQ(Read(store(), Key{"b", "b"})->revision, *rb);
  EXPECT_EQ(Read(store(), Key{"b", "f"})->revision, *rf);
  EXPECT_EQ(Read(store(), Key{"other", "g"})->revision, *rg);
  EXPECT_FALSE(Read(store(), Key{"b", "gone"}).has_value());
  EXPECT_FALSE(Read(store(), Key{"b", "nothing"}).has_value());

  // Revisions are never reused for one key: the replaced key has a new one, and the erased
  // key created again (in a second batch) gets one it never had.
  EXPECT_NE(res[4].revision, *ra);
  std::vector<BatchResult> again = store().Batch(std::vector<BatchOp>{
      BatchOp::Create(Key{"b", "e"}, v11), BatchOp::Erase(Key{"b", "new"}, res[2].revision)});
  ASSERT_EQ(again.size(), 2u);
  ASSERT_TRUE(again[0].status.ok()) << again[0].status.ToString();
  EXPECT_TRUE(again[1].status.ok()) << again[1].status.ToString();
  EXPECT_NE(again[0].revision, *re) << "a revision was reused after erase + create";
  EXPECT_FALSE(Read(store(), Key{"b", "new"}).has_value());
}

TEST_P(StoreContractTest, BatchOperationFailureLeavesTheOthers) {
  auto r = store().Create(Key{"b", "x"}, Body(1));
  ASSERT_TRUE(r.ok());
  const json::object v = Body(2);
  std::vector<BatchOp> ops{BatchOp::Create(Key{"b", "p"}, v),
                           BatchOp::Create(Key{"b", "nullvalue"}, v),
                           BatchOp::Replace(Key{"b", "x"}, *r + 7, v),  // conflict
                           BatchOp::Replace(Key{"b", "nullreplace"}, *r, v),
                           BatchOp::Create(Key{"b", "q"}, v)};
  ops[1].value = nullptr;
  ops[3].value = nullptr;
  std::vector<BatchResult> res = store().Batch(ops);
  ASSERT_EQ(res.size(), ops.size());
  EXPECT_TRUE(res[0].status.ok()) << res[0].status.ToString();
  EXPECT_EQ(res[1].status.code(), Code::kInvalidArgument) << res[1].status.ToString();
  EXPECT_EQ(res[2].status.code(), Code::kConflict) << res[2].status.ToString();
  EXPECT_EQ(res[3].status.code(), Code::kInvalidArgument) << res[3].status.ToString();
  EXPECT_TRUE(res[4].status.ok()) << res[4].status.ToString();
  EXPECT_TRUE(Read(store(), Key{"b", "p"}).has_value());
  EXPECT_TRUE(Read(store(), Key{"b", "q"}).has_value());
  EXPECT_FALSE(Read(store(), Key{"b", "nullvalue"}).has_value());
  EXPECT_EQ(Read(store(), Key{"b", "x"})->revision, *r);
}

TEST_P(StoreContractTest, BatchOfTwoHundredOperations) {
  constexpr int kN = 200;
  std::vector<json::object> values;
  for (int i = 0; i < kN; ++i) values.push_back(Body(i));
  auto id = [](int i) { return "k" + std::to_string(1000 + i); };
  std::vector<BatchOp> creates;
  for (int i = 0; i < kN; ++i) creates.push_back(BatchOp::Create(Key{"big", id(i)}, values[i]));
  std::vector<BatchResult> c = store().Batch(creates);
  ASSERT_EQ(c.size(), std::size_t{kN});
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(c[i].status.ok()) << i << ": " << c[i].status.ToString();
  }
  std::vector<BatchOp> gets;
  for (int i = 0; i < kN; ++i) gets.push_back(BatchOp::Get(Key{"big", id(i)}));
  std::vector<BatchResult> g = store().Batch(gets);
  ASSERT_EQ(g.size(), std::size_t{kN});
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(g[i].status.ok() && g[i].document.has_value()) << i;
    EXPECT_EQ(g[i].document->value, values[i]) << i;
    EXPECT_EQ(g[i].document->revision, c[i].revision) << i;
  }
  // Half replaced, half erased, in one batch.
  const json::object v = Body(-1);
  std::vector<BatchOp> mixed;
  for (int i = 0; i < kN; ++i) {
    mixed.push_back(i % 2 == 0 ? BatchOp::Replace(Key{"big", id(i)}, c[i].revision, v)
                               : BatchOp::Erase(Key{"big", id(i)}, c[i].revision));
  }
  std::vector<BatchResult> m = store().Batch(mixed);
  ASSERT_EQ(m.size(), std::size_t{kN});
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(m[i].status.ok()) << i << ": " << m[i].status.ToString();
  auto all = ScanPaged(store(), "big", 1000);
  ASSERT_EQ(all.size(), std::size_t{kN / 2});
  for (std::size_t j = 0; j < all.size(); ++j) {
    const int i = 2 * static_cast<int>(j);  // ids sort as the numbers 1000.. do
    EXPECT_EQ(all[j].first, id(i));
    EXPECT_EQ(all[j].second.value, v) << all[j].first;
    EXPECT_EQ(all[j].second.revision, m[i].revision) << all[j].first;
    EXPECT_NE(m[i].revision, c[i].revision) << all[j].first;
  }
}

TEST_P(StoreContractTest, BatchWithOneKeyTwiceDoesNotCorruptIt) {
  // The order of two operations on one key is unspecified; each must still be atomic and
  // the pair must be explained by one of the two orders.
  const json::object v1 = Body(1), v2 = Body(2);
  std::vector<BatchResult> res = store().Batch(std::vector<BatchOp>{
      BatchOp::Create(Key{"dup", "k"}, v1), BatchOp::Create(Key{"dup", "k"}, v2)});
  ASSERT_EQ(res.size(), 2u);
  const int winner = res[0].status.ok() ? 0 : 1;
  EXPECT_TRUE(res[winner].status.ok()) << res[winner].status.ToString();
  EXPECT_EQ(res[1 - winner].status.code(), Code::kConflict) << res[1 - winner].status.ToString();
  auto doc = Read(store(), Key{"dup", "k"});
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->revision, res[winner].revision);
  EXPECT_EQ(doc->value, winner == 0 ? v1 : v2);
  // Two replaces expecting the same revision: exactly one wins.
  const Revision rev = doc->revision;
  res = store().Batch(std::vector<BatchOp>{BatchOp::Replace(Key{"dup", "k"}, rev, v1),
                                           BatchOp::Replace(Key{"dup", "k"}, rev, v2),
                                           BatchOp::Get(Key{"dup", "k"})});
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].status.ok() + res[1].status.ok(), 1)
      << res[0].status.ToString() << " / " << res[1].status.ToString();
  const int w = res[0].status.ok() ? 0 : 1;
  EXPECT_EQ(res[1 - w].status.code(), Code::kConflict);
  ASSERT_TRUE(res[2].status.ok() && res[2].document.has_value());
  EXPECT_TRUE(res[2].document->revision == rev || res[2].document->revision == res[w].revision);
  doc = Read(store(), Key{"dup", "k"});
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->revision, res[w].revision);
  EXPECT_EQ(doc->value, w == 0 ? v1 : v2);
}

TEST_P(StoreContractTest, ConcurrentBatchedCompareAndSwapHasOneWinnerPerRevision) {
  // Threads read a few shared counters in one batch and increment them all in another; every
  // (key, expected revision) may be won by one replace only, and no increment may be lost.
  constexpr int kKeys = 4;
  constexpr int kThreads = 4;
  constexpr int kEach = 60;
  std::vector<Key> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(Key{"cas", "c" + std::to_string(i)});
    ASSERT_TRUE(store().Create(keys.back(), json::object{{"n", 0}}).ok());
  }
  std::mutex mu;
  std::map<std::pair<int, Revision>, int> wins;  // (key, expected revision) -> winners
  std::atomic<int> applied{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      std::vector<BatchOp> gets;
      for (const Key& k : keys) gets.push_back(BatchOp::Get(k));
      for (int round = 0; round < kEach; ++round) {
        std::vector<BatchResult> g = store().Batch(gets);
        if (g.size() != keys.size()) {
          ADD_FAILURE() << "batch returned " << g.size() << " results";
          return;
        }
        std::vector<json::object> next(kKeys);
        std::vector<BatchOp> cas;
        for (int i = 0; i < kKeys; ++i) {
          if (!g[i].status.ok() || !g[i].document.has_value()) {
            ADD_FAILURE() << "get failed: " << g[i].status.ToString();
            return;
          }
          next[i] = json::object{{"n", g[i].document->value.at("n").as_int64() + 1}};
        }
        for (int i = 0; i < kKeys; ++i) {
          cas.push_back(BatchOp::Replace(keys[i], g[i].document->revision, next[i]));
        }
        std::vector<BatchResult> r = store().Batch(cas);
        if (r.size() != keys.size()) {
          ADD_FAILURE() << "batch returned " << r.size() << " results";
          return;
        }
        for (int i = 0; i < kKeys; ++i) {
          if (r[i].status.ok()) {
            ++applied;
            std::lock_guard<std::mutex> lock(mu);
            ++wins[{i, g[i].document->revision}];
          } else if (r[i].status.code() != Code::kConflict) {
            ADD_FAILURE() << r[i].status.ToString();
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& [kr, n] : wins) {
    EXPECT_EQ(n, 1) << "key " << kr.first << " revision " << kr.second << " won " << n << " times";
  }
  std::int64_t total = 0;
  for (const Key& k : keys) {
    auto d = Read(store(), k);
    ASSERT_TRUE(d.has_value());
    total += d->value.at("n").as_int64();
  }
  EXPECT_EQ(total, applied.load()) << "lost or doubled updates";
  EXPECT_GE(applied.load(), kEach) << "too few batched replaces won";
}

// Every finite double (random bit patterns, subnormals, both zeros, the extremes) and every
// int64 / uint64 comes back with the same kind and bits, from Get, Scan and after Replace.
TEST_P(StoreContractTest, NumbersRoundTripBitExact) {
  constexpr std::size_t kPerDocument = 100;
  const json::array doubles = HardDoubles(4000);
  std::vector<json::array> chunks;
  for (std::size_t i = 0; i < doubles.size(); i += kPerDocument) {
    chunks.emplace_back(doubles.begin() + i,
                        doubles.begin() + std::min(doubles.size(), i + kPerDocument));
  }
  auto make = [](const json::array& numbers) {
    json::object o{{"first", numbers.front()}, {"numbers", numbers},
                   {"nested", json::object{{"n", json::array{numbers.back(), numbers}}}},
                   {"ints", ExtremeIntegers()}};
    return o;
  };
  std::size_t changed = 0, total = 0, documents_changed = 0;
  std::string example;
  auto compare = [&](const json::array& want, const json::object& got) {
    const json::value* numbers = got.if_contains("numbers");
    std::size_t n = numbers == nullptr ? want.size() : CountChanged(want, *numbers);
    if (n > 0 && example.empty() && numbers != nullptr && numbers->is_array()) {
      for (std::size_t i = 0; i < want.size() && i < numbers->get_array().size(); ++i) {
        if (!SameBits(want[i], numbers->get_array()[i])) {
          example = json::serialize(want[i]) + " came back as " +
                    json::serialize(numbers->get_array()[i]);
          break;
        }
      }
    }
    changed += n;
    total += want.size();
    if (!SameBits(make(want), got)) ++documents_changed;
  };
  std::vector<Revision> revs;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    auto r = store().Create(Key{"num", std::to_string(1000 + i)}, make(chunks[i]));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    revs.push_back(*r);
  }
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    auto g = store().Get(Key{"num", std::to_string(1000 + i)});
    ASSERT_TRUE(g.ok() && g->has_value()) << g.status().ToString();
    compare(chunks[i], (*g)->value);
  }
  auto all = ScanPaged(store(), "num", 7);
  ASSERT_EQ(all.size(), chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) compare(chunks[i], all[i].second.value);
  // Replace each document with the next one's numbers, then read them again.
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const json::array& next = chunks[(i + 1) % chunks.size()];
    ASSERT_TRUE(store().Replace(Key{"num", std::to_string(1000 + i)}, revs[i], make(next)).ok());
    auto g = store().Get(Key{"num", std::to_string(1000 + i)});
    ASSERT_TRUE(g.ok() && g->has_value());
    compare(next, (*g)->value);
  }
  EXPECT_EQ(changed, 0u) << changed << " of " << total << " doubles changed, e.g. " << example;
  EXPECT_EQ(documents_changed, 0u) << "documents read back different (numbers or integers)";
}

// A value nested deeper than kMaxStoredNestingDepth is refused (kInvalidArgument) by Create
// and Replace without writing, however deep it is; one at the limit is stored and read back.
TEST_P(StoreContractTest, ValueNestedTooDeeplyIsRefused) {
  const std::size_t limit = litetx::kMaxStoredNestingDepth;
  const json::object at_limit = Nested(limit, true);
  auto r = store().Create(Key{"c", "deep"}, at_limit);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto g = store().Get(Key{"c", "deep"});
  ASSERT_TRUE(g.ok() && g->has_value()) << g.status().ToString();
  EXPECT_EQ((*g)->value, at_limit);
  DeepStorage storage;
  for (std::size_t levels : {limit + 1, std::size_t{100'000}}) {
    for (bool arrays : {false, true}) {
      SCOPED_TRACE(std::to_string(levels) + (arrays ? " levels, arrays" : " levels"));
      const json::object over = Nested(levels, arrays, storage.ptr());
      auto c = store().Create(Key{"c", "over"}, over);
      EXPECT_EQ(c.code(), Code::kInvalidArgument) << c.status().ToString();
      EXPECT_NE(c.status().message().find("nests"), std::string::npos) << c.status().ToString();
      auto rep = store().Replace(Key{"c", "deep"}, *r, over);
      EXPECT_EQ(rep.code(), Code::kInvalidArgument) << rep.status().ToString();
    }
  }
  auto absent = store().Get(Key{"c", "over"});
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value()) << "a refused create wrote";
  g = store().Get(Key{"c", "deep"});
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->revision, *r) << "a refused replace wrote";
}

}  // namespace
}  // namespace ltxtest
