// property-tests/tombstone_property_test.cpp — the tombstone index (engine/tombstones.h) under
// random histories: one-write inserts and deletes, transactions of two or three actions on the
// classic or the parallel path, coordinators that crash after a random write, collectors that
// crash after a random write, and the clock moving by random steps across leases and the
// tombstone retention. Properties:
//   - never early: a document seen as a tombstone or placeholder made at T is gone only once
//     the clock has reached T + tombstone_retention; a document seen live is never gone after
//     one step (a live document is never purged);
//   - never lost: at the end, past every retention, collectors that do not sweep (they only
//     read the tombstone index) leave no tombstone or placeholder and an empty index.
// The seed is RapidCheck's (RC_PARAMS, logged by random_seed.sh; a failure prints its
// reproduce line).
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "engine/meta.h"
#include "litetx/litetx.h"
#include "litetx/fault_injecting_store.h"
#include "property-tests/harness.h"

namespace {

using litetx::Transaction;
namespace json = boost::json;

constexpr int kDocs = 3;
constexpr std::chrono::milliseconds kRetention{std::chrono::hours(1)};
const char* const kTombColl = "t";

std::string DocId(int i) { return "d" + std::to_string(i); }

// What a document was when last looked at.
struct Seen {
  enum Kind { kAbsent, kLive, kDead, kHeld } kind = kAbsent;
  std::int64_t at_ms = 0;  // kDead: its "at"
};

Seen Look(litetx::Store& store, int i) {
  auto g = store.Get(litetx::Key{kTombColl, DocId(i)});
  RC_ASSERT(g.ok());
  if (!g->has_value()) return Seen{};
  auto m = litetx::engine::DecodeMeta((*g)->value);
  RC_ASSERT(m.ok());
  if (!m->txn.empty()) return Seen{Seen::kHeld, 0};
  if (m->live()) return Seen{Seen::kLive, 0};
  return Seen{Seen::kDead, m->at_ms};
}

struct Step {
  int kind = 0;  // 0 one-write insert, 1 one-write delete, 2 transaction, 3 clock, 4 collector
  int doc = 0;
  std::vector<std::pair<int, int>> actions;  // (doc, 0 insert / 1 delete / 2 update)
  bool parallel = false;
  int crash_after = 0;  // 0: no crash
  int clock_step = 0;   // index into kClockSteps
};

const std::chrono::milliseconds kClockSteps[] = {
    std::chrono::milliseconds(1), std::chrono::seconds(11), std::chrono::minutes(30),
    std::chrono::minutes(59), std::chrono::hours(1)};

rc::Gen<Step> GenStep() {
  return rc::gen::exec([] {
    Step s;
    s.kind = *rc::gen::weightedElement<int>({{3, 0}, {4, 1}, {3, 2}, {3, 3}, {3, 4}});
    s.doc = *rc::gen::inRange(0, kDocs);
    if (s.kind == 2) {
      const int n = *rc::gen::inRange(2, 4);
      // n distinct documents: a start and a stride coprime to kDocs (3).
      const int first = *rc::gen::inRange(0, kDocs);
      const int stride = *rc::gen::element(1, 2);
      for (int k = 0; k < n; ++k) {
        s.actions.emplace_back((first + k * stride) % kDocs, *rc::gen::inRange(0, 3));
      }
      s.parallel = *rc::gen::arbitrary<bool>();
    }
    // Most steps run through; the rest crash after one of their first writes.
    s.crash_after = *rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4},
                                                     {1, 5}, {1, 7}, {1, 9}});
    s.clock_step = *rc::gen::weightedElement<int>({{1, 0}, {1, 1}, {3, 2}, {1, 3}, {1, 4}});
    return s;
  });
}

litetx::Options Engine(const std::shared_ptr<litetx::ManualClock>& clock, bool parallel) {
  litetx::Options o = ptest::TestOptions(clock);
  o.parallel_commit = parallel;
  o.finish_in_background = false;  // a crash is thrown on the committing thread
  return o;
}

// A collector that reads only the tombstone index for tombstones (no sweep).
litetx::CollectorOptions IndexOnly(const std::shared_ptr<litetx::ManualClock>& clock) {
  litetx::CollectorOptions o;
  o.engine = ptest::TestOptions(clock);
  o.name = "gc-prop";
  o.tombstone_retention = kRetention;
  o.outcome_retention = std::chrono::hours(2);
  return o;
}

void RunStep(const Step& s, const std::shared_ptr<litetx::MemoryStore>& mem,
             const std::shared_ptr<litetx::ManualClock>& clock) {
  litetx::FaultOptions f;
  f.crash_after_writes = static_cast<std::uint64_t>(s.crash_after);
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
  try {
    switch (s.kind) {
      case 0:
      case 1: {
        litetx::Database db(faulty, Engine(clock, false));
        Transaction t;
        if (s.kind == 0) {
          t.Insert(kTombColl, DocId(s.doc), json::object{{"n", 1}});
        } else {
          t.Delete(kTombColl, DocId(s.doc));
        }
        (void)db.Commit(t);
        break;
      }
      case 2: {
        litetx::Database db(faulty, Engine(clock, s.parallel));
        Transaction t;
        for (auto [d, op] : s.actions) {
          if (op == 0) t.Insert(kTombColl, DocId(d), json::object{{"n", 2}});
          if (op == 1) t.Delete(kTombColl, DocId(d));
          if (op == 2) t.Update(kTombColl, DocId(d), json::object{{"n", 3}});
        }
        (void)db.Commit(t);
        break;
      }
      case 3:
        clock->Advance(kClockSteps[s.clock_step]);
        break;
      case 4: {
        litetx::Collector gc(faulty, IndexOnly(clock));
        (void)gc.RunOnce();
        break;
      }
    }
  } catch (const litetx::SimulatedCrash&) {
    // The actor died after that write; whatever it left is the collectors'.
  }
}

RC_GTEST_PROP(TombstoneIndexProperty, NeverPurgedEarlyAndNeverLost, ()) {
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  {
    litetx::Database seed(mem, Engine(clock, false));
    for (int i = 0; i < kDocs; ++i) {
      RC_ASSERT(seed.Commit(Transaction().Insert(kTombColl, DocId(i), json::object{{"n", 0}})).ok());
    }
  }
  const auto steps = *rc::gen::container<std::vector<Step>>(*rc::gen::inRange(1, 21), GenStep());
  // The mix of what the steps made (printed by RapidCheck at the end of the run).
  int dead_seen = 0, crashes = 0;
  for (const Step& st : steps) crashes += st.crash_after != 0 && st.kind != 3 ? 1 : 0;
  std::vector<Seen> seen(kDocs);
  for (int i = 0; i < kDocs; ++i) seen[i] = Look(*mem, i);
  for (std::size_t n = 0; n < steps.size(); ++n) {
    RunStep(steps[n], mem, clock);
    const std::int64_t now = clock->NowMillis();
    for (int i = 0; i < kDocs; ++i) {
      const Seen was = seen[i];
      const Seen is = Look(*mem, i);
      if (is.kind == Seen::kAbsent) {
        // Gone since the last look: only a tombstone or placeholder whose retention had passed.
        RC_ASSERT(was.kind != Seen::kLive);
        if (was.kind == Seen::kDead) RC_ASSERT(now - was.at_ms >= kRetention.count());
      }
      dead_seen += is.kind == Seen::kDead ? 1 : 0;
      seen[i] = is;
    }
  }
  RC_CLASSIFY(dead_seen > 0, "made tombstones or placeholders");
  RC_CLASSIFY(crashes > 0, "with crashes");
  // Past every lease and retention: collectors that read only the index finish everything.
  clock->Advance(kRetention * 2 + std::chrono::minutes(1));
  for (int pass = 0; pass < 3; ++pass) {
    litetx::Collector gc(mem, IndexOnly(clock));
    RC_ASSERT(gc.RunOnce().ok());
    clock->Advance(kRetention + std::chrono::minutes(1));
  }
  for (int i = 0; i < kDocs; ++i) {
    const Seen is = Look(*mem, i);
    RC_ASSERT(is.kind != Seen::kHeld);
    if (is.kind == Seen::kDead) {
      RC_FAIL("t/" + DocId(i) + " is a tombstone or placeholder the tombstone index never purged");
    }
  }
  auto index = mem->Scan(litetx::kTombstoneIndexCollection, "", 16);
  RC_ASSERT(index.ok());
  RC_ASSERT(index->documents.empty());
}

}  // namespace
