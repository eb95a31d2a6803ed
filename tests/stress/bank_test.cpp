// tests/stress/bank_test.cpp — the Jepsen-style bank (workload in bank_workload.h):
// 8 accounts holding 100 in all, transfers of 1..5 made three ways (Run with Adjust, Run with
// read-modify-write Updates, Read and then a Commit guarded by the versions read), each with a
// receipt inserted in the same transaction, from several threads; every 50th (memory) or 25th
// (LMDB) transfer of a writer runs through a coordinator that crashes after a random write, and
// a background collector with a 200 ms lease repairs them (and any live transaction slower
// than that); reader threads' every committed serializable read of all 8 accounts must sum to
// exactly 100 with no negative balance.
//   ThreadsOnMemoryStore: 4 transfer threads of 500 transfers and 2 readers in this process
//     (plus a read-committed reader whose skewed sums — read skew, allowed there — are only
//     counted).
//   TwoProcessesOnLmdb: this process and a child (stress_bank_worker) run the workload on one
//     LMDB store at the same time, 2 writers of 200 transfers and 1 reader each, each with its
//     own collector; the child checks the same things in itself and reports through its exit
//     code.
// Each process asserts: no violation and no unexpected outcome; all its transfers made (within a
// 90 s cap), each way of transferring committed some, some refused for insufficient funds, its
// readers committed a minimum of serializable reads, the crashes armed happened; every transfer
// it saw commit has its receipt and every one it saw fail has none.
// Both end with a collector pass that treats every record as abandoned and an audit: sum 100,
// no negative balance, every account's balance and count of transfers equal to what the
// receipts say (a lost update breaks this), no document still referenced by a transaction
// ("_ltx.tx"), no open transaction record. LITETX_LONG=1 runs 30 times as many transfers.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bank_workload.h"
#include "stress_util.h"

#if LITETX_WITH_REDIS
#include "litetx/redis_cluster_store.h"
#include "redis/redis_cluster.h"
#endif

#ifndef LITETX_STRESS_WORKER
#error "LITETX_STRESS_WORKER must name the worker executable"
#endif

extern char** environ;

namespace {

using namespace std::chrono_literals;
using stress::Ms;

stress::bank::Config BankConfig(std::uint64_t transfers, std::uint64_t crash_every, std::uint64_t min_reads) {
  stress::bank::Config cfg;
  cfg.transfers = transfers;
  cfg.crash_every = crash_every;
  cfg.min_reads = min_reads;
  cfg.options.lease = 200ms;  // crashed coordinators are repaired quickly
  cfg.options.retry_backoff = {1ms, 20ms};
  cfg.run.timeout = 3s;
  return cfg;
}

Ms Cap() { return stress::LongRun() ? Ms(1800s) : Ms(90s); }

// Transfers per writer on the Redis Cluster (each process has 2 writers), and the serializable
// reads each process must commit: every store call is a network round trip there, and a
// serializable read of all 8 accounts commits only between the writers' transfers (1 to 8 a
// second measured), so the writers go on until then; 5 reads keep the run near 10 s.
constexpr std::uint64_t kRedisTransfers = 200;
constexpr std::uint64_t kRedisMinReads = 5;

litetx::CollectorOptions GcOptions(const stress::bank::Config& cfg, std::string name) {
  litetx::CollectorOptions co;
  co.engine = cfg.options;
  co.interval = 20ms;
  co.name = std::move(name);
  return co;
}

// The invariants every bank run must leave behind, once settled. `committed`: transfers the
// processes saw commit (the receipts hold at least those).
void FinalAudit(const std::shared_ptr<litetx::Store>& store, const stress::bank::Config& cfg,
                std::uint64_t committed, const char* name) {
  const std::uint64_t open = stress::Settle(store);
  EXPECT_EQ(open, 0u) << "records still open after the settling collector passes";
  const stress::StoreAudit sa = stress::AuditStore(*store, {cfg.collection, stress::bank::ReceiptCollection(cfg)});
  EXPECT_TRUE(sa.clean()) << sa.ToString();
  litetx::Database db(store, cfg.options);
  const stress::bank::Audit a = stress::bank::AuditAccounts(db, cfg);
  EXPECT_TRUE(a.error.empty()) << a.error;
  EXPECT_EQ(a.total, stress::bank::kTotal) << "balances " << a.balances;
  EXPECT_EQ(a.negative, 0) << "balances " << a.balances;
  EXPECT_TRUE(a.mismatch.empty()) << "accounts disagree with the receipts (lost update?): " << a.mismatch;
  EXPECT_GE(a.receipts, committed) << "fewer receipts than transfers seen committed";
  std::printf("[stress] bank %s audit: total %lld, balances [%s], receipts %llu (transfers seen committed %llu), "
              "accounts agreeing with the receipts: %s; %s\n",
              name, static_cast<long long>(a.total), a.balances.c_str(), static_cast<unsigned long long>(a.receipts),
              static_cast<unsigned long long>(committed), a.mismatch.empty() ? "all" : a.mismatch.c_str(),
              sa.ToString().c_str());
}

// What each process asserts about its own run.
void ExpectHealthy(litetx::Database& db, const stress::bank::Config& cfg, stress::bank::Stats& st, int writers,
                   const char* name) {
  EXPECT_EQ(st.violations.load(), 0u) << st.first_violation;
  EXPECT_EQ(st.unexpected.load(), 0u) << st.first_unexpected;
  const std::uint64_t n = static_cast<std::uint64_t>(writers);
  EXPECT_GE(st.transfers.load(), n * cfg.transfers) << "the writers stopped at the cap";
  EXPECT_GE(st.reads_ok.load(), cfg.min_reads) << "too few serializable reads committed before the cap";
  EXPECT_GT(st.by_mode[stress::bank::kAdjust].load(), 0u) << "no Adjust transfer committed";
  EXPECT_GT(st.by_mode[stress::bank::kUpdate].load(), 0u) << "no read-modify-write transfer committed";
  EXPECT_GT(st.by_mode[stress::bank::kVersioned].load(), 0u) << "no versioned commit committed";
  EXPECT_GT(st.refused.load(), 0u) << "no transfer refused: the non-negative rule was never exercised";
  // A crash is armed every crash_every transfers of a writer and stays armed until a transfer
  // writes enough to meet it: at most one per writer is left over.
  EXPECT_GE(st.crash_armed.load(), n * (cfg.transfers / cfg.crash_every));
  EXPECT_GE(st.crashed.load() + n, st.crash_armed.load()) << "armed crashes did not happen";
  std::uint64_t checked = 0;
  const std::string ledger = stress::bank::CheckKnownOutcomes(db, cfg, st, &checked);
  EXPECT_TRUE(ledger.empty()) << ledger;
  std::printf("[stress] bank %s: %llu known outcomes checked against the receipts: %s\n", name,
              static_cast<unsigned long long>(checked), ledger.empty() ? "all agree" : ledger.c_str());
}

TEST(BankStress, ThreadsOnMemoryStore) {
  const std::uint64_t seed = stress::Seed("bank (memory)");
  auto store = std::make_shared<litetx::MemoryStore>();
  const stress::bank::Config cfg = BankConfig(stress::Count(500, 15000), 50, 50);
  litetx::Database db(store, cfg.options);
  ASSERT_TRUE(stress::bank::CreateAccounts(db, cfg).ok());
  litetx::Collector gc(store, GcOptions(cfg, "gc-bank"));
  gc.Start();

  // Readers: 2 serializable (checked) and 1 read committed (skewed sums counted, not errors).
  constexpr int kWriters = 4, kReaders = 3;
  stress::bank::Stats st;
  st.writers_running = kWriters;
  std::atomic<bool> stop{false};
  const auto started = stress::SteadyClock::now();
  stress::RunFor(
      kWriters + kReaders,
      [&](int i) {
        if (i < kWriters) {
          stress::bank::TransferLoop(store, db, cfg, i, seed * 1000003 + static_cast<std::uint64_t>(i), stop, st);
        } else {
          stress::bank::ReaderLoop(db, cfg, stop, st, /*serializable=*/i + 1 < kWriters + kReaders);
        }
      },
      stop, Cap(), 60s, "bank (memory) workers");
  const double secs = stress::Seconds(stress::SteadyClock::now() - started);
  gc.Stop();
  const auto gs = gc.stats();
  std::printf("[stress] bank (memory, %d writers, %d readers incl. 1 read-committed, a crash every %llu transfers, %.1f s): "
              "%s; collector finished %llu, reversed %llu\n",
              kWriters, kReaders, static_cast<unsigned long long>(cfg.crash_every), secs, st.Summary(secs).c_str(),
              static_cast<unsigned long long>(gs.finished), static_cast<unsigned long long>(gs.reversed));
  ExpectHealthy(db, cfg, st, kWriters, "(memory)");
  FinalAudit(store, cfg, st.committed.load(), "(memory)");
}

// This process and a child (stress_bank_worker, which opens the same store through
// `child_store_args`) run the bank on `store` at once, each with `writers` writers, `readers`
// serializable readers and its own collector; then both are checked and the store audited.
void RunTwoProcesses(const std::shared_ptr<litetx::Store>& store, const std::vector<std::string>& child_store_args,
                     const stress::bank::Config& cfg, std::uint64_t seed, int writers, int readers,
                     const char* label) {
  litetx::Database db(store, cfg.options);
  ASSERT_TRUE(stress::bank::CreateAccounts(db, cfg).ok());

  // The child: the same workload in another process, on the same store.
  std::vector<std::string> args = {LITETX_STRESS_WORKER};
  args.insert(args.end(), child_store_args.begin(), child_store_args.end());
  const std::vector<std::string> rest = {"--seed", std::to_string(seed + 1), "--tag", "c",
                                         "--transfers", std::to_string(cfg.transfers),
                                         "--crash-every", std::to_string(cfg.crash_every),
                                         "--min-reads", std::to_string(cfg.min_reads),
                                         "--cap-ms", std::to_string(Cap().count()),
                                         "--writers", std::to_string(writers), "--readers", std::to_string(readers),
                                         "--lease-ms", std::to_string(cfg.options.lease.count())};
  args.insert(args.end(), rest.begin(), rest.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t child = 0;
  ASSERT_EQ(::posix_spawn(&child, argv[0], nullptr, nullptr, argv.data(), environ), 0);

  litetx::Collector gc(store, GcOptions(cfg, "gc-parent"));
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
      stop, Cap(), 60s, (std::string("bank (") + label + ") parent workers").c_str());
  const double secs = stress::Seconds(stress::SteadyClock::now() - started);

  // Wait for the child (it is as big and has the same cap), with a watchdog.
  int status = 0;
  const auto until = stress::SteadyClock::now() + Cap() + 60s;
  pid_t w = 0;
  while ((w = ::waitpid(child, &status, WNOHANG)) == 0 && stress::SteadyClock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  if (w == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
    ADD_FAILURE() << "WATCHDOG: the child worker did not end within 60 s of its cap";
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child worker status " << status << " (exit code " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
        << "; 1 = a committed read saw a violation, 3 = the store could not be opened, 4 = an unexpected "
           "outcome, 5 = the workload did not reach its size or its crashes, 6 = a known outcome disagrees "
           "with the receipts)";
  }
  gc.Stop();
  const auto gs = gc.stats();
  std::printf("[stress] bank parent (%s, %d writers, %d readers, a crash every %llu transfers, %.1f s): %s; "
              "collector finished %llu, reversed %llu\n",
              label, writers, readers, static_cast<unsigned long long>(cfg.crash_every), secs,
              st.Summary(secs).c_str(), static_cast<unsigned long long>(gs.finished),
              static_cast<unsigned long long>(gs.reversed));
  ExpectHealthy(db, cfg, st, writers, (std::string("parent (") + label + ")").c_str());
  FinalAudit(store, cfg, st.committed.load(), (std::string("(two processes, ") + label + ")").c_str());
}

TEST(BankStress, TwoProcessesOnLmdb) {
  const std::uint64_t seed = stress::Seed("bank (two processes, LMDB)");
  std::string dir = (std::filesystem::temp_directory_path() / "litetx-stress-bank-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  litetx::LmdbOptions lo;
  lo.durability = litetx::LmdbDurability::kNoSync;
  stress::bank::Config cfg = BankConfig(stress::Count(200, 6000), 25, 20);
  cfg.tag = "p";
  {
    auto opened = litetx::LmdbStore::Open(dir, lo);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    RunTwoProcesses(*opened, {"--store", dir}, cfg, seed, 2, 1, "LMDB");
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

#if LITETX_WITH_REDIS
TEST(BankStress, TwoProcessesOnRedisCluster) {
  if (ltxtest::RedisServerPath().empty() || ltxtest::RedisCliPath().empty()) {
    GTEST_SKIP() << "redis-server or redis-cli not found in PATH (run scripts/bootstrap.sh); the bank on a "
                    "Redis Cluster is not run";
  }
  const std::uint64_t seed = stress::Seed("bank (two processes, Redis Cluster)");
  ltxtest::RedisCluster cluster;
  const auto t0 = stress::SteadyClock::now();
  ASSERT_EQ(cluster.Start(3, 1), "");
  std::printf("[stress] bank (Redis Cluster): 3 masters + 3 replicas up in %.1f s\n",
              stress::Seconds(stress::SteadyClock::now() - t0));
  litetx::RedisClusterOptions ro;
  ro.seeds.clear();
  std::string nodes;
  for (int port : cluster.SeedPorts()) {
    ro.seeds.push_back({"127.0.0.1", port});
    nodes += (nodes.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
  }
  ro.prefix = "bank:";
  stress::bank::Config cfg = BankConfig(stress::Count(kRedisTransfers, 3000), 25, kRedisMinReads);
  cfg.tag = "p";
  auto opened = litetx::RedisClusterStore::Open(ro);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  RunTwoProcesses(*opened, {"--redis-cluster", nodes, "--prefix", ro.prefix}, cfg, seed, 2, 1, "Redis Cluster");
  // The accounts and receipts are spread over the masters.
  int masters_with_keys = 0;
  for (int port : cluster.MasterPorts()) {
    ltxtest::RawReply r = cluster.Node(port).Command("DBSIZE");
    masters_with_keys += r != nullptr && r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? 1 : 0;
  }
  EXPECT_EQ(masters_with_keys, 3);
}
#endif

}  // namespace
