// tests/cli/cli_import_hostile_test.cpp — `litetx import` fed hostile input and signals: files
// that are exotic in encoding, framing or ids; /dev/zero (memory must stay flat); stdin closed,
// a directory, or cut short; a FIFO, also one whose writer stalls; SIGINT and SIGTERM during
// the commit and the settling, and a second signal there, each followed by `litetx gc`: the
// store holds every row or none.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "cli_harness.h"

extern char** environ;

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// 700 rows of 100 bytes: more than the first 64 KiB block the importer reads (a read waits
// for a whole block, or the end of the input).
std::string PaddedRows() {
  std::string text;
  for (int i = 1; i <= 700; ++i) {
    std::string row = "{\"id\":\"p" + std::to_string(i) + "\",\"pad\":\"";
    row += std::string(100 - row.size() - 3, 'x') + "\"}\n";
    text += row;
  }
  return text;
}

// NDJSON rows {"id": "p<i>", "n": i} for i in [from, to].
std::string Rows(int from, int to) {
  std::string out;
  for (int i = from; i <= to; ++i) {
    out += R"({"id":"p)" + std::to_string(i) + R"(","n":)" + std::to_string(i) + "}\n";
  }
  return out;
}

// True once `pid` has exited (it is not reaped: Finish still collects its status).
bool Exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

// The resident set of `pid` in kB (0 if unknown).
long RssKb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// The state letter of the main thread of `pid` (/proc/PID/task/PID/stat: 'R' running, 'S'
// sleeping...), or '?'.
char MainThreadState(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(f, stat);
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
}

// Kills a child that a failed assertion left running (the harness only knows the children
// it started itself).
struct Reaper {
  pid_t pid = -1;
  ~Reaper() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Starts `litetx args...` with stdin taken from `stdin_fd` (-1: closed) and stdout captured
// (or closed, `stdout_open` false), stderr captured, as by the harness's Start.
Child Spawn(const std::vector<std::string>& args, int stdin_fd, bool stdout_open = true) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return {};
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdin_fd < 0) {
    posix_spawn_file_actions_addclose(&fa, 0);
  } else {
    posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
  }
  if (stdout_open) {
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  } else {
    posix_spawn_file_actions_addclose(&fa, 1);  // its pipe is only read, to an empty end
  }
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
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
  Child c;
  const int rc = ::posix_spawn(&c.pid, LITETX_CLI_PATH, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << std::strerror(rc);
    ::close(out[0]);
    ::close(err[0]);
    c.pid = -1;
    return c;
  }
  c.out_fd = out[0];
  c.err_fd = err[0];
  return c;
}

// A pipe holding `text`, its write end closed: the read end, to give a child as stdin.
int PipeOf(const std::string& text) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  (void)!::write(p[1], text.data(), text.size());  // small: fits the pipe
  ::close(p[1]);
  return p[0];
}

class CliImportHostile : public CliTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::vector<std::string> ImportArgs(const std::string& file, const std::string& collection,
                                      std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = With({"import", file, "--collection", collection, "--id-field",
                                       "id", "--chunk", "3"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  json::object Count(const std::string& collection) const {
    RunResult r = Cli({"collections", "count", collection, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.Json();
  }
  // No live row, no held document in `collection`, no open record.
  void ExpectNothingImported(const std::string& collection) const {
    json::object c = Count(collection);
    EXPECT_EQ(c["live"], 0) << json::serialize(c);
    EXPECT_EQ(c["held"], 0) << json::serialize(c);
    EXPECT_EQ(Unsettled(), 0);
  }
  // Makes a FIFO in the test's directory.
  std::string Fifo(const std::string& name) const {
    const std::string path = dir_ + "/" + name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
    return path;
  }
  // Opens `fifo` for writing once a reader has it open (at most 10 s); -1 on timeout.
  static int OpenWriter(const std::string& fifo) {
    int fd = -1;
    PollUntil([&] {
      fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      return fd >= 0;
    }, seconds(10));
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
  }
  static void WriteFd(int fd, const std::string& s) {
    ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  // After PaddedRows went into its input: the import wrote every chunk it could (rows 1-699
  // of the 700; row 700 waits in its buffer for the next chunk) and its main thread sleeps,
  // waiting for more input.
  bool WaitStalled(pid_t pid) const {
    return PollUntil([&] { return Count("stall")["held"] == 699; }, seconds(30), milliseconds(50)) &&
           PollUntil([&] { return MainThreadState(pid) == 'S'; }, seconds(10));
  }
  void Gc() const {
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    ASSERT_EQ(gc.code, 0) << gc.err << gc.out;
  }
};

TEST_F(CliImportHostile, ExoticFilesImportOrFailWithTheirLineAndWriteNothing) {
  struct Case {
    const char* name;
    std::string text;
    int code;
    const char* message;  // in "message" (not committed) — or the number of rows imported
    int imported;
  };
  const Case cases[] = {
      {"a 0-byte file", "", 2, "no rows", 0},
      {"[ alone", "[", 2, "line 1: the input ends inside the array", 0},
      {"[,]", "[,]", 2, "line 1: empty array element", 0},
      {"a number row", Rows(1, 2) + "42\n", 2, "line 3: not a JSON object (a number)", 0},
      {"a control character in an id", Rows(1, 1) + "{\"id\":\"p\\u0007\"}\n", 2,
       "line 2: bad id in \"id\": document id contains a control character", 0},
      {"a 383-byte id", Rows(1, 1) + "{\"id\":\"" + std::string(383, 'x') + "\"}\n", 2,
       "line 2: bad id in \"id\": document id is 383 bytes, over the limit of 382", 0},
      {"an integer id over uint64", Rows(1, 1) + "{\"id\":18446744073709551616}\n", 2,
       "line 2: the id \"id\" must be a string or an integer", 0},
      {"1e400 in a row", Rows(1, 4) + "{\"id\":\"p5\",\"x\":1e400}\n", 2, "line 5: ", 0},
      {"invalid UTF-8 in an id", Rows(1, 1) + "{\"id\":\"\xc0\xaf\"}\n", 2,
       "line 2: not valid UTF-8", 0},
      {"BOM, CRLF, ids with slashes and uint64",
       "\xEF\xBB\xBF{\"id\":\"a/b\"}\r\n{\"id\":18446744073709551615}\r\n", 0, "", 2},
  };
  int k = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string collection = "c" + std::to_string(k++);
    RunResult r = RunCli(ImportArgs(Write("in" + std::to_string(k), c.text), collection));
    EXPECT_EQ(r.code, c.code) << r.err;
    json::object o = r.Json();
    if (c.code == 0) {
      EXPECT_EQ(o["committed"], true);
      EXPECT_EQ(o["imported"], c.imported);
      EXPECT_EQ(Count(collection)["live"], c.imported);
    } else {
      EXPECT_EQ(o["committed"], false);
      EXPECT_NE(std::string(o["message"].as_string()).find(c.message), std::string::npos)
          << o["message"];
      ExpectNothingImported(collection);
    }
  }
  EXPECT_EQ(Get("c9", "a/b")["doc"].as_object()["id"], "a/b");
  EXPECT_EQ(Get("c9", "18446744073709551615")["doc"].as_object()["id"],
            json::value(std::numeric_limits<std::uint64_t>::max()));
}

// /dev/zero is one line that never ends. With --skip-bad the row must be read to its end to be
// skipped: it is dropped once it is over max_row_bytes, so memory stays flat while it is read,
// and a signal stops the reading (rolled back, exit 130); nothing was written (the transaction
// begins with the first row, which never ends).
TEST_F(CliImportHostile, DevZeroKeepsMemoryFlatAndASignalEndsIt) {
  Child c = Start(With({"import", "/dev/zero", "--collection", "zero", "--skip-bad"}));
  Reaper reaper{c.pid};
  ASSERT_GT(c.pid, 0);
  long peak_kb = 0;
  for (int i = 0; i < 30 && !Exited(c.pid); ++i) {  // 600 ms
    peak_kb = std::max(peak_kb, RssKb(c.pid));
    std::this_thread::sleep_for(milliseconds(20));
  }
  const bool ran = !Exited(c.pid);
  ::kill(c.pid, SIGINT);
  RunResult r = Finish(std::move(c));
  reaper.pid = -1;
  std::printf("litetx import /dev/zero --skip-bad: peak RSS %ld kB while reading for 600 ms\n",
              peak_kb);
  EXPECT_TRUE(ran) << "it stopped by itself: " << r.out << r.err;
  EXPECT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, 64 * 1024) << "the endless row is held in memory";
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_EQ(r.Json()["outcome"], "cancelled") << r.out;
  EXPECT_EQ(Unsettled(), 0);
}

// /dev/zero without --skip-bad: the first row is bad as soon as it is longer than the limit,
// so the import stops there (exit 2, "line 1: the row is longer than the limit"), without
// waiting for the end of the row, which on /dev/zero never comes.
TEST_F(CliImportHostile, DevZeroStopsWithAClearError) {
  Child c = Start(With({"import", "/dev/zero", "--collection", "zero"}));
  Reaper reaper{c.pid};
  ASSERT_GT(c.pid, 0);
  const bool exited = PollUntil([&] { return Exited(c.pid); }, seconds(5), milliseconds(20));
  if (!exited) ::kill(c.pid, SIGKILL);
  RunResult r = Finish(std::move(c));
  reaper.pid = -1;
  ASSERT_TRUE(exited) << "still reading /dev/zero after 5 s";
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::string(r.Json()["message"].as_string()).rfind("line 1: the row is ", 0), 0u)
      << r.out;
}

TEST_F(CliImportHostile, StdinClosedADirectoryOrCutShortIsAnErrorAndWritesNothing) {
  // stdin closed, and stdin a directory (reads fail at once): refused, nothing written.
  for (const bool directory : {false, true}) {
    SCOPED_TRACE(directory ? "stdin is a directory" : "stdin is closed");
    const int fd = directory ? ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (directory) {
      ASSERT_GE(fd, 0) << std::strerror(errno);
    }
    Child c = Spawn(ImportArgs("-", "stdin"), fd);
    Reaper reaper{c.pid};
    if (fd >= 0) ::close(fd);
    ASSERT_TRUE(PollUntil([&] { return Exited(c.pid); }, seconds(20)));
    RunResult r = Finish(std::move(c));
    reaper.pid = -1;
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("litetx: "), std::string::npos) << r.err;
    ExpectNothingImported("stdin");
  }
  // The writer of stdin stops in the middle of a row, or of the array.
  RunResult r = RunCli(ImportArgs("-", "cut"), "", Rows(1, 4) + R"({"id":"p5","n")");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::string(r.Json()["message"].as_string()).rfind("line 5: malformed JSON", 0), 0u)
      << r.out;
  ExpectNothingImported("cut");
  r = RunCli(ImportArgs("-", "cut"), "", R"([{"id":"p1"},{"id":"p2"},{"id":"p3"},{"id":"p4"},{"id")");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::string(r.Json()["message"].as_string()).rfind("line 1: the input ends inside", 0),
            0u)
      << r.out;
  ExpectNothingImported("cut");
}

// A standard descriptor the caller closed is not taken by a file of the store: with stdin
// closed, `import -` reads nothing (no rows), never the store's lock file; with stdout closed,
// the summary goes nowhere and lock.mdb is left as it was.
TEST_F(CliImportHostile, ClosedStandardDescriptorsAreNotTakenForTheStoresFiles) {
  {
    Child c = Spawn(ImportArgs("-", "stdin"), -1);
    Reaper reaper{c.pid};
    RunResult r = Finish(std::move(c));
    reaper.pid = -1;
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.out.find("no rows"), std::string::npos) << "it read something: " << r.out;
  }
  {
    ASSERT_EQ(RunCli(ImportArgs(Write("a.ndjson", Rows(1, 2)), "first")).code, 0);
    const auto lock_size = std::filesystem::file_size(path_ + "/lock.mdb");
    const int in = PipeOf(Rows(1, 2));
    Child c = Spawn(ImportArgs("-", "second"), in, /*stdout_open=*/false);
    Reaper reaper{c.pid};
    ::close(in);
    RunResult r = Finish(std::move(c));
    reaper.pid = -1;
    EXPECT_EQ(std::filesystem::file_size(path_ + "/lock.mdb"), lock_size)
        << "the summary went into the store's lock file (exit " << r.code << ")";
  }
}

TEST_F(CliImportHostile, AFifoIsReadToItsEnd) {
  const std::string fifo = Fifo("rows.fifo");
  Child c = Start(ImportArgs(fifo, "fifo"));
  Reaper reaper{c.pid};
  const int fd = OpenWriter(fifo);
  ASSERT_GE(fd, 0) << "the import never opened the FIFO";
  WriteFd(fd, Rows(1, 5));
  WriteFd(fd, Rows(6, 7));
  ::close(fd);
  RunResult r = Finish(std::move(c));
  reaper.pid = -1;
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.Json()["imported"], 7);
  EXPECT_EQ(Count("fifo")["live"], 7);
}

// A FIFO whose writer wrote 700 rows and then stalls, keeping it open: the first SIGINT stops the reading (docs/import.md: "SIGINT ... while
// rows are being read stops the reading: the import is rolled back", exit 130): the input is
// waited for in slices that look at the signals in between.
TEST_F(CliImportHostile, ASignalStopsAnImportWhoseInputStalls) {
  const std::string fifo = Fifo("rows.fifo");
  Child c = Start(ImportArgs(fifo, "stall"));
  Reaper reaper{c.pid};
  const int fd = OpenWriter(fifo);
  ASSERT_GE(fd, 0);
  WriteFd(fd, PaddedRows());
  ASSERT_TRUE(WaitStalled(c.pid)) << "the import never got to wait for more input";
  ::kill(c.pid, SIGINT);
  ASSERT_TRUE(WaitForStderr(c, "SIGINT received", seconds(10))) << c.err_read;
  const bool stopped = PollUntil([&] { return Exited(c.pid); }, seconds(3), milliseconds(20));
  ::close(fd);  // lets a stuck import see the end of its input
  RunResult r = Finish(std::move(c));
  reaper.pid = -1;
  EXPECT_TRUE(stopped) << "still waiting for input 3 s after SIGINT";
  EXPECT_EQ(r.code, 130) << r.err;
  EXPECT_EQ(r.Json()["outcome"], "cancelled");
  ExpectNothingImported("stall");
}

// Nine rows in chunks of three: write 1 is the record; each chunk is its count, its chunk
// document and its three rows (writes 2-6, 7-11, 12-16; the last chunk is written by the
// commit); write 17 is the commit flip; the settling follows (write 18 on).
constexpr int kFlipWrite = 17;

// A signal while the commit or the settling is held: they run to their end; the summary says
// committed and interrupted; the exit code is 128 + the signal. `litetx gc` changes nothing.
TEST_F(CliImportHostile, ASignalDuringTheCommitOrTheSettlingLetsItFinish) {
  const std::string fifo = Fifo("hold.fifo");
  const std::string file = Write("rows.ndjson", Rows(1, 9));
  const struct {
    int number;
    const char* name;
    int code;
    int write;
  } runs[] = {{SIGINT, "SIGINT", 130, kFlipWrite},
              {SIGTERM, "SIGTERM", 143, kFlipWrite},
              {SIGINT, "SIGINT", 130, kFlipWrite + 1}};
  int k = 0;
  for (const auto& run : runs) {
    const std::string collection = "sig" + std::to_string(k++);
    SCOPED_TRACE(std::string(run.name) + " before write " + std::to_string(run.write));
    Child c = Start(ImportArgs(file, collection),
                    "hold-write:" + std::to_string(run.write) + ":" + fifo);
    Reaper reaper{c.pid};
    ASSERT_TRUE(WaitForStderr(c, "holding before write " + std::to_string(run.write), seconds(60)))
        << c.err_read;
    ASSERT_EQ(::kill(c.pid, run.number), 0);
    ASSERT_TRUE(WaitForStderr(c, std::string(run.name) + " received", seconds(60))) << c.err_read;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
    RunResult r = Finish(std::move(c));
    reaper.pid = -1;
    EXPECT_EQ(r.code, run.code) << r.err;
    json::object o = r.Json();
    EXPECT_EQ(o["outcome"], "committed");
    EXPECT_EQ(o["committed"], true);
    EXPECT_EQ(o["interrupted"], run.name);
    EXPECT_EQ(o["imported"], 9);
    EXPECT_EQ(o["settled"], true);
    Gc();
    json::object count = Count(collection);
    EXPECT_EQ(count["live"], 9) << json::serialize(count);
    EXPECT_EQ(count["held"], 0) << json::serialize(count);
    EXPECT_EQ(Unsettled(), 0);
  }
}

// A second signal while the commit is held ends the process there; `litetx gc` then settles
// the import all or nothing: nothing when it died before the flip, every row after it.
TEST_F(CliImportHostile, ASecondSignalDuringTheCommitThenGcLeavesAllRowsOrNone) {
  const std::string fifo = Fifo("hold.fifo");
  const std::string file = Write("rows.ndjson", Rows(1, 9));
  const struct {
    int write;
    int rows;  // after gc
  } runs[] = {{kFlipWrite - 1, 0}, {kFlipWrite, 0}, {kFlipWrite + 1, 9}};
  int k = 0;
  for (const auto& run : runs) {
    const std::string collection = "twice" + std::to_string(k++);
    SCOPED_TRACE("held before write " + std::to_string(run.write));
    Child c = Start(ImportArgs(file, collection),
                    "hold-write:" + std::to_string(run.write) + ":" + fifo);
    Reaper reaper{c.pid};
    ASSERT_TRUE(WaitForStderr(c, "holding before write " + std::to_string(run.write), seconds(60)))
        << c.err_read;
    ASSERT_EQ(::kill(c.pid, SIGINT), 0);
    ASSERT_TRUE(WaitForStderr(c, "SIGINT received", seconds(60))) << c.err_read;
    ASSERT_EQ(::kill(c.pid, SIGINT), 0);
    RunResult r = Finish(std::move(c));
    reaper.pid = -1;
    EXPECT_EQ(r.code, 130) << r.err;
    EXPECT_EQ(r.out, "") << "a summary after the second signal";
    Gc();
    json::object count = Count(collection);
    EXPECT_EQ(count["live"], run.rows) << json::serialize(count);
    EXPECT_EQ(count["held"], 0) << json::serialize(count);
    EXPECT_EQ(Unsettled(), 0);
  }
}

}  // namespace
}  // namespace litetx::clitest
