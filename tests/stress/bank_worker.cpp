// tests/stress/bank_worker.cpp — the second process of the two-process Jepsen bank test
// (bank_test.cpp, BankStress.TwoProcessesOnLmdb and TwoProcessesOnRedisCluster): runs the same
// bank workload (bank_workload.h) as the test process, on the same store (LMDB or Redis) —
// transfer threads with coordinator crashes, serializable reader threads and a background
// collector — until its writers have made their transfers and its readers their minimum of
// reads (or the cap has passed), checks its writers' known outcomes against the receipts,
// prints "[stress] bank child: ..." lines and exits.
//
// Exit codes: 0 all well; 1 a committed read saw a sum other than 100 or a negative balance;
// 2 bad arguments; 3 the store cannot be opened; 4 an unexpected outcome (e.g. kCorruption,
// kInvalidArgument); 5 the workload did not reach its size within the cap, a way of
// transferring never committed, no transfer was refused, or armed crashes did not happen; 6 a
// transfer's known outcome disagrees with its receipt. The lowest applicable code wins.
//
// Usage: stress_bank_worker STORE --seed S --tag T --transfers N --crash-every N
//          --min-reads N --cap-ms N --writers N --readers N --lease-ms N
// where STORE is one of
//   --store DIR                                  an LMDB store in DIR
//   --redis HOST:PORT --prefix P                 a RedisStore (key prefix P)
//   --redis-cluster HOST:PORT[,HOST:PORT...] --prefix P
//                                                a RedisClusterStore with those seed nodes
// (the Redis ones when built with LITETX_WITH_REDIS).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bank_workload.h"
#include "stress_util.h"

#if LITETX_WITH_REDIS
#include "litetx/redis_cluster_store.h"
#include "litetx/redis_store.h"
#endif

namespace {

#if LITETX_WITH_REDIS
// "HOST:PORT[,HOST:PORT...]" as nodes; false if an entry is malformed.
bool ParseNodes(const std::string& text, std::vector<litetx::RedisNode>* out) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string one = text.substr(start, end - start);
    const std::size_t colon = one.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == one.size()) return false;
    char* rest = nullptr;
    const long port = std::strtol(one.c_str() + colon + 1, &rest, 10);
    if (*rest != '\0' || port <= 0 || port > 65535) return false;
    out->push_back({one.substr(0, colon), static_cast<int>(port)});
    start = end + 1;
  }
  return !out->empty();
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string dir, redis, redis_cluster, prefix;
  std::uint64_t seed = 1, cap_ms = 90000, lease_ms = 200;
  int writers = 2, readers = 1;
  stress::bank::Config cfg;
  cfg.tag = "c";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--store") dir = v;
    else if (flag == "--redis") redis = v;
    else if (flag == "--redis-cluster") redis_cluster = v;
    else if (flag == "--prefix") prefix = v;
    else if (flag == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (flag == "--tag") cfg.tag = v;
    else if (flag == "--transfers") cfg.transfers = std::strtoull(v, nullptr, 10);
    else if (flag == "--crash-every") cfg.crash_every = std::strtoull(v, nullptr, 10);
    else if (flag == "--min-reads") cfg.min_reads = std::strtoull(v, nullptr, 10);
    else if (flag == "--cap-ms") cap_ms = std::strtoull(v, nullptr, 10);
    else if (flag == "--lease-ms") lease_ms = std::strtoull(v, nullptr, 10);
    else if (flag == "--writers") writers = std::atoi(v);
    else if (flag == "--readers") readers = std::atoi(v);
    else {
      std::fprintf(stderr, "stress_bank_worker: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const int stores = (dir.empty() ? 0 : 1) + (redis.empty() ? 0 : 1) + (redis_cluster.empty() ? 0 : 1);
  if (stores != 1 || writers < 1 || readers < 1 || cfg.crash_every == 0) {
    std::fprintf(stderr, "stress_bank_worker: one of --store DIR, --redis HOST:PORT and --redis-cluster NODES, "
                         "--writers >= 1, --readers >= 1 and --crash-every >= 1 are required\n");
    return 2;
  }
  std::shared_ptr<litetx::Store> store;
  std::string label = "LMDB";
  litetx::Status open_status = litetx::Status::Ok();
  if (!dir.empty()) {
    litetx::LmdbOptions lo;
    lo.durability = litetx::LmdbDurability::kNoSync;
    auto opened = litetx::LmdbStore::Open(dir, lo);
    if (opened.ok()) store = *opened;
    else open_status = opened.status();
  } else {
#if LITETX_WITH_REDIS
    std::vector<litetx::RedisNode> nodes;
    if (!ParseNodes(redis.empty() ? redis_cluster : redis, &nodes) || (!redis.empty() && nodes.size() != 1)) {
      std::fprintf(stderr, "stress_bank_worker: bad node list %s\n", (redis + redis_cluster).c_str());
      return 2;
    }
    if (!redis.empty()) {
      label = "Redis";
      litetx::RedisOptions ro;
      ro.host = nodes[0].host;
      ro.port = nodes[0].port;
      if (!prefix.empty()) ro.prefix = prefix;
      auto opened = litetx::RedisStore::Open(ro);
      if (opened.ok()) store = *opened;
      else open_status = opened.status();
    } else {
      label = "Redis Cluster";
      litetx::RedisClusterOptions ro;
      ro.seeds = nodes;
      if (!prefix.empty()) ro.prefix = prefix;
      auto opened = litetx::RedisClusterStore::Open(ro);
      if (opened.ok()) store = *opened;
      else open_status = opened.status();
    }
#else
    std::fprintf(stderr, "stress_bank_worker: built without Redis (LITETX_WITH_REDIS=OFF)\n");
    return 2;
#endif
  }
  if (store == nullptr) {
    std::fprintf(stderr, "stress_bank_worker: %s\n", open_status.ToString().c_str());
    return 3;
  }

  cfg.options.lease = std::chrono::milliseconds(lease_ms);
  cfg.options.retry_backoff = {std::chrono::milliseconds(1), std::chrono::milliseconds(20)};
  cfg.run.timeout = std::chrono::milliseconds(3000);
  litetx::Database db(store, cfg.options);
  litetx::CollectorOptions co;
  co.engine = cfg.options;
  co.interval = std::chrono::milliseconds(20);
  co.name = "gc-child";
  litetx::Collector gc(store, co);
  gc.Start();

  stress::bank::Stats st;
  st.writers_running = writers;
  std::atomic<bool> stop{false};
  const auto started = stress::SteadyClock::now();
  stress::RunFor(
      writers + readers,
      [&](int i) {
        if (i < writers) {
          stress::bank::TransferLoop(store, db, cfg, i, seed * 1000003 + static_cast<std::uint64_t>(i), stop, st);
        } else {
          stress::bank::ReaderLoop(db, cfg, stop, st);
        }
      },
      stop, std::chrono::milliseconds(cap_ms), std::chrono::seconds(60), "bank child workers");
  gc.Stop();
  const double secs = stress::Seconds(stress::SteadyClock::now() - started);
  std::uint64_t checked = 0;
  const std::string ledger = stress::bank::CheckKnownOutcomes(db, cfg, st, &checked);
  const std::uint64_t n = static_cast<std::uint64_t>(writers);
  std::string short_of;
  if (st.transfers < n * cfg.transfers) short_of += " transfers;";
  if (st.reads_ok < cfg.min_reads) short_of += " serializable reads;";
  for (int m = 0; m < 3; ++m) {
    if (st.by_mode[m] == 0) short_of += " no commit of way " + std::to_string(m) + ";";
  }
  if (st.refused == 0) short_of += " no transfer refused;";
  if (st.crash_armed < n * (cfg.transfers / cfg.crash_every) || st.crashed + n < st.crash_armed) short_of += " crashes;";
  std::printf("[stress] bank child (%s, pid %d, %d writers, %d readers, a crash every %llu transfers, %.1f s): %s\n",
              label.c_str(), static_cast<int>(::getpid()), writers, readers, static_cast<unsigned long long>(cfg.crash_every), secs,
              st.Summary(secs).c_str());
  std::printf("[stress] bank child: %llu known outcomes checked against the receipts: %s\n",
              static_cast<unsigned long long>(checked), ledger.empty() ? "all agree" : ledger.c_str());
  if (!st.first_violation.empty()) std::printf("[stress] bank child: first violation: %s\n", st.first_violation.c_str());
  if (!st.first_unexpected.empty()) std::printf("[stress] bank child: first unexpected outcome: %s\n", st.first_unexpected.c_str());
  if (!short_of.empty()) std::printf("[stress] bank child: short of its size:%s\n", short_of.c_str());
  std::fflush(stdout);
  if (st.violations > 0) return 1;
  if (st.unexpected > 0) return 4;
  if (!short_of.empty()) return 5;
  if (!ledger.empty()) return 6;
  return 0;
}
