// tests/claim_finality_test.cpp — a collector's claim is final.
//
// A coordinator whose record write lands but whose reply is lost, and which then pauses past its
// lease, must never take its record back from a collector that claimed it meanwhile (or wrote
// the aborted outcome marker): whatever Commit reports must match what the store ends with, and
// Database::Outcome must never change once it has said committed or aborted. The collector, in
// turn, must re-check its record before every document it reverses or finishes.
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnOutcome;

constexpr std::chrono::milliseconds kLease = 10s;

litetx::Options Engine(const World& w) {
  litetx::Options o = w.Opts();
  o.lease = kLease;
  return o;
}

CollectorOptions Gc(const World& w, const std::string& name, bool every_record_stale) {
  CollectorOptions o;
  o.engine = Engine(w);
  o.name = name;
  if (every_record_stale) o.older_than = 1ms;  // `litetx gc --older-than`
  return o;
}

void SeedAccounts(const World& w) {
  litetx::Database d(w.mem, Engine(w));
  MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
  MustCommit(d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
}

Transaction Transfer() {
  return Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}});
}

std::int64_t Balance(const World& w, const std::string& id) {
  auto db = w.Direct();
  auto r = db->Read("acct", id);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || r->state != litetx::DocumentState::kFound) return -1;
  return r->doc.at("n").as_int64();
}

// Which coordinator record write loses its reply (after landing).
enum class Lost { kCreate, kExtension, kFlip };
// What happens while the coordinator is paused between that write and its re-read.
enum class Meanwhile {
  kClaimThenCrash,   // a collector (older_than) claims the record and dies before anything else
  kClaimFenceCrash,  // ...claims, fences or reverses one document, then dies
  kFullRepair,       // ...claims, reverses and fences everything, writes the aborted marker
  kPastLease,        // the lease runs out and a collector with default settings repairs
};

const char* LostName(Lost l) {
  switch (l) {
    case Lost::kCreate: return "create";
    case Lost::kExtension: return "extension";
    case Lost::kFlip: return "flip";
  }
  return "?";
}
const char* MeanwhileName(Meanwhile m) {
  switch (m) {
    case Meanwhile::kClaimThenCrash: return "claim+crash";
    case Meanwhile::kClaimFenceCrash: return "claim+fence+crash";
    case Meanwhile::kFullRepair: return "full repair";
    case Meanwhile::kPastLease: return "past lease";
  }
  return "?";
}

// Runs a collector over `w.mem` that dies (SimulatedCrash) after `crash_after` writes (0: never).
void RunCollector(const World& w, const CollectorOptions& options, std::uint64_t crash_after) {
  litetx::FaultOptions fo;
  fo.crash_after_writes = crash_after;
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
  Collector gc(faulty, options);
  try {
    (void)gc.RunOnce();
  } catch (const litetx::SimulatedCrash&) {
  }
}

class ClaimFinality : public ::testing::TestWithParam<std::tuple<Lost, Meanwhile>> {};

TEST_P(ClaimFinality, ReportedOutcomeMatchesTheStoreAndNeverChanges) {
  const auto [lost, meanwhile] = GetParam();
  World w;
  SeedAccounts(w);
  auto hook = std::make_shared<HookStore>(w.mem);
  bool fired = false;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (!s.ok() || !c.on_record() || fired) return std::nullopt;
    const bool is_create = c.op == Op::kCreate;
    const bool is_extension = c.op == Op::kReplace && c.record_state() == "pending";
    if (lost == Lost::kExtension && is_create) {
      w.clock->Advance(kLease * 6 / 10);  // past half the lease: the next apply extends first
      return std::nullopt;
    }
    const bool target = (lost == Lost::kCreate && is_create) ||
                        (lost == Lost::kExtension && is_extension) ||
                        (lost == Lost::kFlip && c.is_commit_point());
    if (!target) return std::nullopt;
    fired = true;
    // The write landed; the coordinator now pauses (its reply lost) while others act.
    switch (meanwhile) {
      case Meanwhile::kClaimThenCrash:
        w.clock->Advance(2ms);
        RunCollector(w, Gc(w, "gc-claimer", true), 1);
        break;
      case Meanwhile::kClaimFenceCrash:
        w.clock->Advance(2ms);
        RunCollector(w, Gc(w, "gc-claimer", true), 2);
        break;
      case Meanwhile::kFullRepair:
        w.clock->Advance(2ms);
        RunCollector(w, Gc(w, "gc-claimer", true), 0);
        break;
      case Meanwhile::kPastLease:
        w.clock->Advance(kLease * 3);
        RunCollector(w, Gc(w, "gc-lease", false), 0);
        break;
    }
    return Status::Unknown("reply lost");
  };
  litetx::Database db(hook, Engine(w));
  auto r = db.Commit(Transfer());
  ASSERT_TRUE(fired) << "the lost reply was never injected";
  const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
  ASSERT_FALSE(id.empty());
  auto direct = w.Direct();
  auto first = direct->Outcome(id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  // What Commit said must be what happened.
  if (r.ok()) {
    EXPECT_NE(lost, Lost::kCreate) << "a commit whose record was claimed must not succeed";
    EXPECT_EQ(*first, TxnOutcome::kCommitted);
  } else if (r.code() != Code::kUnknown) {
    EXPECT_NE(*first, TxnOutcome::kCommitted) << r.status().ToString();
  }

  // Let healthy collectors settle everything; the outcome must not move.
  w.clock->Advance(kLease * 10);
  for (int i = 0; i < 2; ++i) RunCollector(w, Gc(w, "gc-healthy", false), 0);
  auto last = direct->Outcome(id);
  ASSERT_TRUE(last.ok());
  if (*first == TxnOutcome::kCommitted || *first == TxnOutcome::kAborted) {
    EXPECT_EQ(*last, *first) << "the outcome changed after it was reported";
  }
  const std::int64_t a = Balance(w, "a"), b = Balance(w, "b");
  EXPECT_EQ(a + b, 200) << "a=" << a << " b=" << b << " commit: " << r.status().ToString();
  if (*last == TxnOutcome::kCommitted) {
    EXPECT_EQ(a, 70);
    EXPECT_EQ(b, 130);
  } else {
    EXPECT_EQ(a, 100);
    EXPECT_EQ(b, 100);
  }
  if (r.ok()) {
    EXPECT_EQ(*last, TxnOutcome::kCommitted);
  }
  ExpectClean(*w.mem, {"acct"});
}

INSTANTIATE_TEST_SUITE_P(
    LostReplyThenPause, ClaimFinality,
    ::testing::Combine(::testing::Values(Lost::kCreate, Lost::kExtension, Lost::kFlip),
                       ::testing::Values(Meanwhile::kClaimThenCrash, Meanwhile::kClaimFenceCrash,
                                         Meanwhile::kFullRepair, Meanwhile::kPastLease)),
    [](const auto& info) {
      std::string s = std::string(LostName(std::get<0>(info.param))) + "_" +
                      MeanwhileName(std::get<1>(info.param));
      for (char& ch : s) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return s;
    });

// A slow collector thread: it claims the record and then stalls before its first document
// step while the coordinator (whose create reply was lost) resumes. Neither may act on a
// record state that the other has moved on from.
TEST(ClaimFinalitySlowCollector, CollectorStalledMidRepairWhileCoordinatorResumes) {
  World w;
  SeedAccounts(w);
  std::promise<void> collector_stalled, coordinator_done;
  auto coordinator_done_f = coordinator_done.get_future().share();

  // The collector's store: stalls at its first write to a user document until the coordinator
  // has returned.
  auto gc_hook = std::make_shared<HookStore>(w.mem);
  bool stalled = false;
  gc_hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_write() && !c.on_record() && !stalled) {
      stalled = true;
      collector_stalled.set_value();
      coordinator_done_f.wait();
    }
    return std::nullopt;
  };

  auto hook = std::make_shared<HookStore>(w.mem);
  std::thread collector;
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (!s.ok() || c.op != Op::kCreate || !c.on_record() || collector.joinable()) {
      return std::nullopt;
    }
    w.clock->Advance(2ms);
    collector = std::thread([&] {
      Collector gc(gc_hook, Gc(w, "gc-slow", true));
      (void)gc.RunOnce();
    });
    collector_stalled.get_future().wait();  // claimed; stalled before its first document
    return Status::Unknown("reply lost");
  };
  litetx::Database db(hook, Engine(w));
  auto r = db.Commit(Transfer());
  coordinator_done.set_value();
  collector.join();
  EXPECT_FALSE(r.ok()) << "the coordinator took back a claimed record";
  const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
  auto direct = w.Direct();
  auto first = direct->Outcome(id);
  ASSERT_TRUE(first.ok());
  w.clock->Advance(kLease * 10);
  RunCollector(w, Gc(w, "gc-healthy", false), 0);
  auto last = direct->Outcome(id);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, *first);
  EXPECT_EQ(*last, TxnOutcome::kAborted);
  EXPECT_EQ(Balance(w, "a"), 100);
  EXPECT_EQ(Balance(w, "b"), 100);
  ExpectClean(*w.mem, {"acct"});
}

// Defence in depth: if the record a collector acts for changes under it (here by a raw write
// that moves a claimed record to committed, which no litetx actor does), the collector must
// notice before its first document step instead of reversing from what it read earlier.
TEST(ClaimFinalityCollector, RevalidatesTheRecordBeforeEveryDocumentStep) {
  World w;
  SeedAccounts(w);
  // A coordinator that dies after applying both documents (3 writes: create, 2 applies).
  {
    litetx::FaultOptions fo;
    fo.crash_after_writes = 3;
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
    litetx::Database db(faulty, Engine(w));
    EXPECT_THROW((void)db.Commit(Transfer()), litetx::SimulatedCrash);
  }
  auto page = w.mem->Scan(litetx::kTransactionsCollection, "", 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->documents.size(), 1u);
  const std::string id = page->documents[0].first;

  // The collector claims; right after its claim lands the record is rewritten as committed
  // behind its back.
  auto gc_hook = std::make_shared<HookStore>(w.mem);
  bool swapped = false;
  gc_hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.is_abort_flip() && !swapped) {
      swapped = true;
      auto rec = w.mem->Get(TxnKey(id));
      EXPECT_TRUE(rec.ok() && rec->has_value());
      json::object v = (*rec)->value;
      v["state"] = "committed";
      v.erase("by");
      EXPECT_TRUE(w.mem->Replace(TxnKey(id), (*rec)->revision, v).ok());
    }
    return std::nullopt;
  };
  w.clock->Advance(kLease * 2);
  Collector gc(gc_hook, Gc(w, "gc-reval", false));
  (void)gc.RunOnce();
  ASSERT_TRUE(swapped);
  // It must have finished (the record says committed now), not reversed either document.
  EXPECT_EQ(Balance(w, "a"), 70);
  EXPECT_EQ(Balance(w, "b"), 130);
  ExpectClean(*w.mem, {"acct"});
}

}  // namespace
}  // namespace ltxtest
