// tests/stress/hot_spot_test.cpp — the hot spot: every thread transfers between the
// same 2 documents through Database::Run for a bounded time.
//   Optimistic: read both, then write both (the versions read are checked at commit).
//   PessimisticOppositeOrder: write-Lock both first, in a random order per transaction (the
//     classic deadlock shape), then read and write.
// Each on a store whose calls take 0-100 us (transactions overlap: real contention), and at
// memory speed (...NoStoreDelay: raw throughput, many short transactions).
// The documents start with balances 3 and 2 and a count of applied transfers ("ops": 0). A
// transfer moves 1-3 from one to the other and is refused (the callback returns
// kFailedPrecondition) if the payer has less, so balances stay near zero. Half the transfers
// Adjust both documents (relative), half Update them with absolute values computed from the
// reads (read-modify-write: only the version guard at commit stops a lost update). Each thread
// keeps a ledger of its committed transfers.
// Checks: every Run ends — committed, refused, or a reported retryable outcome once
// RunOptions::timeout has passed — within a bound (timeout + busy waits + slack), and the
// threads end (watchdog join: a hang aborts the process); no other outcome; no transaction
// read a negative balance; some transfers were refused (the non-negative rule was exercised);
// at the end each balance equals its start plus the ledgers' net flow (a lost update of either
// kind breaks this), each document's count equals the transfers committed, no balance is
// negative; no document is left referenced or locked and no record is left open, before and
// after a collector pass. Prints throughput (committed tx/s) and abort rate
// (CommitInfo::attempts per commit - 1).
// 2.5 s each with delay, 1 s without (plus the audits of its outcome markers) in CI;
// LITETX_LONG=1 runs 1 minute each (without delay: 20 rounds of 3 s on fresh stores).
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
constexpr std::int64_t kInitial[2] = {3, 2};
constexpr std::int64_t kMaxAmount = 3;

struct Outcomes {
  std::mutex mu;
  std::map<std::string, std::uint64_t> by_code;
  std::uint64_t committed = 0, attempts = 0, runs = 0, refused = 0, adjusts = 0, updates = 0;
  std::int64_t net = 0;              // ledger: amount moved from kDocs[0] to kDocs[1], committed
  std::uint64_t negative_reads = 0;  // a transaction read a negative balance
  std::string first_negative;
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
                            .Insert(kColl, kDocs[0], {{"balance", kInitial[0]}, {"ops", 0}})
                            .Insert(kColl, kDocs[1], {{"balance", kInitial[1]}, {"ops", 0}}))
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
          const bool absolute = rng() % 2 == 0;
          const std::int64_t amount = 1 + static_cast<std::int64_t>(rng() % kMaxAmount);
          bool refused = false;
          std::string negative;
          const auto t0 = stress::SteadyClock::now();
          auto r = db.Run(
              [&](TxnContext& tx) -> Status {
                refused = false;
                if (pessimistic) {
                  const int first = from_first ? from : to;
                  if (Status s = tx.Lock(kColl, kDocs[first], litetx::LockMode::kWrite); !s.ok()) return s;
                  if (Status s = tx.Lock(kColl, kDocs[1 - first], litetx::LockMode::kWrite); !s.ok()) return s;
                }
                std::int64_t bal[2], ops[2];
                for (int d : {from, to}) {
                  auto g = tx.Get(kColl, kDocs[d]);
                  if (!g.ok()) return g.status();
                  const boost::json::value* v = g->doc.if_contains("balance");
                  const boost::json::value* n = g->doc.if_contains("ops");
                  if (v == nullptr || !v->is_int64() || n == nullptr || !n->is_int64()) {
                    return Status::Corruption("no balance or ops in " + kDocs[d] + ": " + boost::json::serialize(g->doc));
                  }
                  bal[d] = v->get_int64();
                  ops[d] = n->get_int64();
                  if (bal[d] < 0 && negative.empty()) negative = kDocs[d] + " = " + std::to_string(bal[d]);
                }
                if (bal[from] < amount) {
                  refused = true;
                  return Status::FailedPrecondition("insufficient funds");
                }
                if (absolute) {
                  if (Status s = tx.Update(kColl, kDocs[from], {{"balance", bal[from] - amount}, {"ops", ops[from] + 1}}); !s.ok()) return s;
                  return tx.Update(kColl, kDocs[to], {{"balance", bal[to] + amount}, {"ops", ops[to] + 1}});
                }
                if (Status s = tx.Adjust(kColl, kDocs[from], {{"balance", -amount}, {"ops", 1}}); !s.ok()) return s;
                return tx.Adjust(kColl, kDocs[to], {{"balance", amount}, {"ops", 1}});
              },
              ro);
          const double ms = std::chrono::duration<double, std::milli>(stress::SteadyClock::now() - t0).count();
          std::lock_guard<std::mutex> l(out.mu);
          ++out.runs;
          const bool was_refused = r.code() == Code::kFailedPrecondition && refused;
          ++out.by_code[was_refused ? std::string("refused") : std::string(litetx::CodeName(r.code()))];
          out.max_ms = std::max(out.max_ms, ms);
          out.latencies_ms.push_back(ms);
          out.total_ms += ms;
          if (!negative.empty()) {
            ++out.negative_reads;
            if (out.first_negative.empty()) out.first_negative = negative;
          }
          if (r.ok()) {
            ++out.committed;
            ++(absolute ? out.updates : out.adjusts);
            out.net += from == 0 ? amount : -amount;
            out.attempts += static_cast<std::uint64_t>(r->attempts);
          } else if (was_refused) {
            ++out.refused;
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
    if (c != "ok" && c != "refused" && c != "conflict" && c != "busy" && c != "aborted") unexpected += n;
  }
  const double commits = static_cast<double>(out.committed);
  std::sort(out.latencies_ms.begin(), out.latencies_ms.end());
  auto pct = [&](double p) {
    if (out.latencies_ms.empty()) return 0.0;
    return out.latencies_ms[static_cast<std::size_t>(p * static_cast<double>(out.latencies_ms.size() - 1))];
  };
  std::printf("[stress] %s: %d threads on 2 documents, %.1f s: %llu runs, committed %llu (%.0f tx/s; %llu "
              "Adjust, %llu read-modify-write Update), abort rate %.3f retries per commit, outcomes: %s; "
              "Run latency mean %.2f ms, p99 %.2f ms, p99.9 %.1f ms, max %.0f ms (bound %lld ms)\n",
              name, kThreads, secs, static_cast<unsigned long long>(out.runs),
              static_cast<unsigned long long>(out.committed), commits / secs,
              static_cast<unsigned long long>(out.adjusts), static_cast<unsigned long long>(out.updates),
              commits > 0 ? static_cast<double>(out.attempts) / commits - 1 : 0.0, codes.c_str(),
              out.runs > 0 ? out.total_ms / static_cast<double>(out.runs) : 0.0, pct(0.99), pct(0.999), out.max_ms,
              static_cast<long long>(bound.count()));
  EXPECT_GT(out.adjusts, 0u) << "no Adjust transfer committed";
  EXPECT_GT(out.updates, 0u) << "no read-modify-write transfer committed";
  EXPECT_GT(out.refused, 0u) << "no transfer was refused: the non-negative rule was never exercised";
  EXPECT_EQ(out.negative_reads, 0u) << "a transaction read a negative balance: " << out.first_negative;
  EXPECT_EQ(unexpected, 0u) << out.first_unexpected;
  EXPECT_LE(out.max_ms, static_cast<double>(bound.count())) << "a Run took longer than its bound";

  // Every transaction ended by itself (its finishing, done by the Database's finisher after
  // the acknowledgement, drained by Flush): nothing referenced, locked or open, even before a
  // collector pass; then a pass changes nothing.
  db.Flush();
  const stress::StoreAudit before = stress::AuditStore(*store, {kColl});
  EXPECT_TRUE(before.clean()) << "before the collector pass: " << before.ToString();
  EXPECT_EQ(stress::Settle(store), 0u);
  const stress::StoreAudit after = stress::AuditStore(*store, {kColl});

  EXPECT_TRUE(after.clean()) << "after the collector pass: " << after.ToString();
  // The ledgers: each balance moved by exactly the committed transfers, and each document
  // counts every one of them. A lost update (of an Update or an Adjust) breaks this.
  std::int64_t bal[2] = {0, 0}, ops[2] = {0, 0};
  for (int d : {0, 1}) {
    auto r = db.Read(kColl, kDocs[d]);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const boost::json::value* b = r->doc.if_contains("balance");
    const boost::json::value* n = r->doc.if_contains("ops");
    ASSERT_TRUE(b != nullptr && b->is_int64() && n != nullptr && n->is_int64()) << boost::json::serialize(r->doc);
    bal[d] = b->get_int64();
    ops[d] = n->get_int64();
  }
  std::printf("[stress] %s: final balances %lld %lld (ledger: %lld %lld), transfers counted %lld %lld (committed %llu)\n",
              name, static_cast<long long>(bal[0]), static_cast<long long>(bal[1]),
              static_cast<long long>(kInitial[0] - out.net), static_cast<long long>(kInitial[1] + out.net),
              static_cast<long long>(ops[0]), static_cast<long long>(ops[1]), static_cast<unsigned long long>(out.committed));
  EXPECT_EQ(bal[0], kInitial[0] - out.net) << "balance differs from the committed transfers (lost update?)";
  EXPECT_EQ(bal[1], kInitial[1] + out.net) << "balance differs from the committed transfers (lost update?)";
  EXPECT_EQ(ops[0], static_cast<std::int64_t>(out.committed)) << "transfer count differs (lost update?)";
  EXPECT_EQ(ops[1], static_cast<std::int64_t>(out.committed)) << "transfer count differs (lost update?)";
  EXPECT_GE(bal[0], 0);
  EXPECT_GE(bal[1], 0);
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
