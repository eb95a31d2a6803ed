// tests/large_util.h — shared set-up and checks of the large-transaction failure, crash and
// attack suites (large_failure_test.cpp, large_crash_test.cpp, large_attack_test.cpp).
//
//   * Workload: a few seeded rows and a stream of mixed actions (insert, update, adjust,
//     delete, put over a live row, put over an absent one), and its before / after contents
//     (the after contents from a fault-free run of the same actions on a fresh store).
//   * Link: a HookStore with several before / after hooks and a "death": once a chosen call is
//     reached (before it, or after its write landed) every call throws SimulatedCrash, as the
//     store link of a process that died.
//   * Store-call predicates for the steps of docs/protocol.md §9.2 (L3 count, L4 chunk, L5
//     apply, L6 flip, L7 finish, L8 marker, stub, claim...).
//   * ExpectSettled: runs collectors past the lease until no record is open, then checks all
//     or nothing (read-committed contents and the raw store), no reference left, the outcome
//     against what the coordinator reported, the chunk documents, and the purge.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/large.h"
#include "litetx/collector.h"
#include "test_util.h"

namespace ltxtest::large {

using litetx::Code;
using litetx::Database;
using litetx::DocumentState;
using litetx::LargeTransaction;
using litetx::LargeTransactionOptions;
using litetx::TxnOutcome;

inline constexpr const char* kRows = "rows";
inline const std::string& ChunksCollection() {
  static const std::string c(litetx::engine::kChunksCollection);
  return c;
}

// ---------------------------------------------------------------------------------------------
// Workloads

enum class Kind { kInsert, kUpdate, kAdjust, kDelete, kPut, kPutNew };
inline constexpr int kKinds = 6;

inline const char* KindName(Kind k) {
  switch (k) {
    case Kind::kInsert: return "insert";
    case Kind::kUpdate: return "update";
    case Kind::kAdjust: return "adjust";
    case Kind::kDelete: return "delete";
    case Kind::kPut: return "put";
    case Kind::kPutNew: return "put-new";
  }
  return "?";
}

struct Act {
  Kind kind = Kind::kInsert;
  std::string id;
  std::int64_t value = 0;
};

struct Workload {
  std::vector<std::string> ids;              // every row the actions name, in action order
  std::map<std::string, json::object> seed;  // rows that exist before (live)
  std::vector<Act> acts;
  std::string Describe() const {
    std::string s;
    for (const Act& a : acts)
      s += std::string(s.empty() ? "" : ", ") + KindName(a.kind) + " " + a.id;
    return s;
  }
};

inline std::string RowId(int i) { return "r" + std::to_string(i); }

// `n` actions on rows r0..r(n-1), one each, their kinds cycling through Kind from `rotate`.
// Rows an update, adjust, delete or put acts on are seeded live {"n": i, "keep": true}.
inline Workload Mixed(int n, int rotate = 0) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    Act a;
    a.kind = static_cast<Kind>((i + rotate) % kKinds);
    a.id = RowId(i);
    a.value = 1000 + i;
    w.ids.push_back(a.id);
    if (a.kind != Kind::kInsert && a.kind != Kind::kPutNew) {
      w.seed[a.id] = json::object{{"n", i}, {"keep", true}};
    }
    w.acts.push_back(a);
  }
  return w;
}

// Adds `a` to `txn` (tag: its index + 1).
inline litetx::Status AddAct(LargeTransaction& txn, const Act& a, std::uint64_t tag) {
  switch (a.kind) {
    case Kind::kInsert: return txn.Insert(kRows, a.id, {{"n", a.value}, {"b", "T"}}, tag);
    case Kind::kUpdate: return txn.Update(kRows, a.id, {{"n", a.value}, {"b", "T"}}, {"keep"}, tag);
    case Kind::kAdjust: return txn.Adjust(kRows, a.id, {{"n", 1000}}, tag);
    case Kind::kDelete: return txn.Delete(kRows, a.id, tag);
    case Kind::kPut:
    case Kind::kPutNew: return txn.Put(kRows, a.id, {{"n", a.value}, {"b", "T"}}, tag);
  }
  return litetx::Status::InvalidArgument("bad kind");
}

// What a read-committed reader sees of one row, without the version (rollbacks bump it).
struct Content {
  DocumentState state = DocumentState::kNotFound;
  json::object doc;
  friend bool operator==(const Content& a, const Content& b) {
    return a.state == b.state && a.doc == b.doc;
  }
};
inline std::string Show(const Content& c) {
  return std::string(litetx::DocumentStateName(c.state)) +
         (c.state == DocumentState::kFound ? " " + json::serialize(c.doc) : "");
}
inline void PrintTo(const Content& c, std::ostream* os) { *os << Show(c); }
inline std::string Show(const std::vector<Content>& cs) {
  std::string s;
  for (const Content& c : cs) s += (s.empty() ? "" : " | ") + Show(c);
  return s;
}

// Read-committed contents of `ids` through `db` (a read error is a test failure).
inline std::vector<Content> ReadAll(Database& db, const std::vector<std::string>& ids) {
  std::vector<Content> out;
  for (const std::string& id : ids) {
    auto r = db.Read(kRows, id);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status().ToString();
    out.push_back(r.ok() ? Content{r->state, r->doc} : Content{});
  }
  return out;
}

// Stored versions ("_ltx".v) of `ids`; 0 if absent.
inline std::vector<std::uint64_t> RawVersions(litetx::Store& store,
                                              const std::vector<std::string>& ids) {
  std::vector<std::uint64_t> out;
  for (const std::string& id : ids) {
    auto g = store.Get(Key{kRows, id});
    std::uint64_t v = 0;
    if (g.ok() && g->has_value()) {
      auto m = litetx::engine::DecodeMeta((*g)->value);
      if (m.ok()) v = m->version;
    }
    out.push_back(v);
  }
  return out;
}

// The usual test world, with a Database straight on the memory store for seeding and checks.
struct LargeWorld : World {
  std::unique_ptr<Database> direct = Direct();

  void Seed(const Workload& wl) {
    if (wl.seed.empty()) return;
    litetx::Transaction t;
    for (const auto& [id, doc] : wl.seed) t.Insert(kRows, id, doc);
    MustCommit(*direct, t);
    // The seeding transaction's outcome marker goes: the tests count records and markers.
    for (const auto& [id, doc] : ScanAll(*mem, litetx::kTransactionsCollection)) {
      EXPECT_TRUE(mem->Erase(TxnKey(id), doc.revision).ok());
    }
  }
  litetx::CollectorOptions Gc(std::string name = "gc-a") const {
    litetx::CollectorOptions o;
    o.engine = Opts();
    o.name = std::move(name);
    return o;
  }
};

// The contents of a workload's rows before it and after a fault-free run of it.
struct Expect {
  std::vector<std::string> ids;
  std::vector<Content> before, after;
  std::vector<std::uint64_t> before_versions;
  std::uint64_t writes = 0;  // store writes of the fault-free run
};

inline LargeTransactionOptions Chunked(std::size_t n, bool settle = true) {
  LargeTransactionOptions o;
  o.chunk_actions = n;
  o.settle = settle;
  return o;
}

// Runs `wl` fault-free on a fresh world (chunks of `chunk`) and returns the contents before
// and after it.
inline Expect Plan(const Workload& wl, std::size_t chunk) {
  Expect e;
  e.ids = wl.ids;
  LargeWorld w;
  w.Seed(wl);
  e.before = ReadAll(*w.direct, wl.ids);
  e.before_versions = RawVersions(*w.mem, wl.ids);
  auto counting = std::make_shared<litetx::FaultInjectingStore>(w.mem, litetx::FaultOptions{});
  Database db(counting, w.Opts());
  auto txn = db.BeginLarge(Chunked(chunk));
  EXPECT_TRUE(txn.ok()) << txn.status().ToString();
  if (!txn.ok()) return e;
  for (std::size_t i = 0; i < wl.acts.size(); ++i) {
    litetx::Status s = AddAct(**txn, wl.acts[i], i + 1);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  auto info = (*txn)->Commit();
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  e.writes = counting->writes();
  e.after = ReadAll(*w.direct, wl.ids);
  EXPECT_NE(Show(e.before), Show(e.after)) << "a workload that changes nothing tells nothing";
  return e;
}

// ---------------------------------------------------------------------------------------------
// Link: a HookStore with hook lists and a death.

class Link : public HookStore {
 public:
  explicit Link(std::shared_ptr<litetx::Store> target) : HookStore(std::move(target)) {
    HookStore::before = [this](const Call& c) -> std::optional<Status> {
      if (dead_.load()) throw litetx::SimulatedCrash(0);
      if (die_before_ && die_before_(c)) {
        dead_ = true;
        throw litetx::SimulatedCrash(0);
      }
      for (auto& b : befores) {
        if (auto s = b(c)) return s;
      }
      return std::nullopt;
    };
    HookStore::after = [this](const Call& c, const Status& s) -> std::optional<Status> {
      if (s.ok() && c.is_write() && die_after_ && die_after_(c)) {
        dead_ = true;
        throw litetx::SimulatedCrash(0);
      }
      for (auto& a : afters) {
        if (auto r = a(c, s)) return r;
      }
      return std::nullopt;
    };
  }
  // Hooks, tried in order (the first that returns a Status wins). Set before the store is used.
  std::vector<HookStore::Before> befores;
  std::vector<HookStore::After> afters;
  // The process dies right after a write matching `when` lands (its reply never comes back).
  void DieAfter(std::function<bool(const Call&)> when) { die_after_ = std::move(when); }
  // The process dies as a call matching `when` starts: nothing of it reaches the store.
  void DieBefore(std::function<bool(const Call&)> when) { die_before_ = std::move(when); }
  bool dead() const { return dead_.load(); }

 private:
  std::function<bool(const Call&)> die_after_, die_before_;
  std::atomic<bool> dead_{false};
};

// Hooks that report a lost reply (kUnknown) after the write landed, for calls matching `when`
// (the first `times` of them).
inline HookStore::After LoseReply(std::function<bool(const Call&)> when, int times = kForever) {
  auto left = std::make_shared<std::atomic<int>>(times);
  return [=](const Call& c, const Status& s) -> std::optional<Status> {
    if (!s.ok() || !c.is_write() || !when(c)) return std::nullopt;
    if (times != kForever && left->fetch_sub(1) <= 0) return std::nullopt;
    return Status::Unknown("injected lost reply");
  };
}
// A before hook failing calls matching `when` with `code` (the first `times` of them) without
// reaching the store.
inline HookStore::Before Refuse(std::function<bool(const Call&)> when, Code code,
                                int times = kForever) {
  auto left = std::make_shared<std::atomic<int>>(times);
  return [=](const Call& c) -> std::optional<Status> {
    if (!when(c)) return std::nullopt;
    if (times != kForever && left->fetch_sub(1) <= 0) return std::nullopt;
    return Status(code, "injected failure");
  };
}

// ---------------------------------------------------------------------------------------------
// Store-call predicates (docs/protocol.md §9.2)

inline bool IsRows(const Call& c) { return c.key.collection == kRows; }
inline bool IsChunkKey(const Call& c) { return c.key.collection == ChunksCollection(); }
inline std::uint64_t ChunkIndex(const Call& c) {
  auto dot = c.key.id.rfind('.');
  return dot == std::string::npos ? UINT64_MAX : std::stoull(c.key.id.substr(dot + 1));
}
// The holder a write stores ("" for none or no value).
inline std::string HolderOf(const Call& c) {
  if (c.value == nullptr) return "";
  auto m = litetx::engine::DecodeMeta(*c.value);
  return m.ok() ? m->txn : "";
}
inline bool IsStubValue(const Call& c) {
  return c.value != nullptr && c.value->if_contains("fence") != nullptr;
}
// L1: the record create.
inline bool IsRecordCreate(const Call& c) { return c.op == Op::kCreate && c.on_record(); }
// L3: the record CAS counting chunk k (chunks = k + 1), pending.
inline bool IsCount(const Call& c, std::uint64_t k) {
  if (c.op != Op::kReplace || !c.on_record() || c.record_state() != "pending" || c.is_marker()) {
    return false;
  }
  const json::value* n = c.value->if_contains("chunks");
  return n != nullptr && n->is_number() && n->to_number<std::uint64_t>() == k + 1;
}
inline bool IsAnyCount(const Call& c) {
  return c.op == Op::kReplace && c.on_record() && c.record_state() == "pending";
}
// L4: the create of chunk k (by its coordinator: not a stub).
inline bool IsChunkCreate(const Call& c, std::uint64_t k) {
  return c.op == Op::kCreate && IsChunkKey(c) && ChunkIndex(c) == k && !IsStubValue(c);
}
// L5a: a rewrite of a chunk (not a stub).
inline bool IsChunkRewrite(const Call& c) {
  return c.op == Op::kReplace && IsChunkKey(c) && !IsStubValue(c);
}
// A stub written (replacing a chunk, or taking an absent chunk's key).
inline bool IsStubWrite(const Call& c) { return IsChunkKey(c) && IsStubValue(c); }
inline bool IsChunkErase(const Call& c) { return c.op == Op::kErase && IsChunkKey(c); }
// L5: an apply (a write of a row that leaves it held).
inline bool IsApply(const Call& c) {
  return IsRows(c) && (c.op == Op::kCreate || c.op == Op::kReplace) && !HolderOf(c).empty();
}
// L7 / rollback / fence: a write of a row that leaves it free.
inline bool IsRowRelease(const Call& c) { return IsRows(c) && c.is_write() && HolderOf(c).empty(); }
inline bool IsFlip(const Call& c) { return c.is_commit_point(); }
inline bool IsAbort(const Call& c) { return c.is_abort_flip(); }
inline bool IsMarkerWrite(const Call& c) { return c.op == Op::kReplace && c.is_marker(); }
inline bool IsRecordErase(const Call& c) { return c.op == Op::kErase && c.on_record(); }

// ---------------------------------------------------------------------------------------------
// Checks

// What the coordinator reported.
enum class Said { kNothing, kCommitted, kFailed, kUnknown };

inline Said SaidOf(const litetx::Status& s) {
  if (s.ok()) return Said::kCommitted;
  return s.code() == Code::kUnknown ? Said::kUnknown : Said::kFailed;
}

// The record of `id` as stored now (nullopt if absent).
inline std::optional<litetx::engine::TxnRecord> LargeRecord(LargeWorld& w, const std::string& id) {
  return RecordOf(*w.mem, id);
}

// The rows read now are all before or all after, and which one agrees with the record: after
// once it is committed, before while it is pending or aborted (or absent). Returns true for
// after. Also a reader that ignored the hold (raw values) fails here.
inline bool ExpectAtomicNow(LargeWorld& w, const Expect& e, const std::string& id,
                            const std::string& where = "") {
  std::vector<Content> now = ReadAll(*w.direct, e.ids);
  const bool is_after = now == e.after;
  EXPECT_TRUE(is_after || now == e.before)
      << where << ": a partial transaction is visible:\n  now    " << Show(now) << "\n  before "
      << Show(e.before) << "\n  after  " << Show(e.after);
  if (!id.empty()) {
    auto rec = LargeRecord(w, id);
    const bool committed = rec && rec->state == litetx::engine::TxnState::kCommitted;
    EXPECT_EQ(is_after, committed)
        << where << ": the reads disagree with the record ("
        << (rec ? litetx::engine::TxnStateName(rec->state) : "absent") << ")";
  }
  return is_after;
}

// Every chunk document of `id` (key, decoded).
inline std::vector<std::pair<std::string, litetx::engine::Chunk>> ChunksOf(litetx::Store& store,
                                                                           const std::string& id) {
  std::vector<std::pair<std::string, litetx::engine::Chunk>> out;
  for (auto& [key, doc] : ScanAll(store, ChunksCollection())) {
    auto c = litetx::engine::DecodeChunk(doc.value);
    EXPECT_TRUE(c.ok()) << key << ": " << c.status().ToString();
    if (c.ok() && c->txn == id) out.emplace_back(key, *c);
  }
  return out;
}

// Runs collector passes (clock past the lease first) until no record is open, at most `runs`.
// Returns the open records left.
inline std::size_t Collect(LargeWorld& w, std::shared_ptr<litetx::Store> store = nullptr,
                           int runs = 4, const std::string& name = "gc-a") {
  w.clock->Advance(130s);
  litetx::Collector gc(store ? store : w.mem, w.Gc(name));
  for (int i = 0; i < runs && RecordCount(*w.mem) > 0; ++i) (void)gc.RunOnce();
  return RecordCount(*w.mem);
}

struct Settled {
  bool committed = false;
  bool ok = false;  // every check passed
};

// After the coordinator stopped (reported `said`, or died): collectors until nothing is open,
// then: all rows before or all after (read committed, and raw: no reference, no deleting flag,
// no open record), Database::Outcome says which (and agrees with what was reported: a reported
// outcome never changes), versions never went down, the chunk documents (none left if
// committed; only stubs if aborted), and after the purge no chunk document, no marker, the same
// rows, and Outcome kNotFound. `id` may be empty (unknown: the only record found is taken).
inline Settled ExpectSettled(LargeWorld& w, const Expect& e, std::string id, Said said,
                             const std::string& where = "") {
  Settled out;
  if (id.empty()) {
    auto all = ScanAll(*w.mem, litetx::kTransactionsCollection);
    if (all.size() == 1) id = all[0].first;
  }
  const std::optional<TxnOutcome> outcome_before =
      id.empty() ? std::nullopt : std::optional<TxnOutcome>(OutcomeOf(*w.direct, id));
  // A record that was never written (a record create that failed) leaves nothing to answer.
  const bool had_record = !id.empty() && RecordOf(*w.mem, id).has_value();
  ExpectAtomicNow(w, e, id, where + " (before the collector)");
  EXPECT_EQ(Collect(w), 0u) << where << ": records left open after the collector";
  std::vector<Content> now = ReadAll(*w.direct, e.ids);
  out.committed = now == e.after;
  EXPECT_TRUE(out.committed || now == e.before)
      << where << ": neither all nor nothing after the collector:\n  now    " << Show(now)
      << "\n  before " << Show(e.before) << "\n  after  " << Show(e.after);
  ExpectClean(*w.mem, {kRows});
  if (said == Said::kCommitted) {
    EXPECT_TRUE(out.committed) << where << ": reported committed";
  }
  if (said == Said::kFailed) {
    EXPECT_FALSE(out.committed) << where << ": reported failed";
  }
  if (!id.empty()) {
    const TxnOutcome o = OutcomeOf(*w.direct, id);
    EXPECT_EQ(o, out.committed ? TxnOutcome::kCommitted
                 : had_record  ? TxnOutcome::kAborted
                               : TxnOutcome::kNotFound)
        << where;
    if (outcome_before == TxnOutcome::kCommitted || outcome_before == TxnOutcome::kAborted) {
      EXPECT_EQ(o, *outcome_before) << where << ": Outcome changed its answer";
    }
    for (const auto& [key, chunk] : ChunksOf(*w.mem, id)) {
      EXPECT_FALSE(out.committed) << where << ": chunk " << key
                                  << " left by a committed transaction";
      EXPECT_TRUE(chunk.fence) << where << ": chunk " << key
                               << " of an aborted transaction is no stub";
    }
  } else if (said != Said::kFailed) {
    // No record at all: nothing may have been written.
    EXPECT_FALSE(out.committed) << where;
  }
  std::vector<std::uint64_t> v = RawVersions(*w.mem, e.ids);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (e.before_versions[i] != 0) {
      EXPECT_GE(v[i], e.before_versions[i]) << where << ": version of " << e.ids[i] << " went down";
    }
  }
  // The purge: the marker and every stub go, nothing else changes.
  w.clock->Advance(25h);
  litetx::Collector purge(w.mem, w.Gc("gc-purge"));
  EXPECT_TRUE(purge.RunOnce().ok()) << where;
  EXPECT_TRUE(ScanAll(*w.mem, ChunksCollection()).empty())
      << where << ": chunk documents after the purge";
  EXPECT_EQ(MarkerCount(*w.mem), 0u) << where << ": markers after the purge";
  EXPECT_EQ(ReadAll(*w.direct, e.ids), now) << where << ": the purge changed rows";
  if (!id.empty()) {
    EXPECT_EQ(OutcomeOf(*w.direct, id), TxnOutcome::kNotFound) << where;
  }
  out.ok = !::testing::Test::HasFailure();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Driving a coordinator

// What a coordinator run did and said.
struct Drove {
  std::string id;
  Said said = Said::kNothing;
  litetx::Status status;  // the error reported by Begin, Add or Commit (OK if committed)
  litetx::LargeCommitInfo info;
  bool crashed = false;
};

struct DriveOptions {
  LargeTransactionOptions txn = Chunked(2);
  bool settle_after = false;      // with txn.settle off: call Settle() after a successful Commit
  bool rollback_instead = false;  // call Rollback() instead of Commit()
  bool die_after_begin = false;   // the process dies right after BeginLarge returned
};

// Runs `wl` through `store`: BeginLarge, every action, Commit (or Rollback). A SimulatedCrash
// ends the run as a process death: the handle is dropped without its destructor.
inline Drove Drive(LargeWorld& w, std::shared_ptr<litetx::Store> store, const Workload& wl,
                   DriveOptions d = {}, std::optional<litetx::Options> dbo = std::nullopt) {
  Drove out;
  Database db(std::move(store), dbo ? *dbo : w.Opts());
  auto t = db.BeginLarge(d.txn);
  if (!t.ok()) {
    out.status = t.status();
    out.id = t.status().txn_id();
    out.said = SaidOf(t.status());
    return out;
  }
  out.id = (*t)->id();
  if (d.die_after_begin) {
    out.crashed = true;
    (void)t->release();
    return out;
  }
  try {
    for (std::size_t i = 0; i < wl.acts.size(); ++i) {
      litetx::Status s = AddAct(**t, wl.acts[i], i + 1);
      if (!s.ok()) {
        out.status = s;
        out.said = SaidOf(s);
        return out;
      }
    }
    if (d.rollback_instead) {
      out.status = (*t)->Rollback();
      out.said = Said::kFailed;  // rolled back on request: never committed
      return out;
    }
    auto r = (*t)->Commit();
    out.status = r.status();
    out.said = SaidOf(r.status());
    if (r.ok()) out.info = *r;
    if (r.ok() && d.settle_after) {
      litetx::Status s = (*t)->Settle();
      out.info.settled = s.ok();
    }
  } catch (const litetx::SimulatedCrash&) {
    out.crashed = true;
    (void)t->release();  // a dead process runs no destructor
  }
  return out;
}

// A collector pass now on the raw store, with the clock past every lease: what a collector
// does while the coordinator is paused.
inline litetx::CollectorStats CollectNow(LargeWorld& w, const std::string& name = "gc-b") {
  w.clock->Advance(130s);
  litetx::Collector gc(w.mem, w.Gc(name));
  (void)gc.RunOnce();
  return gc.stats();
}

// Runs `fn` the first time only.
struct Once {
  std::atomic<bool> done{false};
  bool operator()() { return !done.exchange(true); }
};

}  // namespace ltxtest::large
