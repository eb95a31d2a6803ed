// tests/cli/cli_import_kill_test.cpp — `litetx import` killed with SIGKILL at random points on
// LMDB, then `litetx gc`: the collection holds every row or none, and nothing is left held.
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "cli_harness.h"

namespace litetx::clitest {
namespace {
namespace json = boost::json;
using std::chrono::milliseconds;

class CliImportKill : public CliTest {};

// The committed rows of `collection`, as `scan` counts them.
std::int64_t Rows(const CliTest& t, RunResult r) {
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return -1;
  (void)t;
  return r.Json()["count"].to_number<std::int64_t>();
}

TEST_F(CliImportKill, KilledAtRandomPointsThenGcLeavesAllRowsOrNone) {
  constexpr int kRows = 3000;
  const std::string file = dir_ + "/rows.ndjson";
  {
    std::ofstream out(file);
    for (int i = 0; i < kRows; ++i) {
      out << R"({"id":"p)" << i << R"(","n":)" << i << R"(,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})"
          << "\n";
    }
  }
  const char* env_seed = std::getenv("LITETX_SEED");
  const std::uint64_t seed = env_seed != nullptr ? std::strtoull(env_seed, nullptr, 10)
                                                 : std::random_device{}();
  std::printf("CliImportKill seed %llu (replay: LITETX_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);

  // One import run to its end gives the span the kills are spread over.
  const auto t0 = std::chrono::steady_clock::now();
  RunResult full = Cli({"import", file, "--collection", "whole", "--id-field", "id", "--chunk",
                        "50", "--quiet"});
  ASSERT_EQ(full.code, 0) << full.err;
  const auto span = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_EQ(Rows(*this, Cli({"scan", "whole", "--format", "json"})), kRows);

  int all = 0, none = 0, killed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int round = 0; round < 16 && std::chrono::steady_clock::now() < deadline; ++round) {
    const std::string collection = "people" + std::to_string(round);
    const auto delay = milliseconds(std::uniform_int_distribution<long>(
        0, std::max<long>(1, static_cast<long>(span.count() * 6 / 5)))(rng));
    Child child = Start(With({"import", file, "--collection", collection, "--id-field", "id",
                              "--chunk", "50", "--quiet"}));
    ASSERT_GT(child.pid, 0);
    std::this_thread::sleep_for(delay);
    ::kill(child.pid, SIGKILL);
    RunResult r = Finish(std::move(child));
    if (r.code == 128 + SIGKILL) ++killed;
    // No coordinator is alive: every transaction may be settled at once.
    RunResult gc = Cli({"gc", "--once", "--older-than", "1ms"});
    ASSERT_EQ(gc.code, 0) << gc.err << gc.out;
    const std::int64_t n = Rows(*this, Cli({"scan", collection, "--format", "json"}));
    SCOPED_TRACE("round " + std::to_string(round) + ", killed after " +
                 std::to_string(delay.count()) + " ms, exit " + std::to_string(r.code));
    ASSERT_TRUE(n == 0 || n == kRows) << n << " of " << kRows << " rows after the kill and gc";
    if (r.code == 0) {
      ASSERT_EQ(n, kRows) << "an import that reported success lost rows";
    }
    (n == kRows ? all : none) += 1;
    EXPECT_EQ(Unsettled(), 0) << "a transaction left unsettled after gc";
    // No row still carries a transaction reference (read uncommitted shows the raw metadata).
    if (n == kRows) {
      RunResult g = Cli({"get", collection, "p" + std::to_string(kRows - 1), "--uncommitted"});
      if (g.code == 0) {
        EXPECT_EQ(g.out.find("\"txn\""), std::string::npos) << g.out;
      }
    }
  }
  std::printf("CliImportKill: %d rounds killed (%d by SIGKILL), all rows %d, none %d; one full "
              "import took %lld ms\n",
              all + none, killed, all, none, static_cast<long long>(span.count()));
  EXPECT_GT(killed, 0) << "no import was killed before it ended";
}

}  // namespace
}  // namespace litetx::clitest
