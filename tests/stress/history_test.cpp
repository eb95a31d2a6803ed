// tests/stress/history_test.cpp — unit tests of the history checker (history.h): hand-made
// histories with each anomaly (lost update, G1a, G1b, unknown token, own write not seen,
// duplicate token) must be reported, and clean ones must not, so the checker used by the
// stress test is proven able to fail.
#include <gtest/gtest.h>

#include "history.h"

namespace {

using stress::history::AnomalyKind;
using stress::history::Checker;
using stress::history::Op;
using stress::history::OpKind;
using stress::history::Txn;
using stress::history::TxnStatus;

Op R(std::string key, std::string token) { return Op{OpKind::kRead, std::move(key), std::move(token), 0}; }
Op W(std::string key, std::string token) { return Op{OpKind::kWrite, std::move(key), std::move(token), 0}; }
Txn T(std::string id, TxnStatus s, std::vector<Op> ops) { return Txn{std::move(id), s, std::move(ops)}; }

constexpr auto kC = TxnStatus::kCommitted;
constexpr auto kA = TxnStatus::kAborted;
constexpr auto kU = TxnStatus::kUnknown;

Checker Base(Checker::Options o = {}) {
  Checker c(o);
  c.AddInitial("x", "x0");
  c.AddInitial("y", "y0");
  return c;
}

TEST(HistoryChecker, CleanHistoryPasses) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1"), R("x", "t1/x/1"), W("x", "t1/x/2")}));
  c.Add(T("t2", kA, {R("x", "t1/x/2"), W("x", "t2/x/1")}));  // rolled back
  c.Add(T("t3", kC, {R("x", "t1/x/2"), W("x", "t3/x/1"), R("y", "y0")}));
  c.Add(T("t4", kC, {R("x", "t3/x/1"), R("y", "y0")}));  // read-only
  c.Add(T("t5", kU, {R("y", "y0"), W("y", "t5/y/1")}));
  c.Add(T("t6", kC, {R("y", "t5/y/1")}));  // writer's outcome unknown: not judged
  auto rep = c.Check();
  EXPECT_TRUE(rep.ok()) << rep.Summary();
  EXPECT_EQ(rep.committed, 4u);
  EXPECT_EQ(rep.aborted, 1u);
  EXPECT_EQ(rep.unknown, 1u);
  EXPECT_EQ(rep.unjudged_reads, 1u);
}

TEST(HistoryChecker, DetectsLostUpdate) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1")}));
  c.Add(T("t2", kC, {R("x", "x0"), W("x", "t2/x/1")}));
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kLostUpdate), 1u) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 1u) << rep.Summary();
  // The same pair with one of them aborted is fine, and so is a read-only reader.
  Checker ok = Base();
  ok.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1")}));
  ok.Add(T("t2", kA, {R("x", "x0"), W("x", "t2/x/1")}));
  ok.Add(T("t3", kC, {R("x", "x0")}));
  EXPECT_TRUE(ok.Check().ok()) << ok.Check().Summary();
}

TEST(HistoryChecker, DetectsAbortedReadG1a) {
  Checker c = Base();
  c.Add(T("t1", kA, {R("x", "x0"), W("x", "t1/x/1")}));
  c.Add(T("t2", kC, {R("x", "t1/x/1")}));
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kAbortedRead), 1u) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 1u) << rep.Summary();
}

TEST(HistoryChecker, DetectsIntermediateReadG1b) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1"), W("x", "t1/x/2")}));
  c.Add(T("t2", kC, {R("x", "t1/x/1"), R("y", "y0")}));
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kIntermediateRead), 1u) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 1u) << rep.Summary();
}

TEST(HistoryChecker, DetectsUnknownAndMisattributedTokens) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "made-up")}));
  c.Add(T("t2", kC, {R("x", "y0")}));  // y's initial token read from x
  c.Add(T("t3", kC, {R("y", "y0"), W("y", "t3/y/1")}));
  c.Add(T("t4", kC, {R("x", "t3/y/1")}));  // written to y, read from x
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kUnknownToken), 3u) << rep.Summary();
  EXPECT_EQ(rep.counts.size(), 1u) << rep.Summary();
}

TEST(HistoryChecker, DetectsOwnWriteNotSeenAndDuplicateTokens) {
  Checker c = Base();
  c.Add(T("t1", kC, {R("x", "x0"), W("x", "t1/x/1"), R("x", "x0")}));
  c.Add(T("t2", kC, {R("y", "y0"), W("y", "dup")}));
  c.Add(T("t3", kA, {R("y", "y0"), W("y", "dup")}));
  auto rep = c.Check();
  EXPECT_EQ(rep.Count(AnomalyKind::kOwnWriteNotSeen), 1u) << rep.Summary();
  EXPECT_EQ(rep.Count(AnomalyKind::kDuplicateToken), 1u) << rep.Summary();
}

TEST(HistoryChecker, StrictModeJudgesReadsOfAbortedTransactions) {
  auto build = [](Checker c) {
    c.Add(T("t1", kA, {R("x", "x0"), W("x", "t1/x/1")}));
    c.Add(T("t2", kA, {R("x", "t1/x/1")}));  // an aborted attempt saw aborted data
    return c.Check();
  };
  EXPECT_TRUE(build(Base()).ok());
  auto strict = build(Base(Checker::Options{true, 20}));
  EXPECT_EQ(strict.Count(AnomalyKind::kAbortedRead), 1u) << strict.Summary();
}

}  // namespace
