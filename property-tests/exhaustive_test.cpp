// property-tests/exhaustive_test.cpp — deterministic exhaustive crash test for small sizes:
// every combination of (initial state x action type) for up to 3 documents, every coordinator
// crash point from the first write to the last; after each coordinator crash also every
// collector crash point (up to 2 x writes + 2), followed by a second, healthy collector.
#include <chrono>
#include <cstdio>

#include <gtest/gtest.h>

#include "harness.h"

namespace ptest {
namespace {
using litetx::ActionType;

constexpr Init kInits[] = {Init::kAbsent, Init::kLive, Init::kDeleted};
constexpr ActionType kTypes[] = {ActionType::kInsert, ActionType::kUpdate, ActionType::kAdjust,
                                 ActionType::kDelete, ActionType::kCheck};
constexpr int kCombosPerDoc = 3 * 5;

Scenario Combination(int docs, int index) {
  Scenario s;
  for (int d = 0; d < docs; ++d) {
    int c = index % kCombosPerDoc;
    index /= kCombosPerDoc;
    s.docs.push_back(DocSpec{kInits[c / 5], 10 + d});
    s.acts.push_back(ActSpec{kTypes[c % 5], d, 3 + d, VersionMode::kNone});
  }
  return s;
}

struct Totals {
  std::uint64_t scenarios = 0, committing = 0, cases = 0, crash_points = 0, gc_crash_points = 0;
};

void RunAll(int docs, bool gc_crashes, Totals& t) {
  int combos = 1;
  for (int d = 0; d < docs; ++d) combos *= kCombosPerDoc;
  for (int i = 0; i < combos; ++i) {
    Scenario s = Combination(docs, i);
    Oracle o = RunOracle(s);
    ++t.scenarios;
    if (o.code == litetx::Code::kOk) ++t.committing;
    for (std::uint64_t k = 1; k <= o.writes + 1; ++k) {
      std::uint64_t max_j = gc_crashes && k <= o.writes ? 2 * o.writes + 2 : 0;
      for (std::uint64_t j = 0; j <= max_j; ++j) {
        bool crashed = false;
        std::string failure = RunCrashCase(s, o, k, j, &crashed);
        ++t.cases;
        if (crashed && j == 0) ++t.crash_points;
        if (crashed && j > 0) ++t.gc_crash_points;
        ASSERT_EQ(failure, "") << s.Describe() << " crash_k=" << k << " gc_crash_j=" << j;
      }
    }
  }
}

TEST(ExhaustiveCrashTest, EveryCrashPointOfEveryActionCombination) {
  auto start = std::chrono::steady_clock::now();
  Totals t;
  RunAll(1, true, t);
  RunAll(2, true, t);
  RunAll(3, true, t);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("exhaustive: %llu scenarios (%llu commit), %llu cases, %llu coordinator crash "
              "points, %llu collector crash cases, %.1f s\n",
              static_cast<unsigned long long>(t.scenarios), static_cast<unsigned long long>(t.committing),
              static_cast<unsigned long long>(t.cases), static_cast<unsigned long long>(t.crash_points),
              static_cast<unsigned long long>(t.gc_crash_points), secs);
  EXPECT_EQ(t.scenarios, 15u + 225u + 3375u);
  EXPECT_GT(t.committing, 0u);
  EXPECT_GT(t.crash_points, 1900u);  // 1955 on this build: every write of every committing combination
  EXPECT_GT(t.gc_crash_points, 3000u);
}

// Active rollback under crashes: every committing combination of up to 3 documents is made to
// fail — at each apply in turn (the store keeps refusing that document's write) and at the
// commit flip — and the coordinator is crashed at every write of its rollback. The result
// must always be the before state, after the collector.
TEST(ExhaustiveCrashTest, EveryCrashPointOfActiveRollback) {
  auto start = std::chrono::steady_clock::now();
  std::uint64_t cases = 0, crash_points = 0, scenarios = 0;
  for (int docs = 1; docs <= 3; ++docs) {
    int combos = 1;
    for (int d = 0; d < docs; ++d) combos *= kCombosPerDoc;
    for (int i = 0; i < combos; ++i) {
      Scenario s = Combination(docs, i);
      Oracle o = RunOracle(s);
      if (o.code != litetx::Code::kOk || o.writes < 2) continue;  // needs a record
      ++scenarios;
      std::vector<int> write_docs;
      for (const ActSpec& a : s.acts) {
        if (a.type != ActionType::kCheck) write_docs.push_back(a.doc);
      }
      // failure_at: index into write_docs, or write_docs.size() for the commit flip.
      for (std::size_t failure_at = 0; failure_at <= write_docs.size(); ++failure_at) {
        for (std::uint64_t k = 1;; ++k) {
          auto clock = std::make_shared<litetx::ManualClock>();
          auto mem = std::make_shared<litetx::MemoryStore>();
          SeedStore(*mem, s, clock);
          litetx::FaultOptions f;
          f.crash_after_writes = k;
          const bool at_flip = failure_at == write_docs.size();
          const std::string doc_id = at_flip ? "" : Id(write_docs[failure_at]);
          auto record_replaces = std::make_shared<int>(0);
          const int attempts = TestOptions(clock).max_attempts;
          f.rule = [=](litetx::StoreOp op, const litetx::Key& key, std::uint64_t) {
            bool write = op == litetx::StoreOp::kCreate || op == litetx::StoreOp::kReplace;
            if (!at_flip) {
              return write && key.collection == kColl && key.id == doc_id ? litetx::Fault::kTransient
                                                                          : litetx::Fault::kNone;
            }
            // The first `attempts` record replaces are the commit flip's attempts.
            if (op == litetx::StoreOp::kReplace && key.collection == litetx::kTransactionsCollection &&
                ++*record_replaces <= attempts) {
              return litetx::Fault::kTransient;
            }
            return litetx::Fault::kNone;
          };
          auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
          bool crashed = false;
          litetx::Code code = litetx::Code::kOk;
          try {
            litetx::Database db(faulty, TestOptions(clock));
            code = db.Commit(BuildTxn(*mem, s)).code();
          } catch (const litetx::SimulatedCrash&) {
            crashed = true;
          }
          if (!crashed) {
            ASSERT_EQ(code, litetx::Code::kUnavailable) << s.Describe() << " failure_at=" << failure_at;
          }
          clock->Advance(kLease * 2);
          litetx::Collector gc(mem, TestCollectorOptions(clock));
          ASSERT_TRUE(gc.RunOnce().ok());
          ++cases;
          if (crashed) ++crash_points;
          ASSERT_EQ(CheckFinal(*mem, o, s.docs.size(), 'b'), "")
              << s.Describe() << " failure_at=" << failure_at << " crash_k=" << k;
          if (!crashed) break;  // k passed the last write of this run
        }
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rollback: %llu scenarios, %llu cases, %llu crash points during forward+rollback, %.1f s\n",
              static_cast<unsigned long long>(scenarios), static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(crash_points), secs);
  EXPECT_GT(crash_points, 1000u);
}

}  // namespace
}  // namespace ptest
