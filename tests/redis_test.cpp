// tests/redis_test.cpp — litetx::RedisStore against a redis-server the tests start themselves
// (127.0.0.1, a free port, a temporary directory, no persistence). Skipped with a message when
// redis-server is not installed.
//
//   * the shared Store contract suite (store_contract.cpp), a fresh key prefix per store;
//   * the stored format (key layout, bucket counters: revisions never reused);
//   * scan order across buckets for ids of many shapes;
//   * errors: refused connection (kUnavailable), a server stopped past the command timeout
//     (kUnknown on writes, kUnavailable on reads, and the write's fate then seen consistently),
//     wrong key types and damaged documents (kCorruption), NOSCRIPT after SCRIPT FLUSH;
//   * a smoke test of Database and Collector on the store.
#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "litetx/fault_injecting_store.h"
#include "litetx/redis_store.h"
#include "redis/redis_server.h"
#include "store_contract.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::RedisOptions;
using litetx::RedisStore;

// The server shared by the contract suite and the tests that do not stop it; started on first
// use, killed when the test program ends (by the environment below, or with it).
RedisServer* shared_server = nullptr;
std::string shared_error;

class SharedServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    delete shared_server;
    shared_server = nullptr;
  }
};
[[maybe_unused]] ::testing::Environment* const kSharedEnv =
    ::testing::AddGlobalTestEnvironment(new SharedServerEnvironment);

RedisServer* SharedServer() {
  if (shared_server == nullptr && shared_error.empty()) {
    auto* s = new RedisServer;
    shared_error = s->Start();
    if (shared_error.empty()) {
      shared_server = s;
    } else {
      delete s;
    }
  }
  return shared_server;
}

std::atomic<int> prefix_counter{0};

RedisOptions OptionsFor(const RedisServer& s) {
  RedisOptions o;
  o.port = s.port();
  o.prefix = "t" + std::to_string(::getpid()) + "." + std::to_string(prefix_counter++) + ":";
  return o;
}

std::shared_ptr<RedisStore> MustOpen(RedisOptions o) {
  auto s = RedisStore::Open(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

// Contract suite: a fresh prefix per store on the shared server. Instantiated only when
// redis-server is installed (RedisStoreTest.ServerAvailable skips with the reason otherwise).
std::vector<StoreFactoryParam> ContractParams() {
  if (RedisServerPath().empty()) return {};
  return {StoreFactoryParam{"RedisStore", []() -> std::shared_ptr<litetx::Store> {
                              RedisServer* s = SharedServer();
                              EXPECT_NE(s, nullptr) << shared_error;
                              if (s == nullptr) return nullptr;
                              return MustOpen(OptionsFor(*s));
                            }}};
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreContractTest, ::testing::ValuesIn(ContractParams()),
                         StoreFactoryName);

// Each test runs its own server (it may stop or kill it).
class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (RedisServerPath().empty()) {
      GTEST_SKIP() << "redis-server not found in PATH (Debian: apt-get install redis-server); "
                      "the Redis store is not tested";
    }
    std::string why = server_.Start();
    ASSERT_TRUE(why.empty()) << why;
  }
  void TearDown() override { server_.Stop(); }

  RedisOptions Opts() const { return OptionsFor(server_); }

  RedisServer server_;
};

TEST_F(RedisStoreTest, ServerAvailable) { EXPECT_TRUE(server_.Ping()); }

// The stored format: key names, hash fields, index members, the bucket counter.
TEST_F(RedisStoreTest, StoredFormatIsTheDocumentedLayout) {
  RedisOptions o = Opts();
  o.buckets = 16;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const std::string id("a\0b", 3);
  auto r = store->Create(Key{"col:x{", id}, Obj(R"({"k":[1,2.5,"s"]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string tag =
      o.prefix + "{col:x{:" + std::to_string(RedisStore::BucketOf(id, 16)) + "}";
  RawReply h = server_.Command({"HGETALL", tag + "d:" + id});
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->type, REDIS_REPLY_ARRAY);
  std::map<std::string, std::string> fields;
  for (std::size_t i = 0; i + 1 < h->elements; i += 2) {
    fields[std::string(h->element[i]->str, h->element[i]->len)] =
        std::string(h->element[i + 1]->str, h->element[i + 1]->len);
  }
  EXPECT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields["v"], R"({"k":[1,2.5E0,"s"]})");
  EXPECT_EQ(fields["r"], std::to_string(*r));
  RawReply counter = server_.Command({"GET", tag + "r"});
  ASSERT_NE(counter, nullptr);
  ASSERT_EQ(counter->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(counter->str, counter->len), std::to_string(*r));
  RawReply members = server_.Command({"ZRANGE", tag + "i", "0", "-1", "WITHSCORES"});
  ASSERT_NE(members, nullptr);
  ASSERT_EQ(members->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(members->elements, 2u);
  EXPECT_EQ(std::string(members->element[0]->str, members->element[0]->len), id);
  EXPECT_EQ(std::string(members->element[1]->str, members->element[1]->len), "0");
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; of "" the offset basis 0xcbf29ce484222325.
  EXPECT_EQ(RedisStore::BucketOf("a", 1000), 0xaf63dc4c8601ec8cull % 1000);
  EXPECT_EQ(RedisStore::BucketOf("", 7), 0xcbf29ce484222325ull % 7);
}

// The bucket counter is never reset: erase + create of one id, and creates of other ids in the
// same bucket, never see a revision again (revisions are unique per bucket, hence per key).
TEST_F(RedisStoreTest, RevisionsNeverReusedAfterEraseAndCreate) {
  RedisOptions o = Opts();
  o.buckets = 2;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  std::set<std::pair<std::size_t, Revision>> seen;  // (bucket, revision): counters are per bucket
  std::map<std::size_t, Revision> last;  // per bucket: revisions strictly increase
  int writes = 0;
  for (int round = 0; round < 10; ++round) {
    for (const std::string id : {"x", "y", "z", "w"}) {
      const std::size_t b = RedisStore::BucketOf(id, 2);
      auto c = store->Create(Key{"c", id}, json::object{{"round", round}});
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      auto r = store->Replace(Key{"c", id}, *c, json::object{{"round", round}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      for (Revision rev : {*c, *r}) {
        ++writes;
        EXPECT_TRUE(seen.insert({b, rev}).second) << "revision " << rev << " reused";
        EXPECT_GT(rev, last[b]) << "bucket " << b << " went back";
        last[b] = rev;
      }
      ASSERT_TRUE(store->Erase(Key{"c", id}, *r).ok());
      EXPECT_EQ(store->Replace(Key{"c", id}, *r, json::object{}).code(), Code::kConflict);
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(writes));
  EXPECT_EQ(writes, 80);
  EXPECT_EQ(last.size(), 2u) << "the ids did not cover both buckets";
  // A store reopened on the same data continues the counters.
  auto again = MustOpen(o);
  ASSERT_NE(again, nullptr);
  auto c = again->Create(Key{"c", "x"}, json::object{});
  ASSERT_TRUE(c.ok());
  EXPECT_GT(*c, last[RedisStore::BucketOf("x", 2)]);
}

// Ids of many shapes, spread over the buckets, come back in byte order whatever the page size.
TEST_F(RedisStoreTest, ScanOrderAcrossBucketsForIdsOfManyShapes) {
  std::vector<std::string> ids = {"a", "b", "aa", "a\x01", std::string("\0", 1),
                                  std::string("\0\0", 2), std::string("x\0y", 3),
                                  "\xff", "\xff\xff", "\x7f", "\x80", "}", "{", "{x}", ":",
                                  "d:", "(", "[", "-", "+", " ", "\xC3\xA9", std::string(600, 'L'),
                                  std::string(600, 'L') + "M"};
  for (int i = 0; i < 150; ++i) ids.push_back("n" + std::to_string(i * 7919 % 1000));
  for (int i = 0; i < 40; ++i) ids.push_back(std::string(1, static_cast<char>(i * 6 + 1)) + "q");
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (std::size_t buckets : {std::size_t{1}, std::size_t{7}, std::size_t{16}}) {
    SCOPED_TRACE(std::to_string(buckets) + " buckets");
    RedisOptions o = Opts();
    o.buckets = buckets;
    auto store = MustOpen(o);
    ASSERT_NE(store, nullptr);
    std::set<std::size_t> used;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(store->Create(Key{"s", ids[i]}, json::object{{"i", i}}).ok()) << i;
      used.insert(RedisStore::BucketOf(ids[i], buckets));
    }
    EXPECT_EQ(used.size(), buckets) << "ids did not reach every bucket";
    ASSERT_TRUE(store->Create(Key{"s0", "a"}, json::object{}).ok());  // a neighbour collection
    for (std::size_t limit : {1u, 3u, 16u, 17u, 100u, 1000u}) {
      SCOPED_TRACE("limit " + std::to_string(limit));
      std::vector<std::string> got;
      std::string cursor;
      for (int page = 0; page < 1000; ++page) {
        auto p = store->Scan("s", cursor, limit);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        ASSERT_LE(p->documents.size(), limit);
        for (auto& [id, doc] : p->documents) {
          auto i = std::find(ids.begin(), ids.end(), id);
          ASSERT_NE(i, ids.end());
          EXPECT_EQ(doc.value, (json::object{{"i", i - ids.begin()}}));
          got.push_back(id);
        }
        if (p->next_cursor.empty()) break;
        cursor = p->next_cursor;
      }
      EXPECT_EQ(got, ids);
    }
  }
  std::printf("[ scan    ] %zu ids in byte order over 1, 7 and 16 buckets, 6 page sizes\n",
              ids.size());
}

TEST_F(RedisStoreTest, CollectionWithClosingBraceIsRefused) {
  auto store = MustOpen(Opts());
  ASSERT_NE(store, nullptr);
  auto c = store->Create(Key{"a}b", "x"}, json::object{});
  EXPECT_EQ(c.code(), Code::kInvalidArgument) << c.status().ToString();
  auto g = store->Get(Key{"a}b", "x"});
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
  EXPECT_EQ(store->Erase(Key{"a}b", "x"}, 1).code(), Code::kConflict);
  auto s = store->Scan("a}b", "", 10);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->documents.empty());
  RedisOptions o = Opts();
  o.prefix = "p{";
  EXPECT_EQ(RedisStore::Open(o).code(), Code::kInvalidArgument);
}

TEST_F(RedisStoreTest, RefusedConnectionIsUnavailable) {
  RedisOptions o = Opts();
  o.port = FreePort();  // nobody listens there
  const auto t0 = std::chrono::steady_clock::now();
  auto s = RedisStore::Open(o);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.status().ToString();
  EXPECT_NE(s.status().message().find("cannot connect"), std::string::npos)
      << s.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // A store whose server went away: reads and (fresh-connection) writes are kUnavailable.
  RedisOptions live = Opts();
  live.pool_size = 1;
  auto store = MustOpen(live);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Create(Key{"c", "k"}, json::object{}).ok());
  server_.Stop();
  auto g = store->Get(Key{"c", "k"});
  EXPECT_EQ(g.code(), Code::kUnavailable) << g.status().ToString();  // the pooled connection
  auto c = store->Create(Key{"c", "k2"}, json::object{});  // a new connection is refused
  EXPECT_EQ(c.code(), Code::kUnavailable) << c.status().ToString();
  auto sc = store->Scan("c", "", 10);
  EXPECT_EQ(sc.code(), Code::kUnavailable) << sc.status().ToString();
}

// A write sent to a server that stops answering (SIGSTOP) past the command timeout is
// kUnknown; a read is kUnavailable. After SIGCONT, what the write did is seen consistently: the
// document is either as before or as written, through Get, Scan and a conditional write.
TEST_F(RedisStoreTest, ServerStoppedPastCommandTimeoutGivesUnknownForWrites) {
  RedisOptions o = Opts();
  o.command_timeout = std::chrono::milliseconds(150);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto base = store->Create(Key{"c", "r"}, json::object{{"n", 0}});
  ASSERT_TRUE(base.ok());
  auto gone = store->Create(Key{"c", "e"}, json::object{{"n", 0}});
  ASSERT_TRUE(gone.ok());

  server_.Pause();
  auto c = store->Create(Key{"c", "new"}, json::object{{"n", 1}});
  auto r = store->Replace(Key{"c", "r"}, *base, json::object{{"n", 1}});
  Status e = store->Erase(Key{"c", "e"}, *gone);
  auto g = store->Get(Key{"c", "r"});
  auto s = store->Scan("c", "", 10);
  server_.Resume();

  EXPECT_EQ(c.code(), Code::kUnknown) << c.status().ToString();
  EXPECT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  EXPECT_EQ(e.code(), Code::kUnknown) << e.ToString();
  EXPECT_EQ(g.code(), Code::kUnavailable) << g.status().ToString();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.status().ToString();

  // Get, Scan and conditional writes agree on each write's fate.
  auto page = store->Scan("c", "", 10);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::map<std::string, StoredDocument> scanned;
  for (auto& [id, doc] : page->documents) scanned[id] = doc;
  int landed = 0;
  auto created = store->Get(Key{"c", "new"});
  ASSERT_TRUE(created.ok());
  if (created->has_value()) {
    ++landed;
    EXPECT_EQ((*created)->value, (json::object{{"n", 1}}));
    EXPECT_EQ(scanned.count("new"), 1u);
    EXPECT_EQ(store->Create(Key{"c", "new"}, json::object{}).code(), Code::kConflict);
  } else {
    EXPECT_EQ(scanned.count("new"), 0u);
  }
  auto replaced = store->Get(Key{"c", "r"});
  ASSERT_TRUE(replaced.ok() && replaced->has_value());
  if ((*replaced)->revision != *base) {
    ++landed;
    EXPECT_EQ((*replaced)->value, (json::object{{"n", 1}}));
    EXPECT_EQ(store->Replace(Key{"c", "r"}, *base, json::object{}).code(), Code::kConflict);
  } else {
    EXPECT_EQ((*replaced)->value, (json::object{{"n", 0}}));
  }
  EXPECT_EQ(scanned.at("r").revision, (*replaced)->revision);
  auto erased = store->Get(Key{"c", "e"});
  ASSERT_TRUE(erased.ok());
  if (!erased->has_value()) {
    ++landed;
    EXPECT_EQ(scanned.count("e"), 0u);
    EXPECT_EQ(store->Erase(Key{"c", "e"}, *gone).code(), Code::kConflict);
  } else {
    EXPECT_EQ((*erased)->revision, *gone);
    EXPECT_EQ(scanned.count("e"), 1u);
  }
  std::printf("[ paused  ] 3 writes kUnknown, %d of them landed; reads kUnavailable\n", landed);
}

TEST_F(RedisStoreTest, WrongTypesAndDamagedDocumentsAreCorruption) {
  RedisOptions o = Opts();
  o.buckets = 1;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const std::string tag = o.prefix + "{c:0}";
  ASSERT_NE(server_.Command({"SET", tag + "d:str", "x"}), nullptr);
  ASSERT_NE(server_.Command({"HSET", tag + "d:bad", "v", "{not json", "r", "5"}), nullptr);
  ASSERT_NE(server_.Command({"HSET", tag + "d:arr", "v", "[1]", "r", "6"}), nullptr);
  ASSERT_NE(server_.Command({"HSET", tag + "d:rev", "v", "{}", "r", "-1"}), nullptr);
  ASSERT_NE(server_.Command({"HSET", tag + "d:half", "v", "{}"}), nullptr);
  for (const char* id : {"str", "bad", "arr", "rev", "half"}) {
    auto g = store->Get(Key{"c", id});
    EXPECT_EQ(g.code(), Code::kCorruption) << id << ": " << g.status().ToString();
  }
  auto c = store->Create(Key{"c", "str"}, json::object{});
  EXPECT_EQ(c.code(), Code::kCorruption) << c.status().ToString();
  auto r = store->Replace(Key{"c", "str"}, 1, json::object{});
  EXPECT_EQ(r.code(), Code::kCorruption) << r.status().ToString();
  // The index of the bucket is a string: a create refuses before writing anything.
  ASSERT_NE(server_.Command({"SET", tag + "i", "x"}), nullptr);
  auto c2 = store->Create(Key{"c", "fresh"}, json::object{});
  EXPECT_EQ(c2.code(), Code::kCorruption) << c2.status().ToString();
  RawReply exists = server_.Command({"EXISTS", tag + "d:fresh"});
  ASSERT_NE(exists, nullptr);
  EXPECT_EQ(exists->integer, 0) << "a refused create wrote the document";
  EXPECT_EQ(store->Scan("c", "", 10).code(), Code::kCorruption);
}

// After SCRIPT FLUSH, EVALSHA fails with NOSCRIPT: the store sends the script itself (which
// caches it again) and the write goes through once.
TEST_F(RedisStoreTest, NoscriptAfterScriptFlushFallsBackToEval) {
  auto store = MustOpen(Opts());
  ASSERT_NE(store, nullptr);
  ASSERT_NE(server_.Command({"SCRIPT", "FLUSH"}), nullptr);
  auto c = store->Create(Key{"c", "k"}, json::object{{"n", 1}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_NE(server_.Command({"SCRIPT", "FLUSH"}), nullptr);
  auto r = store->Replace(Key{"c", "k"}, *c, json::object{{"n", 2}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(*r, *c);
  EXPECT_EQ(*r, *c + 1) << "the replace ran twice";
  ASSERT_NE(server_.Command({"SCRIPT", "FLUSH"}), nullptr);
  EXPECT_EQ(store->Erase(Key{"c", "k"}, *c).code(), Code::kConflict);
  ASSERT_NE(server_.Command({"SCRIPT", "FLUSH"}), nullptr);
  EXPECT_TRUE(store->Erase(Key{"c", "k"}, *r).ok());
  auto g = store->Get(Key{"c", "k"});
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
}

// More threads than connections: callers wait for a free connection, and the pool never opens
// more than pool_size of them.
TEST_F(RedisStoreTest, SmallPoolServesManyThreads) {
  RedisOptions o = Opts();
  o.pool_size = 2;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Key k{"p", std::to_string(t) + "." + std::to_string(i)};
        auto c = store->Create(k, json::object{{"i", i}});
        auto g = store->Get(k);
        if (!c.ok() || !g.ok() || !g->has_value() || (*g)->revision != *c) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::size_t total = 0;
  std::string cursor;
  for (int page = 0; page < 100; ++page) {
    auto p = store->Scan("p", cursor, 64);
    ASSERT_TRUE(p.ok());
    total += p->documents.size();
    if (p->next_cursor.empty()) break;
    cursor = p->next_cursor;
  }
  EXPECT_EQ(total, static_cast<std::size_t>(kThreads * kEach));
  RawReply info = server_.Command({"INFO", "clients"});
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->type, REDIS_REPLY_STRING);
  const std::string text(info->str, info->len);
  // The store's connections plus the one asking.
  EXPECT_NE(text.find("connected_clients:3\r"), std::string::npos) << text;
}

// Database commits and reads, and a collector finishing and reversing crashed coordinators.
TEST_F(RedisStoreTest, DatabaseAndCollectorSmoke) {
  auto store = MustOpen(Opts());
  ASSERT_NE(store, nullptr);
  auto clock = std::make_shared<litetx::ManualClock>();
  litetx::Options opts;
  opts.clock = clock;
  opts.lease = std::chrono::seconds(10);
  opts.renew_leases = false;
  litetx::Database db(store, opts);
  MustCommit(db, litetx::Transaction()
                     .Insert("acct", "a", json::object{{"n", 100}})
                     .Insert("acct", "b", json::object{{"n", 0}}));
  auto transfer = [](int amount) {
    return litetx::Transaction()
        .Adjust("acct", "a", {{"n", -amount}})
        .Adjust("acct", "b", {{"n", amount}});
  };
  MustCommit(db, transfer(10));
  auto balance = [&](const char* id) -> std::int64_t {
    auto r = db.Read("acct", id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->doc.at("n").as_int64() : -1;
  };
  EXPECT_EQ(balance("a"), 90);
  EXPECT_EQ(balance("b"), 10);
  db.Flush();  // finished, so that the crashing commits below count only their own writes
  // Writes of a two-action parallel commit, in one batch: 1 the staging record, 2-3 the
  // applies (then, off the caller's path, the flip and the finishing). After 2 the record
  // lacks a hold: reversed. After 3 everything landed: committed.
  for (std::uint64_t crash_after : {std::uint64_t{2}, std::uint64_t{3}}) {
    SCOPED_TRACE("crash after write " + std::to_string(crash_after));
    litetx::FaultOptions fo;
    fo.crash_after_writes = crash_after;
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(store, fo);
    litetx::Database dying(faulty, opts);
    EXPECT_THROW((void)dying.Commit(transfer(5)), litetx::SimulatedCrash);
    clock->Advance(std::chrono::seconds(60));
    litetx::CollectorOptions gco;
    gco.engine = opts;
    litetx::Collector gc(store, gco);
    Status s = gc.RunOnce();
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto st = gc.stats();
    EXPECT_EQ(st.finished + st.reversed, 1u);
    EXPECT_EQ(crash_after == 3 ? st.finished : st.reversed, 1u);
  }
  EXPECT_EQ(balance("a"), 85);  // the first crashed transfer reversed, the second finished
  EXPECT_EQ(balance("b"), 15);
}
}  // namespace
}  // namespace ltxtest

namespace ltxtest {
namespace {

// The format marker: written by the first Open, checked by later ones; a marker of another
// bucket count or a foreign key under that name refuses the store and writes nothing.
TEST_F(RedisStoreTest, FormatMarkerRecordsTheBucketCount) {
  RedisOptions o = Opts();
  o.buckets = 8;
  ASSERT_NE(MustOpen(o), nullptr);
  RawReply marker = server_.Command({"GET", o.prefix + "format"});
  ASSERT_NE(marker, nullptr);
  ASSERT_EQ(marker->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(marker->str, marker->len), "litetx-redis 1 buckets=8");
  ASSERT_NE(MustOpen(o), nullptr);  // the same count again: fine

  RawReply before = server_.Command("DBSIZE");
  RedisOptions other = o;
  other.buckets = 16;
  auto s = RedisStore::Open(other);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.status().ToString();
  EXPECT_NE(s.status().message().find("buckets=8"), std::string::npos) << s.status().ToString();

  RedisOptions foreign = Opts();
  ASSERT_NE(server_.Command({"SET", foreign.prefix + "format", "someone else's"}), nullptr);
  auto f = RedisStore::Open(foreign);
  EXPECT_EQ(f.code(), Code::kInvalidArgument) << f.status().ToString();
  EXPECT_NE(f.status().message().find("not litetx's"), std::string::npos) << f.status().ToString();
  RedisOptions typed = Opts();
  ASSERT_NE(server_.Command({"LPUSH", typed.prefix + "format", "x"}), nullptr);
  auto t = RedisStore::Open(typed);
  EXPECT_EQ(t.code(), Code::kInvalidArgument) << t.status().ToString();
  RawReply after = server_.Command("DBSIZE");
  ASSERT_NE(before, nullptr);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->integer, before->integer + 2);  // only the two keys this test set itself
}

// With wait_replicas and no replica attached, every write runs on the server but WAIT counts
// 0 replicas: kUnknown, and the write is visible afterwards (it did run).
TEST_F(RedisStoreTest, WaitWithoutReplicasReportsUnknownAfterTheWriteRan) {
  RedisOptions o = Opts();
  o.wait_replicas = 1;
  o.wait_timeout = std::chrono::milliseconds(50);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  auto c = store->Create(Key{"w", "a"}, Obj(R"({"n":1})"));
  EXPECT_EQ(c.code(), Code::kUnknown) << c.status().ToString();
  EXPECT_NE(c.status().message().find("0 of 1 replicas"), std::string::npos)
      << c.status().ToString();
  auto g = store->Get(Key{"w", "a"});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(g->has_value());
  // A refused write (conflict) is reported as such: WAIT does not matter when nothing ran.
  auto again = store->Create(Key{"w", "a"}, Obj(R"({"n":2})"));
  EXPECT_EQ(again.code(), Code::kConflict) << again.status().ToString();
  RedisOptions bad = Opts();
  bad.wait_replicas = 1;
  bad.wait_timeout = bad.command_timeout;
  EXPECT_EQ(RedisStore::Open(bad).code(), Code::kInvalidArgument);
}

// A pooled connection that the server closed (here: CLIENT KILL of every client) is noticed
// before use, so a write on it is not reported as an unknown outcome.
TEST_F(RedisStoreTest, IdleConnectionClosedByTheServerIsNotUsed) {
  RedisOptions o = Opts();
  o.pool_size = 2;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Create(Key{"k", "a"}, Obj(R"({"n":1})")).ok());
  RawReply killed = server_.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  ASSERT_NE(killed, nullptr);
  ASSERT_EQ(killed->type, REDIS_REPLY_INTEGER);
  ASSERT_GE(killed->integer, 1);
  // Give the server's FIN a moment to arrive (bounded: the peek is what is under test).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto c = store->Create(Key{"k", "b"}, Obj(R"({"n":1})"));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

// RedisStore refuses a cluster-mode server (it would answer MOVED for most keys).
TEST_F(RedisStoreTest, ClusterNodeIsRefused) {
  RedisServer node;
  RedisServerOptions so;
  so.cluster = true;
  std::string why = node.Start(so);
  ASSERT_EQ(why, "") << why;
  RedisOptions o = Opts();
  o.port = node.port();
  auto s = RedisStore::Open(o);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.status().ToString();
  EXPECT_NE(s.status().message().find("cluster"), std::string::npos) << s.status().ToString();
  RawReply size = node.Command("DBSIZE");
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->integer, 0);
}

}  // namespace
}  // namespace ltxtest

namespace ltxtest {
namespace {

// Timeouts hiredis or WAIT would read as "none" or "forever" are refused at Open.
TEST_F(RedisStoreTest, TimeoutsMustBePositive) {
  auto open_with = [&](auto change) {
    RedisOptions o = Opts();
    change(o);
    return RedisStore::Open(o).code();
  };
  using ms = std::chrono::milliseconds;
  EXPECT_EQ(open_with([](RedisOptions& o) { o.command_timeout = ms(0); }), Code::kInvalidArgument);
  EXPECT_EQ(open_with([](RedisOptions& o) { o.connect_timeout = ms(-1); }), Code::kInvalidArgument);
  EXPECT_EQ(open_with([](RedisOptions& o) {
              o.wait_replicas = 1;
              o.wait_timeout = ms(0);
            }),
            Code::kInvalidArgument);
  EXPECT_EQ(open_with([](RedisOptions& o) {
              o.wait_replicas = 1;
              o.wait_timeout = ms(-1);
            }),
            Code::kInvalidArgument);
  EXPECT_EQ(open_with([](RedisOptions& o) { o.wait_replicas = -1; }), Code::kInvalidArgument);
  EXPECT_EQ(open_with([](RedisOptions& o) { o.wait_timeout = ms(0); }), Code::kOk);  // unused
}

// A server that may evict litetx's keys is refused; noeviction and volatile-* are accepted.
TEST_F(RedisStoreTest, EvictingServerIsRefused) {
  RawReply before = server_.Command("DBSIZE");
  ASSERT_NE(before, nullptr);
  for (const char* policy : {"allkeys-lru", "allkeys-random", "allkeys-lfu"}) {
    ASSERT_NE(server_.Command({"CONFIG", "SET", "maxmemory-policy", policy}), nullptr);
    auto s = RedisStore::Open(Opts());
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << policy << ": " << s.status().ToString();
    EXPECT_NE(s.status().message().find(policy), std::string::npos) << s.status().ToString();
  }
  RawReply after = server_.Command("DBSIZE");
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->integer, before->integer);  // nothing written
  for (const char* policy : {"volatile-lru", "noeviction"}) {
    ASSERT_NE(server_.Command({"CONFIG", "SET", "maxmemory-policy", policy}), nullptr);
    EXPECT_NE(MustOpen(Opts()), nullptr) << policy;
  }
}

}  // namespace
}  // namespace ltxtest
