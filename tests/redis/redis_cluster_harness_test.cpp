// tests/redis/redis_cluster_harness_test.cpp — the Redis Cluster test harness itself, checked
// with plain commands (no litetx store): a single server's AOF across SIGKILL and Restart, the
// cluster it starts, the redirections of its slot map, a slot moved while half moved, a master
// killed and replaced by its replica, the killed master back as a replica, and a manual
// failover. Skipped with a message when redis-server or redis-cli is not installed.
//
// RedisClusterHarnessTest shares one cluster (started once for the suite); its tests read the
// slot map when they need it, so the slot MoveSlot moves does not disturb the others.
// RedisClusterFailoverTest starts its own cluster, as it kills nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "redis/redis_cluster.h"

namespace ltxtest {
namespace {

using Clock = std::chrono::steady_clock;

long long MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string MissingTools() {
  if (RedisServerPath().empty()) {
    return "redis-server not found in PATH (run scripts/bootstrap.sh); the cluster harness is "
           "not tested";
  }
  if (RedisCliPath().empty()) {
    return "redis-cli not found in PATH (run scripts/bootstrap.sh); the cluster harness is not "
           "tested";
  }
  return {};
}

// The port a MOVED or ASK error redirects to ("MOVED 1234 127.0.0.1:7001"), or -1.
int RedirectPort(const RawReply& r, const std::string& kind) {
  if (r == nullptr || r->type != REDIS_REPLY_ERROR) return -1;
  const std::string text = ReplyText(r.get());
  if (text.compare(0, kind.size() + 1, kind + " ") != 0) return -1;
  const std::size_t colon = text.rfind(':');
  return colon == std::string::npos ? -1 : std::atoi(text.c_str() + colon + 1);
}

std::string GetText(const RedisServer& n, const std::string& key) {
  RawReply r = n.Command({"GET", key});
  if (r == nullptr) return "<no reply>";
  if (r->type == REDIS_REPLY_NIL) return "<nil>";
  if (r->type == REDIS_REPLY_ERROR) return "<error " + ReplyText(r.get()) + ">";
  return ReplyText(r.get());
}

// A single server with appendfsync always: a write acknowledged before SIGKILL is there after
// Restart (same port, same directory), which waits for the AOF to be loaded.
TEST(RedisServerHarnessTest, AppendOnlyWriteSurvivesKill9AndRestart) {
  if (RedisServerPath().empty()) GTEST_SKIP() << MissingTools();
  RedisServer s;
  RedisServerOptions o;
  o.appendonly = true;
  o.appendfsync = "always";
  ASSERT_EQ(s.Start(o), "");
  const int port = s.port();
  const pid_t first = s.pid();
  EXPECT_EQ(s.InfoField("persistence", "aof_enabled"), "1");
  ASSERT_EQ(ReplyText(s.Command({"SET", "k", "durable"}).get()), "OK");
  s.Kill9();
  EXPECT_FALSE(s.running());
  EXPECT_FALSE(s.Ping());
  ASSERT_EQ(s.Restart(), "");
  EXPECT_EQ(s.port(), port);
  EXPECT_NE(s.pid(), first);
  EXPECT_EQ(s.InfoField("persistence", "loading"), "0");
  EXPECT_EQ(GetText(s, "k"), "durable");
}

class RedisClusterHarnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!MissingTools().empty()) return;
    cluster_ = new RedisCluster;
    const auto t0 = Clock::now();
    error_ = cluster_->Start();
    std::printf("[cluster harness] 3 masters + 3 replicas up in %lld ms\n", MsSince(t0));
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    const std::string missing = MissingTools();
    if (!missing.empty()) GTEST_SKIP() << missing;
    ASSERT_TRUE(error_.empty()) << error_;
  }

  static RedisCluster* cluster_;
  static std::string error_;
};
RedisCluster* RedisClusterHarnessTest::cluster_ = nullptr;
std::string RedisClusterHarnessTest::error_;

TEST_F(RedisClusterHarnessTest, ThreeMastersCoverEverySlotEachWithAnAttachedReplica) {
  RedisCluster& c = *cluster_;
  ASSERT_EQ(c.SeedPorts().size(), 6u);
  const std::vector<int> masters = c.MasterPorts();
  ASSERT_EQ(masters.size(), 3u);
  for (int seed : c.SeedPorts()) {
    RawReply info = c.Node(seed).Command({"CLUSTER", "INFO"});
    const std::string text = ReplyText(info.get());
    EXPECT_NE(text.find("cluster_state:ok"), std::string::npos) << seed << ": " << text;
    EXPECT_NE(text.find("cluster_slots_assigned:16384"), std::string::npos) << seed;
    EXPECT_NE(text.find("cluster_known_nodes:6"), std::string::npos) << seed;
  }
  int slots = 0;
  for (const SlotRange& r : ClusterSlots(c.Node(c.SeedPorts()[0]))) {
    slots += r.end - r.start + 1;
  }
  EXPECT_EQ(slots, RedisCluster::kSlots);
  std::vector<int> replicas;
  for (int m : masters) {
    EXPECT_EQ(c.Node(m).InfoField("replication", "role"), "master");
    EXPECT_EQ(c.Node(m).InfoField("replication", "connected_slaves"), "1") << m;
    const int r = c.ReplicaOf(m);
    ASSERT_GT(r, 0) << m;
    EXPECT_EQ(c.Node(r).InfoField("replication", "role"), "slave");
    EXPECT_EQ(c.Node(r).InfoField("replication", "master_port"), std::to_string(m));
    EXPECT_EQ(c.Node(r).InfoField("replication", "master_link_status"), "up");
    replicas.push_back(r);
  }
  std::sort(replicas.begin(), replicas.end());
  EXPECT_EQ(std::unique(replicas.begin(), replicas.end()), replicas.end());
  EXPECT_EQ(c.Converged(), "");
}

TEST_F(RedisClusterHarnessTest, KeyIsReadableOnItsSlotsMasterAndMovedElsewhere) {
  RedisCluster& c = *cluster_;
  const std::string key = "harness:plain";
  const int slot = c.KeySlot(key);
  ASSERT_GE(slot, 0);
  const int owner = c.MasterOfSlot(slot);
  ASSERT_GT(owner, 0);
  RawReply set = c.Node(owner).Command({"SET", key, "v1"});
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(ReplyText(set.get()), "OK");
  EXPECT_EQ(GetText(c.Node(owner), key), "v1");
  int others = 0;
  for (int m : c.MasterPorts()) {
    if (m == owner) continue;
    ++others;
    RawReply r = c.Node(m).Command({"GET", key});
    EXPECT_EQ(RedirectPort(r, "MOVED"), owner) << m << ": " << ReplyText(r.get());
    EXPECT_NE(ReplyText(r.get()).find("MOVED " + std::to_string(slot) + " "), std::string::npos);
  }
  EXPECT_EQ(others, 2);
}

TEST_F(RedisClusterHarnessTest, MoveSlotMovesItsKeysInBatchesWhileHalfMovedSlotAsks) {
  RedisCluster& c = *cluster_;
  const std::string tag = "{harness-move}";
  const int slot = c.KeySlot(tag);
  ASSERT_GE(slot, 0);
  const int from = c.MasterOfSlot(slot);
  ASSERT_GT(from, 0);
  int to = -1;
  for (int m : c.MasterPorts()) {
    if (m != from) to = m;
  }
  ASSERT_GT(to, 0);
  // 250 keys: three MIGRATE batches of at most 100.
  const int kKeys = 250;
  for (int i = 0; i < kKeys; ++i) {
    RawReply r = c.Node(from).Command({"SET", tag + std::to_string(i), "v" + std::to_string(i)});
    ASSERT_EQ(ReplyText(r.get()), "OK");
  }
  int marked = 0, batches = 0, before_assign = 0;
  std::string during;  // what the hook saw that it did not expect
  const auto t0 = Clock::now();
  std::string why = c.MoveSlot(slot, from, to, [&](int step) {
    if (step == kSlotMarked) {
      ++marked;
      // A key the source does not have is redirected to the target with ASK.
      RawReply r = c.Node(from).Command({"SET", tag + "new", "n"});
      if (RedirectPort(r, "ASK") != to) during += "SET new: " + ReplyText(r.get()) + "; ";
      // The target takes it after ASKING (one connection for both commands).
      redisContext* ctx = redisConnect("127.0.0.1", to);
      if (ctx == nullptr || ctx->err != 0) {
        during += "connect to target failed; ";
      } else {
        RawReply a(static_cast<redisReply*>(redisCommand(ctx, "ASKING")));
        RawReply s(static_cast<redisReply*>(redisCommand(ctx, "SET %s n", (tag + "new").c_str())));
        if (ReplyText(s.get()) != "OK") during += "ASKING SET: " + ReplyText(s.get()) + "; ";
      }
      if (ctx != nullptr) redisFree(ctx);
    } else if (step == kKeysBatchMoved) {
      ++batches;
      // Key 0 went in the first batch or later ones; after the first batch some key is gone
      // from the source and asked for on the target.
      RawReply n = c.Node(from).Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
      const long long left = n != nullptr ? n->integer : -1;
      const long long want = std::max(0, kKeys - 100 * batches);
      if (left != want) {
        during += "after batch " + std::to_string(batches) + ": " + std::to_string(left) +
                  " keys left, want " + std::to_string(want) + "; ";
      }
    } else if (step == kBeforeSetSlotNode) {
      ++before_assign;
      RawReply r = c.Node(from).Command({"GET", tag + "0"});
      if (RedirectPort(r, "ASK") != to) during += "GET 0 before SETSLOT NODE not ASK; ";
    } else {
      during += "unknown step " + std::to_string(step) + "; ";
    }
  });
  const long long ms = MsSince(t0);
  ASSERT_EQ(why, "");
  std::printf("[cluster harness] MoveSlot of slot %d with %d keys (%d batches) in %lld ms\n",
              slot, kKeys, batches, ms);
  EXPECT_EQ(during, "");
  EXPECT_EQ(marked, 1);
  EXPECT_EQ(batches, 3);
  EXPECT_EQ(before_assign, 1);
  EXPECT_EQ(c.MasterOfSlot(slot), to);
  for (int p : c.SeedPorts()) {
    int owner = -1;
    for (const SlotRange& r : ClusterSlots(c.Node(p))) {
      if (slot >= r.start && slot <= r.end) owner = r.master_port;
    }
    EXPECT_EQ(owner, to) << "node " << p;
  }
  for (int i = 0; i < kKeys; i += 49) {
    const std::string key = tag + std::to_string(i);
    EXPECT_EQ(GetText(c.Node(to), key), "v" + std::to_string(i));
    EXPECT_EQ(RedirectPort(c.Node(from).Command({"GET", key}), "MOVED"), to) << key;
  }
  EXPECT_EQ(GetText(c.Node(to), tag + "new"), "n");
  RawReply count = c.Node(to).Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count->integer, kKeys + 1);
  RawReply left = c.Node(from).Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
  ASSERT_NE(left, nullptr);
  EXPECT_EQ(left->integer, 0);
}

class RedisClusterFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string missing = MissingTools();
    if (!missing.empty()) GTEST_SKIP() << missing;
    const auto t0 = Clock::now();
    const std::string why = cluster_.Start();
    ASSERT_EQ(why, "");
    std::printf("[cluster harness] 3 masters + 3 replicas up in %lld ms\n", MsSince(t0));
  }
  RedisCluster cluster_;
};

TEST_F(RedisClusterFailoverTest, KilledMasterIsReplacedByItsReplicaKeepingAWaitedWrite) {
  RedisCluster& c = cluster_;
  const std::string key = "harness:failover";
  const int slot = c.KeySlot(key);
  const int master = c.MasterOfSlot(slot);
  ASSERT_GT(master, 0);
  const int replica = c.ReplicaOf(master);
  ASSERT_GT(replica, 0);
  // SET and WAIT on one connection: WAIT counts the replicas that have that connection's
  // writes (on a fresh connection it would count every replica at once).
  // A replica just attached may take a moment to acknowledge: try a few times (bounded).
  std::vector<RawReply> replies;
  for (int attempt = 0; attempt < 5; ++attempt) {
    replies = c.Node(master).Commands({{"SET", key, "kept"}, {"WAIT", "1", "900"}});
    if (replies.size() == 2 && replies[1] != nullptr &&
        replies[1]->type == REDIS_REPLY_INTEGER && replies[1]->integer == 1) {
      break;
    }
  }
  ASSERT_EQ(replies.size(), 2u);
  ASSERT_NE(replies[0], nullptr);
  ASSERT_EQ(ReplyText(replies[0].get()), "OK");
  RawReply& waited = replies[1];
  ASSERT_NE(waited, nullptr);
  ASSERT_EQ(waited->type, REDIS_REPLY_INTEGER);
  ASSERT_EQ(waited->integer, 1);

  int promoted = -1;
  auto t0 = Clock::now();
  ASSERT_EQ(c.KillMasterAndWaitForFailover(master, false, &promoted), "");
  std::printf("[cluster harness] master killed, replica promoted in %lld ms\n", MsSince(t0));
  EXPECT_EQ(promoted, replica);
  EXPECT_FALSE(c.Node(master).running());
  EXPECT_EQ(c.Node(replica).InfoField("replication", "role"), "master");
  EXPECT_EQ(c.MasterOfSlot(slot), replica);
  EXPECT_EQ(GetText(c.Node(replica), key), "kept");
  for (int p : c.SeedPorts()) {
    if (p == master) continue;
    RawReply info = c.Node(p).Command({"CLUSTER", "INFO"});
    EXPECT_NE(ReplyText(info.get()).find("cluster_state:ok"), std::string::npos) << p;
  }

  t0 = Clock::now();
  ASSERT_EQ(c.RestartAsReplica(master), "");
  std::printf("[cluster harness] killed master back as a replica in %lld ms\n", MsSince(t0));
  EXPECT_EQ(c.Node(master).InfoField("replication", "role"), "slave");
  EXPECT_EQ(c.Node(master).InfoField("replication", "master_port"), std::to_string(replica));
  EXPECT_EQ(c.ReplicaOf(replica), master);

  t0 = Clock::now();
  ASSERT_EQ(c.ManualFailover(master), "");
  std::printf("[cluster harness] manual failover in %lld ms\n", MsSince(t0));
  EXPECT_EQ(c.MasterOfSlot(slot), master);
  EXPECT_EQ(c.Node(replica).InfoField("replication", "role"), "slave");
  EXPECT_EQ(GetText(c.Node(master), key), "kept");
  EXPECT_EQ(RedirectPort(c.Node(replica).Command({"GET", key}), "MOVED"), master);
}

}  // namespace
}  // namespace ltxtest
