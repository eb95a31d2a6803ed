// tests/large_crash_test.cpp — a large transaction's coordinator crashes after every one of its
// store writes in turn, for every small workload: 1..7 actions of mixed kinds (two rotations of
// the kinds), chunks of 1, 2 and 3 actions (so every chunk boundary is hit), on four paths: a
// commit that settles, a commit with settle off followed by Settle() (the commit point is then
// reported before the crash can come), a transaction whose last action fails (the
// coordinator's own rollback), and an explicit Rollback(). After each crash one collector, or
// two at once (threads, different start chunks), settle it; then (large_util.h ExpectSettled)
// the rows are all before or all after in the committed reads and in the raw store, no
// reference or record is left, Database::Outcome agrees (and with the report, if one came
// before the crash), and the purge leaves no chunk document and no marker. Which side it ends on
// is checked too: after iff the crash came at or after the commit flip's write.
//
// A second test crashes the collector as well, after each of its writes in turn, for every
// coordinator crash point of the smaller workloads, then runs a healthy collector.
//
// The first write (the record create) is crashed by dropping the handle right after BeginLarge
// returned (a crash thrown out of BeginLarge itself: LargeFailure.L1_CrashInsideBeginLarge).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "large_util.h"

namespace ltxtest::large {
namespace {

using litetx::Collector;
using litetx::FaultInjectingStore;
using litetx::FaultOptions;
using litetx::SimulatedCrash;

enum class Path { kCommit, kCommitThenSettle, kFailAtEnd, kRollback };
const char* PathName(Path p) {
  switch (p) {
    case Path::kCommit: return "commit";
    case Path::kCommitThenSettle: return "commit (settle off) then Settle()";
    case Path::kFailAtEnd: return "last action fails: rollback";
    case Path::kRollback: return "Rollback()";
  }
  return "?";
}

struct Config {
  int n = 1;
  int rotate = 0;
  std::size_t chunk = 1;
  Path path = Path::kCommit;
  std::string Describe() const {
    return std::to_string(n) + " actions (rotation " + std::to_string(rotate) + "), chunks of " +
           std::to_string(chunk) + ", " + PathName(path);
  }
};

Workload WorkloadOf(const Config& c) {
  Workload wl = Mixed(c.n, c.rotate);
  // An update of a row that does not exist: fails on its document, the transaction rolls back.
  if (c.path == Path::kFailAtEnd) wl.acts.push_back(Act{Kind::kUpdate, "missing", 0});
  return wl;
}

DriveOptions DriveOf(const Config& c) {
  DriveOptions d;
  d.txn = Chunked(c.chunk, c.path != Path::kCommitThenSettle);
  d.settle_after = c.path == Path::kCommitThenSettle;
  d.rollback_instead = c.path == Path::kRollback;
  return d;
}

// The fault-free run: its writes, and the index (from 1) of the commit flip's write (0: none).
struct Dry {
  std::uint64_t writes = 0;
  std::uint64_t flip = 0;
  Said said = Said::kNothing;
};
Dry DryRun(const Config& c, const Workload& wl) {
  LargeWorld w;
  w.Seed(wl);
  auto counter = std::make_shared<FaultInjectingStore>(w.mem, FaultOptions{});
  auto link = std::make_shared<Link>(counter);
  Dry dry;
  link->afters.push_back([&](const Call& call, const Status& s) -> std::optional<Status> {
    if (s.ok() && IsFlip(call)) dry.flip = counter->writes();
    return std::nullopt;
  });
  Drove d = Drive(w, link, wl, DriveOf(c));
  EXPECT_FALSE(d.crashed);
  dry.writes = counter->writes();
  dry.said = d.said;
  EXPECT_EQ(d.said, c.path == Path::kCommit || c.path == Path::kCommitThenSettle ? Said::kCommitted
                                                                                 : Said::kFailed)
      << c.Describe() << ": " << d.status.ToString();
  return dry;
}

// The coordinator of `wl` crashes after its k-th write (k = 1: right after BeginLarge).
Drove CrashAt(LargeWorld& w, const Config& c, const Workload& wl, std::uint64_t k) {
  DriveOptions d = DriveOf(c);
  if (k == 1) {
    d.die_after_begin = true;
    return Drive(w, w.mem, wl, d);
  }
  FaultOptions fo;
  fo.crash_after_writes = k;
  auto faulty = std::make_shared<FaultInjectingStore>(w.mem, fo);
  Drove out = Drive(w, faulty, wl, d);
  EXPECT_TRUE(out.crashed) << c.Describe() << ", crash after write " << k;
  EXPECT_TRUE(faulty->crashed());
  return out;
}

std::vector<Config> AllConfigs(int max_n) {
  std::vector<Config> out;
  for (int n = 1; n <= max_n; ++n) {
    for (int rotate : {0, 3}) {
      for (std::size_t chunk : {1, 2, 3}) {
        for (Path p : {Path::kCommit, Path::kCommitThenSettle, Path::kFailAtEnd, Path::kRollback}) {
          out.push_back(Config{n, rotate, chunk, p});
        }
      }
    }
  }
  return out;
}

TEST(LargeCrash, CoordinatorCrashAfterEveryWriteThenOneOrTwoCollectors) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t points = 0, committed = 0, aborted = 0, reported = 0, pairs = 0;
  std::uint64_t chunk_boundaries = 0;  // crash points right after a chunk document's create
  for (const Config& c : AllConfigs(7)) {
    const Workload wl = WorkloadOf(c);
    const Expect e = Plan(Mixed(c.n, c.rotate), c.chunk);
    const Dry dry = DryRun(c, wl);
    ASSERT_GT(dry.writes, 1u) << c.Describe();
    const bool commits = c.path == Path::kCommit || c.path == Path::kCommitThenSettle;
    ASSERT_EQ(dry.flip != 0, commits) << c.Describe();
    for (std::uint64_t k = 1; k <= dry.writes; ++k) {
      const std::string where = c.Describe() + ", crash after write " + std::to_string(k) + " of " +
                                std::to_string(dry.writes);
      LargeWorld w;
      w.Seed(wl);
      auto watch = std::make_shared<Link>(w.mem);  // beneath the crash: sees what landed
      std::uint64_t landed = 0;
      bool chunk_create_last = false;
      watch->afters.push_back([&](const Call& call, const Status& s) -> std::optional<Status> {
        if (s.ok() && call.is_write()) {
          ++landed;
          chunk_create_last = call.op == Op::kCreate && IsChunkKey(call) && !IsStubValue(call);
        }
        return std::nullopt;
      });
      Drove d;
      {
        DriveOptions o = DriveOf(c);
        if (k == 1) {
          o.die_after_begin = true;
          d = Drive(w, watch, wl, o);
        } else {
          FaultOptions fo;
          fo.crash_after_writes = k;
          auto faulty = std::make_shared<FaultInjectingStore>(watch, fo);
          d = Drive(w, faulty, wl, o);
        }
      }
      ASSERT_TRUE(d.crashed) << where;
      ASSERT_EQ(landed, k) << where;
      chunk_boundaries += chunk_create_last ? 1 : 0;
      // The outcome is decided by the flip: after iff it had landed.
      const bool want_after = dry.flip != 0 && k >= dry.flip;
      if (d.said == Said::kCommitted) ++reported;
      if (k % 2 == 1) {
        // Two collectors at once, starting at different chunks.
        w.clock->Advance(130s);
        Collector a(w.mem, w.Gc("gc-one")), b(w.mem, w.Gc("gc-two"));
        {
          Async ra([&] { (void)a.RunOnce(); });
          Async rb([&] { (void)b.RunOnce(); });
          ASSERT_TRUE(ra.Wait(10s) && rb.Wait(10s)) << where;
        }
        EXPECT_EQ(a.stats().failed + b.stats().failed, 0u) << where;
        EXPECT_EQ(RecordCount(*w.mem), 0u) << where << ": two collectors left a record open";
        ++pairs;
      }
      Settled s = ExpectSettled(w, e, d.id, d.said, where);
      EXPECT_EQ(s.committed, want_after) << where;
      ++points;
      (s.committed ? committed : aborted) += 1;
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "first failing case: " << where << " (" << wl.Describe() << ")";
        return;
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "[large crash] %llu coordinator crash points (%llu ended committed, %llu rolled "
      "back; %llu right after a chunk create; %llu after the commit point was reported; "
      "%llu settled by two collectors at once), %.2f s\n",
      static_cast<unsigned long long>(points), static_cast<unsigned long long>(committed),
      static_cast<unsigned long long>(aborted), static_cast<unsigned long long>(chunk_boundaries),
      static_cast<unsigned long long>(reported), static_cast<unsigned long long>(pairs), secs);
  // Every path and side occurs.
  EXPECT_GT(committed, 0u);
  EXPECT_GT(aborted, 0u);
  EXPECT_GT(reported, 0u);
  EXPECT_GT(chunk_boundaries, 0u);
}

TEST(LargeCrash, CollectorCrashAfterEveryWriteForEveryCoordinatorCrash) {
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t cases = 0, collector_points = 0;
  for (const Config& c : AllConfigs(4)) {
    if (c.rotate != 0 || c.chunk == 3 || c.path == Path::kCommitThenSettle) continue;
    const Workload wl = WorkloadOf(c);
    const Expect e = Plan(Mixed(c.n, c.rotate), c.chunk);
    const Dry dry = DryRun(c, wl);
    for (std::uint64_t k = 1; k <= dry.writes; ++k) {
      // The writes of a healthy collector after this coordinator crash.
      std::uint64_t gc_writes = 0;
      {
        LargeWorld w;
        w.Seed(wl);
        (void)CrashAt(w, c, wl, k);
        w.clock->Advance(130s);
        auto counter = std::make_shared<FaultInjectingStore>(w.mem, FaultOptions{});
        Collector gc(counter, w.Gc());
        ASSERT_TRUE(gc.RunOnce().ok());
        gc_writes = counter->writes();
      }
      for (std::uint64_t j = 1; j <= gc_writes; ++j) {
        const std::string where = c.Describe() + ", coordinator crash after write " +
                                  std::to_string(k) + ", collector crash after write " +
                                  std::to_string(j) + " of " + std::to_string(gc_writes);
        LargeWorld w;
        w.Seed(wl);
        Drove d = CrashAt(w, c, wl, k);
        w.clock->Advance(130s);
        FaultOptions fo;
        fo.crash_after_writes = j;
        auto faulty = std::make_shared<FaultInjectingStore>(w.mem, fo);
        Collector dying(faulty, w.Gc("gc-dies"));
        EXPECT_THROW((void)dying.RunOnce(), SimulatedCrash) << where;
        Settled s = ExpectSettled(w, e, d.id, d.said, where);
        EXPECT_EQ(s.committed, dry.flip != 0 && k >= dry.flip) << where;
        ++collector_points;
        if (::testing::Test::HasFailure()) {
          ADD_FAILURE() << "first failing case: " << where << " (" << wl.Describe() << ")";
          return;
        }
      }
      ++cases;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "[large crash] %llu coordinator crash points x every collector write: %llu "
      "collector crash points, %.2f s\n",
      static_cast<unsigned long long>(cases), static_cast<unsigned long long>(collector_points),
      secs);
  EXPECT_GT(collector_points, cases);
}

}  // namespace
}  // namespace ltxtest::large
