// tests/stress/closed_economy_test.cpp — YCSB+T's Closed Economy Workload.
//
// 100 accounts of 100 each. Worker threads run read-modify-write transactions through
// Database::Run: read two accounts, then Update both balances with `set` to values computed
// from the reads (payer - 1, payee + 1); half of the picks fall on 10 hot accounts. The store
// injects rare transient failures (so some transactions roll back or report kUnavailable) and a
// collector runs. A validator thread meanwhile reads all 100 accounts in one serializable Run;
// each committed read must total 10000.
//
// Bounded by count, not time: the round ends once the validator has committed kValidations
// validations and the workers have started kValidations * kOpsPerValidation transactions. The
// workers may run at most kOpsPerValidation transactions ahead of the validations committed so
// far and then wait for the next one (a serializable read of 100 accounts commits only in a gap
// between transfers, which the workers would otherwise rarely leave on 2 busy cores or under
// ThreadSanitizer). A round that does not get there within 90 s fails.
// At the end, with every thread stopped and the store settled, the anomaly score |expected total
// - counted total| / operations (operations = committed transactions) must be exactly 0 and no
// balance negative. 20 validations and 2400 transactions in CI (well under a second natively);
// LITETX_LONG=1 runs 40 rounds of 200 validations, each on a fresh store.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "stress_util.h"

namespace {

using namespace std::chrono_literals;
using litetx::Code;
using litetx::Status;
using litetx::TxnContext;

constexpr int kAccounts = 100;
constexpr std::int64_t kInitial = 100;
constexpr std::int64_t kTotal = kAccounts * kInitial;
constexpr int kHot = 10;
constexpr std::uint64_t kOpsPerValidation = 120;
const std::string kColl = "stress.ce";

std::string Id(int i) { return "c" + std::to_string(i); }

// The balance of a read, or -1 if it has none (the caller reports it).
std::int64_t BalanceOf(const litetx::ReadResult& r) {
  const boost::json::value* b = r.doc.if_contains("balance");
  return r.state == litetx::DocumentState::kFound && b != nullptr && b->is_int64() ? b->get_int64() : -1;
}

struct Counters {
  std::atomic<std::uint64_t> ops{0}, attempts{0}, empty{0}, unavailable{0}, gave_up{0}, unexpected{0};
  std::atomic<std::uint64_t> validations{0}, validations_failed{0}, bad_validations{0};
  // Committed validations whose committed attempt saw transfers commit while it ran; attempts;
  // attempts whose reads did not total 10000 (each must fail to commit).
  std::atomic<std::uint64_t> validations_overlapped{0}, validation_attempts{0}, skewed_attempts{0};
};

// Lets the workers run at most kOpsPerValidation transactions ahead of the validations.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t issued = 0, validations = 0;
  bool done = false;

  // A worker's ticket for one more transaction; false when the round is over.
  bool Enter(const std::atomic<bool>& stop) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return stop || done || issued < (validations + 1) * kOpsPerValidation; });
    if (stop || done) return false;
    ++issued;
    return true;
  }
  // The validator committed one more; true once the round has reached its size.
  bool Validated(std::uint64_t target) {
    std::lock_guard<std::mutex> l(mu);
    ++validations;
    done = validations >= target && issued >= target * kOpsPerValidation;
    cv.notify_all();
    return done;
  }
  void Finish() {
    std::lock_guard<std::mutex> l(mu);
    done = true;
    cv.notify_all();
  }
};

// One round on a fresh store, of `target` validations.
void Round(std::uint64_t seed, std::uint64_t target) {
  auto base = std::make_shared<litetx::MemoryStore>();
  litetx::FaultOptions fo;
  fo.seed = seed;
  fo.transient_probability = 0.002;
  auto store = std::make_shared<litetx::FaultInjectingStore>(base, fo);
  litetx::Options opt;
  opt.lease = 2s;
  opt.retry_backoff = {1ms, 20ms};
  litetx::Database setup(base, opt);
  {
    litetx::Transaction txn;
    for (int i = 0; i < kAccounts; ++i) txn.Insert(kColl, Id(i), {{"balance", kInitial}});
    ASSERT_TRUE(setup.Commit(txn).ok());
  }
  litetx::Database db(store, opt);
  litetx::CollectorOptions co;
  co.engine = opt;
  co.interval = 50ms;
  litetx::Collector gc(base, co);
  gc.Start();
  litetx::RunOptions ro;
  ro.timeout = 3s;

  constexpr int kWorkers = 4;
  Counters c;
  std::string first_unexpected, first_bad;
  std::mutex mu;
  auto note = [&](std::string* where, const std::string& what) {
    std::lock_guard<std::mutex> l(mu);
    if (where->empty()) *where = what;
  };
  std::atomic<bool> stop{false};
  Gate gate;
  const stress::Ms cap = 90s;
  const auto started = stress::SteadyClock::now();
  stress::RunFor(
      kWorkers + 1,
      [&](int t) {
        if (t == kWorkers) {  // the validator
          litetx::RunOptions vo = ro;
          vo.serializable = true;
          while (!stop) {
            std::int64_t sum = 0;
            std::uint64_t ops_before = 0;
            auto r = db.Run(
                [&](TxnContext& tx) -> Status {
                  ++c.validation_attempts;
                  ops_before = c.ops.load();
                  sum = 0;
                  for (int i = 0; i < kAccounts; ++i) {
                    auto d = tx.Get(kColl, Id(i));
                    if (!d.ok()) return d.status();
                    sum += BalanceOf(*d);
                  }
                  if (sum != kTotal) ++c.skewed_attempts;
                  return Status::Ok();
                },
                vo);
            if (!r.ok()) {
              ++c.validations_failed;
              continue;
            }
            ++c.validations;
            if (c.ops.load() > ops_before) ++c.validations_overlapped;
            if (sum != kTotal) {
              ++c.bad_validations;
              note(&first_bad, "committed serializable read totalled " + std::to_string(sum));
            }
            if (gate.Validated(target)) break;
          }
          gate.Finish();  // wakes workers waiting at the gate when `stop` ended the round
          return;
        }
        std::mt19937_64 rng(seed * 7919 + static_cast<std::uint64_t>(t));
        std::uniform_int_distribution<int> any(0, kAccounts - 1), hot(0, kHot - 1);
        std::bernoulli_distribution pick_hot(0.5);
        while (gate.Enter(stop)) {
          const int from = pick_hot(rng) ? hot(rng) : any(rng);
          int to = from;
          while (to == from) to = pick_hot(rng) ? hot(rng) : any(rng);
          bool empty = false;
          auto r = db.Run(
              [&](TxnContext& tx) -> Status {
                empty = false;
                auto a = tx.Get(kColl, Id(from));
                if (!a.ok()) return a.status();
                auto b = tx.Get(kColl, Id(to));
                if (!b.ok()) return b.status();
                const std::int64_t x = BalanceOf(*a), y = BalanceOf(*b);
                if (x < 0 || y < 0) return Status::Corruption("bad account " + Id(from) + " or " + Id(to));
                if (x == 0) {
                  empty = true;
                  return Status::FailedPrecondition("payer has nothing");
                }
                if (Status s = tx.Update(kColl, Id(from), {{"balance", x - 1}}); !s.ok()) return s;
                return tx.Update(kColl, Id(to), {{"balance", y + 1}});
              },
              ro);
          if (r.ok()) {
            ++c.ops;
            c.attempts += static_cast<std::uint64_t>(r->attempts);
          } else if (r.code() == Code::kFailedPrecondition && empty) {
            ++c.empty;
          } else if (r.code() == Code::kUnavailable) {
            ++c.unavailable;
          } else if (r.status().IsRetryableTransaction()) {
            ++c.gave_up;
          } else {
            ++c.unexpected;
            note(&first_unexpected, r.status().ToString());
          }
        }
      },
      stop, cap, 60s, "closed-economy workers");
  const double secs = stress::Seconds(stress::SteadyClock::now() - started);
  gc.Stop();
  EXPECT_EQ(stress::Settle(base), 0u);
  const stress::StoreAudit sa = stress::AuditStore(*base, {kColl});
  EXPECT_TRUE(sa.clean()) << sa.ToString();

  litetx::Database reader(base, opt);
  std::int64_t counted = 0;
  int negative = 0;
  for (int i = 0; i < kAccounts; ++i) {
    auto r = reader.Read(kColl, Id(i));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::int64_t b = BalanceOf(*r);
    negative += b < 0 ? 1 : 0;
    counted += b;
  }
  const std::uint64_t ops = c.ops.load();
  const double score = ops > 0 ? static_cast<double>(counted > kTotal ? counted - kTotal : kTotal - counted) / static_cast<double>(ops) : 0.0;
  std::printf("[stress] closed-economy: %d accounts, %d threads, %.1f s: ops %llu (%.0f ops/s, abort rate %.3f "
              "retries per op), empty payer %llu, unavailable %llu, gave up %llu; validations committed %llu "
              "(%llu of them overlapping committed transfers; %llu attempts, %llu of which read a total other than "
              "10000), failed %llu; transient faults "
              "injected %llu; expected total %lld, counted %lld, anomaly score %.6f\n",
              kAccounts, kWorkers, secs, static_cast<unsigned long long>(ops), static_cast<double>(ops) / secs,
              ops > 0 ? static_cast<double>(c.attempts.load()) / static_cast<double>(ops) - 1 : 0.0,
              static_cast<unsigned long long>(c.empty.load()), static_cast<unsigned long long>(c.unavailable.load()),
              static_cast<unsigned long long>(c.gave_up.load()), static_cast<unsigned long long>(c.validations.load()),
              static_cast<unsigned long long>(c.validations_overlapped.load()),
              static_cast<unsigned long long>(c.validation_attempts.load()),
              static_cast<unsigned long long>(c.skewed_attempts.load()),
              static_cast<unsigned long long>(c.validations_failed.load()),
              static_cast<unsigned long long>(store->transient_faults()), static_cast<long long>(kTotal),
              static_cast<long long>(counted), score);
  // The round reached its size: the validator checked `target` committed serializable reads
  // against the transfers started meanwhile.
  EXPECT_GE(c.validations.load(), target) << "the validator did not commit " << target << " validations within "
                                          << stress::Seconds(cap) << " s";
  EXPECT_GE(gate.issued, target * kOpsPerValidation) << "the workers did not start their transfers within the cap";
  EXPECT_GE(ops, target * kOpsPerValidation * 9 / 10) << "too few transfers committed";
  EXPECT_GE(c.skewed_attempts.load(), 1u) << "no validation attempt read an inconsistent total: the serializable "
                                             "check at commit was never put to the test";
  EXPECT_GT(ops, 0u);
  EXPECT_EQ(counted, kTotal);
  EXPECT_EQ(score, 0.0);
  EXPECT_EQ(negative, 0);
  EXPECT_EQ(c.unexpected.load(), 0u) << first_unexpected;
  EXPECT_EQ(c.bad_validations.load(), 0u) << first_bad;
}

TEST(ClosedEconomy, AnomalyScoreIsZero) {
  const std::uint64_t seed = stress::Seed("closed-economy");
  const int rounds = stress::Rounds(40);
  const std::uint64_t validations = stress::Count(20, 200);
  for (int r = 0; r < rounds && !HasFailure(); ++r) Round(seed + static_cast<std::uint64_t>(r), validations);
}

}  // namespace
