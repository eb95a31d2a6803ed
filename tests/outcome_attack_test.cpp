// tests/outcome_attack_test.cpp — a hostile scheduler and a hostile user against outcome pages
// (engine/outcomes.h), the fold-aware record reads and the collector's pass report, record
// budget and partition claims. Each test pauses one actor between two of its store calls (a
// store hook that runs the other actors on the bare store before letting the call go on), or
// loses a reply, or corrupts what the collector reads, and checks that a transaction's reported
// outcome never changes, no committed write is lost and no entry is lost or written twice.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/outcomes.h"
#include "engine/repair.h"
#include "engine/txn_id.h"
#include "test_util.h"

namespace ltxtest {
namespace {

using litetx::Collector;
using litetx::CollectorOptions;
using litetx::Transaction;
using litetx::TxnOutcome;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;

struct Crash {};

constexpr std::chrono::milliseconds kLease = 10s;
const std::string kOut(litetx::kOutcomesCollection);
const std::string kClaims = "__litetx.gc";

class OutcomeAttack : public ::testing::Test, public World {
 protected:
  litetx::Options Eng() const {
    litetx::Options o = Opts();
    o.lease = kLease;
    return o;
  }
  CollectorOptions Gc(std::string name) const {
    CollectorOptions o;
    o.engine = Eng();
    o.name = std::move(name);
    return o;
  }
  litetx::engine::Env EnvOn(litetx::Store& store) {
    return litetx::engine::Env{store, opts_, *opts_.clock, *opts_.logger};
  }

  // `n` committed two-insert transactions and `aborted` rolled back ones (a crash after the
  // record and one apply, reversed by a collector that does not fold), all leaving markers.
  std::map<std::string, TxnOutcome> Make(int n, int aborted = 0) {
    std::map<std::string, TxnOutcome> out;
    litetx::Database db(mem, Eng());
    for (int i = 0; i < n; ++i, ++serial_) {
      auto r = MustCommit(db, Transaction()
                                  .Insert("c", "k" + std::to_string(serial_), Obj(R"({"n":1})"))
                                  .Insert("c", "l" + std::to_string(serial_), Obj(R"({"n":2})")));
      out[r.txn_id] = TxnOutcome::kCommitted;
    }
    for (int i = 0; i < aborted; ++i, ++serial_) {
      const std::string id = CommitDyingAfterWrite(
          mem, Eng(),
          Transaction()
              .Insert("c", "m" + std::to_string(serial_), Obj("{}"))
              .Insert("c", "o" + std::to_string(serial_), Obj("{}")),
          2);
      out[id] = TxnOutcome::kAborted;
    }
    if (aborted > 0) {
      clock->Advance(kLease + 1ms);
      CollectorOptions o = Gc("gc-settle");
      o.fold_outcomes = false;
      Collector settle(mem, o);
      EXPECT_TRUE(settle.RunOnce().ok());
    }
    return out;
  }

  void ExpectOutcomes(const std::map<std::string, TxnOutcome>& want, const std::string& where) {
    litetx::Database reader(mem, Eng());
    for (const auto& [id, o] : want) {
      EXPECT_EQ(OutcomeOf(reader, id), o) << where << ": " << id;
    }
  }

  // Every page entry, id → count (a count above 1 is an entry written twice).
  std::map<std::string, int> Entries() {
    std::map<std::string, int> out;
    for (const auto& [id, doc] : ScanAll(*mem, kOut)) {
      const auto& e = doc.value.at("e").as_string();
      for (std::size_t i = 0; i + litetx::engine::kOutcomeEntryChars <= e.size();
           i += litetx::engine::kOutcomeEntryChars) {
        ++out[id + std::string(e.data() + i, litetx::engine::kOutcomeEntryChars - 1)];
      }
    }
    return out;
  }
  void ExpectEachEntryOnce(const std::map<std::string, TxnOutcome>& want, const std::string& where) {
    auto entries = Entries();
    EXPECT_EQ(entries.size(), want.size()) << where;
    for (const auto& [id, n] : entries) {
      EXPECT_EQ(n, 1) << where << ": entry written " << n << " times: " << id;
      EXPECT_TRUE(want.count(id)) << where << ": an entry of an unknown transaction " << id;
    }
  }
  std::size_t Records() { return ScanAll(*mem, litetx::kTransactionsCollection).size(); }

  litetx::Options opts_ = Eng();
  int serial_ = 0;
};

// ---------------------------------------------------------------------------------------------
// 1. A folder paused after each of its writes (between the page write and the marker erases,
//    between two erases) while another collector folds everything and readers ask.

TEST_F(OutcomeAttack, FolderPausedAfterEachWriteWhileAnotherFoldsAndReadersAsk) {
  int pauses = 0;
  for (int k = 1;; ++k) {
    ASSERT_LE(k, 200);
    SCOPED_TRACE("paused after write " + std::to_string(k));
    mem = std::make_shared<litetx::MemoryStore>();
    auto want = Make(10, 3);
    auto hook = std::make_shared<HookStore>(mem);
    int writes = 0;
    bool paused = false;
    hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (!c.is_write() || !s.ok() || ++writes != k) return std::nullopt;
      paused = true;
      ExpectOutcomes(want, "during the pause, before the other collector");
      Collector other(mem, Gc("gc-other"));
      EXPECT_TRUE(other.RunOnce().ok());
      ExpectOutcomes(want, "during the pause, after the other collector");
      return std::nullopt;
    };
    Collector a(hook, Gc("gc-paused"));
    EXPECT_TRUE(a.RunOnce().ok());
    ExpectOutcomes(want, "after the paused collector");
    Collector again(mem, Gc("gc-again"));
    EXPECT_TRUE(again.RunOnce().ok());
    EXPECT_EQ(Records(), 0u);
    ExpectEachEntryOnce(want, "end");
    ExpectOutcomes(want, "end");
    if (!paused) break;
    ++pauses;
  }
  std::printf("[ info ] folder paused after each of %d writes\n", pauses);
  EXPECT_GE(pauses, 14);  // one page write at least, and the 13 marker erases
}

// Lost replies (the write landed) and refused writes (it did not) at every write of a fold,
// then the collector goes on; a second pass cleans up. No entry lost, none twice.
TEST_F(OutcomeAttack, LostOrRefusedReplyAtEveryFoldWrite) {
  int cases = 0;
  for (bool landed : {true, false}) {
    for (int k = 1;; ++k) {
      ASSERT_LE(k, 200);
      SCOPED_TRACE(std::string(landed ? "lost reply" : "refused") + " at write " + std::to_string(k));
      mem = std::make_shared<litetx::MemoryStore>();
      auto want = Make(10, 3);
      auto hook = std::make_shared<HookStore>(mem);
      int writes = 0;
      bool hit = false;
      if (landed) {
        hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
          if (c.is_write() && s.ok() && ++writes == k) {
            hit = true;
            return Status(Code::kUnknown, "injected lost reply");
          }
          return std::nullopt;
        };
      } else {
        hook->before = [&](const Call& c) -> std::optional<Status> {
          if (c.is_write() && ++writes == k) {
            hit = true;
            return Status(Code::kUnknown, "injected: not delivered");
          }
          return std::nullopt;
        };
      }
      Collector a(hook, Gc("gc-faulty"));
      (void)a.RunOnce();
      ExpectOutcomes(want, "after the faulty pass");
      Collector again(mem, Gc("gc-again"));
      EXPECT_TRUE(again.RunOnce().ok());
      EXPECT_EQ(Records(), 0u);
      ExpectEachEntryOnce(want, "end");
      ExpectOutcomes(want, "end");
      if (!hit) break;
      ++cases;
    }
  }
  std::printf("[ info ] %d fold writes lost or refused\n", cases);
  EXPECT_GE(cases, 28);
}

// ---------------------------------------------------------------------------------------------
// 2. A coordinator whose k-th write loses its reply (landed or not), paused past its lease while
//    a collector settles and folds its transaction: Commit's answer must agree with the outcome
//    seen during the pause and with the outcome afterwards.

TEST_F(OutcomeAttack, CoordinatorPausedAfterALostReplyWhileItsTransactionIsFolded) {
  int cases = 0, ok = 0, aborted = 0, unknown = 0, other = 0;
  for (bool parallel : {false, true}) {
    for (bool landed : {true, false}) {
      for (int k = 1;; ++k) {
        ASSERT_LE(k, 100);
        SCOPED_TRACE(std::string(parallel ? "parallel" : "classic") +
                     (landed ? ", landed" : ", not delivered") + ", write " + std::to_string(k));
        mem = std::make_shared<litetx::MemoryStore>();
        {
          litetx::Database seed(mem, Eng());
          MustCommit(seed, Transaction().Insert("c", "u", Obj(R"({"n":0})")));
        }
        auto hook = std::make_shared<HookStore>(mem);
        std::string id;
        int writes = 0;
        bool hit = false;
        TxnOutcome seen = TxnOutcome::kNotFound;
        auto pause = [&] {
          hit = true;
          clock->Advance(kLease + 1ms);
          Collector gc(mem, Gc("gc-pause"));
          EXPECT_TRUE(gc.RunOnce().ok());
          EXPECT_TRUE(gc.RunOnce().ok());
          litetx::Database reader(mem, Eng());
          if (!id.empty()) seen = OutcomeOf(reader, id);
        };
        auto note_id = [&](const Call& c) {
          if (id.empty() && c.op == Op::kCreate && c.on_record()) id = c.key.id;
        };
        if (landed) {
          hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
            if (s.ok()) note_id(c);
            if (c.is_write() && s.ok() && ++writes == k) {
              pause();
              return Status(Code::kUnknown, "injected lost reply");
            }
            return std::nullopt;
          };
        } else {
          hook->before = [&](const Call& c) -> std::optional<Status> {
            if (c.is_write() && ++writes == k) {
              note_id(c);
              pause();
              return Status(Code::kUnknown, "injected: not delivered");
            }
            return std::nullopt;
          };
          hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
            if (s.ok()) note_id(c);
            return std::nullopt;
          };
        }
        litetx::Options o = Eng();
        o.parallel_commit = parallel;
        litetx::Database db(hook, o);
        auto r = db.Commit(Transaction()
                               .Insert("c", "a", Obj(R"({"n":1})"))
                               .Update("c", "u", Obj(R"({"n":2})")));
        if (!hit) break;
        ++cases;
        // Settle whatever is left, within the retention.
        clock->Advance(kLease + 1ms);
        for (int i = 0; i < 3; ++i) {
          Collector gc(mem, Gc("gc-after"));
          (void)gc.RunOnce();
        }
        litetx::Database reader(mem, Eng());
        ASSERT_FALSE(id.empty());
        const TxnOutcome final = OutcomeOf(reader, id);
        if (seen == TxnOutcome::kCommitted || seen == TxnOutcome::kAborted) {
          EXPECT_EQ(final, seen) << "the outcome changed after the pause";
        }
        if (r.ok()) {
          ++ok;
          EXPECT_EQ(final, TxnOutcome::kCommitted) << "Commit said OK";
          EXPECT_NE(seen, TxnOutcome::kAborted) << "aborted during the pause, then Commit OK";
        } else if (r.code() == Code::kUnknown) {
          ++unknown;
        } else {
          (r.code() == Code::kAborted ? aborted : other)++;
          if (r.code() != Code::kAborted) {
            std::printf("[ info ] %s\n", r.status().ToString().c_str());
          }
          EXPECT_NE(final, TxnOutcome::kCommitted) << "Commit said " << r.status().ToString();
          EXPECT_NE(seen, TxnOutcome::kCommitted) << "Commit said " << r.status().ToString();
        }
        // The documents agree with the outcome.
        const Image u = ReadImage(reader, "c", "u");
        const Image a = ReadImage(reader, "c", "a");
        if (final == TxnOutcome::kCommitted) {
          EXPECT_EQ(u.doc, Obj(R"({"n":2})"));
          EXPECT_EQ(a.doc, Obj(R"({"n":1})"));
        } else {
          EXPECT_EQ(u.doc, Obj(R"({"n":0})"));
          EXPECT_EQ(a.state, litetx::DocumentState::kNotFound);
        }
        // Settled; kNotFound only for a record create that never landed (nothing committed).
        EXPECT_TRUE(final == TxnOutcome::kCommitted || final == TxnOutcome::kAborted ||
                    (final == TxnOutcome::kNotFound && !r.ok() && k == 1))
            << "left unsettled: " << litetx::TxnOutcomeName(final);
      }
    }
  }
  std::printf("[ info ] %d coordinator pauses: %d OK, %d aborted, %d unknown, %d other\n", cases,
              ok, aborted, unknown, other);
  EXPECT_GE(cases, 20);
  EXPECT_GT(ok, 0);
  EXPECT_GT(aborted, 0);
}

// ---------------------------------------------------------------------------------------------
// 3. A fencer (the collector's sweep) paused at each of its store calls while the record create
//    of the transaction whose hold it met lands late, is proven committed, finished and folded.

// Holds of a parallel commit whose record create never landed (its coordinator died before
// fencing its own record). Returns the transaction id and the staging record that was sent.
struct Orphan {
  std::string id;
  json::object staging;
};

class OutcomeAttackFence : public OutcomeAttack {
 protected:
  Orphan MakeOrphan() {
    {
      litetx::Database seed(mem, Eng());
      MustCommit(seed, Transaction().Insert("c", "u", Obj(R"({"n":0})")));
    }
    Orphan o;
    auto hook = std::make_shared<HookStore>(mem);
    hook->before = [&](const Call& c) -> std::optional<Status> {
      if (c.op == Op::kCreate && c.on_record()) {
        if (c.value->if_contains("fence") != nullptr) throw Crash{};  // dies before fencing
        o.id = c.key.id;
        o.staging = *c.value;
        return Status(Code::kUnavailable, "injected: record create refused");
      }
      return std::nullopt;
    };
    litetx::Options eo = Eng();
    eo.parallel_commit = true;
    litetx::Database doomed(hook, eo);
    EXPECT_THROW((void)doomed.Commit(Transaction()
                                         .Insert("c", "a", Obj(R"({"n":1})"))
                                         .Update("c", "u", Obj(R"({"n":2})"))),
                 Crash);
    EXPECT_FALSE(o.id.empty());
    EXPECT_FALSE(Raw(*mem, TxnKey(o.id)).has_value());
    EXPECT_EQ(MetaOf(*mem, "c", "u").txn, o.id);
    return o;
  }
  CollectorOptions Sweeper() const {
    CollectorOptions s = Gc("gc-sweep");
    s.collections = {"c"};
    s.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
    return s;
  }
  // The late record lands, a reader proves it committed, a collector finishes and folds it.
  // Returns the outcome Database::Outcome reported then (kNotFound: the record could not land).
  TxnOutcome LateLandAndFold(const Orphan& o) {
    if (!mem->Create(TxnKey(o.id), o.staging).ok()) return TxnOutcome::kNotFound;
    litetx::Database reader(mem, Eng());
    const TxnOutcome proved = OutcomeOf(reader, o.id);
    Collector finisher(mem, Gc("gc-finish"));
    EXPECT_TRUE(finisher.RunOnce().ok());
    EXPECT_FALSE(Raw(*mem, TxnKey(o.id)).has_value()) << "not folded";
    EXPECT_EQ(OutcomeOf(reader, o.id), proved);
    return proved;
  }
};

TEST_F(OutcomeAttackFence, SweepPausedAtEachCallWhileALateRecordIsProvenFinishedAndFolded) {
  int cases = 0, landed = 0, late_fences = 0;
  for (int k = 1;; ++k) {
    ASSERT_LE(k, 200);
    SCOPED_TRACE("late record during sweep call " + std::to_string(k));
    mem = std::make_shared<litetx::MemoryStore>();
    Orphan o = MakeOrphan();
    clock->Advance(kLease + 1ms);  // past the holds' deadline
    auto hook = std::make_shared<HookStore>(mem);
    int calls = 0;
    bool hit = false;
    TxnOutcome seen = TxnOutcome::kNotFound;
    hook->before = [&](const Call&) -> std::optional<Status> {
      if (++calls == k) {
        hit = true;
        seen = LateLandAndFold(o);
      }
      return std::nullopt;
    };
    Collector sweeper(hook, Sweeper());
    EXPECT_TRUE(sweeper.RunOnce().ok());
    if (!hit) break;
    ++cases;
    if (seen == TxnOutcome::kCommitted) ++landed;
    const bool fence = Raw(*mem, TxnKey(o.id)).has_value();
    if (fence && seen == TxnOutcome::kCommitted) ++late_fences;
    // More passes, within the retention.
    for (int i = 0; i < 3; ++i) {
      clock->Advance(1s);
      Collector again(mem, Sweeper());
      EXPECT_TRUE(again.RunOnce().ok());
    }
    litetx::Database reader(mem, Eng());
    const TxnOutcome final = OutcomeOf(reader, o.id);
    if (seen == TxnOutcome::kCommitted) {
      EXPECT_EQ(final, TxnOutcome::kCommitted) << "proven committed, then " << TxnOutcomeName(final);
      EXPECT_EQ(ReadImage(reader, "c", "u").doc, Obj(R"({"n":2})")) << "a committed write lost";
      EXPECT_EQ(ReadImage(reader, "c", "a").doc, Obj(R"({"n":1})")) << "a committed write lost";
    } else {
      EXPECT_EQ(final, TxnOutcome::kAborted);
      EXPECT_EQ(ReadImage(reader, "c", "u").doc, Obj(R"({"n":0})")) << "an aborted write visible";
      EXPECT_EQ(ReadImage(reader, "c", "a").state, litetx::DocumentState::kNotFound);
    }
    ExpectClean(*mem, {"c"});
  }
  std::printf("[ info ] sweep paused at each of %d calls: the late record landed in %d, a fence "
              "was made after the fold in %d\n", cases, landed, late_fences);
  EXPECT_GE(cases, 8);
  EXPECT_GT(landed, 0);
}

// The same race, then past the outcome retention. A fence made after the fold must not outlive
// the page that overrules it, or Database::Outcome would then answer kAborted for a transaction
// it answered kCommitted for (docs/protocol.md §6.2: after the retention the answer is
// kNotFound, "no longer recorded" — never a different outcome). The fencer takes its late fence
// back at once; a fencer that dies before it can leaves it to the collector, which erases a
// fence whose transaction is on its outcome page.
TEST_F(OutcomeAttackFence, ALateFenceOutlivesThePageThatOverruledIt) {
  int late_fences = 0;
  for (bool fencer_dies : {false, true}) {
    SCOPED_TRACE(fencer_dies ? "the fencer dies after its create" : "the fencer lives");
    mem = std::make_shared<litetx::MemoryStore>();
    Orphan o = MakeOrphan();
    clock->Advance(kLease + 1ms);
    auto hook = std::make_shared<HookStore>(mem);
    int calls = 0;
    bool hit = false;
    TxnOutcome seen = TxnOutcome::kNotFound;
    hook->before = [&](const Call& c) -> std::optional<Status> {
      // Just before the fence create: the fencer has looked at the page already.
      if (c.op == Op::kCreate && c.on_record() && ++calls == 1) {
        hit = true;
        seen = LateLandAndFold(o);
      }
      return std::nullopt;
    };
    struct FencerDied {};
    hook->after = [&](const Call& c, const Status& st) -> std::optional<Status> {
      if (fencer_dies && c.op == Op::kCreate && c.on_record() && st.ok()) throw FencerDied{};
      return std::nullopt;
    };
    Collector sweeper(hook, Sweeper());
    if (fencer_dies) {
      EXPECT_THROW((void)sweeper.RunOnce(), FencerDied);
    } else {
      EXPECT_TRUE(sweeper.RunOnce().ok());
    }
    ASSERT_TRUE(hit) << "the sweep made no fence";
    ASSERT_EQ(seen, TxnOutcome::kCommitted);
    litetx::Database reader(mem, Eng());
    if (fencer_dies) {
      ASSERT_TRUE(Raw(*mem, TxnKey(o.id)).has_value()) << "no late fence";
      ++late_fences;
      EXPECT_EQ(OutcomeOf(reader, o.id), TxnOutcome::kCommitted) << "the page overrules it";
      Collector gc(mem, Sweeper());
      EXPECT_TRUE(gc.RunOnce().ok());
      EXPECT_FALSE(Raw(*mem, TxnKey(o.id)).has_value()) << "the collector kept the late fence";
    } else {
      EXPECT_FALSE(Raw(*mem, TxnKey(o.id)).has_value()) << "the fencer kept its late fence";
    }
    EXPECT_EQ(OutcomeOf(reader, o.id), TxnOutcome::kCommitted) << "within the retention";
    // Past the retention: the page goes, and nothing says aborted.
    clock->Advance(1h + 1s);
    Collector gc(mem, Sweeper());
    EXPECT_TRUE(gc.RunOnce().ok());
    EXPECT_EQ(ScanAll(*mem, kOut).size(), 0u);
    const TxnOutcome after = OutcomeOf(reader, o.id);
    std::printf("[ info ] committed transaction %s, past the retention: %s\n", o.id.c_str(),
                litetx::TxnOutcomeName(after));
    EXPECT_EQ(after, TxnOutcome::kNotFound)
        << "a transaction reported committed (and whose writes are visible) is now reported "
        << litetx::TxnOutcomeName(after);
    EXPECT_EQ(ReadImage(reader, "c", "u").doc, Obj(R"({"n":2})"));
  }
  EXPECT_EQ(late_fences, 1);
}

// ---------------------------------------------------------------------------------------------
// 4. Page purge racing a late fold into the same page, both ways round.

TEST_F(OutcomeAttack, PurgePausedBeforeItsEraseWhileALateFoldLandsOnThePage) {
  auto want = Make(1);
  const std::string id = want.begin()->first;
  const std::string page = *litetx::engine::OutcomePageId(id);
  // The page exists already with an old entry and an old "at" (due): another transaction of
  // the same 256 ms, settled by a collector whose clock was behind.
  json::object p;
  p["e"] = std::string(17, '7') + "a";
  p["at"] = clock->NowMillis() - 3 * 3'600'000;
  ASSERT_TRUE(mem->Create(Key{kOut, page}, p).ok());
  auto hook = std::make_shared<HookStore>(mem);
  bool hit = false;
  hook->before = [&](const Call& c) -> std::optional<Status> {
    if (c.op == Op::kErase && c.key.collection == kOut && !hit) {
      hit = true;
      CollectorOptions o = Gc("gc-folder");
      o.page_purge_budget = 0;
      Collector folder(mem, o);  // folds (and purges: the page is no longer due)
      EXPECT_TRUE(folder.RunOnce().ok());
      EXPECT_EQ(folder.stats().folded, 1u);
      EXPECT_EQ(folder.stats().pages_purged, 0u);
    }
    return std::nullopt;
  };
  CollectorOptions o = Gc("gc-purger");
  o.fold_outcomes = false;
  Collector purger(hook, o);
  EXPECT_TRUE(purger.RunOnce().ok());
  ASSERT_TRUE(hit);
  EXPECT_EQ(purger.stats().pages_purged, 0u) << "the page with a fresh entry was purged";
  EXPECT_EQ(Records(), 0u);
  ExpectOutcomes(want, "after the race");
}

TEST_F(OutcomeAttack, FoldPausedBeforeItsPageWriteWhileThePageIsPurged) {
  int cases = 0;
  for (bool replace : {true, false}) {
    mem = std::make_shared<litetx::MemoryStore>();
    auto want = Make(3);
    // Give every page of these ids an old due entry, so the fold replaces (and purge erases).
    std::set<std::string> pages;
    for (const auto& [id, o] : want) pages.insert(*litetx::engine::OutcomePageId(id));
    if (replace) {
      for (const auto& page : pages) {
        json::object p;
        p["e"] = std::string(17, '7') + "c";
        p["at"] = clock->NowMillis() - 3 * 3'600'000;
        ASSERT_TRUE(mem->Create(Key{kOut, page}, p).ok());
      }
    }
    auto hook = std::make_shared<HookStore>(mem);
    int hits = 0;
    hook->before = [&](const Call& c) -> std::optional<Status> {
      if ((c.op == Op::kReplace || c.op == Op::kCreate) && c.key.collection == kOut) {
        ++hits;
        // Purge everything due now, and create what a concurrent folder would.
        auto env = EnvOn(*mem);
        auto purged = litetx::engine::PurgeOutcomePages(env, clock->NowMillis(), 3'600'000, 0);
        EXPECT_TRUE(purged.ok());
        if (!replace) {
          // Someone else creates the page first (with another entry).
          json::object p;
          p["e"] = std::string(17, '8') + "a";
          p["at"] = clock->NowMillis();
          (void)mem->Create(c.key, p);
        }
      }
      return std::nullopt;
    };
    Collector a(hook, Gc("gc-paused"));
    EXPECT_TRUE(a.RunOnce().ok()) << a.last_pass().failed;
    EXPECT_EQ(Records(), 0u);
    ExpectOutcomes(want, replace ? "purged under the fold" : "created under the fold");
    cases += hits;
  }
  std::printf("[ info ] %d page writes raced by a purge or a create\n", cases);
  EXPECT_GE(cases, 2);
}

// ---------------------------------------------------------------------------------------------
// 5. Three collectors folding and purging at once, pages due while new markers fold into them.

TEST_F(OutcomeAttack, ThreeCollectorsFoldAndPurgeTheSamePagesConcurrently) {
  int rounds = 0;
  for (int round = 0; round < 12; ++round, ++rounds) {
    mem = std::make_shared<litetx::MemoryStore>();
    auto first = Make(30, 2);
    {
      Collector f(mem, Gc("gc-first"));
      ASSERT_TRUE(f.RunOnce().ok());
    }
    // The first fold's pages become due; the second batch (same wall-clock 256 ms spans, so
    // mostly the same pages) is folded into them while they are purged.
    clock->Advance(1h + 1ms);
    auto second = Make(30, 2);
    Collector a(mem, Gc("gc-a")), b(mem, Gc("gc-b")), c(mem, Gc("gc-c"));
    std::thread ta([&] { EXPECT_TRUE(a.RunOnce().ok()); });
    std::thread tb([&] { EXPECT_TRUE(b.RunOnce().ok()); });
    std::thread tc([&] { EXPECT_TRUE(c.RunOnce().ok()); });
    ta.join();
    tb.join();
    tc.join();
    EXPECT_EQ(Records(), 0u);
    ExpectOutcomes(second, "round " + std::to_string(round));
    litetx::Database reader(mem, Eng());
    for (const auto& [id, o] : first) {
      const TxnOutcome now = OutcomeOf(reader, id);
      EXPECT_TRUE(now == o || now == TxnOutcome::kNotFound) << id << " " << TxnOutcomeName(now);
    }
    for (const auto& [id, n] : Entries()) EXPECT_EQ(n, 1) << id;
    for (const auto& [id, o] : second) EXPECT_EQ(Entries().count(id), 1u) << id;
  }
  std::printf("[ info ] %d rounds of three concurrent collectors\n", rounds);
}

// ---------------------------------------------------------------------------------------------
// 6. A huge page: all transactions of one partition and 256 ms (a busy service, or a coordinator
//    whose clock is stuck: every id gets the same millisecond).

TEST_F(OutcomeAttack, ManyThousandEntriesInOnePage) {
  constexpr int kN = 6000;
  const std::string base = litetx::engine::NewTxnId();
  const std::string prefix = base.substr(0, litetx::engine::kOutcomePageIdChars);
  std::map<std::string, TxnOutcome> want;
  char buf[32];
  for (int i = 0; i < kN; ++i) {
    std::snprintf(buf, sizeof buf, "%017x", static_cast<unsigned>(i * 7919 + 13));
    const std::string id = prefix + buf;
    TxnRecord m;
    m.state = i % 5 == 0 ? TxnState::kAborted : TxnState::kCommitted;
    m.done = true;
    m.done_at_ms = clock->NowMillis();
    ASSERT_TRUE(mem->Create(TxnKey(id), litetx::engine::EncodeRecord(m)).ok());
    want[id] = m.state == TxnState::kCommitted ? TxnOutcome::kCommitted : TxnOutcome::kAborted;
  }
  CollectorOptions o = Gc("gc-huge");
  Collector gc(mem, o);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(gc.RunOnce().ok());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] %d markers folded into one page in %lld ms (page %zu bytes)\n", kN,
              static_cast<long long>(ms),
              ScanAll(*mem, kOut).front().second.value.at("e").as_string().size());
  EXPECT_EQ(gc.stats().folded, static_cast<std::uint64_t>(kN));
  EXPECT_EQ(Records(), 0u);
  ASSERT_EQ(ScanAll(*mem, kOut).size(), 1u);
  ExpectEachEntryOnce(want, "huge page");
  // Spot checks through Outcome (every 97th).
  litetx::Database reader(mem, Eng());
  int i = 0;
  for (const auto& [id, out] : want) {
    if (i++ % 97 == 0) {
      EXPECT_EQ(OutcomeOf(reader, id), out) << id;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 7. Corrupt pages.

TEST_F(OutcomeAttack, AnEntryWithAnUnknownStateLetterIsNotAnAbort) {
  const std::string id = litetx::engine::NewTxnId();
  json::object p;
  p["e"] = id.substr(litetx::engine::kOutcomePageIdChars) + "x";  // neither 'c' nor 'a'
  p["at"] = clock->NowMillis();
  ASSERT_TRUE(mem->Create(Key{kOut, *litetx::engine::OutcomePageId(id)}, p).ok());
  litetx::Database reader(mem, Eng());
  auto r = reader.Outcome(id);
  EXPECT_FALSE(r.ok() && *r == TxnOutcome::kAborted)
      << "a page entry with state letter 'x' read as a definite kAborted";
  EXPECT_EQ(r.code(), Code::kCorruption) << (r.ok() ? TxnOutcomeName(*r) : r.status().ToString());
}

TEST_F(OutcomeAttack, CorruptPagesNeverStopTheCollectorOrOtherPages) {
  auto want = Make(12, 2);
  // Corrupt the page of the first transaction in several ways, one after another.
  const std::string victim = want.begin()->first;
  const Key vk{kOut, *litetx::engine::OutcomePageId(victim)};
  std::vector<json::object> bad = {Obj(R"({"e":"short","at":1})"), Obj(R"({"e":5,"at":1})"),
                                   Obj(R"({"e":"","at":"x"})"), Obj(R"({"at":1})"),
                                   Obj(R"({"e":"","at":1.5})"), Obj(R"({})")};
  int passes = 0;
  for (const auto& b : bad) {
    PutRaw(*mem, vk, b);
    Collector gc(mem, Gc("gc-corrupt"));
    (void)gc.RunOnce();  // never throws
    ++passes;
    litetx::Database reader(mem, Eng());
    for (const auto& [id, o] : want) {
      if (litetx::engine::OutcomePageId(id) == vk.id) {
        auto r = reader.Outcome(id);
        // Either still a marker (not folded: the right answer) or an honest corruption report.
        EXPECT_TRUE((r.ok() && *r == o) || r.code() == Code::kCorruption) << id;
      } else {
        EXPECT_EQ(OutcomeOf(reader, id), o) << id;
      }
    }
  }
  // The page repaired by hand: the next pass folds what was kept.
  ASSERT_TRUE(mem->Erase(vk, RevisionOf(*mem, vk)).ok());
  Collector gc(mem, Gc("gc-repaired"));
  EXPECT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(Records(), 0u);
  ExpectOutcomes(want, "after the repair");
  std::printf("[ info ] %d corrupt page shapes\n", passes);
}

// ---------------------------------------------------------------------------------------------
// 8. Partition claims.

class OutcomeAttackShare : public OutcomeAttack {
 protected:
  CollectorOptions Shared(std::string name) const {
    CollectorOptions o = Gc(std::move(name));
    o.share_partitions = true;
    o.claim_lease = 5s;
    return o;
  }
  // `n` transactions whose coordinator died after the record and one apply (pending).
  std::vector<std::string> Abandon(int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i, ++serial_) {
      ids.push_back(CommitDyingAfterWrite(mem, Eng(),
                                          Transaction()
                                              .Insert("c", "a" + std::to_string(serial_), Obj("{}"))
                                              .Insert("c", "b" + std::to_string(serial_), Obj("{}")),
                                          2));
    }
    clock->Advance(kLease + 1ms);
    return ids;
  }
  int Reversed(const std::vector<std::string>& ids) {
    litetx::Database reader(mem, Eng());
    int n = 0;
    for (const auto& id : ids) n += OutcomeOf(reader, id) == TxnOutcome::kAborted ? 1 : 0;
    return n;
  }
};

// Other documents in the claims collection (a hand-made note, a tool's state, garbage) that sort
// before the claims: the claims are listed with a single Scan of 64.
TEST_F(OutcomeAttackShare, OtherDocumentsInTheClaimsCollectionMustNotStopTheSharedPass) {
  {
    Collector first(mem, Shared("gc-first"));  // creates the 16 claims
    ASSERT_TRUE(first.RunOnce().ok());
    ASSERT_EQ(ScanAll(*mem, kClaims).size(), 16u);
  }
  for (int i = 0; i < 64; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "note%02d", i);
    ASSERT_TRUE(mem->Create(Key{kClaims, id}, Obj(R"({"hello":"world"})")).ok());
  }
  auto ids = Abandon(20);
  clock->Advance(1s);
  Collector gc(mem, Shared("gc-shared"));
  const Status s = gc.RunOnce();
  const litetx::CollectorPass p = gc.last_pass();
  std::printf("[ info ] shared pass with 64 other claim documents: %s, records read %llu, "
              "reversed %llu, claims %llu, failed %llu, complete %d, backlog %llu\n",
              s.ToString().c_str(), static_cast<unsigned long long>(p.records_read),
              static_cast<unsigned long long>(gc.stats().reversed),
              static_cast<unsigned long long>(gc.stats().claims),
              static_cast<unsigned long long>(p.failed), p.complete ? 1 : 0,
              static_cast<unsigned long long>(p.backlog));
  EXPECT_EQ(Reversed(ids), 20) << "abandoned transactions left unsettled by a shared collector";
  // If nothing was read, the pass must at least not report itself complete and clean.
  if (p.records_read == 0) {
    EXPECT_TRUE(!p.complete || p.backlog > 0 || p.failed > 0 || !s.ok())
        << "a pass that read nothing reported complete, no backlog, no failure";
  }
}

// A collector paused past its claim lease mid-partition, with a record budget: another takes
// the partition over; the paused one resumes and finishes its page. Every transaction is settled
// once, every marker folded once.
TEST_F(OutcomeAttackShare, PausedPastItsClaimWithABudgetWhileAnotherTakesOver) {
  int cases = 0;
  for (int k = 1; k <= 12; ++k) {
    mem = std::make_shared<litetx::MemoryStore>();
    auto ids = Abandon(24);
    auto hook = std::make_shared<HookStore>(mem);
    int writes = 0;
    bool hit = false;
    hook->after = [&](const Call& c, const Status& s) -> std::optional<Status> {
      if (c.is_write() && s.ok() && c.key.collection == "c" && ++writes == k) {
        hit = true;
        clock->Advance(6s);  // past the claim lease
        CollectorOptions o = Shared("gc-b");
        o.record_budget = 7;
        Collector b(mem, o);
        for (int i = 0; i < 8; ++i) EXPECT_TRUE(b.RunOnce().ok());
      }
      return std::nullopt;
    };
    CollectorOptions o = Shared("gc-a");
    o.record_budget = 5;
    o.scan_batch = 2;
    Collector a(hook, o);
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(a.RunOnce().ok());
    if (!hit) continue;
    ++cases;
    for (int i = 0; i < 10; ++i) {
      clock->Advance(6s);
      Collector c(mem, Shared("gc-c"));
      EXPECT_TRUE(c.RunOnce().ok());
    }
    EXPECT_EQ(Reversed(ids), 24) << "k=" << k;
    EXPECT_EQ(Records(), 0u) << "k=" << k;
    std::map<std::string, TxnOutcome> want;
    for (const auto& id : ids) want[id] = TxnOutcome::kAborted;
    ExpectEachEntryOnce(want, "k=" + std::to_string(k));
  }
  std::printf("[ info ] %d pauses past the claim lease\n", cases);
  EXPECT_GE(cases, 6);
}

// A budgeted pass resumes where it stopped while records appear before and after its cursor and
// markers are folded (erased) under it: nothing is skipped for good.
TEST_F(OutcomeAttack, RecordBudgetResumesNeverSkipARecordForGood) {
  CollectorOptions o = Gc("gc-budget");
  o.record_budget = 3;
  o.scan_batch = 2;
  Collector gc(mem, o);
  std::map<std::string, TxnOutcome> want;
  int passes = 0;
  for (int wave = 0; wave < 6; ++wave) {
    for (auto& [id, out] : Make(4, 1)) want[id] = out;
    ASSERT_TRUE(gc.RunOnce().ok());
    ++passes;
  }
  for (int i = 0; i < 40 && Records() > 0; ++i, ++passes) ASSERT_TRUE(gc.RunOnce().ok());
  EXPECT_EQ(Records(), 0u);
  ExpectEachEntryOnce(want, "budgeted");
  ExpectOutcomes(want, "budgeted");
  std::printf("[ info ] %zu transactions settled and folded in %d budgeted passes\n", want.size(),
              passes);
}

}  // namespace
}  // namespace ltxtest
