// tests/stress/bank_worker.cpp — the second process of the two-process Jepsen bank test
// (bank_test.cpp, BankStress.TwoProcessesOnLmdb): runs the same bank workload
// (bank_workload.h) as the test process, on the same LMDB store — transfer threads with
// coordinator crashes, serializable reader threads and a background collector — until its
// writers have made their transfers and its readers their minimum of reads (or the cap has
// passed), checks its writers' known outcomes against the receipts, prints "[stress] bank
// child: ..." lines and exits.
//
// Exit codes: 0 all well; 1 a committed read saw a sum other than 100 or a negative balance;
// 2 bad arguments; 3 the store cannot be opened; 4 an unexpected outcome (e.g. kCorruption,
// kInvalidArgument); 5 the workload did not reach its size within the cap, a way of
// transferring never committed, no transfer was refused, or armed crashes did not happen; 6 a
// transfer's known outcome disagrees with its receipt. The lowest applicable code wins.
//
// Usage: stress_bank_worker --store DIR --seed S --tag T --transfers N --crash-every N
//          --min-reads N --cap-ms N --writers N --readers N --lease-ms N
#include <unistd.h>

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

int main(int argc, char** argv) {
  std::string dir;
  std::uint64_t seed = 1, cap_ms = 90000, lease_ms = 200;
  int writers = 2, readers = 1;
  stress::bank::Config cfg;
  cfg.tag = "c";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--store") dir = v;
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
  if (dir.empty() || writers < 1 || readers < 1 || cfg.crash_every == 0) {
    std::fprintf(stderr, "stress_bank_worker: --store DIR, --writers >= 1, --readers >= 1 and --crash-every >= 1 are required\n");
    return 2;
  }
  litetx::LmdbOptions lo;
  lo.durability = litetx::LmdbDurability::kNoSync;
  auto opened = litetx::LmdbStore::Open(dir, lo);
  if (!opened.ok()) {
    std::fprintf(stderr, "stress_bank_worker: %s\n", opened.status().ToString().c_str());
    return 3;
  }
  std::shared_ptr<litetx::Store> store = *opened;

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
  std::printf("[stress] bank child (LMDB, pid %d, %d writers, %d readers, a crash every %llu transfers, %.1f s): %s\n",
              static_cast<int>(::getpid()), writers, readers, static_cast<unsigned long long>(cfg.crash_every), secs,
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
