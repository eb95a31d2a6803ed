// tests/lease_test.cpp — short leases kept alive by the Database's lease keeper.
//
// A live transaction (slow store, long wait) renews its record's lease in the background, so
// a collector running beside it never rolls it back even when the commit lasts many leases;
// the same transaction with renewal off is rolled back (kAborted) — the renewal is what saves
// it. A crashed coordinator stops renewing, so its documents are settled by the next writer
// about one lease after the crash. A Run's pessimistic lock is renewed too. Real clock, short
// leases; every loop is bounded in count and time.
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "engine/lease_keeper.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnOutcome;

constexpr auto kShortLease = 200ms;

litetx::Options RealOptions(bool renew) {
  litetx::Options o;  // SystemClock
  o.lease = kShortLease;
  o.renew_leases = renew;
  // Renewals happen between a coordinator's store calls: the classic path. The parallel commit
  // writes its record with its applies in one round, which its lease alone covers.
  o.parallel_commit = false;
  o.busy_timeout = 3s;
  o.retry_backoff = {1ms, 10ms};
  return o;
}

// A collector on its own thread, RunOnce every 10 ms, until destroyed.
class BusyCollector {
 public:
  explicit BusyCollector(std::shared_ptr<litetx::Store> store) {
    CollectorOptions o;
    o.engine = RealOptions(false);
    o.name = "gc-beside";
    o.interval = 10ms;
    gc_ = std::make_unique<Collector>(std::move(store), o);
    gc_->Start();
  }
  ~BusyCollector() { gc_->Stop(); }
  litetx::CollectorStats stats() const { return gc_->stats(); }

 private:
  std::unique_ptr<Collector> gc_;
};

// A transfer whose apply of b is held up for `stall` by a slow store (the coordinator is alive
// throughout: only its store call is slow).
litetx::Result<litetx::CommitInfo> SlowTransfer(std::shared_ptr<litetx::MemoryStore> mem,
                                                bool renew, std::chrono::milliseconds stall) {
  auto hook = std::make_shared<HookStore>(mem);
  hook->before = [stall](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"acct", "b"} && c.nth == 1) {
      std::this_thread::sleep_for(stall);
    }
    return std::nullopt;
  };
  litetx::Database db(hook, RealOptions(renew));
  return db.Commit(Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}}));
}

void Seed(litetx::MemoryStore& mem) {
  auto store = std::shared_ptr<litetx::MemoryStore>(&mem, [](litetx::MemoryStore*) {});
  litetx::Database d(store, RealOptions(false));
  MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
  MustCommit(d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
}

std::int64_t N(litetx::Database& db, const char* id) {
  auto r = db.Read("acct", id);
  EXPECT_TRUE(r.ok());
  return r.ok() ? r->doc.at("n").as_int64() : -1;
}

TEST(LeaseTest, SlowButLiveCoordinatorIsNeverRolledBack) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  Seed(*mem);
  BusyCollector gc(mem);
  // Stalled for five leases while a collector looks every 10 ms.
  auto r = SlowTransfer(mem, /*renew=*/true, kShortLease * 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  litetx::Database db(mem, RealOptions(false));
  auto outcome = db.Outcome(r->txn_id);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, TxnOutcome::kCommitted);
  EXPECT_EQ(N(db, "a"), 70);
  EXPECT_EQ(N(db, "b"), 130);
  EXPECT_EQ(gc.stats().reversed, 0u);
}

TEST(LeaseTest, WithoutRenewalTheSameStallIsRolledBack) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  Seed(*mem);
  BusyCollector gc(mem);
  auto r = SlowTransfer(mem, /*renew=*/false, kShortLease * 5);
  EXPECT_EQ(r.code(), Code::kAborted) << r.status().ToString();
  litetx::Database db(mem, RealOptions(false));
  EXPECT_EQ(N(db, "a"), 100);
  EXPECT_EQ(N(db, "b"), 100);
  EXPECT_GE(gc.stats().reversed, 1u);
}

TEST(LeaseTest, CrashedCoordinatorIsSettledByTheNextWriterAfterAboutALease) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  Seed(*mem);
  {
    litetx::FaultOptions f;
    f.crash_after_writes = 2;  // record create, apply of a: then the process "dies"
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
    litetx::Database dying(faulty, RealOptions(true));
    EXPECT_THROW((void)dying.Commit(Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust(
                     "acct", "b", {{"n", 30}})),
                 litetx::SimulatedCrash);
  }
  EXPECT_FALSE(MetaOf(*mem, "acct", "a").txn.empty()) << "the crash left a held";
  litetx::Database db(mem, RealOptions(true));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", 1}}));
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r.ok()) << r.status().ToString();  // within busy_timeout (3 s = 15 leases)
  EXPECT_EQ(N(db, "a"), 101);
  std::printf("a crashed holder blocked the next writer for %lld ms (lease %lld ms)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()),
              static_cast<long long>(kShortLease.count()));
}

TEST(LeaseTest, RunKeepsItsPessimisticLockAlivePastTheLockLease) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  Seed(*mem);
  litetx::Database db(mem, RealOptions(true));
  std::atomic<bool> locked{false}, release{false};
  std::thread holder([&] {
    litetx::RunOptions ro;
    ro.lock_lease = kShortLease;
    auto r = db.Run([&](litetx::TxnContext& tx) -> Status {
      if (Status s = tx.Lock("acct", "a", litetx::LockMode::kWrite); !s.ok()) return s;
      locked = true;
      for (int i = 0; i < 300 && !release; ++i) std::this_thread::sleep_for(5ms);
      return Status::Ok();
    }, ro);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  });
  for (int i = 0; i < 400 && !locked; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(locked);
  std::this_thread::sleep_for(kShortLease * 4);  // four lock leases later the lock still holds
  litetx::Options quick = RealOptions(true);
  quick.busy_timeout = 50ms;
  litetx::Database other(mem, quick);
  auto w = other.Commit(Transaction().Adjust("acct", "a", {{"n", 1}}));
  EXPECT_EQ(w.code(), Code::kBusy) << w.status().ToString();
  release = true;
  holder.join();
  auto after = other.Commit(Transaction().Adjust("acct", "a", {{"n", 1}}));
  EXPECT_TRUE(after.ok()) << after.status().ToString();  // released at the end of the run
}

// A renewal whose reply is lost and cannot be resolved (the record cannot be read for a while)
// leaves its write in doubt. When the coordinator next writes its record it finds that write —
// its own — and must build on it, not take it for a claim.
TEST(LeaseTest, RenewalWithALostReplyIsRecognisedAsOurOwnWrite) {
  World w;
  litetx::Options o = w.Opts();
  o.lease = 40ms;  // virtual time (ManualClock); the keeper looks every 10 ms of real time
  o.renew_leases = true;
  {
    litetx::Database d(w.mem, o);
    MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
    MustCommit(d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
  }
  auto hook = std::make_shared<HookStore>(w.mem);
  std::atomic<bool> stalled{false}, records_down{false}, lost{false};
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.on_record() && c.op == Op::kGet && records_down) return Status::Unavailable("down");
    if (c.op == Op::kReplace && c.key == Key{"acct", "a"} && !stalled) {
      stalled = true;
      w.clock->Advance(15ms);  // a quarter of the lease has gone, not half: only the keeper extends
      records_down = true;
      for (int i = 0; i < 200 && !lost; ++i) std::this_thread::sleep_for(5ms);
      std::this_thread::sleep_for(30ms);  // let failing renewals come and go
      records_down = false;
    }
    return std::nullopt;
  };
  hook->after = [&](const Call& c, const Status& st) -> std::optional<Status> {
    if (st.ok() && c.op == Op::kReplace && c.record_state() == "pending" && !lost) {
      lost = true;
      return Status::Unknown("renewal reply lost");
    }
    return std::nullopt;
  };
  litetx::Database db(hook, o);
  auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}}));
  ASSERT_TRUE(lost.load()) << "no renewal ran while the coordinator was stalled";
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto direct = w.Direct();
  EXPECT_EQ(ReadImage(*direct, "acct", "a").doc, Obj(R"({"n":70})"));
  EXPECT_EQ(ReadImage(*direct, "acct", "b").doc, Obj(R"({"n":130})"));
  auto outcome = direct->Outcome(r->txn_id);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, TxnOutcome::kCommitted);
  ExpectClean(*w.mem, {"acct"});
}

TEST(LeaseKeeperTest, HandleResetWaitsForARunningRenewalAndStopsFurtherOnes) {
  auto logger = std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::null_sink_mt>());
  litetx::engine::LeaseKeeper keeper(5ms, *logger);
  std::atomic<int> calls{0};
  std::atomic<bool> inside{false};
  auto h = keeper.Register([&] {
    inside = true;
    ++calls;
    std::this_thread::sleep_for(20ms);
    inside = false;
  });
  for (int i = 0; i < 200 && calls == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_GT(calls.load(), 0);
  h.Reset();
  EXPECT_FALSE(inside.load()) << "Reset returned while the renewal was running";
  const int after_reset = calls.load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), after_reset);
  // A renewal that throws ends its own registration only.
  std::atomic<int> good{0};
  auto bad = keeper.Register([] { throw std::runtime_error("boom"); });
  auto ok = keeper.Register([&] { ++good; });
  for (int i = 0; i < 200 && good < 3; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_GE(good.load(), 3);
}

}  // namespace
}  // namespace ltxtest
