// tests/cli/cli_demo_test.cpp — `litetx demo`, the README's first command: a short run with
// crashing coordinators on a fresh LMDB store must pass its own verification, and the counts
// of its JSON summary must agree with each other.
#include <cstdint>
#include <cstdio>
#include <string>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;

std::uint64_t U(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || !v->is_number()) {
    ADD_FAILURE() << "no number \"" << key << "\" in " << json::serialize(o);
    return 0;
  }
  return v->to_number<std::uint64_t>();
}

TEST_F(CliTest, DemoVerifiesAfterCrashes) {
  RunResult r = Cli({"demo", "--duration", "3s", "--crash-rate", "0.05", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const json::object o = r.Json();
  std::printf("[demo] %s\n", r.out.c_str());
  ASSERT_TRUE(o.contains("verification") && o.at("verification").is_object()) << r.out;
  ASSERT_TRUE(o.contains("retries") && o.contains("gc")) << r.out;
  const json::object& v = o.at("verification").as_object();
  const json::object& retries = o.at("retries").as_object();
  const json::object& gc = o.at("gc").as_object();
  EXPECT_EQ(v.at("ok"), true);
  EXPECT_EQ(U(v, "error_count"), 0u);
  EXPECT_EQ(U(v, "open_records"), 0u);
  EXPECT_EQ(U(v, "held_documents"), 0u);
  EXPECT_EQ(U(v, "total"), U(v, "expected_total"));

  // Three seconds of four threads make thousands of transfers, 5 % of them crashing.
  const std::uint64_t committed = U(o, "committed");
  const std::uint64_t crashed = U(o, "crashed");
  EXPECT_GT(committed, 0u);
  EXPECT_GT(crashed, 0u);
  // Every acknowledged transfer was checked present, every failed attempt (each retry counted
  // in "retries") checked absent, and every crashed or unknown one found applied or not.
  EXPECT_EQ(U(v, "acked_checked"), committed);
  EXPECT_EQ(U(v, "failed_checked"), U(retries, "total"));
  EXPECT_EQ(U(v, "in_doubt_applied") + U(v, "in_doubt_not_applied"),
            crashed + U(o, "unknown"));
  // The run's ledger is exactly its acknowledged transfers and its applied in-doubt ones.
  EXPECT_EQ(U(v, "ledger_docs"), committed + U(v, "in_doubt_applied"));
  // On a healthy store no repair fails. (How many crashed transfers the collector settled is
  // not fixed: a coordinator that meets a stale transaction settles it on the spot.)
  EXPECT_EQ(U(gc, "failed"), 0u);
}

}  // namespace
}  // namespace litetx::clitest
