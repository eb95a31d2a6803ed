// tests/collector_share_test.cpp — collectors sharing the record collection
// (CollectorOptions::share_partitions): partitions taken through claims, each swept once per
// pass by one collector; a claim of a dead collector expires and the partition is taken over; a
// budget keeps its place in the claim; a collector paused past its claim only repeats harmless
// work; corrupt claims are taken over; the pass report.
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/outcomes.h"
#include "engine/txn_id.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnOutcome;

struct Crash {};

constexpr std::chrono::milliseconds kLease = 10s;
const std::string kClaims = "__litetx.gc";

class CollectorShareTest : public ::testing::Test, public World {
 protected:
  litetx::Options Eng() const {
    litetx::Options o = Opts();
    o.lease = kLease;
    return o;
  }
  CollectorOptions Shared(std::string name) const {
    CollectorOptions o;
    o.engine = Eng();
    o.name = std::move(name);
    o.share_partitions = true;
    o.claim_lease = 5s;
    return o;
  }
  // `n` transactions of two inserts whose coordinator died after its applies (pending), then
  // the clock past their lease. Returns their ids.
  std::vector<std::string> Abandon(int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i, ++serial_) {
      ids.push_back(CommitDyingAfterWrite(mem, Eng(),
                                          Transaction()
                                              .Insert("c", "a" + std::to_string(serial_), Obj("{}"))
                                              .Insert("c", "b" + std::to_string(serial_), Obj("{}")),
                                          3));
    }
    clock->Advance(kLease + 1ms);
    return ids;
  }
  void ExpectAllReversed(const std::vector<std::string>& ids) {
    litetx::Database reader(mem, Eng());
    for (const auto& id : ids) EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kAborted) << id;
    ExpectClean(*mem, {"c"});
    EXPECT_EQ(ScanAll(*mem, "c").size(), 2u * ids.size());  // placeholders of the inserts
    for (const auto& [id, doc] : ScanAll(*mem, "c")) EXPECT_TRUE(MetaOf(*mem, "c", id).gone) << id;
  }
  int serial_ = 0;
};

TEST_F(CollectorShareTest, OneCollectorTakesEveryPartitionAndReleasesThem) {
  auto ids = Abandon(40);
  Collector gc(mem, Shared("gc-one"));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 40u);
  EXPECT_EQ(gc.stats().claims, 16u);
  EXPECT_TRUE(gc.last_pass().complete);
  ExpectAllReversed(ids);
  // Every claim released, marked swept.
  auto claims = ScanAll(*mem, kClaims);
  ASSERT_EQ(claims.size(), 16u);
  for (const auto& [id, doc] : claims) {
    EXPECT_EQ(doc.value.at("by").as_string(), "") << id;
    EXPECT_EQ(doc.value.at("until").as_int64(), 0) << id;
    EXPECT_EQ(doc.value.at("swept").as_int64(), clock->NowMillis()) << id;
    EXPECT_EQ(doc.value.at("cursor").as_string(), "") << id;
  }
  // The next pass (later) sweeps them again.
  clock->Advance(1ms);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().claims, 32u);
}

TEST_F(CollectorShareTest, TwoCollectorsSplitThePartitionsAndSettleEachOnce) {
  for (int round = 0; round < 10; ++round) {
    mem = std::make_shared<litetx::MemoryStore>();
    auto ids = Abandon(60);
    Collector a(mem, Shared("gc-a")), b(mem, Shared("gc-b"));
    std::thread ta([&] { EXPECT_TRUE(a.RunOnce().ok()); });
    std::thread tb([&] { EXPECT_TRUE(b.RunOnce().ok()); });
    ta.join();
    tb.join();
    EXPECT_EQ(a.stats().failed + b.stats().failed, 0u);
    // Each partition was taken once between them (a partition swept by one since the other's
    // pass began is skipped), so each transaction was settled once.
    EXPECT_EQ(a.stats().claims + b.stats().claims, 16u) << "round " << round;
    EXPECT_EQ(a.stats().reversed + b.stats().reversed, 60u) << "round " << round;
    ExpectAllReversed(ids);
  }
}

TEST_F(CollectorShareTest, APartitionHeldByALiveCollectorIsLeftToIt) {
  auto ids = Abandon(30);
  // gc-a holds partition of the first id, as if it were sweeping it right now.
  const int p = litetx::engine::TxnIdPartition(ids[0]);
  const std::string key = std::string("p") + "0123456789abcdef"[p];
  boost::json::object held;
  held["by"] = "gc-a";
  held["until"] = clock->NowMillis() + 5000;
  held["swept"] = 0;
  held["cursor"] = "";
  ASSERT_TRUE(mem->Create(Key{kClaims, key}, held).ok());
  Collector b(mem, Shared("gc-b"));
  ASSERT_TRUE(b.RunOnce().ok());
  EXPECT_EQ(b.stats().claims, 15u);
  litetx::Database reader(mem, Eng());
  std::size_t left = 0;
  for (const auto& id : ids) {
    if (litetx::engine::TxnIdPartition(id) == p) {
      ++left;
      EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kPending) << id;
    } else {
      EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kAborted) << id;
    }
  }
  EXPECT_GT(left, 0u);
  // gc-a died holding it: once its claim expires, gc-b takes the partition over.
  clock->Advance(5001ms);
  ASSERT_TRUE(b.RunOnce().ok());
  EXPECT_EQ(b.stats().reversed, 30u);
  ExpectAllReversed(ids);
}

TEST_F(CollectorShareTest, ACollectorThatDiesHoldingAClaimIsTakenOverAfterTheClaimLease) {
  auto ids = Abandon(40);
  auto hook = std::make_shared<HookStore>(mem);
  int writes = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    // Dies right after its first document write: it holds a claim, mid-partition.
    if (c.is_write() && s.ok() && c.key.collection == "c" && ++writes == 1) throw Crash{};
    return std::nullopt;
  };
  Collector doomed(hook, Shared("gc-doomed"));
  EXPECT_THROW((void)doomed.RunOnce(), Crash);
  // The doomed one swept the empty partitions before the first that holds a transaction (their
  // claims say "swept" at this same clock time, so a pass that begins now skips them) and died
  // in that one, whose claim is still valid: the other takes every partition after it.
  int first = litetx::engine::kTxnIdPartitions;
  for (const auto& id : ids) first = std::min(first, litetx::engine::TxnIdPartition(id));
  Collector other(mem, Shared("gc-other"));
  ASSERT_TRUE(other.RunOnce().ok());
  EXPECT_EQ(other.stats().claims, static_cast<std::uint64_t>(15 - first));
  clock->Advance(5s);
  ASSERT_TRUE(other.RunOnce().ok());
  ExpectAllReversed(ids);
  litetx::Database reader(mem, Eng());
  for (const auto& id : ids) EXPECT_EQ(OutcomeOf(reader, id), TxnOutcome::kAborted);
}

TEST_F(CollectorShareTest, ABudgetKeepsItsPlaceInTheClaimForWhoeverTakesItNext) {
  auto ids = Abandon(64);
  CollectorOptions o = Shared("gc-a");
  o.record_budget = 7;
  o.scan_batch = 3;
  Collector a(mem, o);
  CollectorOptions ob = Shared("gc-b");
  ob.record_budget = 7;
  ob.scan_batch = 3;
  Collector b(mem, ob);
  int passes = 0;
  while (ScanAll(*mem, litetx::kTransactionsCollection).size() > 0 && passes < 100) {
    Collector& gc = passes % 2 == 0 ? a : b;
    ASSERT_TRUE(gc.RunOnce().ok());
    EXPECT_LE(gc.last_pass().records_read, 7u);
    ++passes;
    clock->Advance(1ms);
  }
  EXPECT_EQ(a.stats().reversed + b.stats().reversed, 64u);
  EXPECT_GE(passes, 10);  // 64 records, 7 a pass
  ExpectAllReversed(ids);
}

TEST_F(CollectorShareTest, ACollectorPausedPastItsClaimRepeatsOnlyHarmlessWork) {
  auto ids = Abandon(20);
  // gc-slow is paused before its first document write, past its claim lease; gc-fast takes the
  // partition over and settles it; then gc-slow resumes.
  auto hook = std::make_shared<HookStore>(mem);
  std::atomic<bool> paused{false};
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_write() && c.key.collection == "c" && !paused.exchange(true)) {
      std::unique_lock<std::mutex> l(m);
      cv.notify_all();
      cv.wait(l, [&] { return release; });
    }
    return std::nullopt;
  };
  Collector slow(hook, Shared("gc-slow"));
  Status ss;
  std::thread t([&] { ss = slow.RunOnce(); });
  {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return paused.load(); });
  }
  clock->Advance(6s);  // past gc-slow's claim
  Collector fast(mem, Shared("gc-fast"));
  ASSERT_TRUE(fast.RunOnce().ok());
  ExpectAllReversed(ids);
  {
    std::lock_guard<std::mutex> l(m);
    release = true;
  }
  cv.notify_all();
  t.join();
  EXPECT_TRUE(ss.ok()) << ss.ToString();
  ExpectAllReversed(ids);
  EXPECT_EQ(slow.stats().failed + fast.stats().failed, 0u);
}

TEST_F(CollectorShareTest, ACorruptClaimIsTakenOver) {
  auto ids = Abandon(10);
  for (const char* k : {"p0", "p7", "pf"}) {
    ASSERT_TRUE(mem->Create(Key{kClaims, k}, Obj(R"({"by":7,"until":"soon"})")).ok());
  }
  Collector gc(mem, Shared("gc"));
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().claims, 16u);
  ExpectAllReversed(ids);
}

}  // namespace
}  // namespace ltxtest
