// tests/large_attack_test.cpp — a hostile scheduler against large transactions: the coordinator
// is paused (a Gate in its store link) between two store calls, in particular right after a lost
// reply and before it reads back, until past its lease; meanwhile collectors (one, or two at
// once), a writer that meets one of its held documents and a reader act; then it resumes.
// Checked every time: the outcome it reports is the truth (reported committed: every row there,
// and still there after more collector runs; a failure: none), reads during the pause show all
// or nothing in agreement with the record, no write of the paused coordinator that could change
// the outcome (a count, a chunk create or rewrite, an apply, the flip) lands after a collector or
// writer claimed it, and nothing stays held.
//
// Workload: large_util.h Mixed(6) in chunks of 2 (chunk 0: insert r0, update r1; chunk 1:
// adjust r2, delete r3; chunk 2: put r4, put r5 over an absent row).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "large_util.h"

namespace ltxtest::large {
namespace {

using litetx::Collector;
using litetx::SimulatedCrash;
using litetx::Transaction;
using litetx::engine::TxnState;

// A coordinator running on its own thread through a Link that pauses it at the first call
// matching `pause_at`, and that records which outcome-changing writes landed after it resumed.
struct Paused {
  LargeWorld& w;
  std::shared_ptr<Link> link;
  Gate gate;
  std::atomic<bool> resumed{false};
  std::mutex mu;
  std::vector<std::string> late;  // outcome-changing writes that landed after the resume
  Drove drove;
  std::unique_ptr<Async> run;

  Paused(LargeWorld& world, const Workload& wl, std::function<bool(const Call&)> pause_at,
         std::vector<HookStore::After> afters = {}, DriveOptions o = {})
      : w(world), link(std::make_shared<Link>(world.mem)) {
    auto once = std::make_shared<std::atomic<bool>>(false);
    link->befores.push_back([this, pause_at, once](const Call& c) -> std::optional<Status> {
      if (pause_at(c) && !once->exchange(true)) gate.Hold();
      return std::nullopt;
    });
    link->afters.push_back([this](const Call& c, const Status& s) -> std::optional<Status> {
      if (s.ok() && resumed && c.is_write() &&
          (IsAnyCount(c) || IsApply(c) || IsFlip(c) ||
           (IsChunkKey(c) && !IsStubValue(c) && c.op != Op::kErase))) {
        std::lock_guard<std::mutex> lock(mu);
        late.push_back(std::string(OpName(c.op)) + " " + c.key.collection + "/" + c.key.id);
      }
      return std::nullopt;
    });
    for (auto& a : afters) link->afters.push_back(std::move(a));
    run = std::make_unique<Async>([this, &wl, o] { drove = Drive(w, link, wl, o); });
  }
  // A test that stops early still lets the coordinator go before joining it.
  ~Paused() {
    resumed = true;
    gate.Open();
    run.reset();
  }
  // Waits until the coordinator is held at its pause.
  bool Held() { return gate.WaitHeld(1); }
  // Resumes it and waits for it to return.
  bool Resume() {
    resumed = true;
    gate.Open();
    return run->Wait(20s);
  }
  std::vector<std::string> Late() {
    std::lock_guard<std::mutex> lock(mu);
    return late;
  }
};

// One collector pass on the raw store past every lease.
litetx::CollectorStats Pass(LargeWorld& w, const std::string& name) {
  w.clock->Advance(130s);
  Collector gc(w.mem, w.Gc(name));
  (void)gc.RunOnce();
  return gc.stats();
}

// Two collectors at once on the raw store past every lease.
void TwoAtOnce(LargeWorld& w) {
  w.clock->Advance(130s);
  Collector a(w.mem, w.Gc("gc-one")), b(w.mem, w.Gc("gc-two"));
  Async ra([&] { (void)a.RunOnce(); });
  Async rb([&] { (void)b.RunOnce(); });
  EXPECT_TRUE(ra.Wait(10s));
  EXPECT_TRUE(rb.Wait(10s));
  EXPECT_EQ(a.stats().failed + b.stats().failed, 0u);
}

// The checks after the coordinator returned: what it reported is what stays, nothing late
// landed if it was claimed, and everything is settled (ExpectSettled runs more collectors).
void ExpectTruth(LargeWorld& w, Paused& p, const Expect& e, bool want_committed,
                 const std::string& where, Code failure = Code::kAborted) {
  const Drove& d = p.drove;
  EXPECT_FALSE(d.crashed) << where;
  EXPECT_NE(d.said, Said::kUnknown) << where << ": " << d.status.ToString();
  EXPECT_EQ(d.said == Said::kCommitted, want_committed) << where << ": " << d.status.ToString();
  if (d.said == Said::kFailed) {
    EXPECT_EQ(d.status.code(), failure) << where << ": " << d.status.ToString();
  }
  if (!want_committed) {
    EXPECT_EQ(p.Late(), std::vector<std::string>{}) << where << ": late writes landed";
  }
  Settled s = ExpectSettled(w, e, d.id, d.said, where);
  EXPECT_EQ(s.committed, want_committed) << where;
  // More collector runs change nothing.
  EXPECT_EQ(Pass(w, "gc-later").reversed, 0u);
  EXPECT_EQ(ReadAll(*w.direct, e.ids), want_committed ? e.after : e.before) << where;
}

struct Fixture {
  LargeWorld w;
  Workload wl = Mixed(6);
  Expect e = Plan(wl, 2);
  Fixture() { w.Seed(wl); }
};

bool Key2(const Call& c) { return c.key == Key{kRows, "r2"}; }

// The id of the one record in the store (the transaction under attack).
std::string OnlyRecordId(LargeWorld& w) {
  auto all = ScanAll(*w.mem, litetx::kTransactionsCollection);
  EXPECT_EQ(all.size(), 1u);
  return all.size() == 1 ? all[0].first : "";
}

// What happens while the coordinator is held, in every scenario below in turn.
enum class Meanwhile { kOneCollector, kTwoCollectors, kWriter };
const char* MeanwhileName(Meanwhile m) {
  switch (m) {
    case Meanwhile::kOneCollector: return "one collector";
    case Meanwhile::kTwoCollectors: return "two collectors at once";
    case Meanwhile::kWriter: return "a writer meets r1, then a collector";
  }
  return "?";
}

// Acts during the pause: a reader checks all-or-nothing, then collectors or a writer (which
// adjusts r1, held by the transaction: it claims the stale transaction and reverses r1 first).
// Returns the expectation with the writer's change in it.
Expect ActMeanwhile(Fixture& f, Paused&, Meanwhile m, Expect e, int writer_row = 1) {
  ExpectAtomicNow(f.w, e, OnlyRecordId(f.w), "during the pause");
  switch (m) {
    case Meanwhile::kOneCollector: (void)Pass(f.w, "gc-one"); break;
    case Meanwhile::kTwoCollectors: TwoAtOnce(f.w); break;
    case Meanwhile::kWriter: {
      f.w.clock->Advance(130s);
      const std::string row = RowId(writer_row);
      auto r = f.w.direct->Commit(Transaction().Adjust(kRows, row, {{"n", 5}}));
      EXPECT_TRUE(r.ok()) << row << ": " << r.status().ToString();
      e.before[writer_row].doc["n"] = e.before[writer_row].doc["n"].as_int64() + 5;
      if (e.after[writer_row].state == DocumentState::kFound) {
        e.after[writer_row].doc["n"] = e.after[writer_row].doc["n"].as_int64() + 5;
      }
      (void)Pass(f.w, "gc-one");
      break;
    }
  }
  ExpectAtomicNow(f.w, e, "", "after the collector, during the pause");
  return e;
}

// Runs one attack: the coordinator held at `pause_at` (with `afters` losing replies), `m` acts,
// the coordinator resumes and must report `want_committed`.
void Attack(const std::string& name, std::function<bool(const Call&)> pause_at,
            std::vector<HookStore::After> afters, bool want_committed,
            std::function<void(Fixture&, Paused&)> during = nullptr) {
  for (Meanwhile m : {Meanwhile::kOneCollector, Meanwhile::kTwoCollectors, Meanwhile::kWriter}) {
    const std::string where = name + ", " + MeanwhileName(m);
    SCOPED_TRACE(where);
    Fixture f;
    Paused p(f.w, f.wl, pause_at, afters);
    ASSERT_TRUE(p.Held()) << where << ": the coordinator never reached its pause";
    Expect e = ActMeanwhile(f, p, m, f.e);
    if (during) during(f, p);
    ASSERT_TRUE(p.Resume()) << where << ": the coordinator did not return";
    ExpectTruth(f.w, p, e, want_committed, where);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(LargeAttack, PauseBeforeL4WithTheRecordCountingTheChunk) {
  // Held right before chunk 1's create: the record counts chunk 1 already. The collector stubs
  // its key; the late create fails and the coordinator learns it was rolled back.
  Attack(
      "pause before L4", [](const Call& c) { return IsChunkCreate(c, 1); }, {}, false);
}

TEST(LargeAttack, LostReplyOnL4ThenPause) {
  // Chunk 1's create landed, its reply was lost; held before the resend. The collector fences
  // the chunk's documents and stubs it; the resend meets the stub.
  auto lost = std::make_shared<std::atomic<bool>>(false);
  Attack(
      "lost L4 reply, pause", [lost](const Call& c) { return *lost && IsChunkKey(c); },
      {[lost](const Call& c, const Status& s) -> std::optional<Status> {
        if (s.ok() && IsChunkCreate(c, 1) && !lost->exchange(true)) {
          return Status::Unknown("injected lost reply");
        }
        return std::nullopt;
      }},
      false);
}

TEST(LargeAttack, LostReplyOnAnL5ApplyThenPause) {
  // r2's apply landed, its reply was lost; held before the read back. The collector reverses
  // r2 (and r3); the coordinator finds r2 changed, evaluates it again, and its chunk rewrite
  // meets the stub.
  auto lost = std::make_shared<std::atomic<bool>>(false);
  Attack(
      "lost L5 reply, pause",
      [lost](const Call& c) { return *lost && c.op == Op::kGet && Key2(c); },
      {[lost](const Call& c, const Status& s) -> std::optional<Status> {
        if (s.ok() && IsApply(c) && Key2(c) && !lost->exchange(true)) {
          return Status::Unknown("injected lost reply");
        }
        return std::nullopt;
      }},
      false);
}

TEST(LargeAttack, PauseBetweenL5AndL6) { Attack("pause before the flip", IsFlip, {}, false); }

TEST(LargeAttack, LostReplyOnL6ThenPauseWhileACollectorFinishesUpToTheMarker) {
  // The flip landed, its reply was lost; held before the read back. A collector finishes every
  // chunk but dies before the marker: the coordinator reads back its own committed record.
  Fixture f;
  auto lost = std::make_shared<std::atomic<bool>>(false);
  Paused p(f.w, f.wl, [lost](const Call& c) { return *lost && c.op == Op::kGet && c.on_record(); },
           {[lost](const Call& c, const Status& s) -> std::optional<Status> {
             if (s.ok() && IsFlip(c) && !lost->exchange(true)) return Status::Unknown("injected");
             return std::nullopt;
           }});
  ASSERT_TRUE(p.Held());
  ExpectAtomicNow(f.w, f.e, "", "during the pause");
  f.w.clock->Advance(130s);
  auto gl = std::make_shared<Link>(f.w.mem);
  gl->DieBefore(IsMarkerWrite);
  Collector gc(gl, f.w.Gc("gc-dies"));
  EXPECT_THROW((void)gc.RunOnce(), SimulatedCrash);
  EXPECT_TRUE(ScanAll(*f.w.mem, ChunksCollection()).empty()) << "every chunk finished";
  ASSERT_TRUE(p.Resume());
  ExpectTruth(f.w, p, f.e, true, "lost flip reply, collector died before the marker");
}

// The flip landed and its reply was lost; the coordinator is held before it reads the record
// back, past its lease. A collector finishes the committed transaction and writes its outcome
// marker. On resume the coordinator finds a committed marker: only it ever commits its record, so
// its flip landed, and Commit returns OK (docs/protocol.md §9.3 L6).
TEST(LargeAttack, LostReplyOnL6ThenPausePastTheMarker) {
  auto lost = std::make_shared<std::atomic<bool>>(false);
  Attack(
      "lost L6 reply, pause",
      [lost](const Call& c) { return *lost && c.op == Op::kGet && c.on_record(); },
      {[lost](const Call& c, const Status& s) -> std::optional<Status> {
        if (s.ok() && IsFlip(c) && !lost->exchange(true)) return Status::Unknown("injected");
        return std::nullopt;
      }},
      true);
}

TEST(LargeAttack, PauseInsideL7WhileACollectorFinishesTheSameChunks) {
  // Committed; held before finishing r2 (chunk 0 done). Collectors finish everything meanwhile
  // (or a writer meets r4, still held by the committed transaction, finishes it and adjusts it);
  // the coordinator's late finishing writes find nothing held and Commit reports OK.
  for (Meanwhile m : {Meanwhile::kOneCollector, Meanwhile::kTwoCollectors, Meanwhile::kWriter}) {
    SCOPED_TRACE(MeanwhileName(m));
    Fixture f;
    Paused p(f.w, f.wl, [](const Call& c) { return IsRowRelease(c) && Key2(c); });
    ASSERT_TRUE(p.Held());
    EXPECT_NE(MetaOf(*f.w.mem, kRows, "r4").txn, "");
    Expect e = ActMeanwhile(f, p, m, f.e, /*writer_row=*/4);
    ASSERT_TRUE(p.Resume());
    EXPECT_TRUE(p.drove.info.settled);
    ExpectTruth(f.w, p, e, true, std::string("pause in L7, ") + MeanwhileName(m));
    if (HasFailure()) return;
  }
}

TEST(LargeAttack, PauseInsideTheRollbackWhileOthersSettleIt) {
  // The last action fails (an update of a missing row, tag 7): the coordinator rolls back and is
  // held before reversing r2 (chunk 0 already reversed and stubbed). Collectors settle the rest
  // meanwhile (or a writer meets r3, still held by the aborted transaction: it reverses it and
  // adjusts it); the coordinator's late rollback writes change nothing, and it reports the
  // action's failure.
  for (Meanwhile m : {Meanwhile::kOneCollector, Meanwhile::kTwoCollectors, Meanwhile::kWriter}) {
    SCOPED_TRACE(MeanwhileName(m));
    Fixture f;
    f.wl.acts.push_back(Act{Kind::kUpdate, "missing", 0});
    auto aborted = std::make_shared<std::atomic<bool>>(false);
    Paused p(f.w, f.wl, [aborted](const Call& c) { return *aborted && IsRowRelease(c) && Key2(c); },
             {[aborted](const Call& c, const Status& s) -> std::optional<Status> {
               if (s.ok() && IsAbort(c)) aborted->store(true);
               return std::nullopt;
             }});
    ASSERT_TRUE(p.Held());
    EXPECT_NE(MetaOf(*f.w.mem, kRows, "r3").txn, "");
    Expect e = f.e;
    if (m == Meanwhile::kWriter) {
      // r3 is deleted by the transaction: its before image is live, the writer adjusts that.
      e = ActMeanwhile(f, p, m, e, /*writer_row=*/3);
    } else {
      e = ActMeanwhile(f, p, m, e);
    }
    ASSERT_TRUE(p.Resume());
    ExpectTruth(f.w, p, e, false, std::string("pause in the rollback, ") + MeanwhileName(m),
                Code::kNotFound);
    if (HasFailure()) return;
  }
}

TEST(LargeAttack, AWriterMeetingAStalePendingLargeHoldClaimsIt) {
  // Held before chunk 2's count, past its lease: a writer needs r1 (held since chunk 0). It
  // claims the transaction, reverses r1 and commits; the coordinator's count fails: kAborted.
  Fixture f;
  Paused p(f.w, f.wl, [](const Call& c) { return IsCount(c, 2); });
  ASSERT_TRUE(p.Held());
  const std::string id = OnlyRecordId(f.w);
  f.w.clock->Advance(130s);
  auto r = f.w.direct->Commit(Transaction().Adjust(kRows, "r1", {{"n", 5}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto rec = RecordOf(*f.w.mem, id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kAborted);
  EXPECT_NE(rec->aborted_by.find("txn"), std::string::npos) << rec->aborted_by;
  // Only r1 was settled by the writer; r2 and r3 are still held (the collector's work).
  Expect e = f.e;
  e.before[1].doc["n"] = 6;
  e.after[1].doc["n"] = 1006;
  ExpectAtomicNow(f.w, e, "", "after the writer's claim");
  ASSERT_TRUE(p.Resume());
  ExpectTruth(f.w, p, e, false, "writer claimed");
}

// A Commit whose flip reply was lost and could not be resolved returns kUnknown and leaves the
// record to the collector (docs/protocol.md §9.3 L6: "Database::Outcome settles it"). The
// handle, still alive, must not keep that record's lease alive: otherwise no collector could
// settle it while the caller keeps the handle. Here the flip never lands; with renew_leases on
// (lease 200 ms, renewals every 50 ms of real time) the clock passes the lease and the record's
// gc_at is watched for 1 s of real time: unchanged, and the collector claims and reverses it.
TEST(LargeAttack, AHandleThatReportedUnknownStopsRenewingItsLease) {
  Fixture f;
  litetx::Options o = f.w.Opts();
  o.renew_leases = true;
  o.lease = 200ms;
  auto link = std::make_shared<Link>(f.w.mem);
  link->befores.push_back(Refuse(IsFlip, Code::kUnknown));  // lost on the way, every time
  Database db(link, o);
  auto t = db.BeginLarge(Chunked(2));
  ASSERT_TRUE(t.ok());
  for (std::size_t i = 0; i < f.wl.acts.size(); ++i) {
    ASSERT_TRUE(AddAct(**t, f.wl.acts[i], i + 1).ok());
  }
  auto r = (*t)->Commit();
  ASSERT_EQ(r.code(), Code::kUnknown) << r.status().ToString();
  const std::string id = (*t)->id();
  const std::int64_t gc_at = RecordOf(*f.w.mem, id)->gc_at_ms;
  f.w.clock->Advance(10s);
  bool renewed = false;
  const auto deadline = std::chrono::steady_clock::now() + 1s;
  while (!renewed && std::chrono::steady_clock::now() < deadline) {
    renewed = RecordOf(*f.w.mem, id)->gc_at_ms != gc_at;
    if (!renewed) std::this_thread::sleep_for(10ms);  // watching for an event that must not come
  }
  EXPECT_FALSE(renewed) << "the lease of a transaction that reported kUnknown was renewed";
  Collector gc(f.w.mem, f.w.Gc());
  (void)gc.RunOnce();
  EXPECT_EQ(gc.stats().reversed, 1u);
  EXPECT_EQ(OutcomeOf(*f.w.direct, id), TxnOutcome::kAborted);
  t->reset();
}

// A coordinator held between its count of chunk 1 and the chunk's create for longer than the
// outcome retention (1 h) but less than the tombstone retention (24 h, the documented bound on
// a coordinator's pause, docs/protocol.md §7). A collector claims it and takes chunk 1's key
// with a stub. A rolled-back large transaction's marker and stubs are kept for the tombstone
// retention, so the purge after 2 h leaves them; on resume the late chunk create fails on the
// stub, the coordinator reports the failure and none of the chunk's applies is sent. Once the
// tombstone retention has passed, the purge takes the stubs and the marker.
TEST(LargeAttack, PauseLongerThanTheOutcomeRetentionBeforeL4) {
  Fixture f;
  Paused p(f.w, f.wl, [](const Call& c) { return IsChunkCreate(c, 1); });
  ASSERT_TRUE(p.Held());
  EXPECT_EQ(Pass(f.w, "gc-one").reversed, 1u);
  f.w.clock->Advance(2h);
  (void)Pass(f.w, "gc-purge");
  ASSERT_FALSE(ScanAll(*f.w.mem, ChunksCollection()).empty()) << "stubs purged too early";
  EXPECT_EQ(MarkerCount(*f.w.mem), 1u);
  ASSERT_TRUE(p.Resume());
  EXPECT_EQ(p.drove.said, Said::kFailed) << p.drove.status.ToString();
  EXPECT_EQ(p.Late(), std::vector<std::string>{}) << "late writes landed";
  litetx::CollectorOptions co = f.w.Gc("gc-sweep");
  co.collections = {kRows};
  co.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
  Collector gc(f.w.mem, co);
  (void)gc.RunOnce();
  EXPECT_EQ(ReadAll(*f.w.direct, f.e.ids), f.e.before);
  ExpectClean(*f.w.mem, {kRows});
  f.w.clock->Advance(23h);
  (void)Pass(f.w, "gc-purge-later");
  EXPECT_TRUE(ScanAll(*f.w.mem, ChunksCollection()).empty()) << "a chunk document left for good";
  EXPECT_EQ(MarkerCount(*f.w.mem), 0u);
}

// Two collectors settle the same abandoned large transaction at once, starting at different
// chunks (their names hash to different start offsets); both are held at their first chunk
// read and released together.
TEST(LargeAttack, TwoCollectorsSettleTheSameLargeRecordConcurrently) {
  for (bool committed : {false, true}) {
    SCOPED_TRACE(committed ? "committed" : "aborted");
    LargeWorld w;
    Workload wl = Mixed(24);
    w.Seed(wl);
    Expect e = Plan(wl, 3);  // 8 chunks
    auto link = std::make_shared<Link>(w.mem);
    link->DieAfter(committed ? std::function<bool(const Call&)>(IsFlip) : [](const Call& c) {
      return IsApply(c) && c.key == Key{kRows, "r22"};
    });
    DriveOptions o;
    o.txn = Chunked(3);
    Drove d = Drive(w, link, wl, o);
    ASSERT_TRUE(d.crashed);
    ASSERT_EQ(RecordOf(*w.mem, d.id)->chunks, 8u);
    // Names whose start chunks differ.
    const std::string a_name = "gc-east", b_name = "gc-west";
    const auto start = [](const std::string& n) { return std::hash<std::string>{}(n) % 8; };
    ASSERT_NE(start(a_name), start(b_name));
    Gate gate;
    // Each collector is held at its first chunk read (its start chunk), noted in `first`.
    auto hold_first_chunk_read = [&gate](std::shared_ptr<Link> l,
                                         std::shared_ptr<std::string> first) {
      auto once = std::make_shared<std::atomic<bool>>(false);
      l->befores.push_back([&gate, once, first](const Call& c) -> std::optional<Status> {
        if (c.op == Op::kGet && IsChunkKey(c) && !once->exchange(true)) {
          *first = c.key.id;
          gate.Hold();
        }
        return std::nullopt;
      });
    };
    auto la = std::make_shared<Link>(w.mem), lb = std::make_shared<Link>(w.mem);
    auto a_first = std::make_shared<std::string>(), b_first = std::make_shared<std::string>();
    hold_first_chunk_read(la, a_first);
    hold_first_chunk_read(lb, b_first);
    w.clock->Advance(130s);
    Collector a(la, w.Gc(a_name)), b(lb, w.Gc(b_name));
    {
      Async ra([&] { EXPECT_TRUE(a.RunOnce().ok()); });
      Async rb([&] { EXPECT_TRUE(b.RunOnce().ok()); });
      ASSERT_TRUE(gate.WaitHeld(2));
      // Both are at work on the record, each at its own start chunk.
      EXPECT_EQ(*a_first, litetx::engine::ChunkKey(d.id, start(a_name)).id);
      EXPECT_EQ(*b_first, litetx::engine::ChunkKey(d.id, start(b_name)).id);
      gate.Open();
      ASSERT_TRUE(ra.Wait(10s) && rb.Wait(10s));
    }
    // Neither failed; exactly one wrote the marker.
    EXPECT_EQ(a.stats().failed + b.stats().failed, 0u);
    EXPECT_EQ(committed ? a.stats().finished + b.stats().finished
                        : a.stats().reversed + b.stats().reversed,
              1u);
    Settled s = ExpectSettled(w, e, d.id, d.said, "two collectors");
    EXPECT_EQ(s.committed, committed);
  }
}

}  // namespace
}  // namespace ltxtest::large
