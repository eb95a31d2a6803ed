// tests/flip_cache_attack_test.cpp — two changes attacked together:
//
//   * The parallel commit's flip (staging -> committed) writes the record through
//     DropReversingData (engine/record.cpp): its actions keep op/c/id/prior/pv/psv/sv/rev and
//     lose fields/unset/restore/remove. Everyone that later meets the committed record (a
//     reader, a writer of another Database, Database::Outcome, the collector, the finisher after
//     a lost reply) must do with the keys alone.
//   * The written-document cache (Options::written_cache_bytes, on by default): a Database
//     writes a document it wrote last at the cached revision without reading it first.
//
// Suites: CrashAfterFlip (the compacted flip lands, then the finisher or the inline coordinator
// dies: readers, Outcome, a writer of another Database on each document, the collector; every
// action kind, N = 2 and 5), LostFlipReply (landed, not landed, settled and purged meanwhile),
// ProofFirst (a proof before the flip keeps the full record; a proof losing to the flip),
// StaleCache (stale cached images meeting a compacted committed hold; a finisher that gave up
// after its flip), CrashPoints (every store call of a 3-document commit and its finishing,
// cache cold, warm and stale, inline and background, each settled three ways; every write's
// reply lost). One test is DISABLED_ because it fails: see its comment.
//
// Crashes are simulated by a store front that throws litetx::SimulatedCrash after a chosen call
// (the write, if it is one, has landed) and on every later call: the "process" is dead. The
// background finisher catches it (std::exception) and leaves the rest to the collector; an
// inline coordinator lets it out of Commit. Everything runs on World's ManualClock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/record.h"
#include "engine/worklist.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::CollectorStats;
using litetx::Database;
using litetx::DocumentState;
using litetx::SimulatedCrash;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnState;

constexpr const char* kC = "c";
Key K(const std::string& id) { return Key{kC, id}; }

litetx::Options Par(const World& w, bool background) {
  litetx::Options o = w.Opts();
  o.parallel_commit = true;
  o.finish_in_background = background;
  return o;  // the written-document cache stays on (the default budget)
}

// One collector run over the records and collection "c", expected to succeed.
CollectorStats Collect(World& w, std::chrono::milliseconds outcome_retention = 1h) {
  CollectorOptions o;
  o.engine = Par(w, false);
  o.name = "gc-flip";
  o.collections = {kC};
  o.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
  o.outcome_retention = outcome_retention;
  Collector gc(w.mem, o);
  Status s = gc.RunOnce();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return gc.stats();
}

// The raw record of `id` (nullopt if absent).
std::optional<json::object> RawRecord(World& w, const std::string& id) {
  return Raw(*w.mem, TxnKey(id));
}

// A store front whose "process" dies: after call number `crash_after` (every Get, Create,
// Replace and Erase counts, each operation of a batch on its own; a write has landed by then),
// or after the first call for which `kill_after` says so, it throws SimulatedCrash, and so does
// every later call. It also notes the id of the first record created through it and a trace.
class Front {
 public:
  explicit Front(std::shared_ptr<litetx::Store> target)
      : hook_(std::make_shared<HookStore>(std::move(target))) {
    hook_->before = [this](const Call& c) -> std::optional<Status> {
      if (dead_.load()) throw SimulatedCrash(0);
      if (before_extra) return before_extra(c);
      return std::nullopt;
    };
    hook_->after = [this](const Call& c, const Status& s) -> std::optional<Status> {
      const long n = ++calls_;
      std::optional<Status> over = after_extra ? after_extra(c, s) : std::nullopt;
      const Status& seen = over ? *over : s;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (c.op == Op::kCreate && c.on_record() && s.ok() && txn_.empty()) {
          txn_ = c.key.id;
          staging_ = *c.value;
        }
        trace_.push_back(std::to_string(n) + ":" + Describe(c) +
                         (seen.ok() ? "" : "!" + std::string(litetx::CodeName(seen.code()))));
      }
      const bool kill = (crash_after_ > 0 && n == crash_after_) || (kill_after && kill_after(c, s));
      if (kill) {
        dead_ = true;
        throw SimulatedCrash(static_cast<std::uint64_t>(n));
      }
      return over;
    };
  }
  std::shared_ptr<HookStore> store() const { return hook_; }

  // Forgets the transaction, the trace and the count; arms a crash after call `k` (0: never).
  void Reset(long k = 0) {
    std::lock_guard<std::mutex> l(mu_);
    txn_.clear();
    staging_ = json::object{};
    trace_.clear();
    calls_ = 0;
    crash_after_ = k;
    dead_ = false;
  }
  bool dead() const { return dead_.load(); }
  long calls() const { return calls_.load(); }
  std::string txn() const {
    std::lock_guard<std::mutex> l(mu_);
    return txn_;
  }
  json::object staging() const {
    std::lock_guard<std::mutex> l(mu_);
    return staging_;
  }
  std::string Trace() const {
    std::lock_guard<std::mutex> l(mu_);
    std::string s;
    for (const auto& t : trace_) s += t + " ";
    return s;
  }

  std::function<bool(const Call&, const Status&)> kill_after;
  HookStore::Before before_extra;
  HookStore::After after_extra;

 private:
  static std::string Describe(const Call& c) {
    const char* op = c.op == Op::kGet       ? "get "
                     : c.op == Op::kCreate  ? "+"
                     : c.op == Op::kReplace ? "="
                     : c.op == Op::kErase   ? "-"
                                            : "scan ";
    if (!c.on_record()) return op + c.key.id;
    return std::string(op) + "R" + (c.is_marker() ? ":marker" : "") +
           (c.record_state().empty() ? "" : ":" + c.record_state());
  }

  std::shared_ptr<HookStore> hook_;
  mutable std::mutex mu_;
  std::string txn_;
  json::object staging_;
  std::vector<std::string> trace_;
  std::atomic<long> calls_{0};
  long crash_after_ = 0;
  std::atomic<bool> dead_{false};
};

// ---------------------------------------------------------------------------------------------
// The documents and the actions on them.
//
// Seeded through a Direct database (one-action commits, clock not moved):
//   a {"n":100,"s":"x"} V(1)   b {"n":5} V(1)   d {"k":1} V(1)
//   t: a tombstone at V(3) (inserted, deleted)  g: a "gone" placeholder at version 7
//   n: absent
void Seed(World& w) {
  auto d = w.Direct();
  MustCommit(*d, Transaction().Insert(kC, "a", Obj(R"({"n":100,"s":"x"})")));
  MustCommit(*d, Transaction().Insert(kC, "b", Obj(R"({"n":5})")));
  MustCommit(*d, Transaction().Insert(kC, "d", Obj(R"({"k":1})")));
  MustCommit(*d, Transaction().Insert(kC, "t", Obj(R"({"k":2})")));
  MustCommit(*d, Transaction().Delete(kC, "t"));
  litetx::engine::Meta gone;
  gone.gone = true;
  gone.version = 7;
  gone.schema_version = 1;
  gone.at_ms = w.clock->NowMillis();
  PutMeta(*w.mem, K("g"), json::object{}, gone);
}

struct DocCase {
  std::string id;
  Image before;
  Image after;
};

// One action kind: its document, the action, the images before and after.
struct Kind {
  char code;  // U update, A adjust, D delete, I insert (absent), T insert over a tombstone,
              // G insert over a placeholder
  DocCase doc;
  std::function<void(Transaction&)> add;
};

Kind KindOf(char code) {
  switch (code) {
    case 'U':
      return {code,
              {"a", Found(V(1), Obj(R"({"n":100,"s":"x"})")), Found(V(2), Obj(R"({"s":"y","z":true})"))},
              [](Transaction& t) { t.Update(kC, "a", Obj(R"({"s":"y","z":true})"), {"n"}); }};
    case 'A':
      return {code,
              {"b", Found(V(1), Obj(R"({"n":5})")), Found(V(2), Obj(R"({"n":12})"))},
              [](Transaction& t) { t.Adjust(kC, "b", Obj(R"({"n":7})")); }};
    case 'D':
      return {code, {"d", Found(V(1), Obj(R"({"k":1})")), DeletedImage(V(3))},
              [](Transaction& t) { t.Delete(kC, "d"); }};
    case 'I':
      // The clock does not move in these tests: the insert starts at kFirstVersion = V(1).
      return {code, {"n", NotFoundImage(), Found(V(1), Obj(R"({"k":9})"))},
              [](Transaction& t) { t.Insert(kC, "n", Obj(R"({"k":9})")); }};
    case 'T':
      return {code, {"t", DeletedImage(V(3)), Found(V(4), Obj(R"({"k":3})"))},
              [](Transaction& t) { t.Insert(kC, "t", Obj(R"({"k":3})")); }};
    case 'G':
      return {code, {"g", NotFoundImage(), Found(8, Obj(R"({"k":4})"))},
              [](Transaction& t) { t.Insert(kC, "g", Obj(R"({"k":4})")); }};
  }
  ADD_FAILURE() << "unknown kind " << code;
  return {};
}

struct Case {
  std::string name;
  Transaction txn;
  std::vector<DocCase> docs;
};

Case MakeCase(const std::string& codes) {
  Case c;
  c.name = codes;
  for (char k : codes) {
    Kind kind = KindOf(k);
    kind.add(c.txn);
    c.docs.push_back(kind.doc);
  }
  return c;
}

// N = 5 with every kind but G, and N = 2 pairs that between them cover every kind.
const std::vector<std::string> kCases = {"UADIT", "UD", "AT", "IG", "DT", "GU"};

std::map<std::string, Image> ImagesOf(Database& db, const std::vector<DocCase>& docs) {
  std::map<std::string, Image> out;
  for (const auto& d : docs) out[d.id] = ReadImage(db, kC, d.id);
  return out;
}
std::map<std::string, Image> After(const Case& c) {
  std::map<std::string, Image> out;
  for (const auto& d : c.docs) out[d.id] = d.after;
  return out;
}

// The record as the compacted flip must write it: the staging value with state committed and
// every action without fields/unset/restore/remove; and it must still name every document.
void ExpectCompacted(const json::object& stored, const json::object& staging, const Case& c) {
  json::object want = staging;
  want["state"] = "committed";
  litetx::engine::DropReversingData(want);
  EXPECT_EQ(stored, want) << "stored: " << json::serialize(stored)
                          << "\nstaging: " << json::serialize(staging);
  const json::value* actions = stored.if_contains("actions");
  ASSERT_TRUE(actions != nullptr && actions->is_array());
  ASSERT_EQ(actions->get_array().size(), c.docs.size());
  for (std::size_t i = 0; i < c.docs.size(); ++i) {
    const json::object& a = actions->get_array()[i].as_object();
    for (const char* gone : {"fields", "unset", "restore", "remove"}) {
      EXPECT_FALSE(a.contains(gone)) << gone << " kept in " << json::serialize(a);
    }
    for (const char* kept : {"op", "c", "id", "prior", "pv", "psv"}) {
      EXPECT_TRUE(a.contains(kept)) << kept << " lost from " << json::serialize(a);
    }
    EXPECT_EQ(a.at("id"), json::value(c.docs[i].id));
  }
  // The staging value did carry reversing data (else nothing was compacted).
  bool had = false;
  for (const auto& a : staging.at("actions").as_array()) {
    for (const char* k : {"fields", "unset", "restore", "remove"}) had = had || a.as_object().contains(k);
  }
  EXPECT_TRUE(had) << "the staging record had no reversing data";
}

bool AllHeldBy(World& w, const std::string& txn, const Case& c) {
  for (const auto& d : c.docs) {
    if (MetaOf(*w.mem, K(d.id)).txn != txn) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// 1. The finisher (or an inline coordinator) dies right after its compacted flip landed,
//    before any document is finished.

enum class Resolver { kReaderOutcomeThenCollector, kCollectorOnly, kWriter };

struct FlipCrash {
  World w;
  Front front{w.mem};
  std::string txn;
};

// Runs `c` on a Database that dies right after the flip landed; checks the state left behind.
void CrashAfterFlip(FlipCrash& f, const Case& c, bool background) {
  Seed(f.w);
  f.front.kill_after = [](const Call& call, const Status& s) {
    return call.is_commit_point() && s.ok();
  };
  {
    Database db(f.front.store(), Par(f.w, background));
    if (background) {
      auto r = db.Commit(c.txn);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      db.Flush();
    } else {
      EXPECT_THROW((void)db.Commit(c.txn), SimulatedCrash);
    }
  }
  ASSERT_TRUE(f.front.dead()) << "no flip was seen: " << f.front.Trace();
  f.txn = f.front.txn();
  ASSERT_FALSE(f.txn.empty());
  auto stored = RawRecord(f.w, f.txn);
  ASSERT_TRUE(stored.has_value());
  ExpectCompacted(*stored, f.front.staging(), c);
  EXPECT_TRUE(AllHeldBy(f.w, f.txn, c)) << "a document was finished before the crash";
}

void ExpectMarker(World& w, const std::string& txn) {
  auto rec = RecordOf(*w.mem, txn);
  ASSERT_TRUE(rec.has_value()) << "no marker";
  EXPECT_TRUE(rec->done);
  EXPECT_EQ(rec->state, TxnState::kCommitted);
  EXPECT_TRUE(rec->actions.empty());
}

void RunFlipCrash(const Case& c, bool background, Resolver resolver, std::size_t writer_doc = 0) {
  SCOPED_TRACE(c.name + (background ? " background" : " inline"));
  FlipCrash f;
  CrashAfterFlip(f, c, background);
  if (::testing::Test::HasFatalFailure()) return;
  auto direct = f.w.Direct();
  switch (resolver) {
    case Resolver::kReaderOutcomeThenCollector: {
      Dump before = DumpStore(*f.w.mem, {kC});
      EXPECT_EQ(ImagesOf(*direct, c.docs), After(c)) << "a reader does not see the commit";
      EXPECT_EQ(OutcomeOf(*direct, f.txn), TxnOutcome::kCommitted);
      EXPECT_TRUE(SameDump(before, DumpStore(*f.w.mem, {kC}))) << "a reader or Outcome wrote";
      f.w.clock->Advance(Par(f.w, false).lease + 1s);
      CollectorStats st = Collect(f.w);
      EXPECT_EQ(st.finished, 1u);
      EXPECT_EQ(st.failed, 0u);
      break;
    }
    case Resolver::kCollectorOnly: {
      // Before the lease: a committed record is finished whenever it is met (not stale yet:
      // the collector leaves it); after it, finished.
      f.w.clock->Advance(Par(f.w, false).lease + 1s);
      CollectorStats st = Collect(f.w);
      EXPECT_EQ(st.finished, 1u);
      EXPECT_EQ(st.failed, 0u);
      EXPECT_EQ(st.reversed, 0u);
      break;
    }
    case Resolver::kWriter: {
      const DocCase& d = c.docs[writer_doc];
      SCOPED_TRACE("writer on " + d.id);
      Database writer(f.w.mem, Par(f.w, false));
      Transaction t;
      Image want;
      if (d.after.state == DocumentState::kDeleted) {
        t.Insert(kC, d.id, Obj(R"({"w":1})"));
        want = Found(d.after.version + 1, Obj(R"({"w":1})"));
      } else {
        // Expecting the committed version: only a writer that sees the commit succeeds.
        t.Update(kC, d.id, Obj(R"({"w":1})"), {}, d.after.version);
        json::object body = d.after.doc;
        body["w"] = 1;
        want = Found(d.after.version + 1, body);
      }
      t.Insert(kC, "x" + d.id, Obj(R"({"w":2})"));  // two writes: the parallel commit
      auto r = writer.Commit(t);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->versions.front(), want.version);
      EXPECT_EQ(ReadImage(*direct, kC, d.id), want);
      EXPECT_NE(MetaOf(*f.w.mem, K(d.id)).txn, f.txn);
      // The others are still held by the committed transaction and read as committed.
      auto images = ImagesOf(*direct, c.docs);
      auto expect = After(c);
      expect[d.id] = want;
      EXPECT_EQ(images, expect);
      EXPECT_EQ(OutcomeOf(*direct, f.txn), TxnOutcome::kCommitted);
      f.w.clock->Advance(Par(f.w, false).lease + 1s);
      CollectorStats st = Collect(f.w);
      EXPECT_EQ(st.finished, 1u);
      EXPECT_EQ(st.failed, 0u);
      EXPECT_EQ(ImagesOf(*direct, c.docs), expect);
      ExpectMarker(f.w, f.txn);
      ExpectClean(*f.w.mem, {kC});
      return;
    }
  }
  EXPECT_EQ(ImagesOf(*direct, c.docs), After(c));
  EXPECT_EQ(OutcomeOf(*direct, f.txn), TxnOutcome::kCommitted);
  ExpectMarker(f.w, f.txn);
  ExpectClean(*f.w.mem, {kC});
  // Settled: a second collector run writes nothing.
  Dump settled = DumpStore(*f.w.mem, {kC});
  Collect(f.w);
  EXPECT_TRUE(SameDump(settled, DumpStore(*f.w.mem, {kC})));
}

TEST(FlipCacheAttackCrashAfterFlip, ReaderAndOutcomeSeeTheCommitThenTheCollectorFinishes) {
  for (bool background : {false, true}) {
    for (const auto& name : kCases) {
      RunFlipCrash(MakeCase(name), background, Resolver::kReaderOutcomeThenCollector);
    }
  }
}

TEST(FlipCacheAttackCrashAfterFlip, CollectorAloneFinishesEveryDocument) {
  for (bool background : {false, true}) {
    for (const auto& name : kCases) RunFlipCrash(MakeCase(name), background, Resolver::kCollectorOnly);
  }
}

TEST(FlipCacheAttackCrashAfterFlip, WriterOfAnotherDatabaseOnEachHeldDocument) {
  for (bool background : {false, true}) {
    for (const auto& name : kCases) {
      Case c = MakeCase(name);
      for (std::size_t i = 0; i < c.docs.size(); ++i) {
        RunFlipCrash(MakeCase(name), background, Resolver::kWriter, i);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 2. The compacted flip's reply is lost.

// (a) It landed, the reply is lost (FaultInjectingStore: the first Replace of a record is the
// flip): the finisher reads the record back, adopts it and finishes; one flip only.
TEST(FlipCacheAttackLostFlipReply, LandedFlipIsAdoptedFaultInjectingStore) {
  for (bool background : {false, true}) {
    for (const std::string name : {"UADIT", "IG"}) {
      SCOPED_TRACE(name + (background ? " background" : " inline"));
      World w;
      Seed(w);
      Case c = MakeCase(name);
      std::atomic<int> record_replaces{0};
      litetx::FaultOptions fo;
      fo.clock = w.clock;
      fo.rule = [&](litetx::StoreOp op, const Key& key, std::uint64_t) {
        if (op == litetx::StoreOp::kReplace && key.collection == litetx::kTransactionsCollection &&
            ++record_replaces == 1) {
          return litetx::Fault::kLostReply;
        }
        return litetx::Fault::kNone;
      };
      auto faulty = std::make_shared<litetx::FaultInjectingStore>(w.mem, fo);
      Front front(faulty);
      std::atomic<int> flips{0};
      json::object flip_value;
      front.after_extra = [&](const Call& call, const Status&) -> std::optional<Status> {
        if (call.is_commit_point() && flips++ == 0) flip_value = *call.value;
        return std::nullopt;
      };
      std::string id;
      {
        Database db(front.store(), Par(w, background));
        auto r = db.Commit(c.txn);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        id = r->txn_id;
        db.Flush();
      }
      EXPECT_EQ(faulty->lost_replies(), 1u);
      EXPECT_EQ(flips.load(), 1) << "the flip was written again: " << front.Trace();
      json::object want = front.staging();
      want["state"] = "committed";
      litetx::engine::DropReversingData(want);
      EXPECT_EQ(flip_value, want);
      auto direct = w.Direct();
      EXPECT_EQ(ImagesOf(*direct, c.docs), After(c));
      EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
      ExpectMarker(w, id);
      ExpectClean(*w.mem, {kC});
    }
  }
}

// (b) Lost on its way (not landed, kUnknown): the finisher finds the record still staging at
// its revision and writes the flip again; (c) landed, reply lost, and before the finisher reads
// the record back a collector past the lease settled the transaction and purged its marker.
TEST(FlipCacheAttackLostFlipReply, NotLandedIsSentAgainAndSettledAndPurgedMeanwhile) {
  for (bool background : {false, true}) {
    for (int variant : {0, 1}) {
      SCOPED_TRACE(std::string(variant == 0 ? "not landed" : "purged meanwhile") +
                   (background ? " background" : " inline"));
      World w;
      Seed(w);
      Case c = MakeCase("UADIT");
      Front front(w.mem);
      std::atomic<int> flips{0};
      if (variant == 0) {
        front.before_extra = [&](const Call& call) -> std::optional<Status> {
          if (call.is_commit_point() && flips++ == 0) return Status::Unknown("lost on its way");
          return std::nullopt;
        };
      } else {
        front.after_extra = [&](const Call& call, const Status& s) -> std::optional<Status> {
          if (call.is_commit_point() && s.ok() && flips++ == 0) {
            w.clock->Advance(Par(w, false).lease + 1s);
            const CollectorStats settled = Collect(w, 0ms);
            EXPECT_EQ(settled.finished, 1u);
            w.clock->Advance(10ms);
            const CollectorStats purged = Collect(w, 0ms);
            // The marker is gone: folded into its outcome page and the page purged (in the
            // settling pass already: the retention is 0), or purged as a marker.
            EXPECT_EQ(settled.pages_purged + purged.pages_purged + purged.purged, 1u);
            EXPECT_TRUE(ScanAll(*w.mem, litetx::kTransactionsCollection).empty());
            EXPECT_TRUE(ScanAll(*w.mem, litetx::kOutcomesCollection).empty());
            return Status::Unknown("reply lost");
          }
          return std::nullopt;
        };
      }
      std::string id;
      {
        Database db(front.store(), Par(w, background));
        auto r = db.Commit(c.txn);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        id = r->txn_id;
        db.Flush();
      }
      EXPECT_EQ(flips.load(), variant == 0 ? 2 : 1) << front.Trace();
      auto direct = w.Direct();
      EXPECT_EQ(ImagesOf(*direct, c.docs), After(c));
      if (variant == 0) {
        EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
        ExpectMarker(w, id);
      } else {
        EXPECT_FALSE(RecordOf(*w.mem, id).has_value()) << "the finisher wrote a record again";
      }
      ExpectClean(*w.mem, {kC});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. A resolver proves the staging record committed before the finisher's flip.

enum class Prover { kReader, kOutcome, kCollector };

TEST(FlipCacheAttackProofFirst, ProofKeepsFullDataFlipConflictsMarkerFollows) {
  for (Prover prover : {Prover::kReader, Prover::kOutcome, Prover::kCollector}) {
    for (const std::string name : {"UADIT", "GU"}) {
      SCOPED_TRACE(name + " prover " + std::to_string(static_cast<int>(prover)));
      World w;
      Seed(w);
      Case c = MakeCase(name);
      Front front(w.mem);
      Gate gate;
      std::atomic<int> flips{0};
      std::vector<std::string> flip_results;
      std::mutex mu;
      front.before_extra = [&](const Call& call) -> std::optional<Status> {
        if (call.is_commit_point() && flips++ == 0) gate.Hold();
        return std::nullopt;
      };
      front.after_extra = [&](const Call& call, const Status& s) -> std::optional<Status> {
        if (call.is_commit_point()) {
          std::lock_guard<std::mutex> l(mu);
          flip_results.emplace_back(litetx::CodeName(s.code()));
        }
        return std::nullopt;
      };
      auto db = std::make_unique<Database>(front.store(), Par(w, true));
      struct Opener {
        Gate& g;
        ~Opener() { g.Open(); }
      } opener{gate};
      auto r = db->Commit(c.txn);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_TRUE(gate.WaitHeld(1));
      const std::string id = r->txn_id;
      const json::object staging = front.staging();
      ASSERT_EQ(staging.at("state"), json::value("staging"));

      auto direct = w.Direct();
      switch (prover) {
        case Prover::kReader:
          EXPECT_EQ(ReadImage(*direct, kC, c.docs[0].id), c.docs[0].after);
          break;
        case Prover::kOutcome:
          EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
          break;
        case Prover::kCollector:
          w.clock->Advance(Par(w, false).lease + 1s);
          EXPECT_EQ(Collect(w).finished, 1u);
          break;
      }
      if (prover != Prover::kCollector) {
        // The proof's record: the staging value, state committed, reversing data kept.
        json::object want = staging;
        want["state"] = "committed";
        auto stored = RawRecord(w, id);
        ASSERT_TRUE(stored.has_value());
        EXPECT_EQ(*stored, want);
        EXPECT_TRUE(AllHeldBy(w, id, c));
        EXPECT_EQ(ImagesOf(*direct, c.docs), After(c));
      } else {
        ExpectMarker(w, id);
      }
      gate.Open();
      db->Flush();
      db.reset();
      {
        std::lock_guard<std::mutex> l(mu);
        EXPECT_EQ(flip_results, std::vector<std::string>{"conflict"}) << front.Trace();
      }
      EXPECT_EQ(ImagesOf(*direct, c.docs), After(c));
      EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
      ExpectMarker(w, id);
      ExpectClean(*w.mem, {kC});
    }
  }
}

// The other order: the proof has read every document held, and the compacted flip lands before
// the proof's compare-and-swap. The reader must still see the commit; Outcome must say committed
// (the record is committed by then).
void ProofLosesToTheCompactedFlip(Prover prover) {
  {
    World w;
    Seed(w);
    Case c = MakeCase("UADIT");
    Front front(w.mem);
    Gate gate;
    std::atomic<int> flips{0};
    front.before_extra = [&](const Call& call) -> std::optional<Status> {
      if (call.is_commit_point() && flips++ == 0) gate.Hold();
      return std::nullopt;
    };
    auto db = std::make_unique<Database>(front.store(), Par(w, true));
    struct Opener {
      Gate& g;
      ~Opener() { g.Open(); }
    } opener{gate};
    auto r = db->Commit(c.txn);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(gate.WaitHeld(1));
    const std::string id = r->txn_id;

    // The resolver's store: at its proof's compare-and-swap, let the finisher's flip land first.
    auto resolver_store = std::make_shared<HookStore>(w.mem);
    std::atomic<int> proofs{0};
    resolver_store->before = [&](const Call& call) -> std::optional<Status> {
      if (call.is_commit_point() && proofs++ == 0) {
        gate.Open();
        for (int i = 0; i < 5000; ++i) {
          auto rec = RecordOf(*w.mem, id);
          if (rec && rec->state == TxnState::kCommitted) break;
          std::this_thread::sleep_for(1ms);
        }
      }
      return std::nullopt;
    };
    Database resolver(resolver_store, Par(w, false));
    if (prover == Prover::kReader) {
      EXPECT_EQ(ReadImage(resolver, kC, c.docs[0].id), c.docs[0].after);
    } else {
      auto o = resolver.Outcome(id);
      ASSERT_TRUE(o.ok()) << o.status().ToString();
      EXPECT_EQ(*o, TxnOutcome::kCommitted)
          << "Outcome proved every document held, lost its compare-and-swap to the flip, and "
             "did not look again";
    }
    EXPECT_EQ(proofs.load(), 1);
    db->Flush();
    db.reset();
    auto direct = w.Direct();
    EXPECT_EQ(ImagesOf(*direct, c.docs), After(c));
    ExpectMarker(w, id);
    ExpectClean(*w.mem, {kC});
  }
}

TEST(FlipCacheAttackProofFirst, ReaderWhoseProofLosesToTheCompactedFlip) {
  ProofLosesToTheCompactedFlip(Prover::kReader);
}

// Database::Outcome's proof (ResolveStaging) reads the record staging and every document held
// (the commit condition), then its compare-and-swap loses to the finisher's flip (kConflict).
// Outcome must read the record again and answer kCommitted, as the reader does
// (engine/reads.cpp); it used to answer kPending on any unresolved proof.
TEST(FlipCacheAttackProofFirst, OutcomeWhoseProofLosesToTheCompactedFlip) {
  ProofLosesToTheCompactedFlip(Prover::kOutcome);
}

// ---------------------------------------------------------------------------------------------
// The two changes together, without a crash loop.

// A Database keeps images of a and b (it wrote them last, one action each: the one-write path).
// Another Database commits a +1000 and b -1000 in parallel and dies right after its compacted
// flip: a and b are held by a committed record that has no reversing data. The first Database
// then writes from its stale images: each write must be evaluated on the committed values
// (finishing the hold on the way), never on the cached ones; an expected version taken from
// the cache must fail with the committed version as current.
TEST(FlipCacheAttackStaleCache, OneWriteFromAStaleImageMeetsACompactedCommittedHold) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    World w;
    auto direct = w.Direct();
    MustCommit(*direct, Transaction().Insert(kC, "a", Obj(R"({"n":100})")));
    MustCommit(*direct, Transaction().Insert(kC, "b", Obj(R"({"n":0})")));
    litetx::CountingStore* counting = nullptr;
    auto counted = std::make_shared<litetx::CountingStore>(w.mem);
    counting = counted.get();
    Database mine(counted, Par(w, true));
    MustCommit(mine, Transaction().Adjust(kC, "a", Obj(R"({"n":1})")));  // a V(2) {"n":101}
    MustCommit(mine, Transaction().Adjust(kC, "b", Obj(R"({"n":1})")));  // b V(2) {"n":1}
    mine.Flush();
    counting->Reset();
    MustCommit(mine, Transaction().Adjust(kC, "a", Obj(R"({"n":1})")));  // from the cache
    EXPECT_EQ(counting->counts().gets, 0u) << "the cache is not warm";   // a V(3) {"n":102}

    Front other(w.mem);
    other.kill_after = [](const Call& c, const Status& st) { return c.is_commit_point() && st.ok(); };
    {
      Database dead(other.store(), Par(w, false));
      EXPECT_THROW((void)dead.Commit(Transaction()
                                         .Adjust(kC, "a", Obj(R"({"n":1000})"))
                                         .Adjust(kC, "b", Obj(R"({"n":-1000})"))),
                   SimulatedCrash);
    }
    const std::string held_by = other.txn();
    ASSERT_EQ(MetaOf(*w.mem, K("a")).txn, held_by);
    // Committed: a V(4) {"n":1102}, b V(3) {"n":-999}.
    switch (variant) {
      case 0: {
        auto r = mine.Commit(Transaction().Adjust(kC, "a", Obj(R"({"n":5})")));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_EQ(r->versions, std::vector<std::uint64_t>{V(5)});
        EXPECT_EQ(ReadImage(*direct, kC, "a"), Found(V(5), Obj(R"({"n":1107})")));
        break;
      }
      case 1: {
        auto r = mine.Commit(Transaction().Update(kC, "a", Obj(R"({"s":1})"), {}, V(3)));
        EXPECT_EQ(r.code(), Code::kConflict) << r.status().ToString();
        EXPECT_EQ(r.status().current_version(), std::optional<std::uint64_t>(V(4)));
        auto ok = mine.Commit(Transaction().Update(kC, "a", Obj(R"({"s":1})"), {}, V(4)));
        ASSERT_TRUE(ok.ok()) << ok.status().ToString();
        EXPECT_EQ(ReadImage(*direct, kC, "a"), Found(V(5), Obj(R"({"n":1102,"s":1})")));
        break;
      }
      case 2: {
        auto r = mine.Commit(Transaction().Delete(kC, "b"));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_EQ(ReadImage(*direct, kC, "b"), DeletedImage(V(5)));
        break;
      }
      case 3: {
        // Both from stale images in one parallel commit: the fallback, then the classic path.
        auto r = mine.Commit(Transaction()
                                 .Adjust(kC, "a", Obj(R"({"n":-2})"))
                                 .Adjust(kC, "b", Obj(R"({"n":2})")));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        mine.Flush();
        EXPECT_EQ(ReadImage(*direct, kC, "a"), Found(V(5), Obj(R"({"n":1100})")));
        EXPECT_EQ(ReadImage(*direct, kC, "b"), Found(V(4), Obj(R"({"n":-997})")));
        break;
      }
    }
    mine.Flush();
    EXPECT_EQ(OutcomeOf(*direct, held_by), TxnOutcome::kCommitted);
    w.clock->Advance(3 * Par(w, false).lease);
    Collect(w);
    ExpectClean(*w.mem, {kC});
  }
}

// The finisher's flip lands but every finishing write of the documents fails (the store is
// down for them) until the finisher gives up: the record is committed (compacted) and every
// document still held. The same Database then reads them and writes them again: it must see
// and build on the committed values; the collector then writes the marker.
TEST(FlipCacheAttackStaleCache, FinisherGaveUpAfterTheFlipSameDatabaseGoesOn) {
  for (bool background : {false, true}) {
    SCOPED_TRACE(background ? "background" : "inline");
    World w;
    Seed(w);
    Case c = MakeCase("UADIT");
    Front front(w.mem);
    std::atomic<bool> flipped{false};
    std::atomic<bool> down{true};
    front.before_extra = [&](const Call& call) -> std::optional<Status> {
      if (flipped.load() && down.load() && call.is_write() && !call.on_record()) {
        return Status::Unavailable("document shard down");
      }
      return std::nullopt;
    };
    front.after_extra = [&](const Call& call, const Status& st) -> std::optional<Status> {
      if (call.is_commit_point() && st.ok()) flipped = true;
      return std::nullopt;
    };
    Database db(front.store(), Par(w, background));
    auto r = db.Commit(c.txn);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    db.Flush();
    down = false;
    ASSERT_TRUE(flipped.load());
    const std::string id = r->txn_id;
    auto stored = RawRecord(w, id);
    ASSERT_TRUE(stored.has_value());
    ExpectCompacted(*stored, front.staging(), c);
    ASSERT_TRUE(AllHeldBy(w, id, c));
    EXPECT_EQ(ImagesOf(db, c.docs), After(c));
    EXPECT_EQ(OutcomeOf(db, id), TxnOutcome::kCommitted);
    // Written again by the same Database: update a (expecting the committed version), adjust
    // b, insert over d's pending delete, delete n, update t.
    auto again = db.Commit(Transaction()
                               .Update(kC, "a", Obj(R"({"q":1})"), {}, V(2))
                               .Adjust(kC, "b", Obj(R"({"n":1})"))
                               .Insert(kC, "d", Obj(R"({"k":5})"))
                               .Delete(kC, "n")
                               .Update(kC, "t", Obj(R"({"q":2})"), {}, V(4)));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    db.Flush();
    auto direct = w.Direct();
    std::map<std::string, Image> want = {
        {"a", Found(V(3), Obj(R"({"s":"y","z":true,"q":1})"))},
        {"b", Found(V(3), Obj(R"({"n":13})"))},
        {"d", Found(V(4), Obj(R"({"k":5})"))},
        {"n", DeletedImage(V(3))},
        {"t", Found(V(5), Obj(R"({"k":3,"q":2})"))}};
    EXPECT_EQ(ImagesOf(*direct, c.docs), want);
    EXPECT_EQ(OutcomeOf(*direct, id), TxnOutcome::kCommitted);
    w.clock->Advance(3 * Par(w, false).lease);
    EXPECT_EQ(Collect(w).finished, 1u) << "the first transaction's marker";
    ExpectMarker(w, id);
    ExpectClean(*w.mem, {kC});
  }
}

// ---------------------------------------------------------------------------------------------
// 4 and 5. Every crash point of a 3-document parallel commit (and its finishing), warm and cold
// cache, with and without a stale cached image.
//
// Documents: a {"n":100}, b {"n":0}, n {"k":0}; then one transaction adjusts a by +1 and b by
// -1 and deletes n. Warm: the Database under test made that transaction, so it keeps all three
// images (n's tombstone) and the commit under test reads none of them. Cold: another Database
// made it. The transaction under test: a -30, b +30, insert n {"k":1} over the tombstone.
// Stale: after the warm-up another Database adjusts a by +1000 (the commit must keep it) or
// inserts n again (the commit must fail with kConflict and leave nothing).

// kHeld: another Database commits a +1000, b -1000 in parallel and dies right after its
// compacted flip: a and b are held by a committed record without reversing data, and the cached
// images of both are stale.
enum class Stale { kNone, kA, kN, kHeld };

Transaction Transfer() {
  return Transaction()
      .Adjust(kC, "a", Obj(R"({"n":-30})"))
      .Adjust(kC, "b", Obj(R"({"n":30})"))
      .Insert(kC, "n", Obj(R"({"k":1})"));
}

const std::vector<std::string> kTri = {"a", "b", "n"};

// state and body only (a rollback moves versions on).
bool SameContent(const Image& x, const Image& y) { return x.state == y.state && x.doc == y.doc; }

// Prepares the store (and, if warm, db's cache), then the stale change. Returns the images
// before the commit under test.
std::map<std::string, Image> Prepare(World& w, Front& front, Database& db, bool warm, Stale stale) {
  auto direct = w.Direct();
  MustCommit(*direct, Transaction().Insert(kC, "a", Obj(R"({"n":100})")));
  MustCommit(*direct, Transaction().Insert(kC, "b", Obj(R"({"n":0})")));
  MustCommit(*direct, Transaction().Insert(kC, "n", Obj(R"({"k":0})")));
  Transaction warmup = Transaction()
                           .Adjust(kC, "a", Obj(R"({"n":1})"))
                           .Adjust(kC, "b", Obj(R"({"n":-1})"))
                           .Delete(kC, "n");
  front.Reset();
  MustCommit(warm ? db : *direct, warmup);
  db.Flush();
  if (stale == Stale::kA) MustCommit(*direct, Transaction().Adjust(kC, "a", Obj(R"({"n":1000})")));
  if (stale == Stale::kN) MustCommit(*direct, Transaction().Insert(kC, "n", Obj(R"({"k":77})")));
  if (stale == Stale::kHeld) {
    Front other(w.mem);
    other.kill_after = [](const Call& c, const Status& s) { return c.is_commit_point() && s.ok(); };
    Database dead(other.store(), Par(w, false));
    EXPECT_THROW((void)dead.Commit(Transaction()
                                       .Adjust(kC, "a", Obj(R"({"n":1000})"))
                                       .Adjust(kC, "b", Obj(R"({"n":-1000})"))),
                 SimulatedCrash);
    auto rec = RawRecord(w, other.txn());
    EXPECT_TRUE(rec.has_value() && rec->at("state") == json::value("committed") &&
                !rec->at("actions").as_array()[0].as_object().contains("fields"))
        << "not a compacted committed record";
    EXPECT_EQ(MetaOf(*w.mem, K("a")).txn, other.txn());
    EXPECT_EQ(MetaOf(*w.mem, K("b")).txn, other.txn());
  }
  std::map<std::string, Image> out;
  for (const auto& id : kTri) out[id] = ReadImage(*direct, kC, id);
  return out;
}

// What one run crashing after call k (0: never) left.
struct RunReport {
  bool crashed = false;
  long calls = 0;
  std::optional<litetx::Result<litetx::CommitInfo>> result;  // absent: Commit itself crashed
  std::map<std::string, Image> before, mid, after;
  std::string txn;
  TxnOutcome outcome = TxnOutcome::kNotFound;
  std::string trace;
  std::map<std::string, int> gets_on_docs;
};

// Who settles what the dead coordinator left: a reader before the lease then a collector past
// it; a collector alone; or a writer of another Database that sets b.w before the lease (and,
// if b is held by a transaction it cannot settle yet, again past the lease) then a collector.
enum class Settler { kReader, kCollector, kWriter };
const char* SettlerName(Settler s) {
  return s == Settler::kReader ? "reader" : s == Settler::kCollector ? "collector" : "writer";
}

RunReport RunOnce(bool background, bool warm, Stale stale, long k, Settler settler) {
  RunReport rep;
  World w;
  Front front(w.mem);
  {
    Database db(front.store(), Par(w, background));
    rep.before = Prepare(w, front, db, warm, stale);
    std::map<std::string, int> gets_before;
    for (const auto& id : kTri) gets_before[id] = front.store()->calls(Op::kGet, K(id));
    front.Reset(k);
    try {
      rep.result = db.Commit(Transfer());
    } catch (const SimulatedCrash&) {
    }
    db.Flush();
    rep.crashed = front.dead();
    rep.calls = front.calls();
    rep.txn = front.txn();
    rep.trace = front.Trace();
    for (const auto& id : kTri) {
      rep.gets_on_docs[id] = front.store()->calls(Op::kGet, K(id)) - gets_before[id];
    }
  }
  auto direct = w.Direct();
  auto strip = [](std::map<std::string, Image>& m) {
    EXPECT_EQ(m["b"].doc.erase("w"), 1u) << "the writer's change to b is lost";
  };
  switch (settler) {
    case Settler::kReader:
      // Before the lease: what a reader sees now (it may prove a staging record).
      for (const auto& id : kTri) rep.mid[id] = ReadImage(*direct, kC, id);
      break;
    case Settler::kCollector:
      break;
    case Settler::kWriter: {
      Database writer(w.mem, Par(w, false));
      auto r = writer.Commit(Transaction().Update(kC, "b", Obj(R"({"w":1})")));
      if (!r.ok()) {
        EXPECT_EQ(r.code(), Code::kBusy) << r.status().ToString();
        w.clock->Advance(3 * Par(w, false).lease);
        r = writer.Commit(Transaction().Update(kC, "b", Obj(R"({"w":1})")));
        EXPECT_TRUE(r.ok()) << "past the lease: " << r.status().ToString();
      }
      for (const auto& id : kTri) rep.mid[id] = ReadImage(*direct, kC, id);
      strip(rep.mid);
      break;
    }
  }
  // A collector well past every lease and deadline.
  w.clock->Advance(3 * Par(w, false).lease);
  for (int i = 0; i < 2; ++i) Collect(w);
  for (const auto& id : kTri) rep.after[id] = ReadImage(*direct, kC, id);
  if (settler == Settler::kWriter) strip(rep.after);
  if (!rep.txn.empty()) rep.outcome = OutcomeOf(*direct, rep.txn);
  ExpectClean(*w.mem, {kC});
  return rep;
}

// Which of the two the images are: 1 all new, 0 none, -1 a mix or something else.
// loose: b is compared by content only (a writer of another Database wrote it since).
int Classify(const std::map<std::string, Image>& got, const std::map<std::string, Image>& before,
             const std::map<std::string, Image>& applied, bool loose = false) {
  bool all_new = true, none = true;
  for (const auto& id : kTri) {
    all_new = all_new && (loose && id == "b" ? SameContent(got.at(id), applied.at(id))
                                             : got.at(id) == applied.at(id));
    none = none && SameContent(got.at(id), before.at(id)) &&
           got.at(id).version >= before.at(id).version;
  }
  if (all_new) return 1;
  if (none) return 0;
  return -1;
}

std::string Show(const std::map<std::string, Image>& m) {
  std::string s;
  for (const auto& [id, img] : m) {
    std::ostringstream os;
    os << img;
    s += id + "=" + os.str() + "; ";
  }
  return s;
}

int CrashLoop(bool background, bool warm, Stale stale) {
  const std::string mode = std::string(background ? "background" : "inline") +
                           (warm ? " warm" : " cold") +
                           (stale == Stale::kA   ? " stale-a"
                            : stale == Stale::kN ? " stale-n"
                            : stale == Stale::kHeld ? " stale-held-by-compacted"
                                                    : "");
  SCOPED_TRACE(mode);
  // The reference: no crash.
  RunReport ref = RunOnce(background, warm, stale, 0, Settler::kReader);
  EXPECT_FALSE(ref.crashed);
  if (!ref.result.has_value()) {
    ADD_FAILURE() << "the reference run crashed";
    return 0;
  }
  const bool should_commit = stale != Stale::kN;
  EXPECT_EQ(ref.result->ok(), should_commit) << ref.result->status().ToString();
  if (stale == Stale::kN) {
    EXPECT_EQ(ref.result->code(), Code::kConflict);
  }
  // The values the commit leaves, with the stale change of another Database kept (never
  // reached when it must fail: then any mix of its values and the old ones is wrong).
  std::map<std::string, Image> applied = ref.after;
  if (!should_commit) {
    applied = {{"a", Found(0, Obj(R"({"n":71})"))},
               {"b", Found(0, Obj(R"({"n":29})"))},
               {"n", Found(0, Obj(R"({"k":1})"))}};
  }
  if (should_commit) {
    const bool a_moved = stale == Stale::kA || stale == Stale::kHeld;
    EXPECT_EQ(applied.at("a").doc, Obj(a_moved ? R"({"n":1071})" : R"({"n":71})"))
        << "a lost update (stale cached image written over)";
    EXPECT_EQ(applied.at("b").doc, Obj(stale == Stale::kHeld ? R"({"n":-971})" : R"({"n":29})"))
        << "a lost update (stale cached image written over)";
    EXPECT_EQ(applied.at("n").doc, Obj(R"({"k":1})"));
    EXPECT_EQ(applied.at("n").state, DocumentState::kFound);
    EXPECT_EQ(Classify(ref.after, ref.before, applied), 1);
    for (std::size_t i = 0; i < kTri.size() && ref.result->ok(); ++i) {
      EXPECT_EQ(ref.result->value().versions[i], applied.at(kTri[i]).version) << kTri[i];
    }
  } else {
    EXPECT_EQ(Classify(ref.after, ref.before, applied), 0) << Show(ref.after);
  }
  if (warm) {
    // The warm cache spares the pre-reads: nothing of the three was read before the batch,
    // unless another Database changed it (then its stale compare-and-swap makes a read).
    for (const auto& id : kTri) {
      const bool stale_doc = (stale == Stale::kA && id == "a") ||
                             (stale == Stale::kN && id == "n") ||
                             (stale == Stale::kHeld && id != "n");
      if (!stale_doc) {
        EXPECT_EQ(ref.gets_on_docs[id], 0) << id << ": " << ref.trace;
      }
    }
  }

  int points = 0;
  int runs = 0;
  bool done = false;
  for (long k = 1; k < 1000 && !done; ++k) {
    for (Settler settler : {Settler::kReader, Settler::kCollector, Settler::kWriter}) {
      RunReport rep = RunOnce(background, warm, stale, k, settler);
      if (!rep.crashed) {
        EXPECT_GT(k, 1);
        EXPECT_EQ(settler, Settler::kReader) << "crash points differ between runs";
        done = true;
        break;
      }
      if (settler == Settler::kReader) ++points;
      ++runs;
      SCOPED_TRACE("crash after call " + std::to_string(k) + ", settled by " +
                   SettlerName(settler) + ": " + rep.trace);
      const bool loose = settler == Settler::kWriter;
      const bool ok = rep.result.has_value() && rep.result->ok();
      const int fin = Classify(rep.after, rep.before, applied, loose);
      EXPECT_NE(fin, -1) << "not all-or-nothing after the collector: " << Show(rep.after);
      if (settler != Settler::kCollector) {
        const int mid = Classify(rep.mid, rep.before, applied, loose);
        EXPECT_NE(mid, -1) << "not all-or-nothing before the collector: " << Show(rep.mid);
        EXPECT_EQ(mid, fin) << SettlerName(settler) << " saw one outcome, the collector made the "
                            << "other: " << Show(rep.mid) << " / " << Show(rep.after);
      }
      if (ok) {
        EXPECT_EQ(fin, 1) << "Commit said OK, but the transaction was not applied";
        EXPECT_EQ(rep.outcome, TxnOutcome::kCommitted);
        if (fin == 1) {
          for (std::size_t i = 0; i < kTri.size(); ++i) {
            if (loose && kTri[i] == "b") continue;
            EXPECT_EQ(rep.result->value().versions[i], rep.after.at(kTri[i]).version) << kTri[i];
          }
        }
      } else if (rep.result.has_value()) {
        // A definite failure (no kUnknown is possible without lost replies): nothing applied.
        EXPECT_NE(rep.result->code(), Code::kUnknown) << rep.result->status().ToString();
        EXPECT_EQ(fin, 0) << "Commit failed (" << rep.result->status().ToString()
                          << ") but the transaction was applied";
      }
      if (fin == 1) {
        EXPECT_EQ(rep.outcome, TxnOutcome::kCommitted);
      }
      if (fin == 0 && !rep.txn.empty()) {
        EXPECT_TRUE(rep.outcome == TxnOutcome::kAborted || rep.outcome == TxnOutcome::kNotFound)
            << litetx::TxnOutcomeName(rep.outcome);
      }
      if (stale == Stale::kN) {
        EXPECT_EQ(fin, 0);
        EXPECT_EQ(rep.after.at("n").doc, Obj(R"({"k":77})"));
      }
    }
  }
  std::printf("[ FlipCacheAttack ] %s: %d crash points x 3 settlers = %d runs (reference run: "
              "%ld store calls)\n", mode.c_str(), points, runs, ref.calls);
  EXPECT_GE(points, static_cast<int>(ref.calls) - 1);
  return points;
}
// Every write of the same commit with its reply lost, once landed and once not (lost on its
// way): the Database lives on. Commit's answer must match what the store ends with (OK:
// applied; a definite error: not applied; kUnknown: whatever Outcome says after the collector),
// all-or-nothing; and the same Database's next transaction on the three documents (from its
// cache, which may now be stale) must build on the true values.
int LostReplyLoop(bool background, bool warm, Stale stale) {
  const std::string mode = std::string(background ? "background" : "inline") +
                           (warm ? " warm" : " cold") +
                           (stale == Stale::kA ? " stale-a" : stale == Stale::kHeld ? " stale-held" : "");
  SCOPED_TRACE(mode);
  int points = 0;
  for (bool landed : {true, false}) {
    for (int k = 1; k < 200; ++k) {
      World w;
      Front front(w.mem);
      std::atomic<int> writes{0};
      std::atomic<const Call*> victim{nullptr};
      Database db(front.store(), Par(w, background));
      const std::map<std::string, Image> before = Prepare(w, front, db, warm, stale);
      front.Reset();
      front.before_extra = [&](const Call& c) -> std::optional<Status> {
        if (!c.is_write() || ++writes != k) return std::nullopt;
        if (!landed) return Status::Unknown("lost on its way");
        victim = &c;
        return std::nullopt;
      };
      front.after_extra = [&](const Call& c, const Status& st) -> std::optional<Status> {
        if (victim.load() != &c) return std::nullopt;
        victim = nullptr;
        if (st.ok()) return Status::Unknown("reply lost");
        return std::nullopt;  // it failed anyway (a stale compare-and-swap): its reply stands
      };
      auto r = db.Commit(Transfer());
      db.Flush();
      if (writes.load() < k) break;  // no k-th write: done
      ++points;
      SCOPED_TRACE(std::string(landed ? "landed" : "not landed") + " write " + std::to_string(k) +
                   ": " + front.Trace() + " -> " + r.status().ToString());
      front.before_extra = nullptr;
      front.after_extra = nullptr;
      auto direct = w.Direct();
      w.clock->Advance(3 * Par(w, false).lease);
      for (int i = 0; i < 2; ++i) Collect(w);
      std::map<std::string, Image> got;
      for (const auto& id : kTri) got[id] = ReadImage(*direct, kC, id);
      const bool a_moved = stale == Stale::kA || stale == Stale::kHeld;
      const json::object a_new = Obj(a_moved ? R"({"n":1071})" : R"({"n":71})");
      const json::object b_new = Obj(stale == Stale::kHeld ? R"({"n":-971})" : R"({"n":29})");
      const bool all = got["a"].doc == a_new && got["b"].doc == b_new &&
                       got["n"].state == DocumentState::kFound && got["n"].doc == Obj(R"({"k":1})");
      bool none = true;
      for (const auto& id : kTri) none = none && SameContent(got[id], before.at(id));
      EXPECT_TRUE(all != none) << "not all-or-nothing: " << Show(got);
      const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
      if (r.ok()) {
        EXPECT_TRUE(all) << "Commit said OK, but the transaction was not applied";
      } else if (r.code() != Code::kUnknown) {
        EXPECT_TRUE(none) << "Commit failed, but the transaction was applied";
      }
      if (!id.empty()) {
        const TxnOutcome o = OutcomeOf(*direct, id);
        if (all) {
          EXPECT_EQ(o, TxnOutcome::kCommitted);
        } else {
          EXPECT_TRUE(o == TxnOutcome::kAborted || o == TxnOutcome::kNotFound)
              << litetx::TxnOutcomeName(o);
        }
      }
      ExpectClean(*w.mem, {kC});
      // The same Database goes on from its cache.
      auto next = db.Commit(Transaction()
                                .Adjust(kC, "a", Obj(R"({"n":1})"))
                                .Adjust(kC, "b", Obj(R"({"n":-1})")));
      EXPECT_TRUE(next.ok()) << next.status().ToString();
      if (!next.ok()) continue;
      db.Flush();
      json::object a_want = got["a"].doc, b_want = got["b"].doc;
      a_want["n"] = a_want["n"].to_number<std::int64_t>() + 1;
      b_want["n"] = b_want["n"].to_number<std::int64_t>() - 1;
      EXPECT_EQ(ReadImage(*direct, kC, "a").doc, a_want) << "the next commit lost an update";
      EXPECT_EQ(ReadImage(*direct, kC, "b").doc, b_want) << "the next commit lost an update";
      ExpectClean(*w.mem, {kC});
    }
  }
  std::printf("[ FlipCacheAttack ] lost replies, %s: %d writes\n", mode.c_str(), points);
  return points;
}

TEST(FlipCacheAttackCrashPoints, EveryWriteWithItsReplyLost) {
  int total = 0;
  for (bool background : {false, true}) {
    for (bool warm : {false, true}) total += LostReplyLoop(background, warm, Stale::kNone);
    total += LostReplyLoop(background, true, Stale::kA);
    total += LostReplyLoop(background, true, Stale::kHeld);
  }
  std::printf("[ FlipCacheAttack ] lost-reply points: %d\n", total);
}

TEST(FlipCacheAttackCrashPoints, EveryCallColdAndWarmInlineAndBackground) {
  int total = 0;
  for (bool background : {false, true}) {
    for (bool warm : {false, true}) total += CrashLoop(background, warm, Stale::kNone);
  }
  std::printf("[ FlipCacheAttack ] crash points, cold and warm: %d\n", total);
}

TEST(FlipCacheAttackCrashPoints, EveryCallWithAStaleCachedImage) {
  int total = 0;
  for (bool background : {false, true}) {
    for (Stale stale : {Stale::kA, Stale::kN, Stale::kHeld}) {
      total += CrashLoop(background, /*warm=*/true, stale);
    }
  }
  std::printf("[ FlipCacheAttack ] crash points, stale cache: %d\n", total);
}

}  // namespace
}  // namespace ltxtest
