// tests/cli/cli_redis.h — a redis-server for CLI tests that run the `litetx` binary on
// redis:// stores. Built only with LITETX_WITH_REDIS (then LITETX_CLI_TEST_REDIS is defined);
// without it, StartRedisOrSkip skips the test.
//
// Thread safety: none needed (one test, one thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#ifdef LITETX_CLI_TEST_REDIS
#include "redis/redis_cluster.h"
#include "redis/redis_server.h"
#endif

namespace litetx::clitest {

#ifdef LITETX_CLI_TEST_REDIS
using TestRedisServer = ltxtest::RedisServer;
using TestRedisCluster = ltxtest::RedisCluster;
#else
struct TestRedisServer {
  int port() const { return -1; }
};
struct TestRedisCluster {
  std::vector<int> SeedPorts() const { return {}; }
};
#endif

// "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,..." for every node of `cluster`.
inline std::string ClusterUri(const TestRedisCluster& cluster) {
  std::string uri = "redis-cluster://";
  for (int p : cluster.SeedPorts()) {
    if (uri.back() != '/') uri += ',';
    uri += "127.0.0.1:" + std::to_string(p);
  }
  return uri;
}

// Starts a redis-server into *server. Skips the calling test (GTEST_SKIP in the caller: use as
// `START_REDIS_OR_SKIP(server);` in SetUp or a test body) when redis-server is not installed or
// Redis support is not built; fails it when the server is installed but does not start.
#ifdef LITETX_CLI_TEST_REDIS
#define START_REDIS_OR_SKIP(server)                                                          \
  do {                                                                                       \
    if (ltxtest::RedisServerPath().empty()) {                                                \
      GTEST_SKIP() << "redis-server not found in PATH: the redis:// CLI tests need it "      \
                      "(Debian: apt-get install redis-server)";                              \
    }                                                                                        \
    (server) = std::make_unique<TestRedisServer>();                                          \
    const std::string why = (server)->Start();                                               \
    ASSERT_TRUE(why.empty()) << why;                                                         \
  } while (0)
// The same for a 3-master cluster with a replica each (also needs redis-cli).
#define START_REDIS_CLUSTER_OR_SKIP(cluster)                                                 \
  do {                                                                                       \
    if (ltxtest::RedisServerPath().empty() || ltxtest::RedisCliPath().empty()) {             \
      GTEST_SKIP() << "redis-server or redis-cli not found in PATH: the redis-cluster:// "   \
                      "CLI tests need them (Debian: apt-get install redis-server)";          \
    }                                                                                        \
    (cluster) = std::make_unique<TestRedisCluster>();                                        \
    const std::string why = (cluster)->Start();                                              \
    ASSERT_TRUE(why.empty()) << why;                                                         \
  } while (0)
#else
#define START_REDIS_OR_SKIP(server) \
  GTEST_SKIP() << "built without Redis support (LITETX_WITH_REDIS=OFF)"
#define START_REDIS_CLUSTER_OR_SKIP(cluster) \
  GTEST_SKIP() << "built without Redis support (LITETX_WITH_REDIS=OFF)"
#endif

}  // namespace litetx::clitest
