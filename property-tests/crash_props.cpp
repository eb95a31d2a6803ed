// property-tests/crash_props.cpp — RapidCheck properties: random transactions over a handful
// of documents, with a coordinator crash at a random write, with transient errors and lost
// replies, and with reads taken after every write. A failing case prints its seed; replay it
// with RC_PARAMS="seed=<seed>" (ctest sets RC_PARAMS from LITETX_PROPERTY_SEED and
// LITETX_PROPERTY_CASES).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <optional>

#include "harness.h"

namespace ptest {
namespace {
using litetx::ActionType;
using litetx::Code;

rc::Gen<Scenario> GenScenario() {
  return rc::gen::exec([] {
    Scenario s;
    int n = *rc::gen::inRange(1, 5);
    for (int i = 0; i < n; ++i) {
      s.docs.push_back(DocSpec{*rc::gen::element(Init::kAbsent, Init::kLive, Init::kLive,
                                                 Init::kDeleted, Init::kGone),
                               *rc::gen::inRange<std::int64_t>(-5, 50)});
    }
    // Mostly distinct documents; sometimes one named twice (rejected up front).
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[*rc::gen::inRange(0, i + 1)]);
    int k = *rc::gen::inRange(1, n + 1);
    order.resize(k);
    if (*rc::gen::weightedElement<int>({{19, 0}, {1, 1}}) == 1) order.push_back(order[0]);
    for (int doc : order) {
      ActSpec a;
      a.doc = doc;
      // Mostly actions that fit the document's state, so most transactions commit.
      Init init = s.docs[doc].init;
      bool live = init == Init::kLive;
      a.type = *rc::gen::weightedElement<int>({{5, 0}, {1, 1}}) == 1
                   ? *rc::gen::element(ActionType::kInsert, ActionType::kUpdate, ActionType::kAdjust,
                                       ActionType::kDelete, ActionType::kCheck)
               : live ? *rc::gen::element(ActionType::kUpdate, ActionType::kAdjust,
                                          ActionType::kDelete, ActionType::kCheck)
                      : ActionType::kInsert;
      a.value = *rc::gen::inRange<std::int64_t>(-20, 20);
      a.version = *rc::gen::weightedElement<VersionMode>(
          {{1, VersionMode::kWrong}, {5, VersionMode::kRight}, {5, VersionMode::kNone}});
      s.acts.push_back(a);
    }
    return s;
  });
}

// A coordinator crash at any write (first to last), optionally a collector crash too, then a
// healthy collector: all before or all after, clean, versions never down.
RC_GTEST_PROP(CrashProperty, CrashAtAnyWriteThenCollectorLeavesBeforeOrAfter, ()) {
  Scenario s = *GenScenario();
  Oracle o = RunOracle(s);
  std::uint64_t k = *rc::gen::inRange<std::uint64_t>(1, o.writes + 2);  // +1: no crash
  std::uint64_t j = *rc::gen::inRange<std::uint64_t>(0, 2 * s.acts.size() + 3);
  RC_CLASSIFY(o.code == Code::kOk, "commits");
  RC_CLASSIFY(k > o.writes, "no crash");
  RC_TAG(litetx::CodeName(o.code));
  std::string failure = RunCrashCase(s, o, k, j);
  RC_LOG() << s.Describe() << " crash_k=" << k << " gc_crash_j=" << j << "\n";
  RC_ASSERT(failure == "");
}

// Transient errors and lost replies anywhere (coordinator side). Acknowledged commits are
// after; failures other than kUnknown are before; kUnknown is settled by Outcome/last writer;
// nothing is applied twice (the exact after contents and versions).
RC_GTEST_PROP(CrashProperty, TransientErrorsAndLostRepliesNeverApplyTwiceOrLoseAcks, ()) {
  Scenario s = *GenScenario();
  Oracle o = RunOracle(s);
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  litetx::FaultOptions f;
  f.seed = *rc::gen::arbitrary<std::uint64_t>();
  f.transient_probability = *rc::gen::element(0.0, 0.1, 0.3, 0.6);
  f.lost_reply_probability = *rc::gen::element(0.0, 0.1, 0.3);
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
  litetx::Database db(faulty, TestOptions(clock));
  auto r = db.Commit(BuildTxn(*mem, s));
  RC_TAG(litetx::CodeName(r.code()));
  RC_LOG() << s.Describe() << " fault seed=" << f.seed << " p_transient=" << f.transient_probability
           << " p_lost=" << f.lost_reply_probability << " -> " << r.status().ToString() << "\n";
  if (!r.ok() && r.code() != Code::kUnknown && r.code() != Code::kUnavailable) {
    RC_ASSERT(r.code() == o.code);  // a real precondition failure, as the oracle says
  }
  clock->Advance(std::chrono::milliseconds(kLease) * 4);
  litetx::Collector gc(mem, TestCollectorOptions(clock));
  RC_ASSERT(gc.RunOnce().ok());
  char must = 'b';
  if (r.ok()) {
    must = 'a';
  } else if (r.code() == Code::kUnknown) {
    litetx::Database settled(mem, TestOptions(clock));  // the store has recovered
    auto outcome = settled.Outcome(r.status().txn_id());
    RC_ASSERT(outcome.ok());
    bool committed = *outcome == litetx::TxnOutcome::kCommitted ||
                     LastWrittenBy(*mem, s.docs.size(), r.status().txn_id());
    must = committed ? 'a' : 'b';
  }
  std::string failure = CheckFinal(*mem, o, s.docs.size(), must);
  RC_ASSERT(failure == "");
}

// All of it at once: a coordinator crash at a random write while transient errors and lost
// replies hit its calls, then a first collector whose calls fail the same way and which may
// itself crash, then a healthy collector. The documents end all before or all after (after
// for an acknowledged commit, before for a reported failure other than kUnknown), nothing is
// applied twice (the oracle's exact contents and versions) and nothing is left held.
RC_GTEST_PROP(CrashProperty, CrashesWithTransientErrorsAndLostRepliesLeaveBeforeOrAfter, ()) {
  Scenario s = *GenScenario();
  Oracle o = RunOracle(s);
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  litetx::FaultOptions f;
  f.seed = *rc::gen::arbitrary<std::uint64_t>();
  // Writes include retries and lost-reply resolutions, so more than the oracle counted.
  f.crash_after_writes = *rc::gen::inRange<std::uint64_t>(1, 2 * o.writes + 3);
  f.transient_probability = *rc::gen::element(0.05, 0.2, 0.4);
  f.lost_reply_probability = *rc::gen::element(0.0, 0.1, 0.3);
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(mem, f);
  litetx::Transaction txn = BuildTxn(*mem, s);
  std::optional<litetx::Result<litetx::CommitInfo>> result;
  try {
    litetx::Database db(faulty, TestOptions(clock));
    result = db.Commit(txn);
  } catch (const litetx::SimulatedCrash&) {
  }
  clock->Advance(std::chrono::milliseconds(kLease) * 4);
  litetx::FaultOptions g = f;
  g.seed = f.seed ^ 0x9e3779b97f4a7c15ULL;
  g.crash_after_writes = *rc::gen::inRange<std::uint64_t>(1, s.acts.size() + 3);
  auto faulty_gc = std::make_shared<litetx::FaultInjectingStore>(mem, g);
  bool gc_crashed = false;
  try {
    litetx::Collector first(faulty_gc, TestCollectorOptions(clock));
    (void)first.RunOnce();  // may fail: the next run finishes its work
  } catch (const litetx::SimulatedCrash&) {
    gc_crashed = true;
  }
  litetx::Collector healthy(mem, TestCollectorOptions(clock));
  RC_ASSERT(healthy.RunOnce().ok());
  char must = 0;
  std::string outcome = "crashed";
  if (result) {
    outcome = result->status().ToString();
    if (result->ok()) {
      must = 'a';
    } else if (result->code() != Code::kUnknown) {
      must = 'b';
      if (result->code() != Code::kUnavailable && result->code() != Code::kAborted) {
        RC_ASSERT(result->code() == o.code);  // a real precondition failure
      }
    }
  }
  RC_CLASSIFY(!result, "coordinator crashed");
  RC_CLASSIFY(gc_crashed, "collector crashed");
  RC_TAG(result ? litetx::CodeName(result->code()) : std::string_view("crash"));
  RC_LOG() << s.Describe() << " fault seed=" << f.seed << " crash_k=" << f.crash_after_writes
           << " gc_crash_j=" << g.crash_after_writes << " p_transient=" << f.transient_probability
           << " p_lost=" << f.lost_reply_probability << " -> " << outcome << "\n";
  RC_ASSERT(CheckFinal(*mem, o, s.docs.size(), must) == "");
}

// A store wrapper that, after every write that lands, reads every scenario document through a
// fresh Database on the raw store and records whether the snapshot is before or after.
class ProbeStore final : public litetx::ForwardingStore {
 public:
  ProbeStore(std::shared_ptr<litetx::Store> raw, const Oracle& o, std::size_t n)
      : ForwardingStore(raw), raw_(std::move(raw)), o_(o), n_(n) {}
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    auto r = ForwardingStore::Create(k, v);
    if (r.ok()) Probe();
    return r;
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    auto r = ForwardingStore::Replace(k, e, v);
    if (r.ok()) Probe();
    return r;
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    auto r = ForwardingStore::Erase(k, e);
    if (r.ok()) Probe();
    return r;
  }
  std::string trace;  // 'b' before, 'a' after, 'x' anything else (with the reason in error)
  std::string error;

 private:
  void Probe() {
    std::string err;
    auto c = ReadContents(*raw_, n_, &err);
    if (!c) {
      trace += 'x';
      error += "read error " + err + "; ";
    } else if (*c == o_.before) {
      trace += 'b';
    } else if (o_.code == Code::kOk && *c == o_.after) {
      trace += 'a';
    } else {
      trace += 'x';
      error += "intermediate read " + Show(*c) + "; ";
    }
  }
  std::shared_ptr<litetx::Store> raw_;
  const Oracle& o_;
  std::size_t n_;
};

// Reads taken after every write — of the coordinator, of a crashed collector and of the
// healthy one — show only committed images: before until the commit point, after from it on,
// never anything else, never after and then before.
RC_GTEST_PROP(CrashProperty, ReadsAfterEveryWriteSeeOnlyCommittedImages, ()) {
  Scenario s = *GenScenario();
  Oracle o = RunOracle(s);
  std::uint64_t k = *rc::gen::inRange<std::uint64_t>(1, o.writes + 2);
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  auto probe = std::make_shared<ProbeStore>(mem, o, s.docs.size());
  litetx::FaultOptions f;
  f.crash_after_writes = k;
  auto faulty = std::make_shared<litetx::FaultInjectingStore>(probe, f);
  litetx::Transaction txn = BuildTxn(*mem, s);
  Code code = Code::kOk;
  bool crashed = false;
  try {
    litetx::Database db(faulty, TestOptions(clock));
    code = db.Commit(txn).code();
  } catch (const litetx::SimulatedCrash&) {
    crashed = true;
  }
  clock->Advance(std::chrono::milliseconds(kLease) * 2);
  litetx::Collector gc(probe, TestCollectorOptions(clock));
  RC_ASSERT(gc.RunOnce().ok());
  RC_LOG() << s.Describe() << " crash_k=" << k << " trace=" << probe->trace << " " << probe->error << "\n";
  RC_CLASSIFY(crashed, "coordinator crashed");
  RC_CLASSIFY(probe->trace.find('a') != std::string::npos, "reads saw the commit");
  RC_ASSERT(probe->error == "");
  RC_ASSERT(probe->trace.find("ab") == std::string::npos);  // never back to before
  if (!crashed) {
    char want = code == Code::kOk ? 'a' : 'b';
    RC_ASSERT(probe->trace.empty() || probe->trace.back() == want || o.before == o.after);
  }
  RC_ASSERT(CheckFinal(*mem, o, s.docs.size(), 0) == "");
}

}  // namespace
}  // namespace ptest
