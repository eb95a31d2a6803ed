// tests/redis/redis_cluster_store_test.cpp — litetx::RedisClusterStore on a cluster the tests
// start themselves (tests/redis/redis_cluster.h: 3 masters with a replica each on free
// 127.0.0.1 ports). Skipped with a message when redis-server or redis-cli is not installed.
//
//   * the shared Store contract suite (store_contract.cpp), unchanged, a fresh prefix per store;
//   * slot routing: SlotOf equals Redis's CLUSTER KEYSLOT; one collection spreads over all
//     masters; scan order across buckets and masters;
//   * topology: a slot moved behind the store's back (MOVED followed), a slot half moved (ASK
//     followed, and a write that would need keys on both sides waits and is refused, never
//     half run); NOSCRIPT after SCRIPT FLUSH on every master;
//   * WAIT: a write acknowledged by the replica is OK; with the replica stopped it is kUnknown
//     and did run on the master;
//   * bad input: a plain server, an unreachable seed, another bucket count, bad options.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "litetx/database.h"
#include "litetx/redis_cluster_store.h"
#include "redis/redis_cluster.h"
#include "store_contract.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Code;
using litetx::Key;
using litetx::RedisClusterOptions;
using litetx::RedisClusterStore;

std::string MissingTools() {
  if (RedisServerPath().empty()) {
    return "redis-server not found in PATH (Debian: apt-get install redis-server); the Redis "
           "Cluster store is not tested";
  }
  if (RedisCliPath().empty()) {
    return "redis-cli not found in PATH (Debian: apt-get install redis-tools); the Redis "
           "Cluster store is not tested";
  }
  return {};
}

// One cluster for the whole test program, started on first use and stopped at exit.
RedisCluster* shared_cluster = nullptr;
std::string shared_error;

class SharedClusterEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    delete shared_cluster;
    shared_cluster = nullptr;
  }
};
[[maybe_unused]] ::testing::Environment* const kSharedEnv =
    ::testing::AddGlobalTestEnvironment(new SharedClusterEnvironment);

RedisCluster* SharedCluster() {
  if (shared_cluster == nullptr && shared_error.empty()) {
    auto* c = new RedisCluster;
    shared_error = c->Start();
    if (shared_error.empty()) {
      shared_cluster = c;
    } else {
      delete c;
    }
  }
  return shared_cluster;
}

std::atomic<int> prefix_counter{0};

RedisClusterOptions OptionsFor(const RedisCluster& c) {
  RedisClusterOptions o;
  o.seeds.clear();
  for (int p : c.SeedPorts()) o.seeds.push_back({"127.0.0.1", p});
  o.prefix = "c" + std::to_string(::getpid()) + "." + std::to_string(prefix_counter++) + ":";
  return o;
}

std::shared_ptr<RedisClusterStore> MustOpen(RedisClusterOptions o) {
  auto s = RedisClusterStore::Open(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

std::vector<StoreFactoryParam> ContractParams() {
  if (!MissingTools().empty()) return {};
  return {StoreFactoryParam{"RedisClusterStore", []() -> std::shared_ptr<litetx::Store> {
                              RedisCluster* c = SharedCluster();
                              EXPECT_NE(c, nullptr) << shared_error;
                              if (c == nullptr) return nullptr;
                              return MustOpen(OptionsFor(*c));
                            }}};
}

INSTANTIATE_TEST_SUITE_P(RedisCluster, StoreContractTest, ::testing::ValuesIn(ContractParams()),
                         StoreFactoryName);

class RedisClusterStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = MissingTools(); !why.empty()) GTEST_SKIP() << why;
    cluster_ = SharedCluster();
    ASSERT_NE(cluster_, nullptr) << shared_error;
    ASSERT_EQ(cluster_->WaitConverged(std::chrono::seconds(10)), "");
  }
  RedisClusterOptions Opts() const { return OptionsFor(*cluster_); }

  // The document key of `id` in `collection` under `o`, as the store lays it out.
  static std::string DocKey(const RedisClusterOptions& o, const std::string& collection,
                            const std::string& id) {
    return o.prefix + "{" + collection + ":" +
           std::to_string(litetx::RedisStore::BucketOf(id, o.buckets)) + "}d:" + id;
  }

  // Some master other than `port`.
  int OtherMaster(int port) const {
    for (int m : cluster_->MasterPorts()) {
      if (m != port) return m;
    }
    return -1;
  }

  RedisCluster* cluster_ = nullptr;
};

TEST_F(RedisClusterStoreTest, SlotOfIsRedisKeyslot) {
  std::vector<std::string> keys = {"foo", "{user1000}.following", "{user1000}.followers",
                                   "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}",
                                   std::string("a\0{b\xff}c", 8), std::string(300, 'k'),
                                   "ltx:{accounts:17}d:a1"};
  RedisClusterOptions o = Opts();
  for (int i = 0; i < 20; ++i) keys.push_back(DocKey(o, "c", "id" + std::to_string(i)));
  for (const std::string& k : keys) {
    EXPECT_EQ(RedisClusterStore::SlotOf(k), cluster_->KeySlot(k)) << k;
  }
  EXPECT_EQ(RedisClusterStore::SlotOf("123456789"), 0x31C3 % 16384);  // CRC16/XMODEM check value
}

TEST_F(RedisClusterStoreTest, OneCollectionSpreadsOverAllMasters) {
  RedisClusterOptions o = Opts();
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  std::map<int, int> per_master;
  for (int i = 0; i < 200; ++i) {
    const std::string id = "d" + std::to_string(i);
    ASSERT_TRUE(store->Create(Key{"spread", id}, Obj(R"({"n":1})")).ok());
    per_master[cluster_->MasterOfSlot(RedisClusterStore::SlotOf(DocKey(o, "spread", id)))]++;
  }
  ASSERT_EQ(cluster_->MasterPorts().size(), 3u);
  for (int m : cluster_->MasterPorts()) {
    EXPECT_GE(per_master[m], 20) << "master " << m;
    // The document really is on that master.
  }
  const std::string id = "d0";
  int owner = cluster_->MasterOfSlot(RedisClusterStore::SlotOf(DocKey(o, "spread", id)));
  RawReply exists = cluster_->Node(owner).Command({"EXISTS", DocKey(o, "spread", id)});
  ASSERT_NE(exists, nullptr);
  EXPECT_EQ(exists->integer, 1);
}

TEST_F(RedisClusterStoreTest, ScanOrderAcrossBucketsAndMasters) {
  RedisClusterOptions o = Opts();
  o.buckets = 32;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  std::set<std::string> ids;
  for (int i = 0; i < 150; ++i) ids.insert("n" + std::to_string(i * 7919 % 1000));
  ids.insert(std::string("\0", 1));
  ids.insert(std::string("a\0b", 3));
  ids.insert(std::string("\xff\xfe", 2));
  ids.insert(std::string(500, 'z'));
  ids.insert("{brace}");
  for (const std::string& id : ids) {
    ASSERT_TRUE(store->Create(Key{"scan", id}, Obj(R"({"n":1})")).ok());
  }
  for (std::size_t limit : {1u, 7u, 1000u}) {
    std::vector<std::string> seen;
    std::string cursor;
    for (int pages = 0; pages < 1000; ++pages) {
      auto page = store->Scan("scan", cursor, limit);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      ASSERT_LE(page->documents.size(), limit);
      for (auto& [id, doc] : page->documents) seen.push_back(id);
      if (page->next_cursor.empty()) break;
      cursor = page->next_cursor;
    }
    EXPECT_EQ(seen, std::vector<std::string>(ids.begin(), ids.end())) << "limit " << limit;
  }
}

// The slot of a used document moves to another master while the store still has the old map:
// the old master answers MOVED, the store follows it and refreshes its map.
TEST_F(RedisClusterStoreTest, MovedSlotIsFollowed) {
  RedisClusterOptions o = Opts();
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const Key key{"moved", "doc"};
  auto rev = store->Create(key, Obj(R"({"n":1})"));
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  const int slot = RedisClusterStore::SlotOf(DocKey(o, key.collection, key.id));
  const int from = cluster_->MasterOfSlot(slot);
  const int to = OtherMaster(from);
  ASSERT_EQ(cluster_->MoveSlot(slot, from, to), "");
  const auto before = store->stats();
  auto got = store->Get(key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->revision, *rev);
  auto rev2 = store->Replace(key, *rev, Obj(R"({"n":2})"));
  ASSERT_TRUE(rev2.ok()) << rev2.status().ToString();
  EXPECT_GT(*rev2, *rev);
  const auto after = store->stats();
  EXPECT_GE(after.moved, before.moved + 1);
  EXPECT_GE(after.topology_refreshes, before.topology_refreshes + 1);
  RawReply on_target = cluster_->Node(to).Command({"HGET", DocKey(o, key.collection, key.id), "r"});
  ASSERT_NE(on_target, nullptr);
  ASSERT_EQ(on_target->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(on_target->str, on_target->len), std::to_string(*rev2));
}

// A slot half moved: after its keys went to the target, reads get ASK and follow it; a write
// that finds some of its keys on each side (TRYAGAIN, or ASK then TRYAGAIN) is refused with
// kUnavailable within the command timeout, and nothing of it ran. After the move, it succeeds.
TEST_F(RedisClusterStoreTest, HalfMovedSlotAsksAndNeverHalfRunsAWrite) {
  RedisClusterOptions o = Opts();
  o.command_timeout = std::chrono::milliseconds(300);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const Key key{"ask", "doc"};
  auto rev = store->Create(key, Obj(R"({"n":1})"));
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  // Another id of the same bucket, not created yet.
  std::string fresh;
  for (int i = 0; fresh.empty(); ++i) {
    std::string id = "f" + std::to_string(i);
    if (litetx::RedisStore::BucketOf(id, o.buckets) == litetx::RedisStore::BucketOf("doc", o.buckets)) {
      fresh = id;
    }
  }
  const int slot = RedisClusterStore::SlotOf(DocKey(o, key.collection, key.id));
  const int from = cluster_->MasterOfSlot(slot);
  const int to = OtherMaster(from);
  bool checked = false;
  std::string failure;
  auto hook = [&](int step) {
    if (step != kBeforeSetSlotNode || checked) return;
    checked = true;
    const auto before = store->stats();
    auto got = store->Get(key);  // every key of the slot is on the target now: ASK
    if (!got.ok() || !got->has_value() || (*got)->revision != *rev) {
      failure += "get during the move: " + got.status().ToString() + "; ";
    }
    if (store->stats().ask <= before.ask) failure += "the read did not follow an ASK; ";
    auto created = store->Create(Key{key.collection, fresh}, Obj(R"({"n":1})"));
    std::printf("[redis-cluster] a create in the half-moved slot: %s (ask %llu, tryagain %llu)\n",
                created.status().ToString().c_str(),
                static_cast<unsigned long long>(store->stats().ask),
                static_cast<unsigned long long>(store->stats().tryagain));
    if (created.ok()) {
      // Redis may serve it on the target if all keys are there: then it must be whole.
      RawReply idx = cluster_->Node(to).Command(
          {"ZSCORE", o.prefix + "{ask:" +
                         std::to_string(litetx::RedisStore::BucketOf("doc", o.buckets)) + "}i",
           fresh});
      if (idx == nullptr || idx->type != REDIS_REPLY_STRING) failure += "created but not indexed; ";
    } else if (created.code() != Code::kUnavailable) {
      failure += "create during the move: " + created.status().ToString() + "; ";
    } else {
      // Refused: nothing of it ran, on either side.
      for (int port : {from, to}) {
        RawReply ex = cluster_->Node(port).Command({"EXISTS", DocKey(o, key.collection, fresh)});
        if (ex == nullptr || ex->integer != 0) failure += "refused create left its document; ";
      }
    }
  };
  ASSERT_EQ(cluster_->MoveSlot(slot, from, to, hook), "");
  EXPECT_TRUE(checked);
  EXPECT_EQ(failure, "");
  // After the move, everything works through the new owner.
  auto got = store->Get(Key{key.collection, fresh});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  if (!got->has_value()) {
    auto created = store->Create(Key{key.collection, fresh}, Obj(R"({"n":1})"));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
  }
  auto rev2 = store->Replace(key, *rev, Obj(R"({"n":2})"));
  EXPECT_TRUE(rev2.ok()) << rev2.status().ToString();
}

// A batch over documents on all three masters: while the store's map is stale (a slot moved
// behind its back: MOVED) and while a slot is half moved (ASK), every operation answers as its
// single call would, and a write either runs whole or is refused with nothing written.
TEST_F(RedisClusterStoreTest, BatchOverAllMastersFollowsMovedAndAsk) {
  RedisClusterOptions o = Opts();
  o.command_timeout = std::chrono::milliseconds(300);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  std::vector<Key> keys;
  std::vector<json::object> values;
  std::map<int, int> per_master;
  for (int i = 0; i < 30; ++i) {
    keys.push_back(Key{"bm", "d" + std::to_string(i)});
    values.push_back(json::object{{"n", i}});
  }
  std::vector<litetx::BatchOp> creates;
  for (int i = 0; i < 30; ++i) creates.push_back(litetx::BatchOp::Create(keys[i], values[i]));
  auto created = store->Batch(creates);
  ASSERT_EQ(created.size(), keys.size());
  std::vector<Revision> revs;
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(created[i].status.ok()) << created[i].status.ToString();
    revs.push_back(created[i].revision);
    per_master[cluster_->MasterOfSlot(RedisClusterStore::SlotOf(DocKey(o, "bm", keys[i].id)))]++;
  }
  ASSERT_EQ(per_master.size(), 3u) << "the batch does not span all three masters";

  auto gets = [&] {
    std::vector<litetx::BatchOp> ops;
    for (const Key& k : keys) ops.push_back(litetx::BatchOp::Get(k));
    return ops;
  }();
  auto check_reads = [&](const std::vector<litetx::BatchResult>& res, const char* when) {
    ASSERT_EQ(res.size(), keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(res[i].status.ok()) << when << " " << i << ": " << res[i].status.ToString();
      ASSERT_TRUE(res[i].document.has_value()) << when << " " << i;
      EXPECT_EQ(res[i].document->value, values[i]) << when << " " << i;
      EXPECT_EQ(res[i].document->revision, revs[i]) << when << " " << i;
    }
  };

  // 1. Moved behind the store's back: MOVED inside the pipeline, re-sent alone.
  const int slot0 = RedisClusterStore::SlotOf(DocKey(o, "bm", keys[0].id));
  const int from0 = cluster_->MasterOfSlot(slot0);
  ASSERT_EQ(cluster_->MoveSlot(slot0, from0, OtherMaster(from0)), "");
  auto before = store->stats();
  check_reads(store->Batch(gets), "after the move");
  EXPECT_GE(store->stats().moved, before.moved + 1);
  std::vector<litetx::BatchOp> replaces;
  const json::object v2{{"n", -1}};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    replaces.push_back(litetx::BatchOp::Replace(keys[i], revs[i], v2));
  }
  replaces.push_back(litetx::BatchOp::Replace(Key{"bm", "absent"}, 1, v2));
  auto replaced = store->Batch(replaces);
  ASSERT_EQ(replaced.size(), replaces.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(replaced[i].status.ok()) << i << ": " << replaced[i].status.ToString();
    EXPECT_NE(replaced[i].revision, revs[i]);
    revs[i] = replaced[i].revision;
    values[i] = v2;
  }
  EXPECT_EQ(replaced.back().status.code(), Code::kConflict);

  // 2. Half moved: the keys of the slot are on the target, the source answers ASK.
  const int slot1 = RedisClusterStore::SlotOf(DocKey(o, "bm", keys[1].id));
  const int from1 = cluster_->MasterOfSlot(slot1);
  const int to1 = OtherMaster(from1);
  bool checked = false;
  std::string failure;
  auto hook = [&](int step) {
    if (step != kBeforeSetSlotNode || checked) return;
    checked = true;
    const auto ask_before = store->stats().ask;
    auto res = store->Batch(gets);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!res[i].status.ok() || !res[i].document || res[i].document->revision != revs[i]) {
        failure += "read " + std::to_string(i) + ": " + res[i].status.ToString() + "; ";
      }
    }
    if (store->stats().ask <= ask_before) failure += "no ASK was followed; ";
    // Writes on every master, one of them in the moving slot.
    std::vector<litetx::BatchOp> w;
    const json::object v3{{"n", -2}};
    for (std::size_t i = 0; i < keys.size(); ++i) {
      w.push_back(litetx::BatchOp::Replace(keys[i], revs[i], v3));
    }
    auto wr = store->Batch(w);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (wr[i].status.ok()) {
        revs[i] = wr[i].revision;
        values[i] = v3;
      } else if (wr[i].status.code() != Code::kUnavailable) {
        failure += "write " + std::to_string(i) + ": " + wr[i].status.ToString() + "; ";
      }
    }
    std::printf("[redis-cluster] batch in a half-moved slot: the write in it %s\n",
                wr[1].status.ToString().c_str());
  };
  ASSERT_EQ(cluster_->MoveSlot(slot1, from1, to1, hook), "");
  EXPECT_TRUE(checked);
  EXPECT_EQ(failure, "");
  // Whatever was answered is what is stored (a refused write wrote nothing).
  check_reads(store->Batch(gets), "after the half move");
}

TEST_F(RedisClusterStoreTest, NoscriptOnEveryMasterFallsBackToEval) {
  auto store = MustOpen(Opts());
  ASSERT_NE(store, nullptr);
  for (int m : cluster_->MasterPorts()) {
    RawReply r = cluster_->Node(m).Command({"SCRIPT", "FLUSH"});
    ASSERT_NE(r, nullptr);
  }
  for (int i = 0; i < 30; ++i) {
    auto c = store->Create(Key{"noscript", "k" + std::to_string(i)}, Obj(R"({"n":1})"));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }
}

// WAIT 1 with the replica attached: acknowledged. With the replica of the document's master
// stopped, the write runs on the master but WAIT counts 0 replicas: kUnknown, and the
// document is there.
TEST_F(RedisClusterStoreTest, WaitForReplicaOrUnknown) {
  RedisClusterOptions o = Opts();
  o.wait_replicas = 1;
  o.wait_timeout = std::chrono::milliseconds(100);
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const Key key{"wait", "doc"};
  auto rev = store->Create(key, Obj(R"({"n":1})"));
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  const int master = cluster_->MasterOfSlot(RedisClusterStore::SlotOf(DocKey(o, "wait", "doc")));
  const int replica = cluster_->ReplicaOf(master);
  ASSERT_GT(replica, 0);
  cluster_->Node(replica).Pause();
  auto rev2 = store->Replace(key, *rev, Obj(R"({"n":2})"));
  cluster_->Node(replica).Resume();
  EXPECT_EQ(rev2.code(), Code::kUnknown) << rev2.status().ToString();
  EXPECT_NE(rev2.status().message().find("0 of 1 replicas"), std::string::npos)
      << rev2.status().ToString();
  auto got = store->Get(key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_GT((*got)->revision, *rev);  // it ran
  EXPECT_EQ((*got)->value.at("n").as_int64(), 2);
  ASSERT_EQ(cluster_->WaitConverged(std::chrono::seconds(10)), "");
}

// With wait_replicas, a batch whose writes all fail their condition still had its WAIT sent:
// its reply must be read, or the connection's next command would get it as its own reply.
TEST_F(RedisClusterStoreTest, BatchWhoseWritesAllFailStillReadsItsWaitReply) {
  RedisClusterOptions o = Opts();
  o.wait_replicas = 1;
  o.wait_timeout = std::chrono::milliseconds(100);
  o.pool_size = 1;  // every call on a node shares its one connection
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const Key key{"waitbatch", "doc"};
  auto rev = store->Create(key, Obj(R"({"n":1})"));
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  const json::object v = Obj(R"({"n":2})");
  for (int i = 0; i < 5; ++i) {
    std::vector<litetx::BatchOp> ops{litetx::BatchOp::Create(key, v),
                                     litetx::BatchOp::Replace(key, *rev + 1000, v)};
    auto res = store->Batch(ops);
    ASSERT_EQ(res.size(), 2u);
    EXPECT_EQ(res[0].status.code(), Code::kConflict) << res[0].status.ToString();
    EXPECT_EQ(res[1].status.code(), Code::kConflict) << res[1].status.ToString();
    auto got = store->Get(key);  // same node, same connection
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->revision, *rev);
  }
}

TEST_F(RedisClusterStoreTest, PlainServerIsRefused) {
  RedisServer plain;
  ASSERT_EQ(plain.Start(), "");
  RedisClusterOptions o = Opts();
  o.seeds = {{"127.0.0.1", plain.port()}};
  auto s = RedisClusterStore::Open(o);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.status().ToString();
  EXPECT_NE(s.status().message().find("not in cluster mode"), std::string::npos)
      << s.status().ToString();
  RawReply size = plain.Command("DBSIZE");
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->integer, 0);
}

TEST_F(RedisClusterStoreTest, UnreachableSeedsAreUnavailableAndLaterSeedsAreTried) {
  RedisClusterOptions o = Opts();
  o.seeds = {{"127.0.0.1", FreePort()}};
  auto s = RedisClusterStore::Open(o);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.status().ToString();
  EXPECT_NE(s.status().message().find("cannot connect"), std::string::npos) << s.status().ToString();
  RedisClusterOptions mixed = Opts();
  mixed.seeds.insert(mixed.seeds.begin(), {"127.0.0.1", FreePort()});
  EXPECT_NE(MustOpen(mixed), nullptr);
}

TEST_F(RedisClusterStoreTest, BadOptionsAndAnotherBucketCountAreRefused) {
  RedisClusterOptions o = Opts();
  ASSERT_NE(MustOpen(o), nullptr);  // writes the marker with 64 buckets
  RedisClusterOptions other = o;
  other.buckets = 16;
  auto s = RedisClusterStore::Open(other);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.status().ToString();
  EXPECT_NE(s.status().message().find("buckets=64"), std::string::npos) << s.status().ToString();

  auto bad = [&](auto change) {
    RedisClusterOptions b = Opts();
    change(b);
    return RedisClusterStore::Open(b).code();
  };
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.seeds.clear(); }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.seeds = {{"127.0.0.1", 0}}; }),
            Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.buckets = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.pool_size = 0; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.prefix = "a{"; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.wait_replicas = -1; }), Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) { b.command_timeout = std::chrono::milliseconds(0); }),
            Code::kInvalidArgument);
  EXPECT_EQ(bad([](RedisClusterOptions& b) {
              b.wait_replicas = 1;
              b.wait_timeout = std::chrono::milliseconds(0);
            }),
            Code::kInvalidArgument);
  // A master that may evict keys is refused.
  const int m = cluster_->MasterPorts().front();
  ASSERT_NE(cluster_->Node(m).Command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}),
            nullptr);
  auto evicting = RedisClusterStore::Open(Opts());
  ASSERT_NE(cluster_->Node(m).Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}),
            nullptr);
  EXPECT_EQ(evicting.code(), Code::kInvalidArgument) << evicting.status().ToString();
  EXPECT_NE(evicting.status().message().find("allkeys-lru"), std::string::npos)
      << evicting.status().ToString();
  EXPECT_EQ(bad([](RedisClusterOptions& b) {
              b.wait_replicas = 1;
              b.wait_timeout = b.command_timeout;
            }),
            Code::kInvalidArgument);
}

// A key of the layout holding another Redis type (not litetx's) is reported, never changed.
TEST_F(RedisClusterStoreTest, ForeignKeyInThePrefixIsCorruptionAndLeftAlone) {
  RedisClusterOptions o = Opts();
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  const std::string doc = DocKey(o, "foreign", "x");
  const int owner = cluster_->MasterOfSlot(RedisClusterStore::SlotOf(doc));
  ASSERT_NE(cluster_->Node(owner).Command({"SET", doc, "not a hash"}), nullptr);
  EXPECT_EQ(store->Create(Key{"foreign", "x"}, Obj(R"({"n":1})")).code(), Code::kCorruption);
  EXPECT_EQ(store->Get(Key{"foreign", "x"}).code(), Code::kCorruption);
  RawReply v = cluster_->Node(owner).Command({"GET", doc});
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(v->str, v->len), "not a hash");
}

// Many threads on a small pool per node, and the engine on top: transfers keep the total.
TEST_F(RedisClusterStoreTest, DatabaseTransfersFromManyThreads) {
  RedisClusterOptions o = Opts();
  o.pool_size = 2;
  auto store = MustOpen(o);
  ASSERT_NE(store, nullptr);
  litetx::Database db(store);
  litetx::Transaction seed;
  for (int i = 0; i < 8; ++i) seed.Insert("acct", "a" + std::to_string(i), Obj(R"({"bal":100})"));
  ASSERT_TRUE(db.Commit(seed).ok());
  std::atomic<int> committed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        litetx::Transaction tx;
        int a = (t + i) % 8, b = (t * 3 + i + 1) % 8;
        if (a == b) b = (b + 1) % 8;
        tx.Adjust("acct", "a" + std::to_string(a), Obj(R"({"bal":-1})"));
        tx.Adjust("acct", "a" + std::to_string(b), Obj(R"({"bal":1})"));
        if (db.Commit(tx).ok()) committed++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(committed.load(), 0);
  std::int64_t total = 0;
  for (int i = 0; i < 8; ++i) {
    auto r = db.Read("acct", "a" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    total += r->doc.at("bal").as_int64();
  }
  EXPECT_EQ(total, 800);
}

}  // namespace
}  // namespace ltxtest
