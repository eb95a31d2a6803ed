// tests/cli/cli_import_test.cpp — `litetx import`: the summary on stdout and the exit code of
// every outcome, the progress bar (on a terminal only, never with --quiet), a signal while rows
// are read, and `import --bench`.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli_harness.h"

extern char** environ;

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::seconds;

// NDJSON rows {"id": "p<i>", "n": i} for i in [from, to].
std::string Rows(int from, int to) {
  std::string out;
  for (int i = from; i <= to; ++i) {
    out += R"({"id":"p)" + std::to_string(i) + R"(","n":)" + std::to_string(i) + "}\n";
  }
  return out;
}

// Runs the CLI with stdin from /dev/null, stdout into a pipe and stderr on a pseudo-terminal,
// as when a person runs it in a terminal and redirects stdout.
RunResult RunWithTerminalStderr(const std::vector<std::string>& args) {
  RunResult r;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    ADD_FAILURE() << "pseudo-terminal: " << std::strerror(errno);
    return r;
  }
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  int out[2];
  if (slave < 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "terminal or pipe: " << std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, slave, 2);
  std::vector<std::string> argv_s = {LITETX_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LITETX_FAULTS=", 14) != 0) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, LITETX_CLI_PATH, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(slave);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << std::strerror(rc);
    ::close(out[0]);
    ::close(master);
    return r;
  }
  // Both ends are read until closed (a pseudo-terminal's master reports EIO once the child,
  // its only other holder, has exited).
  struct pollfd fds[2] = {{out[0], POLLIN, 0}, {master, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, 60'000) <= 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "the child neither wrote nor exited for 60 s";
      ::kill(pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

class CliImport : public CliTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // `import FILE --collection people --id-field id --chunk 3 extra...` on `text`.
  RunResult Import(const std::string& text, std::vector<std::string> extra = {},
                   const std::string& faults = "") const {
    std::vector<std::string> args = {"import", Write("rows.ndjson", text), "--collection",
                                     "people", "--id-field", "id", "--chunk", "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cli(args, faults);
  }
  // `collections count people`: live, held...
  json::object Count() const {
    RunResult r = Cli({"collections", "count", "people", "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.Json();
  }
  // Nothing of an import is left: no live row, no document held, no open record.
  void ExpectNothingImported() const {
    json::object c = Count();
    EXPECT_EQ(c["live"], 0) << json::serialize(c);
    EXPECT_EQ(c["held"], 0) << json::serialize(c);
    EXPECT_EQ(Unsettled(), 0);
  }
};

TEST_F(CliImport, CommitsAFileAndPrintsTheSummary) {
  RunResult r = Import("\n" + Rows(1, 7) + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress bar: stderr is not a terminal
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "committed");
  EXPECT_EQ(o["committed"], true);
  EXPECT_TRUE(o["txn_id"].is_string());
  EXPECT_EQ(o["collection"], "people");
  EXPECT_EQ(o["rows_read"], 7);
  EXPECT_EQ(o["imported"], 7);
  EXPECT_EQ(o["skipped"], 0);
  EXPECT_EQ(o["bad_rows"], json::array());
  EXPECT_EQ(o["bytes_read"], Rows(1, 7).size() + 2);
  EXPECT_EQ(o["chunks"], 3);
  EXPECT_EQ(o["settled"], true);
  EXPECT_GT(o["acknowledged_s"].to_number<double>(), 0.0);
  EXPECT_GE(o["settled_s"].to_number<double>(), o["acknowledged_s"].to_number<double>());
  EXPECT_GE(o["total_s"].to_number<double>(), o["settled_s"].to_number<double>());
  EXPECT_EQ(o["rolled_back_s"].to_number<double>(), 0.0);
  EXPECT_FALSE(o.contains("message"));
  EXPECT_EQ(Get("people", "p3")["doc"].as_object()["n"], 3);
  json::object c = Count();
  EXPECT_EQ(c["live"], 7);
  EXPECT_EQ(c["held"], 0);
  EXPECT_EQ(Unsettled(), 0);
}

TEST_F(CliImport, ArrayFromStdinWithGeneratedIds) {
  RunResult r = Cli({"import", "-", "--collection", "people"}, "",
                    "[{\"n\":1},\n {\"n\":2}, {\"n\":3}]\n");
  ASSERT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["imported"], 3);
  const std::string txn(o["txn_id"].as_string());
  EXPECT_EQ(Get("people", txn + "-2")["doc"].as_object()["n"], 2);
  EXPECT_EQ(Count()["live"], 3);
}

TEST_F(CliImport, ABadRowRollsBackWithItsLineAndExitsTwo) {
  RunResult r = Import(Rows(1, 4) + "{\"id\":\"p5\",\"n\":}\n" + Rows(6, 8));
  EXPECT_EQ(r.code, 2) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "invalid_argument");
  EXPECT_EQ(o["committed"], false);
  EXPECT_EQ(std::string(o["message"].as_string()).rfind("line 5: malformed JSON", 0), 0u)
      << o["message"];
  ASSERT_EQ(o["bad_rows"].as_array().size(), 1u);
  EXPECT_EQ(o["bad_rows"].as_array()[0].as_object()["line"], 5);
  EXPECT_EQ(o["imported"], 0);
  EXPECT_GT(o["rolled_back_s"].to_number<double>(), 0.0);
  EXPECT_NE(r.err.find("litetx: import rolled back: line 5: "), std::string::npos) << r.err;
  ExpectNothingImported();
}

TEST_F(CliImport, AnInsertOverAnExistingDocumentExitsTen) {
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"people","id":"p5","doc":{"n":50}}]})")
                .code,
            0);
  RunResult r = Import(Rows(1, 8));
  EXPECT_EQ(r.code, 10) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "conflict");
  EXPECT_EQ(o["committed"], false);
  ASSERT_EQ(o["bad_rows"].as_array().size(), 1u);
  EXPECT_EQ(o["bad_rows"].as_array()[0].as_object()["line"], 5);
  json::object c = Count();
  EXPECT_EQ(c["live"], 1);  // only the document that was there
  EXPECT_EQ(c["held"], 0);
  EXPECT_EQ(Get("people", "p5")["doc"].as_object()["n"], 50);

  // Upsert replaces it, one version up.
  const auto before = Get("people", "p5")["version"].to_number<std::uint64_t>();
  r = Import(Rows(1, 8), {"--mode", "upsert"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object p5 = Get("people", "p5");
  EXPECT_EQ(p5["doc"].as_object()["n"], 5);
  EXPECT_EQ(p5["version"].to_number<std::uint64_t>(), before + 1);
  EXPECT_EQ(Count()["live"], 8);
}

TEST_F(CliImport, SkipBadListsTheBadRowsAndCommitsTheRest) {
  RunResult r = Import(Rows(1, 2) + "[1]\n" + Rows(3, 4) + "{\"n\":9}\n{\"id\":\"p1\"}\n",
                       {"--skip-bad"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "committed");
  EXPECT_EQ(o["rows_read"], 7);
  EXPECT_EQ(o["imported"], 4);
  EXPECT_EQ(o["skipped"], 3);
  json::array bad = o["bad_rows"].as_array();
  ASSERT_EQ(bad.size(), 3u);
  std::vector<std::int64_t> lines;
  for (const auto& b : bad) lines.push_back(b.as_object().at("line").as_int64());
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::int64_t>{3, 6, 7}));
  EXPECT_EQ(Count()["live"], 4);
}

TEST_F(CliImport, BadInputWritesNothingAndExitsTwo) {
  struct Case {
    const char* name;
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {"empty", "", "no rows"},
      {"blank lines", "\n  \n\n", "no rows"},
      {"empty array", "[ ]", "no rows"},
      {"trailing garbage", "[{\"id\":\"p1\"},{\"id\":\"p2\"},{\"id\":\"p3\"},{\"id\":\"p4\"}] x",
       "line 1: unexpected text after the array"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RunResult r = Import(c.text, {"--skip-bad"});  // bad input even when skipping bad rows
    EXPECT_EQ(r.code, 2) << r.err;
    json::object o = r.Json();
    EXPECT_EQ(o["committed"], false);
    EXPECT_NE(std::string(o["message"].as_string()).find(c.message), std::string::npos)
        << o["message"];
    ExpectNothingImported();
  }
  // Invalid UTF-8 in a row: a bad row, which rolls the import back, or is skipped.
  const std::string text = Rows(1, 4) + "{\"id\":\"p5\",\"s\":\"\xc3\x28\"}\n";
  RunResult r = Import(text);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::string(r.Json()["message"].as_string()).rfind("line 5: not valid UTF-8", 0), 0u)
      << r.out;
  ExpectNothingImported();
  r = Import(text, {"--skip-bad"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["skipped"], 1);
  EXPECT_EQ(o["bad_rows"].as_array()[0].as_object()["line"], 5);
  EXPECT_EQ(Count()["live"], 4);
}

TEST_F(CliImport, UsageErrorsExitTwo) {
  const std::string file = Write("ok.ndjson", Rows(1, 2));
  const std::vector<std::vector<std::string>> bad = {
      {"import", file},                                              // no --collection
      {"import", file, "--collection", "people", "--mode", "merge"},
      {"import", file, "--collection", "people", "--chunk", "0"},
      {"import", file, "--collection", "__litetx.x"},
      {"import", file, "--collection", "people", "--id-field", "_ltx"},
      {"import", dir_ + "/missing.ndjson", "--collection", "people"},
      {"import", dir_, "--collection", "people"},
  };
  for (const auto& args : bad) {
    RunResult r = Cli(args);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
    EXPECT_EQ(r.err.rfind("litetx: ", 0), 0u) << r.err;
  }
  struct stat st {};
  EXPECT_NE(::stat(path_.c_str(), &st), 0) << "a refused import created the store";
}

TEST_F(CliImport, ProgressOnlyOnATerminalAndNeverWithQuiet) {
  const std::string file = Write("rows.ndjson", Rows(1, 50));
  const auto args = [&](const std::string& collection, bool quiet) {
    std::vector<std::string> a =
        With({"import", file, "--collection", collection, "--id-field", "id"});
    if (quiet) a.push_back("--quiet");
    return a;
  };
  RunResult tty = RunWithTerminalStderr(args("a", false));
  ASSERT_EQ(tty.code, 0) << tty.err;
  EXPECT_EQ(json::parse(tty.out).as_object()["imported"], 50);
  // The last drawing: the whole file read (its size is known), then the commit.
  EXPECT_NE(tty.err.find("100%"), std::string::npos) << tty.err;
  EXPECT_NE(tty.err.find("50 rows"), std::string::npos) << tty.err;
  EXPECT_NE(tty.err.find("rows/s"), std::string::npos) << tty.err;
  EXPECT_NE(tty.err.find("committing..."), std::string::npos) << tty.err;

  RunResult quiet = RunWithTerminalStderr(args("b", true));
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(json::parse(quiet.out).as_object()["imported"], 50);

  RunResult pipe = RunCli(args("c", false));
  ASSERT_EQ(pipe.code, 0) << pipe.err;
  EXPECT_EQ(pipe.err, "");
}

TEST_F(CliImport, WithoutSettlingTheRowsAreVisibleAndStillHeld) {
  RunResult r = Import(Rows(1, 4), {"--no-settle"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["settled"], false);
  EXPECT_EQ(o["settled_s"].to_number<double>(), 0.0);
  json::object c = Count();
  EXPECT_EQ(c["live"], 4);
  EXPECT_EQ(c["held"], 4);
}

TEST_F(CliImport, ALostCommitReplyIsUnknownNeitherCommittedNorRolledBack) {
  // Two rows, one chunk: the record (write 1), its chunk count (2), the chunk document (3), the
  // two rows (4, 5), the commit flip (6), which lands while its reply is lost, and the store
  // is gone from then on.
  RunResult r = Import(Rows(1, 2), {}, "partition-after-writes:6");
  EXPECT_EQ(r.code, 15) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "unknown");
  EXPECT_FALSE(o.contains("committed"));
  EXPECT_TRUE(o["txn_id"].is_string());
  // It did commit: the collector finishes it.
  RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
  ASSERT_EQ(gc.code, 0) << gc.err;
  EXPECT_EQ(gc.Json()["finished"], 1) << gc.out;
  EXPECT_EQ(Count()["live"], 2);
}

TEST_F(CliImport, ASignalWhileReadingRollsBack) {
  const std::string fifo = dir_ + "/release";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const struct {
    int number;
    const char* name;
    int code;
  } sigs[] = {{SIGINT, "SIGINT", 130}, {SIGTERM, "SIGTERM", 143}};
  for (const auto& sig : sigs) {
    SCOPED_TRACE(sig.name);
    // Held before write 4: the first chunk's rows, after its chunk document.
    Child c = Start(With({"import", Write("rows.ndjson", Rows(1, 9)), "--collection", "people",
                          "--id-field", "id", "--chunk", "3"}),
                    "hold-write:4:" + fifo);
    ASSERT_TRUE(WaitForStderr(c, "holding before write 4", seconds(60))) << c.err_read;
    ASSERT_EQ(::kill(c.pid, sig.number), 0);
    ASSERT_TRUE(WaitForStderr(c, std::string(sig.name) + " received", seconds(60)))
        << c.err_read;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
    RunResult r = Finish(std::move(c));
    EXPECT_EQ(r.code, sig.code) << r.err;
    json::object o = r.Json();
    EXPECT_EQ(o["outcome"], "cancelled");
    EXPECT_EQ(o["committed"], false);
    EXPECT_EQ(o["interrupted"], sig.name);
    EXPECT_EQ(o["rows_read"], 3);
    ExpectNothingImported();
  }
}

TEST_F(CliImport, BenchMeasuresAndCleansUp) {
  RunResult r = Cli({"import", "--bench", "300", "--chunk", "50"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  json::object o = r.Json();
  EXPECT_EQ(o["rows"], 300);
  EXPECT_GT(o["bytes"].to_number<std::int64_t>(), 300 * 180);
  EXPECT_GT(o["raw"].as_object()["seconds"].to_number<double>(), 0.0);
  json::object imp = o["import"].as_object();
  EXPECT_EQ(imp["rows"], 300);
  EXPECT_GT(imp["acknowledged_s"].to_number<double>(), 0.0);
  EXPECT_GE(imp["settled_s"].to_number<double>(), imp["acknowledged_s"].to_number<double>());
  EXPECT_EQ(imp["chunks"], 6);
  json::object rb = o["rollback"].as_object();
  EXPECT_EQ(rb["rows"], 300);
  EXPECT_GT(rb["rollback_s"].to_number<double>(), 0.0);
  EXPECT_GE(rb["rolled_back_s"].to_number<double>(), rb["rollback_s"].to_number<double>());
  json::object ratios = o["ratios"].as_object();
  for (const char* k : {"acknowledged_to_raw", "settled_to_raw", "rollback_to_raw"}) {
    EXPECT_GT(ratios[k].to_number<double>(), 0.0) << k;
  }
  EXPECT_GT(o["peak_rss_mb"].to_number<double>(), 0.0);
  EXPECT_GT(o["peak_anon_rss_mb"].to_number<double>(), 0.0);
  EXPECT_LE(o["peak_anon_rss_mb"].to_number<double>(), o["peak_rss_mb"].to_number<double>());
  json::object targets = o["targets"].as_object();
  EXPECT_EQ(targets.size(), 5u);
  bool all = true;
  for (const auto& kv : targets) {
    EXPECT_TRUE(kv.value() == "met" || kv.value() == "not met") << kv.key();
    all = all && kv.value() == "met";
  }
  EXPECT_EQ(o["all_targets_met"], all);
  EXPECT_EQ(o["problems"], json::array());
  // Its collections were erased; its transactions are settled.
  RunResult list = Cli({"collections", "list", "--format", "json"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(list.Json()["count"], 0) << list.out;
  EXPECT_EQ(Unsettled(), 0);
}

}  // namespace
}  // namespace litetx::clitest
