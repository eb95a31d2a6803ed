// tests/stress/hot_spot_test.cpp — the hot spot: every thread transfers between the
// same 2 documents through Database::Run for a bounded time.
//   Optimistic: read both, Adjust both (the versions read are checked at commit).
//   PessimisticOppositeOrder: write-Lock both first, in a random order per transaction (the
//     classic deadlock shape), then read and Adjust.
// Each on a store whose calls take 0-100 us (transactions overlap: real contention), and at
// memory speed (...NoStoreDelay: raw throughput, many short transactions).
// Checks: every Run ends — committed, or a reported retryable outcome once RunOptions::timeout
// has passed — within a bound (timeout + busy waits + slack), and the threads end (watchdog
// join: a hang aborts the process); no other outcome; the sum is conserved; no document is left
// referenced or locked and no record is left open, before and after a collector pass. Prints
// throughput (committed tx/s) and abort rate (CommitInfo::attempts per commit - 1).
// 2.5 s each with delay, 1 s without (plus ~3 s of audits over its ~45000 outcome markers) in
// CI; LITETX_LONG=1 runs 1 minute each (without delay: 20 rounds of 3 s on fresh stores).
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stress_util.h"

namespace {

using namespace std::chrono_literals;
using litetx::Code;
using litetx::Status;
using litetx::TxnContext;

const std::string kColl = "stress.hot";
const std::string kDocs[2] = {"A", "B"};
constexpr std::int64_t kInitial = 1000;

struct Outcomes {
  std::mutex mu;
  std::map<std::string, std::uint64_t> by_code;
  std::uint64_t committed = 0, attempts = 0, runs = 0;
  double max_ms = 0, total_ms = 0;
  std::vector<double> latencies_ms;
  std::string first_unexpected;
};

// `delay_us`: every store call sleeps a random 0..delay_us first (a store across a network),
// so that transactions overlap in time even on 2 cores; 0 runs at memory speed.
std::string Label(bool pessimistic, std::uint64_t delay_us) {
  return std::string(pessimistic ? "hot-spot (pessimistic, random lock order" : "hot-spot (optimistic") +
         (delay_us > 0 ? ", store delay 0-" + std::to_string(delay_us) + " us)" : ", no store delay)");
}

void HotSpotRound(bool pessimistic, std::uint64_t delay_us, stress::Ms duration, std::uint64_t seed) {
  const std::string label = Label(pessimistic, delay_us);
  const char* name = label.c_str();
  auto store = std::make_shared<litetx::MemoryStore>();
  litetx::FaultOptions fo;
  fo.seed = seed;
  fo.max_delay = std::chrono::microseconds(delay_us);
  auto slow = std::make_shared<litetx::FaultInjectingStore>(store, fo);
  litetx::Options opt;
  opt.busy_timeout = 500ms;
  opt.retry_backoff = {1ms, 20ms};
  litetx::Database db(slow, opt);
  ASSERT_TRUE(db.Commit(litetx::Transaction()
                            .Insert(kColl, kDocs[0], {{"balance", kInitial}})
                            .Insert(kColl, kDocs[1], {{"balance", kInitial}}))
                  .ok());
  litetx::RunOptions ro;
  ro.timeout = 2s;
  ro.lock_lease = 10s;
  // Longest legitimate Run: its timeout, then one more attempt that may wait busy_timeout on
  // each of two locks and on the commit, plus generous scheduling slack on a loaded 2-core box.
  const stress::Ms bound = ro.timeout + 3 * opt.busy_timeout + 5s;

  constexpr int kThreads = 4;
  Outcomes out;
  std::atomic<bool> stop{false};
  const auto started = stress::SteadyClock::now();
  stress::RunFor(
      kThreads,
      [&](int t) {
        std::mt19937_64 rng(seed * 131 + static_cast<std::uint64_t>(t));
        while (!stop) {
          const int from = static_cast<int>(rng() % 2), to = 1 - from;
          const bool from_first = rng() % 2 == 0;
          const auto t0 = stress::SteadyClock::now();
          auto r = db.Run(
              [&](TxnContext& tx) -> Status {
                if (pessimistic) {
                  const int first = from_first ? from : to;
                  if (Status s = tx.Lock(kColl, kDocs[first], litetx::LockMode::kWrite); !s.ok()) return s;
                  if (Status s = tx.Lock(kColl, kDocs[1 - first], litetx::LockMode::kWrite); !s.ok()) return s;
                }
                std::int64_t bal[2];
                for (int d : {from, to}) {
                  auto g = tx.Get(kColl, kDocs[d]);
                  if (!g.ok()) return g.status();
                  const boost::json::value* v = g->doc.if_contains("balance");
                  if (v == nullptr || !v->is_int64()) return Status::Corruption("no balance in " + kDocs[d]);
                  bal[d] = v->get_int64();
                }
                // 1 moves from `from` to `to`, or back if `from` is empty (the sum is positive).
                const int payer = bal[from] >= 1 ? from : to;
                if (Status s = tx.Adjust(kColl, kDocs[payer], {{"balance", -1}}); !s.ok()) return s;
                return tx.Adjust(kColl, kDocs[1 - payer], {{"balance", 1}});
              },
              ro);
          const double ms = std::chrono::duration<double, std::milli>(stress::SteadyClock::now() - t0).count();
          std::lock_guard<std::mutex> l(out.mu);
          ++out.runs;
          ++out.by_code[std::string(litetx::CodeName(r.code()))];
          out.max_ms = std::max(out.max_ms, ms);
          out.latencies_ms.push_back(ms);
          out.total_ms += ms;
          if (r.ok()) {
            ++out.committed;
            out.attempts += static_cast<std::uint64_t>(r->attempts);
          } else if (!r.status().IsRetryableTransaction() && out.first_unexpected.empty()) {
            out.first_unexpected = r.status().ToString();
          }
        }
      },
      stop, duration, 30s, name);
  const double secs = stress::Seconds(stress::SteadyClock::now() - started);

  std::string codes;
  std::uint64_t unexpected = 0;
  for (const auto& [c, n] : out.by_code) {
    codes += (codes.empty() ? "" : ", ") + c + " " + std::to_string(n);
    if (c != "ok" && c != "conflict" && c != "busy" && c != "aborted") unexpected += n;
  }
  const double commits = static_cast<double>(out.committed);
  std::sort(out.latencies_ms.begin(), out.latencies_ms.end());
  auto pct = [&](double p) {
    if (out.latencies_ms.empty()) return 0.0;
    return out.latencies_ms[static_cast<std::size_t>(p * static_cast<double>(out.latencies_ms.size() - 1))];
  };
  std::printf("[stress] %s: %d threads on 2 documents, %.1f s: %llu runs, committed %llu (%.0f tx/s), "
              "abort rate %.3f retries per commit, outcomes: %s; Run latency mean %.2f ms, p99 %.2f ms, p99.9 %.1f ms, "
              "max %.0f ms (bound %lld ms)\n",
              name, kThreads, secs, static_cast<unsigned long long>(out.runs),
              static_cast<unsigned long long>(out.committed), commits / secs,
              commits > 0 ? static_cast<double>(out.attempts) / commits - 1 : 0.0, codes.c_str(),
              out.runs > 0 ? out.total_ms / static_cast<double>(out.runs) : 0.0, pct(0.99), pct(0.999), out.max_ms,
              static_cast<long long>(bound.count()));
  EXPECT_GT(out.committed, 0u);
  EXPECT_EQ(unexpected, 0u) << out.first_unexpected;
  EXPECT_LE(out.max_ms, static_cast<double>(bound.count())) << "a Run took longer than its bound";

  // Every transaction ended by itself: nothing referenced, locked or open, even before a
  // collector pass; then a pass changes nothing.
  const stress::StoreAudit before = stress::AuditStore(*store, {kColl});
  EXPECT_TRUE(before.clean()) << "before the collector pass: " << before.ToString();
  EXPECT_EQ(stress::Settle(store), 0u);
  const stress::StoreAudit after = stress::AuditStore(*store, {kColl});

  EXPECT_TRUE(after.clean()) << "after the collector pass: " << after.ToString();
  std::int64_t sum = 0;
  for (const auto& d : kDocs) {
    auto r = db.Read(kColl, d);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const boost::json::value* bal = r->doc.if_contains("balance");
    ASSERT_TRUE(bal != nullptr && bal->is_int64()) << boost::json::serialize(r->doc);
    EXPECT_GE(bal->get_int64(), 0);
    sum += bal->get_int64();
  }
  EXPECT_EQ(sum, 2 * kInitial);
}

// With a store delay the rate is low enough for one long round; without, long runs use rounds
// of 3 s on fresh stores.
void HotSpot(bool pessimistic, std::uint64_t delay_us, stress::Ms ci_duration) {
  const std::uint64_t seed = stress::Seed(Label(pessimistic, delay_us).c_str());
  const int rounds = delay_us > 0 ? 1 : stress::Rounds(20);
  const stress::Ms duration = stress::Duration(ci_duration, delay_us > 0 ? 60s : 3s);
  for (int r = 0; r < rounds && !::testing::Test::HasFailure(); ++r) {
    HotSpotRound(pessimistic, delay_us, duration, seed + static_cast<std::uint64_t>(r));
  }
}

TEST(HotSpot, Optimistic) { HotSpot(false, 100, 2500ms); }
TEST(HotSpot, PessimisticOppositeOrder) { HotSpot(true, 100, 2500ms); }
TEST(HotSpot, OptimisticNoStoreDelay) { HotSpot(false, 0, 1000ms); }
TEST(HotSpot, PessimisticOppositeOrderNoStoreDelay) { HotSpot(true, 0, 1000ms); }

}  // namespace
