// tests/cli/cli_harness.h — runs the `litetx` binary (LITETX_CLI_PATH) as a child process for
// the CLI tests, and a fixture giving each test its own temporary store directory.
//
// Children are started with posix_spawn; stdin is fed from a string, stdout and stderr are
// captured. LITETX_FAULTS is never inherited from the test's environment: each call says
// which faults (if any) the child gets.
//
// Thread safety: none needed (tests run on one thread; a Child belongs to one test).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace litetx::clitest {

struct RunResult {
  int code = -1;    // exit status; 128 + signal number if the child was killed
  std::string out;  // stdout
  std::string err;  // stderr
  // stdout parsed as one JSON object (an empty object, and a test failure, if it is not one).
  boost::json::object Json() const;
};

// The "versions" array of a committed `apply` (empty, and a test failure, if there is none).
std::vector<std::uint64_t> Versions(const RunResult& r);

// The version an insert of a new id made now gets: the wall clock in milliseconds, times 1000
// (the CLI runs on the system clock). An insert between two calls gets a version in between.
std::uint64_t FirstVersionNow();
// The wall clock in milliseconds since the epoch, as the CLI stamps records.
std::int64_t NowMs();

// Polls `done` every `every` until it returns true (true) or `timeout` passes (false). For
// states another process reaches with no event to wait on; the timeout only bounds a broken
// run, it is not a guess at how long the state takes.
template <typename Done>
bool PollUntil(Done done, std::chrono::milliseconds timeout,
               std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

// A child started in the background; Finish() waits for it.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out_read;  // output WaitForStderr read already; Finish() puts it first
  std::string err_read;
};

// Starts `litetx args...` with LITETX_FAULTS=faults (unset when empty) and stdin = `input`.
Child Start(const std::vector<std::string>& args, const std::string& faults = "",
            const std::string& input = "");
// Reads the child's output until its stderr contains `text` (true), or it closes its stderr or
// `timeout` passes (false). What it read stays in the Child for Finish.
bool WaitForStderr(Child& child, const std::string& text, std::chrono::milliseconds timeout);
// Collects the output of `child` and waits for it to exit.
RunResult Finish(Child child);
// Start + Finish.
RunResult RunCli(const std::vector<std::string>& args, const std::string& faults = "",
              const std::string& input = "");

// A fresh directory per test (removed afterwards) holding an LMDB store "db". TearDown also
// kills (SIGKILL) any child that a test started and did not Finish, e.g. after a failed ASSERT.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Global flags selecting this test's store (LMDB without fsync: survives process crashes,
  // which is all these tests need) followed by `args`.
  std::vector<std::string> With(std::vector<std::string> args) const;
  // `litetx <store flags> args...`.
  RunResult Cli(std::vector<std::string> args, const std::string& faults = "",
                const std::string& input = "") const;
  // Writes `txn_json` to a file and runs `apply FILE extra...`.
  RunResult Apply(const std::string& txn_json, const std::string& faults = "",
                  std::vector<std::string> extra = {}) const;
  // `get COLL ID` parsed; a test failure if the command fails.
  boost::json::object Get(const std::string& collection, const std::string& id) const;
  // The stdout of `scan COLL --include-deleted` (to compare states before and after).
  std::string ScanText(const std::string& collection) const;
  // Number of records `txns` lists that are not outcome markers (pending or unfinished).
  std::int64_t Unsettled() const;

  std::string dir_;    // the temporary directory
  std::string path_;   // dir_ + "/db"
  std::string store_;  // "lmdb:" + path_
};

// The two accounts most tests start from (a1 = 100, a2 = 50), and a transfer of 30 from a1 to
// a2: a two-document transaction of 2N+3 = 7 writes.
inline constexpr const char* kSeed =
    R"({"actions":[{"op":"insert","collection":"accounts","id":"a1","doc":{"balance":100}},
                   {"op":"insert","collection":"accounts","id":"a2","doc":{"balance":50}}]})";
inline constexpr const char* kTransfer =
    R"({"actions":[{"op":"adjust","collection":"accounts","id":"a1","by":{"balance":-30}},
                   {"op":"adjust","collection":"accounts","id":"a2","by":{"balance":30}}]})";

}  // namespace litetx::clitest
