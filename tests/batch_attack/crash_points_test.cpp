// A crash at every write of the step (FaultInjectingStore, CrashMode::kThrow), in each of the
// four modes of attack_util.h: after the crash a collector settles what was in flight (the
// clock past the lease), then new executions (a new Database, a new reader) run the step on
// the same store until it completes. Every good item's output must exist exactly once with
// its content, the poison item in a skip record, the dead letter once, the counts consistent,
// the status completed, and no transaction left behind.
#include <chrono>
#include <cstdio>

#include "attack_util.h"

namespace battack {
namespace {

using litetx::FaultInjectingStore;
using litetx::FaultOptions;
using litetx::SimulatedCrash;

struct CrashTally {
  std::uint64_t writes = 0;     // writes of the uncrashed run
  std::uint64_t points = 0;     // crash points tried
  std::uint64_t fired = 0;      // crashes that happened
  std::uint64_t reruns = 0;     // executions after the crashes
  std::uint64_t second_crashes = 0;
};

// Runs executions on rig.mem until the step completes (at most `max` of them, a collector pass
// before each); returns the report of the one that completed.
std::optional<lb::StepReport> RunToCompletion(Rig& rig, Mode mode, int max, std::uint64_t* runs,
                                              std::string* why) {
  for (int i = 0; i < max; ++i) {
    auto db = rig.Db();
    auto r = RunExec(*db, mode);
    ++*runs;
    if (r.ok() && r->status.ok()) return *r;
    *why = r.ok() ? r->status.ToString() : r.status().ToString();
    if (Status s = rig.Settle(); !s.ok()) *why += "; collector: " + s.ToString();
  }
  return std::nullopt;
}

// One crash after write `w` (and, if `w2` > 0, a second crash after write w2 of the first
// restart), then the restarts. Returns false (with a test failure) if something is wrong.
bool CrashCase(Mode mode, bool parallel, std::uint64_t w, std::uint64_t w2, CrashTally& t) {
  SCOPED_TRACE(std::string(ModeName(mode)) + (parallel ? " parallel" : " classic") +
               ", crash after write " + std::to_string(w) +
               (w2 > 0 ? ", then after write " + std::to_string(w2) + " of the restart" : ""));
  Rig rig;
  rig.parallel = parallel;
  ++t.points;
  bool fired = false;
  std::optional<lb::StepReport> done;
  {
    FaultOptions f;
    f.crash_after_writes = w;
    auto faulty = std::make_shared<FaultInjectingStore>(rig.mem, f);
    auto db = rig.Db(faulty);
    try {
      auto r = RunExec(*db, mode);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) {
        EXPECT_TRUE(r->status.ok()) << r->status.ToString();
        done = *r;
      }
    } catch (const SimulatedCrash&) {
      fired = true;
    }
    EXPECT_EQ(fired, faulty->crashed());
  }
  if (fired) {
    ++t.fired;
    Status s = rig.Settle();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (w2 > 0) {
      FaultOptions f;
      f.crash_after_writes = w2;
      auto faulty = std::make_shared<FaultInjectingStore>(rig.mem, f);
      auto db = rig.Db(faulty);
      try {
        ++t.reruns;
        auto r = RunExec(*db, mode);
        if (r.ok() && r->status.ok()) done = *r;
      } catch (const SimulatedCrash&) {
        ++t.second_crashes;
      }
      s = rig.Settle();
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    if (!done) {
      std::string why;
      done = RunToCompletion(rig, mode, 3, &t.reruns, &why);
      EXPECT_TRUE(done.has_value()) << "the step did not complete: " << why;
      if (!done) return false;
    }
  }
  auto bad = Verify(rig, mode, &*done);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  if (!bad.empty()) return false;
  // Nothing left in flight once the collector has been by.
  Status s = rig.Settle();
  EXPECT_TRUE(s.ok()) << s.ToString();
  ltxtest::ExpectClean(*rig.mem, {kOut, kDead, kState});
  return !::testing::Test::HasFailure();
}

// The writes of an uncrashed run (and a check that it ends right).
std::uint64_t CountWrites(Mode mode, bool parallel) {
  Rig rig;
  rig.parallel = parallel;
  auto faulty = std::make_shared<FaultInjectingStore>(rig.mem, FaultOptions{});
  auto db = rig.Db(faulty);
  auto r = RunExec(*db, mode);
  EXPECT_TRUE(r.ok() && r->status.ok());
  if (r.ok()) {
    auto bad = Verify(rig, mode, &*r);
    EXPECT_TRUE(bad.empty()) << Join(bad);
  }
  return faulty->writes();
}

class BatchCrashAtEveryWrite : public ::testing::TestWithParam<Mode> {};

TEST_P(BatchCrashAtEveryWrite, ThenCollectorAndRestartEndExactlyOnce) {
  const Mode mode = GetParam();
  const auto started = std::chrono::steady_clock::now();
  // Both commit paths, a crash at every write; the long run adds a second crash during the
  // first restart.
  for (bool parallel : {true, false}) {
    CrashTally t;
    t.writes = CountWrites(mode, parallel);
    ASSERT_GT(t.writes, 20u);
    // Two past the count: those must not fire (in the modes that run one thing at a time).
    for (std::uint64_t w = 1; w <= t.writes + 2; ++w) {
      if (!CrashCase(mode, parallel, w, 0, t)) return;
    }
    if (LongRun()) {
      for (std::uint64_t w = 1; w <= t.writes; w += 3) {
        for (std::uint64_t w2 = 1; w2 <= t.writes; w2 += 2) {
          if (!CrashCase(mode, parallel, w, w2, t)) return;
        }
      }
    }
    std::printf("[ crash    ] %s, %s commit: %llu writes uncrashed, %llu crash points, %llu "
                "crashes fired, %llu second crashes, %llu restarts\n",
                ModeName(mode), parallel ? "parallel" : "classic",
                static_cast<unsigned long long>(t.writes),
                static_cast<unsigned long long>(t.points),
                static_cast<unsigned long long>(t.fired),
                static_cast<unsigned long long>(t.second_crashes),
                static_cast<unsigned long long>(t.reruns));
    if (mode == Mode::kSequential || mode == Mode::kScan) {
      // One thing at a time: the run makes the same writes every time, so every point up to
      // the count fires and the two past it do not.
      EXPECT_GE(t.fired, t.writes);
      if (!LongRun()) {
        EXPECT_EQ(t.fired, t.writes);
      }
    } else {
      // Threads: the writes vary a little with the interleaving.
      EXPECT_GE(t.fired, t.writes * 9 / 10);
    }
  }
  std::printf("[ crash    ] %s: %.1f s\n", ModeName(mode),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchCrashAtEveryWrite, ::testing::ValuesIn(kModes),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return std::string(ModeName(i.param));
                         });

}  // namespace
}  // namespace battack
