// tests/redis/redis_fault_test.cpp — litetx on Redis servers that fail under load: a server
// killed with SIGKILL and restarted from its append-only file, a cluster master killed and
// replaced by its replica (with WAIT), slots moved between masters while transfers run, and a
// server stopped (SIGSTOP) for longer than the store's command timeout.
//
// Every test runs the bank of tools/demo_bank.h: 20 accounts, transfers on worker threads (each
// one transaction: adjust the payer, adjust the payee, insert a ledger document), and a
// collector in the same process. The workers sort every attempt by what Commit said: acked
// (OK), failed (any code but kUnknown: rolled back, certainly not applied) or in doubt
// (kUnknown). The test thread advances an epoch at each fault event, and the workers count
// acks and errors per epoch, so that a test can assert that the fault landed mid-workload:
// transfers acked before it and after it, and operations that failed while it lasted. At the
// end the workers stop, a collector that treats every transaction as abandoned runs until no
// ActiveTransaction record is open, and the audit of demo_bank.h checks the total, each
// balance against the ledger, every acked transfer present, every failed one absent, every
// ledger document a reported attempt, and nothing held or open.
//
// Each test starts its own servers on free ports (a few seconds for a cluster) and is skipped
// with a message when redis-server or redis-cli is not installed. Built as its own executable,
// litetx_redis_fault_tests (tests/CMakeLists.txt), each test registered with ctest.
//
// Thread safety: the workers share one Database; the tally is guarded by its mutex.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "litetx/litetx.h"
#include "litetx/redis_cluster_store.h"
#include "litetx/redis_store.h"
#include "redis/redis_cluster.h"
#include "redis/redis_server.h"
#include "tools/demo_bank.h"

namespace ltxtest {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using litetx::Code;
using litetx::bank::AuditOptions;
using litetx::bank::AuditReport;
using litetx::bank::BankConfig;

long long MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string MissingTools() {
  if (RedisServerPath().empty()) {
    return "redis-server not found in PATH (Debian: apt-get install redis-server); the Redis "
           "fault tests are not run";
  }
  if (RedisCliPath().empty()) {
    return "redis-cli not found in PATH (Debian: apt-get install redis-tools); the Redis fault "
           "tests are not run";
  }
  return {};
}

BankConfig Bank() {
  BankConfig cfg;
  cfg.accounts_collection = "fault.accounts";
  cfg.ledger_collection = "fault.ledger";
  cfg.prefix = "f.";
  cfg.accounts = 20;
  cfg.initial_balance = 1000;
  cfg.max_amount = 100;
  return cfg;
}

// Short backoffs (the faults last a fraction of a second), and a bound on active rollback so
// that a test that fails while its server is down still ends: what a rollback leaves is then
// the collector's, and the transaction is still not applied.
litetx::Options DbOptions(std::chrono::milliseconds lease = 5s, int max_attempts = 4) {
  litetx::Options o;
  o.lease = lease;
  o.max_attempts = max_attempts;
  o.retry_backoff = {5ms, 100ms};
  o.busy_timeout = 500ms;
  o.rollback_timeout = 10s;
  return o;
}

litetx::CollectorOptions GcOptions(const BankConfig& cfg, std::chrono::milliseconds interval,
                                   std::chrono::milliseconds older_than) {
  litetx::CollectorOptions o;
  o.engine = DbOptions();
  o.interval = interval;
  o.older_than = older_than;
  o.collections = {cfg.accounts_collection, cfg.ledger_collection};
  o.sweep_budget = 0;
  return o;
}

bool IsOutageError(Code c) { return c == Code::kUnavailable || c == Code::kUnknown; }

// What the workers saw. Every transfer attempt is in exactly one of acked, failed and in_doubt
// (its ledger id); counts are kept per epoch, which the test thread advances at fault events.
class Tally {
 public:
  struct Epoch {
    std::uint64_t acks = 0;
    std::uint64_t outage_errors = 0;  // kUnavailable / kUnknown from any call of a worker
    std::map<Code, std::uint64_t> commit_codes;  // non-OK Commit results
  };

  int epoch() {
    std::lock_guard<std::mutex> l(mu_);
    return epoch_;
  }
  int Advance() {
    std::lock_guard<std::mutex> l(mu_);
    return ++epoch_;
  }

  void Ack(const std::string& ledger_id) {
    std::lock_guard<std::mutex> l(mu_);
    acked_.push_back(ledger_id);
    ++epochs_[epoch_].acks;
    cv_.notify_all();
  }
  // A non-OK Commit; `ledger_id` goes to failed or, for kUnknown, in doubt.
  void CommitFailed(const std::string& ledger_id, const litetx::Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    Epoch& e = epochs_[epoch_];
    ++e.commit_codes[s.code()];
    if (IsOutageError(s.code())) ++e.outage_errors;
    if (s.code() == Code::kUnknown) {
      in_doubt_.push_back(ledger_id);
      in_doubt_txns_.push_back(s.txn_id());
    } else {
      failed_.push_back(ledger_id);
    }
    cv_.notify_all();
  }
  // A read (planning, settling) that failed.
  void CallFailed(Code c) {
    std::lock_guard<std::mutex> l(mu_);
    if (IsOutageError(c)) ++epochs_[epoch_].outage_errors;
    ++call_codes_[c];
    cv_.notify_all();
  }
  void Settled(litetx::TxnOutcome o) {
    std::lock_guard<std::mutex> l(mu_);
    ++settled_[o];
  }
  void Unexpected(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    if (unexpected_.size() < 20) unexpected_.push_back(what);
  }

  // Waits until epoch `e` counts at least `n` acks (true) or `timeout` passes (false).
  bool WaitAcks(int e, std::uint64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return epochs_[e].acks >= n; });
  }
  bool WaitOutageErrors(int e, std::uint64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return epochs_[e].outage_errors >= n; });
  }

  Epoch At(int e) {
    std::lock_guard<std::mutex> l(mu_);
    return epochs_[e];
  }
  std::uint64_t CommitsWith(Code c) {
    std::lock_guard<std::mutex> l(mu_);
    std::uint64_t n = 0;
    for (auto& [e, counts] : epochs_) n += counts.commit_codes[c];
    return n;
  }
  std::vector<std::string> acked() {
    std::lock_guard<std::mutex> l(mu_);
    return acked_;
  }
  std::vector<std::string> failed() {
    std::lock_guard<std::mutex> l(mu_);
    return failed_;
  }
  std::vector<std::string> in_doubt() {
    std::lock_guard<std::mutex> l(mu_);
    return in_doubt_;
  }
  std::vector<std::string> in_doubt_txns() {
    std::lock_guard<std::mutex> l(mu_);
    return in_doubt_txns_;
  }
  std::map<litetx::TxnOutcome, std::uint64_t> settled() {
    std::lock_guard<std::mutex> l(mu_);
    return settled_;
  }
  std::vector<std::string> unexpected() {
    std::lock_guard<std::mutex> l(mu_);
    return unexpected_;
  }

  // "acks 412, failed 12, in doubt 3; commit codes {conflict 9, unavailable 3, unknown 3};
  // other calls {unavailable 230}".
  std::string Summary() {
    std::lock_guard<std::mutex> l(mu_);
    std::map<Code, std::uint64_t> commit;
    for (auto& [e, counts] : epochs_) {
      for (auto& [c, n] : counts.commit_codes) commit[c] += n;
    }
    auto codes = [](const std::map<Code, std::uint64_t>& m) {
      std::string s = "{";
      for (auto& [c, n] : m) {
        if (s.size() > 1) s += ", ";
        s += std::string(litetx::CodeName(c)) + " " + std::to_string(n);
      }
      return s + "}";
    };
    return "acks " + std::to_string(acked_.size()) + ", failed " + std::to_string(failed_.size()) +
           ", in doubt " + std::to_string(in_doubt_.size()) + "; commit codes " + codes(commit) +
           "; failed reads " + codes(call_codes_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int epoch_ = 0;
  std::map<int, Epoch> epochs_;
  std::vector<std::string> acked_, failed_, in_doubt_, in_doubt_txns_;
  std::map<Code, std::uint64_t> call_codes_;
  std::map<litetx::TxnOutcome, std::uint64_t> settled_;
  std::vector<std::string> unexpected_;
};

// What a worker does with a commit that returned kUnknown.
enum class OnUnknown {
  kMoveOn,          // leave it in doubt and start another transfer
  kSettleThenRetry  // wait for Database::Outcome; committed: done; aborted: retry the transfer
};

// Ledger ids: "<logical transfer>.<attempt>", the logical transfer "w<thread>.<n>" (workers) or
// "h.<n>" (transfers the test thread runs).
std::string LogicalOf(const std::string& ledger_id) {
  return ledger_id.substr(0, ledger_id.rfind('.'));
}

// Polls the outcome of `txn` until it is committed or aborted (a collector settles a pending
// one once its lease has passed), at most `limit`. kPending if it never was.
litetx::TxnOutcome WaitForOutcome(litetx::Database& db, const std::string& txn, Tally& tally,
                                  std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  for (int i = 0; i < 10'000 && Clock::now() < end; ++i) {
    auto o = db.Outcome(txn);
    if (o.ok() && (*o == litetx::TxnOutcome::kCommitted || *o == litetx::TxnOutcome::kAborted)) {
      return *o;
    }
    if (!o.ok()) tally.CallFailed(o.code());
    std::this_thread::sleep_for(10ms);  // nothing to wait on: the record changes in the store
  }
  return litetx::TxnOutcome::kPending;
}

// Bank transfers on `threads` threads until Stop (or a 60 s safety deadline). Stops and joins
// in its destructor, so that a failed assertion in the test does not leave threads running.
class Workers {
 public:
  Workers(litetx::Database& db, const BankConfig& cfg, Tally& tally, OnUnknown on_unknown,
          int threads, std::uint64_t seed)
      : db_(db), cfg_(cfg), tally_(tally), on_unknown_(on_unknown) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i, seed] { Run(i, seed + 0x9e3779b97f4a7c15ULL * (i + 1)); });
    }
  }
  ~Workers() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Run(int thread, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const auto deadline = Clock::now() + 60s;
    for (int n = 1; !stop_ && Clock::now() < deadline; ++n) {
      const std::string logical = "w" + std::to_string(thread) + "." + std::to_string(n);
      int attempt = 1;
      auto plan = litetx::bank::PlanTransfer(db_, cfg_, rng, logical + ".1");
      if (!plan.ok()) {
        tally_.CallFailed(plan.code());
        if (IsOutageError(plan.code())) {
          std::this_thread::sleep_for(2ms);  // backoff while the server is away
        } else if (plan.code() != Code::kBusy) {
          tally_.Unexpected("planning " + logical + ": " + plan.status().ToString());
          return;
        }
        continue;
      }
      litetx::bank::Transfer t = std::move(*plan);
      for (int tries = 0; tries < 20; ++tries) {
        auto r = db_.Commit(litetx::bank::TransferTxn(cfg_, t));
        if (r.ok()) {
          tally_.Ack(t.ledger_id);
          break;
        }
        const litetx::Status& s = r.status();
        if (s.code() != Code::kUnknown && !s.IsRetryableTransaction() && !s.IsRetryableCall()) {
          tally_.Unexpected("transfer " + t.ledger_id + ": " + s.ToString());
          return;
        }
        tally_.CommitFailed(t.ledger_id, s);
        if (s.code() == Code::kUnknown) {
          if (on_unknown_ == OnUnknown::kMoveOn) break;
          const litetx::TxnOutcome o = WaitForOutcome(db_, s.txn_id(), tally_, 15s);
          tally_.Settled(o);
          if (o != litetx::TxnOutcome::kAborted) break;  // applied, or never settled
        }
        t.ledger_id = logical + "." + std::to_string(++attempt);
        litetx::Status again = litetx::bank::RefreshTransfer(db_, cfg_, t);
        if (!again.ok()) {
          tally_.CallFailed(again.code());
          if (again.code() != Code::kFailedPrecondition && !IsOutageError(again.code())) {
            tally_.Unexpected("re-reading the payer of " + t.ledger_id + ": " + again.ToString());
            return;
          }
          break;
        }
      }
    }
  }

  litetx::Database& db_;
  const BankConfig& cfg_;
  Tally& tally_;
  const OnUnknown on_unknown_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// One transfer of 1 between accounts `a` and `b` (whichever has money pays), run by the test
// thread and counted in `tally`; returns Commit's status (or the failed read's).
litetx::Status TransferBetween(litetx::Database& db, const BankConfig& cfg, int a, int b,
                               const std::string& ledger_id, Tally& tally) {
  litetx::bank::Transfer t;
  t.ledger_id = ledger_id;
  t.from = a;
  t.to = b;
  t.amount = 1;
  litetx::Status s = litetx::bank::RefreshTransfer(db, cfg, t);
  if (s.code() == Code::kFailedPrecondition) {
    std::swap(t.from, t.to);
    s = litetx::bank::RefreshTransfer(db, cfg, t);
  }
  if (!s.ok()) {
    tally.CallFailed(s.code());
    return s;
  }
  auto r = db.Commit(litetx::bank::TransferTxn(cfg, t));
  if (r.ok()) {
    tally.Ack(t.ledger_id);
    return litetx::Status::Ok();
  }
  tally.CommitFailed(t.ledger_id, r.status());
  return r.status();
}

struct SettleResult {
  std::uint64_t open_before = 0;  // ActiveTransaction records open when the workers stopped
  int runs = 0;
  litetx::CollectorStats stats;
  std::string error;  // non-empty: records stayed open or could not be counted
};

// Runs a collector that treats every transaction as abandoned (every coordinator has returned)
// until no record is open (at most 50 runs).
SettleResult SettleAll(const std::shared_ptr<litetx::Store>& store, const BankConfig& cfg) {
  SettleResult r;
  litetx::Collector gc(store, GcOptions(cfg, 1s, 1ms));
  for (; r.runs <= 50; ++r.runs) {
    auto open = litetx::bank::OpenRecords(*store, 0);
    if (!open.ok()) {
      r.error = "counting open records: " + open.status().ToString();
    } else {
      if (r.runs == 0) r.open_before = *open;
      if (*open == 0) {
        r.error.clear();
        r.stats = gc.stats();
        return r;
      }
      r.error = std::to_string(*open) + " records still open";
    }
    (void)gc.RunOnce();  // failures are counted in its stats and retried by the next run
  }
  r.stats = gc.stats();
  return r;
}

std::string Describe(const AuditReport& r) {
  std::string s = std::to_string(r.error_count) + " violation(s):";
  for (const auto& e : r.errors) s += "\n  " + e;
  return s;
}

// The audit of every attempt the tally reports (only_reported: a ledger document nobody
// reported is an error).
AuditReport AuditAll(const std::shared_ptr<litetx::Store>& store, const BankConfig& cfg,
                     Tally& tally) {
  AuditOptions ao;
  ao.acked = tally.acked();
  ao.failed = tally.failed();
  ao.in_doubt = tally.in_doubt();
  ao.only_reported = true;
  return litetx::bank::Audit(store, cfg, ao);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

// The store key of document `id` of `collection` (docs/redis.md, "Stored format").
std::string DocumentKey(const std::string& prefix, const std::string& collection,
                        const std::string& id, std::size_t buckets) {
  return prefix + "{" + collection + ":" +
         std::to_string(litetx::RedisStore::BucketOf(id, buckets)) + "}d:" + id;
}

// ---------------------------------------------------------------------------------------------
// 1. kill -9 of a server with appendfsync always, three times, while transfers run.
//
// Epochs: 2c is the run before kill c (and after restart c-1), 2c+1 the outage c. The workers
// keep using the store they started with: it replaces its dead connections and reloads its
// scripts (NOSCRIPT) by itself once the server is back. After each restart the test also
// opens a fresh store on the server, which must find the format marker the AOF replayed, and
// the last of those stores is the one the final collector and audit use.
TEST(RedisFaultTest, KillNineWithAppendfsyncAlways) {
  if (const std::string m = MissingTools(); !m.empty()) GTEST_SKIP() << m;
  const auto t0 = Clock::now();
  RedisServer server;
  RedisServerOptions so;
  so.appendonly = true;
  so.appendfsync = "always";
  ASSERT_EQ(server.Start(so), "");
  litetx::RedisOptions ro;
  ro.port = server.port();
  ro.prefix = "kill9:";
  ro.connect_timeout = 500ms;
  auto opened = litetx::RedisStore::Open(ro);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<litetx::Store> store = *opened;
  const BankConfig cfg = Bank();
  litetx::Database db(store, DbOptions());
  ASSERT_TRUE(litetx::bank::CreateAccounts(db, cfg).ok());

  Tally tally;
  litetx::Collector gc(store, GcOptions(cfg, 50ms, 0ms));
  gc.Start();
  constexpr int kCycles = 3;
  constexpr std::uint64_t kAcksPerPhase = 30;
  std::shared_ptr<litetx::Store> reopened;
  {
    Workers workers(db, cfg, tally, OnUnknown::kMoveOn, 4, 1);
    for (int c = 0; c < kCycles; ++c) {
      ASSERT_TRUE(tally.WaitAcks(2 * c, kAcksPerPhase, 10s))
          << "cycle " << c << ": no " << kAcksPerPhase << " acks before the kill; "
          << tally.Summary();
      const int outage = tally.Advance();
      server.Kill9();
      ASSERT_TRUE(tally.WaitOutageErrors(outage, 1, 5s))
          << "cycle " << c << ": the workers saw no error while the server was down";
      ASSERT_EQ(server.Restart(), "");
      auto again = litetx::RedisStore::Open(ro);
      ASSERT_TRUE(again.ok()) << "cycle " << c << ": " << again.status().ToString();
      reopened = *again;
      tally.Advance();
    }
    ASSERT_TRUE(tally.WaitAcks(2 * kCycles, kAcksPerPhase, 10s))
        << "no acks after the last restart; " << tally.Summary();
    workers.Stop();
  }
  gc.Stop();
  const std::vector<std::string> unexpected = tally.unexpected();
  EXPECT_TRUE(unexpected.empty()) << Join(unexpected);

  const SettleResult settled = SettleAll(reopened, cfg);
  ASSERT_EQ(settled.error, "");
  const AuditReport audit = AuditAll(reopened, cfg, tally);
  EXPECT_TRUE(audit.ok()) << Describe(audit);
  EXPECT_EQ(audit.total, audit.expected_total);
  EXPECT_EQ(audit.open_records, 0u);
  EXPECT_EQ(audit.held_documents, 0u);
  EXPECT_EQ(audit.acked_checked, tally.acked().size());
  EXPECT_EQ(audit.failed_checked, tally.failed().size());

  std::printf("[redis faults] kill -9 x%d (appendfsync always): %s\n", kCycles,
              tally.Summary().c_str());
  std::uint64_t interrupted_commits = 0;
  for (int c = 0; c < kCycles; ++c) {
    const Tally::Epoch before = tally.At(2 * c), during = tally.At(2 * c + 1),
                       after = tally.At(2 * c + 2);
    std::printf("[redis faults]   kill %d: acks before %llu, errors while down %llu "
                "(acks %llu), acks after the restart %llu\n",
                c + 1, static_cast<unsigned long long>(before.acks),
                static_cast<unsigned long long>(during.outage_errors),
                static_cast<unsigned long long>(during.acks),
                static_cast<unsigned long long>(after.acks));
    EXPECT_GE(before.acks, kAcksPerPhase) << "kill " << c + 1;
    EXPECT_GE(during.outage_errors, 1u) << "kill " << c + 1;
    EXPECT_GE(after.acks, 1u) << "kill " << c + 1;
    for (const int e : {2 * c + 1, 2 * c + 2}) {
      Tally::Epoch at = tally.At(e);
      interrupted_commits += at.commit_codes[Code::kUnavailable] + at.commit_codes[Code::kUnknown];
    }
  }
  // The kills landed inside commits, not only between them.
  EXPECT_GE(interrupted_commits, 1u);
  std::printf("[redis faults]   commits failed by the kills %llu; open records settled %llu "
              "(finished %llu, reversed %llu); in doubt applied %llu, not applied %llu; "
              "ledger %llu; %lld ms\n",
              static_cast<unsigned long long>(interrupted_commits),
              static_cast<unsigned long long>(settled.open_before),
              static_cast<unsigned long long>(settled.stats.finished),
              static_cast<unsigned long long>(settled.stats.reversed),
              static_cast<unsigned long long>(audit.in_doubt_applied),
              static_cast<unsigned long long>(audit.in_doubt_not_applied),
              static_cast<unsigned long long>(audit.ledger_docs), MsSince(t0));
}

}  // namespace
}  // namespace ltxtest
