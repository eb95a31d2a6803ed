// tests/cli/cli_bench_test.cpp — `litetx bench`: the store calls a commit costs are counted
// exactly (writes, round trips in all and on the committing thread's critical path), --delay
// puts a modelled round trip before every store call and calibrates it, --plot draws an SVG
// with gnuplot, and without gnuplot --plot fails before measuring anything. Speeds are never
// asserted; every run is a few hundred milliseconds.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

double D(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_number()) {
    ADD_FAILURE() << "no number \"" << key << "\" in " << json::serialize(o);
    return -1;
  }
  return v->to_number<double>();
}

const json::array& Array(const json::object& o, const char* key) {
  static const json::array kEmpty;
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_array()) {
    ADD_FAILURE() << "no array \"" << key << "\" in " << json::serialize(o);
    return kEmpty;
  }
  return v->as_array();
}

// Sets PATH for the children this test starts; puts the old value back when it goes.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& path) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", path.c_str(), 1);
  }
  ~ScopedPath() {
    if (old_) {
      ::setenv("PATH", old_->c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
  }
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;

 private:
  std::optional<std::string> old_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The directory holding the gnuplot the build found (CMake's find_program).
std::string GnuplotDir() {
  const std::string g = LITETX_GNUPLOT;
  return g.substr(0, g.rfind('/'));
}

// The store calls of one commit. N = 1 takes the one-write fast path: 1 Get + 1 Replace = 2
// round trips, 1 write. N >= 2 (the parallel commit, the default) reads its N documents in one
// batch, writes the record (staging) and its N applies in one batch (committed once all have
// landed), flips the record to committed, finishes the N documents in one batch and writes the
// outcome marker: 2N+3 writes, N reads, 5 round trips of which 3 are batches. With --finish
// inline all 5 are made by the committing thread before Commit returns; every commit of this
// uncontended run costs the same, so the figures are exact.
TEST_F(CliTest, BenchCountsWritesAndRoundTripsPerCommitExactly) {
  // One slice of 50 ms per measurement: long enough for commits in every row on a busy
  // machine.
  RunResult r = RunCli({"--store", "memory:", "bench", "--duration", "50ms", "--rounds", "1",
                        "--json", "--sizes", "1,2,4", "--threads", "2", "--finish", "inline",
                        "--no-cache"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json::object o = r.Json();
  const json::array& rows = Array(o, "rows");
  ASSERT_EQ(rows.size(), 6u) << r.out;  // sizes 1, 2, 4 with 1 and 2 threads
  for (const json::value& v : rows) {
    const json::object& row = v.as_object();
    const double n = D(row, "n");
    SCOPED_TRACE("N=" + std::to_string(static_cast<int>(n)) + " threads=" +
                 std::to_string(static_cast<int>(D(row, "threads"))));
    EXPECT_EQ(D(row, "errors"), 0);
    EXPECT_GT(D(row, "commits"), 0);
    EXPECT_EQ(D(row, "writes_per_tx"), n == 1 ? 1 : 2 * n + 3);
    EXPECT_EQ(D(row, "reads_per_tx"), n);
    EXPECT_EQ(D(row, "round_trips_per_tx"), n == 1 ? 2 : 5);
    EXPECT_EQ(D(row, "critical_round_trips_per_tx"), n == 1 ? 2 : 5);
    EXPECT_EQ(D(row, "batches_per_tx"), n == 1 ? 0 : 3);
    EXPECT_FALSE(row.contains("p50_round_trips")) << "no calibration without --delay";
  }
  EXPECT_FALSE(o.contains("round_trip")) << "no calibration without --delay";
  EXPECT_EQ(D(o, "delay_us"), 0);
  std::printf("[bench] round trips per commit on memory, finishing inline: N=1 %g, N=2 %g, "
              "N=4 %g\n",
              D(rows[0].as_object(), "round_trips_per_tx"),
              D(rows[1].as_object(), "round_trips_per_tx"),
              D(rows[2].as_object(), "round_trips_per_tx"));
}

// The same run with the written-document cache (the default): a thread's transaction reads its
// documents only the first time it meets them (each row starts with a new Database, and each
// thread cycles through 8 groups of N documents); afterwards the cache's image is written at
// its revision without a read. So at most 8 * N reads per thread and row, the one-write path
// makes 1 round trip instead of 2 and the others 4 instead of 5, and the writes are unchanged.
TEST_F(CliTest, BenchWithTheWrittenCacheSkipsTheReads) {
  RunResult r = RunCli({"--store", "memory:", "bench", "--duration", "50ms", "--rounds", "1",
                        "--json", "--sizes", "1,2,4", "--threads", "2", "--finish", "inline"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json::object o = r.Json();
  const json::array& rows = Array(o, "rows");
  ASSERT_EQ(rows.size(), 6u) << r.out;
  for (const json::value& v : rows) {
    const json::object& row = v.as_object();
    const double n = D(row, "n");
    const double threads = D(row, "threads");
    const double commits = D(row, "commits");
    SCOPED_TRACE("N=" + std::to_string(static_cast<int>(n)) + " threads=" +
                 std::to_string(static_cast<int>(threads)));
    EXPECT_EQ(D(row, "errors"), 0);
    ASSERT_GT(commits, 0);
    EXPECT_EQ(D(row, "writes_per_tx"), n == 1 ? 1 : 2 * n + 3);
    // Figures are printed with 3 decimals: 0.001 of slack.
    const double first_reads = 8 * n * threads / commits;
    EXPECT_LE(D(row, "reads_per_tx"), first_reads + 0.001);
    EXPECT_GE(D(row, "round_trips_per_tx"), n == 1 ? 1 : 4);
    EXPECT_LE(D(row, "round_trips_per_tx"),
              (n == 1 ? 1 : 4) + 8 * threads / commits + 0.001);
    std::printf("[bench] with the written cache, N=%g threads=%g: %g reads and %g round trips "
                "per commit over %g commits\n",
                n, threads, D(row, "reads_per_tx"), D(row, "round_trips_per_tx"), commits);
  }
}

// Finishing in the background (the default) moves the flip, the finish batch and the marker
// off the committing thread: the writes stay exactly 2N+3 (whoever makes them), and the
// critical path is 2 round trips (the read batch, then the batch of the record and the
// applies) when the finisher keeps up. With --delay 1ms it does: a commit takes 2 ms on the
// committing thread, its finishing 3 ms on one of the 2 finisher threads, and a thread's
// next commit on the same documents comes 8 commits later; so every figure is exact, for N = 1
// (the one-write path: nothing to finish) and N >= 2. A commit that meets documents still
// being finished reads their holder's record (reads/tx above N) and costs more round trips; on
// an overloaded machine a finisher thread can be held up that long, so such a run is made
// again (at most 3 runs; the last is asserted whatever it shows). Without a delay the finisher
// can fall behind a committing thread that never waits, and a transaction that meets documents
// still being finished finishes them first: more round trips on its critical path, never
// fewer; and the finisher then finishes up to 32 queued transactions with one batch of flips,
// one of documents and one of markers, so a commit's share of the round trips falls below 5
// (never below its own 2 plus its share, 3/32, of one such set).
TEST_F(CliTest, BenchFinishingInTheBackgroundLeavesTwoRoundTripsOnTheCriticalPath) {
  json::object o;
  int runs = 0;
  for (bool kept_up = false; !kept_up && runs < 3;) {
    ++runs;
    RunResult r = RunCli({"--store", "memory:", "bench", "--duration", "100ms", "--rounds", "1",
                          "--json", "--sizes", "1,2,4", "--threads", "1", "--delay", "1ms",
                          "--no-cache"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    o = r.Json();
    kept_up = true;
    for (const json::value& v : Array(o, "rows")) {
      if (D(v.as_object(), "reads_per_tx") != D(v.as_object(), "n")) kept_up = false;
    }
  }
  const json::array& rows = Array(o, "rows");
  ASSERT_EQ(rows.size(), 3u) << json::serialize(o);
  std::printf("[bench] --delay 1ms, finishing in the background: %d run(s) until no commit met "
              "documents still being finished\n",
              runs);
  for (const json::value& v : rows) {
    const json::object& row = v.as_object();
    const double n = D(row, "n");
    SCOPED_TRACE("--delay 1ms, N=" + std::to_string(static_cast<int>(n)));
    EXPECT_EQ(D(row, "errors"), 0);
    EXPECT_GT(D(row, "commits"), 0);
    EXPECT_EQ(D(row, "writes_per_tx"), n == 1 ? 1 : 2 * n + 3);
    EXPECT_EQ(D(row, "reads_per_tx"), n);
    EXPECT_EQ(D(row, "round_trips_per_tx"), n == 1 ? 2 : 5);
    EXPECT_EQ(D(row, "critical_round_trips_per_tx"), 2);
    EXPECT_EQ(D(row, "batches_per_tx"), n == 1 ? 0 : 3);
    std::printf("[bench] --delay 1ms, N=%g finishing in the background: %g round trips per "
                "commit, %g on the critical path\n",
                n, D(row, "round_trips_per_tx"), D(row, "critical_round_trips_per_tx"));
  }

  RunResult fast = RunCli({"--store", "memory:", "bench", "--duration", "50ms", "--rounds", "1",
                           "--json", "--sizes", "2,4", "--threads", "1", "--no-cache"});
  ASSERT_EQ(fast.code, 0) << fast.out << fast.err;
  const json::object fast_o = fast.Json();
  const json::array& fast_rows = Array(fast_o, "rows");
  ASSERT_EQ(fast_rows.size(), 2u) << fast.out;
  for (const json::value& v : fast_rows) {
    const json::object& row = v.as_object();
    const double n = D(row, "n");
    SCOPED_TRACE("no delay, N=" + std::to_string(static_cast<int>(n)));
    EXPECT_EQ(D(row, "errors"), 0);
    EXPECT_GT(D(row, "commits"), 0);
    EXPECT_EQ(D(row, "writes_per_tx"), 2 * n + 3);
    EXPECT_GE(D(row, "reads_per_tx"), n);
    EXPECT_GE(D(row, "round_trips_per_tx"), 2 + 3.0 / 32);
    EXPECT_GE(D(row, "critical_round_trips_per_tx"), 2);
    EXPECT_LE(D(row, "critical_round_trips_per_tx"), D(row, "round_trips_per_tx"));
    std::printf("[bench] no delay, N=%g finishing in the background: %g round trips per "
                "commit, %g on the critical path\n",
                n, D(row, "round_trips_per_tx"), D(row, "critical_round_trips_per_tx"));
  }
}

// --delay 1ms: every store call sleeps at least 1 ms first, so one Get takes at least 1 ms
// and a commit at least 2 ms (2 calls on its critical path for N = 1 and, finishing in the
// background, for N >= 2). The histogram reports a bucket's midpoint, within 3 % of the
// value: hence the 0.97. The latency in round trips is the commit's latency over the
// calibrated Get's p50.
TEST_F(CliTest, BenchDelayModelsARoundTripAndCalibratesIt) {
  RunResult r = RunCli({"--store", "memory:", "bench", "--json", "--duration", "100ms",
                        "--rounds", "2", "--sizes", "1,2", "--threads", "1", "--delay", "1ms",
                        "--no-cache"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json::object o = r.Json();
  EXPECT_EQ(D(o, "delay_us"), 1000);
  ASSERT_TRUE(o.contains("round_trip") && o.at("round_trip").is_object()) << r.out;
  const json::object& rt = o.at("round_trip").as_object();
  const double get_p50 = D(rt, "get_p50_us");
  EXPECT_GE(get_p50, 0.97 * 1000);
  EXPECT_GT(D(rt, "gets"), 0);
  EXPECT_EQ(D(rt, "errors"), 0);
  const json::array& rows = Array(o, "rows");
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (const json::value& v : rows) {
    const json::object& row = v.as_object();
    const double n = D(row, "n");
    SCOPED_TRACE("N=" + std::to_string(static_cast<int>(n)));
    // On the critical path, as counted in the test above: 2, more only for commits that met
    // documents still being finished (which read their holder's record: reads/tx above N).
    const double calls = 2;
    EXPECT_GE(D(row, "critical_round_trips_per_tx"), calls);
    if (D(row, "reads_per_tx") == n) {
      EXPECT_EQ(D(row, "critical_round_trips_per_tx"), calls);
    }
    EXPECT_GE(D(row, "p50_us"), 0.97 * calls * 1000);
    // The round-trip figures are the latencies over the calibration (both printed rounded).
    EXPECT_NEAR(D(row, "p50_round_trips"), D(row, "p50_us") / get_p50, 0.01);
    EXPECT_NEAR(D(row, "p99_round_trips"), D(row, "p99_us") / get_p50, 0.01);
    EXPECT_GE(D(row, "p50_round_trips"), 1.0) << "a commit makes at least one round trip";
    std::printf("[bench] --delay 1ms: N=%g p50 %.0f us = %.2f round trips of %.0f us\n", n,
                D(row, "p50_us"), D(row, "p50_round_trips"), get_p50);
  }

  // The table says what the unit is and shows the columns.
  RunResult t = RunCli({"--store", "memory:", "bench", "--quick", "--sizes", "1", "--threads",
                        "1", "--delay", "500us"});
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  EXPECT_NE(t.out.find("a modelled round trip of 500us before every store call"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("round trip: one Store::Get through this store, p50 "), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("p50 RT  p99 RT"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("crit RT/tx"), std::string::npos) << t.out;
}

TEST_F(CliTest, BenchDelayRefusesBadValues) {
  for (const char* bad : {"5", "1.5ms", "-1us", "2s", "1000001us", "us", "10 us"}) {
    RunResult r = RunCli({"--store", "memory:", "bench", "--quick", "--delay", bad});
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--delay"), std::string::npos) << bad << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << bad << ": nothing is measured: " << r.out;
  }
}

// The ids of the gnuplot_plot groups of `svg` that name `title` in a <text> (the legend entry)
// and also hold a path of at least `segments` line segments (the plotted series, not the
// legend's sample line, which has one).
int PlottedGroups(const std::string& svg, const std::string& title, int segments) {
  int found = 0;
  std::size_t pos = 0;
  const std::string open = "<g id=\"gnuplot_plot_";
  while ((pos = svg.find(open, pos)) != std::string::npos) {
    std::size_t next = svg.find(open, pos + open.size());
    const std::string group =
        svg.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    pos += open.size();
    if (group.find("<text>" + title + "</text>") == std::string::npos) continue;
    std::size_t p = 0;
    while ((p = group.find("<path ", p)) != std::string::npos) {
      const std::size_t end = group.find("/>", p);
      const std::string path = group.substr(p, end - p);
      int lines = 0;
      for (std::size_t l = path.find(" L"); l != std::string::npos; l = path.find(" L", l + 2)) {
        ++lines;
      }
      if (lines >= segments) {
        ++found;
        break;
      }
      p = end;
    }
  }
  return found;
}

// On LMDB the native alternative runs in the same process, in a directory of its own that is
// removed afterwards, and --plot draws one line per series: litetx at each thread count and
// the native LMDB transaction.
TEST_F(CliTest, BenchPlotsEverySeriesIntoAnSvgBesideTheNativeLmdbRows) {
  ScopedPath path(GnuplotDir() + ":" + (std::getenv("PATH") ? std::getenv("PATH") : ""));
  const std::string svg_path = dir_ + "/bench.svg";
  RunResult r = Cli({"bench", "--quick", "--json", "--sizes", "1,2,4", "--threads", "2",
                     "--plot", svg_path});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json::object o = r.Json();
  const json::array& native = Array(o, "native");
  ASSERT_EQ(native.size(), 3u) << r.out;
  const int sizes[] = {1, 2, 4};
  for (std::size_t i = 0; i < native.size(); ++i) {
    const json::object& row = native[i].as_object();
    EXPECT_EQ(row.at("kind"), "lmdb_txn");
    EXPECT_EQ(D(row, "n"), sizes[i]);
    EXPECT_EQ(D(row, "errors"), 0);
    EXPECT_GT(D(row, "ops"), 0);
    // litetx's 1-thread rate over the native one, as printed (rounded to 3 decimals).
    EXPECT_NEAR(D(row, "litetx_to_native"), D(row, "litetx_tx_per_s") / D(row, "tx_per_s"),
                0.0015);
  }
  // Nothing of the native run is left in the store's directory.
  DIR* d = ::opendir(path_.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = ::readdir(d)) {
    EXPECT_EQ(std::string(e->d_name).find("bench-native"), std::string::npos) << e->d_name;
  }
  ::closedir(d);

  const std::string svg = ReadFile(svg_path);
  ASSERT_NE(svg.find("<svg"), std::string::npos) << svg.substr(0, 200);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // Three sizes: each series is a path of 2 segments in the transactions-per-second panel.
  for (const char* title : {"lmdb nosync, litetx, 1 thread", "lmdb nosync, litetx, 2 threads",
                            "lmdb nosync, native LMDB txn, 1 thread"}) {
    EXPECT_EQ(PlottedGroups(svg, title, 2), 1) << title;
  }
  EXPECT_EQ(PlottedGroups(svg, "no such series", 0), 0);

  // --plot-with adds the series of that run (saved as JSON) to a plot of another store.
  const std::string saved = dir_ + "/lmdb.json";
  std::ofstream(saved) << r.out;
  const std::string both_path = dir_ + "/both.svg";
  RunResult m = RunCli({"--store", "memory:", "bench", "--quick", "--sizes", "1,2,4",
                        "--threads", "1", "--plot", both_path, "--plot-with", saved});
  ASSERT_EQ(m.code, 0) << m.out << m.err;
  const std::string both = ReadFile(both_path);
  for (const char* title : {"memory:, litetx, 1 thread", "lmdb nosync, litetx, 1 thread",
                            "lmdb nosync, litetx, 2 threads",
                            "lmdb nosync, native LMDB txn, 1 thread"}) {
    EXPECT_EQ(PlottedGroups(both, title, 2), 1) << title;
  }
  // A file that is not a `bench --json` output is refused before anything is measured.
  RunResult bad = RunCli({"--store", "memory:", "bench", "--quick", "--plot", both_path,
                          "--plot-with", svg_path});
  EXPECT_EQ(bad.code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--plot-with"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;
}

// Without gnuplot, --plot is refused before anything is measured: exit 2, a message naming
// the Debian package, no output and no file.
TEST_F(CliTest, BenchPlotWithoutGnuplotFailsBeforeMeasuring) {
  const std::string empty_dir = dir_ + "/no-gnuplot-here";
  ASSERT_EQ(::mkdir(empty_dir.c_str(), 0755), 0);
  const std::string svg_path = dir_ + "/never.svg";
  RunResult r = [&] {
    ScopedPath path(empty_dir);
    return RunCli({"--store", "memory:", "bench", "--quick", "--plot", svg_path});
  }();
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("gnuplot is not installed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gnuplot-nox"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(Exists(svg_path));
}

}  // namespace
}  // namespace litetx::clitest
