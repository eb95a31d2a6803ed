// tools/cmd_bench.cpp — `litetx bench`: the raw CAS rate of the store named by --store, then
// transactions of N documents on it (tx/s, latency, counted writes, peak memory) and committed
// against raw reads. The measurements are in bench/ (litetx_bench); see docs/benchmarks.md.
#include <cstdio>
#include <memory>
#include <thread>

#include "bench/bench.h"
#ifdef LITETX_CLI_WITH_REDIS
#include "bench/redis_native.h"
#endif
#include "tools/cli.h"

namespace litetx::cli {
namespace {

struct BenchArgs {
  std::string duration = "2s";
  bool quick = false;
  int threads = 4;
  int rounds = 4;
  std::vector<int> sizes{1, 2, 4, 16};
  bool json = false;
  bool keep = false;
};

// On redis:// and redis-cluster://, the native alternative: MULTI/EXEC of N writes on one
// slot, straight through hiredis, one row per size (bench/redis_native.h). Empty elsewhere.
struct NativeRows {
  std::vector<std::string> lines;
  boost::json::array json;
  std::uint64_t errors = 0;
};

NativeRows RunNative(const Context& ctx, const bench::Config& config,
                     const bench::Report& report) {
  NativeRows out;
#ifdef LITETX_CLI_WITH_REDIS
  RedisOptions ro;
  if (ctx.store_uri.rfind("redis://", 0) == 0) {
    if (!ParseRedisUri(ctx.store_uri, &ro).ok()) return out;
  } else if (ctx.store_uri.rfind("redis-cluster://", 0) == 0) {
    RedisClusterOptions co;
    if (!ParseRedisClusterUri(ctx.store_uri, &co).ok() || co.seeds.empty()) return out;
    ro.host = co.seeds.front().host;
    ro.port = co.seeds.front().port;
    ro.db = 0;
    ro.prefix = co.prefix;
  } else {
    return out;
  }
  for (int n : config.sizes) {
    auto row = bench::MeasureRedisMultiExec(ro.host, ro.port, ro.db, ro.prefix, n,
                                            config.duration);
    if (!row.ok()) {
      out.lines.push_back("  native MULTI/EXEC: " + row.status().message() + "\n");
      ++out.errors;
      break;
    }
    double litetx = 0;
    for (const bench::TxRow& r : report.rows) {
      if (r.n == n && r.threads == 1) litetx = r.tx.ops_per_s;
    }
    const bench::Measured& m = row->tx;
    out.errors += m.errors;
    char line[160];
    std::snprintf(line, sizeof line, "%3d %10.0f %8.1f %9.1f %12.0f %8.3f\n", n, m.ops_per_s,
                  m.p50_us, m.p99_us, litetx, m.ops_per_s > 0 ? litetx / m.ops_per_s : 0.0);
    out.lines.push_back(line);
    out.json.push_back({{"n", n}, {"threads", 1}, {"tx_per_s", m.ops_per_s},
                        {"p50_us", m.p50_us}, {"p99_us", m.p99_us}, {"ops", m.ops},
                        {"errors", m.errors}, {"litetx_tx_per_s", litetx}});
  }
#else
  (void)ctx;
  (void)config;
  (void)report;
#endif
  return out;
}

int RunBench(const Context& ctx, const BenchArgs& args, bool duration_given) {
  bench::Config config;
  config.threads = args.threads;
  config.rounds = args.rounds;
  config.sizes = args.sizes;
  config.cleanup = !args.keep;
  if (args.quick && !duration_given) {
    config.duration = std::chrono::milliseconds(25);
  } else if (auto d = ParseDuration(args.duration); !d.ok() || d->count() <= 0) {
    return Fail(kExitUsage, "--duration: " + (d.ok() ? "must be more than 0" : d.status().message()));
  } else {
    config.duration = *d;
  }
  int code = kExitOk;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;
  const bool lmdb = ctx.store_uri.rfind("lmdb", 0) == 0;

  auto on_row = [&](const bench::TxRow& row) {
    if (args.json) return;
    std::fputs(bench::TableRow(row).c_str(), stdout);
    std::fflush(stdout);
  };
  if (!args.json) {
    std::printf("litetx bench: store %s%s, %.3g s per measurement in %d rounds, %u hardware "
                "threads\n",
                ctx.store_uri.c_str(), lmdb ? (" (--sync " + ctx.lmdb_sync + ")").c_str() : "",
                static_cast<double>(config.duration.count()) / 1000.0, config.rounds,
                std::thread::hardware_concurrency());
    std::printf("bound tx/s = raw CAS/s / (2N+3) (N = 1: raw CAS/s); target: ratio >= 0.9 "
                "and writes/tx <= 2N+3\n\n%s",
                bench::TableHeader().c_str());
    std::fflush(stdout);
  }
  auto report = bench::Run(store, config, EngineOptions(ctx), on_row);
  if (!report.ok()) return Fail(kExitStore, "benchmark setup: " + report.status().ToString());

  NativeRows native = RunNative(ctx, config, *report);

  if (args.json) {
    boost::json::object out = bench::ToJson(*report).as_object();
    if (!native.json.empty()) out["native"] = native.json;
    out["store"] = ctx.store_uri;
    out["sync"] = lmdb ? boost::json::value(ctx.lmdb_sync) : boost::json::value(nullptr);
    out["hardware_threads"] = std::thread::hardware_concurrency();
    PrintJson(out);
  } else {
    std::printf("\n%s\n", bench::ReadTable(*report).c_str());
    if (!native.lines.empty()) {
      std::printf("native alternative, no litetx: MULTI + N HSET + EXEC on one slot, pipelined, "
                  "1 thread\n  N       tx/s   p50 us    p99 us  litetx tx/s  litetx/native\n");
      for (const std::string& line : native.lines) std::fputs(line.c_str(), stdout);
      std::printf("\n");
    }
    std::printf("peak RSS %.1f MB (%.1f MB before the first measurement); targets %s\n",
                static_cast<double>(report->peak_rss_kb) / 1024.0,
                static_cast<double>(report->start_rss_kb) / 1024.0,
                report->all_targets_met() ? "all met" : "NOT all met");
    std::printf("collection %s: %s\n", report->collection.c_str(),
                args.keep ? "kept"
                          : (std::to_string(report->cleaned) + " documents erased; outcome "
                             "markers are left to the collector")
                                .c_str());
  }
  if (!report->cleanup_error.empty()) {
    Fail(kExitOk, "cleanup of " + report->collection + ": " + report->cleanup_error);
  }
  if (report->errors() + native.errors > 0) {
    return Fail(kExitFailed,
                std::to_string(report->errors() + native.errors) + " operations failed");
  }
  return kExitOk;
}

}  // namespace

void AddBench(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure the store's raw CAS rate, then transactions of N documents on it");
  CLI::Option* duration =
      cmd->add_option("--duration", args->duration, "Timed length of each measurement (2s, 500ms)");
  cmd->add_flag("--quick", args->quick, "Tiny measurements (25 ms each), for smoke tests");
  cmd->add_option("--threads", args->threads,
                  "Thread count measured besides 1 (each thread has its own documents)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--rounds", args->rounds,
                  "Slices each measurement is cut into, alternating raw CAS and transactions")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--sizes", args->sizes, "Documents per transaction, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", args->json, "Print one JSON object instead of a table");
  cmd->add_flag("--keep", args->keep, "Keep the benchmark's documents (collection bench.<pid>)");
  cmd->callback([&ctx, args, duration] {
    const bool given = duration->count() > 0;
    ctx.run = [&ctx, args, given] { return RunBench(ctx, *args, given); };
  });
}

}  // namespace litetx::cli
