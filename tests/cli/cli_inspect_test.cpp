// tests/cli/cli_inspect_test.cpp — `litetx get`, `scan` and `txns`.
#include <string>
#include <vector>

#include "cli_harness.h"
#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

TEST_F(CliTest, GetFoundNotFoundAndDeleted) {
  RunResult put = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"a":[1,2]},"schema_version":2},
                                        {"op":"insert","collection":"c","id":"y","doc":{"b":true}}]})");
  ASSERT_EQ(put.code, 0) << put.err;
  const std::vector<std::uint64_t> v = Versions(put);
  ASSERT_EQ(v.size(), 2u);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"delete","collection":"c","id":"y","version":)" +
                  std::to_string(v[1]) + "}]}").code, 0);

  json::object x = Get("c", "x");
  EXPECT_EQ(x["status"], "found");
  EXPECT_EQ(x["version"].to_number<std::uint64_t>(), v[0]);
  EXPECT_EQ(x["schema_version"], 2);
  EXPECT_EQ(json::serialize(x["doc"]), R"({"a":[1,2]})");  // user fields only, no _ltx

  json::object y = Get("c", "y");
  EXPECT_EQ(y["status"], "deleted");
  EXPECT_EQ(y["version"].to_number<std::uint64_t>(), v[1] + 2);  // a tombstone gets v+2
  EXPECT_FALSE(y.contains("doc"));

  EXPECT_EQ(json::serialize(Get("c", "nope")), R"({"status":"not_found"})");

  RunResult bad = Cli({"get", "__litetx.txn", "x"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("reserved"), std::string::npos);
}

// Update x and insert z, crashing while the transaction holds documents. `get --uncommitted`
// shows the stored image and its holder; `get` shows the committed view.
TEST_F(CliTest, GetUncommittedShowsTheHolder) {
  const char* txn = R"({"actions":[{"op":"update","collection":"c","id":"x","set":{"n":2}},
                                   {"op":"insert","collection":"c","id":"z","doc":{"n":3}}]})";
  struct Case {
    const char* mode;
    int crash_after;
    bool committed;  // what a reader finds
  };
  // Classic, after write 3: record (pending), x and z held; committed only by the flip (write
  // 4), so a reader sees x's pre-image and no z. Parallel, after write 2: record (staging) and
  // x held, z never: not committed. Parallel, after write 3: record and both held: committed;
  // the reader proves it (it moves the record to committed) and sees the new images, while
  // both documents are still held.
  for (const Case& c : {Case{"classic", 3, false}, Case{"parallel", 2, false},
                        Case{"parallel", 3, true}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", crash-after-writes:" +
                 std::to_string(c.crash_after));
    path_ = dir_ + "/db-" + c.mode + std::to_string(c.crash_after);
    store_ = "lmdb:" + path_;
    ASSERT_EQ(
        Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{"n":1}}]})").code, 0);
    RunResult crash = Apply(txn, "crash-after-writes:" + std::to_string(c.crash_after),
                            {"--commit", c.mode});
    ASSERT_EQ(crash.code, 86);
    json::object raw = Cli({"get", "--uncommitted", "c", "x"}).Json();
    EXPECT_EQ(json::serialize(raw["doc"]), R"({"n":2})");
    EXPECT_TRUE(raw["txn"].is_string());
    EXPECT_EQ(raw["deleting"], false);
    const std::string holder = raw["txn"].is_string() ? raw["txn"].as_string().c_str() : "";
    EXPECT_EQ(Cli({"txns", "--state", "pending"}).Json()["count"], 1);
    EXPECT_EQ(json::serialize(Get("c", "x")["doc"]), c.committed ? R"({"n":2})" : R"({"n":1})");
    json::object z = Get("c", "z");
    EXPECT_EQ(z["status"], c.committed ? "found" : "not_found") << json::serialize(z);
    // The reader recorded what it proved; nothing else changed.
    json::array committed = Cli({"txns", "--state", "committed"}).Json()["transactions"].as_array();
    ASSERT_EQ(committed.size(), c.committed ? 1u : 0u);
    if (c.committed) {
      EXPECT_EQ(committed[0].as_object()["id"], holder.c_str());
      EXPECT_EQ(committed[0].as_object()["done"], false);
    }
    EXPECT_TRUE(Cli({"get", "--uncommitted", "c", "x"}).Json()["txn"].is_string());
    EXPECT_EQ(Cli({"txns", "--state", "pending"}).Json()["count"], c.committed ? 0 : 1);
  }
}

TEST_F(CliTest, ScanListsTheCommittedView) {
  RunResult put = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"b","doc":{"n":2}},
                                        {"op":"insert","collection":"c","id":"a","doc":{"n":1}},
                                        {"op":"insert","collection":"c","id":"d","doc":{"n":4}},
                                        {"op":"insert","collection":"other","id":"o","doc":{}}]})");
  ASSERT_EQ(put.code, 0) << put.err;
  const std::vector<std::uint64_t> v = Versions(put);  // b, a, d, o
  ASSERT_EQ(v.size(), 4u);
  ASSERT_EQ(Apply(R"({"actions":[{"op":"delete","collection":"c","id":"d"}]})").code, 0);
  // A rolled-back insert of c/e leaves a placeholder (the collector reverses it after the
  // coordinator died holding it); an uncommitted update of c/a stays held.
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"e","doc":{}},
                                  {"op":"update","collection":"other","id":"o","set":{"y":1}}]})",
                  "crash-after-writes:2").code, 86);
  ASSERT_EQ(Cli({"gc", "--once", "--older-than", "1ms"}).code, 0);
  ASSERT_EQ(Cli({"get", "--uncommitted", "c", "e"}).Json()["status"], "not_found");
  {
    auto store = LmdbStore::Open(path_);
    ASSERT_TRUE(store.ok());
    auto e = (*store)->Get({"c", "e"});
    ASSERT_TRUE(e.ok() && e->has_value()) << "expected a placeholder document for c/e";
  }
  ASSERT_EQ(Apply(R"({"actions":[{"op":"update","collection":"c","id":"a","set":{"n":9}},
                                  {"op":"insert","collection":"c","id":"f","doc":{}}]})",
                  "crash-after-writes:2").code, 86);
  RunResult r = Cli({"scan", "c"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            R"({"collection":"c","count":2,"documents":[)"
            R"({"id":"a","status":"found","version":)" + std::to_string(v[1]) +
                R"(,"schema_version":1,"doc":{"n":1}},)"
            R"({"id":"b","status":"found","version":)" + std::to_string(v[0]) +
                R"(,"schema_version":1,"doc":{"n":2}}]})"
                "\n");
  json::object all = Cli({"scan", "c", "--include-deleted"}).Json();
  EXPECT_EQ(all["count"], 3);
  EXPECT_EQ(json::serialize(all["documents"].as_array()[2]), R"({"id":"d","status":"deleted","version":)" + std::to_string(v[2] + 2) + "}");
  EXPECT_EQ(Cli({"scan", "empty"}).Json()["count"], 0);
  EXPECT_EQ(Cli({"scan", ""}).code, 2);
}

TEST_F(CliTest, TxnsListsRecordsAndCorruptOnes) {
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{}},
                                  {"op":"insert","collection":"c","id":"y","doc":{}}]})").code, 0);
  const std::int64_t before_ms = NowMs();
  ASSERT_EQ(Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x"},
                                  {"op":"delete","collection":"c","id":"y"}]})",
                  "crash-after-writes:1").code, 86);
  {
    auto store = LmdbStore::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Create({std::string(kTransactionsCollection), "zzzz"},
                                 {{"state", "sideways"}}).ok());
  }
  json::object o = Cli({"txns"}).Json();
  const std::int64_t after_ms = NowMs();
  EXPECT_EQ(o["count"], 3);
  EXPECT_EQ(o["unsettled"], 1);
  int done = 0, pending = 0, corrupt = 0;
  for (const json::value& v : o["transactions"].as_array()) {
    json::object t = v.as_object();
    if (t["state"] == "corrupt") {
      ++corrupt;
      EXPECT_EQ(t["id"], "zzzz");
      EXPECT_TRUE(t["error"].is_string());
    } else if (t["state"] == "pending") {
      ++pending;
      EXPECT_EQ(t["done"], false);
      EXPECT_EQ(t["actions"], 2);
      // Written between before_ms and after_ms, with the default lease of 5 s and never
      // renewed (its writer crashed right after writing it): age and remaining lease add up to
      // the lease, however long the commands took.
      const auto age = t["age_ms"].to_number<std::int64_t>();
      EXPECT_GE(age, 0);
      EXPECT_LE(age, after_ms - before_ms);
      EXPECT_EQ(age + t["lease_remaining_ms"].to_number<std::int64_t>(), 5'000);
    } else {
      ++done;
      EXPECT_EQ(t["state"], "committed");
      EXPECT_EQ(t["done"], true);
      EXPECT_EQ(t["actions"], 0);
    }
  }
  EXPECT_EQ(done, 1);
  EXPECT_EQ(pending, 1);
  EXPECT_EQ(corrupt, 1);
}

TEST_F(CliTest, ReadFailuresExitWithTheStatusCode) {
  ASSERT_EQ(Apply(R"({"actions":[{"op":"insert","collection":"c","id":"x","doc":{}}]})").code, 0);
  for (std::vector<std::string> cmd : {std::vector<std::string>{"get", "c", "x"},
                                       {"scan", "c"}, {"txns"}}) {
    RunResult r = Cli(cmd, "transient:1");
    EXPECT_EQ(r.code, 16) << cmd[0] << ": " << r.err;  // unavailable
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("litetx: "), std::string::npos);
  }
}

}  // namespace
}  // namespace litetx::clitest
