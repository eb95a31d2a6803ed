// tests/lock_test.cpp — pessimistic locks (TxnContext::Lock) and the contention policy
// (engine/contention.h): shared and exclusive modes, expiry, release at commit, rollback and
// scope end; holders settled on the spot; wait-die by age; no deadlock between crossing runs.
#include <atomic>
#include <thread>

#include "engine/contention.h"
#include "engine/locks.h"
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::LockMode;
using litetx::RunOptions;
using litetx::Transaction;
using litetx::TxnContext;

class LockTest : public ::testing::Test, public World {
 protected:
  void SetUp() override {
    db = Direct();
    other = Direct();
    MustCommit(*db, Transaction().Insert("c", "x", {{"n", 1}}).Insert("c", "y", {{"n", 2}}));
  }
  std::size_t LocksOn(std::string id) { return MetaOf(*mem, "c", id).locks.size(); }
  RunOptions Once() const {
    RunOptions o;
    o.max_attempts = 1;
    return o;
  }
  std::unique_ptr<litetx::Database> db, other;
};

TEST_F(LockTest, WriteLockKeepsOtherWritersAndLockersOutUntilCommit) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    if (Status s = tx.Lock("c", "x", LockMode::kWrite); !s.ok()) return s;
    EXPECT_EQ(LocksOn("x"), 1u);
    EXPECT_EQ(MetaOf(*mem, "c", "x").version, V(1));  // a lock is not a change
    const auto t0 = clock->NowMillis();
    EXPECT_EQ(other->Commit(Transaction().Update("c", "x", {{"n", 9}})).code(), Code::kBusy);
    EXPECT_GE(clock->NowMillis() - t0, 50);  // it waited busy_timeout first
    EXPECT_EQ(other->Run([](TxnContext& t2) { return t2.Lock("c", "x", LockMode::kRead); }, Once())
                  .code(),
              Code::kBusy);
    EXPECT_EQ(other->Read("c", "x")->doc, Obj(R"({"n":1})"));  // plain reads never block
    return tx.Update("c", "x", {{"n", 5}});
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(LocksOn("x"), 0u);
  EXPECT_EQ(ReadImage(*db, "c", "x"), Found(V(2), Obj(R"({"n":5})")));
  MustCommit(*other, Transaction().Update("c", "x", {{"n", 9}}));
}

TEST_F(LockTest, ReadLocksAreSharedAndKeepWritersOut) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    if (Status s = tx.Lock("c", "x", LockMode::kRead); !s.ok()) return s;
    auto inner = other->Run([&](TxnContext& t2) -> Status {
      if (Status s = t2.Lock("c", "x", LockMode::kRead); !s.ok()) return s;
      EXPECT_EQ(LocksOn("x"), 2u);
      EXPECT_EQ(t2.Lock("c", "x", LockMode::kWrite).code(), Code::kBusy);  // another reader
      return Status::Ok();
    }, Once());
    EXPECT_TRUE(inner.ok()) << inner.status().ToString();
    EXPECT_EQ(LocksOn("x"), 1u);  // the inner run released its own
    EXPECT_EQ(other->Commit(Transaction().Adjust("c", "x", {{"n", 1}})).code(), Code::kBusy);
    // The only reader may upgrade.
    return tx.Lock("c", "x", LockMode::kWrite);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(LocksOn("x"), 0u);
  EXPECT_EQ(ReadImage(*db, "c", "x"), Found(V(1), Obj(R"({"n":1})")));  // locks only: no write
}

TEST_F(LockTest, LocksAreReleasedAtRollbackAndWhenTheScopeEnds) {
  auto r = db->Run([&](TxnContext& tx) -> Status {
    if (Status s = tx.Lock("c", "x", LockMode::kWrite); !s.ok()) return s;
    if (Status s = tx.Lock("c", "y", LockMode::kRead); !s.ok()) return s;
    return Status::FailedPrecondition("changed my mind");
  });
  EXPECT_EQ(r.code(), Code::kFailedPrecondition);
  EXPECT_EQ(LocksOn("x") + LocksOn("y"), 0u);

  struct Boom {};
  EXPECT_THROW((void)db->Run([&](TxnContext& tx) -> Status {
                 EXPECT_TRUE(tx.Lock("c", "x", LockMode::kWrite).ok());
                 throw Boom{};
               }),
               Boom);
  EXPECT_EQ(LocksOn("x"), 0u);
}

// A store that loses the reply of the first lock write on c/x (the lock is stored) and then
// fails the next `failed_reads` reads of c/x, so that Lock cannot learn that it holds the lock.
std::shared_ptr<litetx::FaultInjectingStore> LoseLockReplyThenFailReads(const World& w,
                                                                        int failed_reads) {
  litetx::FaultOptions fo;
  fo.clock = w.clock;
  auto lost = std::make_shared<std::atomic<bool>>(false);
  auto reads_to_fail = std::make_shared<std::atomic<int>>(0);
  fo.rule = [=](litetx::StoreOp op, const Key& key, std::uint64_t) {
    if (key != Key{"c", "x"}) return litetx::Fault::kNone;
    if (op == litetx::StoreOp::kReplace && !lost->exchange(true)) {
      reads_to_fail->store(failed_reads);
      return litetx::Fault::kLostReply;
    }
    if (op == litetx::StoreOp::kGet && reads_to_fail->fetch_sub(1) > 0) {
      return litetx::Fault::kTransient;
    }
    return litetx::Fault::kNone;
  };
  return std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
}

TEST_F(LockTest, LockWhoseReplyWasLostIsReleasedBeforeTheNextAttempt) {
  // Every read of Lock's re-look fails (Options::max_attempts of them), so Lock reports
  // kUnavailable although its lock is stored. The callback treats that as worth a re-run.
  auto faulty = LoseLockReplyThenFailReads(*this, Opts().max_attempts);
  litetx::Database fdb(faulty, Opts());
  std::vector<Code> lock_codes;
  RunOptions o;
  o.max_attempts = 3;
  auto r = fdb.Run([&](TxnContext& tx) -> Status {
    Status s = tx.Lock("c", "x", LockMode::kWrite);
    lock_codes.push_back(s.code());
    if (s.code() == Code::kUnavailable) return Status::Busy("store trouble; run again");
    if (!s.ok()) return s;
    return tx.Update("c", "x", {{"n", 5}});
  }, o);
  EXPECT_EQ(faulty->lost_replies(), 1u);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);  // the second attempt was not kept out by the first one's lock
  EXPECT_EQ(lock_codes, (std::vector<Code>{Code::kUnavailable, Code::kOk}));
  EXPECT_EQ(LocksOn("x"), 0u);
  EXPECT_EQ(ReadImage(*db, "c", "x"), Found(V(2), Obj(R"({"n":5})")));
}

TEST_F(LockTest, LockWhoseReplyWasLostIsReleasedWhenTheRunEnds) {
  auto faulty = LoseLockReplyThenFailReads(*this, Opts().max_attempts);
  litetx::Database fdb(faulty, Opts());
  auto r = fdb.Run([&](TxnContext& tx) { return tx.Lock("c", "x", LockMode::kWrite); });
  EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_EQ(faulty->lost_replies(), 1u);
  EXPECT_EQ(LocksOn("x"), 0u) << "the stored lock was left to expire";
  const auto t0 = clock->NowMillis();
  MustCommit(*other, Transaction().Update("c", "x", {{"n", 3}}));
  EXPECT_EQ(clock->NowMillis(), t0);  // nothing to wait for
}

TEST_F(LockTest, LockOfADeadOwnerExpiresWithItsLease) {
  litetx::engine::Meta m = MetaOf(*mem, "c", "x");
  m.locks.push_back({"dead-owner", true, clock->NowMillis() + 1000, clock->NowMillis()});
  auto raw = *Raw(*mem, "c", "x");
  litetx::engine::EncodeMeta(raw, m);
  PutRaw(*mem, {"c", "x"}, raw);
  EXPECT_EQ(other->Commit(Transaction().Update("c", "x", {{"n", 3}})).code(), Code::kBusy);
  clock->Advance(1000ms);
  MustCommit(*other, Transaction().Update("c", "x", {{"n", 3}}));
  EXPECT_EQ(LocksOn("x"), 0u);  // the expired entry went with the write
}

TEST_F(LockTest, NothingToLock) {
  MustCommit(*db, Transaction().Delete("c", "y"));
  auto r = db->Run([&](TxnContext& tx) -> Status {
    EXPECT_EQ(tx.Lock("c", "none", LockMode::kRead).code(), Code::kNotFound);
    EXPECT_EQ(tx.Lock("c", "y", LockMode::kWrite).code(), Code::kDeleted);
    EXPECT_EQ(tx.Lock("", "y", LockMode::kWrite).code(), Code::kInvalidArgument);
    return Status::Ok();
  });
  EXPECT_TRUE(r.ok());
}

// A coordinator that dies after write k of `txn` (1: the record), leaving what it wrote.
std::string Abandon(const World& w, const Transaction& txn, int k) {
  auto hook = std::make_shared<HookStore>(w.mem);
  std::string id;
  int writes = 0;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && s.ok()) id = c.key.id;
    if (c.is_write() && s.ok() && ++writes == k) throw std::runtime_error("crash");
    return std::nullopt;
  };
  litetx::Database dead(hook, w.Opts());
  EXPECT_THROW((void)dead.Commit(txn), std::runtime_error);
  return id;
}

TEST_F(LockTest, StaleUncommittedHolderIsRolledBackOnTheSpot) {
  std::string id = Abandon(*this, Transaction().Update("c", "x", {{"n", 7}}).Update("c", "y", {{"n", 8}}), 2);
  EXPECT_EQ(MetaOf(*mem, "c", "x").txn, id);
  EXPECT_EQ(other->Commit(Transaction().Adjust("c", "x", {{"n", 1}})).code(), Code::kBusy);
  clock->Advance(std::chrono::milliseconds(Opts().lease));  // past its GC timestamp
  MustCommit(*other, Transaction().Adjust("c", "x", {{"n", 1}}));  // no collector ran
  EXPECT_EQ(ReadImage(*db, "c", "x"), Found(V(4), Obj(R"({"n":2})")));  // held V(2), reversed V(3)
  EXPECT_EQ(db->Outcome(id).value(), litetx::TxnOutcome::kAborted);
  ExpectClean(*mem, {"c"});
}

TEST_F(LockTest, CommittedHolderIsFinishedOnTheSpotWithoutWaiting) {
  // Writes: record, 2 applies, commit flip (3 + 1): dies right after the commit point.
  std::string id = Abandon(*this, Transaction().Update("c", "x", {{"n", 7}}).Update("c", "y", {{"n", 8}}), 4);
  EXPECT_EQ(MetaOf(*mem, "c", "x").txn, id);
  const auto t0 = clock->NowMillis();
  MustCommit(*other, Transaction().Adjust("c", "x", {{"n", 1}}));
  EXPECT_EQ(clock->NowMillis(), t0);  // no wait
  EXPECT_EQ(ReadImage(*db, "c", "x"), Found(V(3), Obj(R"({"n":8})")));
  EXPECT_EQ(db->Outcome(id).value(), litetx::TxnOutcome::kCommitted);
}

TEST_F(LockTest, WaitDieTheYoungerGivesWayAtOnceTheOlderWaits) {
  // A live (not stale) transaction holds c/x; its age is the record's start time.
  clock->Advance(10ms);
  std::string holder = Abandon(*this, Transaction().Update("c", "x", {{"n", 7}}).Update("c", "y", {{"n", 8}}), 2);
  const std::int64_t holder_age = clock->NowMillis();
  litetx::Options opts = Opts();
  spdlog::logger quiet("t", std::make_shared<spdlog::sinks::null_sink_mt>());
  litetx::engine::Env env{*mem, opts, *clock, quiet};
  const Key x{"c", "x"};
  using litetx::engine::Need;
  using litetx::engine::Waiter;

  auto t0 = clock->NowMillis();
  auto younger = litetx::engine::AwaitFree(env, x, Waiter{"zz-young", holder_age + 5, true}, Need::kWrite);
  EXPECT_EQ(younger.code(), Code::kBusy);
  EXPECT_NE(younger.status().message().find("wait-die"), std::string::npos);
  EXPECT_EQ(clock->NowMillis(), t0);  // died without waiting

  t0 = clock->NowMillis();
  auto older = litetx::engine::AwaitFree(env, x, Waiter{"aa-old", holder_age - 5, true}, Need::kWrite);
  EXPECT_EQ(older.code(), Code::kBusy);
  EXPECT_EQ(older.status().message().find("wait-die"), std::string::npos);
  EXPECT_GE(clock->NowMillis() - t0, 50);  // waited for the younger holder up to the bound

  t0 = clock->NowMillis();  // holding nothing: waiting cannot deadlock, so it waits
  auto free_hand = litetx::engine::AwaitFree(env, x, Waiter{"zz-young", holder_age + 5, false}, Need::kWrite);
  EXPECT_EQ(free_hand.code(), Code::kBusy);
  EXPECT_GE(clock->NowMillis() - t0, 50);

  // A check is blocked by a holder too, but never by a lock.
  EXPECT_TRUE(litetx::engine::Older(1, "b", 2, "a"));
  EXPECT_TRUE(litetx::engine::Older(1, "a", 1, "b"));
  EXPECT_FALSE(litetx::engine::Older(1, "b", 1, "a"));
  (void)holder;
}

TEST(ContentionTest, CrossingRunsNeverDeadlock) {
  // Real time: two threads take write locks on x and y in opposite orders, many times. Without
  // wait-die each would wait for the other's lock; with it the younger gives way and re-runs.
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::Options o;
  o.busy_timeout = 5s;  // a deadlock would show as a busy, not go unnoticed
  litetx::Database db(mem, o);
  MustCommit(db, Transaction().Insert("c", "x", {{"n", 0}}).Insert("c", "y", {{"n", 0}}));
  constexpr int kEach = 100;
  std::atomic<int> failures{0};
  auto worker = [&](const char* first, const char* second) {
    for (int i = 0; i < kEach; ++i) {
      auto r = db.Run([&](TxnContext& tx) -> Status {
        if (Status s = tx.Lock("c", first, LockMode::kWrite); !s.ok()) return s;
        std::this_thread::yield();
        if (Status s = tx.Lock("c", second, LockMode::kWrite); !s.ok()) return s;
        if (Status s = tx.Adjust("c", first, {{"n", 1}}); !s.ok()) return s;
        return tx.Adjust("c", second, {{"n", 1}});
      });
      if (!r.ok()) ++failures;
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::thread a(worker, "x", "y"), b(worker, "y", "x");
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  EXPECT_EQ(ReadImage(db, "c", "x").doc, Obj(R"({"n":200})"));
  EXPECT_EQ(ReadImage(db, "c", "y").doc, Obj(R"({"n":200})"));
  db.Flush();  // the last transactions' finishing, done by the Database's finisher
  ExpectClean(*mem, {"c"});
}

}  // namespace
}  // namespace ltxtest
