// tests/stress/history_test.cpp — unit tests of the history checker (history.h): hand-made
// histories with each anomaly (lost updates, by read-modify-writers, blind writers and writers
// of unknown status; G0, G1a, G1b, G1c, G2-item; stale reads; inconsistent versions; unknown
// tokens, own writes not seen, duplicate tokens) must be reported, each as exactly that anomaly,
// and histories with only the anomalies the isolation level allows must be accepted, so the
// checker used by the stress test is shown able to fail.
#include <gtest/gtest.h>

#include "history.h"

namespace {

using stress::history::AnomalyKind;
using stress::history::Checker;
using stress::history::Level;
using stress::history::Op;
using stress::history::OpKind;
using stress::history::Report;
using stress::history::Txn;
using stress::history::TxnStatus;

// R/W with a version: a read seen at version v, a write that installed v (0: unknown).
Op R(std::string key, std::string token, std::uint64_t v = 0) { return Op{OpKind::kRead, std::move(key), std::move(token), v}; }
Op W(std::string key, std::string token, std::uint64_t v = 0) { return Op{OpKind::kWrite, std::move(key), std::move(token), v}; }
Txn T(std::string id, TxnStatus s, std::vector<Op> ops, Level level = Level::kRun, std::uint64_t start = 0,
      std::uint64_t end = 0) {
  return Txn{std::move(id), s, std::move(ops), level, start, end};
}

constexpr auto kC = TxnStatus::kCommitted;
constexpr auto kA = TxnStatus::kAborted;
constexpr auto kU = TxnStatus::kUnknown;
constexpr auto kRC = Level::kReadCommitted;
constexpr auto kSer = Level::kSerializable;

// x and y start at version 1 (tokens x0, y0).
Checker Base(Checker::Options o = {}) {
  Checker c(o);
  c.AddInitial("x", "x0", 1);
  c.AddInitial("y", "y0", 1);
  return c;
}

// The first anomaly's description, or "" if none was found.
std::string First(const Report& rep) { return rep.anomalies.empty() ? "" : rep.anomalies[0].description; }

// Exactly `n` anomalies of kind `k` and no other kind.
void ExpectOnly(const Report& rep, AnomalyKind k, std::size_t n = 1) {
  EXPECT_EQ(rep.Count(k), n) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 1u) << rep.Summary();
}

TEST(HistoryChecker, CleanHistoryPasses) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0", 1), W("x", "t1/x/1"), R("x", "t1/x/1", 1), W("x", "t1/x/2", 2)}));
  c.Add(T("t2", kA, {R("x", "t1/x/2", 2), W("x", "t2/x/1")}));  // rolled back (version 3, 4)
  c.Add(T("t3", kC, {R("x", "t1/x/2", 4), W("x", "t3/x/1", 5), R("y", "y0", 1)}));
  c.Add(T("t4", kC, {R("x", "t3/x/1", 5), R("y", "y0", 1)}, kSer));  // read-only
  c.Add(T("t5", kU, {R("y", "y0", 1), W("y", "t5/y/1")}));           // crashed; committed after all
  c.Add(T("t6", kC, {R("y", "t5/y/1", 2)}, kRC));                     // so t5 committed
  c.Add(T("t7", kC, {W("y", "t7/y/1", 3)}));                          // blind: last writer wins
  c.Add(T("t8", kU, {R("x", "t3/x/1", 5), W("x", "t8/x/1")}));        // unknown, never read: not judged
  auto rep = c.Check();
  EXPECT_TRUE(rep.ok()) << rep.Summary();
  EXPECT_EQ(rep.committed, 5u);
  EXPECT_EQ(rep.aborted, 1u);
  EXPECT_EQ(rep.unknown, 2u);
  EXPECT_EQ(rep.unknown_committed, 1u);
  EXPECT_EQ(rep.reads_checked, 7u);  // those of transactions recorded committed
  EXPECT_EQ(rep.writes, 7u);
  // x: x0 t1/x/2 t3/x/1; y: y0 t5/y/1 t7/y/1.
  EXPECT_EQ(rep.placed, 6u);
  EXPECT_EQ(rep.unplaced_writes, 0u);
  EXPECT_EQ(rep.rmw_checked, 3u);  // t1, t3 on x and t5 on y
  EXPECT_EQ(rep.ww_edges, 2u);     // t1 -> t3, t5 -> t7
  EXPECT_EQ(rep.wr_edges, 3u);     // t1 -> t3, t3 -> t4, t5 -> t6
  EXPECT_EQ(rep.rw_edges, 3u);     // t3 and t4 read y0 (t5 wrote next), t6 read t5/y/1 (t7 next)
}

TEST(HistoryChecker, AllowsWhatTheLevelAllows) {
  // Read committed: a read and then a write without the version read may lose an update.
  Checker lost = Base();
  lost.Add(T("t1", kC, {W("x", "t1/x/1", 2)}));
  lost.Add(T("t2", kC, {R("x", "x0", 1), W("x", "t2/x/1", 3)}, kRC));
  EXPECT_TRUE(lost.Check().ok()) << lost.Check().Summary();
  // Run without serializable: write skew and read skew.
  for (Level level : {kRC, Level::kRun}) {
    Checker skew = Base();
    skew.Add(T("t1", kC, {R("x", "x0", 1), R("y", "y0", 1), W("x", "t1/x/1", 2)}, level));
    skew.Add(T("t2", kC, {R("x", "x0", 1), R("y", "y0", 1), W("y", "t2/y/1", 2)}, level));
    skew.Add(T("t3", kC, {W("x", "t3/x/1", 3), W("y", "t3/y/1", 3)}));
    skew.Add(T("t4", kC, {R("x", "t1/x/1", 2), R("y", "t3/y/1", 3)}, level));
    auto rep = skew.Check();
    EXPECT_TRUE(rep.ok()) << rep.Summary();
    EXPECT_GE(rep.rw_edges, 3u) << rep.Summary();
  }
}

TEST(HistoryChecker, DetectsLostUpdateOfTwoReadModifyWriters) {
  // Without versions: both read x0 and both wrote x.
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1")}));
  c.Add(T("t2", kC, {R("x", "x0"), W("x", "t2/x/1")}));
  auto pair = c.Check();
  ExpectOnly(pair, AnomalyKind::kLostUpdate);
  EXPECT_EQ(pair.unplaced_writes, 2u);  // no version known for either write
  EXPECT_EQ(pair.unplaced_recorded, 2u);
  // With versions: t2 installed right after x0, t1 after t2 though it read x0.
  Checker v = Base();
  v.Add(T("t1", kC, {R("x", "x0", 1), W("x", "t1/x/1", 3)}));
  v.Add(T("t2", kC, {R("x", "x0", 1), W("x", "t2/x/1", 2)}));
  auto rep = v.Check();
  ExpectOnly(rep, AnomalyKind::kLostUpdate);
  EXPECT_NE(First(rep).find("t2/x/1 (t2)"), std::string::npos) << rep.Summary();
  // One of them aborted, or a read-only reader: fine.
  Checker ok = Base();
  ok.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1")}));
  ok.Add(T("t2", kA, {R("x", "x0"), W("x", "t2/x/1")}));
  ok.Add(T("t3", kC, {R("x", "x0")}));
  EXPECT_TRUE(ok.Check().ok()) << ok.Check().Summary();
}

TEST(HistoryChecker, DetectsLostUpdateByBlindWriter) {
  // t1 writes x without reading it; t2 read x0 and overwrote t1's write.
  Checker c = Base();
  c.Add(T("t1", kC, {W("x", "t1/x/1", 2)}));
  c.Add(T("t2", kC, {R("x", "x0", 1), W("x", "t2/x/1", 3)}));
  auto rep = c.Check();
  ExpectOnly(rep, AnomalyKind::kLostUpdate);
  EXPECT_EQ(rep.rmw_checked, 1u);
  // The same with t2's write first is fine (t1 is a blind last writer).
  Checker ok = Base();
  ok.Add(T("t1", kC, {W("x", "t1/x/1", 3)}));
  ok.Add(T("t2", kC, {R("x", "x0", 1), W("x", "t2/x/1", 2)}));
  EXPECT_TRUE(ok.Check().ok()) << ok.Check().Summary();
}

TEST(HistoryChecker, DetectsLostUpdateByWriterOfUnknownStatus) {
  // t1's coordinator crashed (status unknown), but t3 read t1's value: t1 committed, and t2,
  // which read x0, overwrote it.
  auto build = [](bool read_from) {
    Checker c = Base();
    c.Add(T("t1", kU, {R("x", "x0", 1), W("x", "t1/x/1")}));
    if (read_from) c.Add(T("t3", kC, {R("x", "t1/x/1", 2)}, kRC));
    c.Add(T("t2", kC, {R("x", "x0", 1), W("x", "t2/x/1", 3)}));
    return c.Check();
  };
  auto rep = build(true);
  ExpectOnly(rep, AnomalyKind::kLostUpdate);
  EXPECT_EQ(rep.unknown_committed, 1u);
  // Nobody read it: the checker cannot tell that t1 committed (a documented limit).
  auto blind = build(false);
  EXPECT_TRUE(blind.ok()) << blind.Summary();
  EXPECT_EQ(blind.unknown_committed, 0u);
}

TEST(HistoryChecker, DetectsStaleReadOfAValueLaterLost) {
  // t3 reads t1's value; t2 then read the older x0 (stale) and overwrote t1's value.
  Checker c = Base();
  c.Add(T("t1", kC, {W("x", "t1/x/1", 2)}, Level::kRun, 10, 20));
  c.Add(T("t3", kC, {R("x", "t1/x/1", 2)}, kRC, 30, 31));
  c.Add(T("t2", kC, {R("x", "x0", 1), W("x", "t2/x/1", 3)}, Level::kRun, 40, 50));
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kLostUpdate), 1u) << rep.Summary();
  EXPECT_EQ(rep.Count(AnomalyKind::kStaleRead), 1u) << rep.Summary();  // t2 started after t1 returned
  EXPECT_EQ(rep.counts.size(), 2u) << rep.Summary();
}

TEST(HistoryChecker, DetectsStaleReadInRealTime) {
  Checker c = Base();
  c.Add(T("t1", kC, {W("x", "t1/x/1", 2)}, Level::kRun, 10, 20));
  c.Add(T("t2", kC, {R("x", "x0", 1)}, kRC, 25, 26));  // began after t1 returned
  c.Add(T("t3", kC, {R("x", "x0", 1)}, kRC, 15, 30));  // overlapped t1: either value is fine
  auto rep = c.Check();
  ExpectOnly(rep, AnomalyKind::kStaleRead);
  EXPECT_EQ(rep.realtime_checked, 1u);
}

TEST(HistoryChecker, DetectsCircularInformationFlowG1c) {
  // t2 reads t1's x and writes y; t1 reads t2's y.
  Checker c = Base();
  c.Add(T("t1", kC, {W("x", "t1/x/1", 2), R("y", "t2/y/1", 2)}, kRC));
  c.Add(T("t2", kC, {R("x", "t1/x/1", 2), W("y", "t2/y/1", 2)}, kRC));
  auto rep = c.Check();
  ExpectOnly(rep, AnomalyKind::kCircularFlow);
  EXPECT_NE(First(rep).find("-wr->"), std::string::npos) << rep.Summary();
  // A cycle of a read and a later overwrite: t1 reads t2's y, t2 overwrites t1's x.
  Checker c2 = Base();
  c2.Add(T("t1", kC, {W("x", "t1/x/1", 2), R("y", "t2/y/1", 2)}, kRC));
  c2.Add(T("t2", kC, {W("y", "t2/y/1", 2), W("x", "t2/x/1", 3)}, kRC));
  ExpectOnly(c2.Check(), AnomalyKind::kCircularFlow);
}

TEST(HistoryChecker, DetectsWriteCycleG0) {
  // x: t1 then t2; y: t2 then t1.
  Checker c = Base();
  c.Add(T("t1", kC, {W("x", "t1/x/1", 2), W("y", "t1/y/1", 3)}));
  c.Add(T("t2", kC, {W("x", "t2/x/1", 3), W("y", "t2/y/1", 2)}));
  ExpectOnly(c.Check(), AnomalyKind::kWriteCycle);
}

TEST(HistoryChecker, DetectsAntiDependencyCycleG2AmongSerializable) {
  // Write skew between two serializable transactions.
  Checker skew = Base();
  skew.Add(T("t1", kC, {R("x", "x0", 1), R("y", "y0", 1), W("x", "t1/x/1", 2)}, kSer));
  skew.Add(T("t2", kC, {R("x", "x0", 1), R("y", "y0", 1), W("y", "t2/y/1", 2)}, kSer));
  ExpectOnly(skew.Check(), AnomalyKind::kAntiDependency);
  // Read skew of a serializable read-only transaction: old x, new y.
  Checker read = Base();
  read.Add(T("t1", kC, {W("x", "t1/x/1", 2), W("y", "t1/y/1", 2)}));
  read.Add(T("t2", kC, {R("x", "x0", 1), R("y", "t1/y/1", 2)}, kSer));
  ExpectOnly(read.Check(), AnomalyKind::kAntiDependency);
  // Only one of the write-skew pair serializable: the cycle needs the other's anti-dependency,
  // which its level allows.
  Checker mixed = Base();
  mixed.Add(T("t1", kC, {R("x", "x0", 1), R("y", "y0", 1), W("x", "t1/x/1", 2)}, kSer));
  mixed.Add(T("t2", kC, {R("x", "x0", 1), R("y", "y0", 1), W("y", "t2/y/1", 2)}, Level::kRun));
  EXPECT_TRUE(mixed.Check().ok()) << mixed.Check().Summary();
}

TEST(HistoryChecker, DetectsInconsistentVersions) {
  Checker same = Base();
  same.Add(T("t1", kC, {W("x", "t1/x/1", 2)}));
  same.Add(T("t2", kC, {W("x", "t2/x/1", 2)}));
  ExpectOnly(same.Check(), AnomalyKind::kVersionOrder);
  Checker below = Base();
  below.Add(T("t1", kC, {W("x", "t1/x/1", 5)}));
  below.Add(T("t2", kC, {R("x", "t1/x/1", 4)}, kRC));
  ExpectOnly(below.Check(), AnomalyKind::kVersionOrder);
  // t3 read t2's value and its write is ordered before it: also a cycle t3 -> t1 -> t2 -> t3.
  Checker before = Base();
  before.Add(T("t1", kC, {W("x", "t1/x/1", 3)}));
  before.Add(T("t2", kC, {R("x", "t1/x/1", 3), W("x", "t2/x/1", 4)}));
  before.Add(T("t3", kC, {R("x", "t2/x/1", 4), W("x", "t3/x/1", 2)}));
  auto rep = before.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kVersionOrder), 1u) << rep.Summary();
  EXPECT_EQ(rep.Count(AnomalyKind::kCircularFlow), 1u) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 2u) << rep.Summary();
}

TEST(HistoryChecker, DetectsAbortedReadG1a) {
  Checker c = Base();
  c.Add(T("t1", kA, {R("x", "x0"), W("x", "t1/x/1")}));
  c.Add(T("t2", kC, {R("x", "t1/x/1")}));
  ExpectOnly(c.Check(), AnomalyKind::kAbortedRead);
}

TEST(HistoryChecker, DetectsIntermediateReadG1b) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1"), W("x", "t1/x/2")}));
  c.Add(T("t2", kC, {R("x", "t1/x/1"), R("y", "y0")}));
  ExpectOnly(c.Check(), AnomalyKind::kIntermediateRead);
  // An intermediate write of a transaction of unknown status counts the same.
  Checker u = Base();
  u.Add(T("t1", kU, {W("x", "t1/x/1"), W("x", "t1/x/2")}));
  u.Add(T("t2", kC, {R("x", "t1/x/1")}));
  ExpectOnly(u.Check(), AnomalyKind::kIntermediateRead);
}

TEST(HistoryChecker, DetectsUnknownAndMisattributedTokens) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "made-up")}));
  c.Add(T("t2", kC, {R("x", "y0")}));  // y's initial token read from x
  c.Add(T("t3", kC, {R("y", "y0"), W("y", "t3/y/1")}));
  c.Add(T("t4", kC, {R("x", "t3/y/1")}));  // written to y, read from x
  ExpectOnly(c.Check(), AnomalyKind::kUnknownToken, 3);
}

TEST(HistoryChecker, DetectsOwnWriteNotSeenAndDuplicateTokens) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1"), R("x", "x0")}));
  c.Add(T("t2", kC, {R("y", "y0"), W("y", "dup")}));
  c.Add(T("t3", kA, {R("y", "y0"), W("y", "dup")}));
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kOwnWriteNotSeen), 1u) << rep.Summary();
  EXPECT_EQ(rep.Count(AnomalyKind::kDuplicateToken), 1u) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 2u) << rep.Summary();
}

TEST(HistoryChecker, StrictModeJudgesReadsOfAbortedTransactions) {
  auto build = [](Checker c) {
    c.Add(T("t1", kA, {R("x", "x0"), W("x", "t1/x/1")}));
    c.Add(T("t2", kA, {R("x", "t1/x/1")}));  // an aborted attempt saw aborted data
    return c.Check();
  };
  auto lax = build(Base());
  EXPECT_TRUE(lax.ok()) << lax.Summary();
  EXPECT_EQ(lax.reads_checked, 0u);
  auto strict = build(Base(Checker::Options{true, 20}));
  ExpectOnly(strict, AnomalyKind::kAbortedRead);
  EXPECT_EQ(strict.reads_checked, 2u);
}

}  // namespace
