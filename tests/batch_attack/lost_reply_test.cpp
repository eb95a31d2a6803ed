// Lost replies of the writes that record a step's progress, one at a time: the create of a
// chunk document, a replace of the step document, the commit point of a transaction (the
// record flip), and the create of an item or scan marker. Each is lost after the write landed
// (the caller gets kUnknown) and, separately, on its way (kUnknown, nothing written), at every
// occurrence in the run, on both commit paths. The step must resolve the loss itself and end
// exactly once, or fail with kUnknown and leave it to a restart, which must then end exactly
// once: never a chunk counted twice, never one lost.
#include <atomic>
#include <chrono>
#include <cstdio>

#include "attack_util.h"

namespace battack {
namespace {

using ltxtest::Call;
using ltxtest::HookStore;
using ltxtest::Op;

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

struct Target {
  const char* name;
  std::function<bool(const Call&)> match;
};

const std::vector<Target>& Targets() {
  static const std::vector<Target> t{
      {"chunk document create",
       [](const Call& c) {
         return c.op == Op::kCreate && c.key.collection == kState && Contains(c.key.id, "/chunk/");
       }},
      {"step document replace",
       [](const Call& c) {
         return c.op == Op::kReplace && c.key.collection == kState && c.key.id == StepId();
       }},
      {"commit point", [](const Call& c) { return c.is_commit_point(); }},
      {"item or scan marker create",
       [](const Call& c) {
         return c.op == Op::kCreate && c.key.collection == kState &&
                (Contains(c.key.id, "/item/") || Contains(c.key.id, "/scan/"));
       }},
  };
  return t;
}

// How long the store stays down after the loss: not at all; long enough to use up the
// engine's attempts at one call (so that Database::Run reports kUnknown) but shorter than the
// step's unknown_timeout (30 s); longer than that.
constexpr std::chrono::seconds kOutages[] = {std::chrono::seconds(0), std::chrono::seconds(2),
                                            std::chrono::seconds(45)};

struct Tally {
  std::uint64_t cases = 0, resolved = 0, unknown = 0, start_unknown = 0, unavailable = 0;
};

// Counts the calls `target` matches in a run without faults (with `landed`, those that
// succeeded).
int CountMatches(Mode mode, bool parallel, const Target& target, bool landed) {
  Rig rig;
  rig.parallel = parallel;
  auto hook = std::make_shared<HookStore>(rig.mem);
  std::atomic<int> n{0};
  hook->after = [&](const Call& c, const Status& result) -> std::optional<Status> {
    if (target.match(c) && (result.ok() || !landed)) ++n;
    return std::nullopt;
  };
  auto db = rig.Db(hook);
  auto r = RunExec(*db, mode);
  EXPECT_TRUE(r.ok() && r->status.ok());
  return n.load();
}

// Loses the reply of the `nth` call `target` matches (after it landed, or on its way), then
// fails every call with kUnavailable for `outage` of the clock (the store unreachable for a
// while, so that neither the engine nor, with the longest outage, the step's own polling can
// learn the outcome at once).
bool LoseOne(Mode mode, bool parallel, const Target& target, int nth, bool landed,
             std::chrono::seconds outage, Tally& t) {
  SCOPED_TRACE(std::string(ModeName(mode)) + (parallel ? " parallel" : " classic") + ", " +
               target.name + " #" + std::to_string(nth) +
               (landed ? " landed, reply lost" : " lost on its way") + ", then the store down for " +
               std::to_string(outage.count()) + " s");
  Rig rig;
  rig.parallel = parallel;
  auto hook = std::make_shared<HookStore>(rig.mem);
  std::atomic<int> seen{0};
  std::atomic<bool> lost{false};
  std::atomic<std::int64_t> down_until{0};  // monotonic micros
  const std::int64_t outage_us = std::chrono::microseconds(outage).count();
  auto outage_now = [&] { return rig.clock->MonotonicMicros() < down_until.load(); };
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (outage_now()) return Status::Unavailable("injected outage");
    if (!landed && target.match(c) && ++seen == nth) {
      lost = true;
      down_until = rig.clock->MonotonicMicros() + outage_us;
      return Status::Unknown("injected write lost on its way");
    }
    return std::nullopt;
  };
  if (landed) {
    hook->after = [&](const Call& c, const Status& result) -> std::optional<Status> {
      if (target.match(c) && result.ok() && ++seen == nth) {
        lost = true;
        down_until = rig.clock->MonotonicMicros() + outage_us;
        return Status::Unknown("injected lost reply");
      }
      return std::nullopt;
    };
  }
  ++t.cases;
  std::optional<lb::StepReport> done;
  bool unknown = false, rerun = false;
  {
    auto db = rig.Db(hook);
    auto r = RunExec(*db, mode);
    if (!r.ok()) {
      // RunStep refused before running: only an unknown outcome of its start is acceptable.
      EXPECT_TRUE(r.status().code() == Code::kUnknown ||
                  (outage.count() > 0 && r.status().code() == Code::kUnavailable))
          << r.status().ToString();
      const bool allowed = r.status().code() == Code::kUnknown ||
                           (outage.count() > 0 && r.status().code() == Code::kUnavailable);
      if (!allowed) return false;
      ++t.start_unknown;
      unknown = true;
    } else if (r->status.ok()) {
      done = *r;
      ++t.resolved;
    } else {
      // Without an outage only kUnknown may be left open; with one the store's own
      // unavailability may be what stops the step.
      const bool allowed = r->status.code() == Code::kUnknown ||
                           (outage.count() > 0 && r->status.code() == Code::kUnavailable);
      EXPECT_TRUE(allowed) << r->status.ToString();
      if (!allowed) return false;
      if (r->status.code() == Code::kUnknown) {
        unknown = true;
      } else {
        ++t.unavailable;
        rerun = true;
      }
    }
  }
  EXPECT_TRUE(lost.load()) << "the fault was not injected";
  if (unknown) ++t.unknown;
  if (unknown || rerun) {
    Status s = rig.Settle();
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto db = rig.Db();
    auto r = RunExec(*db, mode);
    EXPECT_TRUE(r.ok() && r->status.ok())
        << (r.ok() ? r->status.ToString() : r.status().ToString());
    if (!r.ok() || !r->status.ok()) return false;
    done = *r;
  }
  auto bad = Verify(rig, mode, &*done);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  if (!bad.empty()) return false;
  Status s = rig.Settle();
  EXPECT_TRUE(s.ok()) << s.ToString();
  ltxtest::ExpectClean(*rig.mem, {kOut, kDead, kState});
  return !::testing::Test::HasFailure();
}

class BatchLostReply : public ::testing::TestWithParam<Mode> {};

TEST_P(BatchLostReply, OfEachProgressWriteResolvedOrSettledByARestart) {
  const Mode mode = GetParam();
  const auto started = std::chrono::steady_clock::now();
  Tally total;
  for (bool parallel : {true, false}) {
    for (const Target& target : Targets()) {
      for (bool landed : {true, false}) {
        const int n = CountMatches(mode, parallel, target, landed);
        if (mode != Mode::kPerItem && mode != Mode::kScan && Contains(target.name, "marker")) {
          EXPECT_EQ(n, 0) << target.name;  // only item by item
          continue;
        }
        ASSERT_GT(n, 0) << target.name;
        for (std::chrono::seconds outage : kOutages) {
          Tally t;
          for (int nth = 1; nth <= n; ++nth) {
            if (!LoseOne(mode, parallel, target, nth, landed, outage, t)) return;
          }
          std::printf("[ lost     ] %s, %s commit, %s %s, outage %d s: %llu cases, %llu ended by "
                      "the step, %llu kUnknown (%llu at the start), %llu kUnavailable; both "
                      "settled by a restart\n",
                      ModeName(mode), parallel ? "parallel" : "classic", target.name,
                      landed ? "(landed)" : "(on its way)", static_cast<int>(outage.count()),
                      static_cast<unsigned long long>(t.cases),
                      static_cast<unsigned long long>(t.resolved),
                      static_cast<unsigned long long>(t.unknown),
                      static_cast<unsigned long long>(t.start_unknown),
                      static_cast<unsigned long long>(t.unavailable));
          total.cases += t.cases;
          total.resolved += t.resolved;
          total.unknown += t.unknown;
          total.unavailable += t.unavailable;
        }
      }
    }
  }
  std::printf("[ lost     ] %s: %llu cases, %llu ended by the step, %llu kUnknown, %llu "
              "kUnavailable, %.1f s\n",
              ModeName(mode), static_cast<unsigned long long>(total.cases),
              static_cast<unsigned long long>(total.resolved),
              static_cast<unsigned long long>(total.unknown),
              static_cast<unsigned long long>(total.unavailable),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  // The outages must have made the engine give up on some losses: the step's own resolution
  // (and the restart after kUnknown) is what these cases test.
  EXPECT_GT(total.unknown, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchLostReply, ::testing::ValuesIn(kModes),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return std::string(ModeName(i.param));
                         });

}  // namespace
}  // namespace battack
