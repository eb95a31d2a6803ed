// tests/cli/cli_gc_test.cpp — `litetx gc`: counters, --older-than, --purge, failures, and the
// background mode stopped by a signal.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cli_harness.h"
#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

constexpr const char* kPair =
    R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"n":1}},
                   {"op":"insert","collection":"c","id":"y","doc":{"n":2}}]})";

TEST_F(CliTest, GcOnceFinishesAndReversesWithOlderThan) {
  // Committed but unfinished (crash right after the commit flip, write 4).
  ASSERT_EQ(Apply(kPair, "crash-after-writes:4").code, 86);
  // Uncommitted (crash after the record and one document).
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"d","id":"x","doc":{}},
                                  {"op":"insert","collection":"d","id":"y","doc":{}}]})",
                  "crash-after-writes:2").code, 86);
  EXPECT_EQ(Unsettled(), 2);

  // Within their lease (5 s) the collector leaves both alone...
  RunResult r = Cli({"gc", "--once"});
  ASSERT_EQ(r.code, 0) << r.err;
  {
    json::object o = r.Json();
    for (const char* k : {"finished", "reversed", "failed", "purged", "undone", "swept", "folded",
                          "pages_purged"}) {
      EXPECT_EQ(o[k], 0) << k;
    }
    EXPECT_EQ(o["runs"], 1);
    EXPECT_EQ(o["status"], "ok");
    // The pass's report: it read both records and found neither due.
    json::object& last = o["last_pass"].as_object();
    EXPECT_EQ(last["records_read"], 2);
    EXPECT_EQ(last["abandoned"].as_object()["due"], 0);
    EXPECT_EQ(last["unfinished"].as_object()["due"], 0);
    EXPECT_EQ(last["backlog"], 0);
    EXPECT_EQ(last["complete"], true);
    EXPECT_EQ(last["oldest_abandoned_ms"], 0);
  }
  EXPECT_EQ(Unsettled(), 2);

  // ...but --older-than 1ms treats everything as stale. (--no-fold keeps the outcome markers
  // in the record collection, so that `txns` lists them below.)
  r = Cli({"gc", "--once", "--older-than", "1ms", "--name", "gc-test", "--no-fold"});
  ASSERT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["finished"], 1);
  EXPECT_EQ(o["reversed"], 1);
  EXPECT_EQ(o["failed"], 0);
  EXPECT_EQ(o["folded"], 0);
  {
    json::object& last = o["last_pass"].as_object();
    EXPECT_EQ(last["abandoned"].as_object()["due"], 1);
    EXPECT_EQ(last["abandoned"].as_object()["done"], 1);
    EXPECT_EQ(last["unfinished"].as_object()["due"], 1);
    EXPECT_EQ(last["unfinished"].as_object()["done"], 1);
    EXPECT_EQ(last["backlog"], 0);
  }
  EXPECT_EQ(Unsettled(), 0);
  EXPECT_EQ(Get("c", "y")["status"], "found");
  EXPECT_EQ(Get("d", "x")["status"], "not_found");
  bool named = false;
  json::object txns = Cli({"txns"}).Json();
  for (const json::value& t : txns["transactions"].as_array()) {
    named = named || (t.as_object().contains("aborted_by") && t.as_object().at("aborted_by") == "gc-test");
  }
  EXPECT_TRUE(named) << "the claimed record should name its collector";

  // A pass that folds: both markers go to their outcome pages, the record collection empties,
  // and the outcomes still answer.
  r = Cli({"gc", "--once"});
  ASSERT_EQ(r.code, 0) << r.err;
  o = r.Json();
  EXPECT_EQ(o["folded"], 2);
  EXPECT_EQ(o["last_pass"].as_object()["markers"].as_object()["due"], 2);
  EXPECT_EQ(o["last_pass"].as_object()["markers"].as_object()["done"], 2);
  EXPECT_TRUE(Cli({"txns"}).Json()["transactions"].as_array().empty());
}

TEST_F(CliTest, GcPurgesTombstonesPastTheirRetentionInAnyCollection) {
  ASSERT_EQ(Apply(kPair).code, 0);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x"},
                                  {"op":"delete","collection":"c","id":"y"}]})").code, 0);
  // "--tombstone-retention 1ms": let the tombstones get older than that. (Time has
  // to pass here; a sleep never ends early, so this holds however loaded the machine is.)
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Default retention (24h): nothing to purge yet.
  EXPECT_EQ(Cli({"gc", "--once", "--purge", "c"}).Json()["purged"], 0);
  EXPECT_EQ(Get("c", "x")["status"], "deleted");
  // Past the retention: found through the tombstone index, whatever collections are swept.
  RunResult r = Cli({"gc", "--once", "--purge", "other", "--tombstone-retention", "1ms"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.Json()["purged"], 2);
  EXPECT_EQ(r.Json()["last_pass"].as_object()["tombstones"].as_object()["done"], 2);
  EXPECT_EQ(r.Json()["swept"], 0);  // "other" is empty
  EXPECT_EQ(Get("c", "x")["status"], "not_found");
  EXPECT_EQ(Cli({"scan", "c", "--include-deleted"}).Json()["count"], 0);
}

TEST_F(CliTest, GcFailureExitsOneAndStillPrintsCounters) {
  ASSERT_EQ(Apply(kPair, "crash-after-writes:4").code, 86);
  {
    auto store = LmdbStore::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Create({std::string(kTransactionsCollection), "bad"},
                                 {{"state", "pending"}}).ok());
  }
  RunResult r = Cli({"gc", "--once", "--older-than", "1ms"});
  EXPECT_EQ(r.code, 1);
  json::object o = r.Json();
  EXPECT_EQ(o["status"], "corruption");
  EXPECT_EQ(o["failed"], 1);
  EXPECT_EQ(o["finished"], 1);  // it went on with the other record
  EXPECT_NE(r.err.find("litetx: gc: corruption"), std::string::npos) << r.err;
}

// Waits until a thread of process `pid` blocks `sig`: gc blocks SIGINT and SIGTERM before it
// starts the collector's thread (which inherits the mask) and then waits for them, so once
// that thread exists the signal can no longer kill the process while it is starting. (The
// main thread's own mask cannot be checked: sigwait unblocks the set while it waits.)
// The process announces nothing, so its threads' masks are polled (up to a minute, which only
// bounds a broken run).
bool WaitBlocked(pid_t pid, int sig) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  return PollUntil(
      [&] {
        std::error_code ec;
        // main() blocks the signals at once and starts the signal watcher; the command notes
        // a first signal only once it runs its collector (a third thread): before that, a
        // signal ends the process at once.
        std::size_t threads = 0;
        for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
          (void)task;
          ++threads;
        }
        if (threads < 3) return false;
        for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
          std::ifstream status(task.path() / "status");
          std::string line;
          while (std::getline(status, line)) {
            if (line.rfind("SigBlk:", 0) == 0 &&
                (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1) & 1) != 0) {
              return true;
            }
          }
        }
        return false;
      },
      std::chrono::minutes(1));
}

TEST_F(CliTest, GcBackgroundRunsUntilSignalled) {
  ASSERT_EQ(Apply(kPair, "crash-after-writes:4").code, 86);
  Child gc = Start(With({"gc", "--interval", "20ms", "--older-than", "1ms"}));
  // The collector says nothing while it runs: poll the store until it has settled the record.
  EXPECT_TRUE(PollUntil([&] { return Unsettled() == 0; }, std::chrono::minutes(1),
                        std::chrono::milliseconds(10)));
  ASSERT_TRUE(WaitBlocked(gc.pid, SIGTERM));
  ASSERT_EQ(::kill(gc.pid, SIGTERM), 0);
  RunResult r = Finish(gc);
  EXPECT_EQ(r.code, 0) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["status"], "stopped");
  EXPECT_EQ(o["signal"], "SIGTERM");
  EXPECT_GE(o["runs"].to_number<std::int64_t>(), 1);
  EXPECT_EQ(o["finished"], 1);

  gc = Start(With({"gc"}));
  ASSERT_TRUE(WaitBlocked(gc.pid, SIGINT));
  ASSERT_EQ(::kill(gc.pid, SIGINT), 0);
  r = Finish(gc);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.Json()["signal"], "SIGINT");
}

}  // namespace
}  // namespace litetx::clitest
