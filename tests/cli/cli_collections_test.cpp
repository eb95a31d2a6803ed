// tests/cli/cli_collections_test.cpp — `litetx collections list|count|drop`: what each lists
// and counts (live, deleted, held; placeholders of uncommitted inserts are not live), drop in
// batches through the engine leaving no open record, its refusals (no --yes, the engine's own
// collection with and without --force while a transaction is pending), documents held by
// another transaction, SIGINT during a drop, bad names, and the same commands on redis://.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "cli_redis.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::seconds;

// `count` fields of a user collection: live, deleted, held, stored.
struct Counts {
  std::int64_t live = -1, deleted = -1, held = -1, stored = -1;
  friend bool operator==(const Counts&, const Counts&) = default;
};
std::ostream& operator<<(std::ostream& os, const Counts& c) {
  return os << "{live " << c.live << ", deleted " << c.deleted << ", held " << c.held
            << ", stored " << c.stored << "}";
}

// An apply inserting `n` documents item00.. into `collection`.
std::string InsertMany(const std::string& collection, int n) {
  json::array actions;
  for (int i = 0; i < n; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "item%02d", i);
    actions.push_back(json::object{{"op", "insert"},
                                   {"collection", collection},
                                   {"id", id},
                                   {"doc", json::object{{"n", i}}}});
  }
  return json::serialize(json::object{{"actions", std::move(actions)}});
}

class CliCollections : public CliTest {
 protected:
  Counts Count(const std::string& collection) const {
    RunResult r = Cli({"collections", "count", collection, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    json::object o = r.Json();
    auto field = [&](const char* name) {
      const json::value* v = o.if_contains(name);
      return v != nullptr && v->is_int64() ? v->as_int64() : -1;
    };
    return Counts{field("live"), field("deleted"), field("held"), field("stored")};
  }
  // The names `collections list [extra]` prints, in order.
  std::vector<std::string> Names(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"collections", "list", "--format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Cli(args);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<std::string> names;
    json::object o = r.Json();
    if (const json::value* list = o.if_contains("collections"); list && list->is_array()) {
      for (const auto& c : list->get_array()) {
        names.emplace_back(c.as_object().at("name").as_string());
      }
    }
    return names;
  }
  // Transaction records that are pending (`txns --state pending`).
  std::size_t PendingRecords() const {
    RunResult r = Cli({"txns", "--state", "pending", "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.Json()["transactions"].as_array().size();
  }
};

TEST_F(CliCollections, ListCountAndDropOnLmdb) {
  ASSERT_EQ(Apply(kSeed).code, 0);
  ASSERT_EQ(Apply(InsertMany("others", 3)).code, 0);
  EXPECT_EQ(Names(), (std::vector<std::string>{"accounts", "others"}));
  EXPECT_EQ(Names({"--all"}), (std::vector<std::string>{"__litetx.txn", "accounts", "others"}));

  RunResult counts = Cli({"collections", "list", "--counts", "--all", "--format", "json"});
  ASSERT_EQ(counts.code, 0) << counts.err;
  json::array list = counts.Json()["collections"].as_array();
  ASSERT_EQ(list.size(), 3u) << counts.out;
  EXPECT_EQ(list[0].as_object()["engine"], true);
  EXPECT_EQ(list[1].as_object()["live"], 2) << counts.out;
  EXPECT_EQ(list[1].as_object()["engine"], false);
  EXPECT_EQ(list[2].as_object()["live"], 3) << counts.out;
  EXPECT_EQ(Count("accounts"), (Counts{2, 0, 0, 2}));

  // Without --yes: refused, and nothing changes.
  const std::string before = ScanText("accounts");
  RunResult refused = Cli({"collections", "drop", "accounts"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("pass --yes"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_EQ(ScanText("accounts"), before);

  RunResult drop = Cli({"collections", "drop", "accounts", "--yes"});
  ASSERT_EQ(drop.code, 0) << drop.err;
  json::object o = drop.Json();
  EXPECT_EQ(o["deleted"], 2);
  EXPECT_EQ(o["transactions"], 1);
  EXPECT_EQ(o["busy"].as_array().size(), 0u);
  // Tombstones remain (the collection is still listed, with no live document) ...
  EXPECT_EQ(Count("accounts"), (Counts{0, 2, 0, 2}));
  EXPECT_EQ(Count("others"), (Counts{3, 0, 0, 3}));
  EXPECT_EQ(Get("accounts", "a1")["status"], "deleted");
  EXPECT_EQ(Unsettled(), 0);
  // ... until the collector purges them.
  RunResult gc = Cli({"gc", "--once", "--collection", "accounts", "--tombstone-retention", "1ms"});
  ASSERT_EQ(gc.code, 0) << gc.err;
  EXPECT_EQ(Names(), std::vector<std::string>{"others"});
}

TEST_F(CliCollections, DropInBatchesOfOneAndOfSeven) {
  ASSERT_EQ(Apply(InsertMany("items", 20)).code, 0);
  ASSERT_EQ(Apply(InsertMany("more", 20)).code, 0);
  ASSERT_EQ(Apply(kSeed).code, 0);
  RunResult one = Cli({"collections", "drop", "items", "--yes", "--batch", "1"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(one.Json()["deleted"], 20);
  EXPECT_EQ(one.Json()["transactions"], 20);
  RunResult seven = Cli({"collections", "drop", "more", "--yes", "--batch", "7"});
  ASSERT_EQ(seven.code, 0) << seven.err;
  EXPECT_EQ(seven.Json()["deleted"], 20);
  EXPECT_EQ(seven.Json()["transactions"], 3);  // 7 + 7 + 6
  EXPECT_EQ(Count("items"), (Counts{0, 20, 0, 20}));
  EXPECT_EQ(Count("more"), (Counts{0, 20, 0, 20}));
  EXPECT_EQ(Count("accounts"), (Counts{2, 0, 0, 2}));
  // No record left open; a second drop finds nothing to delete.
  EXPECT_EQ(PendingRecords(), 0u);
  EXPECT_EQ(Unsettled(), 0);
  RunResult again = Cli({"collections", "drop", "items", "--yes"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.Json()["deleted"], 0);
  EXPECT_EQ(again.Json()["transactions"], 0);
}

TEST_F(CliCollections, PendingTransactionIsHeldNotLiveAndKeepsTheEngineCollection) {
  // A crash that leaves the transaction open and not committed. Classic, after write 3: the
  // record, a3's placeholder and a1's tag are written (the commit flip would be write 4).
  // Parallel, after write 2: the record (staging) and a3's placeholder; a1 was never tagged
  // (after write 3 every document would be held, and that is committed).
  struct Case {
    const char* mode;
    int crash_after;
    Counts held;  // accounts while the transaction is open
  };
  const char* txn =
      R"({"actions":[{"op":"insert","collection":"accounts","id":"a3","doc":{"balance":1}},
                     {"op":"adjust","collection":"accounts","id":"a1","by":{"balance":-1}}]})";
  for (const Case& c : {Case{"classic", 3, Counts{2, 0, 2, 3}},
                        Case{"parallel", 2, Counts{2, 0, 1, 3}}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", crash-after-writes:" +
                 std::to_string(c.crash_after));
    path_ = dir_ + "/db-" + c.mode;
    store_ = "lmdb:" + path_;
    ASSERT_EQ(Apply(kSeed).code, 0);
    ASSERT_EQ(Apply(txn, "crash-after-writes:" + std::to_string(c.crash_after),
                    {"--commit", c.mode})
                  .code,
              86);
    EXPECT_EQ(Count("accounts"), c.held);
    ASSERT_EQ(PendingRecords(), 1u);

    RunResult txns = Cli({"collections", "count", "__litetx.txn", "--format", "json"});
    ASSERT_EQ(txns.code, 0) << txns.err;
    EXPECT_EQ(txns.Json()["unsettled"], 1);

    // The engine's collection: refused without --force, naming it ...
    RunResult plain = Cli({"collections", "drop", "__litetx.txn", "--yes"});
    EXPECT_EQ(plain.code, 2);
    EXPECT_NE(plain.err.find("--force"), std::string::npos) << plain.err;
    // ... and with --force while a record is unsettled.
    RunResult forced = Cli({"collections", "drop", "__litetx.txn", "--yes", "--force"});
    EXPECT_EQ(forced.code, 1) << forced.out << forced.err;
    EXPECT_NE(forced.err.find("not settled"), std::string::npos) << forced.err;
    EXPECT_EQ(PendingRecords(), 1u);
    EXPECT_EQ(Count("accounts"), c.held);

    // Settled by the collector, the records are outcome markers (kept in the record collection
    // by --no-fold); --force erases them.
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms", "--no-fold"});
    ASSERT_EQ(gc.code, 0) << gc.err;
    EXPECT_EQ(gc.Json()["reversed"], 1) << gc.out;
    EXPECT_EQ(Count("accounts"), (Counts{2, 0, 0, 3}));  // the placeholder stays until purged
    RunResult settled = Cli({"collections", "count", "__litetx.txn", "--format", "json"});
    const std::int64_t markers = settled.Json()["settled"].as_int64();
    EXPECT_GE(markers, 1);
    EXPECT_EQ(settled.Json()["unsettled"], 0);
    RunResult erased = Cli({"collections", "drop", "__litetx.txn", "--yes", "--force"});
    ASSERT_EQ(erased.code, 0) << erased.err;
    EXPECT_EQ(erased.Json()["erased"], markers);
    EXPECT_EQ(Names({"--all"}), std::vector<std::string>{"accounts"});
    EXPECT_EQ(Get("accounts", "a1")["doc"].as_object()["balance"], 100);
  }
}

TEST_F(CliCollections, DocumentsHeldByAnotherTransactionAreReportedBusy) {
  // A transfer crashed while it holds documents and is not committed. Classic, after write 3:
  // a1 and a2 are held by a pending transaction. Parallel, after write 2: a1 is held by a
  // staging transaction that never held a2 (so it cannot have committed; its lease has not
  // run out, so it counts as live), and a2 is free.
  struct Case {
    const char* mode;
    int crash_after;
    std::vector<std::string> busy;  // ids the drop reports busy, in order
  };
  for (const Case& c : {Case{"classic", 3, {"a1", "a2"}}, Case{"parallel", 2, {"a1"}}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", crash-after-writes:" +
                 std::to_string(c.crash_after));
    path_ = dir_ + "/db-" + c.mode;
    store_ = "lmdb:" + path_;
    ASSERT_EQ(Apply(kSeed).code, 0);
    ASSERT_EQ(Apply(InsertMany("accounts", 3)).code, 0);
    ASSERT_EQ(Apply(kTransfer, "crash-after-writes:" + std::to_string(c.crash_after),
                    {"--commit", c.mode})
                  .code,
              86);
    const std::int64_t busy = static_cast<std::int64_t>(c.busy.size());
    RunResult r = Cli({"collections", "drop", "accounts", "--yes", "--busy-timeout", "20ms",
                       "--timeout", "0"});
    EXPECT_EQ(r.code, 11) << r.out << r.err;
    json::object o = r.Json();
    // The free documents, each alone after the batch was busy.
    EXPECT_EQ(o["deleted"], 5 - busy);
    ASSERT_EQ(o["busy"].as_array().size(), c.busy.size()) << r.out;
    for (std::size_t i = 0; i < c.busy.size(); ++i) {
      EXPECT_EQ(o["busy"].as_array()[i].as_object()["id"], c.busy[i].c_str()) << r.out;
    }
    EXPECT_NE(r.err.find("held by other transactions"), std::string::npos) << r.err;
    EXPECT_EQ(Count("accounts"), (Counts{busy, 5 - busy, busy, 5}));
    // Once the holder is settled, drop finishes the job.
    ASSERT_EQ(Cli({"gc", "--once", "--older-than", "1ms"}).code, 0);
    RunResult again = Cli({"collections", "drop", "accounts", "--yes"});
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(again.Json()["deleted"], busy);
    EXPECT_EQ(Count("accounts"), (Counts{0, 5, 0, 5}));
    EXPECT_EQ(Unsettled(), 0);
  }
}

TEST_F(CliCollections, SigintDuringDropFinishesTheTransactionAndExits130) {
  const std::string fifo = dir_ + "/release";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(Apply(InsertMany("items", 20)).code, 0);
  // --batch 5: a transaction is 1 record create + 5 tags + commit + 5 finishes + record
  // replace(s); hold before write 3, inside the first transaction (before the batch of its
  // record and its tags: the drop commits in parallel, the default).
  Child drop = Start(With({"collections", "drop", "items", "--yes", "--batch", "5"}),
                     "hold-write:3:" + fifo);
  ASSERT_TRUE(WaitForStderr(drop, "holding before write 3", seconds(60))) << drop.err_read;
  ASSERT_EQ(::kill(drop.pid, SIGINT), 0);
  ASSERT_TRUE(WaitForStderr(drop, "SIGINT received", seconds(60))) << drop.err_read;
  {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
  }
  RunResult r = Finish(drop);
  EXPECT_EQ(r.code, 130) << r.out << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["interrupted"], "SIGINT");
  EXPECT_EQ(o["deleted"], 5) << r.out;  // the transaction in progress, and no other
  EXPECT_NE(r.err.find("5 document(s) deleted before the signal"), std::string::npos) << r.err;
  EXPECT_EQ(Count("items"), (Counts{15, 5, 0, 20}));
  EXPECT_EQ(PendingRecords(), 0u);
  EXPECT_EQ(Unsettled(), 0);
}

TEST_F(CliCollections, BadNamesAreUsageErrorsAndTouchNothing) {
  ASSERT_EQ(Apply(kSeed).code, 0);
  const std::string before = ScanText("accounts");
  const std::string too_long(200, 'c');
  for (const std::string& name : {std::string(""), std::string("a\xff"), std::string("a\tb"),
                                  too_long, std::string("__litetx.\xc3")}) {
    SCOPED_TRACE("name '" + name + "'");
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"collections", "count", name},
          std::vector<std::string>{"collections", "drop", name, "--yes", "--force"}}) {
      RunResult r = Cli(args);
      EXPECT_EQ(r.code, 2) << r.out << r.err;
      EXPECT_EQ(r.out, "");
      EXPECT_NE(r.err.find("collection name"), std::string::npos) << r.err;
    }
  }
  // An engine collection this version does not know is refused even with --force.
  RunResult unknown = Cli({"collections", "drop", "__litetx.other", "--yes", "--force"});
  EXPECT_EQ(unknown.code, 2) << unknown.err;
  RunResult batch = Cli({"collections", "drop", "accounts", "--yes", "--batch", "0"});
  EXPECT_EQ(batch.code, 2) << batch.err;
  RunResult timeout = Cli({"collections", "drop", "accounts", "--yes", "--timeout", "5"});
  EXPECT_EQ(timeout.code, 2) << timeout.err;
  RunResult missing = Cli({"collections"});
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_EQ(ScanText("accounts"), before);
  // A store that does not exist is not created by list.
  RunResult absent = RunCli({"--store", "lmdb:" + dir_ + "/absent", "collections", "list"});
  EXPECT_EQ(absent.code, 3) << absent.err;
  EXPECT_NE(::access((dir_ + "/absent").c_str(), F_OK), 0);
}

class CliCollectionsRedis : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    START_REDIS_OR_SKIP(redis_);
    store_ = "redis://127.0.0.1:" + std::to_string(redis_->port()) + "?prefix=t:";
  }
  std::unique_ptr<TestRedisServer> redis_;
};

TEST_F(CliCollectionsRedis, ListCountDrop) {
  ASSERT_EQ(Apply(kSeed).code, 0);
  ASSERT_EQ(Apply(InsertMany("others", 4)).code, 0);
  RunResult list = Cli({"collections", "list", "--counts", "--format", "json"});
  ASSERT_EQ(list.code, 0) << list.err;
  json::array names = list.Json()["collections"].as_array();
  ASSERT_EQ(names.size(), 2u) << list.out;
  EXPECT_EQ(names[0].as_object()["name"], "accounts");
  EXPECT_EQ(names[0].as_object()["live"], 2);
  EXPECT_EQ(names[1].as_object()["name"], "others");
  EXPECT_EQ(names[1].as_object()["live"], 4);
  RunResult drop = Cli({"collections", "drop", "others", "--yes", "--batch", "3"});
  ASSERT_EQ(drop.code, 0) << drop.err;
  EXPECT_EQ(drop.Json()["deleted"], 4);
  EXPECT_EQ(drop.Json()["transactions"], 2);
  RunResult count = Cli({"collections", "count", "others", "--format", "json"});
  ASSERT_EQ(count.code, 0) << count.err;
  EXPECT_EQ(count.Json()["live"], 0);
  EXPECT_EQ(count.Json()["deleted"], 4);
  EXPECT_EQ(Unsettled(), 0);
}

}  // namespace
}  // namespace litetx::clitest
