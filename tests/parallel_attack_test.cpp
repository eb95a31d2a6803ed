// tests/parallel_attack_test.cpp — the parallel commit (staging record written with the
// applies, docs/protocol.md §2.3) attacked by a hostile scheduler and a hostile user.
//
//   * Every pause point: the coordinator is stopped before each of its store calls in turn
//     (inside the record-and-applies batch, between a lost reply and its re-read, before the
//     fallback, before the flip, inside the finishing), with a store fault or none, while
//     another actor runs to completion (a collector past the lease, a purging collector, a
//     reader, Database::Outcome, a writer on one of the documents, a collector between every
//     two calls with a 1 ms lease). Checked after a healthy collector: the reported result
//     matches the final store, the store is all-before or all-after, nothing is left held, an
//     outcome seen committed or aborted never turns into the other (watched after every store
//     call of anyone), reads never show an image of a transaction that did not commit.
//   * Two collectors interleaved at every store call of one of them on a stale staging record;
//     an apply in flight landing before every store call of a collector resolving its record.
//   * A store that runs a batch in reverse order (holds land before their record).
//   * Writes delivered late (after fences, purges, placeholder purges).
//   * Hostile data: garbage staging records and hold deadlines, a worklist naming a document
//     twice, duplicate keys, 200 writes, documents at max_document_bytes.
//   * Threads committing overlapping transfers through a store that loses replies, beside a
//     background collector: every acknowledged transfer is visible and balances add up.
// Tests named DISABLED_ reproduce failures outside a documented bound (an outcome retention
// shorter than a coordinator's pause between two store calls, or the collector's older_than);
// each says what it shows. Run them with --gtest_also_run_disabled_tests.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Database;
using litetx::DocumentState;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnState;

constexpr std::chrono::milliseconds kLease = 120s;  // World's lease

// Thrown by a store hook: the process making the call dies there.
struct Crash {};

// What the record of `id` says, read raw (no proof, nothing written; a marker folded into its
// outcome page included): staging and pending read as pending, an absent record as not found.
TxnOutcome RawOutcome(litetx::Store& s, const std::string& id) {
  auto g = EffectiveRecord(s, id);
  if (!g.ok() || !g->has_value()) return TxnOutcome::kNotFound;
  auto rec = litetx::engine::DecodeRecord((*g)->value);
  if (!rec.ok()) return TxnOutcome::kPending;
  switch (rec->state) {
    case TxnState::kCommitted: return TxnOutcome::kCommitted;
    case TxnState::kAborted: return TxnOutcome::kAborted;
    case TxnState::kPending:
    case TxnState::kStaging: break;
  }
  return TxnOutcome::kPending;
}

// Every outcome the tracked transactions are seen with. Once one is seen committed it must
// never be seen aborted, and the other way round (a purged marker, not found, in between
// included: whoever asks later must not be told the opposite).
class OutcomeLog {
 public:
  void Track(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    ids_.insert(id);
  }
  void Observe(litetx::Store& s) {
    std::vector<std::string> ids;
    {
      std::lock_guard<std::mutex> l(mu_);
      ids.assign(ids_.begin(), ids_.end());
    }
    for (const auto& id : ids) Note(id, RawOutcome(s, id), "its record");
  }
  void Note(const std::string& id, TxnOutcome o, const std::string& who) {
    if (o != TxnOutcome::kCommitted && o != TxnOutcome::kAborted) return;
    std::lock_guard<std::mutex> l(mu_);
    auto [it, fresh] = final_.emplace(id, o);
    if (!fresh && it->second != o) {
      violations_.push_back("txn " + id + " was seen " + TxnOutcomeName(it->second) + ", then " +
                            who + " said " + TxnOutcomeName(o));
      it->second = o;  // reported once per change
    }
  }
  std::optional<TxnOutcome> Seen(const std::string& id) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = final_.find(id);
    if (it == final_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> violations() const {
    std::lock_guard<std::mutex> l(mu_);
    return violations_;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> ids_;
  std::map<std::string, TxnOutcome> final_;
  std::vector<std::string> violations_;
};

// The usual layering of these tests:
//   coordinator -> hook (faults, pauses) -> watch (observes outcomes after every call) -> mem
//   actors (collectors, readers, writers) -> watch -> mem
struct Rig {
  World w;
  std::shared_ptr<HookStore> watch = std::make_shared<HookStore>(w.mem);
  std::shared_ptr<HookStore> hook = std::make_shared<HookStore>(watch);
  OutcomeLog log;
  std::string id;  // the transaction under test (from its first record create)

  Rig() {
    watch->after = [this](const Call&, const Status&) -> std::optional<Status> {
      log.Observe(*w.mem);
      return std::nullopt;
    };
  }
  litetx::Options Opts(std::chrono::milliseconds lease = kLease) const {
    litetx::Options o = w.Opts();
    o.parallel_commit = true;
    o.lease = lease;
    o.rollback_timeout = 60s;  // virtual time: a rollback that keeps failing ends
    return o;
  }
  CollectorOptions Gc(std::string name, std::chrono::milliseconds outcome_retention = 1h,
                      std::chrono::milliseconds tombstone_retention = 0ms) const {
    CollectorOptions o;
    o.engine = Opts();
    o.name = std::move(name);
    o.collections = {"acct"};
    o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    o.outcome_retention = outcome_retention;
    o.tombstone_retention = tombstone_retention;
    return o;
  }
  // Records the id of the transaction under test at its first record create.
  void NoteId(const Call& c) {
    if (c.op == Op::kCreate && c.on_record() && id.empty()) {
      id = c.key.id;
      log.Track(id);
    }
  }
  // A collector past the lease that settles and then (outcome retention 0) erases the marker.
  // Tombstones and placeholders are kept for an hour: longer than any pause of these tests, as
  // CollectorOptions::tombstone_retention requires (they fence a paused coordinator's creates).
  void PurgeAll() {
    w.clock->Advance(kLease + 1s);
    Collector gc(watch, Gc("gc-purging", 0ms, 1h));
    (void)gc.RunOnce();  // resolves, finishes or reverses, writes the marker
    w.clock->Advance(10ms);
    (void)gc.RunOnce();  // erases the marker
  }
  // A healthy collector, well past every lease and deadline.
  void Settle() {
    w.clock->Advance(3 * kLease);
    Collector gc(watch, Gc("gc-healthy"));
    for (int i = 0; i < 3; ++i) (void)gc.RunOnce();
  }
  std::vector<std::string> Holds() const {
    std::vector<std::string> out;
    for (const auto& [docid, doc] : ScanAll(*w.mem, "acct")) {
      auto m = litetx::engine::DecodeMeta(doc.value);
      if (!m.ok() || !m->txn.empty() || m->deleting) out.push_back(docid);
    }
    return out;
  }
};

const Key kA{"acct", "a"};
const Key kB{"acct", "b"};

void SeedAB(World& w, bool b_exists) {
  auto d = w.Direct();
  MustCommit(*d, Transaction().Insert("acct", "a", Obj(R"({"n":100})")));
  if (b_exists) MustCommit(*d, Transaction().Insert("acct", "b", Obj(R"({"n":100})")));
}

// The transaction under test: a -30, and b +30 (or b inserted with 30).
Transaction Transfer(bool insert_b) {
  Transaction t;
  t.Adjust("acct", "a", {{"n", -30}});
  if (insert_b) {
    t.Insert("acct", "b", Obj(R"({"n":30})"));
  } else {
    t.Adjust("acct", "b", {{"n", 30}});
  }
  return t;
}

// -1: the before-image, 1: the after-image, 0: neither.
int AImage(const litetx::ReadResult& r) {
  if (r.state != DocumentState::kFound) return 0;
  const json::value* n = r.doc.if_contains("n");
  if (n == nullptr || !n->is_int64()) return 0;
  return n->get_int64() == 100 ? -1 : n->get_int64() == 70 ? 1 : 0;
}
int BImage(const litetx::ReadResult& r, bool insert_b) {
  if (insert_b && r.state != DocumentState::kFound) return -1;
  if (r.state != DocumentState::kFound) return 0;
  const json::value* n = r.doc.if_contains("n");
  if (n == nullptr || !n->is_int64()) return 0;
  if (insert_b) return n->get_int64() == 30 ? 1 : 0;
  return n->get_int64() == 100 ? -1 : n->get_int64() == 130 ? 1 : 0;
}

std::string Show(const litetx::Result<litetx::CommitInfo>& r) {
  return r.ok() ? std::string("OK") : r.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Every pause point, every fault, every actor.

enum class Fault {
  kNone,
  kRecordUnavailable,    // the record create fails once, not applied
  kRecordLostLanded,     // the record create lands, its reply is lost
  kRecordLostNotLanded,  // the record create times out and never lands
  kApplyUnavailable,     // b's apply fails once, not applied
  kApplyLostLanded,      // b's apply lands, its reply is lost
  kApplyLostNotLanded,   // b's apply times out and never lands
  kApplyConflict,        // b is changed by another writer just before T's apply
  kFlipLost,             // the staging -> committed flip lands, its reply is lost
  kFinishFails,          // every finishing write of a fails (left for the collector)
  kConflictFallbackLost,  // b changed under T, and the staging -> pending CAS's reply is lost
  kApplyLostReadsFail,   // b's apply never lands, and every later read of b by T fails
  kRecordLostReadsFail,  // the record lands, its reply is lost, and T cannot read it back
};
constexpr Fault kFaults[] = {Fault::kNone,           Fault::kRecordUnavailable,
                             Fault::kRecordLostLanded, Fault::kRecordLostNotLanded,
                             Fault::kApplyUnavailable, Fault::kApplyLostLanded,
                             Fault::kApplyLostNotLanded, Fault::kApplyConflict,
                             Fault::kFlipLost,         Fault::kFinishFails,
                             Fault::kConflictFallbackLost, Fault::kApplyLostReadsFail,
                             Fault::kRecordLostReadsFail};
const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kRecordUnavailable: return "record-unavailable";
    case Fault::kRecordLostLanded: return "record-lost-landed";
    case Fault::kRecordLostNotLanded: return "record-lost-not-landed";
    case Fault::kApplyUnavailable: return "apply-unavailable";
    case Fault::kApplyLostLanded: return "apply-lost-landed";
    case Fault::kApplyLostNotLanded: return "apply-lost-not-landed";
    case Fault::kApplyConflict: return "apply-conflict";
    case Fault::kFlipLost: return "flip-lost";
    case Fault::kFinishFails: return "finish-fails";
    case Fault::kConflictFallbackLost: return "conflict-fallback-lost";
    case Fault::kApplyLostReadsFail: return "apply-lost-reads-fail";
    case Fault::kRecordLostReadsFail: return "record-lost-reads-fail";
  }
  return "?";
}

enum class Actor {
  kNone,
  kCollector,         // past the lease: resolves (proves or fences) and settles
  kPurgingCollector,  // the same, then erases the marker (outcome and tombstone retention ~0)
  kReader,            // reads a and b (read committed)
  kOutcome,           // Database::Outcome (proves a staging record)
  kWriter,            // a one-write update of a (field w)
  kWriterB,           // the same on b
  kEveryCall,         // 1 ms lease; a collector before every call of the coordinator
};
constexpr Actor kActors[] = {Actor::kCollector, Actor::kPurgingCollector, Actor::kReader,
                             Actor::kOutcome,   Actor::kWriter,           Actor::kWriterB};
const char* ActorName(Actor a) {
  switch (a) {
    case Actor::kNone: return "none";
    case Actor::kCollector: return "collector";
    case Actor::kPurgingCollector: return "purging-collector";
    case Actor::kReader: return "reader";
    case Actor::kOutcome: return "outcome";
    case Actor::kWriter: return "writer on a";
    case Actor::kWriterB: return "writer on b";
    case Actor::kEveryCall: return "collector-every-call-1ms-lease";
  }
  return "?";
}

struct Schedule {
  Fault fault = Fault::kNone;
  Actor actor = Actor::kNone;
  int pause_at = 0;  // the actor runs before the coordinator's call number pause_at (1-based)
  bool insert_b = false;
  std::string Describe() const {
    return std::string("fault ") + FaultName(fault) + ", actor " + ActorName(actor) +
           " before call " + std::to_string(pause_at) + (insert_b ? ", b inserted" : ", b updated");
  }
};

struct ScheduleRun {
  int coordinator_calls = 0;
  std::vector<std::string> failures;
  bool committed = false;
  Code code = Code::kOk;
};

ScheduleRun RunSchedule(const Schedule& s) {
  ScheduleRun out;
  auto fail = [&](const std::string& why) { out.failures.push_back(why); };
  Rig rig;
  SeedAB(rig.w, !s.insert_b);
  const bool every_call = s.actor == Actor::kEveryCall;
  litetx::Options opts = rig.Opts(every_call ? 1ms : kLease);
  Database actor_db(rig.watch, opts);
  int calls = 0;
  int a_writes = 0, b_writes = 0;
  bool actor_ran = false;
  int last_read = -2;  // the newest image a read returned (-1 before, 1 after)
  std::optional<TxnOutcome> outcome_said;
  std::optional<Status> writer_said;

  auto run_actor = [&]() {
    actor_ran = true;
    switch (s.actor) {
      case Actor::kNone: break;
      case Actor::kCollector: {
        rig.w.clock->Advance(kLease + 1s);
        Collector gc(rig.watch, rig.Gc("gc-paused"));
        (void)gc.RunOnce();
        break;
      }
      case Actor::kPurgingCollector: rig.PurgeAll(); break;
      case Actor::kEveryCall: {
        rig.w.clock->Advance(2ms);
        Collector gc(rig.watch, rig.Gc("gc-every", 0ms, 1h));
        (void)gc.RunOnce();
        break;
      }
      case Actor::kReader: {
        const bool committed_before = !rig.id.empty() &&
                                      RawOutcome(*rig.w.mem, rig.id) == TxnOutcome::kCommitted;
        auto ra = actor_db.Read("acct", "a");
        auto rb = actor_db.Read("acct", "b");
        if (!ra.ok() || !rb.ok()) {
          fail("read failed: " + (ra.ok() ? rb.status() : ra.status()).ToString());
          break;
        }
        int ia = AImage(*ra), ib = BImage(*rb, s.insert_b);
        if (ia == 0 || ib == 0) fail("a read saw neither the before- nor the after-image");
        if (committed_before && (ia != 1 || ib != 1)) {
          fail("a read after the record said committed saw a before-image");
        }
        if (ia == 1 && ib != 1) fail("a read saw a after, then b before");
        last_read = std::max(ia, ib);
        break;
      }
      case Actor::kOutcome: {
        if (rig.id.empty()) break;
        auto o = actor_db.Outcome(rig.id);
        if (!o.ok()) {
          fail("Outcome failed: " + o.status().ToString());
          break;
        }
        outcome_said = *o;
        rig.log.Note(rig.id, *o, "Database::Outcome");
        break;
      }
      case Actor::kWriter:
      case Actor::kWriterB: {
        auto r = actor_db.Commit(Transaction().Update(
            "acct", s.actor == Actor::kWriter ? "a" : "b", Obj(R"({"w":1})")));
        writer_said = r.status();
        break;
      }
    }
  };

  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    ++calls;
    if (every_call) {
      run_actor();
    } else if (calls == s.pause_at) {
      run_actor();
    }
    const bool first_record_create = c.op == Op::kCreate && c.on_record() && c.nth == 1;
    const bool b_write = c.key == kB && c.is_write();
    const bool a_write = c.key == kA && c.is_write();
    if (b_write) ++b_writes;
    if (a_write) ++a_writes;
    switch (s.fault) {
      case Fault::kRecordUnavailable:
        if (first_record_create) return Status::Unavailable("injected");
        break;
      case Fault::kRecordLostNotLanded:
        if (first_record_create) return Status::Unknown("injected: timed out, never lands");
        break;
      case Fault::kApplyUnavailable:
        if (b_write && b_writes == 1) return Status::Unavailable("injected");
        break;
      case Fault::kApplyLostNotLanded:
        if (b_write && b_writes == 1) return Status::Unknown("injected: timed out, never lands");
        break;
      case Fault::kApplyLostReadsFail:
        if (b_write && b_writes == 1) return Status::Unknown("injected: timed out, never lands");
        if (c.key == kB && c.op == Op::kGet && b_writes >= 1) return Status::Unavailable("injected");
        break;
      case Fault::kRecordLostReadsFail:
        if (c.op == Op::kGet && c.on_record()) return Status::Unavailable("injected");
        break;
      case Fault::kApplyConflict:
      case Fault::kConflictFallbackLost:
        if (b_write && b_writes == 1) {
          auto d = rig.w.Direct();
          if (s.insert_b) {
            MustCommit(*d, Transaction().Insert("acct", "b", Obj(R"({"n":7})")));
            MustCommit(*d, Transaction().Delete("acct", "b"));
          } else {
            MustCommit(*d, Transaction().Update("acct", "b", Obj(R"({"z":1})")));
          }
        }
        break;
      case Fault::kFinishFails:
        if (a_write && a_writes >= 2) return Status::Unavailable("injected");
        break;
      default: break;
    }
    return std::nullopt;
  };
  rig.hook->after = [&](const Call& c, const Status& st) -> std::optional<Status> {
    if (!st.ok()) return std::nullopt;
    switch (s.fault) {
      case Fault::kRecordLostLanded:
      case Fault::kRecordLostReadsFail:
        if (c.op == Op::kCreate && c.on_record() && c.nth == 1) return Status::Unknown("lost");
        break;
      case Fault::kConflictFallbackLost:
        if (c.op == Op::kReplace && c.on_record() && c.record_state() == "pending" && c.nth == 1) {
          return Status::Unknown("lost");
        }
        break;
      case Fault::kApplyLostLanded:
        if (c.key == kB && c.is_write() && b_writes == 1) return Status::Unknown("lost");
        break;
      case Fault::kFlipLost:
        if (c.is_commit_point() && c.record_state() == "committed" && c.nth == 1) {
          return Status::Unknown("lost");
        }
        break;
      default: break;
    }
    return std::nullopt;
  };

  litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
  {
    Database db(rig.hook, opts);
    r = db.Commit(Transfer(s.insert_b));
  }
  out.coordinator_calls = calls;
  rig.hook->before = nullptr;
  rig.hook->after = nullptr;
  if (rig.id.empty() && !r.ok()) rig.id = r.status().txn_id();
  if (rig.id.empty() && r.ok()) rig.id = r->txn_id;
  if (!actor_ran && s.actor != Actor::kNone) run_actor();  // the pause after Commit returned
  rig.Settle();

  auto direct = rig.w.Direct();
  auto fa = direct->Read("acct", "a");
  auto fb = direct->Read("acct", "b");
  if (!fa.ok() || !fb.ok()) {
    fail("final read failed");
    return out;
  }
  const int ia = AImage(*fa), ib = BImage(*fb, s.insert_b);
  if (ia == 0 || ib == 0) fail("final store: a or b is neither before nor after");
  if (ia != ib) fail("final store is mixed: a " + std::to_string(ia) + ", b " + std::to_string(ib));
  const bool committed = ia == 1;
  out.committed = committed;
  out.code = r.ok() ? Code::kOk : r.code();
  if (r.ok() && !committed) fail("Commit returned OK, the store is all-before");
  if (!r.ok() && r.code() != Code::kUnknown && committed) {
    fail("Commit returned " + r.status().ToString() + ", the store is all-after");
  }
  if (auto seen = rig.log.Seen(rig.id)) {
    if ((*seen == TxnOutcome::kCommitted) != committed) {
      fail(std::string("the outcome was seen ") + TxnOutcomeName(*seen) + ", the store says " +
           (committed ? "committed" : "not committed"));
    }
  }
  if (!rig.id.empty()) {
    TxnOutcome now = OutcomeOf(*direct, rig.id);
    if (now == TxnOutcome::kPending) fail("the record is still unsettled");
    if (now != TxnOutcome::kNotFound && (now == TxnOutcome::kCommitted) != committed) {
      fail(std::string("Outcome says ") + TxnOutcomeName(now) + " at the end");
    }
  }
  if (last_read == 1 && !committed) fail("a read saw the after-image of an uncommitted transaction");
  if (outcome_said &&
      (*outcome_said == TxnOutcome::kCommitted || *outcome_said == TxnOutcome::kAborted) &&
      (*outcome_said == TxnOutcome::kCommitted) != committed) {
    fail(std::string("Database::Outcome said ") + TxnOutcomeName(*outcome_said));
  }
  if (writer_said) {
    const bool has_w = (s.actor == Actor::kWriter ? fa : fb)->doc.if_contains("w") != nullptr;
    if (writer_said->ok() && !has_w) fail("the writer's acknowledged update of a is lost");
    if (!writer_said->ok() && writer_said->code() != Code::kUnknown && has_w) {
      fail("the writer failed (" + writer_said->ToString() + ") but its update is there");
    }
  }
  for (const auto& h : rig.Holds()) fail("acct/" + h + " still held at the end");
  if (RecordCount(*rig.w.mem) != 0) fail("a record is left unsettled");
  for (const auto& v : rig.log.violations()) fail(v);
  for (auto& f : out.failures) f = s.Describe() + ", result " + Show(r) + ": " + f;
  return out;
}

TEST(ParallelAttack, EveryPauseWithEveryFaultAndEveryActor) {
  const auto start = std::chrono::steady_clock::now();
  int runs = 0, failures = 0, committed = 0, unknown = 0, not_committed = 0;
  for (bool insert_b : {false, true}) {
    for (Fault f : kFaults) {
      // A dry run counts the coordinator's store calls for this fault.
      ScheduleRun dry = RunSchedule(Schedule{f, Actor::kNone, 0, insert_b});
      ++runs;
      for (const auto& why : dry.failures) {
        if (++failures <= 10) ADD_FAILURE() << why;
      }
      EXPECT_GE(dry.coordinator_calls, 5) << FaultName(f);
      std::vector<Schedule> schedules;
      for (Actor a : kActors) {
        for (int k = 1; k <= dry.coordinator_calls + 1; ++k) schedules.push_back({f, a, k, insert_b});
      }
      schedules.push_back({f, Actor::kEveryCall, 0, insert_b});
      for (const Schedule& s : schedules) {
        ScheduleRun run = RunSchedule(s);
        ++runs;
        if (run.committed) ++committed;
        if (run.code == Code::kUnknown) ++unknown;
        if (!run.committed) ++not_committed;
        for (const auto& why : run.failures) {
          if (++failures <= 10) ADD_FAILURE() << why;
        }
      }
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  std::printf("pause schedules: %d runs (committed %d, not committed %d, kUnknown %d), "
              "%d failures, %lld ms\n",
              runs, committed, not_committed, unknown, failures, static_cast<long long>(ms));
  EXPECT_EQ(failures, 0);
  // The schedules reach both outcomes (a search that only ever commits proves little).
  EXPECT_GT(committed, 0);
  EXPECT_GT(not_committed, 0);
}

// ---------------------------------------------------------------------------------------------
// Bugs: a transaction that committed is later said to be aborted.

// The record create of a parallel commit is delayed in the network: its reply times out and it
// lands later. The coordinator reads its record, finds it absent (well within half its lease)
// and fences it; it is paused between that read and the fence create. Meanwhile the delayed
// create lands, every apply is held, the lease passes, a collector proves the commit, finishes
// it and, with outcome_retention 0, erases the marker. Then the fence lands on the empty key.
// Seen: Commit reports kUnavailable ("nothing was committed") while both documents carry the
// transfer, and Database::Outcome answers aborted, for good (a fence is never erased), where it
// had answered committed. The lease/2 check before the fence does not help: the create landed
// after the read, and the pause between the read and the fence is unbounded. Now Commit reports
// kUnknown (the fence landed after the record's lease), but the fence still answers aborted.
// Outside the bound of docs/protocol.md §7: the outcome retention must exceed the longest pause
// of a coordinator between two of its store calls (here it is 0 and the pause passes the lease).
TEST(ParallelAttackOutsideBounds, DISABLED_LateRecordCreateCommittedAndPurgedThenTheCoordinatorFencesIt) {
  Rig rig;
  SeedAB(rig.w, true);
  json::object delayed;
  bool resolved_committed = false;
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.op == Op::kCreate && c.on_record() && c.nth == 1) {
      delayed = *c.value;
      return Status::Unknown("reply timed out (the create is still in the network)");
    }
    if (c.op == Op::kCreate && c.on_record() && c.nth == 2) {  // the coordinator's own fence
      EXPECT_TRUE(rig.watch->Create(c.key, delayed).ok());     // the delayed create lands
      rig.w.clock->Advance(kLease + 1s);
      Collector gc(rig.watch, rig.Gc("gc-purging", 0ms, 1ms));
      (void)gc.RunOnce();
      resolved_committed = RawOutcome(*rig.w.mem, rig.id) == TxnOutcome::kCommitted;
      rig.w.clock->Advance(10ms);
      (void)gc.RunOnce();  // the marker is erased
    }
    return std::nullopt;
  };
  Database db(rig.hook, rig.Opts());
  auto r = db.Commit(Transfer(false));
  ASSERT_TRUE(resolved_committed) << "the collector did not prove the commit";
  auto direct = rig.w.Direct();
  EXPECT_EQ(BodyOf(*rig.w.mem, kA).at("n"), 70);
  EXPECT_EQ(BodyOf(*rig.w.mem, kB).at("n"), 130);
  EXPECT_TRUE(r.ok() || r.code() == Code::kUnknown)
      << "committed, but Commit said " << r.status().ToString();
  EXPECT_NE(OutcomeOf(*direct, rig.id), TxnOutcome::kAborted);
  for (const auto& v : rig.log.violations()) ADD_FAILURE() << v;
}

// The same self-fence with no delayed write, under a collector with older_than below half the
// lease (documented as "rolls back live transactions; they report kAborted, nothing is
// corrupted"): the record create lands and its reply is lost; before the coordinator reads its
// record again, such a collector proves the commit (every document is held), finishes it and
// erases the marker (outcome_retention 0). The coordinator then finds no record, still within
// lease/2, fences it and reports kUnavailable; Outcome says aborted; the transfer is applied.
TEST(ParallelAttackOutsideBounds, DISABLED_OlderThanCollectorCommitsAndPurgesThenTheCoordinatorFencesIt) {
  Rig rig;
  SeedAB(rig.w, true);
  rig.hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
    if (s.ok() && c.op == Op::kCreate && c.on_record() && c.nth == 1) return Status::Unknown("lost");
    return std::nullopt;
  };
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.op == Op::kGet && c.on_record() && c.nth == 1) {  // the re-read after the lost reply
      rig.w.clock->Advance(1s);
      CollectorOptions o = rig.Gc("gc-eager", 0ms, 1ms);
      o.older_than = 1ms;
      Collector gc(rig.watch, o);
      (void)gc.RunOnce();
      rig.w.clock->Advance(10ms);
      (void)gc.RunOnce();
    }
    return std::nullopt;
  };
  Database db(rig.hook, rig.Opts());
  auto r = db.Commit(Transfer(false));
  auto direct = rig.w.Direct();
  EXPECT_EQ(BodyOf(*rig.w.mem, kA).at("n"), 70);
  EXPECT_EQ(BodyOf(*rig.w.mem, kB).at("n"), 130);
  EXPECT_TRUE(r.ok() || r.code() == Code::kUnknown)
      << "committed, but Commit said " << r.status().ToString();
  EXPECT_NE(OutcomeOf(*direct, rig.id), TxnOutcome::kAborted);
  for (const auto& v : rig.log.violations()) ADD_FAILURE() << v;
}

// A contender (a writer, or the collector's sweep) reads a document held by a committed
// transaction T, then pauses before reading T's record. Meanwhile T is finished and its marker
// erased (outcome_retention shorter than the pause). The contender finds no record and, the
// hold's deadline being past (a classic hold has none: at once), creates a fence: an aborted
// marker for T, never erased. Seen: Commit of T returned OK and the documents carry it, but
// Database::Outcome(T) answers aborted from then on (before this fence it answered committed,
// then not found) — a caller settling a kUnknown by the guide's recipe would re-run it.
void ContenderFencesPurgedCommittedRecord(bool parallel, bool sweep) {
  Rig rig;
  SeedAB(rig.w, true);
  // T commits; its finishing fails (left for the collector): a and b stay held.
  litetx::Options topts = rig.Opts();
  topts.parallel_commit = parallel;
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.on_record() && c.op == Op::kReplace) return Status::Unavailable("injected");
    if (!c.on_record() && c.op == Op::kReplace && c.nth >= 2) return Status::Unavailable("injected");
    return std::nullopt;
  };
  if (!parallel) {
    // The classic path needs its flip: only the finishing fails.
    rig.hook->before = [&](const Call& c) -> std::optional<Status> {
      rig.NoteId(c);
      if (!c.on_record() && c.op == Op::kReplace && c.nth >= 2) return Status::Unavailable("injected");
      if (c.on_record() && c.is_marker()) return Status::Unavailable("injected");
      return std::nullopt;
    };
  }
  {
    Database db(rig.hook, topts);
    auto r = db.Commit(Transfer(false));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  ASSERT_EQ(MetaOf(*rig.w.mem, kA).txn, rig.id);
  auto direct = rig.w.Direct();
  EXPECT_EQ(OutcomeOf(*direct, rig.id), TxnOutcome::kCommitted);  // proves a staging record
  // The contender's pause: before its read of T's record.
  auto contender = std::make_shared<HookStore>(rig.watch);
  bool paused = false;
  contender->before = [&](const Call& c) -> std::optional<Status> {
    if (!paused && c.op == Op::kGet && c.key == TxnKey(rig.id)) {
      paused = true;
      rig.PurgeAll();  // T finished by a collector; its marker erased
      EXPECT_EQ(RawOutcome(*rig.w.mem, rig.id), TxnOutcome::kNotFound);
    }
    return std::nullopt;
  };
  if (sweep) {
    Collector gc(contender, rig.Gc("gc-sweeping"));
    (void)gc.RunOnce();
  } else {
    Database w(contender, rig.Opts());
    MustCommit(w, Transaction().Update("acct", "a", Obj(R"({"w":1})")));
  }
  ASSERT_TRUE(paused);
  EXPECT_EQ(BodyOf(*rig.w.mem, kA).at("n"), 70);
  EXPECT_EQ(BodyOf(*rig.w.mem, kB).at("n"), 130);
  EXPECT_NE(OutcomeOf(*direct, rig.id), TxnOutcome::kAborted)
      << "T committed (Commit returned OK, the store carries it)";
  for (const auto& v : rig.log.violations()) ADD_FAILURE() << v;
}

// A writer or the sweep read a document held by a committed transaction and is paused before it
// reads the record; meanwhile the transaction is finished and its marker erased. A classic hold
// is then undone as dangling without any record written; a parallel one is fenced only if the
// document is still at the revision read before the record was found absent (it is not: it
// was finished). Outcome never says aborted.
TEST(ParallelAttack, WriterFencesThePurgedRecordOfACommittedTransaction) {
  ContenderFencesPurgedCommittedRecord(/*parallel=*/true, /*sweep=*/false);
}
TEST(ParallelAttack, SweepFencesThePurgedRecordOfACommittedTransaction) {
  ContenderFencesPurgedCommittedRecord(/*parallel=*/true, /*sweep=*/true);
}
TEST(ParallelAttack, SweepFencesThePurgedRecordOfACommittedClassicTransaction) {
  ContenderFencesPurgedCommittedRecord(/*parallel=*/false, /*sweep=*/true);
}

// ---------------------------------------------------------------------------------------------
// A coordinator paused inside its batch, after the record create and a's apply, before b's
// insert, for longer than the lease: a collector proves nothing (b is absent), fences b with a
// placeholder, aborts the transaction and reverses a. The pause then goes on for an hour.

struct InsertPause {
  litetx::Result<litetx::CommitInfo> result = Status::Unavailable("not run");
  Rig rig;
};
void RunInsertPause(InsertPause& t, bool parallel, std::chrono::milliseconds tombstone_retention,
                    std::chrono::milliseconds outcome_retention = 24h) {
  Rig& rig = t.rig;
  SeedAB(rig.w, /*b_exists=*/false);
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.op == Op::kCreate && c.key == kB && c.nth == 1) {
      rig.w.clock->Advance(kLease + 1s);
      Collector gc(rig.watch, rig.Gc("gc-paused", outcome_retention, tombstone_retention));
      (void)gc.RunOnce();  // fences b with a placeholder, aborts, reverses a, writes the marker
      EXPECT_EQ(RawOutcome(*rig.w.mem, rig.id), TxnOutcome::kAborted);
      rig.w.clock->Advance(1h);  // the pause goes on
      (void)gc.RunOnce();  // erased: placeholders older than the tombstone retention, markers
                           // older than the outcome retention
    }
    return std::nullopt;
  };
  litetx::Options o = rig.Opts();
  o.parallel_commit = parallel;
  Database db(rig.hook, o);
  t.result = db.Commit(Transfer(/*insert_b=*/true));
}

// Within the documented bound (tombstone_retention longer than the pause): b's placeholder
// fences the late insert; the transaction reports kAborted; nothing of it is visible.
TEST(ParallelAttack, PauseInsideTheBatchWithinTombstoneRetentionAborts) {
  InsertPause t;
  RunInsertPause(t, /*parallel=*/true, 24h);
  EXPECT_EQ(t.result.code(), Code::kAborted) << Show(t.result);
  auto direct = t.rig.w.Direct();
  EXPECT_EQ(AImage(*direct->Read("acct", "a")), -1);
  EXPECT_EQ(BImage(*direct->Read("acct", "b"), true), -1);
  EXPECT_EQ(OutcomeOf(*direct, t.rig.id), TxnOutcome::kAborted);
  t.rig.Settle();
  EXPECT_TRUE(t.rig.Holds().empty());
  EXPECT_EQ(AImage(*direct->Read("acct", "a")), -1);
  EXPECT_EQ(BImage(*direct->Read("acct", "b"), true), -1);
  EXPECT_TRUE(t.rig.log.violations().empty());
}

// The classic path, same schedule, outside the bound (placeholder erased during the pause): the
// late insert lands, but the commit flip fails against the aborted record, and the rollback
// reverses it: kAborted, nothing visible.
TEST(ParallelAttack, ClassicPausePastTombstoneRetentionStillAborts) {
  InsertPause t;
  RunInsertPause(t, /*parallel=*/false, 1ms, 0ms);
  EXPECT_EQ(t.result.code(), Code::kAborted) << Show(t.result);
  t.rig.Settle();
  auto direct = t.rig.w.Direct();
  EXPECT_EQ(AImage(*direct->Read("acct", "a")), -1);
  EXPECT_EQ(BImage(*direct->Read("acct", "b"), true), -1);
  EXPECT_TRUE(t.rig.Holds().empty());
}

// The parallel path, same schedule, outside the bound, with outcome_retention 0: b's
// placeholder and the aborted marker are erased during the pause; the late insert of b lands;
// every reply of the batch is OK. A batch whose replies come back after half the record's lease
// is checked against the record before it is acknowledged: the record is gone (or aborted), so
// Commit does not report OK, and the store ends all-before once the collector has run.
TEST(ParallelAttack, PausePastTombstoneRetentionAcksAPartialCommit) {
  InsertPause t;
  RunInsertPause(t, /*parallel=*/true, 1ms, 0ms);
  auto direct = t.rig.w.Direct();
  t.rig.Settle();
  const int a = AImage(*direct->Read("acct", "a"));
  const int b = BImage(*direct->Read("acct", "b"), true);
  EXPECT_EQ(a, b) << "a " << a << ", b " << b << " after Commit returned " << Show(t.result);
  EXPECT_FALSE(t.result.ok() && a != 1) << "Commit returned OK for a transaction that is not applied";
}

// ---------------------------------------------------------------------------------------------
// Two collectors on one stale staging record, the second run before every store call of the
// first.

// Leaves T's staging record stale-to-be: every document held (the coordinator dies at its
// flip, after Commit's acknowledgement point) or b never applied (it dies at b's apply).
void DieWithStagingRecord(Rig& rig, bool b_applied, bool insert_b) {
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (b_applied && c.on_record() && c.op == Op::kReplace) throw Crash{};
    if (!b_applied && c.key == kB && c.is_write()) throw Crash{};
    return std::nullopt;
  };
  {
    Database db(rig.hook, rig.Opts());
    EXPECT_THROW((void)db.Commit(Transfer(insert_b)), Crash);
  }
  rig.hook->before = nullptr;
  ASSERT_FALSE(rig.id.empty());
  auto rec = RecordOf(*rig.w.mem, rig.id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kStaging);
}

TEST(ParallelAttack, TwoCollectorsInterleavedAtEveryCall) {
  int runs = 0;
  for (bool b_applied : {true, false}) {
    for (bool insert_b : {false, true}) {
      int c1_calls = 0;  // C1's store calls when it runs alone (k = 0, the first pass)
      for (int k = 0; k <= c1_calls + 1 && k < 200; ++k) {
        Rig rig;
        SeedAB(rig.w, !insert_b);
        DieWithStagingRecord(rig, b_applied, insert_b);
        rig.w.clock->Advance(kLease + 1s);
        auto c1_store = std::make_shared<HookStore>(rig.watch);
        Collector c2(rig.watch, rig.Gc("gc-two", 0ms, 1h));
        int calls = 0;
        c1_store->before = [&](const Call&) -> std::optional<Status> {
          if (++calls == k) (void)c2.RunOnce();
          return std::nullopt;
        };
        Collector c1(c1_store, rig.Gc("gc-one", 0ms, 1h));
        (void)c1.RunOnce();
        (void)c1.RunOnce();
        if (k == 0) c1_calls = calls;
        ++runs;
        const std::string where = std::string(b_applied ? "all held" : "b not applied") +
                                  (insert_b ? ", b inserted" : ", b updated") +
                                  ", C2 before C1's call " + std::to_string(k);
        rig.Settle();
        auto direct = rig.w.Direct();
        const int a = AImage(*direct->Read("acct", "a"));
        const int b = BImage(*direct->Read("acct", "b"), insert_b);
        EXPECT_EQ(a, b_applied ? 1 : -1) << where;
        EXPECT_EQ(b, b_applied ? 1 : -1) << where;
        EXPECT_TRUE(rig.Holds().empty()) << where;
        EXPECT_EQ(RecordCount(*rig.w.mem), 0u) << where;
        for (const auto& v : rig.log.violations()) ADD_FAILURE() << where << ": " << v;
        EXPECT_EQ(c1.stats().failed + c2.stats().failed, 0u) << where;
      }
      EXPECT_GE(c1_calls, 6);
    }
  }
  std::printf("two collectors: %d interleavings\n", runs);
}

// ---------------------------------------------------------------------------------------------
// b's apply in flight while a collector past the lease resolves the staging record: it lands
// before each store call of the collector in turn (the coordinator on its own thread, released
// from inside the collector's call and waited for).

// A step counter two threads hand over with (bounded waits: a stuck handover fails the test).
class Baton {
 public:
  void Set(int stage) {
    std::lock_guard<std::mutex> l(mu_);
    stage_ = std::max(stage_, stage);
    cv_.notify_all();
  }
  bool WaitFor(int stage) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, 10s, [&] { return stage_ >= stage; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int stage_ = 0;
};

TEST(ParallelAttack, ApplyInFlightLandsAtEveryPointOfACollectorsResolution) {
  int runs = 0, committed = 0;
  for (bool insert_b : {false, true}) {
    int collector_calls = 0;  // the collector's store calls when the apply lands after it
    for (int j = 0; j <= collector_calls + 1 && j < 200; ++j) {
      Rig rig;
      SeedAB(rig.w, !insert_b);
      Baton baton;  // 1: T at b's apply; 2: the apply may go; 3: the apply has replied
      int b_writes = 0;
      rig.hook->before = [&](const Call& c) -> std::optional<Status> {
        rig.NoteId(c);
        if (c.key == kB && c.is_write() && ++b_writes == 1) {
          baton.Set(1);
          EXPECT_TRUE(baton.WaitFor(2));
        }
        return std::nullopt;
      };
      rig.hook->after = [&](const Call& c, const Status&) -> std::optional<Status> {
        if (c.key == kB && c.is_write() && b_writes == 1) baton.Set(3);
        return std::nullopt;
      };
      litetx::Result<litetx::CommitInfo> r = Status::Unavailable("not run");
      std::thread coordinator([&] {
        Database db(rig.hook, rig.Opts());
        r = db.Commit(Transfer(insert_b));
      });
      ASSERT_TRUE(baton.WaitFor(1));
      rig.w.clock->Advance(kLease + 1s);
      auto c_store = std::make_shared<HookStore>(rig.watch);
      int calls = 0;
      c_store->before = [&](const Call&) -> std::optional<Status> {
        if (++calls == j) {
          baton.Set(2);
          EXPECT_TRUE(baton.WaitFor(3));
        }
        return std::nullopt;
      };
      {
        Collector gc(c_store, rig.Gc("gc-resolving", 0ms, 1h));
        (void)gc.RunOnce();
        baton.Set(2);  // j = 0 or past its last call: the apply lands after the collector
        EXPECT_TRUE(baton.WaitFor(3));
        coordinator.join();
        (void)gc.RunOnce();
      }
      if (j == 0) collector_calls = calls;
      ++runs;
      const std::string where = std::string(insert_b ? "b inserted" : "b updated") +
                                ", apply lands before collector call " + std::to_string(j) +
                                ", result " + Show(r);
      rig.Settle();
      auto direct = rig.w.Direct();
      const int a = AImage(*direct->Read("acct", "a"));
      const int b = BImage(*direct->Read("acct", "b"), insert_b);
      EXPECT_EQ(a, b) << where;
      if (r.ok()) {
        EXPECT_EQ(a, 1) << where;
      } else if (r.code() != Code::kUnknown) {
        EXPECT_EQ(a, -1) << where;
      }
      committed += a == 1 ? 1 : 0;
      EXPECT_TRUE(rig.Holds().empty()) << where;
      EXPECT_EQ(RecordCount(*rig.w.mem), 0u) << where;
      for (const auto& v : rig.log.violations()) ADD_FAILURE() << where << ": " << v;
    }
    EXPECT_GE(collector_calls, 6);
  }
  std::printf("apply in flight during a resolution: %d runs, %d committed\n", runs, committed);
  EXPECT_GT(committed, 0);
  EXPECT_LT(committed, runs);
}

// ---------------------------------------------------------------------------------------------
// A store that runs a batch in reverse order (as a cluster may: each shard on its own): the
// holds land before their record.

class ReversingStore : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<litetx::BatchResult> Batch(std::span<const litetx::BatchOp> ops) override {
    std::vector<litetx::BatchResult> out(ops.size());
    for (std::size_t k = ops.size(); k-- > 0;) out[k] = std::move(Store::Batch(ops.subspan(k, 1))[0]);
    return out;
  }
};

enum class Meddler { kNothing, kWriterBeforeDeadline, kWriterAfterDeadline, kSweepAfterDeadline };

struct HoldsFirst {
  litetx::Result<litetx::CommitInfo> result = Status::Unavailable("not run");
  std::optional<Status> writer;
  int read_a = 0, read_b = 0;
  TxnOutcome outcome_in_pause = TxnOutcome::kPending;
  std::size_t holds_in_pause = 0;
};

HoldsFirst RunHoldsFirst(Rig& rig, Meddler m) {
  HoldsFirst out;
  SeedAB(rig.w, true);
  auto reversing = std::make_shared<ReversingStore>(rig.hook);
  Database actor(rig.watch, rig.Opts());
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kCreate && c.on_record() && c.nth == 1) {
      rig.NoteId(c);
      // Both holds landed; the record has not. The coordinator pauses here.
      out.read_a = AImage(*actor.Read("acct", "a"));
      out.read_b = BImage(*actor.Read("acct", "b"), false);
      out.outcome_in_pause = OutcomeOf(actor, rig.id);
      if (m == Meddler::kWriterAfterDeadline || m == Meddler::kSweepAfterDeadline) {
        rig.w.clock->Advance(kLease + 1s);
      }
      if (m == Meddler::kSweepAfterDeadline) {
        Collector gc(rig.watch, rig.Gc("gc-sweep"));
        (void)gc.RunOnce();
      } else if (m != Meddler::kNothing) {
        out.writer = actor.Commit(Transaction().Update("acct", "a", Obj(R"({"w":1})"))).status();
      }
      Collector gc(rig.watch, rig.Gc("gc-early"));  // not yet due: leaves the holds alone
      if (m == Meddler::kWriterBeforeDeadline || m == Meddler::kNothing) (void)gc.RunOnce();
      out.holds_in_pause = rig.Holds().size();
    }
    return std::nullopt;
  };
  Database db(reversing, rig.Opts());
  out.result = db.Commit(Transfer(false));
  return out;
}

TEST(ParallelAttack, HoldsBeforeTheirRecordBlockWritersUntilTheDeadline) {
  Rig rig;
  HoldsFirst h = RunHoldsFirst(rig, Meddler::kWriterBeforeDeadline);
  EXPECT_EQ(h.read_a, -1);
  EXPECT_EQ(h.read_b, -1);
  EXPECT_EQ(h.outcome_in_pause, TxnOutcome::kNotFound);
  ASSERT_TRUE(h.writer.has_value());
  EXPECT_EQ(h.writer->code(), Code::kBusy) << h.writer->ToString();
  EXPECT_EQ(h.holds_in_pause, 2u) << "the sweep settled holds whose deadline had not passed";
  EXPECT_TRUE(h.result.ok()) << Show(h.result);
  auto direct = rig.w.Direct();
  EXPECT_EQ(AImage(*direct->Read("acct", "a")), 1);
  EXPECT_EQ(BImage(*direct->Read("acct", "b"), false), 1);
  EXPECT_EQ(OutcomeOf(*direct, rig.id), TxnOutcome::kCommitted);
  EXPECT_TRUE(rig.Holds().empty());
  EXPECT_TRUE(rig.log.violations().empty());
}

TEST(ParallelAttack, HoldsBeforeTheirRecordFencedPastTheDeadline) {
  for (Meddler m : {Meddler::kWriterAfterDeadline, Meddler::kSweepAfterDeadline}) {
    SCOPED_TRACE(m == Meddler::kWriterAfterDeadline ? "writer" : "sweep");
    Rig rig;
    HoldsFirst h = RunHoldsFirst(rig, m);
    if (m == Meddler::kWriterAfterDeadline) {
      ASSERT_TRUE(h.writer.has_value());
      EXPECT_TRUE(h.writer->ok()) << h.writer->ToString();
    }
    EXPECT_EQ(h.result.code(), Code::kAborted) << Show(h.result);
    rig.Settle();
    auto direct = rig.w.Direct();
    auto a = direct->Read("acct", "a");
    EXPECT_EQ(AImage(*a), -1);
    EXPECT_EQ(a->doc.contains("w"), m == Meddler::kWriterAfterDeadline);
    EXPECT_EQ(BImage(*direct->Read("acct", "b"), false), -1);
    auto rec = RecordOf(*rig.w.mem, rig.id);
    ASSERT_TRUE(rec.has_value());
    EXPECT_TRUE(rec->fence && rec->done && rec->state == TxnState::kAborted);
    EXPECT_TRUE(rig.Holds().empty());
    EXPECT_TRUE(rig.log.violations().empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Writes delivered late.

struct Stashed {
  Op op = Op::kGet;
  Key key;
  Revision expected = 0;
  json::object value;
  Status Deliver(litetx::Store& s) const {
    return op == Op::kCreate ? s.Create(key, value).status() : s.Replace(key, expected, value).status();
  }
};

// b's apply times out and is delivered after the coordinator fenced it, fell back and
// committed: it must fail, and b carries the transfer once.
TEST(ParallelAttack, LateApplyAfterTheCoordinatorsFenceFails) {
  for (bool insert_b : {false, true}) {
    SCOPED_TRACE(insert_b ? "insert" : "update");
    Rig rig;
    SeedAB(rig.w, !insert_b);
    std::optional<Stashed> late;
    rig.hook->before = [&](const Call& c) -> std::optional<Status> {
      rig.NoteId(c);
      if (c.key == kB && c.is_write() && !late) {
        late = Stashed{c.op, c.key, c.expected, *c.value};
        return Status::Unknown("timed out (still in the network)");
      }
      return std::nullopt;
    };
    Database db(rig.hook, rig.Opts());
    auto r = db.Commit(Transfer(insert_b));
    EXPECT_TRUE(r.ok()) << Show(r);
    ASSERT_TRUE(late.has_value());
    EXPECT_EQ(late->Deliver(*rig.watch).code(), Code::kConflict);
    rig.PurgeAll();
    EXPECT_EQ(late->Deliver(*rig.watch).code(), Code::kConflict);
    rig.Settle();
    auto direct = rig.w.Direct();
    EXPECT_EQ(AImage(*direct->Read("acct", "a")), 1);
    EXPECT_EQ(BImage(*direct->Read("acct", "b"), insert_b), 1);
    EXPECT_TRUE(rig.Holds().empty());
    EXPECT_TRUE(rig.log.violations().empty());
  }
}

// The record create times out; the coordinator finds no record and fences it itself (kUnavailable,
// its holds reversed). The create is delivered after the fence and after a purging collector:
// the fence is never erased, so it fails.
TEST(ParallelAttack, LateRecordCreateAfterTheSelfFenceFails) {
  Rig rig;
  SeedAB(rig.w, true);
  std::optional<Stashed> late;
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.op == Op::kCreate && c.on_record() && !late) {
      late = Stashed{c.op, c.key, 0, *c.value};
      return Status::Unknown("timed out (still in the network)");
    }
    return std::nullopt;
  };
  Database db(rig.hook, rig.Opts());
  auto r = db.Commit(Transfer(false));
  EXPECT_EQ(r.code(), Code::kUnavailable) << Show(r);
  ASSERT_TRUE(late.has_value());
  rig.PurgeAll();
  rig.PurgeAll();
  EXPECT_EQ(late->Deliver(*rig.watch).code(), Code::kConflict);
  auto rec = RecordOf(*rig.w.mem, rig.id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_TRUE(rec->fence && rec->done && rec->state == TxnState::kAborted);
  rig.Settle();
  auto direct = rig.w.Direct();
  EXPECT_EQ(AImage(*direct->Read("acct", "a")), -1);
  EXPECT_EQ(BImage(*direct->Read("acct", "b"), false), -1);
  EXPECT_EQ(OutcomeOf(*direct, rig.id), TxnOutcome::kAborted);
  EXPECT_TRUE(rig.Holds().empty());
  EXPECT_TRUE(rig.log.violations().empty());
}

// An insert's apply times out; the transaction then fails (kUnavailable) and is rolled back; its
// marker and b's placeholder are erased (retentions shorter than the delay); then the old apply
// is delivered and lands on the empty key: a hold of a transaction whose record is gone. Reads
// see through it (not found), the sweep fences the record and undoes it, and the outcome stays
// aborted.
TEST(ParallelAttack, LateInsertAfterItsPlaceholderWasErasedNeverShows) {
  Rig rig;
  SeedAB(rig.w, false);
  std::optional<Stashed> late;
  int b_writes = 0;
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.key == kB && c.is_write() && ++b_writes == 1) {
      late = Stashed{c.op, c.key, 0, *c.value};
      return Status::Unknown("timed out (still in the network)");
    }
    // Its second write is the coordinator's fence (a placeholder); from the third on (the
    // apply again, on the classic path) b's shard is down.
    if (c.key == kB && c.is_write() && b_writes >= 3) return Status::Unavailable("b's shard is down");
    return std::nullopt;
  };
  Database db(rig.hook, rig.Opts());
  auto r = db.Commit(Transfer(true));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.code(), Code::kUnknown) << Show(r);
  rig.w.clock->Advance(2h);
  {
    Collector gc(rig.watch, rig.Gc("gc-purging", 0ms, 1ms));
    (void)gc.RunOnce();
    rig.w.clock->Advance(10ms);
    (void)gc.RunOnce();
  }
  EXPECT_FALSE(Raw(*rig.w.mem, kB).has_value()) << "b's placeholder is still there";
  ASSERT_TRUE(late.has_value());
  ASSERT_TRUE(late->Deliver(*rig.watch).ok()) << "the late insert was expected to land";
  EXPECT_EQ(MetaOf(*rig.w.mem, kB).txn, rig.id);
  auto direct = rig.w.Direct();
  EXPECT_EQ(ImageOf(*direct->Read("acct", "b")).state, DocumentState::kNotFound);
  EXPECT_EQ(AImage(*direct->Read("acct", "a")), -1);
  rig.Settle();
  EXPECT_EQ(ImageOf(*direct->Read("acct", "b")).state, DocumentState::kNotFound);
  EXPECT_TRUE(rig.Holds().empty());
  EXPECT_EQ(OutcomeOf(*direct, rig.id), TxnOutcome::kAborted);
  EXPECT_TRUE(rig.log.violations().empty());
}

// ---------------------------------------------------------------------------------------------
// Hostile data.

// Leaves a and b held by T with no record: every record create fails (not applied), so the
// coordinator can neither write its record nor fence it; it reports kUnavailable and leaves the
// holds to their deadline.
void LeaveHoldsWithoutRecord(Rig& rig) {
  SeedAB(rig.w, true);
  rig.hook->before = [&](const Call& c) -> std::optional<Status> {
    rig.NoteId(c);
    if (c.op == Op::kCreate && c.on_record()) return Status::Unavailable("the record's shard is down");
    return std::nullopt;
  };
  Database db(rig.hook, rig.Opts());
  auto r = db.Commit(Transfer(false));
  EXPECT_EQ(r.code(), Code::kUnavailable) << Show(r);
  rig.hook->before = nullptr;
  EXPECT_EQ(MetaOf(*rig.w.mem, kA).txn, rig.id);
  EXPECT_EQ(MetaOf(*rig.w.mem, kB).txn, rig.id);
  EXPECT_FALSE(RecordOf(*rig.w.mem, rig.id).has_value());
}

// A record at the holder's id that is not a record: readers, writers, Outcome and the
// collector all refuse with kCorruption and change nothing.
TEST(ParallelAttack, GarbageStagingRecordsAreRefusedNotActedOn) {
  const char* garbage[] = {
      R"({"state":"staging","created":1,"gc_at":2,"actions":"garbage"})",
      R"({"state":"staging","created":1,"gc_at":2,"actions":[{"op":"update"}]})",
      R"({"state":"staging","created":1,"gc_at":"soon","actions":[]})",
      R"({"state":"staged","created":1,"gc_at":2,"actions":[]})",
      R"({"state":"staging","created":1,"gc_at":2,"fence":"yes","actions":[]})",
      R"({"state":"staging","created":1,"gc_at":2,"actions":[{"op":"update","c":"acct","id":"a","prior":"live","pv":"x","psv":1}]})",
  };
  for (const char* text : garbage) {
    SCOPED_TRACE(text);
    Rig rig;
    LeaveHoldsWithoutRecord(rig);
    PutRaw(*rig.w.mem, TxnKey(rig.id), Obj(text));
    const Dump before = DumpStore(*rig.w.mem, {"acct"});
    rig.w.clock->Advance(kLease + 1s);
    auto db = rig.w.Direct();
    litetx::Options o = rig.Opts();
    Database actor(rig.watch, o);
    EXPECT_EQ(actor.Read("acct", "a").code(), Code::kCorruption);
    EXPECT_EQ(actor.Outcome(rig.id).code(), Code::kCorruption);
    auto w = actor.Commit(Transaction().Update("acct", "a", Obj(R"({"w":1})")));
    EXPECT_EQ(w.code(), Code::kCorruption) << w.status().ToString();
    Collector gc(rig.watch, rig.Gc("gc-garbage"));
    EXPECT_FALSE(gc.RunOnce().ok());
    EXPECT_GE(gc.stats().failed, 1u);
    EXPECT_TRUE(SameDump(before, DumpStore(*rig.w.mem, {"acct"}))) << "something was written";
  }
}

// The deadline a parallel hold carries ("_ltx.u.x"), rewritten by hand, with no record: while
// it has not passed, writers wait (kBusy), the sweep leaves the hold, readers see the
// pre-image; a deadline that is not a usable number (or 0) counts as none: the hold is taken
// for a classic one, whose record is always written first, and undone at once without a fence;
// a deadline that has passed is fenced first.
TEST(ParallelAttack, HoldDeadlinesOfEveryShape) {
  struct Case {
    const char* name;
    json::value x;
    bool blocks;  // right away
    bool fenced = true;  // settled by fencing the record first (else: as a classic hold)
  };
  const std::int64_t now = World().clock->NowMillis();
  const Case cases[] = {
      {"the coordinator's own", json::value(nullptr), true},
      {"in the past", json::value(now - 1), false},
      {"negative", json::value(-5), false},
      {"zero", json::value(0), false, false},
      {"a string", json::value("soon"), false, false},
      {"an object", json::value(json::object{{"at", now + 1000}}), false, false},
      {"a year away", json::value(now + 365LL * 86'400'000), true},
      {"the largest int64", json::value(INT64_MAX), true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Rig rig;
    LeaveHoldsWithoutRecord(rig);
    json::object held = *Raw(*rig.w.mem, kA);
    const std::int64_t own = held.at("_ltx").at("u").at("x").as_int64();
    EXPECT_EQ(own, now + kLease.count());  // the record's first GC timestamp
    if (!c.x.is_null()) {
      held["_ltx"].as_object()["u"].as_object()["x"] = c.x;
      PutRaw(*rig.w.mem, kA, held);
    }
    Database actor(rig.watch, rig.Opts());
    EXPECT_EQ(AImage(*actor.Read("acct", "a")), -1);
    {
      Collector gc(rig.watch, rig.Gc("gc-sweep"));
      (void)gc.RunOnce();
    }
    EXPECT_EQ(MetaOf(*rig.w.mem, kA).txn == rig.id, c.blocks) << "the sweep";
    auto w = actor.Commit(Transaction().Update("acct", "a", Obj(R"({"w":1})")));
    if (c.blocks) {
      EXPECT_EQ(w.code(), Code::kBusy) << w.status().ToString();
      EXPECT_EQ(MetaOf(*rig.w.mem, kA).txn, rig.id);
    } else {
      EXPECT_TRUE(w.ok()) << w.status().ToString();
      auto a = actor.Read("acct", "a");
      EXPECT_EQ(AImage(*a), -1);
      EXPECT_TRUE(a->doc.contains("w"));
      // Fenced: T's record can never land. (Taken for a classic hold: no record written.)
      auto rec = RecordOf(*rig.w.mem, rig.id);
      if (c.fenced) {
        ASSERT_TRUE(rec.has_value());
        EXPECT_TRUE(rec->fence && rec->state == TxnState::kAborted);
      } else {
        EXPECT_FALSE(rec.has_value());
      }
    }
    // A day later: a coordinator's own deadline has passed; a forged far one has not, and the
    // document stays held (a deadline is trusted as written: nothing bounds it).
    rig.w.clock->Advance(24h);
    auto later = actor.Commit(Transaction().Update("acct", "a", Obj(R"({"w":2})")));
    const bool forged_far = c.blocks && !c.x.is_null();
    EXPECT_EQ(later.code(), forged_far ? Code::kBusy : Code::kOk) << later.status().ToString();
    EXPECT_EQ(AImage(*actor.Read("acct", "a")), -1);
    EXPECT_EQ(BImage(*actor.Read("acct", "b"), false), -1);
    for (const auto& v : rig.log.violations()) ADD_FAILURE() << v;
  }
}

// A worklist that names a document twice (edited by hand): the proof reads it twice, the
// collector finishes or reverses it twice, idempotently.
TEST(ParallelAttack, StagingRecordNamingADocumentTwice) {
  for (bool b_applied : {true, false}) {
    SCOPED_TRACE(b_applied ? "all held" : "b not applied");
    Rig rig;
    SeedAB(rig.w, true);
    DieWithStagingRecord(rig, b_applied, false);
    json::object rec = *Raw(*rig.w.mem, TxnKey(rig.id));
    json::array& actions = rec["actions"].as_array();
    actions.push_back(actions[0]);
    actions.push_back(actions[1]);
    PutRaw(*rig.w.mem, TxnKey(rig.id), rec);
    Database actor(rig.watch, rig.Opts());
    EXPECT_EQ(OutcomeOf(actor, rig.id), b_applied ? TxnOutcome::kCommitted : TxnOutcome::kPending);
    rig.Settle();
    EXPECT_EQ(AImage(*actor.Read("acct", "a")), b_applied ? 1 : -1);
    EXPECT_EQ(BImage(*actor.Read("acct", "b"), false), b_applied ? 1 : -1);
    EXPECT_EQ(OutcomeOf(actor, rig.id), b_applied ? TxnOutcome::kCommitted : TxnOutcome::kAborted);
    EXPECT_TRUE(rig.Holds().empty());
    EXPECT_TRUE(rig.log.violations().empty());
  }
}

// Two actions on one document are refused before anything reaches the store.
TEST(ParallelAttack, DuplicateKeysAreRefusedBeforeAnyStoreCall) {
  Rig rig;
  SeedAB(rig.w, true);
  int calls = 0;
  rig.hook->before = [&](const Call&) -> std::optional<Status> {
    ++calls;
    return std::nullopt;
  };
  Database db(rig.hook, rig.Opts());
  const Transaction dups[] = {
      Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "a", {{"n", 30}}),
      Transaction().Adjust("acct", "a", {{"n", -30}}).Adjust("acct", "b", {{"n", 30}})
          .Update("acct", "a", Obj(R"({"w":1})")),
      Transaction().Insert("acct", "c", Obj(R"({"n":1})")).Delete("acct", "c"),
  };
  for (const Transaction& t : dups) {
    EXPECT_EQ(db.Commit(t).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(calls, 0);
}

// 200 writes on the parallel path: 2N+3 store writes in 5 round trips (the reads, the record
// with the applies, the flip, the finishing, the marker), whatever N; 4 when the written-document
// cache holds every document (the adjusts of the documents the inserts wrote: no reads).
TEST(ParallelAttack, TwoHundredWritesInFiveRoundTrips) {
  World w;
  auto counting = std::make_shared<litetx::CountingStore>(w.mem);
  litetx::Options o = w.Opts();
  o.parallel_commit = true;
  Database db(counting, o);
  constexpr int kN = 200;
  Transaction ins, upd;
  for (int i = 0; i < kN; ++i) {
    ins.Insert("acct", "d" + std::to_string(i), json::object{{"n", i}});
    upd.Adjust("acct", "d" + std::to_string(i), {{"n", 1000}});
  }
  for (const Transaction* t : {&ins, &upd}) {
    counting->Reset();
    MustCommit(db, *t);
    auto c = counting->counts();
    EXPECT_EQ(c.creates + c.replaces + c.erases, 2u * kN + 3);
    EXPECT_EQ(c.round_trips, t == &ins ? 5u : 4u);
    EXPECT_EQ(c.gets, t == &ins ? static_cast<std::uint64_t>(kN) : 0u);
    std::printf("%d writes: %llu store writes, %llu round trips\n", kN,
                static_cast<unsigned long long>(c.creates + c.replaces + c.erases),
                static_cast<unsigned long long>(c.round_trips));
  }
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(BodyOf(*w.mem, "acct", "d" + std::to_string(i)).at("n"), i + 1000);
  }
  ExpectClean(*w.mem, {"acct"});
}

// Documents right at Options::max_document_bytes: the held image carries the hold's deadline,
// and no write may exceed the limit; one byte more is refused before anything is written.
TEST(ParallelAttack, MaxDocumentBytesHonouredWithTheHoldDeadline) {
  constexpr std::size_t kLimit = 512;
  std::size_t largest_ok = 0, best_pad = 0;
  bool refused_next = false;
  for (std::size_t pad = 250; pad <= kLimit; ++pad) {
    Rig rig;
    SeedAB(rig.w, true);
    litetx::Options o = rig.Opts();
    o.max_document_bytes = kLimit;
    std::size_t largest = 0;
    int writes = 0;
    rig.hook->before = [&](const Call& c) -> std::optional<Status> {
      if (c.is_write()) ++writes;
      if (c.is_write() && !c.on_record()) largest = std::max(largest, json::serialize(*c.value).size());
      return std::nullopt;
    };
    Database db(rig.hook, o);
    json::object set{{"pad", std::string(pad, 'p')}};
    auto r = db.Commit(Transaction().Update("acct", "a", set).Update("acct", "b", set));
    if (r.ok()) {
      EXPECT_LE(largest, kLimit) << "pad " << pad;
      largest_ok = largest;
      best_pad = pad;
      continue;
    }
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_EQ(writes, 0);
    refused_next = best_pad + 1 == pad;
    break;
  }
  EXPECT_TRUE(refused_next) << "no refusal right after the largest accepted pad " << best_pad;
  EXPECT_LE(largest_ok, kLimit);
  // The room kept for the deadline is at most 32 bytes: documents just under the limit pass.
  EXPECT_GE(largest_ok, kLimit - 32);
  std::printf("max_document_bytes %zu: largest write %zu bytes (pad %zu), pad %zu refused\n",
              kLimit, largest_ok, best_pad, best_pad + 1);
}

// ---------------------------------------------------------------------------------------------
// Threads: overlapping transfers through a store that loses replies and fails writes, beside a
// background collector whose lease checks see live staging records (a 40 ms lease). Each
// transfer also inserts a receipt. Checked: an acknowledged transfer's receipt reads back at
// once; at the end (a collector that treats everything as stale) every acknowledged receipt is
// there, no definitely failed one is, the balances are exactly the initial ones plus the
// receipts present, nothing is held, no record is left.
TEST(ParallelAttack, ThreadsTransferThroughALossyStoreBesideACollector) {
  constexpr int kAccounts = 5, kThreads = 4;
  constexpr std::int64_t kInitial = 1000;
  const auto kRunFor = 600ms;
  auto mem = std::make_shared<litetx::MemoryStore>();
  litetx::Options o;  // SystemClock
  o.logger = QuietLogger();
  o.parallel_commit = true;
  o.lease = 40ms;
  o.busy_timeout = 100ms;
  o.busy_backoff = {1ms, 5ms};
  o.retry_backoff = {1ms, 5ms};
  o.rollback_timeout = 2s;
  o.finish_in_background = true;
  {
    Database d(mem, o);
    for (int i = 0; i < kAccounts; ++i) {
      MustCommit(d, Transaction().Insert("acct", std::to_string(i), json::object{{"n", kInitial}}));
    }
  }
  auto lossy = std::make_shared<HookStore>(mem);
  std::mutex rng_mu;
  std::mt19937_64 rng(20240611);
  auto draw = [&] {
    std::lock_guard<std::mutex> l(rng_mu);
    return std::uniform_real_distribution<double>(0, 1)(rng);
  };
  std::atomic<int> lost{0}, refused{0}, slow{0};
  lossy->before = [&](const Call& c) -> std::optional<Status> {
    if (c.is_write() && !c.on_record() && draw() < 0.01) {
      // A slow shard: this write arrives past its transaction's lease, so the collector and
      // the other threads meet a staging record that is stale while its coordinator lives.
      slow.fetch_add(1);
      std::this_thread::sleep_for(60ms);
    }
    if (c.is_write() && draw() < 0.02) {
      refused.fetch_add(1);
      return Status::Unavailable("injected");
    }
    return std::nullopt;
  };
  lossy->after = [&](const Call& c, const Status& st) -> std::optional<Status> {
    if (c.is_write() && st.ok() && draw() < 0.03) {
      lost.fetch_add(1);
      return Status::Unknown("reply lost");
    }
    return std::nullopt;
  };
  CollectorOptions go;
  go.engine = o;
  go.name = "gc-beside";
  go.interval = 2ms;
  go.collections = {"acct", "r"};
  go.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
  Collector gc(mem, go);
  gc.Start();

  struct Tally {
    std::vector<std::string> acked, unknown, failed;
    std::vector<std::string> problems;
  };
  std::vector<Tally> tallies(kThreads);
  {
    Database db(lossy, o);
    const auto deadline = std::chrono::steady_clock::now() + kRunFor;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 local(static_cast<unsigned>(t) * 7919u + 1u);
        Tally& tally = tallies[static_cast<std::size_t>(t)];
        for (int k = 0; k < 100000 && std::chrono::steady_clock::now() < deadline; ++k) {
          const int from = static_cast<int>(local() % kAccounts);
          const int to = (from + 1 + static_cast<int>(local() % (kAccounts - 1))) % kAccounts;
          const std::int64_t x = 1 + static_cast<std::int64_t>(local() % 5);
          const std::string id = "t" + std::to_string(t) + "-" + std::to_string(k);
          auto r = db.Commit(Transaction()
                                 .Adjust("acct", std::to_string(from), {{"n", -x}})
                                 .Adjust("acct", std::to_string(to), {{"n", x}})
                                 .Insert("r", id, json::object{{"from", from}, {"to", to}, {"x", x}}));
          if (r.ok()) {
            tally.acked.push_back(id);
            auto back = db.Read("r", id);
            if (!back.ok() || back->state != DocumentState::kFound) {
              tally.problems.push_back("receipt " + id + " not readable right after its commit: " +
                                       (back.ok() ? "not found" : back.status().ToString()));
            }
          } else if (r.code() == Code::kUnknown) {
            tally.unknown.push_back(id);
          } else {
            tally.failed.push_back(id);
          }
        }
      });
    }
    for (auto& th : threads) th.join();
  }  // the finisher drains
  gc.Stop();
  CollectorOptions last = go;
  last.name = "gc-last";
  last.older_than = 1ms;  // no coordinator is alive: everything is stale
  Collector final_gc(mem, last);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(final_gc.RunOnce().ok());

  auto direct = std::make_unique<Database>(mem, o);
  std::vector<std::int64_t> expect(kAccounts, kInitial);
  std::size_t acked = 0, unknown = 0, failed = 0, unknown_landed = 0;
  for (const Tally& tally : tallies) {
    for (const auto& p : tally.problems) ADD_FAILURE() << p;
    acked += tally.acked.size();
    unknown += tally.unknown.size();
    failed += tally.failed.size();
    for (const auto& id : tally.acked) {
      EXPECT_EQ(ReadImage(*direct, "r", id).state, DocumentState::kFound) << "acked " << id;
    }
    for (const auto& id : tally.failed) {
      EXPECT_NE(ReadImage(*direct, "r", id).state, DocumentState::kFound) << "failed " << id;
    }
    for (const auto& id : tally.unknown) {
      unknown_landed += ReadImage(*direct, "r", id).state == DocumentState::kFound ? 1 : 0;
    }
  }
  for (const auto& [id, doc] : ScanAll(*mem, "r")) {
    auto img = ReadImage(*direct, "r", id);
    if (img.state != DocumentState::kFound) continue;
    const std::int64_t x = img.doc.at("x").as_int64();
    expect[static_cast<std::size_t>(img.doc.at("from").as_int64())] -= x;
    expect[static_cast<std::size_t>(img.doc.at("to").as_int64())] += x;
  }
  std::int64_t sum = 0;
  for (int i = 0; i < kAccounts; ++i) {
    auto img = ReadImage(*direct, "acct", std::to_string(i));
    const std::int64_t n = img.doc.at("n").as_int64();
    sum += n;
    EXPECT_EQ(n, expect[static_cast<std::size_t>(i)]) << "account " << i;
  }
  EXPECT_EQ(sum, kInitial * kAccounts);
  ExpectClean(*mem, {"acct", "r"});
  EXPECT_GT(acked, 20u);
  const auto st = gc.stats();
  std::printf("threads: %zu acked, %zu failed, %zu kUnknown (%zu of them landed); %d replies "
              "lost, %d writes refused, %d slowed past the lease; background collector: "
              "%llu finished, %llu reversed, %llu holds undone\n",
              acked, failed, unknown, unknown_landed, lost.load(), refused.load(), slow.load(),
              static_cast<unsigned long long>(st.finished),
              static_cast<unsigned long long>(st.reversed),
              static_cast<unsigned long long>(st.undone));
}

}  // namespace
}  // namespace ltxtest
