// tests/stress/stress_util.h — shared helpers of the stress tests, header-only so
// that the worker process can use them too:
//   * run length: CI-sized by default, much longer with LITETX_LONG_TESTS=ON at configure time
//     or LITETX_LONG=1 at run time (the convention of tests/kill9); LITETX_STRESS_MS=N sets
//     the duration of every time-bound test (round), LITETX_STRESS_SCALE=N multiplies the
//     size of every count-bound one, LITETX_STRESS_ROUNDS=N sets the rounds of high-rate tests;
//   * seeds: LITETX_STRESS_SEED=N replays a run's random choices (thread interleavings still
//     vary); every test prints the seed it used;
//   * RunFor: threads run for a duration, then a watchdog join: threads that do not end
//     within a grace period abort the process with a message (a hang fails, never stalls ctest);
//   * audits of what a store holds after a run: documents still referenced by a transaction
//     ("_ltx.tx" or a deleting flag), unexpired pessimistic locks, ActiveTransaction records
//     that are not outcome markers; and Settle(), a collector pass that treats every record as
//     abandoned (older_than 1 ms) for use when no coordinator is alive.
//
// Thread safety: free functions; RunFor's callback runs on many threads at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "litetx/litetx.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/lmdb_store.h"

#ifndef LITETX_LONG_TESTS
#define LITETX_LONG_TESTS 0
#endif

namespace stress {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

inline std::uint64_t EnvU64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

inline bool LongRun() { return LITETX_LONG_TESTS != 0 || EnvU64("LITETX_LONG", 0) == 1; }

// How long a workload runs: `ci` by default, `long_run` for long runs, LITETX_STRESS_MS if set.
inline Ms Duration(Ms ci, Ms long_run) {
  return Ms(EnvU64("LITETX_STRESS_MS", static_cast<std::uint64_t>((LongRun() ? long_run : ci).count())));
}

// Rounds of a high-rate workload: 1 in CI, `long_rounds` in long runs, LITETX_STRESS_ROUNDS if
// set. Each round starts on a fresh store, so memory stays bounded (a store keeps an outcome
// marker of every transaction for an hour).
inline int Rounds(int long_rounds) {
  return static_cast<int>(EnvU64("LITETX_STRESS_ROUNDS", LongRun() ? static_cast<std::uint64_t>(long_rounds) : 1));
}

// The size of a count-bound workload (transactions, transfers, validations): `ci` by default,
// `long_run` in long runs, times LITETX_STRESS_SCALE if set (an integer, default 1).
inline std::uint64_t Count(std::uint64_t ci, std::uint64_t long_run) {
  return (LongRun() ? long_run : ci) * std::max<std::uint64_t>(1, EnvU64("LITETX_STRESS_SCALE", 1));
}

// The seed of a test: LITETX_STRESS_SEED or a random one; printed for replay.
inline std::uint64_t Seed(const char* test) {
  const std::uint64_t seed = EnvU64("LITETX_STRESS_SEED", std::random_device{}());
  std::printf("[stress] %s: seed %llu (replay: LITETX_STRESS_SEED=%llu)%s\n", test,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              LongRun() ? " [long run]" : "");
  std::fflush(stdout);
  return seed;
}

inline double Seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Runs fn(0..n-1) on n threads, sets `stop` after `duration`, and joins them. If they have
// not all returned `grace` after that, prints `what` and aborts the process (a hang must fail,
// not stall ctest).
inline void RunFor(int n, const std::function<void(int)>& fn, std::atomic<bool>& stop, Ms duration,
                   Ms grace, const char* what) {
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      fn(i);
      ++done;
    });
  }
  const auto stop_at = SteadyClock::now() + duration;
  const auto deadline = stop_at + grace;
  while (done.load() < n) {
    const auto now = SteadyClock::now();
    if (now >= stop_at) stop = true;
    if (now > deadline) {
      std::fprintf(stderr, "[stress] WATCHDOG: %s: %d of %d threads still running %lld ms after stop\n",
                   what, n - done.load(), n, static_cast<long long>(grace.count()));
      std::fflush(stderr);
      std::abort();
    }
    std::this_thread::sleep_for(2ms);
  }
  stop = true;
  for (auto& t : threads) t.join();
}

inline std::int64_t NowMs() {
  return std::chrono::duration_cast<Ms>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a store holds in some collections after a run.
struct StoreAudit {
  std::uint64_t documents = 0;     // scanned in the given collections
  std::uint64_t held = 0;          // with "_ltx.tx" or "_ltx.dlg" (a transaction reference)
  std::uint64_t live_locks = 0;    // unexpired entries in "_ltx.lk"
  std::uint64_t records = 0;       // documents in the transactions collection
  std::uint64_t open_records = 0;  // ... that are not outcome markers ("done": true)
  std::vector<std::string> problems;  // scan errors and the first held documents

  bool clean() const { return held == 0 && live_locks == 0 && open_records == 0 && problems.empty(); }
  std::string ToString() const {
    std::string s = "documents " + std::to_string(documents) + ", held " + std::to_string(held) +
                    ", live locks " + std::to_string(live_locks) + ", records " +
                    std::to_string(records) + ", open records " + std::to_string(open_records);
    for (const auto& p : problems) s += "\n  " + p;
    return s;
  }
};

// Calls fn(id, stored document) for every document of `collection`; false on a scan error.
inline bool ScanAll(litetx::Store& store, std::string_view collection,
                    const std::function<void(const std::string&, const boost::json::object&)>& fn,
                    std::string* error) {
  std::string cursor;
  do {
    auto page = store.Scan(collection, cursor, 512);
    if (!page.ok()) {
      *error = "scan " + std::string(collection) + ": " + page.status().ToString();
      return false;
    }
    for (const auto& [id, doc] : page->documents) fn(id, doc.value);
    cursor = page->next_cursor;
  } while (!cursor.empty());
  return true;
}

inline StoreAudit AuditStore(litetx::Store& store, const std::vector<std::string>& collections) {
  StoreAudit a;
  const std::int64_t now = NowMs();
  std::string error;
  for (const auto& c : collections) {
    bool ok = ScanAll(store, c, [&](const std::string& id, const boost::json::object& v) {
      ++a.documents;
      const boost::json::value* meta = v.if_contains(litetx::kMetaField);
      if (meta == nullptr || !meta->is_object()) {
        a.problems.push_back(c + "/" + id + ": no metadata");
        return;
      }
      const auto& m = meta->get_object();
      const boost::json::value* tx = m.if_contains("tx");
      const boost::json::value* dlg = m.if_contains("dlg");
      bool held = (tx != nullptr && !(tx->is_string() && tx->get_string().empty()) && !tx->is_null()) ||
                  (dlg != nullptr && dlg->is_bool() && dlg->get_bool());
      if (held) {
        ++a.held;
        if (a.problems.size() < 10) a.problems.push_back(c + "/" + id + " still held: " + boost::json::serialize(m));
      }
      if (const boost::json::value* lk = m.if_contains("lk"); lk != nullptr && lk->is_array()) {
        for (const auto& e : lk->get_array()) {
          const boost::json::value* x = e.is_object() ? e.get_object().if_contains("x") : nullptr;
          if (x != nullptr && x->is_int64() && x->get_int64() > now) {
            ++a.live_locks;
            if (a.problems.size() < 10) a.problems.push_back(c + "/" + id + " still locked: " + boost::json::serialize(m));
          }
        }
      }
    }, &error);
    if (!ok) a.problems.push_back(error);
  }
  bool ok = ScanAll(store, litetx::kTransactionsCollection,
                    [&](const std::string& id, const boost::json::object& v) {
                      ++a.records;
                      const boost::json::value* done = v.if_contains("done");
                      if (done == nullptr || !done->is_bool() || !done->get_bool()) {
                        ++a.open_records;
                        if (a.problems.size() < 10) a.problems.push_back("open record " + id + ": " + boost::json::serialize(v));
                      }
                    },
                    &error);
  if (!ok) a.problems.push_back(error);
  return a;
}

// Collector passes that treat every transaction as abandoned, until no record is open (at
// most `passes`, 10 ms apart). Only when no coordinator is alive. Returns the number of open
// records left.
inline std::uint64_t Settle(const std::shared_ptr<litetx::Store>& store, int passes = 500) {
  litetx::CollectorOptions co;
  co.older_than = 1ms;
  co.engine.retry_backoff = {1ms, 20ms};
  co.name = "stress-settle";
  litetx::Collector gc(store, co);
  std::uint64_t open = 0;
  for (int i = 0; i < passes; ++i) {
    (void)gc.RunOnce();
    open = AuditStore(*store, {}).open_records;
    if (open == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  return open;
}

}  // namespace stress
