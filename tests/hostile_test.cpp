// tests/hostile_test.cpp — adversarial tests of claim finality, dangling holds and leases.
//
// The network model is the one docs/protocol.md §6.5 and tests/dangling_test.cpp already use:
// a write may be "held in the network" (the caller gets kUnknown, nothing is written yet) and
// be delivered later, at any point, as long as its compare-and-swap still matches. Besides,
// writes may land and lose their reply, or fail with kUnavailable (nothing written).
//
// Tests marked "Regression" reproduced a defect of the engine when they were written
// and now guard its fix; the others held up from the start. Every loop is bounded.
#include <algorithm>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::DocumentState;
using litetx::Transaction;
using litetx::TxnOutcome;

// One write held in the network: delivered later straight to the target store.
struct InFlight {
  Op op = Op::kReplace;
  Key key;
  Revision expected = 0;
  json::object value;
};

void Deliver(litetx::Store& target, const InFlight& w) {
  switch (w.op) {
    case Op::kCreate: (void)target.Create(w.key, w.value); break;
    case Op::kReplace: (void)target.Replace(w.key, w.expected, w.value); break;
    case Op::kErase: (void)target.Erase(w.key, w.expected); break;
    default: break;
  }
}

InFlight Hold(const Call& c) { return InFlight{c.op, c.key, c.expected, c.value ? *c.value : json::object{}}; }

std::optional<TxnOutcome> OutcomeOf(litetx::Database& db, const std::string& id) {
  auto o = db.Outcome(id);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return o.ok() ? std::optional<TxnOutcome>(*o) : std::nullopt;
}

std::int64_t N(litetx::Database& db, const char* id) {
  auto r = db.Read("acct", id);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() && r->state == DocumentState::kFound ? r->doc.at("n").as_int64() : -1;
}

class HostileTest : public ::testing::Test, public World {
 protected:
  litetx::Options Engine() const {
    litetx::Options o = Opts();
    o.lease = 10s;
    return o;
  }
  CollectorOptions Gc() const {
    CollectorOptions o;
    o.engine = Engine();
    o.name = "gc-hostile";
    o.collections = {"acct"};
    o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    o.tombstone_retention = 0ms;
    return o;
  }
  void SetUp() override {
    auto d = Direct();
    MustCommit(*d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
    MustCommit(*d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
  }
};

// ---------------------------------------------------------------------------------------------
// Regression: the one-write fast path applied an adjust twice.
//
// The single CAS is held in the network (kUnknown to the coordinator). Its re-read finds the
// document unchanged, so the coordinator sends the write again; the held write is delivered
// just before that second send, which therefore fails with kConflict. OnePhase treats that
// conflict as "someone else changed it": it reads again and evaluates the adjust against the
// document that already carries its own first write (lw == its id), and writes it again.
// Commit returns OK and the account moved by twice the amount.
TEST_F(HostileTest, FastPathAdjustIsAppliedTwiceWhenItsDelayedWriteLandsBeforeTheResend) {
  auto hook = std::make_shared<HookStore>(mem);
  std::optional<InFlight> held;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op != Op::kReplace || c.key != Key{"acct", "a"}) return std::nullopt;
    if (c.nth == 1) {  // held in the network
      held = Hold(c);
      return Status::Unknown("reply timed out");
    }
    if (c.nth == 2 && held) Deliver(*mem, *held);  // the network delivers it now
    return std::nullopt;
  };
  litetx::Database db(hook, Engine());
  auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", 10}}));
  auto direct = Direct();
  const std::int64_t n = N(*direct, "a");
  // Commit OK => applied exactly once; an error => not applied (kUnknown: either).
  if (r.ok()) {
    EXPECT_EQ(n, 110) << "Commit returned OK but the adjust was applied " << (n - 100) / 10
                      << " times";
  } else if (r.code() != Code::kUnknown) {
    EXPECT_EQ(n, 100) << r.status().ToString();
  } else {
    EXPECT_TRUE(n == 100 || n == 110) << n;
  }
}

// Regression: the fast path reported kUnavailable ("the call had no effect; call again")
// after a lost reply it could not resolve, and the write then lands.
//
// §6.1 says an unresolvable fast-path write is kUnknown, and §6.5 says a write whose reply was
// lost can be delivered later; OnePhase instead returns kUnavailable when its retries run out
// (kUnavailable on the resends after a held first send). A caller that follows the Status
// guidance and calls again applies the adjust twice.
TEST_F(HostileTest, FastPathSaysUnavailableButItsDelayedWriteCommitsLater) {
  auto hook = std::make_shared<HookStore>(mem);
  std::optional<InFlight> held;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op != Op::kReplace || c.key != Key{"acct", "a"}) return std::nullopt;
    if (c.nth == 1) {
      held = Hold(c);
      return Status::Unknown("reply timed out");
    }
    return Status::Unavailable("store unreachable");
  };
  litetx::Database db(hook, Engine());
  auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", 10}}));
  ASSERT_FALSE(r.ok());
  ASSERT_TRUE(held.has_value());
  Deliver(*mem, *held);  // the network delivers the first send after all
  auto direct = Direct();
  const std::int64_t n = N(*direct, "a");
  if (r.code() != Code::kUnknown) {
    EXPECT_EQ(n, 100) << "Commit said " << r.status().ToString()
                      << " (not committed), but the transaction's write landed";
  }
  // What a caller told "kUnavailable: call again" does:
  if (r.code() == Code::kUnavailable) {
    ASSERT_TRUE(direct->Commit(Transaction().Adjust("acct", "a", {{"n", 10}})).ok());
    EXPECT_EQ(N(*direct, "a"), 110) << "the retried adjust was applied twice";
  }
}

// Regression: the commit flip's lost reply was forgotten once a later resend fails with
// kUnavailable, and the coordinator rolls back a transaction that commits.
//
// The flip is held in the network (kUnknown); its re-read finds the record still pending at the
// coordinator's revision, so it resends; the resends fail with kUnavailable until the retries
// run out. FlipToCommitted then returns kUnavailable (it ignores maybe_landed on that branch)
// and Commit rolls back. The held flip is delivered just before the rollback's abort write:
// the record is now committed, MarkAborted gives up, and Commit returns kUnavailable — an error
// other than kUnknown — for a transaction whose Outcome is committed (and which the collector
// then finishes).
TEST_F(HostileTest, CommitFlipHeldThenUnavailableRollsBackATransactionThatCommits) {
  auto hook = std::make_shared<HookStore>(mem);
  std::optional<InFlight> held;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_commit_point()) {
      if (!held) {
        held = Hold(c);
        return Status::Unknown("reply timed out");
      }
      return Status::Unavailable("store unreachable");
    }
    if (c.is_abort_flip() && held) Deliver(*mem, *held);  // delivered just before the abort
    return std::nullopt;
  };
  litetx::Database db(hook, Engine());
  auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}}));
  ASSERT_FALSE(r.ok());
  const std::string id = r.status().txn_id();
  auto direct = Direct();
  auto outcome = OutcomeOf(*direct, id);
  if (r.code() != Code::kUnknown) {
    EXPECT_NE(outcome, TxnOutcome::kCommitted)
        << "Commit returned " << r.status().ToString() << " but the transaction is committed";
  }
  // Whatever happened, a healthy collector must leave it all-before or all-after, matching
  // the outcome.
  clock->Advance(1h);
  Collector gc(mem, Gc());
  ASSERT_TRUE(gc.RunOnce().ok());
  ExpectClean(*mem, {"acct"});
  const std::int64_t a = N(*direct, "a"), b = N(*direct, "b");
  EXPECT_EQ(a + b, 200);
  if (r.code() != Code::kUnknown) {
    EXPECT_EQ(a, 100) << "reported " << r.status().ToString() << ", yet the transfer is applied";
  }
}

// ---------------------------------------------------------------------------------------------
// A hostile network, at random, with every actor interleaved: a bounded randomized search.
//
// Each scenario seeds a..e, runs one transaction through a store where every write may be held
// in the network (delivered later, before any later store call), lose its reply after landing,
// or fail with kUnavailable; between any two store calls of the coordinator the "scheduler" may
// deliver held writes, jump the clock past the lease and run a collector (which claims, reverses,
// fences, finishes, purges markers with outcome_retention 0 or 1 h, and sweeps dangling holds),
// or read every document. Afterwards every held write is delivered and a healthy collector
// runs. Checked: (a) Commit's result matches the final store, (b) an Outcome seen committed or
// aborted never changes, (c) the final store is all-before or all-after, (d) nothing is left
// held and no record pending, (e) no version seen by a read ever goes down, and reads see only
// the before- or the after-image, never back to before once after was seen.

struct Snapshot {
  std::map<std::string, Image> docs;
  bool operator==(const Snapshot& o) const { return docs == o.docs; }
};

const std::vector<std::string> kIds = {"a", "b", "c", "d", "e"};

Snapshot Take(litetx::Database& db, bool with_versions) {
  Snapshot s;
  for (const auto& id : kIds) {
    auto r = db.Read("acct", id);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status().ToString();
    Image i = r.ok() ? ImageOf(*r) : Image{};
    if (!with_versions) {
      i.version = 0;
      i.schema_version = 0;
    }
    s.docs[id] = i;
  }
  return s;
}

std::string Show(const Snapshot& s) {
  std::string out;
  for (const auto& [id, i] : s.docs) {
    out += id + "=" + litetx::DocumentStateName(i.state) + json::serialize(i.doc) + " ";
  }
  return out;
}

void SeedFive(litetx::Database& d) {
  MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
  MustCommit(d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
  MustCommit(d, Transaction().Insert("acct", "c", Obj(R"({"tag":"old","keep":1})")));
  MustCommit(d, Transaction().Insert("acct", "d", Obj(R"({"n":5})")));
  // e is absent.
}

Transaction Shape(int shape) {
  switch (shape) {
    case 0:  // transfer + update + delete + insert
      return Transaction()
          .Adjust("acct", "a", {{"n", -30}})
          .Adjust("acct", "b", {{"n", 30}})
          .Update("acct", "c", Obj(R"({"tag":"new"})"), {"keep"})
          .Delete("acct", "d")
          .Insert("acct", "e", Obj(R"({"n":1})"));
    case 1:  // fast path
      return Transaction().Adjust("acct", "a", {{"n", 10}});
    case 2:  // a write and a check
      return Transaction().Adjust("acct", "b", {{"n", 7}}).Check("acct", "a", V(1));
    default:  // two writes
      return Transaction().Adjust("acct", "a", {{"n", -1}}).Adjust("acct", "b", {{"n", 1}});
  }
}

struct Knobs {
  double hold = 0.0, lost = 0.0, unavailable = 0.0, deliver = 0.0, pause = 0.0, read = 0.0;
};

struct ScenarioResult {
  bool failed = false;
  std::string why;
};

// What the searches exercised (printed, for coverage).
struct Coverage {
  int committed = 0, aborted = 0, unknown = 0, claimed_by_gc = 0, dangling_undone = 0,
      delivered_late = 0;
};
Coverage g_cov;

ScenarioResult RunScenario(std::uint64_t seed, int shape, const Knobs& k) {
  ScenarioResult res;
  auto fail = [&](std::string why) {
    if (!res.failed) {
      res.failed = true;
      res.why = std::move(why);
    }
  };
  World w;
  litetx::Options opts = w.Opts();
  opts.lease = 10s;
  opts.rollback_timeout = 600s;  // virtual time: bounded even in a very hostile network
  // Half the scenarios commit in parallel (staging record written with the applies), half on
  // the classic path, four in a row each: the shape (scenario number % 4) runs in both; the
  // outcome retention alternates independently (seed % 2).
  opts.parallel_commit = (seed / 4) % 2 == 0;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);

  Snapshot before, after;
  {
    auto d = w.Direct();
    SeedFive(*d);
    before = Take(*d, false);
    World clean;
    auto cd = clean.Direct();
    SeedFive(*cd);
    auto cr = cd->Commit(Shape(shape));
    EXPECT_TRUE(cr.ok()) << cr.status().ToString();
    after = Take(*cd, false);
  }

  CollectorOptions gco;
  gco.engine = opts;
  gco.name = "gc-pause";
  gco.collections = {"acct"};
  gco.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
  gco.tombstone_retention = 0ms;
  gco.outcome_retention = (seed % 2 == 0) ? 0ms : std::chrono::milliseconds(3'600'000);
  Collector pause_gc(w.mem, gco);
  auto direct = w.Direct();

  std::vector<InFlight> network;
  std::string txn_id;
  std::optional<TxnOutcome> seen;  // committed/aborted once seen
  std::map<std::string, std::uint64_t> max_version;
  bool saw_after = false;
  bool lose_next = false;
  int depth = 0;

  auto observe = [&]() {
    if (!txn_id.empty()) {
      auto o = direct->Outcome(txn_id);
      if (o.ok() && (*o == TxnOutcome::kCommitted || *o == TxnOutcome::kAborted)) {
        if (seen && *seen != *o) fail("Outcome changed from " + std::string(TxnOutcomeName(*seen)) + " to " + TxnOutcomeName(*o));
        seen = *o;
      }
    }
  };
  auto read_all = [&]() {
    Snapshot s;
    for (const auto& id : kIds) {
      auto r = direct->Read("acct", id);
      if (!r.ok()) {
        fail("read of " + id + " failed: " + r.status().ToString());
        return;
      }
      Image i = ImageOf(*r);
      if (i.state != DocumentState::kNotFound) {
        if (i.version < max_version[id]) fail("version of " + id + " went down");
        max_version[id] = std::max(max_version[id], i.version);
      }
      i.version = 0;
      i.schema_version = 0;
      s.docs[id] = i;
    }
    // Per document: the before or the after image; once after, never before again.
    for (const auto& id : kIds) {
      const Image& i = s.docs[id];
      bool is_before = i == before.docs[id], is_after = i == after.docs[id];
      if (!is_before && !is_after) fail("read " + id + " neither before nor after: " + Show(s));
      if (is_after && !is_before) saw_after = true;
      if (saw_after && is_before && !is_after) fail("read went back to before after after: " + Show(s));
    }
  };

  auto hook = std::make_shared<HookStore>(w.mem);
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (depth > 0) return std::nullopt;
    ++depth;
    if (c.op == Op::kCreate && c.on_record() && txn_id.empty()) txn_id = c.key.id;
    // The scheduler acts between two store calls of the coordinator.
    if (!network.empty() && u(rng) < k.deliver) {
      std::size_t i = rng() % network.size();
      Deliver(*w.mem, network[i]);
      network.erase(network.begin() + static_cast<long>(i));
    }
    if (u(rng) < k.pause) {
      w.clock->Advance(opts.lease + 1s);
      (void)pause_gc.RunOnce();
    }
    if (u(rng) < k.read) read_all();
    observe();
    std::optional<Status> out;
    if (c.is_write()) {
      double x = u(rng);
      if (x < k.hold) {
        network.push_back(Hold(c));
        out = Status::Unknown("reply timed out (held in the network)");
      } else if (x < k.hold + k.lost) {
        lose_next = true;
      } else if (x < k.hold + k.lost + k.unavailable) {
        out = Status::Unavailable("injected");
      }
    }
    --depth;
    return out;
  };
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (c.is_write() && lose_next) {
      lose_next = false;
      if (s.ok()) return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };

  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  {
    litetx::Database db(hook, opts);
    r = db.Commit(Shape(shape));
  }
  if (txn_id.empty() && !r.ok()) txn_id = r.status().txn_id();
  if (txn_id.empty() && r.ok()) txn_id = r->txn_id;
  observe();
  // The network delivers everything still held, in random order; then a healthy collector.
  std::shuffle(network.begin(), network.end(), rng);
  for (const auto& f : network) Deliver(*w.mem, f);
  g_cov.delivered_late += static_cast<int>(network.size());
  network.clear();
  observe();
  read_all();
  w.clock->Advance(opts.lease * 3);
  CollectorOptions healthy = gco;
  healthy.name = "gc-healthy";
  healthy.outcome_retention = std::chrono::milliseconds(3'600'000);
  Collector gc(w.mem, healthy);
  for (int i = 0; i < 3; ++i) (void)gc.RunOnce();
  observe();
  if (r.ok()) ++g_cov.committed; else if (r.code() == Code::kUnknown) ++g_cov.unknown; else ++g_cov.aborted;
  if (r.code() == Code::kAborted) ++g_cov.claimed_by_gc;
  g_cov.dangling_undone += static_cast<int>(gc.stats().undone + pause_gc.stats().undone);
  read_all();

  // (d) nothing held, no record pending.
  for (const auto& [id, doc] : ScanAll(*w.mem, "acct")) {
    auto m = litetx::engine::DecodeMeta(doc.value);
    if (!m.ok() || !m->txn.empty() || m->deleting) fail("acct/" + id + " still held after a healthy collector");
  }
  if (RecordCount(*w.mem) != 0) fail("a record is left unsettled");
  // (c) all-before or all-after, and (a) matching the reported result and the outcome seen.
  Snapshot fin = Take(*direct, false);
  const bool is_before = fin == before, is_after = fin == after;
  if (!is_before && !is_after) fail("final store is neither all-before nor all-after: " + Show(fin));
  if (r.ok() && !is_after) fail("Commit OK but the store is not all-after");
  if (!r.ok() && r.code() != Code::kUnknown && !is_before) {
    fail("Commit returned " + r.status().ToString() + " but the store is all-after");
  }
  if (seen == TxnOutcome::kCommitted && !is_after) fail("Outcome said committed, store is not all-after");
  if (seen == TxnOutcome::kAborted && !is_before) fail("Outcome said aborted, store is not all-before");
  if (res.failed) {
    res.why = "seed " + std::to_string(seed) + " shape " + std::to_string(shape) + " result " +
              (r.ok() ? std::string("OK") : r.status().ToString()) + ": " + res.why;
  }
  return res;
}

void Search(const Knobs& k, int scenarios, std::uint64_t seed0, int max_reports = 2) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  int failures = 0;
  std::map<int, int> by_shape;
  std::map<std::string, int> kinds;
  g_cov = Coverage{};
  for (int i = 0; i < scenarios && std::chrono::steady_clock::now() < deadline; ++i) {
    const int shape = i % 4;
    ScenarioResult res = RunScenario(seed0 + static_cast<std::uint64_t>(i), shape, k);
    if (res.failed) {
      ++failures;
      if (++by_shape[shape] <= max_reports) ADD_FAILURE() << res.why;
      // Kinds of failure: the message without seed and details.
      std::string kind = res.why.substr(res.why.find(" result ") + 8);
      kind = kind.substr(0, std::min<std::size_t>(kind.size(), 60));
      ++kinds[kind];
    }
  }
  std::string shapes;
  for (auto [s, n] : by_shape) shapes += " shape" + std::to_string(s) + ":" + std::to_string(n);
  for (const auto& [kind, n] : kinds) shapes += "\n  " + std::to_string(n) + " x " + kind;
  std::printf("coverage: committed %d, failed %d (kAborted %d), kUnknown %d, dangling holds undone %d, "
              "writes delivered after Commit returned %d\n", g_cov.committed, g_cov.aborted,
              g_cov.claimed_by_gc, g_cov.unknown, g_cov.dangling_undone, g_cov.delivered_late);
  EXPECT_EQ(failures, 0) << "failing scenarios by shape:" << shapes;
}

// Regression: with held writes in the mix, shape 1 (fast path)
// ends with a reported result that does not match the store (double adjust, or kUnavailable
// for a write that lands). Everything else held: no Outcome change, no mixed state, nothing
// left held, no version down, reads never saw a non-committed image.
TEST(HostileNetwork, HeldLostAndFailedWritesWithCollectorsAndReadersBetweenAnyTwoCalls) {
  Search(Knobs{.hold = 0.12, .lost = 0.12, .unavailable = 0.08, .deliver = 0.3, .pause = 0.04,
               .read = 0.3},
         8000, 1000);
}

// Regression: a flakier store (more kUnavailable, so retries run out after a
// held write) also finds the commit flip case on the full path (shapes 0, 2, 3).
TEST(HostileNetwork, HeldWritesInAFlakyStore) {
  Search(Knobs{.hold = 0.2, .lost = 0.05, .unavailable = 0.45, .deliver = 0.5, .pause = 0.02,
               .read = 0.2},
         8000, 200'000);
}

// Held up: the same search with lost replies only (every write lands; only its reply may be
// lost), pauses past the lease with a collector, and readers between any two calls.
TEST(HostileNetwork, LostRepliesOnlyWithCollectorsAndReadersBetweenAnyTwoCalls) {
  Search(Knobs{.hold = 0.0, .lost = 0.2, .unavailable = 0.1, .deliver = 0.0, .pause = 0.05,
               .read = 0.3},
         8000, 50'000);
}

// ---------------------------------------------------------------------------------------------
// Regression: the lease keeper was one thread that renewed every transaction of a
// Database in turn, so one renewal stuck in a slow store call (here: T1's record lives on a slow
// shard) stops the renewals of every other transaction. T2 is live and only slow in its own
// apply — exactly LeaseTest.SlowButLiveCoordinatorIsNeverRolledBack, which commits alone — yet
// a collector claims it and it reports kAborted. Real clock, ~3 s.
TEST(HostileLeaseKeeper, OneSlowRenewalStarvesTheLeasesOfEveryOtherTransaction) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::Options o;  // SystemClock
  o.lease = 400ms;
  // The lease keeper renews records between a coordinator's store calls: the classic path.
  // (The parallel commit writes its record and applies in one round: no renewal between.)
  o.parallel_commit = false;
  o.busy_timeout = 3s;
  o.retry_backoff = {1ms, 10ms};
  {
    litetx::Database d(mem, o);
    for (const char* id : {"a1", "b1", "a2", "b2"}) {
      MustCommit(d, Transaction().Insert("acct", id, Obj(R"({"n":100})")));
    }
  }
  auto hook = std::make_shared<HookStore>(mem);
  std::mutex mu;
  std::string t1;  // T1's id: the transaction on a1/b1
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.value->at("actions").as_array().front().as_object().at("id") == "a1") {
      std::lock_guard<std::mutex> l(mu);
      t1 = c.key.id;
    }
    bool is_t1_renewal = false;
    {
      std::lock_guard<std::mutex> l(mu);
      is_t1_renewal = c.op == Op::kReplace && c.on_record() && c.key.id == t1 &&
                      c.record_state() == "pending";
    }
    if (is_t1_renewal) std::this_thread::sleep_for(1500ms);  // T1's record: a slow shard
    // Both transactions' second apply is slow (each coordinator is alive, its store slow).
    if (c.op == Op::kReplace && (c.key == Key{"acct", "b1"} || c.key == Key{"acct", "b2"}) && c.nth == 1) {
      std::this_thread::sleep_for(c.key.id == "b1" ? 2500ms : 1600ms);
    }
    return std::nullopt;
  };
  CollectorOptions go;
  go.engine = o;
  go.engine.renew_leases = false;
  go.name = "gc-beside";
  go.interval = 10ms;
  Collector gc(mem, go);
  gc.Start();
  litetx::Database db(hook, o);
  litetx::Result<litetx::CommitInfo> r1 = Status::Unavailable(""), r2 = Status::Unavailable("");
  std::thread th1([&] {
    r1 = db.Commit(Transaction().Adjust("acct", "a1", {{"n", -1}}).Adjust("acct", "b1", {{"n", 1}}));
  });
  std::this_thread::sleep_for(300ms);  // T1's first renewal is due at ~100-200 ms and sticks
  std::thread th2([&] {
    r2 = db.Commit(Transaction().Adjust("acct", "a2", {{"n", -1}}).Adjust("acct", "b2", {{"n", 1}}));
  });
  th1.join();
  th2.join();
  gc.Stop();
  EXPECT_TRUE(r2.ok()) << "T2 (live; its renewals were stuck behind T1's slow renewal): "
                       << r2.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Exotic inputs.

// A version at 2^64-1 (a hand-made or very old document) must not wrap to 0 on the next write
// (versions would go down, and an expected_version of 0 would match): the write is refused.
TEST_F(HostileTest, VersionAtTheTopOfTheRangeWrapsToZero) {
  PutMeta(*mem, {"acct", "top"}, Obj(R"({"n":1})"), LiveMeta(std::numeric_limits<std::uint64_t>::max()));
  auto d = Direct();
  auto r = d->Commit(Transaction().Adjust("acct", "top", {{"n", 1}}));
  EXPECT_EQ(r.code(), Code::kFailedPrecondition) << "the version would wrap from 2^64-1 to 0";
  EXPECT_EQ(MetaOf(*mem, "acct", "top").version, std::numeric_limits<std::uint64_t>::max());
  // Through a record as well, and nothing is written.
  auto r2 = d->Commit(Transaction().Adjust("acct", "top", {{"n", 1}}).Adjust("acct", "a", {{"n", 1}}));
  EXPECT_EQ(r2.code(), Code::kFailedPrecondition);
  EXPECT_EQ(MetaOf(*mem, "acct", "top").version, std::numeric_limits<std::uint64_t>::max());
}

// Held up: undo data cannot be forged through user input: a field named "_ltx", "_ltx.u" or
// "_ltxu" is rejected for inserts, updates (set and unset), adjusts and Run.
TEST_F(HostileTest, ReservedFieldsCannotBeWrittenByUsers) {
  auto d = Direct();
  for (const char* f : {"_ltx", "_ltx.u", "_ltxu", "_ltx_"}) {
    json::object o;
    o[f] = json::object{{"u", json::object{{"p", "absent"}, {"pv", 0}, {"psv", 0}}}};
    EXPECT_EQ(d->Commit(Transaction().Insert("acct", "x", o)).code(), Code::kInvalidArgument) << f;
    EXPECT_EQ(d->Commit(Transaction().Update("acct", "a", o)).code(), Code::kInvalidArgument) << f;
    EXPECT_EQ(d->Commit(Transaction().Update("acct", "a", {}, {f})).code(), Code::kInvalidArgument) << f;
    EXPECT_EQ(d->Commit(Transaction().Adjust("acct", "a", {{f, 1}})).code(), Code::kInvalidArgument) << f;
    auto run = d->Run([&](litetx::TxnContext& ctx) { return ctx.Insert("acct", "y", o); });
    EXPECT_FALSE(run.ok()) << f;
  }
  EXPECT_EQ(d->Commit(Transaction().Insert("__litetx.txn", "x", Obj(R"({"state":"committed"})"))).code(),
            Code::kInvalidArgument);
  ExpectClean(*mem, {"acct"});
}

// A hold with malformed undo data (wrong types, unknown prior, a restore of the reserved field)
// whose record is gone: readers, writers and the sweep report corruption or read through, and
// never loop. Held up for every case but the last one:
// Regression: undo data whose restore names
// "_ltx" is returned by a read-committed read as a user field "_ltx" (PreImage copies restore
// keys without the reserved-name check; UndoOf does not reject them). The writer's undo is
// safe (MakeStored drops it).
TEST_F(HostileTest, MalformedUndoDataOnADanglingHold) {
  const std::vector<json::value> bad = {
      json::value("x"),
      json::object{{"p", "martian"}, {"pv", 1}, {"psv", 1}},
      json::object{{"p", "live"}, {"pv", -1}, {"psv", 1}},
      json::object{{"p", "live"}, {"pv", 1}, {"psv", 1}, {"r", json::array{}}},
      json::object{{"p", "live"}, {"pv", 1}, {"psv", 1}, {"m", json::array{1}}},
      json::object{{"p", "live"}, {"pv", 1}, {"psv", 1},
                   {"r", json::object{{"_ltx", json::object{{"v", 9}, {"sv", 1}, {"tx", "zz"}}}}}},
  };
  int i = 0;
  for (const auto& u : bad) {
    const Key key{"acct", "bad" + std::to_string(i++)};
    auto m = LiveMeta(2);
    m.txn = "feedfacefeedfacefeedface";
    json::object doc = litetx::engine::MakeStored(Obj(R"({"n":3})"), m);
    doc["_ltx"].as_object()["u"] = u;
    PutRaw(*mem, key, doc);
    auto d = Direct();
    auto rr = d->Read(key.collection, key.id);
    if (rr.ok()) {
      EXPECT_FALSE(rr->doc.contains("_ltx")) << key.id << ": a reserved field read as a user field";
    } else {
      EXPECT_EQ(rr.code(), Code::kCorruption) << key.id << rr.status().ToString();
    }
    auto w = d->Commit(Transaction().Adjust("acct", key.id, {{"n", 1}}));
    if (w.ok()) {
      auto stored = Raw(*mem, key);
      ASSERT_TRUE(stored);
      auto meta = litetx::engine::DecodeMeta(*stored);
      ASSERT_TRUE(meta.ok()) << key.id << ": " << meta.status().ToString();
      EXPECT_EQ(meta->txn, "") << key.id;
    } else {
      EXPECT_EQ(w.code(), Code::kCorruption) << key.id << w.status().ToString();
    }
  }
  Collector gc(mem, Gc());
  (void)gc.RunOnce();  // must terminate; failures counted
  SUCCEED();
}

// Held up: huge and negative timestamps in hand-made records neither crash nor stall a
// collector, a reader or a writer.
TEST_F(HostileTest, RecordsWithExtremeTimestamps) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  const std::int64_t small = std::numeric_limits<std::int64_t>::min();
  int i = 0;
  for (auto [created, gc_at] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {big, big}, {small, small}, {small, big}, {big, small}, {0, -1}}) {
    const std::string txn = "00000000000000000000000" + std::to_string(i);
    const Key key{"acct", "x" + std::to_string(i++)};
    HoldLive(*mem, key, Obj(R"({"n":1})"), 5, txn, 0);
    json::object rec = *Raw(*mem, TxnKey(txn));
    rec["created"] = created;
    rec["gc_at"] = gc_at;
    PutRaw(*mem, TxnKey(txn), rec);
    auto d = Direct();
    auto rr = d->Read("acct", key.id);
    EXPECT_TRUE(rr.ok()) << rr.status().ToString();
  }
  Collector gc(mem, Gc());
  (void)gc.RunOnce();
  (void)gc.RunOnce();
  SUCCEED();
}

// ---------------------------------------------------------------------------------------------
// Lease keeper races (held up).

// A renewal racing the commit flip: the keeper's period is tiny and the virtual clock jumps
// past a quarter of the lease between every store call, so a renewal is due all the time. The
// flip, the rollback and the marker must never be overwritten by a renewal, and the reported
// result must match the outcome. Bounded: 200 transactions.
TEST(HostileLeaseKeeperRace, RenewalsDueAtEveryCallNeverUndoTheFlipOrTheRollback) {
  World w;
  litetx::Options o = w.Opts();
  o.renew_leases = true;
  o.lease = 40ms;  // keeper period 10 ms real time; virtual clock moves 15 ms per call
  {
    auto d = w.Direct();
    MustCommit(*d, Transaction().Insert("acct", "a", Obj(R"({"n":1000})")));
    MustCommit(*d, Transaction().Insert("acct", "b", Obj(R"({"n":1000})")));
  }
  auto hook = std::make_shared<HookStore>(w.mem);
  std::atomic<int> calls{0};
  std::mt19937 rng(7);
  std::mutex rng_mu;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    ++calls;
    w.clock->Advance(15ms);
    if (c.on_record() && c.op == Op::kReplace) {
      std::lock_guard<std::mutex> l(rng_mu);
      if (rng() % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 12));
    }
    return std::nullopt;
  };
  hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    std::lock_guard<std::mutex> l(rng_mu);
    if (c.is_write() && s.ok() && rng() % 7 == 0) return Status::Unknown("reply lost");
    return std::nullopt;
  };
  litetx::Database db(hook, o);
  auto direct = w.Direct();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (int i = 0; i < 200 && std::chrono::steady_clock::now() < deadline; ++i) {
    auto r = db.Commit(Transaction().Adjust("acct", "a", {{"n", -1}}).Adjust("acct", "b", {{"n", 1}}));
    const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
    auto out = direct->Outcome(id);
    ASSERT_TRUE(out.ok());
    if (r.ok()) {
      EXPECT_EQ(*out, TxnOutcome::kCommitted) << i;
    }
    if (!r.ok() && r.code() != Code::kUnknown) {
      EXPECT_NE(*out, TxnOutcome::kCommitted) << i << r.status().ToString();
    }
    auto a = direct->Read("acct", "a");
    auto b = direct->Read("acct", "b");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->doc.at("n").as_int64() + b->doc.at("n").as_int64(), 2000) << i;
  }
}

// A Run holding a pessimistic lock, its lock renewal running in the background, while the
// Database is used from other threads and the Run ends with the renewal possibly mid-call:
// under ASan (-DLITETX_SANITIZE=address) no use after free. Bounded: 100 runs.
TEST(HostileLeaseKeeperRace, LockRenewalEndingWithTheRun) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::Options o;
  o.lease = 8ms;  // keeper period 2 ms
  o.busy_timeout = 2s;
  o.retry_backoff = {1ms, 2ms};
  {
    litetx::Database d(mem, o);
    MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":0})")));
  }
  for (int i = 0; i < 100; ++i) {
    auto db = std::make_unique<litetx::Database>(mem, o);
    litetx::RunOptions ro;
    ro.lock_lease = 8ms;
    auto r = db->Run(
        [&](litetx::TxnContext& ctx) {
          if (Status s = ctx.Lock("acct", "a", litetx::LockMode::kWrite); !s.ok()) return s;
          std::this_thread::sleep_for(std::chrono::microseconds(500 * (i % 7)));
          return ctx.Adjust("acct", "a", {{"n", 1}});
        },
        ro);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    db.reset();  // the Database (and its keeper) goes right after the Run
  }
  litetx::Database d(mem, o);
  EXPECT_EQ(N(d, "a"), 100);
}

// A keeper renewal that throws SimulatedCrash (the store "dies" during a background renewal):
// the exception is contained on the keeper thread, the coordinator sees the crashed store at
// its next call, and a healthy collector leaves all-before or all-after.
TEST(HostileLeaseKeeperRace, SimulatedCrashInsideABackgroundRenewal) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto mem = std::make_shared<litetx::MemoryStore>();
    auto clock = std::make_shared<litetx::ManualClock>();
    litetx::Options o;
    o.clock = clock;
    o.lease = 40ms;
    o.busy_timeout = 50ms;
    {
      litetx::Database d(mem, o);
      MustCommit(d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
      MustCommit(d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
    }
    litetx::FaultOptions fo;
    fo.crash_mode = litetx::CrashMode::kThrow;
    auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, fo);
    auto hook = std::make_shared<HookStore>(faulty);
    std::atomic<bool> crash_armed{false};
    hook->before = [&](const Call& c) -> std::optional<Status> {
      // Hold the coordinator in its apply of b (real time) while renewals come due.
      if (c.op == Op::kReplace && c.key == Key{"acct", "b"} && c.nth == 1) {
        clock->Advance(35ms);
        crash_armed = true;
        faulty->ArmCrash(faulty->writes() + 1);  // the next write (a renewal) is the crash
        for (int i = 0; i < 100 && !faulty->crashed(); ++i) std::this_thread::sleep_for(2ms);
      }
      return std::nullopt;
    };
    bool threw = false;
    litetx::Result<litetx::CommitInfo> r = Status::Unavailable("");
    {
      litetx::Database db(hook, o);
      try {
        r = db.Commit(Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}}));
      } catch (const litetx::SimulatedCrash&) {
        threw = true;
      }
    }
    clock->Advance(1h);
    CollectorOptions go;
    go.engine = o;
    go.engine.renew_leases = false;
    go.collections = {"acct"};
    go.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    Collector gc(mem, go);
    ASSERT_TRUE(gc.RunOnce().ok());
    ExpectClean(*mem, {"acct"});
    litetx::Database d(mem, o);
    const std::int64_t a = N(d, "a"), b = N(d, "b");
    EXPECT_EQ(a + b, 200);
    if (!threw && r.ok()) {
      EXPECT_EQ(a, 70);
    }
    if (!threw && !r.ok() && r.code() != Code::kUnknown) {
      EXPECT_EQ(a, 100);
    }
  }
}

}  // namespace
}  // namespace ltxtest
