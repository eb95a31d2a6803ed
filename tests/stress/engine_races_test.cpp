// tests/stress/engine_races_test.cpp — deterministic reproducers of races the stress tests hit
// at random, so that a fix can be checked without luck.
//
// ReadRacesHolderRollback: a read-committed read (Database::Read, and TxnContext::Get inside
// Database::Run, which reads the same way) finds a document referenced by a pending
// transaction X, and before it fetches X's record, X is rolled back completely (the document
// restored, the record turned into an "aborted" outcome marker with no worklist). The read must
// return the restored document (or re-read it), not kCorruption ("... held by transaction X
// whose worklist does not name it"). Seen in ClosedEconomy.AnomalyScoreIsZero and
// HistoryStress.NoLostUpdateG1G2OrStaleRead, where conflicting commits roll back while others read.
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "stress_util.h"

namespace {

using namespace std::chrono_literals;
using litetx::Key;
using litetx::Result;
using litetx::StoredDocument;

// Runs `hook` once, right before the first Get of a transaction record.
class BeforeRecordGet final : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::function<void()> hook;
  Result<std::optional<StoredDocument>> Get(const Key& key) override {
    if (key.collection == litetx::kTransactionsCollection && hook) {
      auto h = std::move(hook);
      hook = nullptr;
      h();
    }
    return ForwardingStore::Get(key);
  }
};

const std::string kColl = "stress.race";

// A store where "d" (balance 1) is referenced by a crashed, pending transfer to "e".
std::shared_ptr<litetx::MemoryStore> HeldByCrashedTransaction() {
  auto base = std::make_shared<litetx::MemoryStore>();
  litetx::Database db(base);
  EXPECT_TRUE(db.Commit(litetx::Transaction()
                            .Insert(kColl, "d", {{"balance", 1}})
                            .Insert(kColl, "e", {{"balance", 1}}))
                  .ok());
  db.Flush();  // settled, so that the crashing transaction's writes are its own
  litetx::FaultOptions fo;
  fo.crash_after_writes = 2;  // the record, then the first document
  litetx::Database crashing(std::make_shared<litetx::FaultInjectingStore>(base, fo));
  EXPECT_THROW((void)crashing.Commit(litetx::Transaction()
                                         .Adjust(kColl, "d", {{"balance", 5}})
                                         .Adjust(kColl, "e", {{"balance", -1}})),
               litetx::SimulatedCrash);
  auto raw = db.Read(kColl, "d", litetx::ReadOptions{litetx::Isolation::kReadUncommitted});
  EXPECT_TRUE(raw.ok() && !raw->txn.empty()) << "setup: d should be held by the crashed transaction";
  return base;
}

// Settles every transaction of `store` (the crashed one is rolled back and becomes a marker).
void RollBackEverything(const std::shared_ptr<litetx::Store>& store) {
  litetx::CollectorOptions co;
  co.older_than = 1ms;
  litetx::Collector gc(store, co);
  std::this_thread::sleep_for(5ms);  // older than older_than
  EXPECT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().reversed, 1u);
}

std::int64_t BalanceOf(const litetx::ReadResult& r) {
  const boost::json::value* b = r.doc.if_contains("balance");
  return b != nullptr && b->is_int64() ? b->get_int64() : -1;
}

TEST(EngineRaces, ReadRacesHolderRollback) {
  auto base = HeldByCrashedTransaction();
  auto hooked = std::make_shared<BeforeRecordGet>(base);
  hooked->hook = [&] { RollBackEverything(base); };
  litetx::Database db(hooked);
  auto r = db.Read(kColl, "d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(BalanceOf(*r), 1);
}

TEST(EngineRaces, RunGetRacesHolderRollback) {
  auto base = HeldByCrashedTransaction();
  auto hooked = std::make_shared<BeforeRecordGet>(base);
  hooked->hook = [&] { RollBackEverything(base); };
  litetx::Database db(hooked);
  std::int64_t seen = -2;
  auto r = db.Run([&](litetx::TxnContext& tx) -> litetx::Status {
    auto d = tx.Get(kColl, "d");
    if (!d.ok()) return d.status();
    seen = BalanceOf(*d);
    return tx.Adjust(kColl, "d", {{"balance", 1}});
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 1) << "the first attempt failed: the read raced the rollback";
  EXPECT_EQ(seen, 1);
}

}  // namespace
