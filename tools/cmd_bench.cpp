// tools/cmd_bench.cpp — `litetx bench`: the raw CAS rate of the store named by --store, then
// transactions of N documents on it (tx/s, latency, counted writes and round trips, peak
// memory) and committed against raw reads; on lmdb and Redis, the store's native multi-write
// transaction beside them. --delay D puts a modelled network round trip of D before every
// store call (a FaultInjectingStore with round_trip_delay and no faults) and reports latency
// in round trips as well; --plot FILE.svg draws the rows with gnuplot. The measurements are in
// bench/ (litetx_bench); see docs/benchmarks.md.
//
// SIGINT and SIGTERM (tools/signals.h), alike: the benchmark's threads stop at their next
// store call (each is parked there for good, as if the process had crashed at that point),
// the calls already under way are waited for, and then, on this thread and straight on the
// store: a collector settles the benchmark's transactions that were in flight (their lease
// lapses, since the parked threads no longer renew it: at most about one lease, 5 s), the
// benchmark's documents are erased (unless --keep), and the command exits 130 (SIGINT) or 143
// (SIGTERM) with one line on stderr saying what it settled and erased. Rows already measured
// stay printed. A second signal exits at once (130/143); the collector settles what is left
// after the lease, and the documents stay in collection bench.<pid>.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "bench/bench.h"
#include "bench/lmdb_native.h"
#include "bench/plot.h"
#ifdef LITETX_CLI_WITH_REDIS
#include "bench/redis_native.h"
#endif
#include "litetx/forwarding_store.h"
#include "tools/cli.h"
#include "tools/signals.h"

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
  std::string delay = "0";  // --delay: modelled round trip before every store call
  std::string plot;         // --plot: SVG file to draw
  std::vector<std::string> plot_with;  // --plot-with: earlier `bench --json` outputs to add
  bool hot = false;                    // --hot: every transaction of a thread on the same documents
  std::string finish = "background";   // --finish: where committed transactions are finished
  bool no_cache = false;               // --no-cache: Options::written_cache_bytes = 0
};

constexpr std::chrono::microseconds kMaxDelay = std::chrono::seconds(1);

// --delay: the duration syntax of every flag (ParseDuration), and also whole microseconds
// ("100us"), the scale of a network round trip. At most kMaxDelay.
Result<std::chrono::microseconds> ParseDelay(const std::string& text) {
  std::chrono::microseconds d{0};
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "us") == 0) {
    const std::string digits = text.substr(0, text.size() - 2);
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() ||
        n > static_cast<std::uint64_t>(kMaxDelay.count())) {
      return Status::InvalidArgument("bad delay '" + text + "' (expected a whole number and "
                                     "us, ms or s, at most 1s, e.g. 100us, 2ms)");
    }
    d = std::chrono::microseconds(static_cast<std::int64_t>(n));
  } else {
    auto ms = ParseDuration(text);
    if (!ms.ok()) return ms.status();
    if (*ms > kMaxDelay) {
      return Status::InvalidArgument("delay '" + text + "' is too long (at most 1s)");
    }
    d = *ms;
  }
  return d;
}

CLI::Validator DelayCheck() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        auto d = ParseDelay(s);
        return d.ok() ? std::string() : d.status().message();
      },
      "DURATION", "delay");
}

// "100us", "2ms": a delay as people write it.
std::string DelayText(std::chrono::microseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "ms";
  return std::to_string(d.count()) + "us";
}

// The store the benchmark runs on: forwards every call until a signal is noted, then parks the
// calling thread for good. Each thread marks a slot of its own while a call is under way (no
// shared counter, so the figures measured through it are not slowed by contention).
class ParkOnSignal : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  Result<std::optional<StoredDocument>> Get(const Key& key) override {
    return Call([&] { return ForwardingStore::Get(key); });
  }
  Result<Revision> Create(const Key& key, const boost::json::object& value) override {
    return Call([&] { return ForwardingStore::Create(key, value); });
  }
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override {
    return Call([&] { return ForwardingStore::Replace(key, expected, value); });
  }
  Status Erase(const Key& key, Revision expected) override {
    return Call([&] { return ForwardingStore::Erase(key, expected); });
  }
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override {
    return Call([&] { return ForwardingStore::Scan(collection, cursor, limit); });
  }
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override {
    return Call([&] { return ForwardingStore::ListCollections(cursor, limit); });
  }
  // A batch stays one call to the store below (one round trip, one LMDB transaction).
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    return Call([&] { return ForwardBatch(ops); });
  }

  // After a signal: waits until no call is under way (every later one parks). True if none
  // is left before `timeout` (each call is bounded by the store's own timeouts).
  bool WaitIdle(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& slot : slots_) {
      while (slot.busy.load()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return true;
  }

 private:
  struct alignas(64) Slot {
    std::atomic<bool> busy{false};
  };

  template <typename F>
  std::invoke_result_t<F> Call(F f) {
    Slot& slot = MySlot();
    slot.busy.store(true);  // sequentially consistent: ordered before the check below
    if (Interrupted() != 0) {
      slot.busy.store(false);
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until the process exits
    }
    auto r = f();
    slot.busy.store(false, std::memory_order_release);
    return r;
  }

  Slot& MySlot() {
    thread_local Slot* slot = nullptr;  // one ParkOnSignal per process
    if (slot == nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      slot = &slots_.emplace_back();
    }
    return *slot;
  }

  std::mutex mu_;
  std::deque<Slot> slots_;  // one per thread that ever called; never moved
};

// Transaction records created since `since_ms` that are not outcome markers yet.
Result<std::uint64_t> OpenSince(Database& db, std::int64_t since_ms) {
  auto list = db.ListTransactions();
  if (!list.ok()) return list.status();
  std::uint64_t open = 0;
  for (const TxnSummary& t : *list) open += !t.done && t.created_ms >= since_ms ? 1 : 0;
  return open;
}

// After a signal stopped the benchmark mid-run (its threads parked in `parking`): settles its
// transactions in flight, erases its documents unless `keep`, and ends the process with
// 130/143. Runs on the main thread, straight on `store`.
[[noreturn]] void StopAfterSignal(const Context& ctx, const std::shared_ptr<Store>& store,
                                  ParkOnSignal& parking, const std::string& collection,
                                  bool keep, std::int64_t started_ms,
                                  const std::string& native_dir) {
  std::fflush(stdout);
  std::fprintf(stderr, "litetx: interrupted (%s): stopping the benchmark, settling its "
               "transactions in flight%s\n", InterruptedName(),
               keep ? "" : (" and erasing collection " + collection).c_str());
  std::fflush(stderr);
  std::string problem;
  if (!parking.WaitIdle(std::chrono::seconds(30))) problem = "a store call did not return";
  const Options engine = EngineOptions(ctx);
  Database db(store, engine);
  CollectorOptions co;
  co.engine = engine;
  Collector gc(store, co);
  // The records' GC timestamps pass within a lease of the last renewal.
  const auto deadline = std::chrono::steady_clock::now() + engine.lease + std::chrono::seconds(10);
  std::uint64_t open = 0;
  for (;;) {
    (void)gc.RunOnce();
    auto o = OpenSince(db, started_ms);
    if (!o.ok() && problem.empty()) problem = "listing transactions: " + o.status().ToString();
    open = o.ok() ? *o : 1;
    if (open == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const CollectorStats st = gc.stats();
  std::uint64_t erased = 0;
  std::string erase_error;
  if (!keep) erased = bench::EraseCollection(*store, collection, &erase_error);
  if (!native_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(native_dir, ec);  // the native alternative's scratch copy
  }
  std::fprintf(stderr,
               "litetx: benchmark stopped: %llu transactions in flight settled (%llu finished, "
               "%llu rolled back), %llu left open; collection %s: %s%s%s\n",
               static_cast<unsigned long long>(st.finished + st.reversed),
               static_cast<unsigned long long>(st.finished),
               static_cast<unsigned long long>(st.reversed),
               static_cast<unsigned long long>(open), collection.c_str(),
               keep ? "kept" : (std::to_string(erased) + " documents erased").c_str(),
               erase_error.empty() ? "" : ("; " + erase_error).c_str(),
               problem.empty() ? "" : ("; " + problem).c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(ExitAfterSignal(kExitFailed));  // the benchmark's threads are parked: no join
}

// The native alternative, no litetx, one row per size (empty on memory:):
//   lmdb:                          one LMDB write transaction of N read-modify-writes, raw
//                                  liblmdb calls, same durability (bench/lmdb_native.h), in a
//                                  directory of its own inside the store's, removed afterwards;
//                                  measured by bench::Run alternating with the rows
//                                  (LmdbNativeRows);
//   redis:// and redis-cluster://  MULTI/EXEC of N writes on one slot, straight through
//                                  hiredis (bench/redis_native.h), after the rows (RunNative).
struct NativeRows {
  std::string kind;     // "lmdb_txn" or "redis_multi_exec"
  std::string heading;  // what the rows measure, for the table
  std::vector<std::string> lines;
  boost::json::array json;
  bench::PlotSeries series;
  std::uint64_t errors = 0;
};

// `count_errors`: false when the errors are already in Report::errors (TxRow::native).
void AddNativeRow(NativeRows& out, int n, const bench::Measured& m, const bench::Report& report,
                  bool count_errors = true) {
  double litetx = 0;
  for (const bench::TxRow& r : report.rows) {
    if (r.n == n && r.threads == 1) litetx = r.tx.ops_per_s;
  }
  if (count_errors) out.errors += m.errors;
  // What portability costs: litetx's rate as a fraction of the native one.
  const double ratio = m.ops_per_s > 0 ? litetx / m.ops_per_s : 0.0;
  char line[200];
  std::snprintf(line, sizeof line, "%3d %10.0f %8.1f %9.1f %12.0f %8.3f\n", n, m.ops_per_s,
                m.p50_us, m.p99_us, litetx, ratio);
  out.lines.push_back(line);
  boost::json::object o{{"kind", out.kind},     {"n", n},
                        {"threads", 1},         {"tx_per_s", std::llround(m.ops_per_s)},
                        {"p50_us", m.p50_us},   {"p99_us", m.p99_us},
                        {"ops", m.ops},         {"errors", m.errors},
                        {"litetx_tx_per_s", std::llround(litetx)},
                        {"litetx_to_native", std::round(ratio * 1000) / 1000}};
  if (!m.first_error.empty()) o["first_error"] = m.first_error;
  out.json.push_back(std::move(o));
  out.series.points.push_back({n, m.ops_per_s, m.p50_us, m.p99_us});
}

// The lmdb native rows, measured by bench::Run (TxRow::native of the 1-thread rows).
NativeRows LmdbNativeRows(const Context& ctx, const bench::Report& report,
                          const std::string& label, const std::string& open_error) {
  NativeRows out;
  out.kind = "lmdb_txn";
  out.heading = "native alternative, no litetx: one LMDB write transaction of N read-modify-"
                "writes (mdb_get, JSON, mdb_put), --sync " + ctx.lmdb_sync + ", 1 thread, "
                "measured in slices alternating with the rows";
  out.series.title = label + ", native LMDB txn, 1 thread";
  if (!open_error.empty()) {
    out.lines.push_back("  " + open_error + "\n");
    ++out.errors;
    return out;
  }
  for (const bench::TxRow& r : report.rows) {
    if (r.threads == 1 && r.native.attempts > 0) AddNativeRow(out, r.n, r.native, report, false);
  }
  return out;
}

NativeRows RunNative(const Context& ctx, const bench::Config& config,
                     const bench::Report& report, const std::string& label) {
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
  out.kind = "redis_multi_exec";
  out.heading = "native alternative, no litetx: MULTI + N HSET + EXEC on one slot, pipelined, "
                "1 thread";
  out.series.title = label + ", native MULTI/EXEC, 1 thread";
  for (int n : config.sizes) {
    if (Interrupted() != 0) break;
    auto row = bench::MeasureRedisMultiExec(ro.host, ro.port, ro.db, ro.prefix, n,
                                            config.duration);
    if (!row.ok()) {
      out.lines.push_back("  native MULTI/EXEC: " + row.status().message() + "\n");
      ++out.errors;
      break;
    }
    AddNativeRow(out, n, row->tx, report);
  }
#else
  (void)config;
  (void)report;
  (void)label;
#endif
  return out;
}

// The store as the plot's legend names it: "memory:", "lmdb nosync", "redis://HOST:PORT",
// with " +100us/call" for a modelled round trip.
std::string StoreLabel(const Context& ctx, std::chrono::microseconds delay) {
  std::string label = ctx.store_uri;
  if (label.rfind("lmdb:", 0) == 0) label = "lmdb " + ctx.lmdb_sync;
  const std::size_t query = label.find('?');
  if (query != std::string::npos) label.resize(query);
  if (delay.count() > 0) label += " +" + DelayText(delay) + "/call";
  return label;
}

// The plot's series of one `bench --json` output: litetx at each thread count, then the native
// rows if any. kInvalidArgument if it is not such an output.
Result<std::vector<bench::PlotSeries>> SeriesOfJson(const boost::json::value& v) {
  const auto* o = v.if_object();
  const boost::json::value* rows = o ? o->if_contains("rows") : nullptr;
  const boost::json::value* store = o ? o->if_contains("store") : nullptr;
  if (rows == nullptr || !rows->is_array() || store == nullptr || !store->is_string()) {
    return Status::InvalidArgument("not the output of `litetx bench --json` (no rows or store)");
  }
  Context c;
  c.store_uri = std::string(store->as_string());
  if (const auto* sync = o->if_contains("sync"); sync != nullptr && sync->is_string()) {
    c.lmdb_sync = std::string(sync->as_string());
  }
  std::chrono::microseconds delay{0};
  if (const auto* d = o->if_contains("delay_us"); d != nullptr && d->is_number()) {
    delay = std::chrono::microseconds(d->to_number<std::int64_t>());
  }
  const std::string label = StoreLabel(c, delay);
  const auto point = [](const boost::json::value& row) -> std::optional<bench::PlotPoint> {
    const auto* r = row.if_object();
    if (r == nullptr) return std::nullopt;
    bench::PlotPoint p;
    try {
      p.n = r->at("n").to_number<int>();
      p.tx_per_s = r->at("tx_per_s").to_number<double>();
      p.p50_us = r->at("p50_us").to_number<double>();
      p.p99_us = r->at("p99_us").to_number<double>();
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return p;
  };
  std::vector<bench::PlotSeries> out;
  std::vector<int> thread_counts;
  for (const boost::json::value& row : rows->as_array()) {
    const auto* r = row.if_object();
    const auto* t = r ? r->if_contains("threads") : nullptr;
    auto p = point(row);
    if (t == nullptr || !t->is_number() || !p) {
      return Status::InvalidArgument("a row without n, threads, tx_per_s, p50_us or p99_us");
    }
    const int threads = t->to_number<int>();
    auto it = std::find(thread_counts.begin(), thread_counts.end(), threads);
    if (it == thread_counts.end()) {
      thread_counts.push_back(threads);
      out.push_back({label + ", litetx, " + std::to_string(threads) +
                         (threads == 1 ? " thread" : " threads"),
                     {}});
      it = thread_counts.end() - 1;
    }
    out[static_cast<std::size_t>(it - thread_counts.begin())].points.push_back(*p);
  }
  if (const auto* native = o->if_contains("native"); native != nullptr && native->is_array()) {
    bench::PlotSeries s;
    for (const boost::json::value& row : native->as_array()) {
      auto p = point(row);
      if (!p) return Status::InvalidArgument("a native row without n, tx_per_s, p50_us or p99_us");
      const auto* kind = row.as_object().if_contains("kind");
      s.title = label + (kind != nullptr && *kind == "redis_multi_exec"
                             ? ", native MULTI/EXEC, 1 thread"
                             : ", native LMDB txn, 1 thread");
      s.points.push_back(*p);
    }
    if (!s.points.empty()) out.push_back(std::move(s));
  }
  return out;
}

// Reads the --plot-with files; kInvalidArgument naming the file if one cannot be used.
Result<std::vector<bench::PlotSeries>> ReadPlotWith(const std::vector<std::string>& files) {
  std::vector<bench::PlotSeries> out;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return Status::InvalidArgument(file + ": cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(text.str(), ec);
    if (ec) return Status::InvalidArgument(file + ": not JSON: " + ec.message());
    auto series = SeriesOfJson(v);
    if (!series.ok()) return Status::InvalidArgument(file + ": " + series.status().message());
    out.insert(out.end(), series->begin(), series->end());
  }
  return out;
}

int RunBench(const Context& ctx, const BenchArgs& args, bool duration_given) {
  CatchSignals();  // before the store and the benchmark start any thread
  bench::Config config;
  config.collection = "bench." + std::to_string(::getpid());
  config.threads = args.threads;
  config.rounds = args.rounds;
  config.sizes = args.sizes;
  if (config.sizes.empty()) config.sizes = {1, 2, 4, 16};
  for (std::size_t i = 0; i < config.sizes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (config.sizes[i] == config.sizes[j]) {
        return Fail(kExitUsage, "--sizes: " + std::to_string(config.sizes[i]) +
                                    " is given twice (each size is measured once)");
      }
    }
  }
  config.cleanup = !args.keep;
  config.hot = args.hot;
  if (args.quick && !duration_given) {
    config.duration = std::chrono::milliseconds(25);
  } else if (auto d = ParseDuration(args.duration); !d.ok() || d->count() <= 0) {
    return Fail(kExitUsage, "--duration: " + (d.ok() ? "must be more than 0" : d.status().message()));
  } else {
    config.duration = *d;
  }
  auto delay = ParseDelay(args.delay);
  if (!delay.ok()) return Fail(kExitUsage, "--delay: " + delay.status().message());
  config.calibrate_round_trip = delay->count() > 0;
  // gnuplot is looked for before anything is measured, so that a missing one costs nothing.
  std::string gnuplot;
  if (!args.plot_with.empty() && args.plot.empty()) {
    return Fail(kExitUsage, "--plot-with: only with --plot");
  }
  auto plot_with = ReadPlotWith(args.plot_with);
  if (!plot_with.ok()) return Fail(kExitUsage, "--plot-with: " + plot_with.status().message());
  if (!args.plot.empty()) {
    gnuplot = bench::FindInPath("gnuplot");
    if (gnuplot.empty()) {
      return Fail(kExitUsage, "--plot: gnuplot is not installed (not found in PATH); install "
                              "it (Debian: apt-get install gnuplot-nox) or leave out --plot");
    }
  }
  int code = kExitOk;
  auto store = OpenStore(ctx, &code);
  if (!store) return code;
  const bool lmdb = ctx.store_uri.rfind("lmdb", 0) == 0;
  // Under --delay the benchmark (raw CAS, transactions, reads) runs on the store behind a
  // modelled round trip; the cleanup after a signal goes straight to the store.
  std::shared_ptr<Store> measured = store;
  if (delay->count() > 0) {
    FaultOptions fo;
    fo.round_trip_delay = *delay;
    measured = std::make_shared<FaultInjectingStore>(store, fo);
  }
  const bool rt_columns = config.calibrate_round_trip;
  // On lmdb:, the native alternative, measured alongside the 1-thread rows.
  std::unique_ptr<bench::NativeLmdb> native_lmdb;
  std::string native_error;
  if (ctx.store_uri.rfind("lmdb:", 0) == 0) {
    LmdbDurability durability = LmdbDurability::kDurable;
    if (ctx.lmdb_sync == "nometasync") durability = LmdbDurability::kNoMetaSync;
    if (ctx.lmdb_sync == "nosync") durability = LmdbDurability::kNoSync;
    auto opened = bench::NativeLmdb::Open(
        ctx.store_uri.substr(5) + "/bench-native." + std::to_string(::getpid()), durability,
        *std::max_element(config.sizes.begin(), config.sizes.end()));
    if (opened.ok()) {
      native_lmdb = std::move(*opened);
      bench::NativeLmdb* n = native_lmdb.get();
      config.native = [n](int size) { return n->Transact(size); };
    } else {
      native_error = opened.status().message();
    }
  }

  auto on_row = [&](const bench::TxRow& row) {
    if (args.json) return;
    std::fputs(bench::TableRow(row, rt_columns).c_str(), stdout);
    std::fflush(stdout);
  };
  if (!args.json) {
    std::printf("litetx bench: store %s%s%s, %.3g s per measurement in %d rounds, %u hardware "
                "threads\n",
                ctx.store_uri.c_str(), lmdb ? (" (--sync " + ctx.lmdb_sync + ")").c_str() : "",
                delay->count() > 0
                    ? (", a modelled round trip of " + DelayText(*delay) + " before every "
                       "store call").c_str()
                    : "",
                static_cast<double>(config.duration.count()) / 1000.0, config.rounds,
                std::thread::hardware_concurrency());
    std::printf("bound tx/s = raw CAS/s / (2N+3) (N = 1: raw CAS/s); target: ratio >= 0.9 "
                "and writes/tx <= 2N+3\nRT/tx: store calls (round trips) per commit, counted, "
                "from every thread; crit RT/tx: those the committing thread made inside "
                "Commit\n\n%s",
                bench::TableHeader(rt_columns).c_str());
    std::fflush(stdout);
  }
  // The benchmark runs on its own thread through ParkOnSignal, so that a signal can stop it
  // between two store calls while this thread cleans up.
  const std::int64_t started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  auto parking = std::make_shared<ParkOnSignal>(measured);
  std::optional<Result<bench::Report>> result;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    Options engine = EngineOptions(ctx);
    engine.finish_in_background = args.finish == "background";
    if (args.no_cache) engine.written_cache_bytes = 0;
    result.emplace(bench::Run(parking, config, engine, on_row));
    done = true;
    Wake();
  });
  WaitForSignal([&] { return done.load(); }, std::chrono::milliseconds::max());
  if (!done) {
    runner.detach();  // parked at its next store call; StopAfterSignal ends the process
    StopAfterSignal(ctx, store, *parking, config.collection, args.keep, started_ms,
                    native_lmdb ? native_lmdb->dir() : std::string());
  }
  runner.join();
  Result<bench::Report>& report = *result;
  if (!report.ok()) {
    return Fail(ExitAfterSignal(kExitStore), "benchmark setup: " + report.status().ToString());
  }

  const std::string label = StoreLabel(ctx, *delay);
  // The native rows are skipped after a signal; one that comes during them lets them end.
  NativeRows native = lmdb ? LmdbNativeRows(ctx, *report, label, native_error)
                     : Interrupted() != 0 ? NativeRows{}
                                          : RunNative(ctx, config, *report, label);
  native_lmdb.reset();  // removes its directory

  if (args.json) {
    boost::json::object out = bench::ToJson(*report).as_object();
    if (!native.json.empty()) out["native"] = native.json;
    out["store"] = ctx.store_uri;
    out["sync"] = lmdb ? boost::json::value(ctx.lmdb_sync) : boost::json::value(nullptr);
    out["delay_us"] = delay->count();
    out["hardware_threads"] = std::thread::hardware_concurrency();
    PrintJson(out);
  } else {
    if (std::string line = bench::RoundTripLine(*report); !line.empty()) {
      std::printf("\n%s", line.c_str());
    }
    std::printf("\n%s\n", bench::ReadTable(*report).c_str());
    if (!native.lines.empty()) {
      std::printf("%s\n  N       tx/s   p50 us    p99 us  litetx tx/s  litetx/native\n",
                  native.heading.c_str());
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
  bool plot_failed = false;
  if (!gnuplot.empty() && Interrupted() == 0) {
    std::vector<bench::PlotSeries> series;
    std::vector<int> thread_counts;
    for (const bench::TxRow& r : report->rows) {
      if (std::find(thread_counts.begin(), thread_counts.end(), r.threads) ==
          thread_counts.end()) {
        thread_counts.push_back(r.threads);
      }
    }
    for (int t : thread_counts) {
      bench::PlotSeries s;
      s.title = label + ", litetx, " + std::to_string(t) + (t == 1 ? " thread" : " threads");
      for (const bench::TxRow& r : report->rows) {
        if (r.threads == t) s.points.push_back({r.n, r.tx.ops_per_s, r.tx.p50_us, r.tx.p99_us});
      }
      series.push_back(std::move(s));
    }
    if (!native.series.points.empty()) series.push_back(native.series);
    std::string title = "litetx bench: " + label;
    if (!plot_with->empty()) title = "litetx bench";
    series.insert(series.end(), plot_with->begin(), plot_with->end());
    Status s = bench::WritePlot(gnuplot, title, series, args.plot);
    if (!s.ok()) {
      Fail(kExitOk, "--plot: " + s.message());
      plot_failed = true;
    } else if (!args.json) {
      std::printf("plot written to %s\n", args.plot.c_str());
    }
  }
  if (Interrupted() != 0) {
    return Fail(ExitAfterSignal(kExitOk), std::string("interrupted (") + InterruptedName() +
                                              "): the benchmark had finished; cleaned up as usual");
  }
  if (report->errors() + native.errors > 0) {
    return Fail(kExitFailed,
                std::to_string(report->errors() + native.errors) + " operations failed");
  }
  return plot_failed ? kExitFailed : kExitOk;
}

}  // namespace

void AddBench(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure the store's raw CAS rate, then transactions of N documents on it");
  CLI::Option* duration =
      cmd->add_option("--duration", args->duration, "Timed length of each measurement (2s, 500ms)")
      ->check(DurationCheck());
  cmd->add_flag("--quick", args->quick, "Tiny measurements (25 ms each), for smoke tests");
  cmd->add_option("--threads", args->threads,
                  "Thread count measured besides 1 (each thread has its own documents)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--rounds", args->rounds,
                  "Slices each measurement is cut into, alternating raw CAS and transactions")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--sizes", args->sizes, "Documents per transaction, comma-separated")
      ->delimiter(',')
      ->check(WholeNumberCheck(1, 1000));
  cmd->add_flag("--json", args->json, "Print one JSON object instead of a table");
  cmd->add_flag("--keep", args->keep, "Keep the benchmark's documents (collection bench.<pid>)");
  cmd->add_option("--delay", args->delay,
                  "Modelled network round trip before every store call (100us, 2ms; 0: none); "
                  "latency is then reported in round trips too")
      ->check(DelayCheck());
  cmd->add_flag("--hot", args->hot,
                "Every transaction of a thread on the same N documents (default: each thread "
                "cycles through 8 groups of N documents)");
  cmd->add_option("--finish", args->finish,
                  "Finish committed transactions in the background (the default) or inline, "
                  "before Commit returns")
      ->check(CLI::IsMember({"background", "inline"}));
  cmd->add_flag("--no-cache", args->no_cache,
                "Read every document before writing it (Options::written_cache_bytes = 0; "
                "default: a document this Database wrote last is written without a read)");
  cmd->add_option("--plot", args->plot,
                  "Draw tx/s and p50/p99 latency against N into this SVG file (needs gnuplot)");
  cmd->add_option("--plot-with", args->plot_with,
                  "Also draw the rows of an earlier `bench --json` output (repeatable)")
      ->check(CLI::ExistingFile);
  cmd->callback([&ctx, args, duration] {
    const bool given = duration->count() > 0;
    ctx.run = [&ctx, args, given] { return RunBench(ctx, *args, given); };
  });
}

}  // namespace litetx::cli
