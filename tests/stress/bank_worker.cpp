// tests/stress/bank_worker.cpp — the second process of the two-process Jepsen bank test
// (bank_test.cpp, BankStress.TwoProcessesOnLmdb): runs the same bank workload
// (bank_workload.h) as the test process, on the same LMDB store, for a fixed time — transfer
// threads with coordinator crashes, serializable reader threads and a background collector —
// then prints one "[stress] bank child: ..." line and exits.
//
// Exit codes: 0 no violation; 1 a committed read saw a sum other than 100 or a negative
// balance; 2 bad arguments; 3 the store cannot be opened; 4 an unexpected outcome (e.g.
// kCorruption, kInvalidArgument) and no violation.
//
// Usage: stress_bank_worker --store DIR --seed S --duration-ms N --writers N --readers N
//          --crash-rate F --lease-ms N
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
  std::uint64_t seed = 1, duration_ms = 1000, lease_ms = 200;
  int writers = 2, readers = 1;
  double crash_rate = 0.01;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--store") dir = v;
    else if (flag == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (flag == "--duration-ms") duration_ms = std::strtoull(v, nullptr, 10);
    else if (flag == "--lease-ms") lease_ms = std::strtoull(v, nullptr, 10);
    else if (flag == "--writers") writers = std::atoi(v);
    else if (flag == "--readers") readers = std::atoi(v);
    else if (flag == "--crash-rate") crash_rate = std::strtod(v, nullptr);
    else {
      std::fprintf(stderr, "stress_bank_worker: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (dir.empty() || writers < 1 || readers < 0) {
    std::fprintf(stderr, "stress_bank_worker: --store DIR is required\n");
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

  stress::bank::Config cfg;
  cfg.crash_rate = crash_rate;
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
  std::atomic<bool> stop{false};
  const auto started = stress::SteadyClock::now();
  stress::RunFor(
      writers + readers,
      [&](int i) {
        if (i < writers) {
          stress::bank::TransferLoop(store, db, cfg, seed * 1000003 + static_cast<std::uint64_t>(i), stop, st);
        } else {
          stress::bank::ReaderLoop(db, cfg, stop, st);
        }
      },
      stop, std::chrono::milliseconds(duration_ms), std::chrono::seconds(60), "bank child workers");
  gc.Stop();
  const double secs = stress::Seconds(stress::SteadyClock::now() - started);
  std::printf("[stress] bank child (LMDB, pid %d, %d writers, %d readers, crash rate %.3f): %s\n",
              static_cast<int>(::getpid()), writers, readers, crash_rate, st.Summary(secs).c_str());
  if (!st.first_violation.empty()) std::printf("[stress] bank child: first violation: %s\n", st.first_violation.c_str());
  if (!st.first_unexpected.empty()) std::printf("[stress] bank child: first unexpected outcome: %s\n", st.first_unexpected.c_str());
  std::fflush(stdout);
  if (st.violations > 0) return 1;
  if (st.unexpected > 0) return 4;
  return 0;
}
