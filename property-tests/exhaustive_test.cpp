// property-tests/exhaustive_test.cpp — deterministic exhaustive crash test for small sizes.
//
// A document starts absent, live, a tombstone or a placeholder ("gone") and gets one of 12
// actions: insert; update, adjust or delete with no expected version, the right one or a
// wrong one; a check with the right or a wrong version — 48 combinations per document. The
// test runs every combination for 1 and 2 documents, and for 3 documents every combination
// on each position with committing actions on the other two (LITETX_LONG_TESTS: all 48^3).
// Every committing scenario of two or more actions is also run with another writer changing
// the last action's document just before the coordinator writes it (a check's document: just
// before the last apply), so that the transaction fails only after it has written.
//
// For every scenario: every coordinator crash point, from its first write to one past its
// last; for each, a run without a collector crash, which counts the collector's writes W,
// then a first collector crashing after each of its writes j = 1..W, and j = W+1, where it
// must not crash; a healthy collector runs last. Each case must end after if the commit point
// landed and before if it did not.
#include <chrono>
#include <cstdio>

#include <gtest/gtest.h>

#include "harness.h"

namespace ptest {
namespace {
using litetx::ActionType;
using litetx::Code;

constexpr Init kInits[] = {Init::kAbsent, Init::kLive, Init::kDeleted, Init::kGone};
struct Act {
  ActionType type;
  VersionMode version;
};
constexpr Act kActs[] = {
    {ActionType::kInsert, VersionMode::kNone},  {ActionType::kUpdate, VersionMode::kNone},
    {ActionType::kUpdate, VersionMode::kRight}, {ActionType::kUpdate, VersionMode::kWrong},
    {ActionType::kAdjust, VersionMode::kNone},  {ActionType::kAdjust, VersionMode::kRight},
    {ActionType::kAdjust, VersionMode::kWrong}, {ActionType::kDelete, VersionMode::kNone},
    {ActionType::kDelete, VersionMode::kRight}, {ActionType::kDelete, VersionMode::kWrong},
    {ActionType::kCheck, VersionMode::kRight},  {ActionType::kCheck, VersionMode::kWrong}};
constexpr int kActsPerDoc = static_cast<int>(std::size(kActs));
constexpr int kCombosPerDoc = static_cast<int>(std::size(kInits)) * kActsPerDoc;  // 48

Init InitOf(int combo) { return kInits[combo / kActsPerDoc]; }
Act ActOf(int combo) { return kActs[combo % kActsPerDoc]; }

// The precondition result of one action on its document as seeded (docs/protocol.md §1.1,
// §2.2 step 1): an insert needs no live document; the others need a live one (not found on
// an absent document or a placeholder, deleted on a tombstone) and a matching version.
Code FitCode(int combo) {
  Init init = InitOf(combo);
  Act act = ActOf(combo);
  if (act.type == ActionType::kInsert) return init == Init::kLive ? Code::kConflict : Code::kOk;
  if (init == Init::kAbsent || init == Init::kGone) return Code::kNotFound;
  if (init == Init::kDeleted) return Code::kDeleted;
  return act.version == VersionMode::kWrong ? Code::kConflict : Code::kOk;
}

// The committing combinations, used as the context of the 3-document cover.
std::vector<int> CommittingCombos() {
  std::vector<int> out;
  for (int c = 0; c < kCombosPerDoc; ++c) {
    if (FitCode(c) == Code::kOk) out.push_back(c);
  }
  return out;
}

Scenario Make(const std::vector<int>& combos) {
  Scenario s;
  for (int d = 0; d < static_cast<int>(combos.size()); ++d) {
    s.docs.push_back(DocSpec{InitOf(combos[d]), 10 + d});
    s.acts.push_back(ActSpec{ActOf(combos[d]).type, d, 3 + d, ActOf(combos[d]).version});
  }
  return s;
}

// The code the transaction must end with: the first action's failing precondition, in order.
Code ExpectedCode(const std::vector<int>& combos) {
  for (int c : combos) {
    if (Code code = FitCode(c); code != Code::kOk) return code;
  }
  return Code::kOk;
}

// The committing scenario `s` made to fail after writing: the last action's document is
// changed by another writer right before the coordinator's first write of it (for a check,
// right before the last apply), so the action's precondition fails only then. Returns the
// code the commit must then end with.
Code MakeFailAfterWrite(Scenario& s) {
  const ActSpec& last = s.acts.back();
  Interference in;
  in.target = last.doc;
  in.trigger = last.doc;
  Code code = Code::kConflict;
  if (last.type == ActionType::kCheck) {
    for (const ActSpec& a : s.acts) {
      if (a.type != ActionType::kCheck) in.trigger = a.doc;
    }
    in.kind = Interference::Kind::kBump;
  } else if (last.type == ActionType::kInsert) {
    in.kind = Interference::Kind::kLive;
  } else if (last.version == VersionMode::kRight) {
    in.kind = Interference::Kind::kBump;
  } else {
    in.kind = Interference::Kind::kTombstone;
    code = Code::kDeleted;
  }
  s.interference = in;
  return code;
}

std::uint64_t WriteActions(const Scenario& s) {
  std::uint64_t n = 0;
  for (const ActSpec& a : s.acts) n += a.type == ActionType::kCheck ? 0 : 1;
  return n;
}

// True if the scenario's transaction takes the parallel commit (TestOptions leaves it on):
// two or more writes and no checks.
bool Parallel(const Scenario& s) {
  return TestOptions(std::make_shared<litetx::ManualClock>()).parallel_commit &&
         WriteActions(s) >= 2 && WriteActions(s) == s.acts.size();
}

struct Totals {
  std::uint64_t scenarios = 0, committing = 0, failing_before_write = 0, failing_after_write = 0;
  std::uint64_t cases = 0, coordinator_crashes = 0, crashes_after_flip = 0;
  std::uint64_t collector_crashes = 0, collector_crashes_finishing = 0;
  // Derived from each scenario's oracle: what the counts above must come to.
  std::uint64_t expected_coordinator_crashes = 0, expected_after_flip = 0;
  std::uint64_t expected_collector_crashes = 0;  // sum of W over all crash points
};

// Every crash case of one scenario (see the file comment). `want` is the code it must end
// with, `after_write` whether it is a fail-after-write variant.
void RunScenario(const Scenario& s, Code want, bool after_write, Totals& t) {
  Oracle o = RunOracle(s);
  ++t.scenarios;
  const std::string where = s.Describe();
  ASSERT_EQ(litetx::CodeName(o.code), litetx::CodeName(want)) << where;
  const std::uint64_t n = WriteActions(s);
  if (o.code == Code::kOk) {
    ++t.committing;
    // The write counts of docs/protocol.md §2.2: 2N+3 with the commit flip at N+2; the
    // one-action fast path writes once (a delete twice), the document write being its commit
    // point; checks write nothing.
    if (n == 0) {
      ASSERT_EQ(o.writes, 0u) << where;
    } else if (s.acts.size() == 1) {
      // A delete sends its tombstone index entry (engine/tombstones.h) before its tombstone,
      // in the same batch: two writes, the second the commit point.
      const std::uint64_t one = s.acts[0].type == ActionType::kDelete ? 2 : 1;
      ASSERT_EQ(o.writes, one) << where;
      ASSERT_EQ(o.commit_write, one) << where;
    } else {
      ASSERT_EQ(o.writes, 2 * n + 3) << where;
      // The parallel commit is committed once its record (first) and its n applies landed;
      // the classic path at its flip, after them.
      ASSERT_EQ(o.commit_write, Parallel(s) ? n + 1 : n + 2) << where;
    }
  } else if (after_write) {
    ++t.failing_after_write;
    ASSERT_TRUE(o.interfered) << where;
    ASSERT_EQ(o.commit_write, 0u) << where;
    // Record, the applies before the changed document, mark aborted, their reversals, marker
    // (docs/protocol.md §2.6); a failed check comes after all N applies. The parallel commit
    // sends every apply with its record (the changed document's fails) and moves its record
    // from staging to pending before it looks at the failure again: one write more.
    const bool check = s.acts.back().type == ActionType::kCheck;
    ASSERT_EQ(o.writes, check ? 2 * n + 3 : 2 * (n - 1) + 3 + (Parallel(s) ? 1 : 0)) << where;
  } else {
    ++t.failing_before_write;
    ASSERT_EQ(o.writes, 0u) << where;
  }
  t.expected_coordinator_crashes += o.writes;
  if (o.commit_write != 0) t.expected_after_flip += o.writes - o.commit_write + 1;

  for (std::uint64_t k = 1; k <= o.writes + 1; ++k) {
    const std::string at = where + " crash_k=" + std::to_string(k);
    CrashReport first = RunCrashCase(s, o, CrashCase{k, 0, nullptr, nullptr});
    ++t.cases;
    ASSERT_EQ(first.failure, "") << at;
    ASSERT_EQ(first.coordinator_crashed, k <= o.writes) << at;
    ASSERT_EQ(first.commit_point, o.commit_write != 0 && o.commit_write <= k) << at;
    if (first.coordinator_crashed) {
      ++t.coordinator_crashes;
      if (first.commit_point) ++t.crashes_after_flip;
    }
    const std::uint64_t w = first.healthy_gc_writes;  // the collector's writes in this case
    t.expected_collector_crashes += w;
    for (std::uint64_t j = 1; j <= w + 1; ++j) {
      CrashReport r = RunCrashCase(s, o, CrashCase{k, j, nullptr, nullptr});
      ++t.cases;
      ASSERT_EQ(r.failure, "") << at << " gc_crash_j=" << j;
      ASSERT_EQ(r.coordinator_crashed, first.coordinator_crashed) << at;
      ASSERT_EQ(r.commit_point, first.commit_point) << at;
      ASSERT_EQ(r.gc_crashed, j <= w) << at << " gc_crash_j=" << j << " collector writes " << w;
      ASSERT_EQ(r.gc_writes, std::min(j, w)) << at << " gc_crash_j=" << j;
      if (j > w) {
        ASSERT_EQ(r.healthy_gc_writes, 0u) << at << ": the first collector left work";
      }
      if (r.gc_crashed) {
        ++t.collector_crashes;
        if (r.record == RecordSeen::kCommitted) ++t.collector_crashes_finishing;
      }
    }
  }
}

// Runs `combos` and, if it commits with a record, its fail-after-write variant.
void RunWithVariant(const std::vector<int>& combos, Totals& t) {
  Scenario s = Make(combos);
  Code want = ExpectedCode(combos);
  RunScenario(s, want, false, t);
  if (::testing::Test::HasFatalFailure()) return;
  if (want == Code::kOk && s.acts.size() >= 2 && WriteActions(s) > 0) {
    Code fail = MakeFailAfterWrite(s);
    RunScenario(s, fail, true, t);
  }
}

void Print(const char* name, const Totals& t, double secs) {
  std::printf("%s: %llu scenarios (%llu commit, %llu fail before writing, %llu fail after "
              "writing), %llu cases, %llu coordinator crashes (%llu after the commit flip), "
              "%llu collector crashes (%llu while finishing, %llu while reversing), %.1f s\n",
              name, static_cast<unsigned long long>(t.scenarios),
              static_cast<unsigned long long>(t.committing),
              static_cast<unsigned long long>(t.failing_before_write),
              static_cast<unsigned long long>(t.failing_after_write),
              static_cast<unsigned long long>(t.cases),
              static_cast<unsigned long long>(t.coordinator_crashes),
              static_cast<unsigned long long>(t.crashes_after_flip),
              static_cast<unsigned long long>(t.collector_crashes),
              static_cast<unsigned long long>(t.collector_crashes_finishing),
              static_cast<unsigned long long>(t.collector_crashes - t.collector_crashes_finishing),
              secs);
}

void CheckTotals(const Totals& t, std::uint64_t scenarios, std::uint64_t committing,
                 std::uint64_t after_write) {
  EXPECT_EQ(t.scenarios, scenarios);
  EXPECT_EQ(t.committing, committing);
  EXPECT_EQ(t.failing_after_write, after_write);
  EXPECT_EQ(t.scenarios, t.committing + t.failing_before_write + t.failing_after_write);
  EXPECT_EQ(t.coordinator_crashes, t.expected_coordinator_crashes);
  EXPECT_EQ(t.crashes_after_flip, t.expected_after_flip);
  EXPECT_EQ(t.collector_crashes, t.expected_collector_crashes);
  // Each kind of case occurs (the exact numbers are printed above).
  EXPECT_GT(t.crashes_after_flip, 0u);
  EXPECT_GT(t.coordinator_crashes, t.crashes_after_flip);
  EXPECT_GT(t.collector_crashes_finishing, 0u);
  EXPECT_GT(t.collector_crashes, t.collector_crashes_finishing);
}

// The scenarios run: every combination for 1 and 2 documents; for 3 documents all 48^3 with
// LITETX_LONG_TESTS, else each combination at each position with kContexts pairs of
// committing combinations on the other two, rotated with the combination so that every
// committing combination appears beside every position.
std::vector<std::vector<int>> Cover() {
  const std::vector<int> ctx = CommittingCombos();
  const int c = static_cast<int>(ctx.size());
  std::vector<std::vector<int>> out;
  for (int a = 0; a < kCombosPerDoc; ++a) out.push_back({a});
  for (int a = 0; a < kCombosPerDoc; ++a) {
    for (int b = 0; b < kCombosPerDoc; ++b) out.push_back({a, b});
  }
  if (LITETX_LONG_TESTS) {
    for (int a = 0; a < kCombosPerDoc; ++a) {
      for (int b = 0; b < kCombosPerDoc; ++b) {
        for (int d = 0; d < kCombosPerDoc; ++d) out.push_back({a, b, d});
      }
    }
    return out;
  }
  constexpr int kContexts = 6;
  for (int pos = 0; pos < 3; ++pos) {
    for (int v = 0; v < kCombosPerDoc; ++v) {
      for (int q = 0; q < kContexts; ++q) {
        std::vector<int> combos(3);
        int other = 0;
        for (int d = 0; d < 3; ++d) {
          if (d == pos) {
            combos[d] = v;
          } else {
            combos[d] = ctx[(v + 3 * q + 5 * other) % c];
            ++other;
          }
        }
        out.push_back(combos);
      }
    }
  }
  return out;
}

bool HasWrite(const std::vector<int>& combos) {
  for (int c : combos) {
    if (ActOf(c).type != ActionType::kCheck) return true;
  }
  return false;
}

TEST(ExhaustiveCrashTest, EveryCrashPointOfEveryActionCombination) {
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(CommittingCombos().size(), 10u);  // of the 48
  const std::vector<std::vector<int>> cover = Cover();
  // What the counts must come to, from the combinations alone.
  std::uint64_t committing = 0, variants = 0;
  for (const auto& combos : cover) {
    if (ExpectedCode(combos) != Code::kOk) continue;
    ++committing;
    if (combos.size() >= 2 && HasWrite(combos)) ++variants;
  }
  Totals t;
  for (const auto& combos : cover) {
    RunWithVariant(combos, t);
    ASSERT_FALSE(HasFatalFailure());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Print("exhaustive", t, secs);
  CheckTotals(t, cover.size() + variants, committing, variants);
}

// Active rollback under crashes: every committing scenario of 2 or 3 documents in the cover
// above is made to fail — at each apply in turn (the store keeps refusing that
// document's writes) and at the commit flip — and the coordinator is crashed at every write
// it makes, forward and rollback (counted in a run without a crash). It must report
// kUnavailable when it does not crash, never reach the commit point, and end before.
TEST(ExhaustiveCrashTest, EveryCrashPointOfActiveRollback) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<int>> all;
  for (const auto& combos : Cover()) {
    if (combos.size() >= 2 && ExpectedCode(combos) == Code::kOk) all.push_back(combos);
  }
  std::uint64_t cases = 0, crash_points = 0, expected_crash_points = 0, scenarios = 0, runs = 0;
  for (const auto& combos : all) {
    Scenario s = Make(combos);
    Oracle o = RunOracle(s);
    ASSERT_EQ(litetx::CodeName(o.code), litetx::CodeName(Code::kOk)) << s.Describe();
    std::vector<int> write_docs;
    for (const ActSpec& a : s.acts) {
      if (a.type != ActionType::kCheck) write_docs.push_back(a.doc);
    }
    if (write_docs.empty()) continue;  // checks only: nothing to roll back
    ++scenarios;
    const int attempts = TestOptions(std::make_shared<litetx::ManualClock>()).max_attempts;
    // failure_at: index into write_docs, or write_docs.size() for the commit flip.
    for (std::size_t failure_at = 0; failure_at <= write_docs.size(); ++failure_at) {
      const bool at_flip = failure_at == write_docs.size();
      // A parallel commit is committed before its flip: a failing flip rolls nothing back (it
      // is left for a resolver, which proves the commit: parallel_commit_test.cpp).
      if (at_flip && Parallel(s)) continue;
      const std::string doc_id = at_flip ? "" : Id(write_docs[failure_at]);
      auto make_rule = [&] {
        auto record_replaces = std::make_shared<int>(0);
        return [=](litetx::StoreOp op, const litetx::Key& key, std::uint64_t) {
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
      };
      const std::string where = s.Describe() + " failure_at=" + std::to_string(failure_at);
      CrashReport dry = RunCrashCase(s, o, CrashCase{0, 0, make_rule(), nullptr});
      ++runs;
      ASSERT_EQ(dry.failure, "") << where;
      ASSERT_FALSE(dry.coordinator_crashed) << where;
      ASSERT_EQ(litetx::CodeName(dry.code), litetx::CodeName(Code::kUnavailable)) << where;
      const std::uint64_t w = dry.coordinator_writes;
      ASSERT_GT(w, 0u) << where;
      expected_crash_points += w;
      for (std::uint64_t k = 1; k <= w + 1; ++k) {
        CrashReport r = RunCrashCase(s, o, CrashCase{k, 0, make_rule(), nullptr});
        ++cases;
        ASSERT_EQ(r.failure, "") << where << " crash_k=" << k;
        ASSERT_EQ(r.coordinator_crashed, k <= w) << where << " crash_k=" << k << " of " << w;
        ASSERT_FALSE(r.commit_point) << where << " crash_k=" << k;
        ASSERT_EQ(r.side, 'b') << where << " crash_k=" << k;
        if (r.coordinator_crashed) {
          ++crash_points;
        } else {
          ASSERT_EQ(litetx::CodeName(r.code), litetx::CodeName(Code::kUnavailable)) << where;
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rollback: %llu scenarios, %llu cases, %llu coordinator crashes during forward work "
              "and rollback (%llu runs without a crash counted the writes), %.1f s\n",
              static_cast<unsigned long long>(scenarios), static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(crash_points), static_cast<unsigned long long>(runs), secs);
  EXPECT_EQ(crash_points, expected_crash_points);
  EXPECT_EQ(cases, crash_points + runs);  // one case past the last write per run
}

}  // namespace
}  // namespace ptest
