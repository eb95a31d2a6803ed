// tests/cli/cli_apply_test.cpp — `litetx apply`: every transaction outcome and its exit code.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "engine/json_text.h"
#include "litetx/litetx.h"
#include "litetx/lmdb_store.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;


class CliApply : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    const std::uint64_t before = FirstVersionNow();
    RunResult r = Apply(kSeed);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::uint64_t after = FirstVersionNow();
    std::vector<std::uint64_t> v = Versions(r);
    ASSERT_EQ(v.size(), 2u);
    // New ids start at the clock in microseconds: a whole number of milliseconds.
    for (std::uint64_t x : v) {
      EXPECT_GE(x, before);
      EXPECT_LE(x, after);
      EXPECT_EQ(x % 1000, 0u);
    }
    a1_ = v[0];
    a2_ = v[1];
  }
  static std::string N(std::uint64_t v) { return std::to_string(v); }
  std::int64_t Balance(const std::string& id) const {
    json::object o = Get("accounts", id);
    return o["doc"].as_object()["balance"].to_number<std::int64_t>();
  }
  std::uint64_t a1_ = 0, a2_ = 0;  // the seeded accounts' versions
};

TEST_F(CliApply, CommittedPrintsTxnIdAndVersions) {
  RunResult r = Apply(R"({"actions":[
      {"op":"update","collection":"accounts","id":"a1","version":)" + N(a1_) + R"(,"set":{"owner":"ann"},"unset":["balance"]},
      {"op":"adjust","collection":"accounts","id":"a2","by":{"balance":-5}},
      {"op":"insert","collection":"c","id":"x","doc":{"k":"v"},"schema_version":3},
      {"op":"check","collection":"accounts","id":"a2","version":)" + N(a2_) + R"(}]})");
  // a2 is both adjusted and checked: the engine refuses a document named twice.
  EXPECT_EQ(r.code, 2);
  const std::uint64_t before = FirstVersionNow();
  r = Apply(R"({"actions":[
      {"op":"update","collection":"accounts","id":"a1","version":)" + N(a1_) + R"(,"set":{"owner":"ann"},"unset":["balance"]},
      {"op":"adjust","collection":"accounts","id":"a2","by":{"balance":-5}},
      {"op":"insert","collection":"c","id":"x","doc":{"k":"v"},"schema_version":3}]})");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::uint64_t after = FirstVersionNow();
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "committed");
  EXPECT_TRUE(o["txn_id"].is_string());
  std::vector<std::uint64_t> v = Versions(r);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], a1_ + 1);
  EXPECT_EQ(v[1], a2_ + 1);
  const std::uint64_t x1 = v[2];  // a new id: from the clock
  EXPECT_GE(x1, before);
  EXPECT_LE(x1, after);
  EXPECT_EQ(x1 % 1000, 0u);
  EXPECT_EQ(json::serialize(Get("accounts", "a1")["doc"]), R"({"owner":"ann"})");
  EXPECT_EQ(Balance("a2"), 45);
  json::object x = Get("c", "x");
  EXPECT_EQ(x["schema_version"], 3);
  EXPECT_EQ(x["last_writer"], o["txn_id"]);
  EXPECT_EQ(x["version"].to_number<std::uint64_t>(), x1);

  r = Apply(R"({"actions":[{"op":"delete","collection":"c","id":"x","version":)" + N(x1) + R"(},
                            {"op":"check","collection":"accounts","id":"a2","version":)" + N(a2_ + 1) + R"(}]})");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Versions(r), (std::vector<std::uint64_t>{x1 + 2, a2_ + 1}));  // a tombstone gets v+2
  EXPECT_EQ(Get("c", "x")["status"], "deleted");
}

TEST_F(CliApply, ReadsStdin) {
  RunResult r = Cli({"apply", "-"}, "",
                    R"({"actions":[{"op":"adjust","collection":"accounts","id":"a1","by":{"balance":1}}]})");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Balance("a1"), 101);
}

TEST_F(CliApply, ConflictReportsCurrentVersion) {
  std::string before = ScanText("accounts");
  RunResult r = Apply(R"({"actions":[{"op":"adjust","collection":"accounts","id":"a2","by":{"balance":1}},
      {"op":"update","collection":"accounts","id":"a1","version":7,"set":{"k":1}}]})");
  EXPECT_EQ(r.code, 10) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "conflict");
  EXPECT_EQ(o["current_version"].to_number<std::uint64_t>(), a1_);
  EXPECT_TRUE(o["message"].is_string());
  EXPECT_EQ(ScanText("accounts"), before);
  // An insert over a live document is a conflict too.
  r = Apply(R"({"actions":[{"op":"insert","collection":"accounts","id":"a1","doc":{}}]})");
  EXPECT_EQ(r.code, 10);
}

TEST_F(CliApply, NotFoundDeletedAndFailedPrecondition) {
  RunResult r = Apply(R"({"actions":[{"op":"update","collection":"accounts","id":"zz","set":{"a":1}}]})");
  EXPECT_EQ(r.code, 13);
  EXPECT_EQ(r.Json()["outcome"], "not_found");

  ASSERT_EQ(Apply(R"({"actions":[{"op":"delete","collection":"accounts","id":"a2"}]})").code, 0);
  r = Apply(R"({"actions":[{"op":"check","collection":"accounts","id":"a2","version":)" + N(a2_ + 2) + R"(}]})");
  EXPECT_EQ(r.code, 12);
  EXPECT_EQ(r.Json()["outcome"], "deleted");

  ASSERT_EQ(Apply(R"({"actions":[{"op":"update","collection":"accounts","id":"a1","set":{"s":"x"}}]})").code, 0);
  r = Apply(R"({"actions":[{"op":"adjust","collection":"accounts","id":"a1","by":{"s":1}}]})");
  EXPECT_EQ(r.code, 17);
  EXPECT_EQ(r.Json()["outcome"], "failed_precondition");
}

TEST_F(CliApply, BusyWhileACrashedCoordinatorHoldsTheDocument) {
  // Record + a1 written, then the coordinator "dies": a1 stays held by a transaction whose
  // record is not committed (staging with the default parallel commit: a2 was never held) and
  // whose lease has not run out.
  RunResult crash = Apply(kTransfer, "crash-after-writes:2");
  ASSERT_EQ(crash.code, 86) << crash.err;
  json::object raw = Cli({"get", "--uncommitted", "accounts", "a1"}).Json();
  EXPECT_TRUE(raw["txn"].is_string());
  EXPECT_EQ(Balance("a1"), 100);  // read committed: the pre-image

  RunResult r = Apply(R"({"actions":[{"op":"adjust","collection":"accounts","id":"a1","by":{"balance":1}}]})",
                      "", {"--busy-timeout", "50ms"});
  EXPECT_EQ(r.code, 11) << r.err;
  EXPECT_EQ(r.Json()["outcome"], "busy");
  EXPECT_EQ(Unsettled(), 1);
}

// A coordinator waits before its write 4 until the test writes to a FIFO; meanwhile a
// collector treats its transaction as abandoned. No timing is involved: the child says on
// stderr when it waits, and waits as long as it takes the collector to run. Classic: write 4
// is the commit flip, so the transaction is not committed yet; the collector claims and
// reverses it, and the released coordinator reports it aborted. Parallel: the record and both
// applies landed together (writes 1 to 3), so it is committed; the collector proves it (every
// document held) and finishes it, and the released coordinator, finding its record settled,
// reports it committed.
TEST_F(CliApply, CollectorMeetingAHeldTransactionAbortsItOrProvesItsCommit) {
  struct Case {
    const char* mode;
    const char* counter;  // what the collector does
    int code;
    const char* outcome;
    std::int64_t a1, a2;
  };
  const std::string fifo = dir_ + "/release";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  for (const Case& c : {Case{"classic", "reversed", 14, "aborted", 100, 50},
                        Case{"parallel", "finished", 0, "committed", 70, 80}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode);
    path_ = dir_ + "/db-" + c.mode;
    store_ = "lmdb:" + path_;
    ASSERT_EQ(Apply(kSeed).code, 0);
    Child apply = Start(With({"apply", "-", "--commit", c.mode}), "hold-write:4:" + fifo,
                        kTransfer);
    ASSERT_TRUE(WaitForStderr(apply, "holding before write 4", std::chrono::seconds(60)))
        << apply.err_read;
    json::object raw = Cli({"get", "--uncommitted", "accounts", "a2"}).Json();
    EXPECT_TRUE(raw["txn"].is_string()) << json::serialize(raw);  // record, a1, a2 written
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    EXPECT_EQ(gc.code, 0) << gc.err;
    EXPECT_EQ(gc.Json()[c.counter], 1) << gc.out;
    // Release: the child has the FIFO open, so this open does not block.
    const int release = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(release, 0) << std::strerror(errno);
    EXPECT_EQ(::write(release, "x", 1), 1);
    ::close(release);
    RunResult r = Finish(apply);
    EXPECT_EQ(r.code, c.code) << r.out << r.err;
    EXPECT_EQ(r.Json()["outcome"], c.outcome);
    EXPECT_EQ(Balance("a1"), c.a1);
    EXPECT_EQ(Balance("a2"), c.a2);
    EXPECT_EQ(Unsettled(), 0);
  }
}

TEST_F(CliApply, StallWriteDelaysTheWrite) {
  // stall-write sleeps before the given write call and changes nothing else.
  const auto start = std::chrono::steady_clock::now();
  RunResult r = Apply(kTransfer, "stall-write:2:300ms");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_EQ(Balance("a1"), 70);
  EXPECT_EQ(Balance("a2"), 80);
}

TEST_F(CliApply, UnknownWhenTheReplyIsLostAndTheStoreGoesAway) {
  // One action: the write lands, its reply is lost and the read that would resolve it fails.
  RunResult r = Apply(R"({"actions":[{"op":"adjust","collection":"accounts","id":"a1","by":{"balance":1}}]})",
                      "partition-after-writes:1", {"--retry-backoff", "1ms"});
  EXPECT_EQ(r.code, 15) << r.err;
  json::object o = r.Json();
  EXPECT_EQ(o["outcome"], "unknown");
  // Settling a one-action unknown: the document's last writer is the transaction.
  EXPECT_EQ(Get("accounts", "a1")["last_writer"], o["txn_id"]);

  // Two actions, the partition right after write K; the collector then settles the record.
  // Classic, K = 4: the commit flip lands unseen; the collector finishes the transaction.
  // Parallel (record, a1, a2 in one batch): K = 3, a2's apply lands unseen, so everything
  // landed and the collector proves the commit; K = 2, a1's apply lands unseen and a2's never
  // reaches the store, so the collector fences a2 and reverses the transaction.
  struct Case {
    const char* mode;
    int k;
    const char* counter;  // what the collector does
  };
  std::int64_t a1 = 101, a2 = 50;
  for (const Case& c : {Case{"classic", 4, "finished"}, Case{"parallel", 3, "finished"},
                        Case{"parallel", 2, "reversed"}}) {
    SCOPED_TRACE(std::string("--commit ") + c.mode + ", partition-after-writes:" +
                 std::to_string(c.k));
    r = Apply(kTransfer, "partition-after-writes:" + std::to_string(c.k),
              {"--retry-backoff", "1ms", "--commit", c.mode});
    EXPECT_EQ(r.code, 15) << r.err;
    EXPECT_EQ(r.Json()["outcome"], "unknown");
    EXPECT_EQ(Unsettled(), 1);
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    ASSERT_EQ(gc.code, 0) << gc.err;
    EXPECT_EQ(gc.Json()[c.counter], 1) << gc.out;
    EXPECT_EQ(Unsettled(), 0);
    if (std::string(c.counter) == "finished") {
      a1 -= 30;
      a2 += 30;
    }
    EXPECT_EQ(Balance("a1"), a1);
    EXPECT_EQ(Balance("a2"), a2);
  }
}

TEST_F(CliApply, UnavailableWhenTheStoreFails) {
  std::string before = ScanText("accounts");
  RunResult r = Apply(kTransfer, "transient:1", {"--retry-backoff", "1ms"});
  EXPECT_EQ(r.code, 16) << r.err;
  EXPECT_EQ(r.Json()["outcome"], "unavailable");
  EXPECT_EQ(ScanText("accounts"), before);
  EXPECT_EQ(Unsettled(), 0);
}

TEST_F(CliApply, CorruptionOnAnUndecodableDocument) {
  {
    auto store = LmdbStore::Open(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Create({"accounts", "bad"}, {{"no", "metadata"}}).ok());
  }
  RunResult r = Apply(R"({"actions":[{"op":"update","collection":"accounts","id":"bad","set":{"a":1}}]})");
  EXPECT_EQ(r.code, 18) << r.err;
  EXPECT_EQ(r.Json()["outcome"], "corruption");
  RunResult g = Cli({"get", "accounts", "bad"});
  EXPECT_EQ(g.code, 18);
  EXPECT_NE(g.err.find("litetx: "), std::string::npos);
}

// A document exactly at the default nesting limit (64 levels, the document itself counted)
// is accepted from JSON input and reads back as given.
TEST_F(CliApply, DocumentAtTheNestingLimitCommits) {
  std::string doc;
  for (int i = 1; i < 64; ++i) doc += R"({"a":)";
  doc += "{}";
  doc.append(63, '}');
  RunResult r = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"deep","doc":)" + doc +
                      "}]}");
  ASSERT_EQ(r.code, 0) << r.err;
  RunResult g = Cli({"get", "c", "deep"});
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.out.find("\"doc\":" + doc), std::string::npos) << g.out;
}

// Numbers in the input are stored exactly: every double given as its shortest text (random bit
// patterns, subnormals, -0, the extremes) and the int64/uint64 extremes come back as the same
// text from `get`.
TEST_F(CliApply, NumbersAreStoredExactly) {
  using L = std::numeric_limits<double>;
  json::array doubles{0.0, -0.0, L::max(), -L::max(), L::min(), L::denorm_min(), -L::denorm_min(),
                      std::nextafter(L::min(), 0.0), 0.1, 1e23};
  std::mt19937_64 rng(7);
  while (doubles.size() < 1000) {
    std::uint64_t bits = rng();
    if (doubles.size() % 4 == 0) bits &= 0x800fffffffffffffULL;  // subnormals
    double d = std::bit_cast<double>(bits);
    if (std::isfinite(d)) doubles.emplace_back(d);
  }
  const std::string numbers = json::serialize(doubles);
  const std::string ints = "[-9223372036854775808,9223372036854775807,18446744073709551615]";
  RunResult r = Apply(R"({"actions":[{"op":"insert","collection":"c","id":"n","doc":{"d":)" +
                      numbers + R"(,"i":)" + ints + "}}]}");
  ASSERT_EQ(r.code, 0) << r.err;
  RunResult g = Cli({"get", "c", "n"});
  ASSERT_EQ(g.code, 0) << g.err;
  // get prints each double in its shortest form; read back exactly, every one has its bits.
  json::error_code ec;
  json::value got = engine::ParseJson(g.out, ec, json::parse_options{});
  ASSERT_FALSE(ec) << g.out;
  const json::array& d = got.at("doc").at("d").as_array();
  ASSERT_EQ(d.size(), doubles.size());
  std::size_t changed = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!d[i].is_double() ||
        std::bit_cast<std::uint64_t>(d[i].get_double()) !=
            std::bit_cast<std::uint64_t>(doubles[i].get_double())) {
      ++changed;
    }
  }
  EXPECT_EQ(changed, 0u) << "numbers changed";
  EXPECT_NE(g.out.find(R"("i":)" + ints), std::string::npos) << g.out;
}

}  // namespace
}  // namespace litetx::clitest
