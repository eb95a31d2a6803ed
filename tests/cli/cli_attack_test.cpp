// tests/cli/cli_attack_test.cpp — the CLI used the way a careless user or a scheduler uses it:
// a signal before each write of a transfer (and a second one on either side of the commit
// point), exotic bytes and numbers as input, numbers at the edges of their types read back
// through `apply`, durations at their limits, and read-only commands pointed at an empty
// directory. Each test checks what is stored afterwards, not only the exit code.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::seconds;

struct Sig {
  int number;
  const char* name;
  int exit_code;
};
const Sig kSigInt{SIGINT, "SIGINT", 130};
const Sig kSigTerm{SIGTERM, "SIGTERM", 143};

class CliAttack : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    fifo_ = dir_ + "/release";
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0) << std::strerror(errno);
  }
  // Switches to a fresh store (one per round of a loop).
  void FreshStore(const std::string& name) {
    path_ = dir_ + "/db-" + name;
    store_ = "lmdb:" + path_;
  }
  // Releases a child held by hold-write (it has the FIFO open, so this open does not block).
  void Release() const {
    const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
  }
  // Starts the transfer (apply --commit `mode`) held before its write `k` (1..7).
  Child HeldTransfer(const std::string& mode, int k) const {
    Child c = Start(With({"apply", "-", "--commit", mode}),
                    "hold-write:" + std::to_string(k) + ":" + fifo_, kTransfer);
    EXPECT_TRUE(WaitForStderr(c, "holding before write " + std::to_string(k), seconds(60)))
        << c.err_read;
    return c;
  }
  static void Signal(Child& child, const Sig& sig) {
    ASSERT_EQ(::kill(child.pid, sig.number), 0);
    ASSERT_TRUE(WaitForStderr(child, std::string(sig.name) + " received: finishing", seconds(60)))
        << child.err_read;
  }
  std::int64_t Balance(const std::string& id) const {
    json::object o = Get("accounts", id);
    const json::value* doc = o.if_contains("doc");
    if (doc == nullptr) {
      ADD_FAILURE() << "accounts/" << id << " has no doc: " << json::serialize(o);
      return -1;
    }
    return doc->as_object().at("balance").to_number<std::int64_t>();
  }
  void ExpectUnheld() const {
    for (const char* id : {"a1", "a2"}) {
      RunResult raw = Cli({"get", "accounts", id, "--uncommitted"});
      EXPECT_EQ(raw.code, 0) << raw.err;
      EXPECT_FALSE(raw.Json().contains("txn")) << id << " still held: " << raw.out;
    }
  }
  // A collector pass that treats every transaction as abandoned; its counters.
  json::object SettleAll() const {
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    EXPECT_EQ(gc.code, 0) << gc.err;
    return gc.Json();
  }
  // Each transaction record's id and state, one a line (without its ages, which move).
  std::string TxnStates() const {
    RunResult r = Cli({"txns", "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    const json::object o = r.Json();
    std::string s;
    for (const json::value& t : o.at("transactions").as_array()) {
      s += json::serialize(t.as_object().at("id")) + " " +
           json::serialize(t.as_object().at("state")) + "\n";
    }
    return s;
  }
  std::string fifo_;
};

// A signal before any of the 7 writes of a transfer, in either commit mode: the transaction
// runs to its end and is reported committed, the store says the same, and a collector that
// then treats everything as abandoned finds nothing to finish or reverse (the reported outcome
// never changes later).
TEST_F(CliAttack, SignalBeforeEachWriteOfATransferKeepsTheReportedOutcome) {
  for (const std::string mode : {"parallel", "classic"}) {
    for (int k = 1; k <= 7; ++k) {
      const Sig& sig = k % 2 == 0 ? kSigInt : kSigTerm;
      SCOPED_TRACE("--commit " + mode + ", held before write " + std::to_string(k) + ", " +
                   sig.name);
      FreshStore(mode + "-w" + std::to_string(k));
      ASSERT_EQ(Apply(kSeed).code, 0);
      Child apply = HeldTransfer(mode, k);
      Signal(apply, sig);
      Release();
      RunResult r = Finish(apply);
      EXPECT_EQ(r.code, sig.exit_code) << r.out << r.err;
      json::object o = r.Json();
      EXPECT_EQ(o["outcome"], "committed") << r.out;
      EXPECT_EQ(o["interrupted"], sig.name);
      EXPECT_EQ(Unsettled(), 0);
      ExpectUnheld();
      json::object gc = SettleAll();
      EXPECT_EQ(gc["finished"], 0);
      EXPECT_EQ(gc["reversed"], 0);
      EXPECT_EQ(Balance("a1"), 70);
      EXPECT_EQ(Balance("a2"), 80);
    }
  }
}

// A second signal ends the process at once, with nothing on stdout; what it left is settled
// by the collector as the commit point says. Classic: held before write 4 (the commit flip)
// the transfer never committed and the collector reverses it; held before write 5 it had
// committed and the collector finishes it. Parallel: the record and both applies are one batch
// (writes 1 to 3) and the commit point is that batch landing: held before write 3 nothing of
// the batch was sent, so nothing is left open and the balances never moved; held before write
// 4 (the flip) it had committed and the collector finishes it.
TEST_F(CliAttack, SecondSignalOnEitherSideOfTheCommitPoint) {
  struct Case {
    const char* mode;
    int k;
    int unsettled;           // records left open
    int finished, reversed;  // what the collector then does
    std::int64_t a1, a2;
  };
  for (const Case& c : {Case{"classic", 4, 1, 0, 1, 100, 50},
                        Case{"classic", 5, 1, 1, 0, 70, 80},
                        Case{"parallel", 3, 0, 0, 0, 100, 50},
                        Case{"parallel", 4, 1, 1, 0, 70, 80}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", held before write " +
                 std::to_string(c.k));
    FreshStore(std::string("second-") + c.mode + std::to_string(c.k));
    ASSERT_EQ(Apply(kSeed).code, 0);
    Child apply = HeldTransfer(c.mode, c.k);
    Signal(apply, kSigInt);
    ASSERT_EQ(::kill(apply.pid, SIGINT), 0);
    ASSERT_TRUE(WaitForStderr(apply, "): exiting at once;", seconds(60))) << apply.err_read;
    RunResult r = Finish(apply);
    EXPECT_EQ(r.code, 130) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Unsettled(), c.unsettled);
    json::object gc = SettleAll();
    EXPECT_EQ(gc["finished"], c.finished) << json::serialize(gc);
    EXPECT_EQ(gc["reversed"], c.reversed) << json::serialize(gc);
    EXPECT_EQ(Unsettled(), 0);
    ExpectUnheld();
    EXPECT_EQ(Balance("a1"), c.a1);
    EXPECT_EQ(Balance("a2"), c.a2);
  }
}

// Bytes a text editor or a careless script produces: each is bad input (exit 2, one line on
// stderr, nothing on stdout) and the existing store is exactly as before.
TEST_F(CliAttack, ExoticBytesAreBadInputAndLeaveTheStoreAsItWas) {
  ASSERT_EQ(Apply(kSeed).code, 0);
  const std::string before_scan = ScanText("accounts");
  const std::string before_txns = TxnStates();
  const std::string ins = R"({"actions":[{"op":"insert","collection":"accounts","id":"a3","doc":)";
  using namespace std::string_literals;
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"NUL in a string", ins + "{\"s\":\"a\0b\"}}]}"s},
      {"NUL after the JSON", ins + "{}}]}\0"s},
      {"only a NUL", "\0"s},
      {"byte order mark", "\xef\xbb\xbf" + ins + "{}}]}"},
      {"lone surrogate escape", ins + R"({"s":"\ud800"}}]})"},
      {"NaN", ins + R"({"n":NaN}}]})"},
      {"Infinity", ins + R"({"n":-Infinity}}]})"},
      {"duplicate key deep in an array",
       ins + R"({"l":[[{"m":[{"k":1,"j":2,"k":3}]}]]}}]})"},
      {"duplicate key spelled with an escape", ins + R"({"b":1,"\u0062":2}}]})"},
      {"duplicate action field",
       R"({"actions":[{"op":"delete","collection":"accounts","id":"a1","id":"a2"}]})"},
      {"duplicate top-level key",
       R"({"actions":[{"op":"delete","collection":"accounts","id":"a1"}],"actions":[]})"},
      {"NUL escape in an id",
       R"({"actions":[{"op":"delete","collection":"accounts","id":"a1\u0000"}]})"},
      {"id over the length limit",
       R"({"actions":[{"op":"delete","collection":"accounts","id":")" + std::string(100'000, 'x') +
           R"("}]})"},
      {"version above 2^64-1",
       R"({"actions":[{"op":"delete","collection":"accounts","id":"a1","version":18446744073709551616}]})"},
      {"1e400 inside an adjust",
       R"({"actions":[{"op":"adjust","collection":"accounts","id":"a1","by":{"balance":1e400}}]})"},
  };
  for (const auto& [name, text] : inputs) {
    SCOPED_TRACE(name);
    RunResult r = Apply(text);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("litetx: bad transaction: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // Inputs that are not a file holding JSON.
  for (const std::string& file : {std::string("/dev/null"), dir_}) {
    SCOPED_TRACE(file);
    RunResult r = Cli({"apply", file});
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(ScanText("accounts"), before_scan);
  EXPECT_EQ(TxnStates(), before_txns);
}

// Numbers at the edges of double, int64 and uint64: what `get` prints, given back to `apply`
// as an update, is stored unchanged, so `get` prints it again the same, character for
// character.
TEST_F(CliAttack, NumbersAtTheirLimitsRoundTripThroughGetAndApply) {
  // Written as `get` prints them: shortest doubles, integers in full.
  const std::string doc =
      R"({"min_subnormal":5e-324,"min_normal":2.2250738585072014e-308,)"
      R"("max":1.7976931348623157e+308,"neg_max":-1.7976931348623157e+308,)"
      R"("int64_min":-9223372036854775808,"int64_max":9223372036854775807,)"
      R"("uint64_max":18446744073709551615,"two53_plus_1":9007199254740993,)"
      R"("neg_zero":-0.0,"tenth":0.1,"third":0.3333333333333333,"big_int_double":1e+22,)"
      R"("two64_as_double":18446744073709551616.0,"nested":[[-5e-324,0.0,1.0]]})";
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"n","id":"x","doc":)" + doc + "}]}")
                .code,
            0);
  auto doc_text = [](const std::string& get_out) {
    const std::string from = "\"doc\":";
    std::size_t at = get_out.find(from);
    std::size_t end = get_out.find(",\"last_writer\"");
    if (at == std::string::npos || end == std::string::npos) return std::string();
    return get_out.substr(at + from.size(), end - at - from.size());
  };
  RunResult first = Cli({"get", "n", "x", "--format", "json"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_EQ(doc_text(first.out), doc);
  // Back through apply (set replaces every top-level field), then read again.
  RunResult upd = Apply(R"({"actions":[{"op":"update","collection":"n","id":"x","set":)" +
                        doc_text(first.out) + "}]}");
  ASSERT_EQ(upd.code, 0) << upd.err;
  RunResult second = Cli({"get", "n", "x", "--format", "json"});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(doc_text(second.out), doc);
  EXPECT_NE(Get("n", "x")["version"], first.Json()["version"]);  // it was written again
}

TEST_F(CliAttack, DurationsAtTheirLimits) {
  // 2^53 ms is the longest duration; a collector pass with it finds nothing that old.
  RunResult ok = Cli({"gc", "--once", "--older-than", "9007199254740992ms"});
  EXPECT_EQ(ok.code, 3) << ok.err;  // accepted: it failed only on the missing store
  ASSERT_EQ(Apply(kSeed).code, 0);
  ok = Cli({"gc", "--once", "--older-than", "9007199254740992ms"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"9007199254740993ms", "too long"},
      {"2562047788016h", "too long"},
      {"153722867280913m", "too long"},
      {" 2s", "bad duration ' 2s'"},
      {"2s ", "bad duration '2s '"},
      {"+2s", "bad duration '+2s'"},
      {"1e3s", "bad duration '1e3s'"},
      {"0x10s", "bad duration '0x10s'"},
      {"2m30s", "bad duration '2m30s'"},
      {"00", "has no unit"},
      {"", "bad duration ''"},
  };
  for (const auto& [text, error] : bad) {
    SCOPED_TRACE("'" + text + "'");
    RunResult r = Cli({"gc", "--once", "--older-than", text});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(error), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--older-than"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// An existing directory holding no store: the commands that only read or repair refuse it
// (exit 3) and write nothing into it, not even LMDB's lock file.
TEST_F(CliAttack, ReadOnlyCommandsWriteNothingIntoAnEmptyDirectory) {
  const std::string empty = dir_ + "/empty";
  ASSERT_TRUE(std::filesystem::create_directory(empty));
  const std::vector<std::vector<std::string>> commands = {
      {"get", "c", "x"}, {"scan", "c"}, {"txns"}, {"gc", "--once"}, {"gc", "--interval", "1s"}};
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + (args.size() > 1 ? " " + args[1] : ""));
    std::vector<std::string> full = {"--store", "lmdb:" + empty};
    full.insert(full.end(), args.begin(), args.end());
    RunResult r = RunCli(full);
    EXPECT_EQ(r.code, 3) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(std::filesystem::is_empty(empty)) << "a read-only command wrote into " << empty;
  }
}

TEST_F(CliAttack, ApplyWaitingForItsInputStopsAtOnceOnASignal) {
  // `apply FIFO` with no writer blocks in open(); a signal must end it at once, before it has
  // opened (and so created) the store.
  for (const Sig& sig : {kSigInt, kSigTerm}) {
    SCOPED_TRACE(sig.name);
    const std::string input = dir_ + "/input-" + sig.name;
    ASSERT_EQ(::mkfifo(input.c_str(), 0600), 0) << std::strerror(errno);
    FreshStore(sig.name);
    Child apply = Start(With({"apply", input}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it block on the FIFO
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(apply.pid, sig.number), 0);
    RunResult r = Finish(std::move(apply));
    EXPECT_EQ(r.code, sig.exit_code) << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - sent, seconds(5));
    EXPECT_FALSE(std::filesystem::exists(path_)) << "the store was created";
  }
}

TEST_F(CliAttack, ApplyRefusesInputOver64MiB) {
  // A file of 64 MiB + 1 byte (sparse: zeros) and an endless stream are refused without
  // reading them whole.
  const std::string big = dir_ + "/big.json";
  {
    std::ofstream out(big, std::ios::binary);
  }
  std::filesystem::resize_file(big, (std::uintmax_t{64} << 20) + 1);
  for (const std::string& file : {big, std::string("/dev/zero")}) {
    SCOPED_TRACE(file);
    RunResult r = Cli({"apply", file});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("larger than 64 MiB"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(path_)) << "the store was created";
}

TEST_F(CliAttack, NumericFlagsRefuseWhatTheyCannotHold) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"demo", "--crash-rate", "nan"}, "not a probability"},
      {{"demo", "--crash-rate", "1.5"}, "not a probability"},
      {{"demo", "--seed", "-1"}, "not a whole number"},
      {{"demo", "--seed", "18446744073709551616"}, "out of range"},
      {{"gc", "--once", "--sweep-budget", "-1"}, "not a whole number"},
      {{"txns", "--limit", "18446744073709551616"}, "out of range"},
      {{"txns", "--limit", "1e3"}, "not a whole number"},
      {{"apply", "-", "--max-attempts", "0"}, "out of range (expected 1 to 1000)"},
      {{"apply", "-", "--max-attempts", "2147483648"}, "out of range (expected 1 to 1000)"},
      {{"bench", "--quick", "--sizes", "1,1"}, "given twice"},
      {{"collections", "drop", "c", "--yes", "--batch", "0"}, "out of range"},
  };
  for (const auto& [args, message] : bad) {
    RunResult r = Cli(args);
    SCOPED_TRACE(args[0] + " " + args[args.size() - 2] + " " + args.back());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(path_)) << "a refused command created the store";
}

TEST_F(CliAttack, VersionTooLargeForSixtyFourBitsIsOutOfRange) {
  ASSERT_EQ(Apply(kSeed).code, 0);
  RunResult r = Apply(R"({"actions":[{"op":"update","collection":"accounts","id":"a1",
                          "version":18446744073709551616,"set":{"balance":1}}]})");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("\"version\" is out of range: 18446744073709551616.0"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("E19"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace litetx::clitest
