// tests/dangling_test.cpp — dangling holds: a document that still references a transaction
// whose record is gone or already an outcome marker. Such a hold is a write that landed after
// its transaction was over (here: an apply delayed in the network past the coordinator's own
// rollback), never part of any outcome. Reads see through it, writers undo it on the spot, and
// the collector's bounded, resumable sweep undoes it; a hold without undo data (written by an
// older litetx) is reported as corruption, never waited on for ever.
#include <memory>
#include <optional>
#include <string>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnOutcome;

constexpr std::chrono::milliseconds kLease = 10s;

class DanglingTest : public ::testing::Test, public World {
 protected:
  litetx::Options Engine() const {
    litetx::Options o = Opts();
    o.lease = kLease;
    return o;
  }
  CollectorOptions Gc() const {
    CollectorOptions o;
    o.engine = Engine();
    o.name = "gc-sweep";
    o.collections = {"acct"};
    o.tombstone_retention = 0ms;
    return o;
  }
  void SetUp() override {
    litetx::Database d(mem, Engine());
    MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
    MustCommit(d, Transaction().Insert("acct", "b", Obj(R"({"n":100,"note":"x"})")));
  }
};

// A transfer a -> b whose apply of b never arrives while the coordinator waits for it: every
// send is held "in the network" (kUnknown to the coordinator, nothing written). The coordinator
// gives up, rolls back (b is not held: nothing to reverse there) and writes the aborted marker.
// Then the first held write of b is delivered: b is now held by a transaction that is over.
// Returns the transaction id.
struct Delayed {
  std::optional<std::pair<Revision, json::object>> in_flight;
};

std::string DanglingTransfer(World& w, const litetx::Options& o) {
  auto hook = std::make_shared<HookStore>(w.mem);
  auto delayed = std::make_shared<Delayed>();
  hook->before = [delayed](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kReplace && c.key == Key{"acct", "b"}) {
      if (!delayed->in_flight) delayed->in_flight.emplace(c.expected, *c.value);
      return Status::Unknown("reply timed out");
    }
    return std::nullopt;
  };
  litetx::Database db(hook, o);
  auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}}));
  EXPECT_EQ(r.code(), Code::kUnavailable) << r.status().ToString();
  const std::string id = r.status().txn_id();
  litetx::Database direct(w.mem, o);
  auto outcome = direct.Outcome(id);
  EXPECT_TRUE(outcome.ok() && *outcome == TxnOutcome::kAborted);
  // The delayed write arrives now, after the coordinator reversed a and settled its record.
  EXPECT_TRUE(delayed->in_flight.has_value());
  auto landed = w.mem->Replace(Key{"acct", "b"}, delayed->in_flight->first, delayed->in_flight->second);
  EXPECT_TRUE(landed.ok()) << landed.status().ToString();
  EXPECT_EQ(MetaOf(*w.mem, "acct", "b").txn, id);
  return id;
}

TEST_F(DanglingTest, ReadsSeeThroughTheHoldToThePriorImage) {
  const std::string id = DanglingTransfer(*this, Engine());
  litetx::Database db(mem, Engine());
  EXPECT_EQ(ReadImage(db, "acct", "a"), Found(V(3), Obj(R"({"n":100})")));  // reversed: v1 -> 3
  EXPECT_EQ(ReadImage(db, "acct", "b"), Found(V(1), Obj(R"({"n":100,"note":"x"})")));
  // Also once the marker is purged and the record is gone altogether.
  ASSERT_TRUE(mem->Erase(TxnKey(id), RevisionOf(*mem, TxnKey(id))).ok());
  EXPECT_EQ(ReadImage(db, "acct", "b"), Found(V(1), Obj(R"({"n":100,"note":"x"})")));
  // Reads never write.
  EXPECT_EQ(MetaOf(*mem, "acct", "b").txn, id);
}

TEST_F(DanglingTest, WriterUndoesTheHoldOnTheSpotInsteadOfWaiting) {
  DanglingTransfer(*this, Engine());
  litetx::Database db(mem, Engine());
  auto r = db.Commit(Transaction().Adjust("acct", "b", {{"n", 5}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(db, "acct", "b").doc, Obj(R"({"n":105,"note":"x"})"));
  EXPECT_EQ(ReadImage(db, "acct", "a").doc, Obj(R"({"n":100})"));
  ExpectClean(*mem, {"acct"});
}

TEST_F(DanglingTest, WriterUndoesAHoldWhoseRecordWasPurged) {
  const std::string id = DanglingTransfer(*this, Engine());
  ASSERT_TRUE(mem->Erase(TxnKey(id), RevisionOf(*mem, TxnKey(id))).ok());
  litetx::Database db(mem, Engine());
  auto r = db.Commit(Transaction().Adjust("acct", "b", {{"n", 5}}).Adjust("acct", "a", {{"n", -5}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadImage(db, "acct", "b").doc, Obj(R"({"n":105,"note":"x"})"));
  EXPECT_EQ(ReadImage(db, "acct", "a").doc, Obj(R"({"n":95})"));
}

TEST_F(DanglingTest, CollectorSweepUndoesTheHold) {
  DanglingTransfer(*this, Engine());
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().undone, 1u);
  EXPECT_EQ(gc.stats().swept, 2u);
  ExpectClean(*mem, {"acct"});
  litetx::Database db(mem, Engine());
  EXPECT_EQ(ReadImage(db, "acct", "b").doc, Obj(R"({"n":100,"note":"x"})"));
  EXPECT_EQ(ReadImage(db, "acct", "b").version, V(3));  // held at 2, undone at 3: never down
}

// The hold ends by another hand between the sweep's read of the document and its undo (here a
// writer undoes it on the spot while the sweep reads the record): the sweep writes nothing
// and counts nothing.
TEST_F(DanglingTest, SweepCountsOnlyTheHoldsItUndidItself) {
  const std::string id = DanglingTransfer(*this, Engine());
  auto hook = std::make_shared<HookStore>(mem);
  int writes = 0;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    // The sweep's writes (the record pass folds the transaction's marker before it).
    if (c.is_write() && c.key.collection == "acct") ++writes;
    if (c.op == Op::kGet && c.key == TxnKey(id) && c.nth == 1) {
      litetx::Database writer(mem, Engine());
      auto r = writer.Commit(Transaction().Adjust("acct", "b", {{"n", 5}}));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    return std::nullopt;
  };
  Collector gc(hook, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().undone, 0u);
  EXPECT_EQ(writes, 0);
  ExpectClean(*mem, {"acct"});
  litetx::Database db(mem, Engine());
  EXPECT_EQ(ReadImage(db, "acct", "b").doc, Obj(R"({"n":105,"note":"x"})"));
}

TEST_F(DanglingTest, LiveHoldsAreLeftToTheirTransaction) {
  // A document held by a live transaction is not the sweep's to touch.
  HoldLive(*mem, {"acct", "live"}, Obj(R"({"n":1})"), 4, "0123456789abcdef01234567",
           clock->NowMillis());
  const Revision before = RevisionOf(*mem, {"acct", "live"});
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().undone, 0u);
  EXPECT_EQ(RevisionOf(*mem, {"acct", "live"}), before);
}

TEST_F(DanglingTest, HoldWithoutUndoDataIsCorruptionNotAnEndlessWait) {
  auto m = LiveMeta(2);
  m.txn = "feedfacefeedfacefeedface";  // no record, no undo data: an older litetx's hold
  PutMeta(*mem, {"acct", "old"}, Obj(R"({"n":1})"), m);
  litetx::Database db(mem, Engine());
  auto read = db.Read("acct", "old");
  EXPECT_EQ(read.code(), Code::kCorruption) << read.status().ToString();
  const std::int64_t t0 = clock->NowMillis();
  auto w = db.Commit(Transaction().Adjust("acct", "old", {{"n", 1}}));
  EXPECT_EQ(w.code(), Code::kCorruption) << w.status().ToString();
  EXPECT_LT(clock->NowMillis() - t0, Engine().busy_timeout.count()) << "waited for a holder that is over";
  Collector gc(mem, Gc());
  EXPECT_EQ(gc.RunOnce().code(), Code::kCorruption);
  EXPECT_EQ(gc.stats().failed, 1u);
  EXPECT_EQ(MetaOf(*mem, "acct", "old").txn, "feedfacefeedfacefeedface");  // left as found
}

TEST_F(DanglingTest, SweepIsBoundedPerRunAndResumes) {
  litetx::Database db(mem, Engine());
  for (int i = 0; i < 23; ++i) {
    MustCommit(db, Transaction().Insert("acct", "k" + std::to_string(100 + i), Obj(R"({"n":0})")));
  }
  // 25 documents; three dangling holds spread over the id range.
  for (const char* id : {"a", "k111", "k122"}) {
    auto m = MetaOf(*mem, "acct", id);
    json::object body = BodyOf(*mem, "acct", id);
    m.version += 1;
    m.txn = "0000000000000000000000ff";
    json::object doc = litetx::engine::MakeStored(body, m);
    doc["_ltx"].as_object()["u"] =
        json::object{{"p", "live"}, {"pv", m.version - 1}, {"psv", 1}};
    PutRaw(*mem, {"acct", id}, doc);
  }
  CollectorOptions o = Gc();
  o.sweep_budget = 10;
  o.scan_batch = 4;
  o.sweep_interval = 0ms;  // a slice in every pass
  Collector gc(mem, o);
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().swept, 10u);
  EXPECT_EQ(gc.stats().undone, 1u);  // "a" (ids sort a, b, k100...)
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().swept, 20u);
  EXPECT_EQ(gc.stats().undone, 2u);  // k111
  ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(gc.stats().swept, 25u);  // the rest of the lap, no further
  EXPECT_EQ(gc.stats().undone, 3u);  // k122
  ExpectClean(*mem, {"acct"});
  ASSERT_TRUE(gc.RunOnce().ok());  // a new lap from the start
  EXPECT_EQ(gc.stats().swept, 35u);
}

}  // namespace
}  // namespace ltxtest
