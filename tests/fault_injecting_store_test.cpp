// tests/fault_injecting_store_test.cpp — tests of FaultInjectingStore
// (include/litetx/fault_injecting_store.h): pass-through, seeded determinism, transient
// faults, lost replies, rules, crashes in kThrow and kExit mode, counters and delays. Also runs
// the shared Store contract (store_contract.h) over a fault-free FaultInjectingStore.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "litetx/clock.h"
#include "litetx/counting_store.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/memory_store.h"
#include "store_contract.h"

namespace {

using litetx::Code;
using litetx::CrashMode;
using litetx::Fault;
using litetx::FaultInjectingStore;
using litetx::FaultOptions;
using litetx::Key;
using litetx::MemoryStore;
using litetx::Revision;
using litetx::SimulatedCrash;
using litetx::StoreOp;
using ltxtest::StoreContractTest;
using ltxtest::StoreFactoryName;
using ltxtest::StoreFactoryParam;
using namespace std::chrono_literals;

boost::json::object Body(int n) { return boost::json::object{{"n", n}}; }

Key K(std::string id) { return Key{"c", std::move(id)}; }

// A MemoryStore and a FaultInjectingStore over it; checks go straight to `mem`.
struct Rig {
  explicit Rig(FaultOptions options)
      : mem(std::make_shared<MemoryStore>()), store(mem, std::move(options)) {}
  std::shared_ptr<MemoryStore> mem;
  FaultInjectingStore store;

  // The document's revision in the target, or 0 if absent.
  Revision RevisionOf(const Key& key) {
    auto r = mem->Get(key);
    EXPECT_TRUE(r.ok());
    return r.ok() && r->has_value() ? (*r)->revision : 0;
  }
  // The document's "n" in the target, or -1 if absent.
  std::int64_t NOf(const Key& key) {
    auto r = mem->Get(key);
    EXPECT_TRUE(r.ok());
    return r.ok() && r->has_value() ? (*r)->value.at("n").as_int64() : -1;
  }
  // Puts a document into the target directly, bypassing the faults.
  Revision Seed(const Key& key, int n) {
    auto r = mem->Create(key, Body(n));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : 0;
  }
};

FaultOptions Probabilities(std::uint64_t seed, double transient, double lost) {
  FaultOptions o;
  o.seed = seed;
  o.transient_probability = transient;
  o.lost_reply_probability = lost;
  return o;
}

FaultOptions CrashAfter(std::uint64_t k) {
  FaultOptions o;
  o.crash_after_writes = k;
  return o;
}

FaultOptions WithRule(decltype(FaultOptions::rule) rule) {
  FaultOptions o;
  o.rule = std::move(rule);
  return o;
}

// Runs a fixed script of every operation against a fresh store and returns the codes seen.
std::vector<Code> CodesOfScript(std::uint64_t seed) {
  Rig rig(Probabilities(seed, 0.25, 0.25));
  std::vector<Code> codes;
  for (int i = 0; i < 60; ++i) {
    Key key = K("k" + std::to_string(i % 7));
    codes.push_back(rig.store.Create(key, Body(i)).code());
    codes.push_back(rig.store.Get(key).code());
    codes.push_back(rig.store.Replace(key, rig.RevisionOf(key), Body(i + 1)).code());
    codes.push_back(rig.store.Scan("c", "", 3).code());
    if (i % 3 == 0) codes.push_back(rig.store.Erase(key, rig.RevisionOf(key)).code());
  }
  return codes;
}

// ---- pass-through ----------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, PassesEverythingThroughWithoutFaults) {
  Rig rig{FaultOptions{}};
  auto created = rig.store.Create(K("a"), Body(1));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(*created, rig.RevisionOf(K("a")));

  auto got = rig.store.Get(K("a"));
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, Body(1));
  EXPECT_EQ((*got)->revision, *created);

  auto replaced = rig.store.Replace(K("a"), *created, Body(2));
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(rig.NOf(K("a")), 2);
  EXPECT_EQ(rig.store.Replace(K("a"), *created, Body(3)).code(), Code::kConflict);

  auto page = rig.store.Scan("c", "", 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->documents.size(), 1u);
  EXPECT_EQ(page->documents[0].first, "a");

  EXPECT_TRUE(rig.store.Erase(K("a"), *replaced).ok());
  EXPECT_EQ(rig.RevisionOf(K("a")), 0u);
  auto gone = rig.store.Get(K("a"));
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());

  EXPECT_EQ(rig.store.writes(), 3u);
  EXPECT_EQ(rig.store.transient_faults(), 0u);
  EXPECT_EQ(rig.store.lost_replies(), 0u);
  EXPECT_FALSE(rig.store.crashed());
}

TEST(FaultInjectingStoreTest, StoreOpNamesAreLowerCase) {
  EXPECT_STREQ(litetx::StoreOpName(StoreOp::kGet), "get");
  EXPECT_STREQ(litetx::StoreOpName(StoreOp::kCreate), "create");
  EXPECT_STREQ(litetx::StoreOpName(StoreOp::kReplace), "replace");
  EXPECT_STREQ(litetx::StoreOpName(StoreOp::kErase), "erase");
  EXPECT_STREQ(litetx::StoreOpName(StoreOp::kScan), "scan");
  EXPECT_STREQ(litetx::StoreOpName(StoreOp::kListCollections), "list_collections");
}

// ---- determinism ------------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, SameSeedGivesSameFaultSequence) {
  std::vector<Code> first = CodesOfScript(42);
  std::vector<Code> second = CodesOfScript(42);
  EXPECT_EQ(first, second);
  // The script really injected both kinds of fault and let calls through.
  EXPECT_NE(std::count(first.begin(), first.end(), Code::kUnavailable), 0);
  EXPECT_NE(std::count(first.begin(), first.end(), Code::kUnknown), 0);
  EXPECT_NE(std::count(first.begin(), first.end(), Code::kOk), 0);
}

TEST(FaultInjectingStoreTest, DifferentSeedGivesDifferentFaultSequence) {
  EXPECT_NE(CodesOfScript(42), CodesOfScript(43));
}

// ---- transient faults -------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, TransientFaultsWriteNothing) {
  Rig rig(Probabilities(7, 1.0, 0.0));
  Revision b = rig.Seed(K("b"), 5);

  EXPECT_EQ(rig.store.Create(K("a"), Body(1)).code(), Code::kUnavailable);
  EXPECT_EQ(rig.RevisionOf(K("a")), 0u) << "a transient create must not reach the target";
  EXPECT_EQ(rig.store.Replace(K("b"), b, Body(6)).code(), Code::kUnavailable);
  EXPECT_EQ(rig.store.Erase(K("b"), b).code(), Code::kUnavailable);
  EXPECT_EQ(rig.RevisionOf(K("b")), b) << "b must be untouched";
  EXPECT_EQ(rig.NOf(K("b")), 5);
  EXPECT_EQ(rig.store.Get(K("b")).code(), Code::kUnavailable);
  EXPECT_EQ(rig.store.Scan("c", "", 5).code(), Code::kUnavailable);

  EXPECT_EQ(rig.mem->Size(), 1u);
  EXPECT_EQ(rig.store.transient_faults(), 5u);
  EXPECT_EQ(rig.store.writes(), 0u);
  EXPECT_EQ(rig.store.lost_replies(), 0u);
}

// ---- lost replies -----------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, LostReplyReturnsUnknownButTheWriteLands) {
  Rig rig(Probabilities(7, 0.0, 1.0));

  EXPECT_EQ(rig.store.Create(K("a"), Body(1)).code(), Code::kUnknown);
  Revision a = rig.RevisionOf(K("a"));
  ASSERT_NE(a, 0u) << "the create must have landed";
  EXPECT_EQ(rig.NOf(K("a")), 1);

  EXPECT_EQ(rig.store.Replace(K("a"), a, Body(2)).code(), Code::kUnknown);
  EXPECT_EQ(rig.NOf(K("a")), 2);
  Revision a2 = rig.RevisionOf(K("a"));
  EXPECT_NE(a2, a);

  EXPECT_EQ(rig.store.Erase(K("a"), a2).code(), Code::kUnknown);
  EXPECT_EQ(rig.RevisionOf(K("a")), 0u) << "the erase must have landed";

  EXPECT_EQ(rig.store.lost_replies(), 3u);
  EXPECT_EQ(rig.store.writes(), 3u);
}

TEST(FaultInjectingStoreTest, ReadsNeverLoseReplies) {
  Rig rig(Probabilities(7, 0.0, 1.0));
  rig.Seed(K("a"), 1);
  auto got = rig.store.Get(K("a"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->has_value());
  auto page = rig.store.Scan("c", "", 5);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->documents.size(), 1u);
  EXPECT_EQ(rig.store.lost_replies(), 0u);
}

TEST(FaultInjectingStoreTest, LostReplyOnFailedCasReturnsTheConflict) {
  Rig rig(Probabilities(7, 0.0, 1.0));
  Revision a = rig.Seed(K("a"), 1);

  EXPECT_EQ(rig.store.Create(K("a"), Body(9)).code(), Code::kConflict);
  EXPECT_EQ(rig.store.Replace(K("a"), a + 1000, Body(9)).code(), Code::kConflict);
  EXPECT_EQ(rig.store.Erase(K("a"), a + 1000).code(), Code::kConflict);
  EXPECT_EQ(rig.store.Erase(K("absent"), 1).code(), Code::kConflict);

  EXPECT_EQ(rig.RevisionOf(K("a")), a);
  EXPECT_EQ(rig.NOf(K("a")), 1);
  EXPECT_EQ(rig.store.lost_replies(), 0u) << "no reply was lost: nothing landed";
  EXPECT_EQ(rig.store.writes(), 0u);
}

// ---- rules ------------------------------------------------------------------------------------

struct SeenCall {
  StoreOp op;
  Key key;
  std::uint64_t index;
};

TEST(FaultInjectingStoreTest, RuleSelectsExactlyOneCallByIndexOpAndKey) {
  std::vector<SeenCall> seen;
  Rig rig(WithRule([&seen](StoreOp op, const Key& key, std::uint64_t index) {
    seen.push_back({op, key, index});
    bool hit = index == 4 && op == StoreOp::kReplace && key == K("b");
    return hit ? Fault::kTransient : Fault::kNone;
  }));

  auto a = rig.store.Create(K("a"), Body(1));                      // 1
  auto b = rig.store.Create(K("b"), Body(1));                      // 2
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(rig.store.Replace(K("a"), *a, Body(2)).ok());        // 3: right op, wrong key
  EXPECT_EQ(rig.store.Replace(K("b"), *b, Body(2)).code(),         // 4: the one
            Code::kUnavailable);
  EXPECT_EQ(rig.NOf(K("b")), 1);
  EXPECT_TRUE(rig.store.Replace(K("b"), *b, Body(3)).ok());        // 5: right key, wrong index
  EXPECT_TRUE(rig.store.Get(K("b")).ok());                         // 6
  EXPECT_TRUE(rig.store.Scan("c", "", 5).ok());                    // 7

  EXPECT_EQ(rig.NOf(K("b")), 3);
  EXPECT_EQ(rig.store.transient_faults(), 1u);
  ASSERT_EQ(seen.size(), 7u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].index, i + 1);
  EXPECT_EQ(seen[0].op, StoreOp::kCreate);
  EXPECT_EQ(seen[3].op, StoreOp::kReplace);
  EXPECT_EQ(seen[5].op, StoreOp::kGet);
  EXPECT_EQ(seen[6].op, StoreOp::kScan);
  EXPECT_EQ(seen[6].key, (Key{"c", ""})) << "a scan names its collection and no id";
}

TEST(FaultInjectingStoreTest, RuleOverridesProbabilities) {
  FaultOptions o = Probabilities(7, 1.0, 0.0);
  o.rule = [](StoreOp, const Key&, std::uint64_t) { return Fault::kNone; };
  Rig rig(std::move(o));
  EXPECT_TRUE(rig.store.Create(K("a"), Body(1)).ok());
  EXPECT_EQ(rig.store.transient_faults(), 0u);
}

TEST(FaultInjectingStoreTest, RuleLostReplyOnReadIsIgnored) {
  Rig rig(WithRule([](StoreOp, const Key&, std::uint64_t) { return Fault::kLostReply; }));
  rig.Seed(K("a"), 1);
  EXPECT_TRUE(rig.store.Get(K("a")).ok());
  EXPECT_TRUE(rig.store.Scan("c", "", 5).ok());
  EXPECT_EQ(rig.store.lost_replies(), 0u);
  EXPECT_EQ(rig.store.Create(K("b"), Body(1)).code(), Code::kUnknown);
  EXPECT_EQ(rig.store.lost_replies(), 1u);
}

TEST(FaultInjectingStoreTest, ListCollectionsIsAReadTheRuleCanFailTransiently) {
  std::vector<std::pair<StoreOp, Key>> seen;
  std::mutex mu;
  Rig rig(WithRule([&](StoreOp op, const Key& key, std::uint64_t) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(op, key);
    if (op == StoreOp::kListCollections) {
      return seen.size() == 1 ? Fault::kTransient : Fault::kLostReply;
    }
    return Fault::kNone;
  }));
  rig.Seed(K("a"), 1);  // straight into the target: not a call of the rule
  auto failed = rig.store.ListCollections("", 10);  // call 1: transient
  EXPECT_EQ(failed.code(), Code::kUnavailable);
  EXPECT_EQ(rig.store.transient_faults(), 1u);
  auto listed = rig.store.ListCollections("", 10);  // call 2: a lost reply is ignored on reads
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->names, std::vector<std::string>{K("a").collection});
  EXPECT_EQ(rig.store.lost_replies(), 0u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, StoreOp::kListCollections);
  EXPECT_EQ(seen[0].second, (Key{"", ""}));
}

// ---- crashes (kThrow) -------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, CrashAfterKWritesThrowsAndKeepsExactlyKWrites) {
  Rig rig(CrashAfter(3));
  ASSERT_TRUE(rig.store.Create(K("a"), Body(1)).ok());
  ASSERT_TRUE(rig.store.Create(K("b"), Body(2)).ok());
  EXPECT_FALSE(rig.store.crashed());
  try {
    (void)rig.store.Create(K("c"), Body(3));
    FAIL() << "the third write must crash";
  } catch (const SimulatedCrash& crash) {
    EXPECT_EQ(crash.write_index(), 3u);
  }
  EXPECT_TRUE(rig.store.crashed());
  EXPECT_EQ(rig.store.writes(), 3u);
  EXPECT_EQ(rig.mem->Size(), 3u);
  EXPECT_EQ(rig.NOf(K("c")), 3) << "the crash write itself landed";
}

TEST(FaultInjectingStoreTest, EveryCallAfterTheCrashThrowsWithoutTouchingTheTarget) {
  Rig rig(CrashAfter(1));
  EXPECT_THROW((void)rig.store.Create(K("a"), Body(1)), SimulatedCrash);
  Revision a = rig.RevisionOf(K("a"));
  ASSERT_NE(a, 0u);

  auto expect_crash = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "a call after the crash returned";
    } catch (const SimulatedCrash& crash) {
      EXPECT_EQ(crash.write_index(), 1u);
    }
  };
  expect_crash([&] { (void)rig.store.Get(K("a")); });
  expect_crash([&] { (void)rig.store.Scan("c", "", 5); });
  expect_crash([&] { (void)rig.store.Create(K("b"), Body(2)); });
  expect_crash([&] { (void)rig.store.Replace(K("a"), a, Body(2)); });
  expect_crash([&] { (void)rig.store.Erase(K("a"), a); });

  EXPECT_EQ(rig.RevisionOf(K("b")), 0u);
  EXPECT_EQ(rig.RevisionOf(K("a")), a);
  EXPECT_EQ(rig.NOf(K("a")), 1);
  EXPECT_EQ(rig.store.writes(), 1u);
}

TEST(FaultInjectingStoreTest, FailedWritesDoNotCountTowardTheCrash) {
  FaultOptions o = CrashAfter(2);
  o.rule = [](StoreOp, const Key& key, std::uint64_t) {
    return key == K("t") ? Fault::kTransient : Fault::kNone;
  };
  Rig rig(std::move(o));
  auto a = rig.store.Create(K("a"), Body(1));  // write 1
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(rig.store.Create(K("a"), Body(1)).code(), Code::kConflict);
  EXPECT_EQ(rig.store.Replace(K("a"), *a + 1000, Body(2)).code(), Code::kConflict);
  EXPECT_EQ(rig.store.Erase(K("a"), *a + 1000).code(), Code::kConflict);
  EXPECT_EQ(rig.store.Create(K("t"), Body(1)).code(), Code::kUnavailable);
  EXPECT_FALSE(rig.store.crashed());
  EXPECT_EQ(rig.store.writes(), 1u);

  try {
    (void)rig.store.Replace(K("a"), *a, Body(2));  // write 2
    FAIL() << "the second landed write must crash";
  } catch (const SimulatedCrash& crash) {
    EXPECT_EQ(crash.write_index(), 2u);
  }
  EXPECT_EQ(rig.NOf(K("a")), 2);
}

TEST(FaultInjectingStoreTest, LostReplyWriteCanBeTheCrashWrite) {
  FaultOptions o = Probabilities(7, 0.0, 1.0);
  o.crash_after_writes = 1;
  Rig rig(std::move(o));
  EXPECT_THROW((void)rig.store.Create(K("a"), Body(1)), SimulatedCrash);
  EXPECT_EQ(rig.NOf(K("a")), 1);
  EXPECT_TRUE(rig.store.crashed());
}

TEST(FaultInjectingStoreTest, ArmCrashRearmsAndTheWriteCountGoesOn) {
  Rig rig(CrashAfter(1));
  EXPECT_THROW((void)rig.store.Create(K("a"), Body(1)), SimulatedCrash);
  ASSERT_TRUE(rig.store.crashed());

  rig.store.ArmCrash(3);
  EXPECT_FALSE(rig.store.crashed());
  EXPECT_TRUE(rig.store.Get(K("a")).ok());
  EXPECT_TRUE(rig.store.Create(K("b"), Body(2)).ok());  // write 2
  try {
    (void)rig.store.Create(K("c"), Body(3));  // write 3
    FAIL() << "write 3 must crash";
  } catch (const SimulatedCrash& crash) {
    EXPECT_EQ(crash.write_index(), 3u);
  }
  EXPECT_TRUE(rig.store.crashed());
  EXPECT_EQ(rig.mem->Size(), 3u);

  rig.store.ArmCrash(0);
  EXPECT_FALSE(rig.store.crashed());
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(rig.store.Create(K("d" + std::to_string(i)), Body(i)).ok());
  }
  EXPECT_FALSE(rig.store.crashed());
  EXPECT_EQ(rig.store.writes(), 8u);
}

// ---- counters ---------------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, CountersCountEachKindOfFault) {
  // Calls 1..6 get: none, transient, lost reply, transient, lost reply, none.
  Rig rig(WithRule([](StoreOp, const Key&, std::uint64_t index) {
    static constexpr Fault kPlan[] = {Fault::kNone, Fault::kTransient, Fault::kLostReply,
                                      Fault::kTransient, Fault::kLostReply, Fault::kNone};
    return index <= 6 ? kPlan[index - 1] : Fault::kNone;
  }));
  EXPECT_TRUE(rig.store.Create(K("a"), Body(1)).ok());
  EXPECT_EQ(rig.store.Create(K("b"), Body(1)).code(), Code::kUnavailable);
  EXPECT_EQ(rig.store.Create(K("c"), Body(1)).code(), Code::kUnknown);
  EXPECT_EQ(rig.store.Get(K("a")).code(), Code::kUnavailable);
  EXPECT_EQ(rig.store.Erase(K("a"), rig.RevisionOf(K("a"))).code(), Code::kUnknown);
  EXPECT_TRUE(rig.store.Scan("c", "", 5).ok());

  EXPECT_EQ(rig.store.writes(), 3u);
  EXPECT_EQ(rig.store.transient_faults(), 2u);
  EXPECT_EQ(rig.store.lost_replies(), 2u);
  EXPECT_FALSE(rig.store.crashed());
}

TEST(FaultInjectingStoreTest, CountersAreConsistentUnderConcurrency) {
  Rig rig(Probabilities(11, 0.3, 0.3));
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, unavailable{0}, unknown{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Code c = rig.store.Create(K(std::to_string(t) + "-" + std::to_string(i)), Body(i)).code();
        if (c == Code::kOk) ++ok;
        if (c == Code::kUnavailable) ++unavailable;
        if (c == Code::kUnknown) ++unknown;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok + unavailable + unknown, kThreads * kPerThread);
  EXPECT_EQ(rig.store.transient_faults(), static_cast<std::uint64_t>(unavailable));
  EXPECT_EQ(rig.store.lost_replies(), static_cast<std::uint64_t>(unknown));
  EXPECT_EQ(rig.store.writes(), static_cast<std::uint64_t>(ok + unknown));
  EXPECT_EQ(rig.mem->Size(), rig.store.writes());
}

// ---- delays -----------------------------------------------------------------------------------

TEST(FaultInjectingStoreTest, DelaysAdvanceTheClockByAtMostMaxDelayPerCall) {
  auto clock = std::make_shared<litetx::ManualClock>();
  FaultOptions o;
  o.max_delay = 40ms;
  o.clock = clock;
  Rig rig(std::move(o));

  std::int64_t total = 0;
  std::vector<std::int64_t> steps;
  for (int i = 0; i < 50; ++i) {
    std::int64_t before = clock->NowMillis();
    if (i % 2 == 0) {
      ASSERT_TRUE(rig.store.Create(K(std::to_string(i)), Body(i)).ok());
    } else {
      ASSERT_TRUE(rig.store.Get(K(std::to_string(i - 1))).ok());
    }
    std::int64_t step = clock->NowMillis() - before;
    EXPECT_GE(step, 0);
    EXPECT_LE(step, 40) << "call " << i;
    steps.push_back(step);
    total += step;
  }
  EXPECT_GT(total, 0) << "the clock never moved";
  EXPECT_NE(*std::min_element(steps.begin(), steps.end()),
            *std::max_element(steps.begin(), steps.end()))
      << "delays are random, not constant";
}

TEST(FaultInjectingStoreTest, NoDelayLeavesTheClockAlone) {
  auto clock = std::make_shared<litetx::ManualClock>();
  FaultOptions o;
  o.clock = clock;
  Rig rig(std::move(o));
  std::int64_t before = clock->NowMillis();
  ASSERT_TRUE(rig.store.Create(K("a"), Body(1)).ok());
  ASSERT_TRUE(rig.store.Get(K("a")).ok());
  EXPECT_EQ(clock->NowMillis(), before);
}

// ---- batches ----------------------------------------------------------------------------------

using litetx::BatchOp;
using litetx::BatchResult;
using litetx::CountingStore;

// A Clock whose SleepFor returns at once and counts its calls.
class SleepCountingClock final : public litetx::Clock {
 public:
  std::int64_t NowMillis() override { return 1'700'000'000'000; }
  std::int64_t MonotonicMicros() override { return 0; }
  void SleepFor(std::chrono::microseconds) override { sleeps.fetch_add(1); }
  std::atomic<int> sleeps{0};
};

// A MemoryStore behind a CountingStore behind a FaultInjectingStore: the counts show what
// reached the target and in how many calls.
struct BatchRig {
  explicit BatchRig(FaultOptions options)
      : mem(std::make_shared<MemoryStore>()),
        counting(std::make_shared<CountingStore>(mem)),
        store(counting, std::move(options)) {}
  bool Present(const Key& key) {
    auto r = mem->Get(key);
    EXPECT_TRUE(r.ok());
    return r.ok() && r->has_value();
  }
  std::shared_ptr<MemoryStore> mem;
  std::shared_ptr<CountingStore> counting;
  FaultInjectingStore store;
};

TEST(FaultInjectingStoreBatchTest, CrashInsideABatchAtEveryPositionLandsExactlyThePrefix) {
  const boost::json::object v = Body(1);
  for (std::uint64_t k = 1; k <= 4; ++k) {
    SCOPED_TRACE("crash after write " + std::to_string(k));
    BatchRig rig(CrashAfter(k));
    std::vector<BatchOp> ops;
    for (int i = 1; i <= 4; ++i) ops.push_back(BatchOp::Create(K("b" + std::to_string(i)), v));
    EXPECT_THROW((void)rig.store.Batch(ops), SimulatedCrash);
    EXPECT_TRUE(rig.store.crashed());
    EXPECT_EQ(rig.store.writes(), k);
    for (std::uint64_t i = 1; i <= 4; ++i) {
      EXPECT_EQ(rig.Present(K("b" + std::to_string(i))), i <= k) << "op " << i;
    }
    // The later operations never reached the target at all.
    EXPECT_EQ(rig.counting->counts().creates, k);
    EXPECT_THROW((void)rig.store.Batch(ops), SimulatedCrash);  // a crashed store stays crashed
    EXPECT_EQ(rig.counting->counts().creates, k);
  }
}

TEST(FaultInjectingStoreBatchTest, FailedWritesInABatchDoNotCountTowardTheCrash) {
  const boost::json::object v = Body(1);
  BatchRig rig(CrashAfter(2));
  ASSERT_TRUE(rig.mem->Create(K("taken"), v).ok());
  std::vector<BatchOp> ops{BatchOp::Create(K("a"), v), BatchOp::Create(K("taken"), v),
                           BatchOp::Get(K("a")), BatchOp::Create(K("b"), v),
                           BatchOp::Create(K("c"), v)};
  EXPECT_THROW((void)rig.store.Batch(ops), SimulatedCrash);
  EXPECT_TRUE(rig.Present(K("a")));
  EXPECT_TRUE(rig.Present(K("b")));
  EXPECT_FALSE(rig.Present(K("c")));
  EXPECT_EQ(rig.store.writes(), 2u);
}

TEST(FaultInjectingStoreBatchTest, BatchIsForwardedWholeWhenNoCrashCanFallInside) {
  const boost::json::object v = Body(1);
  BatchRig rig(CrashAfter(5));
  std::vector<BatchOp> ops;
  for (int i = 0; i < 4; ++i) ops.push_back(BatchOp::Create(K("f" + std::to_string(i)), v));
  auto res = rig.store.Batch(ops);
  ASSERT_EQ(res.size(), 4u);
  for (const BatchResult& r : res) EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(rig.counting->counts().batches, 1u);
  EXPECT_EQ(rig.counting->counts().round_trips, 1u);
  EXPECT_FALSE(rig.store.crashed());
  EXPECT_EQ(rig.store.writes(), 4u);
  // The fifth write is the crash write: now it can fall inside, and it does.
  std::vector<BatchOp> more{BatchOp::Get(K("f0")), BatchOp::Create(K("g0"), v),
                            BatchOp::Create(K("g1"), v)};
  EXPECT_THROW((void)rig.store.Batch(more), SimulatedCrash);
  EXPECT_TRUE(rig.Present(K("g0")));
  EXPECT_FALSE(rig.Present(K("g1")));
}

TEST(FaultInjectingStoreBatchTest, RuleSeesEveryOperationWithItsOwnIndex) {
  struct Seen {
    StoreOp op;
    std::string id;
    std::uint64_t index;
  };
  std::mutex mu;
  std::vector<Seen> seen;
  BatchRig rig(WithRule([&](StoreOp op, const Key& key, std::uint64_t index) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back({op, key.id, index});
    return Fault::kNone;
  }));
  auto rev = rig.mem->Create(K("r"), Body(1));
  auto rev2 = rig.mem->Create(K("e"), Body(1));
  ASSERT_TRUE(rev.ok() && rev2.ok());
  ASSERT_TRUE(rig.store.Get(K("first")).ok());  // index 1
  const boost::json::object v = Body(2);
  std::vector<BatchOp> ops{BatchOp::Get(K("g")), BatchOp::Create(K("c"), v),
                           BatchOp::Replace(K("r"), *rev, v), BatchOp::Erase(K("e"), *rev2)};
  auto res = rig.store.Batch(ops);
  for (const BatchResult& r : res) EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_TRUE(rig.store.Get(K("last")).ok());  // index 6
  ASSERT_EQ(seen.size(), 6u);
  const StoreOp want_ops[] = {StoreOp::kGet, StoreOp::kGet,     StoreOp::kCreate,
                              StoreOp::kReplace, StoreOp::kErase, StoreOp::kGet};
  const char* want_ids[] = {"first", "g", "c", "r", "e", "last"};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(seen[i].op, want_ops[i]) << i;
    EXPECT_EQ(seen[i].id, want_ids[i]) << i;
    EXPECT_EQ(seen[i].index, i + 1) << i;
  }
}

TEST(FaultInjectingStoreBatchTest, TransientAndLostReplyHitOneOperationEach) {
  BatchRig rig(WithRule([](StoreOp, const Key& key, std::uint64_t) {
    if (key.id == "t" || key.id == "tg") return Fault::kTransient;
    if (key.id == "l" || key.id == "lg") return Fault::kLostReply;  // "lg" is a read: ignored
    return Fault::kNone;
  }));
  ASSERT_TRUE(rig.mem->Create(K("lg"), Body(7)).ok());
  const boost::json::object v = Body(1);
  std::vector<BatchOp> ops{BatchOp::Create(K("a"), v), BatchOp::Create(K("t"), v),
                           BatchOp::Create(K("l"), v), BatchOp::Get(K("tg")),
                           BatchOp::Get(K("lg")), BatchOp::Create(K("z"), v)};
  auto res = rig.store.Batch(ops);
  ASSERT_EQ(res.size(), 6u);
  EXPECT_TRUE(res[0].status.ok());
  EXPECT_NE(res[0].revision, 0u);
  EXPECT_EQ(res[1].status.code(), Code::kUnavailable);
  EXPECT_EQ(res[2].status.code(), Code::kUnknown);
  EXPECT_EQ(res[3].status.code(), Code::kUnavailable);
  ASSERT_TRUE(res[4].status.ok()) << res[4].status.ToString();
  ASSERT_TRUE(res[4].document.has_value());
  EXPECT_EQ(res[4].document->value, Body(7));
  EXPECT_TRUE(res[5].status.ok());
  EXPECT_TRUE(rig.Present(K("a")));
  EXPECT_FALSE(rig.Present(K("t")));  // transient: nothing written
  EXPECT_TRUE(rig.Present(K("l")));   // lost reply: the write landed
  EXPECT_TRUE(rig.Present(K("z")));
  EXPECT_EQ(rig.store.transient_faults(), 2u);
  EXPECT_EQ(rig.store.lost_replies(), 1u);
  EXPECT_EQ(rig.store.writes(), 3u);
  // The failed operations never reached the target; the rest went in one call.
  EXPECT_EQ(rig.counting->counts().batches, 1u);
  EXPECT_EQ(rig.counting->counts().creates, 3u);
  EXPECT_EQ(rig.counting->counts().gets, 1u);
}

TEST(FaultInjectingStoreBatchTest, DelaysAreSleptOncePerBatch) {
  const boost::json::object v = Body(1);
  struct Case {
    std::chrono::microseconds round_trip, max;
    int per_call;
  };
  for (Case c : {Case{1ms, 0ms, 1}, Case{0ms, 1ms, 1}, Case{1ms, 1ms, 2}, Case{0ms, 0ms, 0}}) {
    SCOPED_TRACE("round_trip " + std::to_string(c.round_trip.count()) + "us, max " +
                 std::to_string(c.max.count()) + "us");
    auto clock = std::make_shared<SleepCountingClock>();
    FaultOptions o;
    o.round_trip_delay = c.round_trip;
    o.max_delay = c.max;
    o.clock = clock;
    BatchRig rig(std::move(o));
    std::vector<BatchOp> ops;
    for (int i = 0; i < 8; ++i) ops.push_back(BatchOp::Create(K("d" + std::to_string(i)), v));
    (void)rig.store.Batch(ops);
    EXPECT_EQ(clock->sleeps.load(), c.per_call);
    (void)rig.store.Get(K("d0"));
    EXPECT_EQ(clock->sleeps.load(), 2 * c.per_call);
    (void)rig.store.Batch({});
    EXPECT_EQ(clock->sleeps.load(), 2 * c.per_call) << "an empty batch is no round trip";
  }
}

TEST(FaultInjectingStoreBatchTest, NullValueFailsThatOperationAlone) {
  BatchRig rig(FaultOptions{});
  const boost::json::object v = Body(1);
  std::vector<BatchOp> ops{BatchOp::Create(K("a"), v), BatchOp::Create(K("n"), v),
                           BatchOp::Create(K("b"), v)};
  ops[1].value = nullptr;
  auto res = rig.store.Batch(ops);
  ASSERT_EQ(res.size(), 3u);
  EXPECT_TRUE(res[0].status.ok());
  EXPECT_EQ(res[1].status.code(), Code::kInvalidArgument);
  EXPECT_TRUE(res[2].status.ok());
  EXPECT_FALSE(rig.Present(K("n")));
  EXPECT_EQ(rig.store.writes(), 2u);
}

// ---- crashes (kExit) --------------------------------------------------------------------------

TEST(FaultInjectingStoreDeathTest, ExitModeEndsTheProcessWithTheExitCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        FaultOptions o = CrashAfter(2);
        o.crash_mode = CrashMode::kExit;
        Rig rig(std::move(o));
        if (!rig.store.Create(K("a"), Body(1)).ok()) std::_Exit(1);  // write 1: no exit yet
        (void)rig.store.Create(K("b"), Body(2));                       // write 2: exits
        std::_Exit(2);  // not reached
      },
      ::testing::ExitedWithCode(86), "");
}

TEST(FaultInjectingStoreDeathTest, ExitModeUsesTheConfiguredExitCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        FaultOptions o = CrashAfter(1);
        o.crash_mode = CrashMode::kExit;
        o.exit_code = 17;
        Rig rig(std::move(o));
        (void)rig.store.Erase(K("absent"), 1);    // a failed write: no exit
        (void)rig.store.Create(K("a"), Body(1));  // write 1: exits
        std::_Exit(2);
      },
      ::testing::ExitedWithCode(17), "");
}

// ---- Store contract ---------------------------------------------------------------------------

INSTANTIATE_TEST_SUITE_P(
    FaultFree, StoreContractTest,
    ::testing::Values(StoreFactoryParam{"FaultInjectingOverMemory",
                                        [] {
                                          return std::make_shared<FaultInjectingStore>(
                                              std::make_shared<MemoryStore>(), FaultOptions{});
                                        }}),
    StoreFactoryName);

}  // namespace
