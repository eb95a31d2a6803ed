// tests/cli/cli_polish_test.cpp — the CLI's shared conventions: one duration syntax (and 0
// meaning what it means in the library), LITETX_STORE, numbers printed exactly as people
// write them, `txns --state/--limit`, and `--format pretty|json`.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

using PolishTest = CliTest;

constexpr const char* kTwoDocs =
    R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"n":1}},
                   {"op":"insert","collection":"c","id":"y","doc":{"n":2}}]})";

// Sets an environment variable for the children started in one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST_F(PolishTest, EveryDurationFlagTakesOneSyntax) {
  // A bare number (other than 0) and a fraction are refused by every duration flag, naming
  // the flag and the expected form.
  const std::vector<std::vector<std::string>> bad = {
      {"gc", "--once", "--older-than", "5"},
      {"gc", "--once", "--tombstone-retention", "1.5s"},
      {"gc", "--once", "--outcome-retention", "2d"},
      {"gc", "--interval", "10"},
      {"apply", "-", "--busy-timeout", "2"},
      {"apply", "-", "--lease", "1.5"},
      {"apply", "-", "--retry-backoff", "ms"},
      {"apply", "-", "--rollback-timeout", "-1s"},
      {"bench", "--duration", "1.5"},
      {"demo", "--duration", "5x"},
      {"demo", "--duration", "10"},
      {"demo", "--lease", "300"},
  };
  for (const auto& args : bad) {
    RunResult r = Cli(args);
    SCOPED_TRACE(args[0] + " " + args[args.size() - 2] + " " + args.back());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(args[args.size() - 2]), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("e.g. 500ms, 2s, 1m"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_NE(Cli({"gc", "--once", "--older-than", "5"}).err.find("'5' has no unit"),
            std::string::npos);
  // The same forms are accepted everywhere: ms, s, m, h and a bare 0.
  ASSERT_EQ(Apply(kTwoDocs, "", {"--busy-timeout", "0", "--lease", "1m", "--retry-backoff",
                                 "5ms", "--rollback-timeout", "1h"})
                .code,
            0);
  RunResult gc = Cli({"gc", "--once", "--older-than", "0", "--tombstone-retention", "2h",
                      "--outcome-retention", "1m"});
  EXPECT_EQ(gc.code, 0) << gc.err;
}

// 0 means what it means in CollectorOptions: --older-than 0 is off (only the lease counts),
// --tombstone-retention 0 never purges. 1ms is "everything is old".
TEST_F(PolishTest, ZeroDurationMeansWhatTheLibraryMeans) {
  // A coordinator that dies after its first write leaves a pending record with a long lease.
  RunResult crash = Apply(kTwoDocs, "crash-after-writes:1", {"--lease", "10m"});
  ASSERT_EQ(crash.code, 86) << crash.err;
  ASSERT_EQ(Unsettled(), 1);
  RunResult gc = Cli({"gc", "--once", "--older-than", "0"});
  ASSERT_EQ(gc.code, 0) << gc.err;
  EXPECT_EQ(gc.Json()["reversed"], 0);
  EXPECT_EQ(Unsettled(), 1);
  gc = Cli({"gc", "--once", "--older-than", "1ms"});
  ASSERT_EQ(gc.code, 0) << gc.err;
  EXPECT_EQ(gc.Json()["reversed"], 1);
  EXPECT_EQ(Unsettled(), 0);

  ASSERT_EQ(Apply(kTwoDocs).code, 0);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x"}]})").code, 0);
  gc = Cli({"gc", "--once", "--collection", "c", "--tombstone-retention", "0"});
  ASSERT_EQ(gc.code, 0) << gc.err;
  EXPECT_EQ(gc.Json()["purged"], 0);
  EXPECT_EQ(Get("c", "x")["status"], "deleted");
  // With 1ms the tombstone goes once it is older than that.
  ASSERT_TRUE(PollUntil(
      [&] {
        RunResult r = Cli({"gc", "--once", "--collection", "c", "--tombstone-retention", "1ms"});
        return r.code == 0 && Get("c", "x")["status"] == "not_found";
      },
      std::chrono::seconds(10)));
}

TEST_F(PolishTest, LitetxStoreIsTheDefaultStoreAndTheFlagWins) {
  ASSERT_EQ(Apply(kTwoDocs).code, 0);
  {
    ScopedEnv env("LITETX_STORE", store_);
    RunResult r = RunCli({"get", "c", "x"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.Json()["doc"].as_object()["n"], 1);
  }
  {
    ScopedEnv env("LITETX_STORE", "lmdb:" + dir_ + "/missing");
    RunResult r = RunCli({"get", "c", "x"});
    EXPECT_EQ(r.code, 3);
    EXPECT_NE(r.err.find(dir_ + "/missing"), std::string::npos) << r.err;
    r = RunCli({"--store", store_, "get", "c", "x"});
    EXPECT_EQ(r.code, 0) << r.err;
  }
}

TEST_F(PolishTest, NumbersPrintAsWrittenAndRoundTripExactly) {
  // 2^53 + 1 is not a double: it must stay an integer. -0.0 keeps its sign, 1.0 stays a double.
  const std::string doc =
      R"({"a":0.1,"b":1.5,"c":1e+300,"d":-0.0,"e":9007199254740993,"f":1.0,"g":[-2.5e-300,7]})";
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":)" + doc + "}]}")
                .code,
            0);
  RunResult got = Cli({"get", "c", "x"});
  ASSERT_EQ(got.code, 0) << got.err;
  EXPECT_NE(got.out.find("\"doc\":" + doc), std::string::npos) << got.out;
  EXPECT_EQ(got.out.find("E0"), std::string::npos) << got.out;
  RunResult scan = Cli({"scan", "c"});
  EXPECT_NE(scan.out.find("\"doc\":" + doc), std::string::npos) << scan.out;

  // What get prints, written back, is stored with the same values: printed again identically.
  std::size_t at = got.out.find("\"doc\":") + 6;
  std::size_t end = got.out.find(",\"last_writer\"");
  ASSERT_NE(end, std::string::npos);
  std::string printed = got.out.substr(at, end - at);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"y","doc":)" + printed +
                  "}]}")
                .code,
            0);
  RunResult again = Cli({"get", "c", "y"});
  EXPECT_NE(again.out.find("\"doc\":" + doc), std::string::npos) << again.out;
  json::object y = again.Json();
  EXPECT_TRUE(y["doc"].as_object()["e"].is_int64());
  EXPECT_EQ(y["doc"].as_object()["e"].as_int64(), 9007199254740993);
  EXPECT_TRUE(y["doc"].as_object()["f"].is_double());
  EXPECT_TRUE(std::signbit(y["doc"].as_object()["d"].as_double()));
}

TEST_F(PolishTest, TxnsFiltersByStateAndLimits) {
  ASSERT_EQ(Apply(kTwoDocs).code, 0);  // leaves a committed outcome marker
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"d","id":"x","doc":{}},
                                  {"op":"insert","collection":"d","id":"y","doc":{}}]})")
                .code,
            0);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"e","id":"x","doc":{}},
                                  {"op":"insert","collection":"e","id":"y","doc":{}}]})",
                  "crash-after-writes:1", {"--lease", "10m"})
                .code,
            86);
  json::object all = Cli({"txns"}).Json();
  ASSERT_EQ(all["count"], 3);
  ASSERT_EQ(all["unsettled"], 1);

  RunResult r = Cli({"txns", "--state", "pending"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object pending = r.Json();
  EXPECT_EQ(pending["count"], 1);
  EXPECT_EQ(pending["transactions"].as_array().at(0).as_object()["state"], "pending");
  EXPECT_FALSE(pending.contains("truncated"));

  json::object committed = Cli({"txns", "--state", "committed"}).Json();
  EXPECT_EQ(committed["count"], 2);
  for (const auto& t : committed["transactions"].as_array()) {
    EXPECT_EQ(t.as_object().at("state"), "committed");
  }
  EXPECT_EQ(Cli({"txns", "--state", "aborted"}).Json()["count"], 0);

  json::object one = Cli({"txns", "--state", "committed", "--limit", "1"}).Json();
  EXPECT_EQ(one["count"], 1);
  EXPECT_EQ(one["truncated"], true);
  EXPECT_EQ(one["unsettled"], 1);  // a store-wide figure, not cut by the filter
  EXPECT_EQ(Cli({"txns", "--limit", "2"}).Json()["count"], 2);
  EXPECT_EQ(Cli({"txns", "--limit", "0"}).Json()["count"], 3);

  r = Cli({"txns", "--state", "done"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--state"), std::string::npos) << r.err;
  EXPECT_EQ(Cli({"txns", "--limit", "-1"}).code, 2);
}

TEST_F(PolishTest, FormatPrettyAndJsonShowTheSameValue) {
  ASSERT_EQ(Apply(kTwoDocs).code, 0);
  const std::vector<std::vector<std::string>> commands = {
      {"get", "c", "x"}, {"scan", "c"}, {"txns"}};
  for (const auto& cmd : commands) {
    SCOPED_TRACE(cmd[0]);
    // stdout is a pipe here: the default is one line of JSON.
    RunResult plain = Cli(cmd);
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(std::count(plain.out.begin(), plain.out.end(), '\n'), 1) << plain.out;
    auto with = [&](const char* format) {
      std::vector<std::string> args = cmd;
      args.insert(args.end(), {"--format", format});
      return Cli(args);
    };
    RunResult as_json = with("json");
    EXPECT_EQ(as_json.out.find('\n'), as_json.out.size() - 1) << as_json.out;
    RunResult pretty = with("pretty");
    ASSERT_EQ(pretty.code, 0) << pretty.err;
    EXPECT_GT(std::count(pretty.out.begin(), pretty.out.end(), '\n'), 3) << pretty.out;
    EXPECT_NE(pretty.out.find("\n  \""), std::string::npos) << pretty.out;  // indented members
    if (cmd[0] != "txns") {  // txns shows ages, which move between two runs
      EXPECT_EQ(json::parse(pretty.out), json::parse(as_json.out));
    } else {
      EXPECT_EQ(json::parse(pretty.out).as_object().at("count"), 1);
    }
    RunResult bad = with("yaml");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--format"), std::string::npos) << bad.err;
  }
}

TEST_F(PolishTest, InputErrorsSayWhatIsWrong) {
  // A directory is not malformed JSON.
  RunResult r = Cli({"apply", dir_});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("it is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("JSON near"), std::string::npos) << r.err;
  r = Cli({"apply", dir_ + "/absent.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;
  // A number too large for 32 bits is out of range, not "not an unsigned integer".
  r = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{},
                             "schema_version":4294967296}]})");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("\"schema_version\" is out of range: 4294967296 (at most 4294967295)"),
            std::string::npos)
      << r.err;
  r = Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x",
                             "version":18446744073709551616}]})");
  EXPECT_EQ(r.code, 2);
  r = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{},
                             "schema_version":-1}]})");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("must be an unsigned integer, got -1"), std::string::npos) << r.err;
  // A key named twice in one object is refused, wherever it is (escapes decoded); the same key
  // in two objects is fine.
  for (const char* dup :
       {R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"a":1,"a":2}}]})",
        R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"a":1,"\u0061":2}}]})",
        R"({"actions":[{"op":"insert","collection":"c","id":"x","id":"y","doc":{}}]})",
        R"({"actions":[],"actions":[{"op":"insert","collection":"c","id":"x","doc":{}}]})",
        R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"l":[{"k":1 , "k" :2}]}}]})"}) {
    r = Apply(dup);
    EXPECT_EQ(r.code, 2) << dup;
    EXPECT_NE(r.err.find("appears twice in one object"), std::string::npos) << dup << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(path_));  // nothing reached the store
  r = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"k":{"k":"\"k\":"},
                                                                           "l":[{"k":1},{"k":2}]}}]})");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(PolishTest, BusyNamesTheHolderAndTheWayOut) {
  // A live coordinator holds x and y and waits before its commit flip (write 4). Classic
  // commit: on the default parallel path the record and both documents land together and the
  // transaction is committed before write 4, so a writer meeting its documents would prove
  // the commit and go on instead of waiting.
  const std::string fifo = dir_ + "/release";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"z","doc":{}}]})").code, 0);
  Child holder =
      Start(With({"apply", "-", "--commit", "classic"}), "hold-write:4:" + fifo, kTwoDocs);
  ASSERT_TRUE(WaitForStderr(holder, "holding before write 4", std::chrono::seconds(60)))
      << holder.err_read;
  std::string holder_id = Cli({"txns", "--state", "pending"})
                              .Json()["transactions"].as_array().at(0).as_object()["id"]
                              .as_string().c_str();
  RunResult busy = Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x"},
                                         {"op":"delete","collection":"c","id":"z"}]})",
                         "", {"--busy-timeout", "0"});
  EXPECT_EQ(busy.code, 11) << busy.out << busy.err;
  std::string message = busy.Json()["message"].as_string().c_str();
  EXPECT_NE(message.find("held by transaction " + holder_id), std::string::npos) << message << " / " << holder_id;
  EXPECT_NE(message.find("litetx gc --once --older-than"), std::string::npos) << message;
  const int release = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(release, 0) << std::strerror(errno);
  EXPECT_EQ(::write(release, "x", 1), 1);
  ::close(release);
  EXPECT_EQ(Finish(holder).code, 0);

  // A parallel commit whose coordinator died after its record (staging) and x landed, before
  // y: not committed (y was never held) and within its lease, so a holder to wait for too.
  RunResult crashed = Apply(R"({"actions":[{"op":"update","collection":"c","id":"x","set":{"n":5}},
                                            {"op":"update","collection":"c","id":"y","set":{"n":6}}]})",
                            "crash-after-writes:2");
  ASSERT_EQ(crashed.code, 86) << crashed.err;
  const json::array open = Cli({"txns", "--state", "pending"}).Json()["transactions"].as_array();
  ASSERT_EQ(open.size(), 1u);
  const std::string staging_id = open.at(0).as_object().at("id").as_string().c_str();
  busy = Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x"},
                               {"op":"delete","collection":"c","id":"z"}]})",
               "", {"--busy-timeout", "0"});
  EXPECT_EQ(busy.code, 11) << busy.out << busy.err;
  message = busy.Json()["message"].as_string().c_str();
  EXPECT_NE(message.find("held by transaction " + staging_id), std::string::npos)
      << message << " / " << staging_id;
  EXPECT_NE(message.find("litetx gc --once --older-than"), std::string::npos) << message;
}

}  // namespace
}  // namespace litetx::clitest
