// tests/cli/cli_crash_test.cpp — the crash-test recipe of docs/cli.md on every store the CLI
// can open for writing (LMDB, Redis), for both commit modes of `apply --commit`: kill the
// coordinator after each write of a two-document transaction, settle with the collector, and
// audit that the transfer happened completely or not at all, that the collector did exactly
// the one thing the crash left to do, and that nothing is left held.
#include <cstdint>
#include <memory>
#include <string>

#include "cli_harness.h"
#include "cli_redis.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

// Writes of a committed two-document transaction in either mode: record, 2 applies, commit
// flip, 2 finishes, outcome marker (2N+3).
constexpr int kWrites = 7;

// Parameter: the store ("lmdb", "redis", "redis_cluster"). Each test runs both commit modes on
// it (one server or cluster start per store).
class CliCrash : public CliTest, public ::testing::WithParamInterface<std::string> {
 protected:
  const std::string& StoreKind() const { return GetParam(); }
  void SetUp() override {
    CliTest::SetUp();
    if (StoreKind() == "redis") {
      START_REDIS_OR_SKIP(redis_);
    } else if (StoreKind() == "redis_cluster") {
      START_REDIS_CLUSTER_OR_SKIP(cluster_);
    }
  }
  // Points the test at an empty store of its own: a new LMDB directory, or a new key prefix
  // on the Redis server.
  void FreshStore(const std::string& mode, int k) {
    const std::string name = mode + std::to_string(k);
    if (StoreKind() == "redis") {
      store_ = "redis://127.0.0.1:" + std::to_string(redis_->port()) + "?prefix=" + name + ":";
    } else if (StoreKind() == "redis_cluster") {
      store_ = ClusterUri(*cluster_) + "?prefix=" + name + ":";
    } else {
      store_ = "lmdb:" + dir_ + "/db-" + name;
    }
  }
  std::int64_t Balance(const std::string& id) const {
    json::object o = Get("accounts", id);
    const json::value* doc = o.if_contains("doc");
    if (doc == nullptr || !doc->is_object()) {
      ADD_FAILURE() << "no document " << id << ": " << json::serialize(o);
      return -1;
    }
    return doc->as_object().at("balance").to_number<std::int64_t>();
  }
  std::unique_ptr<TestRedisServer> redis_;
  std::unique_ptr<TestRedisCluster> cluster_;
};

// The writes, in order. Classic: record (pending), a1, a2, then the commit flip (write 4, the
// commit point), the finishes of a1 and a2, the outcome marker. Parallel: the record (staging)
// and both applies in one batch (writes 1 to 3), committed once all three have landed; then
// the flip to committed, the finishes and the marker. A crash inside the batch is exact: the
// fault layer sends a batch that holds the crash write one operation at a time, so the writes
// after it never reach the store (also on LMDB, which otherwise lands a batch at once).
TEST_P(CliCrash, CrashAfterEveryWriteLeavesAllOrNothing) {
  for (const std::string mode : {"parallel", "classic"}) {
    const int commit_write = mode == "classic" ? 4 : 3;
    for (int k = 1; k <= kWrites + 1; ++k) {
      SCOPED_TRACE("store " + StoreKind() + ", --commit " + mode + ", crash-after-writes:" +
                   std::to_string(k));
      FreshStore(mode, k);
      RunResult seed = Apply(kSeed);
      ASSERT_EQ(seed.code, 0) << seed.err;
      RunResult r =
          Apply(kTransfer, "crash-after-writes:" + std::to_string(k), {"--commit", mode});
      // The K-th write exists (the process exits right after it) for K <= 7; there is no 8th.
      EXPECT_EQ(r.code, k <= kWrites ? 86 : 0) << r.err;
      // Until the 7th write turns the record into an outcome marker, it is left unsettled.
      EXPECT_EQ(Unsettled(), k < kWrites ? 1 : 0);
      RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
      EXPECT_EQ(gc.code, 0) << gc.err;
      // The collector settles the one record left open: it finishes a transaction that reached
      // its commit point and reverses one that did not; after the marker nothing is left.
      const bool committed = k >= commit_write;
      json::object counters = gc.Json();
      EXPECT_EQ(counters["finished"], k < kWrites && committed ? 1 : 0) << gc.out;
      EXPECT_EQ(counters["reversed"], k < kWrites && !committed ? 1 : 0) << gc.out;
      const std::int64_t b1 = Balance("a1"), b2 = Balance("a2");
      if (committed) {
        EXPECT_TRUE(b1 == 70 && b2 == 80) << b1 << " " << b2;
      } else {
        EXPECT_TRUE(b1 == 100 && b2 == 50) << b1 << " " << b2;
      }
      EXPECT_EQ(Unsettled(), 0);
      for (const char* id : {"a1", "a2"}) {
        RunResult raw = Cli({"get", "accounts", id, "--uncommitted"});
        EXPECT_EQ(raw.code, 0) << raw.err;
        EXPECT_FALSE(raw.Json().contains("txn")) << id << " still held: " << raw.out;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, CliCrash, ::testing::Values("lmdb", "redis", "redis_cluster"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace litetx::clitest
