// tools/cmd_demo.cpp — `litetx demo`: a bank under concurrent transfers and coordinator crashes,
// then an audit of what is left.
//
// The bank (tools/demo_bank.h) lives in the collections demo.accounts / demo.ledger of --store,
// under a fresh run id, so reruns on the same store need no clearing. --threads workers run
// random transfers for --duration; each transfer is one transaction (adjust the payer, adjust
// the payee, insert a ledger document). With probability --crash-rate a transfer's coordinator
// "crashes": it runs through its own Database on a FaultInjectingStore (CrashMode::kThrow) that
// throws SimulatedCrash right after a random one of the transaction's 2N+3 = 9 writes, and the
// worker abandons it without learning its outcome. A background Collector (interval 100 ms,
// lease --lease, default 1s) repairs those transactions while the others run; until then
// their accounts stay held, so workers pick pairs that are free right now and give up on a held
// account after 250 ms (kBusy) instead of the default 2 s. At the end the workers stop, the
// collector runs until no record of this run is open, and the audit checks conservation,
// balances against the ledger, that every acknowledged transfer is in the ledger and every
// failed attempt (rolled back) is not, that every ledger document of the run is an
// acknowledged or crashed/in-doubt transfer, and that no reference or record is left. JSON
// summary on stdout; exit 0 only if everything holds.
//
// SIGINT and SIGTERM (tools/signals.h) end the run early, alike: the workers stop after the
// transfer each is in, the collector settles what the crashes left, the audit runs and the
// summary is printed with "interrupted": true and "signal"; the exit code is then 130 (SIGINT)
// or 143 (SIGTERM) if the verification passed, 1 if it failed. A second signal exits at once
// with 130/143, unverified; the collector (`litetx gc`) settles what is left after the lease.
//
// Ownership: everything lives in RunDemo's frame; workers and the collector are joined there.
// Thread safety: workers share one Database (thread-safe) and atomic counters; each keeps its
// own lists of acknowledged, failed and in-doubt transfers, merged after the join.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tools/cli.h"
#include "tools/demo_bank.h"
#include "tools/signals.h"

namespace litetx::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct DemoFlags {
  int accounts = 100;
  int threads = 4;
  double duration_s = 10.0;
  double crash_rate = 0.02;
  std::uint64_t seed = 0;  // 0: random
  std::int64_t lease = 1000;  // milliseconds
  bool no_progress = false;
};

struct Counters {
  std::atomic<std::uint64_t> committed{0}, conflict{0}, busy{0}, aborted{0}, unavailable{0},
      unknown{0}, crashed{0}, dropped{0};
  std::uint64_t Retries() const { return conflict + busy + aborted + unavailable; }
};

// What one worker saw; merged after the join.
struct WorkerLog {
  std::vector<std::string> acked;     // ledger ids acknowledged as committed
  std::vector<std::string> in_doubt;  // crashed (or kUnknown) transfers
  std::vector<std::string> failed;    // attempts that failed and were rolled back
  std::string fatal;                  // an unexpected error that stopped the worker
};

struct Shared {
  const DemoFlags& flags;
  const bank::BankConfig& cfg;
  std::shared_ptr<Store> store;
  Options options;
  Database& db;
  Counters& counters;
  std::atomic<bool>& stop;
};

// Commits `t` through a coordinator that crashes after a random write of the transaction.
// Returns nullopt if it crashed.
std::optional<Result<CommitInfo>> CommitWithCrash(Shared& sh, const bank::Transfer& t,
                                                  std::mt19937_64& rng) {
  FaultOptions fo;
  fo.seed = rng();
  fo.crash_mode = CrashMode::kThrow;
  fo.crash_after_writes = std::uniform_int_distribution<std::uint64_t>(1, 2 * 3 + 3)(rng);
  Database crashing(std::make_shared<FaultInjectingStore>(sh.store, fo), sh.options);
  try {
    return crashing.Commit(bank::TransferTxn(sh.cfg, t));
  } catch (const SimulatedCrash&) {
    return std::nullopt;  // the coordinator is gone; the collector settles its transaction
  }
}

void Worker(Shared& sh, int index, WorkerLog& log) {
  std::mt19937_64 rng(sh.flags.seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(index));
  std::bernoulli_distribution crash(sh.flags.crash_rate);
  std::uint64_t seq = 0;
  auto next_id = [&] { return "t" + std::to_string(index) + "." + std::to_string(++seq); };
  while (!sh.stop) {
    auto plan = bank::PlanTransfer(sh.db, sh.cfg, rng, next_id());
    if (!plan.ok()) {
      if (plan.code() == Code::kUnavailable || plan.code() == Code::kBusy) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      log.fatal = "planning a transfer: " + plan.status().ToString();
      sh.stop = true;
      return;
    }
    bank::Transfer t = std::move(*plan);
    for (;;) {  // attempts of this transfer, each under a fresh ledger id
      std::optional<Result<CommitInfo>> r;
      if (crash(rng)) {
        r = CommitWithCrash(sh, t, rng);
        if (!r) {
          ++sh.counters.crashed;
          log.in_doubt.push_back(t.ledger_id);
          break;
        }
      } else {
        r = sh.db.Commit(bank::TransferTxn(sh.cfg, t));
      }
      const Status s = r->status();
      if (s.ok()) {
        ++sh.counters.committed;
        log.acked.push_back(t.ledger_id);
        break;
      }
      switch (s.code()) {
        case Code::kConflict: ++sh.counters.conflict; break;
        case Code::kBusy: ++sh.counters.busy; break;
        case Code::kAborted: ++sh.counters.aborted; break;
        case Code::kUnavailable: ++sh.counters.unavailable; break;
        case Code::kUnknown:  // decided in the store; the audit finds out which way
          ++sh.counters.unknown;
          log.in_doubt.push_back(t.ledger_id);
          break;
        default:
          log.fatal = "transfer " + t.ledger_id + ": " + s.ToString();
          sh.stop = true;
          return;
      }
      // Any failure but kUnknown rolled the attempt back: certainly not applied.
      if (s.code() != Code::kUnknown) log.failed.push_back(t.ledger_id);
      // After kBusy (a crashed transfer still holds an account until the collector repairs it)
      // try another pair instead of waiting on the same accounts again.
      if (s.code() == Code::kUnknown || s.code() == Code::kBusy || sh.stop) break;
      t.ledger_id = next_id();
      if (Status rs = bank::RefreshTransfer(sh.db, sh.cfg, t); !rs.ok()) {
        if (rs.code() != Code::kFailedPrecondition && rs.code() != Code::kUnavailable) {
          log.fatal = "re-reading a payer: " + rs.ToString();
          sh.stop = true;
          return;
        }
        ++sh.counters.dropped;  // the payer spent its money meanwhile (or the read failed)
        break;
      }
    }
  }
}

void DrawProgress(const Counters& c, double elapsed, double duration, bool tty, bool final) {
  const int width = 24;
  int filled = static_cast<int>(width * std::min(1.0, elapsed / duration));
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(width - filled), '.');
  const std::uint64_t committed = c.committed;
  std::fprintf(stderr,
               "%s[%s] %5.1fs/%.0fs  committed %llu  retries %llu (conflict %llu, busy %llu, "
               "aborted %llu, unavailable %llu)  crashed %llu  %.0f tx/s%s",
               tty ? "\r\033[K" : "", bar.c_str(), elapsed, duration,
               static_cast<unsigned long long>(committed),
               static_cast<unsigned long long>(c.Retries()),
               static_cast<unsigned long long>(c.conflict.load()),
               static_cast<unsigned long long>(c.busy.load()),
               static_cast<unsigned long long>(c.aborted.load()),
               static_cast<unsigned long long>(c.unavailable.load()),
               static_cast<unsigned long long>(c.crashed.load()),
               elapsed > 0 ? static_cast<double>(committed) / elapsed : 0.0,
               tty && !final ? "" : "\n");
  std::fflush(stderr);
}

// One human-readable line about the audit, on stderr next to the progress line.
void DrawVerdict(const bank::AuditReport& a, std::uint64_t crashed, const CollectorStats& st,
                 double settle_s) {
  std::fprintf(stderr,
               "collector: %llu crashed transfers finished, %llu rolled back (settled %.1fs "
               "after the workers stopped)\n",
               static_cast<unsigned long long>(st.finished),
               static_cast<unsigned long long>(st.reversed), settle_s);
  if (!a.ok()) {
    std::fprintf(stderr, "verification: FAILED, %llu violation(s)\n",
                 static_cast<unsigned long long>(a.error_count));
    return;
  }
  std::fprintf(stderr,
               "verification: ok: total %lld conserved; %llu ledger documents explain every "
               "balance; %llu acknowledged transfers all in the ledger, %llu failed attempts "
               "none; %llu crashed: %llu applied whole, %llu not at all; no reference or open "
               "record left\n",
               static_cast<long long>(a.total), static_cast<unsigned long long>(a.ledger_docs),
               static_cast<unsigned long long>(a.acked_checked),
               static_cast<unsigned long long>(a.failed_checked),
               static_cast<unsigned long long>(crashed),
               static_cast<unsigned long long>(a.in_doubt_applied),
               static_cast<unsigned long long>(a.in_doubt_not_applied));
}

int RunDemo(Context& ctx, DemoFlags flags) {
  CatchSignals();  // before the store, the collector and the workers start any thread
  if (flags.seed == 0) flags.seed = std::random_device{}() | 1ULL;
  int exit_code = kExitOk;
  std::shared_ptr<Store> store = OpenStore(ctx, &exit_code);
  if (!store) return exit_code;

  bank::BankConfig cfg;
  cfg.prefix = bank::NewRunPrefix(flags.seed);
  cfg.accounts = flags.accounts;
  Options options = EngineOptions(ctx);
  options.lease = std::chrono::milliseconds(flags.lease);
  // Accounts held by a crashed transfer stay held until the collector repairs it (one lease):
  // give up on them soon and move on to other accounts.
  options.busy_timeout = std::chrono::milliseconds(250);
  Database db(store, options);
  const std::int64_t started_ms = bank::NowMs();
  if (Status s = bank::CreateAccounts(db, cfg); !s.ok()) {
    return Fail(s.code() == Code::kUnavailable ? kExitStore : kExitFailed,
                "cannot create the demo accounts: " + s.ToString());
  }

  CollectorOptions gc_options;
  gc_options.engine = options;
  gc_options.interval = std::chrono::milliseconds(100);
  // Nobody asks for these outcomes later: erase the markers soon so that every run of the
  // collector does not scan thousands of them.
  gc_options.outcome_retention = std::chrono::seconds(5);
  Collector gc(store, gc_options);
  gc.Start();

  Counters counters;
  std::atomic<bool> stop{false};
  Shared shared{flags, cfg, store, options, db, counters, stop};
  std::vector<WorkerLog> logs(static_cast<std::size_t>(flags.threads));
  std::vector<std::thread> workers;
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const bool progress = !flags.no_progress;
  const auto start = Clock::now();
  for (int i = 0; i < flags.threads; ++i) {
    workers.emplace_back(Worker, std::ref(shared), i, std::ref(logs[static_cast<std::size_t>(i)]));
  }
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto last_draw = start;
  while (!stop && Interrupted() == 0 && elapsed() < flags.duration_s) {
    WaitForSignal(nullptr, std::chrono::milliseconds(50));
    const auto every = std::chrono::milliseconds(tty ? 250 : 1000);
    if (progress && Clock::now() - last_draw >= every) {
      last_draw = Clock::now();
      DrawProgress(counters, elapsed(), flags.duration_s, tty, false);
    }
  }
  stop = true;
  for (auto& w : workers) w.join();
  const double run_s = elapsed();
  if (progress && (tty || Clock::now() - last_draw > std::chrono::milliseconds(500))) {
    DrawProgress(counters, run_s, flags.duration_s, tty, true);
  }
  gc.Stop();

  // Settle: every coordinator of this run has stopped, so each of its records' GC timestamps
  // (at most one lease away) passes soon. Waiting for them instead of setting older_than
  // leaves any other process's live transactions on this store alone.
  const auto settle_start = Clock::now();
  const auto settle_deadline = settle_start + options.lease + std::chrono::seconds(10);
  std::uint64_t open = 0;
  for (;;) {
    (void)gc.RunOnce();
    auto o = bank::OpenRecords(*store, started_ms);
    open = o.ok() ? *o : 1;
    if (open == 0 || Clock::now() > settle_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double settle_s = std::chrono::duration<double>(Clock::now() - settle_start).count();

  bank::AuditOptions audit_options;
  audit_options.records_since_ms = started_ms;
  audit_options.only_reported = true;  // the run's ledger holds only what its workers reported
  std::string fatal;
  for (auto& log : logs) {
    audit_options.acked.insert(audit_options.acked.end(), log.acked.begin(), log.acked.end());
    audit_options.in_doubt.insert(audit_options.in_doubt.end(), log.in_doubt.begin(),
                                  log.in_doubt.end());
    audit_options.failed.insert(audit_options.failed.end(), log.failed.begin(), log.failed.end());
    if (fatal.empty()) fatal = log.fatal;
  }
  bank::AuditReport audit = bank::Audit(store, cfg, audit_options);
  const CollectorStats st = gc.stats();
  if (progress) DrawVerdict(audit, counters.crashed, st, settle_s);

  boost::json::object summary{
      {"store", ctx.store_uri},
      {"run", cfg.prefix.substr(0, cfg.prefix.size() - 1)},
      {"seed", flags.seed},
      {"accounts", flags.accounts},
      {"threads", flags.threads},
      {"elapsed_ms", static_cast<std::int64_t>(run_s * 1000)},
      {"interrupted", Interrupted() != 0},
      {"signal", Interrupted() != 0 ? boost::json::value(InterruptedName()) : nullptr},
      {"committed", counters.committed.load()},
      {"crashed", counters.crashed.load()},
      {"unknown", counters.unknown.load()},
      {"retries",
       {{"total", counters.Retries()},
        {"conflict", counters.conflict.load()},
        {"busy", counters.busy.load()},
        {"aborted", counters.aborted.load()},
        {"unavailable", counters.unavailable.load()}}},
      {"dropped", counters.dropped.load()},
      {"tx_per_s", run_s > 0 ? std::llround(static_cast<double>(counters.committed) / run_s) : 0},
      {"gc", {{"runs", st.runs}, {"finished", st.finished}, {"reversed", st.reversed},
              {"failed", st.failed},
              {"settle_ms", static_cast<std::int64_t>(settle_s * 1000)}}},
      {"verification", audit.ToJson()}};
  PrintJson(summary);
  if (!fatal.empty()) return Fail(kExitFailed, "demo stopped: " + fatal);
  if (!audit.ok()) {
    std::string reason = "verification failed (" + std::to_string(audit.error_count) + " errors)";
    for (const auto& e : audit.errors) reason += "; " + e;
    return Fail(kExitFailed, reason);
  }
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                              "): stopped early; settled and verified");
  }
  return kExitOk;
}

}  // namespace

void AddDemo(CLI::App& app, Context& ctx) {
  auto flags = std::make_shared<DemoFlags>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Run a bank: concurrent transfers (each one transaction: two balance adjusts and a "
      "ledger insert) with coordinator crashes injected at random, a background collector "
      "repairing them, then verify that money is conserved, every balance matches the ledger, "
      "every acknowledged transfer is in it and nothing is left half-done. Prints a JSON "
      "summary; exit 0 if the verification passed, 1 otherwise.");
  cmd->add_option("--accounts", flags->accounts, "Number of accounts (balance 1000 each)")
      ->check(CLI::Range(2, 1'000'000));
  cmd->add_option("--threads", flags->threads, "Worker threads running transfers")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--duration", flags->duration_s,
                  "Time of transfers (10s, 500ms, 1m; 100ms to 24h)")
      ->transform(CLI::Validator([](std::string& s) -> std::string {
        auto d = ParseDuration(s);
        if (!d.ok()) return d.status().message();
        if (*d < std::chrono::milliseconds(100) || *d > std::chrono::hours(24)) {
          return "'" + s + "' is outside 100ms..24h";
        }
        s = std::to_string(static_cast<double>(d->count()) / 1000.0);
        return {};
      }, "DURATION"));
  cmd->add_option("--crash-rate", flags->crash_rate,
                  "Probability that a transfer's coordinator crashes after a random write")
      ->check(ProbabilityCheck());
  cmd->add_option("--seed", flags->seed, "Random seed (0: random; printed in the summary)")
      ->check(WholeNumberCheck(0, UINT64_MAX));
  cmd->add_option("--lease", flags->lease,
                  "Transaction lease: how soon the collector repairs a crashed transfer "
                  "(50ms to 10m)")
      ->transform(CLI::Validator([](std::string& s) -> std::string {
        auto d = ParseDuration(s);
        if (!d.ok()) return d.status().message();
        if (*d < std::chrono::milliseconds(50) || *d > std::chrono::minutes(10)) {
          return "'" + s + "' is outside 50ms..10m";
        }
        s = std::to_string(d->count());
        return {};
      }, "DURATION"))
      ->default_str("1s");
  cmd->add_flag("--no-progress", flags->no_progress, "Do not draw the progress line on stderr");
  cmd->callback([&ctx, flags] { ctx.run = [&ctx, flags] { return RunDemo(ctx, *flags); }; });
}

}  // namespace litetx::cli
