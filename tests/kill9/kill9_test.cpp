// tests/kill9/kill9_test.cpp — real process crashes: a worker process (crash_worker.cpp) runs
// bank transfers on an LMDB store and is killed with SIGKILL at a random moment, over and over
// on the same store.
//
// Each round: fork+exec the worker, wait for its "ready", let it run 1..50 ms (seeded), kill -9
// it, and sort the transfers it began by what it wrote about them: "ack" (Commit returned OK),
// "fail" (Commit failed and rolled back: certainly not applied) or nothing (in doubt: the kill
// interrupted the commit; at most one per worker thread). Then reopen the store, count the
// ActiveTransaction records the kill left open, run the collector with older_than 1 ms (the
// worker is dead) until none is open, and audit (tools/demo_bank.h): money conserved, every
// balance equal to the initial balance plus what the committed ledger documents imply, every
// acknowledged transfer in the ledger, every failed one absent, every ledger document an
// acknowledged or in-doubt transfer of the round (nothing unreported), no reference, deleting
// flag or ActiveTransaction record left. Per round it also asserts: the collector settled
// exactly the records left open, without a failure; no more records were open than transfers
// in doubt; it finished no more than the in-doubt transfers found applied and reversed no more
// than those found not applied; the round's ledger documents number its acks plus its applied
// in-doubt transfers. Rounds audit the ledger documents of that round incrementally; every
// 50th round (every rounds/10th in long runs) and the last audit the whole ledger against
// every id reported so far. The state accumulates from round to round. Rounds alternate LMDB
// durability (nosync / nometasync, and durable every fifth round: all survive a process
// crash). At the end the totals must show each outcome at least once (acks, in-doubt transfers
// applied and not applied, records finished and reversed by the collector, and failed
// attempts where two threads contend).
//
// Size: 250 + 150 rounds in CI (about 15 s on 2 cores, 20-25 s with the CPU loaded).
// LITETX_LONG_TESTS=ON at configure time, or LITETX_LONG=1 in the environment, runs 15x as
// many; LITETX_KILL9_ROUNDS=N sets the count. The seed is printed;
// LITETX_KILL9_SEED=N replays its choices (the kill moments relative to the worker's progress
// still vary with scheduling).
//
// Thread safety: single-threaded test; the worker runs in its own process.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"
#include "tools/demo_bank.h"

#ifndef LITETX_CRASH_WORKER
#error "LITETX_CRASH_WORKER must name the worker executable"
#endif
#ifndef LITETX_LONG_TESTS
#define LITETX_LONG_TESTS 0
#endif

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using litetx::bank::AuditOptions;
using litetx::bank::AuditReport;
using litetx::bank::BankConfig;

std::uint64_t EnvU64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

int Rounds(int ci_rounds) {
  bool long_run = LITETX_LONG_TESTS != 0 || EnvU64("LITETX_LONG", 0) == 1;
  return static_cast<int>(EnvU64("LITETX_KILL9_ROUNDS", long_run ? ci_rounds * 15 : ci_rounds));
}

// What one killed worker wrote before it died. Every transfer attempt it began is in exactly
// one of the three lists.
struct WorkerRun {
  std::vector<std::string> acked;     // Commit returned OK
  std::vector<std::string> failed;    // rolled back: certainly not applied
  std::vector<std::string> in_doubt;  // begun, neither acknowledged nor failed
  std::string error;                  // non-empty: the round went wrong before the kill
};

// Runs the worker with `args`, kills it `delay` after its "ready" line and collects its lines.
WorkerRun RunAndKill(const std::vector<std::string>& args, std::chrono::milliseconds delay) {
  WorkerRun run;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {{}, {}, {}, "pipe2 failed"};
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(LITETX_CRASH_WORKER));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return {{}, {}, {}, "fork failed"};
  if (pid == 0) {  // child: async-signal-safe calls only
    ::dup2(fds[1], STDOUT_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string buffer;
  bool ready = false, eof = false;
  auto deadline = SteadyClock::now() + 10s;  // until "ready"
  auto read_some = [&](int timeout_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return;
    char chunk[65536];
    ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n <= 0) {
      eof = true;
      return;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
    if (!ready && buffer.find("ready\n") != std::string::npos) {
      ready = true;
      deadline = SteadyClock::now() + delay;
    }
  };
  while (!eof && SteadyClock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    read_some(static_cast<int>(std::max<long>(0, left.count())));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (!eof) read_some(1000);  // drain: every line written before the kill
  ::close(fds[0]);
  if (!ready) run.error = "the worker never said ready";
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    run.error = "the worker ended by itself (status " + std::to_string(status) +
                "; exit code " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                ") instead of being killed";
  }
  // Complete lines only (a kill cannot split one: each is a single short write). Each id is
  // begun once, then acknowledged or failed at most once; anything else is a broken worker.
  std::vector<std::string> begun;
  std::set<std::string> open_ids;  // begun, no ack or fail yet
  std::set<std::string> seen;
  auto bad = [&](const std::string& line) {
    if (run.error.empty()) run.error = "unexpected worker line '" + line + "'";
  };
  std::size_t pos = 0;
  for (std::size_t nl; (nl = buffer.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    const std::string line = buffer.substr(pos, nl - pos);
    const std::size_t sp = line.find(' ');
    const std::string word = line.substr(0, sp);
    const std::string id = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (line == "ready") continue;
    if (word == "begin" && !id.empty() && seen.insert(id).second) {
      begun.push_back(id);
      open_ids.insert(id);
    } else if ((word == "ack" || word == "fail") && open_ids.erase(id) == 1) {
      (word == "ack" ? run.acked : run.failed).push_back(id);
    } else {
      bad(line);
    }
  }
  // A begun transfer neither acknowledged nor failed (at most one per worker thread: the one
  // the kill interrupted) is in doubt.
  for (const auto& b : begun) {
    if (open_ids.contains(b)) run.in_doubt.push_back(b);
  }
  return run;
}

struct Totals {
  int rounds = 0;
  std::uint64_t acks = 0, failed = 0, in_doubt = 0, in_doubt_applied = 0,
                in_doubt_not_applied = 0;
  std::uint64_t left_open = 0;  // records the kills left open (all settled by the collector)
  std::uint64_t gc_finished = 0, gc_reversed = 0;
  // The same two counts over the rounds of each commit mode ([0] parallel, [1] classic).
  std::uint64_t gc_finished_by_mode[2] = {0, 0}, gc_reversed_by_mode[2] = {0, 0};
  std::uint64_t ledger_docs = 0, rolled_back_ids = 0;
};

std::string Describe(const AuditReport& r) {
  std::string s = std::to_string(r.error_count) + " violation(s):";
  for (const auto& e : r.errors) s += "\n  " + e;
  return s;
}

struct Plan {
  const char* name;
  int ci_rounds;
  int threads;            // worker threads in the child
  int gc_in_child_every;  // every k-th round the child also runs a racing collector; 0 never
  bool contended;         // several threads on few accounts: some attempts fail (conflicts)
};

// Below this many rounds the totals are not required to be positive (LITETX_KILL9_ROUNDS can
// ask for a handful of rounds, in which a kill may never land inside a commit).
constexpr int kRoundsForTotals = 50;

void RunKillRounds(const Plan& plan) {
  const std::uint64_t seed = EnvU64("LITETX_KILL9_SEED", std::random_device{}());
  const int rounds = Rounds(plan.ci_rounds);
  std::printf("[kill9] %s: %d rounds, seed %llu (replay: LITETX_KILL9_SEED=%llu)\n", plan.name,
              rounds, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "litetx-kill9-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir_template.data()), nullptr);
  const std::string dir = dir_template;

  BankConfig cfg;
  cfg.accounts_collection = "kill9.accounts";
  cfg.ledger_collection = "kill9.ledger";
  cfg.prefix = "k.";
  cfg.accounts = 12;  // few accounts: transfers of two threads contend
  litetx::LmdbOptions lo;
  lo.durability = litetx::LmdbDurability::kNoSync;
  {
    auto store = litetx::LmdbStore::Open(dir, lo);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    litetx::Database db(*store);
    ASSERT_TRUE(litetx::bank::CreateAccounts(db, cfg).ok());
  }

  Totals t;
  std::vector<std::int64_t> net;  // per account, over the ledger audited so far
  std::vector<std::string> all_acked, all_failed, all_in_doubt;
  const int full_audit_every = std::max(50, rounds / 10);
  const auto started = SteadyClock::now();
  for (int round = 1; round <= rounds; ++round) {
    char round_id[16];
    std::snprintf(round_id, sizeof round_id, "r%06d", round);
    const bool racing_gc = plan.gc_in_child_every > 0 && round % plan.gc_in_child_every == 0;
    // Every fifth round fsyncs every write (the default mode), the rest are faster.
    const std::string sync = round % 5 == 0 ? "durable" : round % 2 == 0 ? "nometasync" : "nosync";
    const auto delay = std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 50)(rng));
    std::vector<std::string> args = {"--store", dir, "--sync", sync, "--prefix", cfg.prefix,
                                     "--round", round_id, "--threads",
                                     std::to_string(plan.threads), "--accounts",
                                     std::to_string(cfg.accounts), "--seed",
                                     std::to_string(rng())};
    if (racing_gc) args.insert(args.end(), {"--gc-older-than-ms", "20"});
    // Every third round commits on the classic path (record, applies, flip): on LMDB a parallel
    // commit's record and applies land in one write transaction, so only the classic path
    // leaves records for the collector to reverse after a kill.
    const bool classic = round % 3 == 0;
    if (classic) args.insert(args.end(), {"--parallel", "off"});
    const std::string where = "round " + std::to_string(round) + " (" + sync + ", " +
                              std::to_string(plan.threads) + " thread(s)" +
                              (racing_gc ? ", racing collector" : "") +
                              (classic ? ", classic commit" : "") + ", killed " +
                              std::to_string(delay.count()) + " ms after ready, seed " +
                              std::to_string(seed) + ", store " + dir + ")";
    WorkerRun run = RunAndKill(args, delay);
    ASSERT_TRUE(run.error.empty()) << where << ": " << run.error;
    // Each worker thread has at most one commit in progress when the kill lands.
    ASSERT_LE(run.in_doubt.size(), static_cast<std::size_t>(plan.threads)) << where;

    // Reopen the store the dead worker left, settle what it left, audit.
    auto opened = litetx::LmdbStore::Open(dir, lo);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::shared_ptr<litetx::Store> store = *opened;
    // Records the kill left open. A commit that failed has written its outcome marker; one
    // that was acknowledged may still have been finishing in the background. So each of these
    // belongs to a transfer in doubt or to an acknowledged one.
    auto left = litetx::bank::OpenRecords(*store, 0);
    ASSERT_TRUE(left.ok()) << left.status().ToString();
    ASSERT_LE(*left, run.in_doubt.size() + run.acked.size())
        << where << ": more records open than transfers in doubt or acknowledged";
    litetx::CollectorOptions go;
    go.older_than = 1ms;
    // Outcome markers are of no use here: erase them at the next run, or every later round
    // would scan all the markers of the earlier ones.
    go.outcome_retention = 1ms;
    litetx::Collector gc(store, go);
    std::uint64_t open = 1;
    for (int pass = 0; pass < 5 && open > 0; ++pass) {
      (void)gc.RunOnce();
      auto o = litetx::bank::OpenRecords(*store, 0);
      ASSERT_TRUE(o.ok()) << o.status().ToString();
      open = *o;
    }
    const litetx::CollectorStats st = gc.stats();
    // Nobody else runs now: the collector settles each record left open exactly once.
    ASSERT_EQ(st.failed, 0u) << where;
    ASSERT_EQ(st.finished + st.reversed, *left)
        << where << ": the collector finished " << st.finished << " and reversed " << st.reversed
        << " transactions, but the kill left " << *left << " open";

    AuditOptions ao;
    ao.acked = run.acked;
    ao.failed = run.failed;
    ao.in_doubt = run.in_doubt;
    ao.only_reported = true;
    ao.ledger_scan_prefix = std::string(round_id) + ".";
    ao.base_net = net;
    ao.base_ledger_docs = t.ledger_docs;
    AuditReport rep = litetx::bank::Audit(store, cfg, ao);
    ASSERT_TRUE(rep.ok()) << where << ": " << Describe(rep);
    // The round's committed ledger documents are exactly its acknowledged transfers and the
    // ones in doubt that were applied; the collector finished only transfers that ended
    // applied and reversed only ones that did not.
    ASSERT_EQ(rep.ledger_docs - t.ledger_docs, run.acked.size() + rep.in_doubt_applied) << where;
    ASSERT_EQ(rep.in_doubt_applied + rep.in_doubt_not_applied, run.in_doubt.size()) << where;
    ASSERT_EQ(rep.failed_checked, run.failed.size()) << where;
    // Finished by the collector: transfers in doubt that were applied, or acknowledged ones
    // whose background finish the kill cut short.
    ASSERT_LE(st.finished, rep.in_doubt_applied + run.acked.size()) << where;
    ASSERT_LE(st.reversed, rep.in_doubt_not_applied) << where;

    all_acked.insert(all_acked.end(), run.acked.begin(), run.acked.end());
    all_failed.insert(all_failed.end(), run.failed.begin(), run.failed.end());
    all_in_doubt.insert(all_in_doubt.end(), run.in_doubt.begin(), run.in_doubt.end());
    net = rep.net;
    t.ledger_docs = rep.ledger_docs;
    t.rolled_back_ids += rep.placeholders;
    t.acks += run.acked.size();
    t.failed += run.failed.size();
    t.in_doubt += run.in_doubt.size();
    t.in_doubt_applied += rep.in_doubt_applied;
    t.in_doubt_not_applied += rep.in_doubt_not_applied;
    t.left_open += *left;
    t.gc_finished += st.finished;
    t.gc_reversed += st.reversed;
    t.gc_finished_by_mode[classic ? 1 : 0] += st.finished;
    t.gc_reversed_by_mode[classic ? 1 : 0] += st.reversed;
    t.rounds = round;
    if (round % full_audit_every == 0 || round == rounds) {
      // The whole ledger again: nothing audited earlier may have changed since.
      AuditOptions whole;
      whole.acked = all_acked;
      whole.failed = all_failed;
      whole.in_doubt = all_in_doubt;
      whole.only_reported = true;
      AuditReport all = litetx::bank::Audit(store, cfg, whole);
      ASSERT_TRUE(all.ok()) << where << ", whole ledger: " << Describe(all);
      ASSERT_EQ(all.ledger_docs, rep.ledger_docs) << where;
      ASSERT_EQ(all.ledger_docs, t.acks + t.in_doubt_applied) << where;
      ASSERT_EQ(all.in_doubt_applied, t.in_doubt_applied) << where;
      ASSERT_EQ(all.net, rep.net) << where;
    }
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  std::printf(
      "[kill9] %s: rounds %d, acks %llu, failed %llu, in doubt at the kill %llu (applied %llu, "
      "not applied %llu), ledger docs %llu, rolled-back ledger ids %llu, records left open %llu "
      "(GC finished %llu, reversed %llu; in parallel-commit rounds finished %llu, reversed %llu; "
      "in classic rounds finished %llu, reversed %llu), %.1f s\n",
      plan.name, t.rounds, static_cast<unsigned long long>(t.acks),
      static_cast<unsigned long long>(t.failed), static_cast<unsigned long long>(t.in_doubt),
      static_cast<unsigned long long>(t.in_doubt_applied),
      static_cast<unsigned long long>(t.in_doubt_not_applied),
      static_cast<unsigned long long>(t.ledger_docs),
      static_cast<unsigned long long>(t.rolled_back_ids),
      static_cast<unsigned long long>(t.left_open),
      static_cast<unsigned long long>(t.gc_finished),
      static_cast<unsigned long long>(t.gc_reversed),
      static_cast<unsigned long long>(t.gc_finished_by_mode[0]),
      static_cast<unsigned long long>(t.gc_reversed_by_mode[0]),
      static_cast<unsigned long long>(t.gc_finished_by_mode[1]),
      static_cast<unsigned long long>(t.gc_reversed_by_mode[1]), seconds);
  std::fflush(stdout);
  if (rounds >= kRoundsForTotals) {
    // Over this many random kills each kind of outcome occurs (each is seen dozens of times
    // per run): acknowledged transfers, kills inside a commit that end applied and not
    // applied, and records the collector had to finish and to reverse.
    EXPECT_GT(t.acks, 0u);
    EXPECT_GT(t.in_doubt_applied, 0u);
    EXPECT_GT(t.in_doubt_not_applied, 0u);
    EXPECT_GT(t.gc_finished, 0u);
    EXPECT_GT(t.gc_reversed, 0u);
    // Kills in parallel-commit rounds leave committed records to finish (a staging record with
    // every document held, or a flipped one whose finishing was cut short); kills in classic
    // rounds leave pending records to reverse.
    EXPECT_GT(t.gc_finished_by_mode[0], 0u);
    EXPECT_GT(t.gc_reversed_by_mode[1], 0u);
    if (plan.contended) {
      EXPECT_GT(t.failed, 0u);
    }
  }
  if (!plan.contended && plan.gc_in_child_every == 0) {
    // One thread, no collector in the worker: a parallel commit's record and document writes
    // land in one LMDB write transaction, so a kill leaves all of them or none, and the
    // collector never has one to reverse.
    EXPECT_EQ(t.gc_reversed_by_mode[0], 0u);
  }
  std::filesystem::remove_all(dir);
}

TEST(Kill9Test, OneThreadWorkerKilledAtRandomLosesNothing) {
  RunKillRounds({"one thread", 250, 1, 0, false});
}

TEST(Kill9Test, TwoThreadWorkerWithRacingCollectorKilledAtRandomLosesNothing) {
  RunKillRounds({"two threads", 150, 2, 3, true});
}

}  // namespace
