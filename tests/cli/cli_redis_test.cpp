// tests/cli/cli_redis_test.cpp — the `litetx` binary on redis:// (and redis-cluster://) stores:
// every command on a real redis-server, strict parsing of the URI (a bad one is a usage error
// and writes nothing), an unreachable server, and a cluster URI aimed at a plain server.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "cli_harness.h"
#include "cli_redis.h"
#include "litetx/redis_store.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

constexpr const char* kPair =
    R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"n":1}},
                   {"op":"insert","collection":"c","id":"y","doc":{"n":2}}]})";

class CliRedis : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    START_REDIS_OR_SKIP(redis_);
    base_ = "redis://127.0.0.1:" + std::to_string(redis_->port());
    store_ = base_ + "?prefix=t:";
  }
  // Keys in database 0 (DBSIZE); -1 (and a test failure) if the server does not answer.
  long long DbSize() const {
    ltxtest::RawReply r = redis_->Command("DBSIZE");
    if (r == nullptr || r->type != REDIS_REPLY_INTEGER) {
      ADD_FAILURE() << "DBSIZE failed";
      return -1;
    }
    return r->integer;
  }
  // Keys of database `db` ("INFO keyspace" line dbN:keys=K), 0 if it has none.
  long long KeysIn(int db) const {
    ltxtest::RawReply r = redis_->Command(std::vector<std::string>{"INFO", "keyspace"});
    if (r == nullptr || r->type != REDIS_REPLY_STRING) {
      ADD_FAILURE() << "INFO keyspace failed";
      return -1;
    }
    std::smatch m;
    std::string text(r->str, r->len);
    std::regex line("db" + std::to_string(db) + ":keys=([0-9]+)");
    return std::regex_search(text, m, line) ? std::stoll(m[1]) : 0;
  }
  bool Exists(const std::string& key) const {
    ltxtest::RawReply r = redis_->Command(std::vector<std::string>{"EXISTS", key});
    return r != nullptr && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }
  std::unique_ptr<TestRedisServer> redis_;
  std::string base_;  // redis://127.0.0.1:PORT
};

TEST_F(CliRedis, ApplyGetScanTxnsGcRoundTrip) {
  RunResult r = Apply(kPair);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.Json()["outcome"], "committed");
  // The documents are in Redis under the URI's prefix, in the store's key layout.
  const std::string bucket = std::to_string(RedisStore::BucketOf("x", 16));
  EXPECT_TRUE(Exists("t:{c:" + bucket + "}d:x"));

  json::object g = Get("c", "x");
  EXPECT_EQ(g["status"], "found");
  EXPECT_EQ(g["doc"], (json::object{{"n", 1}}));
  RunResult s = Cli({"scan", "c"});
  ASSERT_EQ(s.code, 0) << s.err;
  json::object so = s.Json();
  EXPECT_EQ(so["count"], 2);
  ASSERT_TRUE(so["documents"].is_array());
  EXPECT_EQ(so["documents"].as_array()[0].as_object()["id"], "x");
  EXPECT_EQ(so["documents"].as_array()[1].as_object()["id"], "y");

  // A coordinator that dies after the record and one document: gc reverses it.
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"d","id":"x","doc":{}},
                                  {"op":"insert","collection":"d","id":"y","doc":{}}]})",
                  "crash-after-writes:2").code, 86);
  EXPECT_EQ(Unsettled(), 1);
  r = Cli({"gc", "--once", "--older-than", "1ms"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["reversed"], 1);
  EXPECT_EQ(o["failed"], 0);
  EXPECT_EQ(Unsettled(), 0);
  EXPECT_EQ(Get("d", "x")["status"], "not_found");
  EXPECT_EQ(Get("c", "y")["status"], "found");

  // Another prefix is another store; another database number is another keyspace.
  const std::string t_store = store_;
  store_ = base_ + "?prefix=u:";
  EXPECT_EQ(Get("c", "x")["status"], "not_found");
  const long long db0 = KeysIn(0);
  EXPECT_EQ(KeysIn(3), 0);
  store_ = base_ + "/3?prefix=t:&buckets=4&pool=2&timeout=3s&connect_timeout=500";
  EXPECT_EQ(Get("c", "x")["status"], "not_found");
  ASSERT_EQ(Apply(kPair).code, 0);
  EXPECT_GT(KeysIn(3), 0);
  EXPECT_EQ(KeysIn(0), db0);
  EXPECT_EQ(Get("c", "y")["status"], "found");
  store_ = t_store;
}

TEST_F(CliRedis, DemoVerifies) {
  RunResult r = Cli({"demo", "--duration", "1s", "--crash-rate", "0.05", "--lease", "300ms",
                     "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::printf("[demo on redis] %s", r.out.c_str());
  json::object o = r.Json();
  ASSERT_TRUE(o["verification"].is_object()) << r.out;
  json::object& v = o["verification"].as_object();
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["error_count"], 0);
  EXPECT_EQ(v["open_records"], 0);
  EXPECT_EQ(v["total"], v["expected_total"]);
  EXPECT_GT(o["committed"].to_number<std::uint64_t>(), 0u);
  EXPECT_GT(o["crashed"].to_number<std::uint64_t>(), 0u);
  EXPECT_EQ(o["store"], json::value(store_));
  EXPECT_GT(DbSize(), 0);  // the bank lives in Redis
}

TEST_F(CliRedis, BenchRuns) {
  RunResult r = Cli({"bench", "--quick", "--sizes", "1,2", "--threads", "2", "--rounds", "1"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
  // Header, then one row per (N, threads): N = 1 costs 1 write, N = 2 costs 2N+3 = 7.
  EXPECT_NE(r.out.find("store " + store_), std::string::npos) << r.out;
  std::smatch m;
  std::regex row(R"(\n\s+([12])\s+([12])\s+\d+\s+\d+\s+\d+\s+[0-9.]+\s+([0-9.]+) \(\s*\d+\))");
  int rows = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), row);
       it != std::sregex_iterator(); ++it, ++rows) {
    const double writes = std::stod((*it)[3]);
    EXPECT_EQ(writes, (*it)[1] == "1" ? 1.0 : 7.0) << it->str();
  }
  EXPECT_EQ(rows, 4) << r.out;
  // The native alternative: one MULTI/EXEC row per size, each with transactions measured.
  const std::size_t native = r.out.find("native alternative");
  ASSERT_NE(native, std::string::npos) << r.out;
  const std::string tail = r.out.substr(native);
  std::regex native_row(R"(\n\s+([12])\s+(\d+)\s+[0-9.]+\s+[0-9.]+\s+\d+\s+[0-9.]+)");
  int native_rows = 0;
  for (auto it = std::sregex_iterator(tail.begin(), tail.end(), native_row);
       it != std::sregex_iterator(); ++it, ++native_rows) {
    EXPECT_GT(std::stoll((*it)[2]), 0) << it->str();
  }
  EXPECT_EQ(native_rows, 2) << tail;
  // The benchmark erased its documents and the native keys: none of either is left.
  for (const char* pattern : {"t:{bench.*}d:*", "t:{bench.native.*"}) {
    ltxtest::RawReply keys = redis_->Command(std::vector<std::string>{"KEYS", pattern});
    ASSERT_NE(keys, nullptr);
    EXPECT_EQ(keys->elements, 0u) << pattern;
  }
}

// Each malformed URI: usage exit code, one line naming the problem, nothing on stdout, and
// nothing written, though the URIs aim at the running server where they name one.
TEST_F(CliRedis, BadUrisAreUsageErrorsAndWriteNothing) {
  const std::string port = std::to_string(redis_->port());
  const std::string host = "127.0.0.1:" + port;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"redis://:" + port, "missing host"},
      {"redis://127.0.0.1", "missing port"},
      {"redis://127.0.0.1:", "missing port"},
      {"redis://127.0.0.1:0", "port 0 out of range"},
      {"redis://127.0.0.1:65536", "port 65536 out of range"},
      {"redis://127.0.0.1:port", "bad port 'port'"},
      {"redis://" + host + "x", "unexpected 'x' after port " + port},
      {"redis://" + host + "/zero", "bad database 'zero'"},
      {"redis://" + host + "/-1", "bad database '-1'"},
      {"redis://" + host + "?colour=red", "unknown query key 'colour'"},
      {"redis://" + host + "?buckets=many", "bad value 'many' for 'buckets'"},
      {"redis://" + host + "?buckets=0", "bad value '0' for 'buckets'"},
      {"redis://" + host + "?pool=-2", "bad value '-2' for 'pool'"},
      {"redis://" + host + "?timeout=2x", "bad value '2x' for 'timeout'"},
      {"redis://" + host + "?wait=1&timeout=100&wait_timeout=100", "wait_timeout must be shorter"},
      {"redis://" + host + "?prefix=a{b", "must not contain '{' or '}'"},
      {"redis://" + host + "?prefix=a&prefix=b", "'prefix' given twice"},
      {"redis://" + host + "?prefix", "'prefix' is not KEY=VALUE"},
      {"redis://[::1:" + port, "without a closing ']'"},
      {"redis://" + host + "," + host, "takes one HOST:PORT"},
      {"redis-cluster://", "no cluster nodes"},
      {"redis-cluster://?prefix=t:", "no cluster nodes"},
      {"redis-cluster://" + host + ",," + host, "empty node"},
      {"redis-cluster://" + host + "/0", "takes no database"},
      {"redis-cluster://" + host + ",127.0.0.1", "missing port"},
      {"rediss://" + host, "expected lmdb:PATH, memory:, redis://"},
  };
  const std::string file = dir_ + "/pair.json";
  ASSERT_EQ(Apply(kPair).code, 0);  // the server holds data: DBSIZE must not move below
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(kPair, f);
  std::fclose(f);
  const long long before = DbSize();
  for (const auto& [uri, why] : cases) {
    SCOPED_TRACE(uri);
    RunResult r = RunCli({"--store", uri, "apply", file});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("litetx: bad --store '" + uri + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(DbSize(), before);
  EXPECT_EQ(KeysIn(1), 0);
}

TEST_F(CliRedis, UnreachableServerIsAStoreError) {
  const std::string uri = "redis://127.0.0.1:" + std::to_string(ltxtest::FreePort());
  for (const char* cmd : {"txns", "get"}) {
    std::vector<std::string> args = {"--store", uri, cmd};
    if (std::string(cmd) == "get") args.insert(args.end(), {"c", "x"});
    RunResult r = RunCli(args);
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("litetx: cannot open store " + uri + ": "), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// The plain server is not a cluster node: Open fails, nothing is written, and the message
// names the URI (and so the node).
TEST_F(CliRedis, ClusterUriOnAPlainServerFails) {
  ASSERT_EQ(Apply(kPair).code, 0);
  const long long before = DbSize();
  const std::string node = "127.0.0.1:" + std::to_string(redis_->port());
  const std::string uri = "redis-cluster://" + node + "?prefix=t:";
  RunResult r = RunCli({"--store", uri, "txns"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find(node), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not in cluster mode"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(DbSize(), before);
}

// `litetx demo` on a 3-master cluster (a replica each): the bank's accounts spread over every
// master, coordinators crash mid-transfer, the collector repairs them, and the audit verifies.
TEST(CliRedisCluster, DemoVerifiesAfterCrashes) {
  std::unique_ptr<TestRedisCluster> cluster;
  START_REDIS_CLUSTER_OR_SKIP(cluster);
  const std::string uri = ClusterUri(*cluster) + "?prefix=demo:&wait=1";
  RunResult r = RunCli({"--store", uri, "demo", "--duration", "2s", "--crash-rate", "0.05",
                        "--lease", "300ms", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::printf("[demo on redis-cluster] %s", r.out.c_str());
  json::object o = r.Json();
  ASSERT_TRUE(o["verification"].is_object()) << r.out;
  json::object& v = o["verification"].as_object();
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["error_count"], 0);
  EXPECT_EQ(v["open_records"], 0);
  EXPECT_EQ(v["held_documents"], 0);
  EXPECT_EQ(v["total"], v["expected_total"]);
  EXPECT_GT(o["committed"].to_number<std::uint64_t>(), 0u);
  EXPECT_GT(o["crashed"].to_number<std::uint64_t>(), 0u);
  for (int m : cluster->MasterPorts()) {
    ltxtest::RawReply size = cluster->Node(m).Command({"DBSIZE"});
    ASSERT_NE(size, nullptr);
    EXPECT_GT(size->integer, 0) << "master " << m << " holds none of the bank";
  }
}

}  // namespace
}  // namespace litetx::clitest
