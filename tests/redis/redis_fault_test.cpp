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
#include <functional>
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
  o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
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
    std::uint64_t outage_errors = 0;  // kUnavailable / kUnknown returned to a worker
    std::uint64_t store_errors = 0;   // kUnavailable / kUnknown from the store (ObservedStore)
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
  // A store call that failed with kUnavailable or kUnknown (the engine may have retried it).
  void StoreFailed() {
    std::lock_guard<std::mutex> l(mu_);
    ++epochs_[epoch_].store_errors;
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
  bool WaitStoreErrors(int e, std::uint64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return epochs_[e].store_errors >= n; });
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
    std::uint64_t store_errors = 0;
    for (auto& [e, counts] : epochs_) store_errors += counts.store_errors;
    return "acks " + std::to_string(acked_.size()) + ", failed " + std::to_string(failed_.size()) +
           ", in doubt " + std::to_string(in_doubt_.size()) + "; commit codes " + codes(commit) +
           "; failed reads " + codes(call_codes_) + "; store calls failed " +
           std::to_string(store_errors);
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

// Forwards to a store and tells the tally of every call that failed with kUnavailable or
// kUnknown: the failures the engine met, whether or not its retries hid them from the workers.
class ObservedStore final : public litetx::ForwardingStore {
 public:
  ObservedStore(std::shared_ptr<litetx::Store> target, Tally& tally)
      : ForwardingStore(std::move(target)), tally_(tally) {}

  litetx::Result<std::optional<litetx::StoredDocument>> Get(const litetx::Key& key) override {
    return Seen(ForwardingStore::Get(key));
  }
  litetx::Result<litetx::Revision> Create(const litetx::Key& key,
                                          const boost::json::object& value) override {
    return Seen(ForwardingStore::Create(key, value));
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& key, litetx::Revision expected,
                                           const boost::json::object& value) override {
    if (flip_armed_.load() && IsCommitFlip(key, value) && flip_armed_.exchange(false)) {
      on_flip_();
    }
    return Seen(ForwardingStore::Replace(key, expected, value));
  }
  litetx::Status Erase(const litetx::Key& key, litetx::Revision expected) override {
    litetx::Status s = ForwardingStore::Erase(key, expected);
    if (IsOutageError(s.code())) tally_.StoreFailed();
    return s;
  }
  litetx::Result<litetx::ScanPage> Scan(std::string_view collection, std::string_view cursor,
                                        std::size_t limit) override {
    return Seen(ForwardingStore::Scan(collection, cursor, limit));
  }

  // Calls `fn` once, on the thread of the next commit flip (a transaction record written with
  // state committed), just before that write is sent.
  void OnNextFlip(std::function<void()> fn) {
    on_flip_ = std::move(fn);
    flip_armed_ = true;
  }
  void Disarm() { flip_armed_ = false; }

 private:
  static bool IsCommitFlip(const litetx::Key& key, const boost::json::object& value) {
    if (key.collection != litetx::kTransactionsCollection) return false;
    const boost::json::value* state = value.if_contains("state");
    return state != nullptr && state->is_string() && state->get_string() == "committed";
  }
  template <typename R>
  R Seen(R r) {
    if (IsOutageError(r.code())) tally_.StoreFailed();
    return r;
  }
  Tally& tally_;
  std::atomic<bool> flip_armed_{false};
  std::function<void()> on_flip_;  // written only while disarmed
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

// Waits (at most 100 ms) until process `pid` is stopped (state T in /proc/<pid>/stat), so that
// nothing sent after a SIGSTOP is run before it takes effect.
void WaitUntilStopped(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  for (int i = 0; i < 100; ++i) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return;
    char buf[256] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    const std::string stat(buf, n);
    const std::size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) return;
    if (stat[paren + 2] == 'T' || stat[paren + 2] == 't') return;
    std::this_thread::sleep_for(1ms);  // no notification exists for another process's state
  }
}

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
  // A parallel commit whose record create was lost (a failover) leaves holds without a record:
  // the sweep undoes them once their deadline (the record's first lease) has passed, which
  // older_than does not shorten. So the runs go on, paced, until no hold is left either, for at
  // most two leases after the first 50 runs.
  const auto holds_deadline = std::chrono::steady_clock::now() + 2 * DbOptions().lease;
  for (; r.runs <= 50 || std::chrono::steady_clock::now() < holds_deadline; ++r.runs) {
    auto open = litetx::bank::OpenRecords(*store, 0);
    if (!open.ok()) {
      r.error = "counting open records: " + open.status().ToString();
    } else {
      if (r.runs == 0) r.open_before = *open;
      const std::uint64_t held = litetx::bank::Audit(store, cfg, {}).held_documents;
      if (*open == 0 && held == 0) {
        r.error.clear();
        r.stats = gc.stats();
        return r;
      }
      r.error = std::to_string(*open) + " records still open, " + std::to_string(held) +
                " documents still held";
    }
    (void)gc.RunOnce();  // failures are counted in its stats and retried by the next run
    if (r.runs >= 50) std::this_thread::sleep_for(100ms);
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

// What every test ends with: no unexpected outcome, the collector settles every record, and
// the audit holds (total, ledger, every acked transfer present and every failed one absent,
// nothing held or open). Returns the audit for test-specific checks.
AuditReport SettleAndAudit(const std::shared_ptr<litetx::Store>& store, const BankConfig& cfg,
                           Tally& tally, SettleResult* settled_out) {
  const std::vector<std::string> unexpected = tally.unexpected();
  EXPECT_TRUE(unexpected.empty()) << Join(unexpected);
  const SettleResult settled = SettleAll(store, cfg);
  EXPECT_EQ(settled.error, "");
  *settled_out = settled;
  AuditReport audit = AuditAll(store, cfg, tally);
  EXPECT_TRUE(audit.ok()) << Describe(audit);
  EXPECT_EQ(audit.total, audit.expected_total);
  EXPECT_EQ(audit.open_records, 0u);
  EXPECT_EQ(audit.held_documents, 0u);
  EXPECT_EQ(audit.acked_checked, tally.acked().size());
  EXPECT_EQ(audit.failed_checked, tally.failed().size());
  return audit;
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
  Tally tally;
  auto observed = std::make_shared<ObservedStore>(store, tally);
  litetx::Database db(observed, DbOptions());
  ASSERT_TRUE(litetx::bank::CreateAccounts(db, cfg).ok());

  litetx::Collector gc(observed, GcOptions(cfg, 50ms, 0ms));
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
  SettleResult settled;
  db.Flush();  // the Database's finisher has finished every acknowledged transaction
  const AuditReport audit = SettleAndAudit(reopened, cfg, tally, &settled);

  std::printf("[redis faults] kill -9 x%d (appendfsync always): %s\n", kCycles,
              tally.Summary().c_str());
  std::uint64_t interrupted_commits = 0;
  for (int c = 0; c < kCycles; ++c) {
    const Tally::Epoch before = tally.At(2 * c), during = tally.At(2 * c + 1),
                       after = tally.At(2 * c + 2);
    std::printf("[redis faults]   kill %d: acks before %llu, while down store calls failed "
                "%llu, worker calls failed %llu (acks %llu), acks after the restart %llu\n",
                c + 1, static_cast<unsigned long long>(before.acks),
                static_cast<unsigned long long>(during.store_errors),
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

// ---------------------------------------------------------------------------------------------
// 2. A cluster master killed mid-workload and replaced by its replica, with WAIT 1.
//
// With wait_replicas = 1 a write is acknowledged only once the master's one replica has it, so
// the replica Redis promotes holds every write litetx was told about: no acknowledged transfer
// may be missing afterwards. (With wait_replicas = 0 the promoted replica can lack writes the
// dead master had acknowledged, and reuse their bucket revisions: an acked transfer can vanish
// or end half applied. Whether a given run loses anything depends on the replication lag at
// the moment of the kill, so that case is not tested here; docs/redis.md explains it.)
//
// The killed master comes back as the replica of the promoted one, as WAIT 1 on the promoted
// master's slots reports kUnknown until it has a replica again. Epochs: 0 before the kill,
// 1 from the kill until the failover and the restart as a replica are done, 2 after.
TEST(RedisFaultTest, FailoverWithWaitLosesNothingAcknowledged) {
  if (const std::string m = MissingTools(); !m.empty()) GTEST_SKIP() << m;
  const auto t0 = Clock::now();
  RedisCluster cluster;
  ASSERT_EQ(cluster.Start(3, 1), "");
  const long long started_ms = MsSince(t0);
  litetx::RedisClusterOptions co;
  co.seeds.clear();
  for (int p : cluster.SeedPorts()) co.seeds.push_back({"127.0.0.1", p});
  co.prefix = "failover:";
  co.wait_replicas = 1;
  // A command timeout shorter than the failover (the node timeout of 1 s, then the election),
  // so that the store gives up on the dead master's slots while the failover lasts and the
  // workers see the errors; with the default 2 s it would mostly wait the failover out.
  co.command_timeout = 800ms;
  co.wait_timeout = 300ms;
  co.connect_timeout = 300ms;
  auto opened = litetx::RedisClusterStore::Open(co);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<litetx::RedisClusterStore> cstore = *opened;
  std::shared_ptr<litetx::Store> store = cstore;
  const BankConfig cfg = Bank();
  Tally tally;
  auto observed = std::make_shared<ObservedStore>(store, tally);
  litetx::Database db(observed, DbOptions());
  ASSERT_TRUE(litetx::bank::CreateAccounts(db, cfg).ok());

  // The victim: the master of account 0's slot; count the accounts it serves.
  const int slot0 = litetx::RedisClusterStore::SlotOf(
      DocumentKey(co.prefix, cfg.accounts_collection, litetx::bank::AccountId(cfg, 0), co.buckets));
  const int victim = cluster.MasterOfSlot(slot0);
  ASSERT_GT(victim, 0);
  int victim_accounts = 0;
  for (int i = 0; i < cfg.accounts; ++i) {
    const int slot = litetx::RedisClusterStore::SlotOf(DocumentKey(
        co.prefix, cfg.accounts_collection, litetx::bank::AccountId(cfg, i), co.buckets));
    if (cluster.MasterOfSlot(slot) == victim) ++victim_accounts;
  }

  litetx::Collector gc(observed, GcOptions(cfg, 50ms, 0ms));
  gc.Start();
  constexpr std::uint64_t kAcks = 30;
  std::uint64_t refreshes_before = 0, refreshes_after = 0;
  int promoted = -1;
  long long failover_ms = 0;
  {
    Workers workers(db, cfg, tally, OnUnknown::kMoveOn, 4, 2);
    ASSERT_TRUE(tally.WaitAcks(0, kAcks, 10s)) << tally.Summary();
    refreshes_before = cstore->stats().topology_refreshes;
    const int down = tally.Advance();
    const auto k0 = Clock::now();
    ASSERT_EQ(cluster.KillMasterAndWaitForFailover(victim, true, &promoted), "");
    failover_ms = MsSince(k0);
    ASSERT_EQ(tally.epoch(), down);
    tally.Advance();
    ASSERT_TRUE(tally.WaitAcks(2, kAcks, 15s)) << "no acks after the failover; " << tally.Summary();
    workers.Stop();
    refreshes_after = cstore->stats().topology_refreshes;
  }
  gc.Stop();
  EXPECT_EQ(cluster.MasterOfSlot(slot0), promoted);
  SettleResult settled;
  db.Flush();  // the Database's finisher has finished every acknowledged transaction
  const AuditReport audit = SettleAndAudit(store, cfg, tally, &settled);

  const Tally::Epoch before = tally.At(0), during = tally.At(1), after = tally.At(2);
  const litetx::RedisClusterStore::Stats st = cstore->stats();
  std::printf("[redis faults] failover (WAIT 1; cluster up in %lld ms): %s\n", started_ms,
              tally.Summary().c_str());
  std::printf("[redis faults]   master %d (%d of %d accounts) killed, replica %d promoted and "
              "the old master back as its replica in %lld ms; acks before %llu, during %llu "
              "(store calls failed %llu, worker calls failed %llu), after %llu\n",
              victim, victim_accounts, cfg.accounts, promoted, failover_ms,
              static_cast<unsigned long long>(before.acks),
              static_cast<unsigned long long>(during.acks),
              static_cast<unsigned long long>(during.store_errors),
              static_cast<unsigned long long>(during.outage_errors),
              static_cast<unsigned long long>(after.acks));
  std::printf("[redis faults]   topology refreshes %llu before the kill, %llu after; moved %llu, "
              "ask %llu, tryagain %llu; open records settled %llu; in doubt applied %llu, not "
              "applied %llu; %lld ms\n",
              static_cast<unsigned long long>(refreshes_before),
              static_cast<unsigned long long>(refreshes_after),
              static_cast<unsigned long long>(st.moved), static_cast<unsigned long long>(st.ask),
              static_cast<unsigned long long>(st.tryagain),
              static_cast<unsigned long long>(settled.open_before),
              static_cast<unsigned long long>(audit.in_doubt_applied),
              static_cast<unsigned long long>(audit.in_doubt_not_applied), MsSince(t0));
  EXPECT_GE(victim_accounts, 1);
  EXPECT_GE(before.acks, kAcks);
  EXPECT_GE(during.store_errors, 1u);
  EXPECT_GE(after.acks, kAcks);
  EXPECT_GT(refreshes_after, refreshes_before);
}

// ---------------------------------------------------------------------------------------------
// 3. Slots moved between masters while transfers run.
//
// The slots of four accounts that share a master are moved, one after the other, to another
// master (MoveSlot: IMPORTING / MIGRATING, the keys migrated, SETSLOT NODE). At each step of
// each move the test thread itself runs two transfers involving the moving account, so that
// the store meets the half-moved slot (ASK from the source once the keys are gone, MOVED after
// the slot is assigned) besides what the workers meet. Epoch 0: before and during the moves;
// 1: after. After the moves the workers must see no error, and then twenty transfers on the
// moved accounts, one at a time, must all commit at the first attempt.
TEST(RedisFaultTest, LiveReshardingLosesNothing) {
  if (const std::string m = MissingTools(); !m.empty()) GTEST_SKIP() << m;
  const auto t0 = Clock::now();
  RedisCluster cluster;
  ASSERT_EQ(cluster.Start(3, 0), "");
  const long long started_ms = MsSince(t0);
  litetx::RedisClusterOptions co;
  co.seeds.clear();
  for (int p : cluster.SeedPorts()) co.seeds.push_back({"127.0.0.1", p});
  co.prefix = "reshard:";
  auto opened = litetx::RedisClusterStore::Open(co);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<litetx::RedisClusterStore> cstore = *opened;
  std::shared_ptr<litetx::Store> store = cstore;
  const BankConfig cfg = Bank();
  Tally tally;
  auto observed = std::make_shared<ObservedStore>(store, tally);
  litetx::Database db(observed, DbOptions());
  ASSERT_TRUE(litetx::bank::CreateAccounts(db, cfg).ok());

  // Accounts whose slots the master of account 0 owns (one account per slot).
  auto slot_of = [&](int account) {
    return litetx::RedisClusterStore::SlotOf(DocumentKey(
        co.prefix, cfg.accounts_collection, litetx::bank::AccountId(cfg, account), co.buckets));
  };
  const int from = cluster.MasterOfSlot(slot_of(0));
  ASSERT_GT(from, 0);
  int to = -1;
  for (int m : cluster.MasterPorts()) {
    if (m != from) to = m;
  }
  ASSERT_GT(to, 0);
  std::vector<int> moving;  // account indexes
  std::set<int> slots;
  for (int i = 0; i < cfg.accounts && moving.size() < 4; ++i) {
    if (cluster.MasterOfSlot(slot_of(i)) == from && slots.insert(slot_of(i)).second) {
      moving.push_back(i);
    }
  }
  ASSERT_GE(moving.size(), 2u);

  litetx::Collector gc(observed, GcOptions(cfg, 50ms, 0ms));
  gc.Start();
  int hook_calls = 0, hook_n = 0;
  std::map<Code, std::uint64_t> hook_codes;
  std::uint64_t hook_acks = 0;
  long long moves_ms = 0;
  {
    Workers workers(db, cfg, tally, OnUnknown::kMoveOn, 4, 3);
    ASSERT_TRUE(tally.WaitAcks(0, 20, 10s)) << tally.Summary();
    const auto m0 = Clock::now();
    for (int account : moving) {
      const int other = account == 0 ? 1 : 0;
      const std::string why = cluster.MoveSlot(slot_of(account), from, to, [&](int) {
        ++hook_calls;
        for (int k = 0; k < 2; ++k) {
          const litetx::Status s = TransferBetween(db, cfg, account, other,
                                                   "h." + std::to_string(++hook_n) + ".1", tally);
          if (s.ok()) {
            ++hook_acks;
          } else {
            ++hook_codes[s.code()];
          }
        }
      });
      ASSERT_EQ(why, "") << "moving the slot of account " << account;
      ASSERT_EQ(cluster.MasterOfSlot(slot_of(account)), to);
    }
    moves_ms = MsSince(m0);
    tally.Advance();
    ASSERT_TRUE(tally.WaitAcks(1, 20, 10s)) << "no acks after the moves; " << tally.Summary();
    workers.Stop();
  }
  gc.Stop();
  const Tally::Epoch during = tally.At(0), after = tally.At(1);

  // After the moves, one transfer at a time on the moved accounts: each commits at once.
  std::vector<std::string> after_errors;
  for (int k = 0; k < 20; ++k) {
    const int a = moving[static_cast<std::size_t>(k) % moving.size()];
    const int b = moving[static_cast<std::size_t>(k + 1) % moving.size()];
    const litetx::Status s =
        TransferBetween(db, cfg, a, b, "h." + std::to_string(++hook_n) + ".1", tally);
    if (!s.ok()) after_errors.push_back(s.ToString());
  }
  EXPECT_TRUE(after_errors.empty()) << Join(after_errors);

  SettleResult settled;
  db.Flush();  // the Database's finisher has finished every acknowledged transaction
  const AuditReport audit = SettleAndAudit(store, cfg, tally, &settled);

  const litetx::RedisClusterStore::Stats st = cstore->stats();
  std::string codes;
  for (auto& [c, n] : hook_codes) codes += " " + std::string(litetx::CodeName(c)) + " " + std::to_string(n);
  std::printf("[redis faults] resharding (cluster up in %lld ms): %s\n", started_ms,
              tally.Summary().c_str());
  std::printf("[redis faults]   %zu slots moved %d -> %d in %lld ms; hook called %d times, its "
              "transfers acked %llu, failed {%s }; workers: acks during the moves %llu "
              "(calls failed %llu), after %llu (calls failed %llu, store calls failed %llu)\n",
              moving.size(), from, to, moves_ms, hook_calls,
              static_cast<unsigned long long>(hook_acks), codes.c_str(),
              static_cast<unsigned long long>(during.acks),
              static_cast<unsigned long long>(during.outage_errors),
              static_cast<unsigned long long>(after.acks),
              static_cast<unsigned long long>(after.outage_errors),
              static_cast<unsigned long long>(after.store_errors));
  std::printf("[redis faults]   moved %llu, ask %llu, tryagain %llu, topology refreshes %llu; "
              "open records settled %llu; %lld ms\n",
              static_cast<unsigned long long>(st.moved), static_cast<unsigned long long>(st.ask),
              static_cast<unsigned long long>(st.tryagain),
              static_cast<unsigned long long>(st.topology_refreshes),
              static_cast<unsigned long long>(settled.open_before), MsSince(t0));
  EXPECT_GT(st.moved + st.ask + st.tryagain, 0u);
  EXPECT_GT(st.ask, 0u);
  EXPECT_GT(st.moved, 0u);
  EXPECT_EQ(hook_calls, static_cast<int>(moving.size()) * 3);
  EXPECT_GE(hook_acks, 1u);
  EXPECT_EQ(after.outage_errors, 0u);
  EXPECT_EQ(after.store_errors, 0u);
  EXPECT_GE(after.acks, 20u);
}

// ---------------------------------------------------------------------------------------------
// 4. A server stopped (SIGSTOP) for 500 ms, longer than the store's 200 ms command timeout,
// while transfers run.
//
// The writes in flight fail with kUnknown at the store; the server runs them when it resumes,
// maybe after the engine has already retried or given up. A commit whose flip was among them
// returns kUnknown, and the worker does what a careful client does: it waits for the outcome
// (Database::Outcome; the collector settles a record its coordinator gave up once its lease
// has passed), counts the transfer as done if it committed, and retries it under a new ledger
// id only if it was aborted. So each logical transfer must be in the ledger at most once, and
// every in-doubt attempt must be in the ledger exactly when its outcome is committed. The
// pause is repeated (at least twice, at most 16 times) until some commit has returned kUnknown;
// all but the first start on the thread of a commit flip, just before it is sent. Epochs: even
// are running, odd are paused.
TEST(RedisFaultTest, PausedServerPastCommandTimeout) {
  if (const std::string m = MissingTools(); !m.empty()) GTEST_SKIP() << m;
  const auto t0 = Clock::now();
  RedisServer server;
  ASSERT_EQ(server.Start(), "");
  litetx::RedisOptions ro;
  ro.port = server.port();
  ro.prefix = "pause:";
  ro.command_timeout = 200ms;
  ro.connect_timeout = 200ms;
  ro.wait_timeout = 100ms;
  auto opened = litetx::RedisStore::Open(ro);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<litetx::Store> store = *opened;
  const BankConfig cfg = Bank();
  // One attempt per store call: a flip whose reply is lost (200 ms) and a read of the record
  // that times out too (200 ms) make the commit report kUnknown while the server is still
  // stopped; with more attempts the engine would outlast the pause and learn the outcome. A 1 s
  // lease lets the collector settle what a coordinator left open soon after the pause.
  Tally tally;
  auto observed = std::make_shared<ObservedStore>(store, tally);
  litetx::Database db(observed, DbOptions(1s, 1));
  ASSERT_TRUE(litetx::bank::CreateAccounts(db, cfg).ok());

  litetx::Collector gc(observed, GcOptions(cfg, 20ms, 0ms));
  gc.Start();
  // The first pause starts at a random moment, the others on the thread of a commit flip, just
  // before it is sent (so that the flip itself is caught; in the runs measured one in three to
  // all of them ended kUnknown; on a loaded machine 16 pauses once caught none). Pauses go on,
  // at least two and at most 40, until some commit has returned kUnknown.
  constexpr int kMaxPauses = 40;
  int pauses = 0, at_flip = 0;
  std::mutex flip_mu;
  std::condition_variable flip_cv;
  bool flip_paused = false;
  {
    Workers workers(db, cfg, tally, OnUnknown::kSettleThenRetry, 4, 4);
    for (; pauses < kMaxPauses && (pauses < 2 || tally.CommitsWith(Code::kUnknown) == 0);
         ++pauses) {
      ASSERT_TRUE(tally.WaitAcks(tally.epoch(), 10, 10s)) << tally.Summary();
      tally.Advance();
      if (pauses == 0) {
        server.Pause();
      } else {
        {
          std::lock_guard<std::mutex> l(flip_mu);
          flip_paused = false;
        }
        observed->OnNextFlip([&] {
          server.Pause();
          WaitUntilStopped(server.pid());
          std::lock_guard<std::mutex> l(flip_mu);
          flip_paused = true;
          flip_cv.notify_all();
        });
        std::unique_lock<std::mutex> l(flip_mu);
        if (flip_cv.wait_for(l, 5s, [&] { return flip_paused; })) {
          ++at_flip;
        } else {
          observed->Disarm();
          server.Pause();
        }
      }
      std::this_thread::sleep_for(500ms);  // the length of the fault, not a wait for an event
      server.Resume();
      tally.Advance();
      // Let the commits the pause caught return: the workers are past it once they have acked
      // again (a commit that returned kUnknown waits for its outcome first).
      ASSERT_TRUE(tally.WaitAcks(tally.epoch(), 10, 10s)) << tally.Summary();
    }
    workers.Stop();
  }
  gc.Stop();
  SettleResult settled;
  db.Flush();  // the Database's finisher has finished every acknowledged transaction
  const AuditReport audit = SettleAndAudit(store, cfg, tally, &settled);

  // Every in-doubt attempt: in the ledger exactly when its transaction committed.
  const std::vector<std::string> doubt = tally.in_doubt(), doubt_txns = tally.in_doubt_txns();
  ASSERT_EQ(doubt.size(), doubt_txns.size());
  std::vector<std::string> mismatches;
  std::uint64_t doubt_committed = 0, doubt_aborted = 0;
  for (std::size_t i = 0; i < doubt.size(); ++i) {
    auto o = db.Outcome(doubt_txns[i]);
    auto r = db.Read(cfg.ledger_collection, cfg.prefix + doubt[i]);
    if (!o.ok() || !r.ok()) {
      mismatches.push_back(doubt[i] + ": cannot read its outcome or ledger document");
      continue;
    }
    const bool present = r->state == litetx::DocumentState::kFound;
    if (*o == litetx::TxnOutcome::kCommitted) ++doubt_committed;
    if (*o == litetx::TxnOutcome::kAborted) ++doubt_aborted;
    if (present != (*o == litetx::TxnOutcome::kCommitted) ||
        (*o != litetx::TxnOutcome::kCommitted && *o != litetx::TxnOutcome::kAborted)) {
      mismatches.push_back(doubt[i] + ": outcome " + litetx::TxnOutcomeName(*o) +
                           (present ? ", in the ledger" : ", not in the ledger"));
    }
  }
  EXPECT_TRUE(mismatches.empty()) << Join(mismatches);

  // Each logical transfer applied at most once, over all its attempts.
  std::map<std::string, int> applied;
  std::uint64_t ledger_reads = 0;
  const std::vector<std::string> acked = tally.acked();
  for (const std::vector<std::string>* list : {&acked, &doubt}) {
    for (const auto& id : *list) {
      auto r = db.Read(cfg.ledger_collection, cfg.prefix + id);
      ASSERT_TRUE(r.ok()) << id << ": " << r.status().ToString();
      ++ledger_reads;
      if (r->state == litetx::DocumentState::kFound) ++applied[LogicalOf(id)];
    }
  }
  std::vector<std::string> twice;
  for (auto& [logical, n] : applied) {
    if (n > 1) twice.push_back(logical + " applied " + std::to_string(n) + " times");
  }
  EXPECT_TRUE(twice.empty()) << Join(twice);

  const std::uint64_t unknown = tally.CommitsWith(Code::kUnknown);
  std::uint64_t paused_errors = 0, paused_worker_errors = 0;
  for (int e = 1; e <= 2 * pauses; e += 2) {
    paused_errors += tally.At(e).store_errors;
    paused_worker_errors += tally.At(e).outage_errors;
  }
  auto settled_as = tally.settled();
  std::printf("[redis faults] pause (SIGSTOP 500 ms, command timeout 200 ms): %s\n",
              tally.Summary().c_str());
  std::printf("[redis faults]   %d pause(s) (%d at a flip); while paused store calls failed %llu, worker "
              "calls failed %llu; commits kUnknown %llu, "
              "settled by the workers as committed %llu, aborted %llu, unsettled %llu; at the "
              "end committed %llu, aborted %llu; %zu logical transfers applied, %llu ledger "
              "reads; open records settled %llu; %lld ms\n",
              pauses, at_flip, static_cast<unsigned long long>(paused_errors),
              static_cast<unsigned long long>(paused_worker_errors),
              static_cast<unsigned long long>(unknown),
              static_cast<unsigned long long>(settled_as[litetx::TxnOutcome::kCommitted]),
              static_cast<unsigned long long>(settled_as[litetx::TxnOutcome::kAborted]),
              static_cast<unsigned long long>(settled_as[litetx::TxnOutcome::kPending]),
              static_cast<unsigned long long>(doubt_committed),
              static_cast<unsigned long long>(doubt_aborted), applied.size(),
              static_cast<unsigned long long>(ledger_reads),
              static_cast<unsigned long long>(settled.open_before), MsSince(t0));
  EXPECT_GE(unknown, 1u) << "no commit returned kUnknown in " << pauses << " pauses";
  EXPECT_GE(paused_errors, 1u);
  EXPECT_EQ(doubt_committed + doubt_aborted, doubt.size());
}

}  // namespace
}  // namespace ltxtest
