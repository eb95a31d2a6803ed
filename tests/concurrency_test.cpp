// tests/concurrency_test.cpp — thread-safety smoke test: several threads transfer between a
// few accounts on one Database. Every commit ends ok or with a retryable outcome, each
// committed transfer is applied exactly once (balances match the committed transfers exactly;
// versions count them, plus two per rolled-back attempt), the total is conserved and nothing
// is left held.
#include <atomic>
#include <random>
#include <thread>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Transaction;

TEST(ConcurrencyTest, ConcurrentTransfersConserveTheTotal) {
  World w;
  auto o = w.Opts();
  o.busy_timeout = std::chrono::milliseconds{20};
  litetx::Database db(w.mem, o);
  constexpr int kAccounts = 4;
  constexpr int kThreads = 4;
  constexpr int kTransfersEach = 150;
  constexpr std::int64_t kInitial = 1000;
  for (int i = 0; i < kAccounts; ++i) {
    MustCommit(db, Transaction().Insert("acct", std::to_string(i), {{"balance", kInitial}}));
  }

  struct PerThread {
    std::vector<std::int64_t> net = std::vector<std::int64_t>(kAccounts, 0);
    std::vector<std::uint64_t> touched = std::vector<std::uint64_t>(kAccounts, 0);
    std::map<Code, int> outcomes;
    std::vector<std::string> unexpected;
  };
  std::vector<PerThread> results(kThreads);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      PerThread& me = results[t];
      while (!go.load()) std::this_thread::yield();
      for (int done = 0, attempts = 0; done < kTransfersEach && attempts < 100 * kTransfersEach; ++attempts) {
        int from = static_cast<int>(rng() % kAccounts);
        int to = static_cast<int>((from + 1 + rng() % (kAccounts - 1)) % kAccounts);
        std::int64_t amount = static_cast<std::int64_t>(rng() % 50) + 1;
        auto r = db.Commit(Transaction()
                               .Adjust("acct", std::to_string(from), {{"balance", -amount}})
                               .Adjust("acct", std::to_string(to), {{"balance", amount}}));
        ++me.outcomes[r.code()];
        if (r.ok()) {
          me.net[from] -= amount;
          me.net[to] += amount;
          ++me.touched[from];
          ++me.touched[to];
          ++done;
        } else if (!r.status().IsRetryableTransaction()) {
          me.unexpected.push_back(r.status().ToString());
        }
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();

  std::vector<std::int64_t> net(kAccounts, 0);
  std::vector<std::uint64_t> touched(kAccounts, 0);
  int committed = 0;
  std::map<Code, int> outcomes;
  for (const auto& r : results) {
    for (const auto& u : r.unexpected) ADD_FAILURE() << "non-retryable outcome: " << u;
    for (int i = 0; i < kAccounts; ++i) {
      net[i] += r.net[i];
      touched[i] += r.touched[i];
    }
    for (const auto& [c, n] : r.outcomes) outcomes[c] += n;
  }
  committed = outcomes[Code::kOk];
  EXPECT_EQ(committed, kThreads * kTransfersEach);
  std::int64_t total = 0;
  for (int i = 0; i < kAccounts; ++i) {
    Image img = ReadImage(db, "acct", std::to_string(i));
    ASSERT_EQ(img.state, litetx::DocumentState::kFound);
    EXPECT_EQ(img.doc.at("balance").as_int64(), kInitial + net[i]) << "account " << i;
    // +1 per committed transfer touching it, +2 per rolled-back one (apply, then reverse).
    ASSERT_GE(img.version, V(1) + touched[i]) << "account " << i;
    EXPECT_EQ((img.version - V(1) - touched[i]) % 2, 0u) << "account " << i;
    total += img.doc.at("balance").as_int64();
  }
  EXPECT_EQ(total, kInitial * kAccounts);
  ExpectClean(*w.mem, {"acct"});
  std::string summary;
  for (const auto& [c, n] : outcomes) summary += std::string(litetx::CodeName(c)) + "=" + std::to_string(n) + " ";
  RecordProperty("outcomes", summary);
}

TEST(ConcurrencyTest, ConcurrentFastPathIncrementsAreAllApplied) {
  World w;
  litetx::Database db(w.mem, w.Opts());
  MustCommit(db, Transaction().Insert("c", "counter", {{"n", 0}}));
  constexpr int kThreads = 4, kEach = 200;
  std::atomic<int> ok{0}, retryable{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach;) {
        auto r = db.Commit(Transaction().Adjust("c", "counter", {{"n", 1}}));
        if (r.ok()) {
          ++ok;
          ++i;
        } else if (r.status().IsRetryableTransaction()) {
          ++retryable;
        } else {
          ++other;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load(), kThreads * kEach);
  EXPECT_EQ(ReadImage(db, "c", "counter"), Found(V(1) + kThreads * kEach, json::object{{"n", kThreads * kEach}}));
}

}  // namespace
}  // namespace ltxtest
