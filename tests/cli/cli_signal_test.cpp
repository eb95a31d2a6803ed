// tests/cli/cli_signal_test.cpp — SIGINT and SIGTERM in the commands that write (tools/signals.h):
// each is sent while the command is parked mid-work (LITETX_FAULTS=hold-write:K:FIFO holds it
// before its K-th store write until the test writes to a FIFO) or visibly running. The command
// must note the signal (a line on stderr), end its step, clean up and exit 130 (SIGINT) or 143
// (SIGTERM), leaving no open transaction record, held document or stray document; a second
// signal must end it at once, leaving what the collector then settles.
//
// The exit code alone cannot tell handling from being killed (the harness reports a child
// killed by signal S as 128 + S too), so each test also checks what only a command that
// handled the signal produces: its output, and a store with nothing left open.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::seconds;

constexpr const char* kReceived = " received: finishing the current step";
constexpr const char* kSecond = "): exiting at once;";  // the second signal's line

struct Sig {
  int number;
  const char* name;
  int exit_code;
};
const Sig kSignals[] = {{SIGINT, "SIGINT", 130}, {SIGTERM, "SIGTERM", 143}};

class CliSignal : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    fifo_ = dir_ + "/release";
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0) << std::strerror(errno);
  }
  // Releases a child held by hold-write (it has the FIFO open, so this open does not block).
  void Release() const {
    const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
  }
  // Sends `sig` and waits until the child says it noted it.
  static void Signal(Child& child, const Sig& sig) {
    ASSERT_EQ(::kill(child.pid, sig.number), 0);
    ASSERT_TRUE(WaitForStderr(child, std::string(sig.name) + kReceived, seconds(60)))
        << child.err_read;
  }
  std::int64_t Balance(const std::string& id) const {
    json::object o = Get("accounts", id);
    return o["doc"].as_object()["balance"].to_number<std::int64_t>();
  }
  // Neither account references a transaction.
  void ExpectUnheld() const {
    for (const char* id : {"a1", "a2"}) {
      RunResult raw = Cli({"get", "accounts", id, "--uncommitted"});
      EXPECT_EQ(raw.code, 0) << raw.err;
      EXPECT_FALSE(raw.Json().contains("txn")) << id << " still held: " << raw.out;
    }
  }
  std::string fifo_;
};

// Where a transfer (kTransfer, 7 writes) is held, by commit mode. Classic: record (pending),
// a1, a2, flip, finishes, marker, one write per round trip. Parallel: the record (staging) and
// both applies go as one batch (writes 1 to 3) and the transaction is committed once they have
// landed; a hold before any write of the batch holds it before the batch is sent, with nothing
// of it written.
struct HoldCase {
  const char* mode;   // apply --commit
  int k;              // hold-write:K
  int unsettled;      // open records while held
  const char* where;  // for the trace
};

TEST_F(CliSignal, ApplyInterruptedMidTransactionRunsItToItsEnd) {
  const HoldCase cases[] = {
      {"classic", 2, 1, "the record written, no document held yet"},
      {"parallel", 2, 0, "before the batch of the record and the applies: nothing written"},
      {"parallel", 4, 1, "committed (record and applies landed), before the flip"}};
  for (const HoldCase& c : cases) {
    for (const Sig& sig : kSignals) {
      SCOPED_TRACE(std::string("--commit ") + c.mode + ", held before write " +
                   std::to_string(c.k) + " (" + c.where + "), " + sig.name);
      path_ = dir_ + "/db-" + c.mode + std::to_string(c.k) + "-" + sig.name;
      store_ = "lmdb:" + path_;
      ASSERT_EQ(Apply(kSeed).code, 0);
      Child apply = Start(With({"apply", "-", "--commit", c.mode}),
                          "hold-write:" + std::to_string(c.k) + ":" + fifo_, kTransfer);
      ASSERT_TRUE(WaitForStderr(apply, "holding before write " + std::to_string(c.k),
                                seconds(60)))
          << apply.err_read;
      EXPECT_EQ(Unsettled(), c.unsettled);
      Signal(apply, sig);
      Release();
      RunResult r = Finish(apply);
      EXPECT_EQ(r.code, sig.exit_code) << r.out << r.err;
      json::object o = r.Json();
      EXPECT_EQ(o["outcome"], "committed");
      EXPECT_EQ(o["interrupted"], sig.name);
      EXPECT_NE(r.err.find("the transaction ran to its end: committed"), std::string::npos)
          << r.err;
      EXPECT_EQ(Unsettled(), 0);
      ExpectUnheld();
      EXPECT_EQ(Balance("a1"), 70);
      EXPECT_EQ(Balance("a2"), 80);
    }
  }
}

// Held with a1 held and its record open, a second signal ends the process at once; the
// collector settles what it left. Classic, before write 3: record and a1 written, not
// committed: reversed. Parallel, before write 4: record and both applies landed together, so
// it committed though the process never said so: finished.
TEST_F(CliSignal, ApplySecondSignalExitsAtOnceAndTheCollectorSettles) {
  struct Case {
    const char* mode;
    int k;
    const char* counter;  // what the collector does
    std::int64_t a1, a2;
  };
  for (const Case& c : {Case{"classic", 3, "reversed", 100, 50},
                        Case{"parallel", 4, "finished", 70, 80}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", held before write " +
                 std::to_string(c.k));
    path_ = dir_ + "/db-" + c.mode;
    store_ = "lmdb:" + path_;
    ASSERT_EQ(Apply(kSeed).code, 0);
    Child apply = Start(With({"apply", "-", "--commit", c.mode}),
                        "hold-write:" + std::to_string(c.k) + ":" + fifo_, kTransfer);
    ASSERT_TRUE(WaitForStderr(apply, "holding before write " + std::to_string(c.k),
                              seconds(60)))
        << apply.err_read;
    Signal(apply, kSignals[0]);
    ASSERT_EQ(::kill(apply.pid, SIGTERM), 0);  // the second may be either signal
    ASSERT_TRUE(WaitForStderr(apply, kSecond, seconds(60))) << apply.err_read;
    RunResult r = Finish(apply);  // never released: it exited while held
    EXPECT_EQ(r.code, 143) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Unsettled(), 1);
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    EXPECT_EQ(gc.code, 0) << gc.err;
    EXPECT_EQ(gc.Json()[c.counter], 1) << gc.out;
    EXPECT_EQ(Unsettled(), 0);
    ExpectUnheld();
    EXPECT_EQ(Balance("a1"), c.a1);
    EXPECT_EQ(Balance("a2"), c.a2);
  }
}

// A crashed transfer left for the collector: classic, crashed after write 3 (record, a1, a2
// held, not committed: the collector's first write claims the record and it reverses the
// transfer); parallel, crashed after write 2 (staging record, a1 held, a2 not: the collector's
// first write fences a2 and it reverses the transfer) or after write 3 (every document held:
// committed; the collector's first write records the proof and it finishes the transfer).
struct LeftCase {
  const char* mode;
  int crash_after;
  const char* counter;  // what the collector does
  std::int64_t a1;
};
const LeftCase kLeft[] = {{"classic", 3, "reversed", 100},
                          {"parallel", 2, "reversed", 100},
                          {"parallel", 3, "finished", 70}};

TEST_F(CliSignal, GcOnceInterruptedFinishesItsPass) {
  for (const LeftCase& c : kLeft) {
    for (const Sig& sig : kSignals) {
      SCOPED_TRACE(std::string("--commit ") + c.mode + ", crash-after-writes:" +
                   std::to_string(c.crash_after) + ", " + sig.name);
      path_ = dir_ + "/db-" + c.mode + std::to_string(c.crash_after) + "-" + sig.name;
      store_ = "lmdb:" + path_;
      ASSERT_EQ(Apply(kSeed).code, 0);
      ASSERT_EQ(Apply(kTransfer, "crash-after-writes:" + std::to_string(c.crash_after),
                      {"--commit", c.mode})
                    .code,
                86);
      // The collector is held before its first write.
      Child gc = Start(With({"gc", "--once", "--older-than", "1ms"}), "hold-write:1:" + fifo_);
      ASSERT_TRUE(WaitForStderr(gc, "holding before write 1", seconds(60))) << gc.err_read;
      Signal(gc, sig);
      Release();
      RunResult r = Finish(gc);
      EXPECT_EQ(r.code, sig.exit_code) << r.out << r.err;
      json::object o = r.Json();
      EXPECT_EQ(o["status"], "ok");
      EXPECT_EQ(o[c.counter], 1) << r.out;
      EXPECT_EQ(o["interrupted"], sig.name);
      EXPECT_EQ(Unsettled(), 0);
      ExpectUnheld();
      EXPECT_EQ(Balance("a1"), c.a1);
    }
  }
}

TEST_F(CliSignal, GcBackgroundSecondSignalExitsAtOnce) {
  for (const LeftCase& c : kLeft) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", crash-after-writes:" +
                 std::to_string(c.crash_after));
    path_ = dir_ + "/db-" + c.mode + std::to_string(c.crash_after);
    store_ = "lmdb:" + path_;
    ASSERT_EQ(Apply(kSeed).code, 0);
    ASSERT_EQ(Apply(kTransfer, "crash-after-writes:" + std::to_string(c.crash_after),
                    {"--commit", c.mode})
                  .code,
              86);
    // The background collector's run is held at its first write: the first signal's Stop
    // waits for that run, so only the second signal can end the process.
    Child gc = Start(With({"gc", "--interval", "20ms", "--older-than", "1ms"}),
                     "hold-write:1:" + fifo_);
    ASSERT_TRUE(WaitForStderr(gc, "holding before write 1", seconds(60))) << gc.err_read;
    Signal(gc, kSignals[1]);
    ASSERT_EQ(::kill(gc.pid, SIGINT), 0);
    ASSERT_TRUE(WaitForStderr(gc, kSecond, seconds(60))) << gc.err_read;
    RunResult r = Finish(gc);
    EXPECT_EQ(r.code, 130) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Unsettled(), 1);  // its first write never landed
    RunResult again = Cli({"gc", "--once", "--older-than", "1ms"});
    EXPECT_EQ(again.Json()[c.counter], 1) << again.out;
    EXPECT_EQ(Unsettled(), 0);
    ExpectUnheld();
    EXPECT_EQ(Balance("a1"), c.a1);
  }
}

TEST_F(CliSignal, BenchInterruptedRemovesItsDocuments) {
  // One signal: both go through the same handling (the other tests send both), and each run
  // here may wait a lease (5 s) for a transaction it stopped in flight.
  for (const Sig& sig : {kSignals[1]}) {
    SCOPED_TRACE(sig.name);
    // Uninterrupted this would run for about 30 s (4 s per measurement).
    Child bench = Start(With({"bench", "--duration", "4s", "--rounds", "8", "--sizes", "2",
                              "--threads", "2"}));
    const std::string collection = "bench." + std::to_string(bench.pid);
    // Wait until it runs transactions (their records appear), then stop it.
    ASSERT_TRUE(PollUntil(
        [&] {
          RunResult t = Cli({"txns"});
          return t.code == 0 && !t.Json()["transactions"].as_array().empty();
        },
        std::chrono::minutes(1), std::chrono::milliseconds(20)));
    RunResult docs = Cli({"scan", collection, "--include-deleted"});
    EXPECT_GT(docs.Json()["count"].to_number<std::int64_t>(), 0) << docs.out;
    const auto signalled = std::chrono::steady_clock::now();
    Signal(bench, sig);
    RunResult r = Finish(bench);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
    std::printf("bench stopped by %s %.1f s after the signal: %s", sig.name, took,
                r.err.substr(r.err.rfind("litetx: benchmark stopped")).c_str());
    EXPECT_EQ(r.code, sig.exit_code) << r.err;
    EXPECT_NE(r.err.find("litetx: benchmark stopped"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(", 0 left open; collection " + collection), std::string::npos) << r.err;
    EXPECT_EQ(Cli({"scan", collection, "--include-deleted"}).Json()["count"], 0);
    EXPECT_EQ(Unsettled(), 0);
    EXPECT_LT(took, 20.0);  // one lease (5 s) and the settling, not the rest of the benchmark
    path_ = dir_ + "/db-" + sig.name;
    store_ = "lmdb:" + path_;
  }
}

TEST_F(CliSignal, DemoInterruptedSettlesAndVerifies) {
  for (const Sig& sig : kSignals) {
    SCOPED_TRACE(sig.name);
    Child demo = Start(With({"demo", "--duration", "10m", "--accounts", "20", "--threads", "2",
                             "--crash-rate", "0.05", "--lease", "200ms"}));
    // The first progress line (after a second of transfers).
    ASSERT_TRUE(WaitForStderr(demo, "committed ", seconds(60))) << demo.err_read;
    Signal(demo, sig);
    RunResult r = Finish(demo);
    EXPECT_EQ(r.code, sig.exit_code) << r.out << r.err;
    json::object o = r.Json();
    EXPECT_EQ(o["interrupted"], true);
    EXPECT_EQ(o["signal"], sig.name);
    EXPECT_LT(o["elapsed_ms"].to_number<std::int64_t>(), 600'000);
    EXPECT_GT(o["committed"].to_number<std::int64_t>(), 0);
    EXPECT_EQ(o["verification"].as_object()["ok"], true) << json::serialize(o["verification"]);
    EXPECT_NE(r.err.find("verification: ok"), std::string::npos) << r.err;
    EXPECT_EQ(Unsettled(), 0);
    path_ = dir_ + "/db-" + sig.name;
    store_ = "lmdb:" + path_;
  }
}

}  // namespace
}  // namespace litetx::clitest
