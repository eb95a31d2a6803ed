// tools/cmd_gc.cpp — `litetx gc`: runs the collector (litetx/collector.h) on the store.
//
// --once: one Collector::RunOnce, then the counters as JSON; exit 0 if it returned OK, else
// kExitFailed with the error on stderr (the counters are still printed). Without --once: the
// background thread runs every --interval until SIGINT or SIGTERM, then the counters are
// printed and the exit code is 0. Never creates a missing LMDB store (kExitStore).
#include <csignal>
#include <pthread.h>

#include "tools/cli.h"

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

  ctx.create_store = false;
  int code = kExitOk;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;

  if (args.once) {
    Collector gc(store, co);
    Status s = gc.RunOnce();
    json::object out = Counters(gc.stats());
    out["status"] = s.ok() ? "ok" : std::string(CodeName(s.code()));
    if (!s.ok()) out["message"] = s.message();
    PrintJson(out);
    return s.ok() ? kExitOk : Fail(kExitFailed, "gc: " + s.ToString());
  }

  // Block the signals before the collector's thread starts (it inherits the mask), then wait
  // for one synchronously: no async-signal-safety concerns, and Stop() runs on this thread.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  Collector gc(store, co);
  gc.Start();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
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
