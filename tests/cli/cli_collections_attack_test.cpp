// tests/cli/cli_collections_attack_test.cpp — hostile use of `litetx collections` and of
// Store::ListCollections: drop while other processes run transactions on the same collection,
// a signal at every write of a drop (and a second signal), `drop __litetx.txn --force` while a
// transaction starts, and collection listings over names that are prefixes of one another or
// hold the characters of the Redis key layout ('{', ':'), ids ending like an index key, paging
// from arbitrary cursors, and foreign keys in a Redis keyspace.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "cli_redis.h"
#include "litetx/lmdb_store.h"
#include "litetx/memory_store.h"
#ifdef LITETX_CLI_TEST_REDIS
#include "litetx/redis_store.h"
#endif

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::seconds;

std::int64_t Field(const json::object& o, const char* name) {
  const json::value* v = o.if_contains(name);
  return v != nullptr && v->is_int64() ? v->as_int64() : -1;
}

// An apply inserting ids prefix0..prefix(n-1) into `collection`.
std::string Inserts(const std::string& collection, const std::string& prefix, int n) {
  json::array actions;
  for (int i = 0; i < n; ++i) {
    actions.push_back(json::object{{"op", "insert"},
                                   {"collection", collection},
                                   {"id", prefix + std::to_string(i)},
                                   {"doc", json::object{{"n", i}}}});
  }
  return json::serialize(json::object{{"actions", std::move(actions)}});
}

// True once `pid` has exited (a zombie not yet reaped by Finish).
bool Exited(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z';
}

void Release(const std::string& fifo) {
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(::write(fd, "x", 1), 1);
  ::close(fd);
}

class CliCollectionsAttack : public CliTest {
 protected:
  json::object Count(const std::string& collection) const {
    RunResult r = Cli({"collections", "count", collection, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.Json();
  }
  // The committed state of one document: "found", "deleted" or "not_found" (as `get` says).
  std::string State(const std::string& collection, const std::string& id) const {
    RunResult r = Cli({"get", collection, id});
    if (r.code != 0) return "exit " + std::to_string(r.code) + ": " + r.err;
    const json::value* status = r.Json().if_contains("status");
    return status != nullptr && status->is_string() ? std::string(status->as_string()) : r.out;
  }
  std::string MakeFifo() const {
    const std::string fifo = dir_ + "/release";
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    return fifo;
  }
};

// A drop of 120 documents in transactions of 2 while this thread runs transactions that
// insert a new document and adjust one of the documents being dropped. Every insert committed
// before the drop started is deleted, every one committed after it ended is live, the drop's
// "deleted" is the number of tombstones, and nothing is left held or unsettled.
TEST_F(CliCollectionsAttack, DropWhileOtherProcessesCommitOnTheSameCollection) {
  ASSERT_EQ(Apply(Inserts("c", "s", 120)).code, 0);
  // The drop syncs every write (the racing transactions do not), so that it lasts long enough
  // for several of them to land while it runs.
  Child drop = Start({"--store", store_, "--sync", "durable", "collections", "drop", "c", "--yes",
                      "--batch", "2"});
  std::vector<int> racing_codes;
  int k = 0;
  for (; k < 60 && !Exited(drop.pid); ++k) {
    const std::string txn = json::serialize(json::object{
        {"actions",
         json::array{json::object{{"op", "insert"},
                                  {"collection", "c"},
                                  {"id", "r" + std::to_string(k)},
                                  {"doc", json::object{{"n", k}}}},
                     json::object{{"op", "adjust"},
                                  {"collection", "c"},
                                  {"id", "s" + std::to_string(119 - k)},
                                  {"by", json::object{{"n", 1000}}}}}}});
    racing_codes.push_back(Apply(txn).code);
  }
  RunResult r = Finish(drop);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::int64_t deleted = Field(r.Json(), "deleted");
  // Inserts that start after the drop ended.
  ASSERT_EQ(Apply(Inserts("c", "after", 5)).code, 0);

  int committed = 0;
  for (int i = 0; i < k; ++i) {
    const std::string s = State("c", "r" + std::to_string(i));
    if (racing_codes[i] == 0) {
      ++committed;
      EXPECT_TRUE(s == "found" || s == "deleted") << "r" << i << ": " << s;
    } else {
      EXPECT_NE(s, "found") << "r" << i << " failed (exit " << racing_codes[i] << ") yet is live";
    }
  }
  for (int i = 0; i < 120; ++i) EXPECT_EQ(State("c", "s" + std::to_string(i)), "deleted") << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(State("c", "after" + std::to_string(i)), "found") << i;
  json::object c = Count("c");
  EXPECT_EQ(Field(c, "deleted"), deleted) << json::serialize(c);
  EXPECT_EQ(Field(c, "held"), 0);
  EXPECT_EQ(Field(c, "live") + Field(c, "deleted"), 120 + committed + 5);
  EXPECT_EQ(Unsettled(), 0);
  std::printf("[ measured ] %d racing transactions (%d committed), drop deleted %lld\n", k,
              committed, static_cast<long long>(deleted));
}

// A drop of 6 documents in transactions of 2 writes 21 times (7 per transaction: record and
// 2 tags in one batch, flip, 2 finishes, marker). SIGINT while it is held before write K, for
// every K: the transaction in progress ends and commits, no other starts, exit 130, nothing
// held or open.
TEST_F(CliCollectionsAttack, SigintBeforeEveryWriteOfADrop) {
  const std::string fifo = MakeFifo();
  for (int k = 1; k <= 21; ++k) {
    SCOPED_TRACE("hold before write " + std::to_string(k));
    const std::string coll = "k" + std::to_string(k);
    ASSERT_EQ(Apply(Inserts(coll, "i", 6)).code, 0);
    // Writes are counted per process; the apply above is another process.
    Child drop = Start(With({"collections", "drop", coll, "--yes", "--batch", "2"}),
                       "hold-write:" + std::to_string(k) + ":" + fifo);
    const std::string holding = "holding before write " + std::to_string(k);
    ASSERT_TRUE(WaitForStderr(drop, holding, seconds(60))) << drop.err_read;
    ASSERT_EQ(::kill(drop.pid, SIGINT), 0);
    ASSERT_TRUE(WaitForStderr(drop, "SIGINT received", seconds(60))) << drop.err_read;
    Release(fifo);
    RunResult r = Finish(drop);
    EXPECT_EQ(r.code, 130) << r.out << r.err;
    const std::int64_t expect = 2 * ((k - 1) / 7 + 1);
    EXPECT_EQ(Field(r.Json(), "deleted"), expect) << r.out;
    json::object c = Count(coll);
    EXPECT_EQ(Field(c, "deleted"), expect);
    EXPECT_EQ(Field(c, "live"), 6 - expect);
    EXPECT_EQ(Field(c, "held"), 0);
    EXPECT_EQ(Unsettled(), 0);
  }
}

// A second signal exits at once, leaving the transaction in progress to the collector, which
// settles it one way or the other: what the drop deleted before stays deleted and no document
// is lost or left held. The drop commits in parallel (the default): its second transaction's
// record and 2 tags are writes 8 to 10, sent as one batch, and it is committed once they have
// landed. Held before write 8 nothing of that batch was sent; before write 11 (the flip) it is
// committed though the drop never learned it; before write 12 the flip has landed.
TEST_F(CliCollectionsAttack, SecondSignalLeavesTheTransactionToTheCollector) {
  const std::string fifo = MakeFifo();
  for (int k : {8, 11, 12}) {
    SCOPED_TRACE("hold before write " + std::to_string(k));
    const std::string coll = "k" + std::to_string(k);
    ASSERT_EQ(Apply(Inserts(coll, "i", 6)).code, 0);
    Child drop = Start(With({"collections", "drop", coll, "--yes", "--batch", "2"}),
                       "hold-write:" + std::to_string(k) + ":" + fifo);
    ASSERT_TRUE(WaitForStderr(drop, "holding before write", seconds(60))) << drop.err_read;
    ASSERT_EQ(::kill(drop.pid, SIGINT), 0);
    ASSERT_TRUE(WaitForStderr(drop, "SIGINT received", seconds(60))) << drop.err_read;
    ASSERT_EQ(::kill(drop.pid, SIGTERM), 0);
    RunResult r = Finish(drop);
    EXPECT_TRUE(r.code == 130 || r.code == 143) << r.code << r.out << r.err;
    ASSERT_EQ(Cli({"gc", "--once", "--older-than", "1ms"}).code, 0);
    json::object c = Count(coll);
    EXPECT_EQ(Field(c, "held"), 0);
    EXPECT_EQ(Field(c, "live") + Field(c, "deleted"), 6);
    // The first transaction committed; the second one committed if its batch (writes 8 to
    // 10) landed before the signal.
    EXPECT_EQ(Field(c, "deleted"), k >= 11 ? 4 : 2) << json::serialize(c);
    EXPECT_EQ(Unsettled(), 0);
  }
}

// `drop __litetx.txn --force` against transactions that start meanwhile: held before its
// second erase while a whole transaction runs, it erases only the markers it listed; while a
// transaction is held before its record is written it erases the markers and the transaction
// commits afterwards with its record; while the record is open (pending, or staging with every
// document held) it is refused.
TEST_F(CliCollectionsAttack, ForceDropOfTheTransactionRecordsWhileTransactionsStart) {
  const std::string fifo = MakeFifo();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Apply(Inserts("c", "m" + std::to_string(i), 2)).code, 0);
  json::object before = Count("__litetx.txn");
  ASSERT_EQ(Field(before, "settled"), 3) << json::serialize(before);

  Child drop = Start(With({"collections", "drop", "__litetx.txn", "--yes", "--force"}),
                     "hold-write:2:" + fifo);
  ASSERT_TRUE(WaitForStderr(drop, "holding before write 2", seconds(60))) << drop.err_read;
  RunResult live = Apply(Inserts("c", "live", 2));
  ASSERT_EQ(live.code, 0) << live.err;
  Release(fifo);
  RunResult r = Finish(drop);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Field(r.Json(), "erased"), 3);
  json::object after = Count("__litetx.txn");
  EXPECT_EQ(Field(after, "stored"), 1) << json::serialize(after);  // the new transaction's
  EXPECT_EQ(Field(after, "settled"), 1);

  // A transaction held before its record is written: nothing of it exists yet.
  { std::ofstream(dir_ + "/t.json") << Inserts("c", "held", 2); }  // before apply reads it
  Child txn = Start(With({"apply", dir_ + "/t.json"}), "hold-write:1:" + fifo);
  ASSERT_TRUE(WaitForStderr(txn, "holding before write 1", seconds(60))) << txn.err_read;
  RunResult erased = Cli({"collections", "drop", "__litetx.txn", "--yes", "--force"});
  EXPECT_EQ(erased.code, 0) << erased.err;
  EXPECT_EQ(Field(erased.Json(), "erased"), 1);
  Release(fifo);
  RunResult done = Finish(txn);
  EXPECT_EQ(done.code, 0) << done.out << done.err;
  EXPECT_EQ(State("c", "held0"), "found");
  EXPECT_EQ(Field(Count("__litetx.txn"), "settled"), 1);

  // Held after its record is written: refused, nothing erased. Classic, before write 2: the
  // record (pending) alone. Parallel, before write 4 (the flip): the record (staging) and both
  // documents landed together as writes 1 to 3 (before write 2 nothing would be written yet).
  struct Case {
    const char* mode;
    int k;
  };
  for (const Case& c : {Case{"classic", 2}, Case{"parallel", 4}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", held before write " +
                 std::to_string(c.k));
    const std::string prefix = std::string("pend-") + c.mode;
    const std::string file = dir_ + "/" + prefix + ".json";
    { std::ofstream(file) << Inserts("c", prefix, 2); }
    Child pending = Start(With({"apply", file, "--commit", c.mode}),
                          "hold-write:" + std::to_string(c.k) + ":" + fifo);
    ASSERT_TRUE(WaitForStderr(pending, "holding before write " + std::to_string(c.k),
                              seconds(60)))
        << pending.err_read;
    const std::int64_t stored = Field(Count("__litetx.txn"), "stored");
    EXPECT_EQ(Unsettled(), 1);
    RunResult refused = Cli({"collections", "drop", "__litetx.txn", "--yes", "--force"});
    EXPECT_EQ(refused.code, 1) << refused.out << refused.err;
    EXPECT_EQ(Field(Count("__litetx.txn"), "stored"), stored);
    Release(fifo);
    EXPECT_EQ(Finish(pending).code, 0);
    EXPECT_EQ(State("c", prefix + "1"), "found");
    EXPECT_EQ(Unsettled(), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Store::ListCollections over awkward names, on every store this binary links.

// Names that are prefixes of one another, hold ':' '{' (the Redis key layout), a control byte,
// UTF-8, or are 128 bytes long. None holds '}' (Redis refuses it).
std::vector<std::string> OddNames() {
  return {"a",  "a.b", std::string("a\x01"), "a:0", "a:1",  "a:",  "{",   "{a:0",
          "a{b", "ab",  "a b",               "x:",  "\xc3\xa9", std::string(128, 'n'), "z"};
}

// Writes one document per name (ids that end like Redis index or counter keys), then checks
// every page of every limit, and pages from cursors that are not names, against the sorted
// list.
void CheckListing(Store& store, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    for (const char* id : {"x}i", "d:", ":0}i", "r"}) {
      auto c = store.Create(Key{name, id}, json::object{{"v", 1}});
      ASSERT_TRUE(c.ok()) << name << "/" << id << ": " << c.status().ToString();
    }
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t limit : {1u, 2u, 3u, 7u, 100u}) {
    std::vector<std::string> got;
    std::string cursor;
    int pages = 0;
    do {
      auto p = store.ListCollections(cursor, limit);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      ASSERT_LE(p->names.size(), limit);
      got.insert(got.end(), p->names.begin(), p->names.end());
      cursor = p->next_cursor;
      ASSERT_LT(++pages, 100);
    } while (!cursor.empty());
    EXPECT_EQ(got, sorted) << "limit " << limit;
  }
  std::vector<std::string> cursors = {std::string("a\0", 2), "a.", "a:00", "a{", "{a", "\x01",
                                      "\xff",                std::string(129, 'n'), "y"};
  cursors.insert(cursors.end(), names.begin(), names.end());
  for (const std::string& cursor : cursors) {
    auto p = store.ListCollections(cursor, 2);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    std::vector<std::string> want;
    for (const std::string& n : sorted) {
      if (n > cursor) want.push_back(n);
    }
    const bool more = want.size() > 2;
    if (more) want.resize(2);
    EXPECT_EQ(p->names, want) << "cursor " << json::serialize(json::value(cursor));
    EXPECT_EQ(p->next_cursor.empty(), !more) << "cursor " << cursor;
  }
}

TEST(CollectionsAttackStore, OddNamesOnMemoryStore) {
  MemoryStore store;
  CheckListing(store, OddNames());
}

TEST_F(CliCollectionsAttack, OddNamesOnLmdbStoreAndThroughTheCli) {
  {
    auto store = LmdbStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    CheckListing(**store, OddNames());
  }
  // The CLI lists them all (the control-byte name is one the engine refuses, but the store
  // holds it and the listing shows it), and counts engine-written 128-byte and '{' names.
  const std::vector<std::string> more = {std::string(127, 'n') + "o", "{b:0"};
  for (const std::string& name : more) ASSERT_EQ(Apply(Inserts(name, "x}i", 3)).code, 0);
  RunResult r = Cli({"collections", "list", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Field(r.Json(), "count"), static_cast<std::int64_t>(OddNames().size() + 2)) << r.out;
  for (const std::string& name : more) {
    json::object c = Count(name);
    EXPECT_EQ(Field(c, "live"), 3) << json::serialize(c);
    EXPECT_EQ(Field(c, "stored"), 3) << json::serialize(c);
  }
}

#ifdef LITETX_CLI_TEST_REDIS
TEST_F(CliCollectionsAttack, OddNamesAndForeignKeysOnRedis) {
  std::unique_ptr<TestRedisServer> redis;
  START_REDIS_OR_SKIP(redis);
  RedisOptions o;
  o.port = redis->port();
  o.prefix = "t:";
  o.buckets = 4;
  auto store = RedisStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // Keys that resemble an index key of prefix "t:" but are not one: another prefix (the second,
  // "t{foreign:0}i", is an index key of prefix "t", and the store of that prefix lists it), a bucket
  // out of range or not in canonical form, an empty name, no bucket, a suffix after "}i".
  for (const char* key : {"u:{foreign:0}i", "t{foreign:0}i", "t:x{foreign:0}i", "t:{foreign:4}i",
                          "t:{foreign:01}i", "t:{foreign:+1}i", "t:{:0}i", "t:{foreign}i",
                          "t:{foreign:0}ix", "t:{foreign:0}d:x}i", "t:{foreign:0}r"}) {
    auto reply = redis->Command({"SET", key, "1"});
    ASSERT_TRUE(reply != nullptr);
  }
  // Another store sharing the database under a prefix that is a prefix of "t:".
  RedisOptions other = o;
  other.prefix = "t";
  auto neighbour = RedisStore::Open(other);
  ASSERT_TRUE(neighbour.ok()) << neighbour.status().ToString();
  ASSERT_TRUE((*neighbour)->Create(Key{"neighbour", "x"}, json::object{}).ok());
  CheckListing(**store, OddNames());
  auto theirs = (*neighbour)->ListCollections("", 100);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(theirs->names, (std::vector<std::string>{"foreign", "neighbour"}));

  // '}' would end the hash tag: refused by the store, and by the CLI before anything is
  // written.
  auto refused = (*store)->Create(Key{"a}b", "x"}, json::object{});
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();
  store_ = "redis://127.0.0.1:" + std::to_string(redis->port()) + "?prefix=t:&buckets=4";
  RunResult bad = Apply(Inserts("a}b", "x", 1));
  EXPECT_NE(bad.code, 0) << bad.out;
  RunResult r = Cli({"collections", "list", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Field(r.Json(), "count"), static_cast<std::int64_t>(OddNames().size())) << r.out;
}
#endif

}  // namespace
}  // namespace litetx::clitest
