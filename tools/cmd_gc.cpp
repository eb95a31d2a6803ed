// tools/cmd_gc.cpp — `litetx gc`: runs the collector (litetx/collector.h) on the store.
//
// --once: one Collector::RunOnce, then the counters as JSON; exit 0 if it returned OK, else
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
#include <csignal>

#include "tools/cli.h"
#include "tools/signals.h"

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
  std::string name;
};

json::object Counters(const CollectorStats& s) {
  json::object o;
  o["runs"] = s.runs;
  o["finished"] = s.finished;
  o["reversed"] = s.reversed;
  o["failed"] = s.failed;
  o["purged"] = s.purged;
  o["undone"] = s.undone;
  o["swept"] = s.swept;
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

int RunGc(Context& ctx, const GcArgs& args) {
  CollectorOptions co;
  co.engine = EngineOptions(ctx);
  co.name = args.name;
  co.collections = args.purge;
  co.sweep_budget = args.sweep_budget;
  for (const std::string& c : args.purge) {
    if (Status s = ValidateCollection(c); !s.ok()) return Fail(kExitUsage, "--collection: " + s.message());
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

  CatchSignals();  // before the store and the collector start any thread
  int code = kExitOk;
  auto store = OpenExistingStore(ctx, &code);
  if (!store) return code;

  if (args.once) {
    Collector gc(store, co);
    Status s = gc.RunOnce();
    json::object out = Counters(gc.stats());
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
  json::object out = Counters(gc.stats());
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
  cmd->add_option("--tombstone-retention", args->tombstone_retention,
                  "Keep tombstones this long before purging (default 24h; 1ms: purge at once; "
                  "0: never purge)")
      ->check(DurationCheck());
  cmd->add_option("--outcome-retention", args->outcome_retention,
                  "Keep outcome markers this long (default 1h)")
      ->check(DurationCheck());
  cmd->add_option("--name", args->name, "Collector name stored in records it claims");
  cmd->callback([&ctx, args] { ctx.run = [&ctx, args] { return RunGc(ctx, *args); }; });
}

}  // namespace litetx::cli
