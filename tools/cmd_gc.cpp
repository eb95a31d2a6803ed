// tools/cmd_gc.cpp — `litetx gc`: runs the collector (litetx/collector.h) on the store.
//
// --once: one Collector::RunOnce, then the counters as JSON (with "last_pass": the pass's
// report, Collector::last_pass); exit 0 if it returned OK, else
// kExitFailed with the error on stderr (the counters are still printed). Without --once: the
// background thread runs every --interval until SIGINT or SIGTERM, then the counters are
// printed. Never creates a missing LMDB store (kExitStore).
//
// Signals (tools/signals.h), SIGINT and SIGTERM alike:
//   --once: the pass runs to its end (every step is one CAS and the pass is bounded), the
//     counters are printed with "interrupted": "SIGINT"|"SIGTERM", and the exit code is 130
//     (SIGINT) or 143 (SIGTERM): the pass was asked to stop early.
//   without --once: a signal is how the background collector is meant to be stopped (by a
//     service manager, or Ctrl-C), so it is not an interruption: the run in progress ends at
//     its next transaction boundary (Collector::Stop), the counters are printed with
//     "status": "stopped" and "signal", and the exit code is 0 — a supervisor counts the stop
//     as clean.
//   A second signal exits at once with 130/143; what the pass had not done, the next pass
//   (of any collector) does.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <csignal>

#include "bench/gc_scale.h"
#include "tools/cli.h"
#include "tools/signals.h"

extern "C" char** environ;

namespace litetx::cli {
namespace {
namespace json = boost::json;

struct GcArgs {
  bool once = false;
  std::string interval = "1s";
  std::string older_than;
  std::string tombstone_retention;
  std::string outcome_retention;
  std::vector<std::string> purge;  // --collection (or its older name --purge)
  std::size_t sweep_budget = CollectorOptions{}.sweep_budget;
  std::string sweep_interval = "1m";
  std::size_t tombstone_budget = CollectorOptions{}.tombstone_purge_budget;
  std::string name;
  std::size_t record_budget = CollectorOptions{}.record_budget;
  bool no_fold = false;
  bool share = false;
  bool bench = false;
  bool bench_threads = false;
  bench::GcScaleOptions bench_options;
};

json::object Work(const CollectorWork& w) {
  json::object o;
  o["due"] = w.due;
  o["done"] = w.done;
  return o;
}

json::object Counters(const Collector& gc) {
  const CollectorStats s = gc.stats();
  json::object o;
  o["runs"] = s.runs;
  o["finished"] = s.finished;
  o["reversed"] = s.reversed;
  o["failed"] = s.failed;
  o["purged"] = s.purged;
  o["undone"] = s.undone;
  o["swept"] = s.swept;
  o["folded"] = s.folded;
  o["pages_purged"] = s.pages_purged;
  if (s.runs > 0) {
    const CollectorPass p = gc.last_pass();
    json::object last;
    last["duration_ms"] = p.duration_ms;
    last["records_read"] = p.records_read;
    last["pages_read"] = p.pages_read;
    last["index_read"] = p.index_read;
    last["abandoned"] = Work(p.abandoned);
    last["unfinished"] = Work(p.unfinished);
    last["markers"] = Work(p.markers);
    last["expired"] = Work(p.expired);
    last["tombstones"] = Work(p.tombstones);
    last["backlog"] = p.backlog;
    last["complete"] = p.complete;
    last["oldest_abandoned_ms"] = p.oldest_abandoned_ms;
    last["failed"] = p.failed;
    o["last_pass"] = std::move(last);
  }
  return o;
}

// An optional duration flag of gc. 0 keeps its CollectorOptions meaning (older_than: off;
// tombstone_retention: never purge).
bool OptionalDuration(const std::string& text, std::chrono::milliseconds* out) {
  if (text.empty()) return true;
  auto d = ParseDuration(text);
  if (!d.ok()) return false;
  *out = *d;
  return true;
}

// Runs `n` processes of `litetx gc --once --share --older-than 1ms` on the store at once and
// returns the seconds until the last one exited (each runs passes until it finds no partition
// left to take).
Result<double> RunCollectorProcesses(const Context& ctx, int n) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const std::string name = "gc-bench-" + std::to_string(i);
    std::vector<std::string> argv = {"litetx", "--store", ctx.store_uri, "--sync", ctx.lmdb_sync,
                                     "gc",     "--once",  "--share",     "--older-than", "1ms",
                                     "--name", name};
    std::vector<char*> raw;
    for (std::string& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, raw.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return Status::Unavailable("cannot start a collector process: " + std::string(std::strerror(rc)));
    pids.push_back(pid);
  }
  std::string failed;
  for (pid_t pid : pids) {
    int status = 0;
    if (::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed = "a collector process failed (status " + std::to_string(status) + ")";
    }
  }
  if (!failed.empty()) return Status::Unavailable(failed);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The same with `n` threads of this process, each with its own Collector (memory: and Redis).
Result<double> RunCollectorThreads(const std::shared_ptr<Store>& store, int n) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      CollectorOptions o;
      o.share_partitions = true;
      o.older_than = std::chrono::milliseconds(1);
      o.name = "gc-bench-" + std::to_string(i);
      Collector gc(store, o);
      if (!gc.RunOnce().ok()) failures.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  if (failures.load() != 0) return Status::Unavailable("a collector pass failed");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int RunGc(Context& ctx, const GcArgs& args) {
  CollectorOptions co;
  co.engine = EngineOptions(ctx);
  co.name = args.name;
  co.collections = args.purge;
  co.sweep_budget = args.sweep_budget;
  co.tombstone_purge_budget = args.tombstone_budget;
  co.record_budget = args.record_budget;
  co.fold_outcomes = !args.no_fold;
  co.share_partitions = args.share;
  for (const std::string& c : args.purge) {
    if (Status s = ValidateCollection(c); !s.ok()) return Fail(kExitUsage, "--collection: " + s.message());
  }
  if (!OptionalDuration(args.sweep_interval, &co.sweep_interval)) {
    return Fail(kExitUsage, "--sweep-interval: not a duration: " + args.sweep_interval);
  }
  auto interval = ParseDuration(args.interval);
  if (!interval.ok() || *interval <= std::chrono::milliseconds(0)) {
    return Fail(kExitUsage, "--interval must be a positive duration");
  }
  co.interval = *interval;
  if (!OptionalDuration(args.older_than, &co.older_than) ||
      !OptionalDuration(args.tombstone_retention, &co.tombstone_retention)) {
    return Fail(kExitUsage, "bad duration flag");
  }
  if (!args.outcome_retention.empty()) co.outcome_retention = *ParseDuration(args.outcome_retention);

  if (args.bench) {
    // Creates a missing LMDB store: the benchmark starts from an empty one.
    int code = kExitOk;
    ctx.lmdb_max_mapped_bytes = std::size_t{256} << 20;
    auto store = OpenStore(ctx, &code);
    if (!store) return code;
    bench::GcScaleOptions bo = args.bench_options;
    bo.progress = ::isatty(2) != 0;  // a line per step on a terminal
    if (ctx.store_uri != "memory:" && !args.bench_threads) {
      // Collectors in processes of their own, as a service runs them (memory: is private to
      // this process: threads there).
      bo.run_collectors = [&ctx](int n) -> Result<double> {
        return RunCollectorProcesses(ctx, n);
      };
    } else {
      bo.run_collectors = [store](int n) -> Result<double> {
        return RunCollectorThreads(store, n);
      };
    }
    auto r = bench::RunGcScale(store, bo);
    if (!r.ok()) return Fail(kExitFailed, "gc --bench: " + r.status().ToString());
    PrintJson(*r);
    return kExitOk;
  }

  CatchSignals();  // before the store and the collector start any thread
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;

  if (args.once) {
    Collector gc(store, co);
    Status s = gc.RunOnce();
    json::object out = Counters(gc);
    out["status"] = s.ok() ? "ok" : std::string(CodeName(s.code()));
    if (!s.ok()) out["message"] = s.message();
    if (Interrupted() != 0) out["interrupted"] = InterruptedName();
    PrintJson(out);
    if (!s.ok()) Fail(kExitFailed, "gc: " + s.ToString());
    if (Interrupted() != 0) {
      return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                                "): the pass ran to its end");
    }
    return s.ok() ? kExitOk : kExitFailed;
  }

  // The signals are blocked in this thread since CatchSignals, so the collector's thread
  // inherits the mask; Stop() runs here, on this thread, once a signal is noted.
  Collector gc(store, co);
  gc.Start();
  const int sig = WaitForSignal();
  gc.Stop();
  json::object out = Counters(gc);
  out["status"] = "stopped";
  out["signal"] = sig == SIGINT ? "SIGINT" : "SIGTERM";
  PrintJson(out);
  return kExitOk;
}

}  // namespace

void AddGc(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<GcArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gc", "Run the collector: settle abandoned transactions, sweep collections (dangling holds, old tombstones)");
  cmd->add_flag("--once", args->once, "One pass, print the counters and exit");
  cmd->add_option("--interval", args->interval, "Pause between passes without --once")
      ->check(DurationCheck())
      ->capture_default_str();
  cmd->add_option("--older-than", args->older_than,
                  "Also treat transactions older than this as abandoned (1ms: all of them; "
                  "DANGER: rolls back live ones). Default and 0: only the lease counts")
      ->check(DurationCheck());
  cmd->add_option("--collection,--purge", args->purge,
                  "Sweep this collection: undo dangling holds, purge old tombstones "
                  "(repeatable: --collection a --collection b)")
      ->allow_extra_args(false);
  cmd->add_option("--sweep-budget", args->sweep_budget,
                  "Most documents swept per pass; the next pass resumes (0: no limit)")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--sweep-interval", args->sweep_interval,
                  "Sweep a slice of the collections in the first pass, then at most once per "
                  "this (0: every pass); tombstones are found through the tombstone index")
      ->check(DurationCheck())
      ->capture_default_str();
  cmd->add_option("--tombstone-budget", args->tombstone_budget,
                  "Most tombstone index entries and documents read per pass (0: no limit)")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--tombstone-retention", args->tombstone_retention,
                  "Keep tombstones this long before purging (default 24h; 1ms: purge at once; "
                  "0: never purge)")
      ->check(DurationCheck());
  cmd->add_option("--outcome-retention", args->outcome_retention,
                  "Keep outcome markers this long (default 1h)")
      ->check(DurationCheck());
  cmd->add_option("--record-budget", args->record_budget,
                  "Most transaction records read per pass; the next pass resumes (0: no limit)")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--no-fold", args->no_fold,
                "Keep outcome markers as records instead of folding them into outcome pages");
  cmd->add_option("--name", args->name, "Collector name stored in records it claims");
  cmd->add_flag("--share", args->share,
                "Share the work with other collectors run with --share: take the record "
                "collection's 16 partitions one at a time through claims in __litetx.gc");
  cmd->add_option("--bench-backlog", args->bench_options.backlog,
                  "--bench: abandoned transactions settled by one collector, then by "
                  "--bench-collectors at once (0: skip)")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--bench-collectors", args->bench_options.collectors,
                  "--bench: collectors sharing the backlog (processes on lmdb:, threads otherwise)")
      ->check(WholeNumberCheck(1, 64))
      ->capture_default_str();
  cmd->add_flag("--bench-folded", args->bench_options.folded_setup,
                "--bench: write the outcomes straight into outcome pages (a store kept folded); "
                "skips the pass before folding and the migration");
  cmd->add_flag("--bench-no-migrate", [args](std::int64_t) { args->bench_options.migrate = false; },
                "--bench: stop after the pass before folding");
  cmd->add_flag("--bench-threads", args->bench_threads,
                "--bench: the backlog's collectors are threads of this process, not processes");
  cmd->add_flag("--bench", args->bench,
                "Benchmark a pass on a store of many outcome markers and tombstones, before and "
                "after folding (needs an empty store; prints a JSON report)");
  cmd->add_option("--bench-markers", args->bench_options.markers,
                  "Outcome markers --bench writes")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--bench-tombstones", args->bench_options.tombstones,
                  "Tombstones --bench writes, younger than the tombstone retention")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--bench-tombstones-due", args->bench_options.tombstones_due,
                  "Tombstones --bench writes past the tombstone retention (purged by the passes)")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--bench-abandoned", args->bench_options.abandoned,
                  "Abandoned transactions --bench makes before each measured pass")
      ->check(WholeNumberCheck(0, std::uint64_t{1} << 20))
      ->capture_default_str();
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return RunGc(ctx, *args); }; });
}

}  // namespace litetx::cli
