// property-tests/race_test.cpp — races between coordinators, collectors, readers and writers,
// made deterministic by holding one party at a chosen store call while the others run (on a
// thread of its own, or inside the held call):
//   - a coordinator held before each of its writes while a collector, past the lease, claims
//     and reverses (or finishes) its transaction, then released: it ends aborted before the
//     commit point (documents at their before images) and committed after;
//   - a lost reply at every coordinator write, and a collector (crashing after each of its
//     writes in turn) during the pause that follows;
//   - two collectors at once on transactions left by crashed coordinators: one held at each
//     of its writes (before it, after it landed, after it landed with its reply lost) while the
//     other runs to completion; and one held at each of its writes while the other crashes
//     after each of its writes in turn, or completes;
//   - a collector looping beside healthy coordinators, which it must never touch.
// Each of these runs on both commit protocols: the classic one (record, applies, flip) and the
// parallel commit (a staging record written with the applies, committed once every document
// is held). Then the staging-record races of the parallel commit:
//   - its coordinator paused before each of its store calls (each operation of a batch, and the
//     re-read after a lost reply, included) past its lease while a collector resolves it;
//   - the replies of its staging writes (record create, applies, flip) lost: landed, never
//     landed, or held in the network and delivered before or after a resolver looked;
//   - two resolvers (collectors, a reader proving, a writer contending) on one stale staging
//     record, one held before each of its store calls while the other runs to completion;
//   - a collector held mid-resolution while its live coordinator runs on and is held again
//     before each of its later writes, then the collector, then the coordinator, finish;
//   - holds whose record is absent (its create held in the network): a writer waits before
//     their deadline, fences the record after it; the late record create then fails;
//   - (disabled: fails today) a resolver paused between reading a hold and reading its record
//     while the transaction commits and its marker is erased must not fence it as aborted.
// Built into litetx_race_tests (no RapidCheck), which the ThreadSanitizer run also builds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/record.h"
#include "engine/worklist.h"
#include "harness.h"

namespace ptest {
namespace {
using litetx::ActionType;
using litetx::Code;
using litetx::engine::TxnRecord;
using litetx::engine::TxnState;

// More store writes than any collector or coordinator run here makes: the loops over "the
// i-th write" stop there at the latest (and fail).
constexpr std::uint64_t kMaxWrites = 64;

// ThreadSanitizer makes every case about ten times slower: its build runs an eighth of the
// rounds (the same kinds of interleavings over fewer random transactions), and says so.
#if defined(__SANITIZE_THREAD__)
constexpr int kRoundDivisor = 8;
#else
constexpr int kRoundDivisor = 1;
#endif
int Rounds(int n) {
  if (kRoundDivisor > 1) std::printf("(ThreadSanitizer build: 1/%d of the rounds)\n", kRoundDivisor);
  return std::max(1, n / kRoundDivisor);
}

// The commit protocol a test runs: the classic one (record, then the applies, then the flip:
// Options::parallel_commit off) or the parallel commit (the staging record and the applies in
// one batch; the default, which TestOptions keeps).
enum class Mode : std::uint8_t { kClassic, kParallel };
constexpr Mode kModes[] = {Mode::kClassic, Mode::kParallel};
const char* ModeName(Mode m) { return m == Mode::kClassic ? "classic" : "parallel"; }
litetx::Options ModeOptions(std::shared_ptr<litetx::Clock> clock, Mode m) {
  litetx::Options o = TestOptions(std::move(clock));
  o.parallel_commit = m == Mode::kParallel;
  return o;
}

// RunOracle runs the default protocol (the parallel commit). The classic one leaves the same
// documents but numbers its writes otherwise (its commit point is the flip, one write after the
// last apply): in that mode the writes are counted on a run of its own, whose end state must
// be the oracle's.
Oracle OracleIn(const Scenario& s, Mode m) {
  Oracle o = RunOracle(s);
  if (m == Mode::kParallel) return o;
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  auto watch = std::make_shared<CommitWatch>(mem);
  Code code;
  {
    litetx::Database db(watch, ModeOptions(clock, m));
    code = db.Commit(BuildTxn(*mem, s)).code();
  }
  std::string err;
  auto after = ReadContents(*mem, s.docs.size(), &err);
  if (code != o.code || !after || *after != o.after ||
      RawVersions(*mem, s.docs.size()) != o.after_versions) {
    throw std::runtime_error("the classic commit of " + s.Describe() + " ended otherwise than the oracle");
  }
  o.writes = watch->writes();
  o.commit_write = watch->commit_write();
  return o;
}

enum class Hold : std::uint8_t {
  kBefore,     // the write has not reached the store yet
  kLanded,     // the write landed; its reply has not reached the caller yet
  kLostReply,  // the write landed; the caller then gets kUnknown instead of its reply
};
const char* HoldName(Hold h) {
  switch (h) {
    case Hold::kBefore: return "before";
    case Hold::kLanded: return "after-landed";
    case Hold::kLostReply: return "lost-reply";
  }
  return "?";
}

// Holds the thread making the `at`-th write (Create, Replace or Erase, counted from 1) until
// Release(), at the point `hold` names. Every write from the held one on is recorded with the
// result the store gave (before a lost reply replaced it).
class HoldingStore final : public litetx::ForwardingStore {
 public:
  struct Write {
    litetx::Key key;
    Code code;
    bool after_release;  // sent to the store after Release()
  };

  HoldingStore(std::shared_ptr<litetx::Store> target, std::uint64_t at, Hold hold)
      : ForwardingStore(std::move(target)), at_(at), hold_(hold) {}

  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    return Wrap(k, [&] { return ForwardingStore::Create(k, v); });
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    return Wrap(k, [&] { return ForwardingStore::Replace(k, e, v); });
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    auto r = Wrap(k, [&]() -> litetx::Result<litetx::Revision> {
      litetx::Status s = ForwardingStore::Erase(k, e);
      if (!s.ok()) return s;
      return litetx::Revision{0};
    });
    return r.ok() ? litetx::Status::Ok() : r.status();
  }

  // Waits until the caller is held (true) or has called Finished() without being held (false).
  // A caller that does neither within a minute is stuck: the test binary aborts rather than
  // hang until the ctest timeout.
  bool WaitHeldOrFinished() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::minutes(1), [&] { return held_ || finished_; })) {
      std::fprintf(stderr, "the held thread neither reached write %llu nor finished in 1 min\n",
                   static_cast<unsigned long long>(at_));
      std::abort();
    }
    return held_;
  }
  // The caller's thread is done with the store (it was never held, or it was released).
  void Finished() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Valid once the caller's thread has been joined.
  const std::vector<Write>& writes() const { return log_; }
  const litetx::Key& held_key() const { return held_key_; }

 private:
  litetx::Result<litetx::Revision> Wrap(const litetx::Key& k,
                                        const std::function<litetx::Result<litetx::Revision>()>& write) {
    std::uint64_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = ++count_;
    }
    if (n == at_ && hold_ == Hold::kBefore) Wait(k);
    auto r = write();
    if (n >= at_) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(Write{k, r.code(), released_});
    }
    if (n == at_ && hold_ != Hold::kBefore) {
      Wait(k);
      if (hold_ == Hold::kLostReply && r.ok()) {
        return litetx::Status::Unknown("lost reply (the write landed)");
      }
    }
    return r;
  }
  void Wait(const litetx::Key& k) {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    held_key_ = k;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }

  const std::uint64_t at_;
  const Hold hold_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t count_ = 0;
  bool held_ = false, released_ = false, finished_ = false;
  litetx::Key held_key_;
  std::vector<Write> log_;
};

// Runs `body` on its own thread, which calls store->Finished() when `body` returns. Join()
// (also run by the destructor, so that a failed assertion never leaves the thread held)
// releases the store first.
class Runner {
 public:
  Runner(std::shared_ptr<HoldingStore> store, std::function<void()> body)
      : store_(std::move(store)), thread_([store = store_, body = std::move(body)] {
          body();
          store->Finished();
        }) {}
  ~Runner() { Join(); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  void Join() {
    if (!thread_.joinable()) return;
    store_->Release();
    thread_.join();
  }

 private:
  std::shared_ptr<HoldingStore> store_;
  std::thread thread_;
};

// Calls `after` once each write returns from the target (whatever its result), before the
// result goes back to the caller: the caller "pauses" for as long as `after` runs.
class AfterWriteStore final : public litetx::ForwardingStore {
 public:
  AfterWriteStore(std::shared_ptr<litetx::Store> target, std::function<void()> after)
      : ForwardingStore(std::move(target)), after_(std::move(after)) {}
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    auto r = ForwardingStore::Create(k, v);
    after_();
    return r;
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    auto r = ForwardingStore::Replace(k, e, v);
    after_();
    return r;
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    auto r = ForwardingStore::Erase(k, e);
    after_();
    return r;
  }

 private:
  std::function<void()> after_;
};

// How the reply of one write is lost (StepStore::Lose).
enum class Loss : std::uint8_t {
  kLanded,     // the write lands; its reply is lost (the caller gets kUnknown)
  kNotLanded,  // the request is lost: nothing lands; the caller gets kUnknown
  kDeferred,   // the request is held in the network: the caller gets kUnknown now, and the write
               // reaches the store when the test calls Deliver() (or never)
};
const char* LossName(Loss l) {
  switch (l) {
    case Loss::kLanded: return "landed";
    case Loss::kNotLanded: return "not-landed";
    case Loss::kDeferred: return "deferred";
  }
  return "?";
}

// One party's store calls, numbered from 1 (each Get, Scan, Create, Replace and Erase; every
// operation of a batch is one, ForwardingStore::Batch sending them through the single calls):
// runs a pause before one of them (inside the caller's call, on its thread: the party is paused
// for as long as the pause runs), and loses the reply of one write. Safe for one caller at a
// time (a Database's committing thread and then its finisher thread qualify).
class StepStore final : public litetx::ForwardingStore {
 public:
  using Pick = std::function<bool(const litetx::Key&, const boost::json::object*)>;
  explicit StepStore(std::shared_ptr<litetx::Store> target) : ForwardingStore(std::move(target)) {}

  // Runs `pause` before the `n`-th call, once. With after_loss, n counts the calls made after
  // the lost write (1: the call right after it), and nothing runs if no reply is lost.
  void PauseBefore(std::uint64_t n, std::function<void()> pause, bool after_loss = false) {
    pause_at_ = n;
    pause_ = std::move(pause);
    after_loss_ = after_loss;
  }
  // Loses the reply of the first write that `pick` accepts (it is asked about each write, with
  // its value (null for an Erase), until it accepts one).
  void Lose(Pick pick, Loss loss) {
    pick_ = std::move(pick);
    loss_ = loss;
  }
  // Sends the deferred write to the store now: its result; nullopt if none is waiting.
  std::optional<Code> Deliver() {
    if (!deferred_) return std::nullopt;
    Deferred d = std::move(*deferred_);
    deferred_.reset();
    switch (d.op) {
      case litetx::StoreOp::kCreate: return ForwardingStore::Create(d.key, d.value).code();
      case litetx::StoreOp::kReplace: return ForwardingStore::Replace(d.key, d.expected, d.value).code();
      default: return ForwardingStore::Erase(d.key, d.expected).code();
    }
  }
  bool paused() const { return paused_; }
  bool lost() const { return lost_; }
  const litetx::Key& lost_key() const { return lost_key_; }
  std::uint64_t calls() const { return calls_; }
  std::uint64_t calls_at_loss() const { return calls_at_loss_; }  // the lost write's number
  std::uint64_t pause_call() const { return pause_call_; }        // the call paused before

  litetx::Result<std::optional<litetx::StoredDocument>> Get(const litetx::Key& k) override {
    Step();
    return ForwardingStore::Get(k);
  }
  litetx::Result<litetx::ScanPage> Scan(std::string_view c, std::string_view cursor,
                                        std::size_t limit) override {
    Step();
    return ForwardingStore::Scan(c, cursor, limit);
  }
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    return Write(litetx::StoreOp::kCreate, k, 0, &v);
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    return Write(litetx::StoreOp::kReplace, k, e, &v);
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    auto r = Write(litetx::StoreOp::kErase, k, e, nullptr);
    return r.ok() ? litetx::Status::Ok() : r.status();
  }

 private:
  struct Deferred {
    litetx::StoreOp op;
    litetx::Key key;
    litetx::Revision expected;
    boost::json::object value;
  };
  void Step() {
    ++calls_;
    const std::uint64_t n = !after_loss_ ? calls_ : lost_ ? calls_ - calls_at_loss_ : 0;
    if (paused_ || !pause_ || n != pause_at_) return;
    paused_ = true;
    pause_call_ = calls_;
    pause_();
  }
  litetx::Result<litetx::Revision> Write(litetx::StoreOp op, const litetx::Key& k, litetx::Revision e,
                                         const boost::json::object* v) {
    Step();
    const bool lose = pick_ && !lost_ && pick_(k, v);
    if (lose) {
      lost_ = true;
      lost_key_ = k;
      calls_at_loss_ = calls_;
      if (loss_ == Loss::kNotLanded) return litetx::Status::Unknown("request lost (nothing landed)");
      if (loss_ == Loss::kDeferred) {
        deferred_ = Deferred{op, k, e, v != nullptr ? *v : boost::json::object{}};
        return litetx::Status::Unknown("request held in the network");
      }
    }
    litetx::Result<litetx::Revision> r = litetx::Status::Unavailable("");
    switch (op) {
      case litetx::StoreOp::kCreate: r = ForwardingStore::Create(k, *v); break;
      case litetx::StoreOp::kReplace: r = ForwardingStore::Replace(k, e, *v); break;
      default: {
        litetx::Status st = ForwardingStore::Erase(k, e);
        if (st.ok()) {
          r = litetx::Revision{0};
        } else {
          r = st;
        }
      }
    }
    if (lose && r.ok()) return litetx::Status::Unknown("lost reply (the write landed)");
    return r;
  }

  std::uint64_t pause_at_ = 0;
  std::function<void()> pause_;
  bool after_loss_ = false;
  Pick pick_;
  Loss loss_ = Loss::kLanded;
  std::uint64_t calls_ = 0, calls_at_loss_ = 0, pause_call_ = 0;
  bool paused_ = false, lost_ = false;
  litetx::Key lost_key_;
  std::optional<Deferred> deferred_;
};

// Picks for StepStore::Lose: the k-th write; the first write of the record (its create); the
// first write of one document (its apply); the first record write that says committed and is
// not a marker (the flip).
StepStore::Pick NthWrite(std::uint64_t k) {
  auto n = std::make_shared<std::uint64_t>(0);
  return [n, k](const litetx::Key&, const boost::json::object*) { return ++*n == k; };
}
StepStore::Pick RecordWrite() {
  return [](const litetx::Key& k, const boost::json::object*) {
    return k.collection == litetx::kTransactionsCollection;
  };
}
StepStore::Pick DocumentWrite(int doc) {
  return [id = Id(doc)](const litetx::Key& k, const boost::json::object*) {
    return k.collection == kColl && k.id == id;
  };
}
StepStore::Pick FlipWrite() {
  return [](const litetx::Key& k, const boost::json::object* v) {
    if (k.collection != litetx::kTransactionsCollection || v == nullptr) return false;
    auto r = litetx::engine::DecodeRecord(*v);
    return r.ok() && r->state == TxnState::kCommitted && !r->done;
  };
}

// The id of the one ActiveTransaction record of a scenario store ("" if none).
std::string RecordId(litetx::Store& store) {
  const auto all = AllRecords(store);  // folded outcomes included
  return all.empty() ? "" : all.begin()->first;
}

// What Database::Outcome says, as a RecordSeen-like letter for messages.
const char* OutcomeName(const litetx::Result<litetx::TxnOutcome>& o) {
  return o.ok() ? litetx::TxnOutcomeName(*o) : "error";
}

// The one ActiveTransaction record of a scenario store, if there is one.
std::optional<TxnRecord> TheRecord(litetx::Store& store) {
  const auto all = AllRecords(store);  // folded outcomes included
  if (all.empty()) return std::nullopt;
  auto r = litetx::engine::DecodeRecord(all.begin()->second.value);
  if (!r.ok()) return std::nullopt;
  return *r;
}

// "" if no version in `now` is below the one in `then`.
std::string VersionsUp(const std::vector<std::uint64_t>& then, const std::vector<std::uint64_t>& now,
                       const char* when) {
  for (std::size_t i = 0; i < then.size(); ++i) {
    if (now[i] < then[i]) {
      return Id(static_cast<int>(i)) + " version went down " + when + ": " + std::to_string(then[i]) +
             " -> " + std::to_string(now[i]);
    }
  }
  return "";
}

// "" if the record moved forward only: once committed or aborted its state stays (pending and
// staging are left, and nothing goes back to staging), once a marker it stays one (claim
// finality, docs/protocol.md §6.4).
std::string RecordForward(const std::optional<TxnRecord>& then, const std::optional<TxnRecord>& now,
                          const char* when) {
  if (!then) return "";
  if (!now) return std::string("record vanished ") + when;
  const bool open = then->state == TxnState::kPending || then->state == TxnState::kStaging;
  if ((!open && now->state != then->state) ||
      (then->state == TxnState::kPending && now->state == TxnState::kStaging)) {
    return std::string("record went from ") + litetx::engine::TxnStateName(then->state) + " to " +
           litetx::engine::TxnStateName(now->state) + " " + when;
  }
  if (then->done && !now->done) return std::string("record stopped being a marker ") + when;
  return "";
}

// A random committing transaction of `min_docs` to `max_docs` documents: a live document is
// updated, adjusted or deleted, one that starts as `not_live` (absent or a tombstone) inserted.
Scenario RandomCommit(std::mt19937_64& rng, int min_docs, int max_docs, Init not_live) {
  Scenario s;
  int n = min_docs + static_cast<int>(rng() % static_cast<std::uint64_t>(max_docs - min_docs + 1));
  for (int d = 0; d < n; ++d) {
    bool live = rng() % 3 != 0;
    s.docs.push_back(DocSpec{live ? Init::kLive : not_live, static_cast<std::int64_t>(rng() % 50)});
    ActionType t = !live ? ActionType::kInsert
                         : std::vector<ActionType>{ActionType::kUpdate, ActionType::kAdjust,
                                                   ActionType::kDelete}[rng() % 3];
    s.acts.push_back(ActSpec{t, d, static_cast<std::int64_t>(rng() % 9) - 4, VersionMode::kNone});
  }
  return s;
}

// For the collector races: 1-4 documents, live or tombstones.
Scenario CollectorScenario(std::mt19937_64& rng) { return RandomCommit(rng, 1, 4, Init::kDeleted); }

// For the coordinator races: 2-3 documents, live or absent; at least two writes, so a record
// is used.
Scenario TwoOrThreeDocumentCommit(std::mt19937_64& rng) { return RandomCommit(rng, 2, 3, Init::kAbsent); }

// A store seeded with `s` whose coordinator (running `mode`) crashed right after its `k`-th
// write, the clock then moved past the lease. `must` is the side the collectors must settle it
// on, read from the store (not derived from k): after if the commit point landed (the flip; for
// a staging record, every document it lists held), before otherwise.
struct Crashed {
  std::shared_ptr<litetx::ManualClock> clock = std::make_shared<litetx::ManualClock>();
  std::shared_ptr<litetx::MemoryStore> mem = std::make_shared<litetx::MemoryStore>();
  char must = 0;
  std::optional<TxnRecord> record;
  std::vector<std::uint64_t> versions;
};
Crashed CrashCoordinator(const Scenario& s, std::uint64_t k, Mode mode) {
  Crashed c;
  SeedStore(*c.mem, s, c.clock);
  const std::vector<std::uint64_t> seeded = RawVersions(*c.mem, s.docs.size());
  litetx::FaultOptions f;
  f.crash_after_writes = k;
  try {
    litetx::Database db(std::make_shared<litetx::FaultInjectingStore>(c.mem, f),
                        ModeOptions(c.clock, mode));
    (void)db.Commit(BuildTxn(*c.mem, s));
  } catch (const litetx::SimulatedCrash&) {
  }
  c.record = TheRecord(*c.mem);
  // No record after a crash at write k >= 1: the one-action fast path, whose document write is
  // its commit point (a delete sends its tombstone index entry first, in the same batch: a
  // crash after that one leaves the document as it was). A staging record whose documents are
  // all held reads as committed.
  const RecordSeen seen = ObserveRecord(*c.mem);
  c.versions = RawVersions(*c.mem, s.docs.size());
  const bool one_write_landed = seen == RecordSeen::kNone && c.versions != seeded;
  c.must = one_write_landed || seen == RecordSeen::kCommitted ? 'a' : 'b';
  c.clock->Advance(kLease * 2);
  return c;
}

litetx::CollectorOptions NamedCollector(std::shared_ptr<litetx::Clock> clock, const char* name) {
  litetx::CollectorOptions o = TestCollectorOptions(std::move(clock));
  o.name = name;
  return o;
}

// Classic: held before the record exists, the commit goes on; while the record is pending, the
// collector claims and reverses it; after the flip, it finishes it. Parallel: the staging record
// is the batch's first write, so the pauses inside the batch find it staging with some documents
// not yet held (the collector fences one and aborts), and the pause before the flip finds every
// document held (the collector proves the commit and finishes it). The record as the store
// holds it at the pause (ObserveRecord: a staging record with every document held reads as
// committed) decides which, in both modes.
void CoordinatorPausedPastItsLease(Mode mode) {
  std::mt19937_64 rng(20261122);
  std::printf("[%s] race seed 20261122\n", ModeName(mode));
  int cases = 0, aborted = 0, finished_by_gc = 0, untouched = 0, refused = 0, staging = 0;
  // Committing transactions of 2-3 documents with at least two writes (a record is used).
  for (int round = 0, rounds = Rounds(60); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = OracleIn(s, mode);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t p = 1; p <= o.writes; ++p) {
      const std::string where =
          std::string(ModeName(mode)) + " " + s.Describe() + " held before write " + std::to_string(p);
      auto clock = std::make_shared<litetx::ManualClock>();
      auto mem = std::make_shared<litetx::MemoryStore>();
      SeedStore(*mem, s, clock);
      auto hold = std::make_shared<HoldingStore>(mem, p, Hold::kBefore);
      litetx::Transaction txn = BuildTxn(*mem, s);
      Code code = Code::kOk;
      Runner coordinator(hold, [&] {
        litetx::Database db(hold, ModeOptions(clock, mode));
        code = db.Commit(txn).code();
      });
      ASSERT_TRUE(hold->WaitHeldOrFinished()) << where;
      // Held: what the store says now decides what the collector must do.
      const std::optional<TxnRecord> at_pause = TheRecord(*mem);
      const RecordSeen seen = ObserveRecord(*mem);
      staging += at_pause && at_pause->state == TxnState::kStaging ? 1 : 0;
      clock->Advance(kLease * 2);
      litetx::Collector gc(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(gc.RunOnce().ok()) << where;
      const litetx::CollectorStats st = gc.stats();
      coordinator.Join();
      ++cases;
      // Held before the record exists: nothing to collect, the commit goes on. Held while the
      // record is pending (or staging without every document held): the collector claims (or
      // fences and aborts) and reverses it. Held after the commit point: the collector finishes
      // it, and the coordinator still reports OK.
      char must;
      if (seen == RecordSeen::kNone) {
        ++untouched;
        must = 'a';
        EXPECT_EQ(code, Code::kOk) << where;
        EXPECT_EQ(st.finished + st.reversed, 0u) << where;
      } else if (seen == RecordSeen::kPending || seen == RecordSeen::kStaging) {
        ++aborted;
        must = 'b';
        EXPECT_EQ(code, Code::kAborted) << where;
        EXPECT_EQ(st.reversed, 1u) << where;
      } else {
        ++finished_by_gc;
        must = 'a';
        EXPECT_EQ(seen, RecordSeen::kCommitted) << where;
        EXPECT_EQ(code, Code::kOk) << where;
        EXPECT_EQ(st.finished, 1u) << where;
      }
      // Once the collector acted, nothing the coordinator sends after its release may land:
      // the held write meets a claimed (or resolved) record, a fenced, reversed or finished
      // document, or a marker.
      bool any_landed = false;
      for (const HoldingStore::Write& w : hold->writes()) any_landed |= w.code == Code::kOk;
      if (at_pause) {
        EXPECT_FALSE(any_landed) << where << ": a write of the released coordinator landed";
        ASSERT_FALSE(hold->writes().empty()) << where;
        EXPECT_EQ(hold->writes()[0].code, Code::kConflict) << where;
        refused += hold->writes()[0].code == Code::kConflict ? 1 : 0;
      }
      litetx::Collector after(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(after.RunOnce().ok()) << where;
      EXPECT_EQ(after.stats().finished + after.stats().reversed, 0u) << where << ": left work behind";
      EXPECT_EQ(CheckFinal(*mem, o, s.docs.size(), must), "") << where;
    }
  }
  std::printf("[%s] paused-coordinator cases: %d (%d aborted and reversed by the collector, %d "
              "finished by the collector and reported OK, %d held before the record existed; "
              "record staging at the pause in %d); the held write was refused with kConflict in %d\n",
              ModeName(mode), cases, aborted, finished_by_gc, untouched, staging, refused);
  EXPECT_GT(aborted, 0);
  EXPECT_GT(finished_by_gc, 0);
  EXPECT_GT(untouched, 0);
  EXPECT_EQ(refused, aborted + finished_by_gc);
  if (mode == Mode::kParallel) {
    EXPECT_GT(staging, 0);
  }
}

TEST(RaceTest, CoordinatorPausedPastItsLeaseEndsAbortedOrCommittedNeverMixed) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    CoordinatorPausedPastItsLease(mode);
  }
}

// The reverse interleaving: the coordinator is held before each of its writes once its record
// exists and is not yet committed; past its lease a collector starts the repair and is held in
// turn right after each of its own writes landed; the coordinator is released and runs to
// its end while the collector is held; then the collector is released.
// Classic (writes 2..flip, the record pending): the collector's first write is its claim, so
// whatever step it is held at, the coordinator must end kAborted (it may still reverse its own
// writes meanwhile) with every document at its before image, and the record aborted.
// Parallel (held before each apply of the batch: the record staging, some document not held):
// the collector's first write fences a document not held, and only its second moves the record
// (staging -> aborted). Held after the fence alone, the released coordinator finds that apply
// refused, moves its record staging -> pending itself (the collector's resolution then fails
// its compare-and-swap), applies the document again and commits; held after the record moved,
// the coordinator finds it aborted. Either way its report must match the store, and the record
// seen while the collector is held must agree with it.
void CollectorHeldMidRepair(Mode mode) {
  std::mt19937_64 rng(20261125);
  std::printf("[%s] held-collector-resumed-coordinator seed 20261125\n", ModeName(mode));
  int cases = 0, committed = 0, aborted = 0;
  for (int round = 0, rounds = Rounds(30); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = OracleIn(s, mode);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    // Write 1 creates the record. Classic: write commit_write is the flip; held before writes
    // 2..flip, the record is pending. Parallel: write commit_write is the last apply (every
    // document held from then on); held before writes 2..commit_write, the record is staging.
    for (std::uint64_t p = 2; p <= o.commit_write; ++p) {
      for (std::uint64_t i = 1; i <= kMaxWrites; ++i) {
        const std::string where = std::string(ModeName(mode)) + " " + s.Describe() +
                                  " coordinator held before write " + std::to_string(p) +
                                  ", collector held after its write " + std::to_string(i);
        auto clock = std::make_shared<litetx::ManualClock>();
        auto mem = std::make_shared<litetx::MemoryStore>();
        SeedStore(*mem, s, clock);
        auto coord_hold = std::make_shared<HoldingStore>(mem, p, Hold::kBefore);
        litetx::Transaction txn = BuildTxn(*mem, s);
        Code code = Code::kOk;
        Runner coordinator(coord_hold, [&] {
          litetx::Database db(coord_hold, ModeOptions(clock, mode));
          code = db.Commit(txn).code();
        });
        ASSERT_TRUE(coord_hold->WaitHeldOrFinished()) << where;
        const RecordSeen at_pause = ObserveRecord(*mem);
        ASSERT_EQ(at_pause, mode == Mode::kClassic ? RecordSeen::kPending : RecordSeen::kStaging)
            << where;
        clock->Advance(kLease * 2);
        auto gc_hold = std::make_shared<HoldingStore>(mem, i, Hold::kLanded);
        litetx::Status gc_status;
        Runner collector(gc_hold, [&] {
          litetx::Collector gc(gc_hold, TestCollectorOptions(clock));
          gc_status = gc.RunOnce();
        });
        if (!gc_hold->WaitHeldOrFinished()) {
          // The collector made fewer than i writes: every step has been held at.
          collector.Join();
          EXPECT_TRUE(gc_status.ok()) << where << ": " << gc_status.ToString();
          EXPECT_GT(i, 1u) << where << ": the collector wrote nothing";
          break;
        }
        ++cases;
        // The collector is held with i of its writes landed; the coordinator runs to its end.
        coordinator.Join();
        const RecordSeen mid = ObserveRecord(*mem);
        collector.Join();
        EXPECT_TRUE(gc_status.ok()) << where << ": " << gc_status.ToString();
        litetx::Collector healthy(mem, TestCollectorOptions(clock));
        ASSERT_TRUE(healthy.RunOnce().ok()) << where;
        auto record = TheRecord(*mem);
        ASSERT_TRUE(record.has_value()) << where;
        if (mode == Mode::kClassic) {
          EXPECT_EQ(code, Code::kAborted) << where;
          EXPECT_EQ(mid, RecordSeen::kAborted) << where << ": the record while the collector was held";
        } else {
          ASSERT_TRUE(code == Code::kOk || code == Code::kAborted) << where << ": " << litetx::CodeName(code);
          EXPECT_EQ(mid, code == Code::kOk ? RecordSeen::kCommitted : RecordSeen::kAborted)
              << where << ": the record while the collector was held";
        }
        (code == Code::kOk ? committed : aborted) += 1;
        EXPECT_EQ(CheckFinal(*mem, o, s.docs.size(), code == Code::kOk ? 'a' : 'b'), "") << where;
        EXPECT_EQ(record->state, code == Code::kOk ? TxnState::kCommitted : TxnState::kAborted) << where;
      }
    }
  }
  std::printf("[%s] held-collector-resumed-coordinator cases: %d (the coordinator committed in "
              "%d, ended aborted and before in %d)\n",
              ModeName(mode), cases, committed, aborted);
  EXPECT_GT(aborted, 0);
  if (mode == Mode::kClassic) {
    EXPECT_EQ(committed, 0);
  } else {
    EXPECT_GT(committed, 0);
  }
}

TEST(RaceTest, CollectorHeldMidRepairWhileItsCoordinatorResumes) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    CollectorHeldMidRepair(mode);
  }
}

// Every coordinator write k, in turn, lands but loses its reply; before the coordinator
// re-reads, it pauses past its lease while a collector claims and repairs — crashing after
// each possible number j of its own writes, or not at all. Then the coordinator resumes. What
// Commit reports must match the store after a healthy collector (OK: after; an error other
// than kUnknown: before), and Database::Outcome, once it says committed or aborted, never
// changes again. The pause runs inside the coordinator's call (no second thread is needed).
TEST(RaceTest, LostReplyThenPausePastTheLeaseAtEveryWrite) {
  std::mt19937_64 rng(20261124);
  std::printf("lost-reply race seed 20261124\n");
  int cases = 0, ok_after = 0, failed_before = 0, unknown = 0, collector_crashes = 0;
  std::map<std::string, int> seen_during;
  for (int round = 0, rounds = Rounds(40); round < rounds; ++round) {
    Scenario s;
    int n = 2 + static_cast<int>(rng() % 2);
    for (int d = 0; d < n; ++d) {
      Init init = std::vector<Init>{Init::kLive, Init::kLive, Init::kAbsent, Init::kDeleted}[rng() % 4];
      s.docs.push_back(DocSpec{init, static_cast<std::int64_t>(rng() % 50)});
      ActionType t = init != Init::kLive
                         ? ActionType::kInsert
                         : std::vector<ActionType>{ActionType::kUpdate, ActionType::kAdjust,
                                                   ActionType::kDelete}[rng() % 3];
      s.acts.push_back(ActSpec{t, d, static_cast<std::int64_t>(rng() % 9) - 4, VersionMode::kNone});
    }
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t k = 1; k <= o.writes; ++k) {
      // The collector dies after its j-th write; the loop ends once a collector finished
      // without reaching its crash point (that case is the uncrashed run).
      for (std::uint64_t j = 1;; ++j) {
        ASSERT_LE(j, kMaxWrites) << s.Describe() << " k=" << k << ": the collector never finished";
        auto clock = std::make_shared<litetx::ManualClock>();
        auto mem = std::make_shared<litetx::MemoryStore>();
        SeedStore(*mem, s, clock);
        std::uint64_t writes = 0;
        bool fired = false, paused = false, gc_crashed = false;
        std::string during;  // the record's state seen while the coordinator was paused
        litetx::FaultOptions f;
        f.rule = [&](litetx::StoreOp op, const litetx::Key&, std::uint64_t) {
          bool write = op == litetx::StoreOp::kCreate || op == litetx::StoreOp::kReplace ||
                       op == litetx::StoreOp::kErase;
          if (!write || fired || ++writes != k) return litetx::Fault::kNone;
          fired = true;
          return litetx::Fault::kLostReply;
        };
        auto lossy = std::make_shared<litetx::FaultInjectingStore>(mem, f);
        // Runs right after the k-th write landed, before its (lost) reply reaches the
        // coordinator: the pause past the lease, and a collector.
        auto hook = [&] {
          if (!fired || paused) return;
          paused = true;
          clock->Advance(kLease * 2);
          litetx::FaultOptions cf;
          cf.crash_after_writes = j;
          litetx::Collector gc(std::make_shared<litetx::FaultInjectingStore>(mem, cf),
                               TestCollectorOptions(clock));
          try {
            (void)gc.RunOnce();
          } catch (const litetx::SimulatedCrash&) {
            gc_crashed = true;
          }
          // What Database::Outcome would answer now, while the coordinator is still paused.
          if (auto rec = TheRecord(*mem)) during = litetx::engine::TxnStateName(rec->state);
        };
        litetx::Database db(std::make_shared<AfterWriteStore>(lossy, hook), TestOptions(clock));
        auto r = db.Commit(BuildTxn(*mem, s));
        db.Flush();  // a write after the flip is the finisher's: it may still be on its way
        ASSERT_TRUE(fired && paused) << s.Describe() << " k=" << k;
        const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
        litetx::Database reader(mem, TestOptions(clock));
        auto first = reader.Outcome(id);
        ASSERT_TRUE(first.ok());
        clock->Advance(kLease * 4);
        litetx::Collector healthy(mem, TestCollectorOptions(clock));
        ASSERT_TRUE(healthy.RunOnce().ok());
        auto last = reader.Outcome(id);
        ASSERT_TRUE(last.ok());
        const std::string where = s.Describe() + " lost reply of write " + std::to_string(k) +
                                  ", collector crash after " + std::to_string(j) + ": " +
                                  r.status().ToString();
        // Every case has a record by the pause (its create is the first write), so the state
        // seen during it is always known.
        ASSERT_FALSE(during.empty()) << where << ": no record during the pause";
        ++seen_during[during];
        if (during == "aborted") {
          EXPECT_EQ(*first, litetx::TxnOutcome::kAborted) << where << ": reported aborted, then not";
          EXPECT_FALSE(r.ok()) << where << ": committed after a collector had aborted it";
        }
        if (during == "committed") {
          EXPECT_EQ(*first, litetx::TxnOutcome::kCommitted) << where;
          EXPECT_TRUE(r.ok()) << where << ": committed during the pause, then reported failed";
        }
        if (*first == litetx::TxnOutcome::kCommitted || *first == litetx::TxnOutcome::kAborted) {
          EXPECT_EQ(*last, *first) << where << ": outcome changed after it was reported";
        }
        char must = 0;
        if (r.ok()) {
          must = 'a';
          ++ok_after;
        } else if (r.code() != Code::kUnknown) {
          must = 'b';
          ++failed_before;
        } else {
          ++unknown;
          if (*last == litetx::TxnOutcome::kCommitted) must = 'a';
          if (*last == litetx::TxnOutcome::kAborted) must = 'b';
        }
        ASSERT_EQ(CheckFinal(*mem, o, s.docs.size(), must), "") << where;
        ++cases;
        collector_crashes += gc_crashed ? 1 : 0;
        if (!gc_crashed) break;
      }
    }
  }
  std::printf("lost-reply pause cases: %d (OK and after: %d, failed and before: %d, unknown: %d; "
              "collector crashed in %d); record seen during the pause:",
              cases, ok_after, failed_before, unknown, collector_crashes);
  for (const auto& [state, count] : seen_during) std::printf(" %s %d", state.c_str(), count);
  std::printf("\n");
  EXPECT_GT(failed_before, 0);
  EXPECT_GT(ok_after, 0);
  EXPECT_GT(collector_crashes, 0);
  EXPECT_GT(seen_during["aborted"], 0);
  EXPECT_GT(seen_during["committed"], 0);
}

// Two collectors on one transaction left by a crashed coordinator, the race forced: collector
// A is held at its i-th write (before it, once it landed, or once it landed with its reply
// lost) while collector B runs to completion; then A is released. For every coordinator crash
// point k, every hold mode and every i that A reaches. Both runs must return OK; the end state
// (already after B, and after A) must be all before or all after as the crash point decides,
// clean, with no version going down at any step and the record only moving forward; at most
// one of them counts it settled (B whenever A was held mid-repair); and once B has settled it,
// nothing A sends after its release may land.
void TwoCollectorsAtOnce(Mode mode) {
  std::mt19937_64 rng(777);
  std::printf("[%s] two-collector seed 777\n", ModeName(mode));
  int cases = 0, held = 0, held_mid_repair = 0, held_after_marker = 0, alone = 0;
  int b_settled = 0, a_claim_lost = 0, a_resolve_lost = 0, a_doc_write_lost = 0, a_marker_lost = 0;
  int a_no_write = 0, marker_reply_lost = 0, held_at_fold = 0;
  for (int round = 0, rounds = Rounds(24); round < rounds; ++round) {
    Scenario s = CollectorScenario(rng);
    Oracle o = OracleIn(s, mode);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t k = 1; k <= o.writes; ++k) {
      for (Hold hold_at : {Hold::kBefore, Hold::kLanded, Hold::kLostReply}) {
        for (std::uint64_t i = 1;; ++i) {
          ASSERT_LE(i, kMaxWrites) << s.Describe() << ": collector A never finished";
          const std::string where = std::string(ModeName(mode)) + " " + s.Describe() +
                                    " coordinator crash after write " + std::to_string(k) +
                                    ", A held " + HoldName(hold_at) + " its write " + std::to_string(i);
          Crashed c = CrashCoordinator(s, k, mode);
          auto hold = std::make_shared<HoldingStore>(c.mem, i, hold_at);
          litetx::Collector a(hold, NamedCollector(c.clock, "gc-a"));
          litetx::Status sa;
          Runner ta(hold, [&] { sa = a.RunOnce(); });
          const bool was_held = hold->WaitHeldOrFinished();
          ++cases;
          if (!was_held) {  // A never reaches write i: it settled everything alone
            ta.Join();
            ++alone;
            ASSERT_TRUE(sa.ok()) << where << ": " << sa.ToString();
            ASSERT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where;
            ASSERT_EQ(VersionsUp(c.versions, RawVersions(*c.mem, s.docs.size()), "under A alone"), "")
                << where;
            break;
          }
          ++held;
          const std::optional<TxnRecord> at_pause = TheRecord(*c.mem);
          const std::vector<std::uint64_t> v_pause = RawVersions(*c.mem, s.docs.size());
          ASSERT_TRUE(at_pause.has_value()) << where;  // A writes only when there is a record
          const bool mid_repair = !at_pause->done;
          // The marker already erased (its held write, landed, was that erase): only on its page.
          const bool folded_at_pause =
              c.mem->Scan(litetx::kTransactionsCollection, "", 1)->documents.empty();
          held_mid_repair += mid_repair ? 1 : 0;
          held_after_marker += mid_repair ? 0 : 1;

          litetx::Collector b(c.mem, NamedCollector(c.clock, "gc-b"));
          const litetx::Status sb = b.RunOnce();
          ASSERT_TRUE(sb.ok()) << where << ": B " << sb.ToString();
          const std::optional<TxnRecord> after_b = TheRecord(*c.mem);
          const std::vector<std::uint64_t> v_b = RawVersions(*c.mem, s.docs.size());
          // B alone took it to the end while A was held.
          EXPECT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where << " (after B)";

          ta.Join();
          ASSERT_TRUE(sa.ok()) << where << ": A " << sa.ToString();
          const std::vector<std::uint64_t> v_a = RawVersions(*c.mem, s.docs.size());
          EXPECT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where << " (after A)";
          EXPECT_EQ(VersionsUp(c.versions, v_pause, "before the pause"), "") << where;
          EXPECT_EQ(VersionsUp(v_pause, v_b, "under B"), "") << where;
          EXPECT_EQ(VersionsUp(v_b, v_a, "under the released A"), "") << where;
          EXPECT_EQ(RecordForward(c.record, at_pause, "before the pause"), "") << where;
          EXPECT_EQ(RecordForward(at_pause, after_b, "under B"), "") << where;
          EXPECT_EQ(RecordForward(after_b, TheRecord(*c.mem), "under the released A"), "") << where;

          const litetx::CollectorStats sta = a.stats(), stb = b.stats();
          EXPECT_EQ(sta.failed + stb.failed, 0u) << where;
          const std::uint64_t by_a = sta.finished + sta.reversed, by_b = stb.finished + stb.reversed;
          const std::uint64_t* side = c.must == 'a' ? &stb.finished : &stb.reversed;
          if (mid_repair) {
            // B found the work unfinished and settled it; A, released, found it settled.
            EXPECT_EQ(by_b, 1u) << where << ": B did not settle it";
            EXPECT_EQ(*side, 1u) << where << ": B settled it on the wrong side";
            EXPECT_EQ(by_a, 0u) << where << ": both counted it";
            b_settled += by_b == 1 ? 1 : 0;
            // Nothing A sends after B settled the transaction may land; count what stopped it.
            bool any = false;
            for (const HoldingStore::Write& w : hold->writes()) {
              const bool after = w.after_release;
              if (!after) continue;
              any = true;
              EXPECT_EQ(w.code, Code::kConflict)
                  << where << ": A's write to " << w.key.collection << "/" << w.key.id
                  << " after its release got " << litetx::CodeName(w.code);
              if (w.code != Code::kConflict) continue;
              if (w.key.collection != litetx::kTransactionsCollection) {
                ++a_doc_write_lost;
              } else if (at_pause->state == TxnState::kPending) {
                ++a_claim_lost;
              } else if (at_pause->state == TxnState::kStaging) {
                ++a_resolve_lost;
              } else {
                ++a_marker_lost;
              }
            }
            a_no_write += any ? 0 : 1;
          } else {
            // A's held write was its own marker, which landed, or one of the writes that fold
            // that marker into its outcome page (the page, the marker's tombstone index entry,
            // then the marker's erase: every write held before it comes after the marker): B
            // found nothing to repair (it may fold the
            // marker itself; A, released, finds its entry on the page, or its marker gone). A
            // counts the repair; when the marker's reply was lost, A re-reads a marker it cannot
            // tell from another collector's, and today counts nothing (tallied below).
            const bool fold_write = hold_at == Hold::kBefore ||
                                    hold->held_key().collection == litetx::kOutcomesCollection ||
                                    hold->held_key().collection == litetx::kTombstoneIndexCollection ||
                                    folded_at_pause;
            held_at_fold += fold_write ? 1 : 0;
            EXPECT_EQ(by_b, 0u) << where;
            if (fold_write) {
              // Its marker may be the coordinator's own: then A repaired nothing.
              EXPECT_LE(by_a, 1u) << where;
            } else if (hold_at == Hold::kLostReply) {
              EXPECT_LE(by_a, 1u) << where;
              marker_reply_lost += by_a == 0 ? 1 : 0;
            } else {
              EXPECT_EQ(by_a, 1u) << where;
            }
          }
        }
      }
    }
  }
  std::printf("[%s] two-collector cases: %d; A held at its write in %d (mid-repair %d, after its "
              "own marker landed %d), A alone to the end in %d\n",
              ModeName(mode), cases, held, held_mid_repair, held_after_marker, alone);
  std::printf("  held mid-repair: B settled it in %d; A's writes after its release refused: claim "
              "%d, staging resolution %d, document %d, marker %d; A re-read a settled record and "
              "wrote nothing in %d; A's own marker landed with a lost reply and neither counted "
              "it: %d\n",
              b_settled, a_claim_lost, a_resolve_lost, a_doc_write_lost, a_marker_lost, a_no_write,
              marker_reply_lost);
  std::printf("  held at a write folding its own marker into its outcome page: %d\n", held_at_fold);
  EXPECT_GT(held_mid_repair, 0);
  EXPECT_GT(held_at_fold, 0);
  EXPECT_EQ(b_settled, held_mid_repair);
  // Classic records are claimed (pending -> aborted); staging records resolved (-> committed or
  // aborted), never claimed.
  EXPECT_GT(mode == Mode::kClassic ? a_claim_lost : a_resolve_lost, 0);
  EXPECT_EQ(mode == Mode::kClassic ? a_resolve_lost : a_claim_lost, 0);
  EXPECT_GT(a_doc_write_lost, 0);
  EXPECT_GT(a_marker_lost, 0);
  EXPECT_GT(a_no_write, 0);
}

TEST(RaceTest, TwoCollectorsAtOnceOnCrashedCoordinators) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    TwoCollectorsAtOnce(mode);
  }
}

// The other order: collector B is held at its j-th write (before it reaches the store) while
// collector A crashes after each of its writes in turn, or completes; then B is released and
// must take the transaction to the end by itself (no third collector runs).
void HeldCollectorFinishes(Mode mode) {
  std::mt19937_64 rng(778);
  std::printf("[%s] held-collector seed 778\n", ModeName(mode));
  int cases = 0, a_crashed = 0, a_completed = 0, b_settled = 0, b_found_settled = 0;
  int b_held_at_fold = 0;
  for (int round = 0, rounds = Rounds(16); round < rounds; ++round) {
    Scenario s = CollectorScenario(rng);
    Oracle o = OracleIn(s, mode);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t k = 1; k <= o.writes; ++k) {
      bool b_reached = true;
      for (std::uint64_t j = 1; b_reached; ++j) {
        ASSERT_LE(j, kMaxWrites) << s.Describe() << ": collector B never finished";
        for (std::uint64_t m = 1;; ++m) {
          ASSERT_LE(m, kMaxWrites) << s.Describe() << ": collector A never finished";
          const std::string where = std::string(ModeName(mode)) + " " + s.Describe() +
                                    " coordinator crash after write " + std::to_string(k) +
                                    ", B held before its write " + std::to_string(j) +
                                    ", A crash after its write " + std::to_string(m);
          Crashed c = CrashCoordinator(s, k, mode);
          auto hold = std::make_shared<HoldingStore>(c.mem, j, Hold::kBefore);
          litetx::Collector b(hold, NamedCollector(c.clock, "gc-b"));
          litetx::Status sb;
          Runner tb(hold, [&] { sb = b.RunOnce(); });
          if (!hold->WaitHeldOrFinished()) {
            tb.Join();
            b_reached = false;
            break;
          }
          ++cases;
          const std::vector<std::uint64_t> v_pause = RawVersions(*c.mem, s.docs.size());
          // Held at a write after the transaction's marker (folding it into its outcome page):
          // B had settled it already (or found the coordinator's own marker).
          const bool settled_before_b_held = TheRecord(*c.mem).has_value() && TheRecord(*c.mem)->done;
          litetx::FaultOptions f;
          f.crash_after_writes = m;
          bool crashed = false;
          litetx::Collector a(std::make_shared<litetx::FaultInjectingStore>(c.mem, f),
                              NamedCollector(c.clock, "gc-a"));
          try {
            EXPECT_TRUE(a.RunOnce().ok()) << where;
          } catch (const litetx::SimulatedCrash&) {
            crashed = true;
          }
          const std::vector<std::uint64_t> v_a = RawVersions(*c.mem, s.docs.size());
          const bool settled_by_a = TheRecord(*c.mem).has_value() && TheRecord(*c.mem)->done;
          tb.Join();
          ASSERT_TRUE(sb.ok()) << where << ": B " << sb.ToString();
          EXPECT_EQ(CheckFinal(*c.mem, o, s.docs.size(), c.must), "") << where;
          EXPECT_EQ(VersionsUp(c.versions, v_pause, "before the pause"), "") << where;
          EXPECT_EQ(VersionsUp(v_pause, v_a, "under A"), "") << where;
          EXPECT_EQ(VersionsUp(v_a, RawVersions(*c.mem, s.docs.size()), "under the released B"), "")
              << where;
          const litetx::CollectorStats stb = b.stats();
          EXPECT_EQ(stb.failed, 0u) << where;
          if (settled_before_b_held) {
            ++b_held_at_fold;
            EXPECT_LE(stb.finished + stb.reversed, 1u) << where;
          } else if (settled_by_a) {
            ++b_found_settled;
            EXPECT_EQ(stb.finished + stb.reversed, 0u) << where;
          } else {
            ++b_settled;
            EXPECT_EQ(c.must == 'a' ? stb.finished : stb.reversed, 1u) << where;
          }
          if (!crashed) {
            ++a_completed;
            break;
          }
          ++a_crashed;
        }
      }
    }
  }
  std::printf("[%s] held-collector cases: %d (A crashed in %d, completed in %d); the released B "
              "settled it in %d, found it settled in %d\n",
              ModeName(mode), cases, a_crashed, a_completed, b_settled, b_found_settled);
  std::printf("  B held at a write folding a marker into its outcome page: %d\n", b_held_at_fold);
  EXPECT_GT(a_crashed, 0);
  EXPECT_GT(b_settled, 0);
  EXPECT_GT(b_found_settled, 0);
}

TEST(RaceTest, HeldCollectorFinishesWhatACrashedOneLeft) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    HeldCollectorFinishes(mode);
  }
}

// Counts what a collector does to the store: the writes it attempts (record erases apart from
// the rest), and the pending or staging records its scans return (transactions in flight that
// it saw and had to leave alone).
class WatchStore final : public litetx::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override {
    ++writes;
    return ForwardingStore::Create(k, v);
  }
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override {
    ++writes;
    return ForwardingStore::Replace(k, e, v);
  }
  litetx::Status Erase(const litetx::Key& k, litetx::Revision e) override {
    ++(k.collection == litetx::kTransactionsCollection ? record_erases : writes);
    return ForwardingStore::Erase(k, e);
  }
  litetx::Result<litetx::ScanPage> Scan(std::string_view c, std::string_view cursor,
                                        std::size_t limit) override {
    auto page = ForwardingStore::Scan(c, cursor, limit);
    if (page.ok() && c == litetx::kTransactionsCollection) {
      for (const auto& [id, doc] : page->documents) {
        auto r = litetx::engine::DecodeRecord(doc.value);
        if (r.ok() && !r->done &&
            (r->state == TxnState::kPending || r->state == TxnState::kStaging)) {
          ++in_flight_seen;
        }
      }
    }
    return page;
  }
  std::atomic<std::uint64_t> writes{0}, record_erases{0}, in_flight_seen{0};
};

void CollectorBesideHealthyCoordinators(Mode mode) {
  auto mem = std::make_shared<litetx::MemoryStore>();
  auto clock = litetx::SystemClock();
  litetx::Options opts = ModeOptions(clock, mode);
  opts.lease = std::chrono::minutes(5);
  opts.busy_timeout = std::chrono::seconds(2);
  opts.retry_backoff = {std::chrono::milliseconds{1}, std::chrono::milliseconds{10}};
  litetx::Database db(mem, opts);
  constexpr int kAccounts = 6;
  for (int i = 0; i < kAccounts; ++i) {
    ASSERT_TRUE(db.Commit(litetx::Transaction().Insert("bank", "a" + std::to_string(i), {{"balance", 100}})).ok());
  }
  litetx::CollectorOptions co = TestCollectorOptions(clock);
  co.engine.lease = opts.lease;
  co.interval = std::chrono::milliseconds(0);
  co.collections = {"bank"};  // the sweep looks at the held documents too
  co.sweep_interval = std::chrono::milliseconds(0);  // a sweep slice in every pass
  // Outcome markers are erased as soon as the collector sees them (the one kind of write it
  // may make here), so that the record collection stays small and each pass is short.
  co.outcome_retention = std::chrono::milliseconds(0);
  auto watch = std::make_shared<WatchStore>(mem);
  litetx::Collector gc(watch, co);
  gc.Start();
  std::atomic<int> ok{0}, retryable{0}, other{0};
  std::uint64_t runs_at_start = 0, runs_at_end = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  {
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&, w] {
        std::mt19937 rng(w);
        // 250 transfers each, then more (up to 5,000, for at most 10 s) until the collector
        // has seen at least 20 transactions in flight (pending records, or staging ones: a
        // transfer commits in parallel).
        for (int i = 0; i < 5000; ++i) {
          if (i >= 250 && (watch->in_flight_seen.load() >= 20 || std::chrono::steady_clock::now() > deadline)) {
            break;
          }
          int from = static_cast<int>(rng() % kAccounts), to = static_cast<int>(rng() % (kAccounts - 1));
          if (to >= from) ++to;
          auto r = db.Commit(litetx::Transaction()
                                 .Adjust("bank", "a" + std::to_string(from), {{"balance", -1}})
                                 .Adjust("bank", "a" + std::to_string(to), {{"balance", 1}}));
          if (r.ok()) ++ok;
          else if (r.status().IsRetryableTransaction()) ++retryable;
          else ++other;
        }
      });
    }
    runs_at_start = gc.stats().runs;
    for (auto& t : workers) t.join();
    db.Flush();  // the last transactions' finishing, done by the Database's finisher
    runs_at_end = gc.stats().runs;
  }
  gc.Stop();
  auto stats = gc.stats();
  std::printf("[%s] beside healthy traffic: %d committed, %d retryable, %d other; gc runs %llu "
              "(%llu while the coordinators ran), records in flight seen %llu, markers erased "
              "%llu, other gc writes %llu, undone %llu\n",
              ModeName(mode), ok.load(), retryable.load(), other.load(),
              static_cast<unsigned long long>(stats.runs),
              static_cast<unsigned long long>(runs_at_end - runs_at_start),
              static_cast<unsigned long long>(watch->in_flight_seen.load()),
              static_cast<unsigned long long>(stats.purged),
              static_cast<unsigned long long>(watch->writes.load()),
              static_cast<unsigned long long>(stats.undone));
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  // It really ran beside them and saw transactions in flight, and wrote nothing but the
  // erase of markers: no claim, no document write (every record erase was a marker purge).
  EXPECT_GT(stats.runs, 0u);
  EXPECT_GE(watch->in_flight_seen.load(), 20u);
  EXPECT_EQ(watch->writes.load(), 0u);
  EXPECT_EQ(watch->record_erases.load(), stats.purged);
  EXPECT_EQ(stats.finished, 0u);
  EXPECT_EQ(stats.reversed, 0u);
  EXPECT_EQ(stats.failed, 0u);
  std::int64_t total = 0;
  for (int i = 0; i < kAccounts; ++i) {
    auto r = db.Read("bank", "a" + std::to_string(i));
    ASSERT_TRUE(r.ok());
    total += r->doc.at("balance").as_int64();
  }
  EXPECT_EQ(total, 100 * kAccounts);
  EXPECT_EQ(CheckClean(*mem), "");
}

TEST(RaceTest, CollectorBesideHealthyCoordinatorsTouchesNothing) {
  for (Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    CollectorBesideHealthyCoordinators(mode);
  }
}


// ---------------------------------------------------------------------------------------------
// Staging-record races (the parallel commit).

// "" if every scenario document reads as the side `must` names ('a' after, 'b' before: content
// only), nothing is left held or unsettled, and no version went down. For runs where another
// writer rewrote a document with its content unchanged (an adjust by 0), so that the versions
// CheckFinal compares on the after side have moved on.
std::string CheckSide(litetx::Store& store, const Oracle& o, std::size_t n, char must) {
  std::string err;
  auto final = ReadContents(store, n, &err);
  if (!final) return "read failed: " + err;
  const Contents& want = must == 'a' ? o.after : o.before;
  if (*final != want) {
    return std::string("expected the ") + (must == 'a' ? "after" : "before") + " state " +
           Show(want) + ", got " + Show(*final);
  }
  if (std::string v = VersionsUp(o.before_versions, RawVersions(store, n), "overall"); !v.empty()) {
    return v;
  }
  if (std::string dirty = CheckClean(store); !dirty.empty()) return "not clean: " + dirty;
  return "";
}

// When a write held in the network (Loss::kDeferred) reaches the store.
enum class Deliver : std::uint8_t {
  kBeforeResolver,  // in the pause, before the collector runs
  kAfterResolver,   // in the pause, once the collector has run
  kAfterCommit,     // once the coordinator (and its finisher) returned
  kNever,
};
const char* DeliverName(Deliver d) {
  switch (d) {
    case Deliver::kBeforeResolver: return "before the resolver";
    case Deliver::kAfterResolver: return "after the resolver";
    case Deliver::kAfterCommit: return "after the commit returned";
    case Deliver::kNever: return "never";
  }
  return "?";
}

// One run of a parallel commit paused past its lease while a collector resolves it.
struct StagingPause {
  std::function<StepStore::Pick()> pick;  // makes the pick of the write whose reply is lost (none if empty)
  Loss loss = Loss::kLanded;
  std::uint64_t pause_at = 0;  // the coordinator's store call before which it pauses
  bool after_loss = false;     // pause_at counts the calls after the lost write
  Deliver deliver = Deliver::kNever;
};

struct StagingRun {
  bool paused = false;  // the pause point was reached (else nothing was checked)
  bool lost = false;    // a reply was lost
  bool right_after_loss = false;  // paused at the call right after the lost write (its re-read)
  Code code = Code::kOk;
  RecordSeen at_pause = RecordSeen::kNone;  // the record as the collector in the pause left it
  bool resolver_settled = false;  // ...which had settled it (committed or aborted: a marker or fence)
  std::optional<Code> delivered;            // the deferred write's result, if it was delivered
  litetx::TxnOutcome last = litetx::TxnOutcome::kNotFound;  // Outcome at the end
  char side = 0;                            // the side the store ended on
  std::string failure;                      // "" if every check held
};

// Commits `s` (parallel) through a StepStore: the coordinator pauses before its call
// c.pause_at for twice its lease while a collector runs to completion on the store (and the
// deferred write, if any, is delivered as c.deliver says); then it resumes. Checks: the
// collector succeeded; Database::Outcome (asked in the pause, right after the commit, and after
// a healthy collector at the end), once committed or aborted, never changes; what Commit
// reported matches the end (OK: committed and after; an error other than kUnknown: not
// committed and before; kUnknown: as Outcome says); a deferred write delivered after the
// resolver settled the transaction never lands; and the store ends entirely on that side
// (CheckFinal). A deferred write may land otherwise: a record create delivered when the
// resolver found nothing yet to settle (no hold had landed), which the coordinator then adopts;
// or delivered after a coordinator that could not tell (kUnknown) returned.
StagingRun RunStagingPause(const Scenario& s, const Oracle& o, const StagingPause& c) {
  StagingRun run;
  auto clock = std::make_shared<litetx::ManualClock>();
  auto mem = std::make_shared<litetx::MemoryStore>();
  SeedStore(*mem, s, clock);
  auto step = std::make_shared<StepStore>(mem);
  if (c.pick) step->Lose(c.pick(), c.loss);
  litetx::Database reader(mem, TestOptions(clock));
  litetx::Status gc_status;
  std::optional<litetx::Result<litetx::TxnOutcome>> during;
  std::uint64_t lost_at_pause = 0;  // calls made up to the lost write, as seen in the pause
  step->PauseBefore(
      c.pause_at,
      [&] {
        lost_at_pause = step->lost() ? step->calls_at_loss() : 0;
        clock->Advance(kLease * 2);
        if (c.deliver == Deliver::kBeforeResolver) run.delivered = step->Deliver();
        litetx::Collector gc(mem, TestCollectorOptions(clock));
        gc_status = gc.RunOnce();
        const std::optional<TxnRecord> left = TheRecord(*mem);
        run.resolver_settled = left.has_value() && left->done;
        if (c.deliver == Deliver::kAfterResolver) run.delivered = step->Deliver();
        run.at_pause = ObserveRecord(*mem);
        if (std::string id = RecordId(*mem); !id.empty()) during = reader.Outcome(id);
      },
      c.after_loss);
  litetx::Result<litetx::CommitInfo> r = litetx::Status::Unknown("not run");
  {
    litetx::Database db(step, TestOptions(clock));
    r = db.Commit(BuildTxn(*mem, s));
  }  // the destructor waits for the finisher (the flip, the finishing, the marker)
  run.paused = step->paused();
  run.lost = step->lost();
  run.code = r.code();
  run.right_after_loss = run.lost && lost_at_pause != 0 && step->pause_call() == lost_at_pause + 1;
  if (!run.paused) return run;
  auto fail = [&](const std::string& why) {
    run.failure = why;
    return run;
  };
  if (!gc_status.ok()) return fail("the collector in the pause failed: " + gc_status.ToString());
  if (c.deliver == Deliver::kAfterCommit) run.delivered = step->Deliver();
  const std::string id = r.ok() ? r->txn_id : r.status().txn_id();
  auto first = reader.Outcome(id);
  clock->Advance(kLease * 4);
  litetx::Collector healthy(mem, TestCollectorOptions(clock));
  if (litetx::Status st = healthy.RunOnce(); !st.ok()) {
    return fail("the healthy collector failed: " + st.ToString());
  }
  auto last = reader.Outcome(id);
  const std::string outcomes = std::string("reported ") + std::string(litetx::CodeName(r.code())) +
                               "; Outcome in the pause " + (during ? OutcomeName(*during) : "-") +
                               ", after the commit " + OutcomeName(first) + ", at the end " +
                               OutcomeName(last);
  if (!first.ok() || !last.ok() || (during && !during->ok())) return fail("Outcome failed: " + outcomes);
  run.last = *last;
  auto settled = [](litetx::TxnOutcome x) {
    return x == litetx::TxnOutcome::kCommitted || x == litetx::TxnOutcome::kAborted;
  };
  if (during && settled(**during) && (*first != **during || *last != **during)) {
    return fail("the outcome changed after it was reported: " + outcomes);
  }
  if (settled(*first) && *last != *first) return fail("the outcome changed: " + outcomes);
  if (*last == litetx::TxnOutcome::kPending) return fail("left pending: " + outcomes);
  if (r.ok()) {
    if (*last != litetx::TxnOutcome::kCommitted) return fail("reported OK, not committed: " + outcomes);
    run.side = 'a';
  } else if (r.code() != Code::kUnknown) {
    if (*last == litetx::TxnOutcome::kCommitted) return fail("reported failed, committed: " + outcomes);
    run.side = 'b';
  } else {
    run.side = *last == litetx::TxnOutcome::kCommitted ? 'a' : 'b';
  }
  if (run.delivered == Code::kOk && c.deliver == Deliver::kAfterResolver && run.resolver_settled) {
    return fail("the write held in the network landed once the resolver had settled the "
                "transaction (" + outcomes + ")");
  }
  if (std::string f = CheckFinal(*mem, o, s.docs.size(), run.side); !f.empty()) {
    return fail(f + " (" + outcomes + ")");
  }
  return run;
}

// The most store calls a coordinator makes here (the loops over pause points stop there at the
// latest, and fail).
constexpr std::uint64_t kMaxCalls = 200;

// Tallies of staging runs, printed by the tests.
struct StagingTally {
  int cases = 0, right_after_loss = 0;
  std::map<std::string, int> at_pause, reported, delivered;
  void Add(const StagingRun& r, const std::string& delivery = "") {
    ++cases;
    right_after_loss += r.right_after_loss ? 1 : 0;
    ++at_pause[RecordSeenName(r.at_pause)];
    const std::string code = r.code == Code::kOk ? "ok" : std::string(litetx::CodeName(r.code));
    ++reported[code + (r.side == 'a' ? "/after" : "/before")];
    if (!delivery.empty()) {
      ++delivered[delivery + ": " + (!r.delivered ? "not sent"
                                     : *r.delivered == Code::kOk ? "landed"
                                                                 : std::string(litetx::CodeName(*r.delivered)))];
    }
  }
  void Print(const char* indent) const {
    std::printf("%srecord as the collector left it in the pause:", indent);
    for (const auto& [k, v] : at_pause) std::printf(" %s %d", k.c_str(), v);
    std::printf("\n%sreported/end state:", indent);
    for (const auto& [k, v] : reported) std::printf(" %s %d", k.c_str(), v);
    std::printf("\n");
    for (const auto& [k, v] : delivered) std::printf("%sheld write delivered %s %d\n", indent, k.c_str(), v);
  }
};

// The coordinator of a parallel commit paused before each of its store calls in turn (the reads,
// each operation of the staging batch, each re-read, the flip, the finishing, the marker) for
// twice its lease while a collector runs: with no reply lost, and with the reply of each of its
// writes in turn lost (landed, or not landed), so that the pauses include the one between the
// lost reply and the coordinator's re-read.
TEST(RaceTest, StagingCoordinatorPausedAtEveryCallWhileACollectorResolves) {
  std::mt19937_64 rng(20261126);
  std::printf("staging pause seed 20261126\n");
  StagingTally none, landed, not_landed, loss_not_reached;
  int scenarios = 0;
  for (int round = 0, rounds = Rounds(12); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    ++scenarios;
    for (std::uint64_t w = 0; w <= o.writes; ++w) {
      for (Loss loss : {Loss::kLanded, Loss::kNotLanded}) {
        if (w == 0 && loss == Loss::kNotLanded) continue;  // w == 0: no reply lost
        StagingTally& tally = w == 0 ? none : loss == Loss::kLanded ? landed : not_landed;
        for (std::uint64_t p = 1;; ++p) {
          ASSERT_LE(p, kMaxCalls) << s.Describe() << ": the coordinator never finished";
          const std::string where = s.Describe() + " reply of write " + std::to_string(w) + " " +
                                    LossName(loss) + ", paused before call " + std::to_string(p);
          StagingPause c;
          if (w > 0) c.pick = [w] { return NthWrite(w); };
          c.loss = loss;
          c.pause_at = p;
          StagingRun run = RunStagingPause(s, o, c);
          if (!run.paused) break;  // every call has been paused before
          ASSERT_EQ(run.failure, "") << where;
          // The pause may change the coordinator's path so that it never makes write w.
          (w > 0 && !run.lost ? loss_not_reached : tally).Add(run);
        }
      }
    }
  }
  std::printf("staging pause: %d scenarios; pause points: %d with no reply lost, %d with a reply "
              "lost that landed (%d of them right after the lost write, before the re-read), %d "
              "with a request lost (%d right after it), %d where the pause came first and the "
              "coordinator never made the write whose reply was to be lost\n",
              scenarios, none.cases, landed.cases, landed.right_after_loss, not_landed.cases,
              not_landed.right_after_loss, loss_not_reached.cases);
  std::printf("  no reply lost:\n");
  none.Print("    ");
  std::printf("  reply lost (landed):\n");
  landed.Print("    ");
  std::printf("  request lost (not landed):\n");
  not_landed.Print("    ");
  // Both ends are reached, and the pauses fall on a staging record both with every document held
  // (the collector proves the commit) and without (it fences and aborts).
  EXPECT_GT(none.reported["ok/after"], 0);
  EXPECT_GT(none.reported["aborted/before"], 0);
  EXPECT_GT(landed.right_after_loss, 0);
  EXPECT_GT(not_landed.right_after_loss, 0);
  EXPECT_GT(landed.reported["ok/after"] + landed.reported["unknown/after"], 0);
  EXPECT_GT(not_landed.reported["aborted/before"], 0);
}

// The replies of the staging writes lost: the record's create, each apply, the flip; each write
// landed with its reply lost, never landed, or held in the network and delivered before the
// resolver looks, after it, after the commit returned, or never. The coordinator then pauses
// for twice its lease before each of its later store calls in turn (the first: its re-read of
// the lost write) while a collector resolves the transaction.
TEST(RaceTest, LostStagingWritesWithAResolverInBetween) {
  std::mt19937_64 rng(20261127);
  std::printf("lost staging writes seed 20261127\n");
  std::map<std::string, StagingTally> by_write;
  for (int round = 0, rounds = Rounds(8); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    std::vector<std::pair<std::string, std::function<StepStore::Pick()>>> targets;
    targets.emplace_back("record create", [] { return RecordWrite(); });
    for (int d = 0; d < static_cast<int>(s.docs.size()); ++d) {
      targets.emplace_back("apply", [d] { return DocumentWrite(d); });
    }
    targets.emplace_back("flip", [] { return FlipWrite(); });
    struct Fate {
      Loss loss;
      Deliver deliver;
    };
    const Fate fates[] = {{Loss::kLanded, Deliver::kNever},
                          {Loss::kNotLanded, Deliver::kNever},
                          {Loss::kDeferred, Deliver::kBeforeResolver},
                          {Loss::kDeferred, Deliver::kAfterResolver},
                          {Loss::kDeferred, Deliver::kAfterCommit},
                          {Loss::kDeferred, Deliver::kNever}};
    for (const auto& [name, pick] : targets) {
      for (const Fate& fate : fates) {
        for (std::uint64_t n = 1;; ++n) {
          ASSERT_LE(n, kMaxCalls) << s.Describe() << ": the coordinator never finished";
          const std::string where = s.Describe() + " " + name + " " + LossName(fate.loss) +
                                    " (delivered " + DeliverName(fate.deliver) +
                                    "), paused before call " + std::to_string(n) + " after it";
          StagingPause c;
          c.pick = pick;
          c.loss = fate.loss;
          c.pause_at = n;
          c.after_loss = true;
          c.deliver = fate.deliver;
          StagingRun run = RunStagingPause(s, o, c);
          ASSERT_TRUE(run.lost) << where << ": the write was never sent";
          if (!run.paused) break;
          ASSERT_EQ(run.failure, "") << where;
          by_write[name].Add(run, fate.loss == Loss::kDeferred ? DeliverName(fate.deliver) : "");
        }
      }
    }
  }
  int total = 0;
  for (const auto& [name, tally] : by_write) total += tally.cases;
  std::printf("lost staging writes: %d cases (reply lost, then the resolver at each later call)\n", total);
  for (const auto& [name, tally] : by_write) {
    std::printf("  %s: %d cases\n", name.c_str(), tally.cases);
    tally.Print("    ");
  }
  // A held apply delivered after the resolver looked is refused (fenced), and the held record
  // create both let the commit through (delivered before the resolver) and was refused (after
  // it).
  StagingTally& apply = by_write["apply"];
  StagingTally& record = by_write["record create"];
  EXPECT_GT(apply.delivered["after the resolver: conflict"], 0);
  EXPECT_EQ(apply.delivered["after the resolver: landed"], 0);
  EXPECT_GT(record.delivered["after the resolver: conflict"], 0);
  EXPECT_GT(record.delivered["before the resolver: landed"], 0);
  EXPECT_GT(by_write["flip"].reported["ok/after"], 0);
}


// A resolver of a stale staging record, for TwoResolversOnAStaleStagingRecord.
enum class Party : std::uint8_t {
  kCollector,  // one Collector::RunOnce
  kReader,     // a read-committed read of one document (proves the commit if every one is held)
  kWriter,     // a one-action transaction adjusting one document by 0: it contends for it (the
               // stale record is settled on the spot) and leaves its content as it was
};
constexpr Party kParties[] = {Party::kCollector, Party::kReader, Party::kWriter};
const char* PartyName(Party p) {
  switch (p) {
    case Party::kCollector: return "collector";
    case Party::kReader: return "reader";
    case Party::kWriter: return "writer";
  }
  return "?";
}

struct PartyRun {
  litetx::Status status;
  std::optional<Content> read;  // the reader's result
};

PartyRun RunParty(Party p, std::shared_ptr<litetx::Store> store, std::shared_ptr<litetx::Clock> clock,
                  const char* name, int doc) {
  PartyRun out;
  switch (p) {
    case Party::kCollector: {
      litetx::Collector gc(std::move(store), NamedCollector(std::move(clock), name));
      out.status = gc.RunOnce();
      break;
    }
    case Party::kReader: {
      litetx::Database db(std::move(store), TestOptions(std::move(clock)));
      auto r = db.Read(kColl, Id(doc));
      out.status = r.status();
      if (r.ok()) out.read = Content{r->state, r->schema_version, r->doc};
      break;
    }
    case Party::kWriter: {
      litetx::Database db(std::move(store), TestOptions(std::move(clock)));
      out.status = db.Commit(litetx::Transaction().Adjust(kColl, Id(doc), {{"n", 0}})).status();
      break;
    }
  }
  return out;
}

// "" if `run` is what party `p` may end with on document `doc` of a transaction that must end on
// side `must`: the collector succeeds; the reader reads the document as that side has it; the
// writer succeeds or finds the document absent or deleted (on that side).
std::string PartyOk(Party p, const PartyRun& run, const Oracle& o, int doc, char must) {
  const Content& want = (must == 'a' ? o.after : o.before)[static_cast<std::size_t>(doc)];
  switch (p) {
    case Party::kCollector:
      return run.status.ok() ? "" : "collector: " + run.status.ToString();
    case Party::kReader:
      if (!run.read) return "reader: " + run.status.ToString();
      if (*run.read != want) {
        return std::string("reader read ") + Show({*run.read}) + ", the " +
               (must == 'a' ? "after" : "before") + " side has " + Show({want});
      }
      return "";
    case Party::kWriter: {
      const Code expected = want.state == litetx::DocumentState::kFound     ? Code::kOk
                            : want.state == litetx::DocumentState::kDeleted ? Code::kDeleted
                                                                            : Code::kNotFound;
      return run.status.code() == expected ? "" : "writer: " + run.status.ToString();
    }
  }
  return "?";
}

// Two resolvers on one stale staging record left by a parallel commit whose coordinator crashed
// inside its batch (after the record alone, after some applies, after every apply: committed):
// resolver A (a collector, a reader proving, or a writer contending) paused before each of its
// store calls in turn while resolver B (any of the three) runs to completion; then A resumes,
// then a healthy collector runs. Each must end as it may on the side the crash decided (see
// PartyOk); the record, observed before the pause, after B and after A, must only move from
// staging to that side's outcome and stay there; no version goes down; the store ends on that
// side; Database::Outcome says it.
TEST(RaceTest, TwoResolversOnAStaleStagingRecord) {
  std::mt19937_64 rng(20261128);
  std::printf("two-resolver seed 20261128\n");
  std::map<std::string, int> pair_cases;
  int cases = 0, committed = 0, aborted = 0;
  // Who first moved the record off staging, by the side it ended on: [0] before A's pause (A
  // itself), [1] B, [2] A after its pause.
  int proved_by[3] = {0, 0, 0}, aborted_by[3] = {0, 0, 0};
  for (int round = 0, rounds = Rounds(6); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    const int n = static_cast<int>(s.docs.size());
    // Writes 1..n+1 are the staging batch: the record, then the applies.
    for (std::uint64_t k = 1; k <= static_cast<std::uint64_t>(n) + 1; ++k) {
      for (Party pa : kParties) {
        for (Party pb : kParties) {
          for (std::uint64_t p = 1;; ++p) {
            ASSERT_LE(p, kMaxCalls) << s.Describe() << ": resolver A never finished";
            const int doc = static_cast<int>((k + p) % static_cast<std::uint64_t>(n));
            const std::string where = s.Describe() + " coordinator crash after write " +
                                      std::to_string(k) + "; A " + PartyName(pa) +
                                      " paused before call " + std::to_string(p) + ", B " +
                                      PartyName(pb) + "; on " + Id(doc);
            Crashed c = CrashCoordinator(s, k, Mode::kParallel);
            ASSERT_TRUE(c.record && c.record->state == TxnState::kStaging) << where;
            const std::string id = RecordId(*c.mem);
            const RecordSeen side_seen = c.must == 'a' ? RecordSeen::kCommitted : RecordSeen::kAborted;
            std::vector<RecordSeen> seen{ObserveRecord(*c.mem)};
            std::vector<std::vector<std::uint64_t>> versions{c.versions};
            std::vector<bool> staging{true};  // the record's own state is still staging
            auto observe = [&] {
              seen.push_back(ObserveRecord(*c.mem));
              versions.push_back(RawVersions(*c.mem, s.docs.size()));
              auto rec = TheRecord(*c.mem);
              staging.push_back(rec && rec->state == TxnState::kStaging);
            };
            PartyRun b;
            auto step = std::make_shared<StepStore>(c.mem);
            step->PauseBefore(p, [&] {
              observe();
              b = RunParty(pb, c.mem, c.clock, "gc-b", doc);
              observe();
            });
            PartyRun a = RunParty(pa, step, c.clock, "gc-a", doc);
            if (!step->paused()) break;  // A made fewer than p calls: every one was paused before
            observe();
            ++cases;
            ++pair_cases[std::string(PartyName(pa)) + "/" + PartyName(pb)];
            EXPECT_EQ(PartyOk(pa, a, o, doc, c.must), "") << where << " (A)";
            EXPECT_EQ(PartyOk(pb, b, o, doc, c.must), "") << where << " (B)";
            // seen: at the crash, at the pause, after B, after A.
            for (std::size_t i = 0; i < seen.size(); ++i) {
              EXPECT_TRUE(seen[i] == side_seen || (c.must == 'b' && seen[i] == RecordSeen::kStaging))
                  << where << ": record " << RecordSeenName(seen[i]) << " at observation " << i;
              if (i > 0) {
                EXPECT_FALSE(seen[i - 1] == side_seen && seen[i] != side_seen)
                    << where << ": the record went back from " << RecordSeenName(seen[i - 1]);
                EXPECT_EQ(VersionsUp(versions[i - 1], versions[i], "in the race"), "") << where;
              }
            }
            // A collector resolves every stale staging record; a proof (every document held) is
            // made by whoever meets a hold. A reader never fences, and a writer contends only for
            // a document the transaction holds: without a collector an uncommitted record may
            // stay staging (the healthy collector below settles it).
            if (pa == Party::kCollector || pb == Party::kCollector || c.must == 'a') {
              EXPECT_FALSE(staging[3]) << where << ": A and B both done, the record still staging";
            }
            for (int i = 0; i < 3; ++i) {
              if (staging[static_cast<std::size_t>(i)] && !staging[static_cast<std::size_t>(i) + 1]) {
                ++(c.must == 'a' ? proved_by : aborted_by)[i];
              }
            }
            litetx::Collector healthy(c.mem, TestCollectorOptions(c.clock));
            ASSERT_TRUE(healthy.RunOnce().ok()) << where;
            const bool wrote = pa == Party::kWriter || pb == Party::kWriter;
            EXPECT_EQ(wrote ? CheckSide(*c.mem, o, s.docs.size(), c.must)
                            : CheckFinal(*c.mem, o, s.docs.size(), c.must),
                      "")
                << where;
            litetx::Database reader(c.mem, TestOptions(c.clock));
            auto outcome = reader.Outcome(id);
            ASSERT_TRUE(outcome.ok()) << where;
            EXPECT_EQ(*outcome, c.must == 'a' ? litetx::TxnOutcome::kCommitted : litetx::TxnOutcome::kAborted)
                << where;
            (c.must == 'a' ? committed : aborted) += 1;
          }
        }
      }
    }
  }
  std::printf("two resolvers on a stale staging record: %d cases (%d committed: every document "
              "held; %d aborted)\n",
              cases, committed, aborted);
  std::printf("  A paused/B running:");
  for (const auto& [k, v] : pair_cases) std::printf(" %s %d", k.c_str(), v);
  std::printf("\n  record moved off staging to committed (proved) by A before its pause %d, by B "
              "%d, by A after its pause %d; to aborted (fenced) by A before its pause %d, by B %d, "
              "by A after its pause %d\n",
              proved_by[0], proved_by[1], proved_by[2], aborted_by[0], aborted_by[1], aborted_by[2]);
  EXPECT_GT(committed, 0);
  EXPECT_GT(aborted, 0);
  // Every document held: B, running to completion, always completes the proof if A has not.
  EXPECT_GT(proved_by[0], 0);
  EXPECT_GT(proved_by[1], 0);
  EXPECT_EQ(proved_by[2], 0);
  for (int i = 0; i < 3; ++i) EXPECT_GT(aborted_by[i], 0) << i;
}

// A parallel commit whose record create is held in the network while every apply of its batch
// lands: holds with no record, each carrying its deadline (the record's gc_at). The coordinator
// is paused before its re-read of the record. Before the deadline a writer meeting a hold waits
// (kBusy: busy_timeout 0 on a ManualClock), a reader reads the before image from the hold's undo
// data, and a collector's sweep leaves the holds alone. Then:
//   - the record create is delivered before the deadline: a writer meeting a hold proves the
//     commit (a collector finds the record not stale); the coordinator reports OK;
//   - or, past the deadline, the writer (or a collector's sweep) fences the record (an aborted
//     outcome marker with "fence") and undoes the hold, and the record create, delivered then or
//     once the coordinator resumed, fails; the coordinator reports kAborted, and the fence is
//     kept by a collector that purges every other marker.
TEST(RaceTest, HoldWithoutItsRecordWaitsThenIsFenced) {
  std::mt19937_64 rng(20261129);
  std::printf("absent-record seed 20261129\n");
  enum class When : std::uint8_t { kBeforeDeadline, kAfterFence, kAfterResume };
  const char* when_names[] = {"delivered before the deadline", "delivered after the fence",
                              "delivered after the coordinator resumed"};
  int cases = 0, busy = 0, pre_image = 0, sweep_waited = 0, proved = 0, fenced = 0, refused = 0;
  int fence_kept = 0;
  for (int round = 0, rounds = Rounds(10); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    const int n = static_cast<int>(s.docs.size());
    for (bool by_writer : {true, false}) {
      for (int j = 0; j < n; ++j) {
        for (When when : {When::kBeforeDeadline, When::kAfterFence, When::kAfterResume}) {
          const std::string where = s.Describe() + " record create held, " +
                                    when_names[static_cast<int>(when)] + "; " +
                                    (by_writer ? "a writer" : "a collector") + " on " + Id(j);
          auto clock = std::make_shared<litetx::ManualClock>();
          auto mem = std::make_shared<litetx::MemoryStore>();
          SeedStore(*mem, s, clock);
          auto step = std::make_shared<StepStore>(mem);
          step->Lose(RecordWrite(), Loss::kDeferred);
          litetx::Database other(mem, TestOptions(clock));
          const litetx::Transaction adjust = litetx::Transaction().Adjust(kColl, Id(j), {{"n", 0}});
          std::optional<Code> delivered;
          bool hook_ran = false;
          // The calls after the record create: the n applies, then the record's re-read.
          step->PauseBefore(
              static_cast<std::uint64_t>(n) + 1,
              [&] {
                hook_ran = true;
                ASSERT_EQ(RecordId(*mem), "") << where;
                auto held = mem->Get(litetx::Key{kColl, Id(j)});
                ASSERT_TRUE(held.ok() && held->has_value()) << where;
                const std::int64_t deadline = litetx::engine::HoldDeadline((*held)->value);
                ASSERT_GT(deadline, clock->NowMillis()) << where;
                auto holder = [&] {
                  litetx::ReadOptions raw;
                  raw.isolation = litetx::Isolation::kReadUncommitted;
                  auto r = other.Read(kColl, Id(j), raw);
                  return r.ok() ? r->txn : std::string("?");
                };
                const std::string txn = holder();
                ASSERT_FALSE(txn.empty()) << where;
                // Before the deadline: the writer waits, the reader reads the before image, the
                // sweep leaves the holds; nothing is written.
                auto w1 = other.Commit(adjust);
                EXPECT_EQ(w1.code(), Code::kBusy) << where << ": " << w1.status().ToString();
                busy += w1.code() == Code::kBusy ? 1 : 0;
                auto r = other.Read(kColl, Id(j));
                ASSERT_TRUE(r.ok()) << where;
                EXPECT_EQ((Content{r->state, r->schema_version, r->doc}), o.before[static_cast<std::size_t>(j)])
                    << where;
                pre_image += r->doc == o.before[static_cast<std::size_t>(j)].doc ? 1 : 0;
                litetx::Collector early(mem, TestCollectorOptions(clock));
                ASSERT_TRUE(early.RunOnce().ok()) << where;
                EXPECT_EQ(early.stats().undone, 0u) << where;
                EXPECT_EQ(RecordId(*mem), "") << where << ": fenced before the deadline";
                EXPECT_EQ(holder(), txn) << where;
                sweep_waited += RecordId(*mem).empty() && holder() == txn ? 1 : 0;
                if (when == When::kBeforeDeadline) {
                  delivered = step->Deliver();
                  ASSERT_EQ(delivered, Code::kOk) << where;
                  if (by_writer) {
                    // The record is staging and every document held: the writer proves it.
                    auto w2 = other.Commit(adjust);
                    EXPECT_EQ(PartyOk(Party::kWriter, PartyRun{w2.status(), {}}, o, j, 'a'), "") << where;
                  } else {
                    litetx::Collector gc(mem, TestCollectorOptions(clock));
                    ASSERT_TRUE(gc.RunOnce().ok()) << where;
                    EXPECT_EQ(gc.stats().finished + gc.stats().reversed + gc.stats().undone, 0u) << where;
                  }
                  return;
                }
                clock->Advance(std::chrono::milliseconds(deadline - clock->NowMillis()));
                if (by_writer) {
                  auto w2 = other.Commit(adjust);
                  EXPECT_EQ(PartyOk(Party::kWriter, PartyRun{w2.status(), {}}, o, j, 'b'), "") << where;
                } else {
                  litetx::Collector gc(mem, TestCollectorOptions(clock));
                  ASSERT_TRUE(gc.RunOnce().ok()) << where;
                  EXPECT_EQ(gc.stats().undone, static_cast<std::uint64_t>(n)) << where;
                }
                auto fence = TheRecord(*mem);
                ASSERT_TRUE(fence.has_value()) << where << ": no fence";
                EXPECT_TRUE(fence->fence && fence->done && fence->state == TxnState::kAborted) << where;
                // By the writer's transaction ("txn <id>"), or by the collector.
                EXPECT_TRUE(by_writer ? fence->aborted_by.rfind("txn ", 0) == 0
                                      : fence->aborted_by == "gc-test")
                    << where << ": fenced by " << fence->aborted_by;
                EXPECT_NE(holder(), txn) << where << ": the hold was not undone";
                fenced += fence->fence && holder() != txn ? 1 : 0;
                if (when == When::kAfterFence) delivered = step->Deliver();
              },
              /*after_loss=*/true);
          Code code;
          {
            litetx::Database db(step, TestOptions(clock));
            code = db.Commit(BuildTxn(*mem, s)).code();
          }
          ASSERT_TRUE(hook_ran) << where;
          if (when == When::kAfterResume) delivered = step->Deliver();
          ++cases;
          const char side = when == When::kBeforeDeadline ? 'a' : 'b';
          EXPECT_EQ(code, side == 'a' ? Code::kOk : Code::kAborted) << where;
          if (side == 'a') {
            proved += code == Code::kOk ? 1 : 0;
          } else {
            EXPECT_EQ(delivered, Code::kConflict) << where << ": the late record create";
            refused += delivered == Code::kConflict ? 1 : 0;
          }
          // A collector that erases every outcome marker at once keeps the fence.
          clock->Advance(kLease * 4);
          litetx::CollectorOptions purging = TestCollectorOptions(clock);
          purging.outcome_retention = std::chrono::milliseconds(0);
          litetx::Collector gc(mem, purging);
          ASSERT_TRUE(gc.RunOnce().ok()) << where;
          ASSERT_TRUE(gc.RunOnce().ok()) << where;
          auto after = TheRecord(*mem);
          if (side == 'b') {
            EXPECT_TRUE(after && after->fence) << where << ": the fence was purged";
            fence_kept += after && after->fence ? 1 : 0;
            auto outcome = other.Outcome(RecordId(*mem));
            EXPECT_TRUE(outcome.ok() && *outcome == litetx::TxnOutcome::kAborted) << where;
          }
          const bool wrote = by_writer;
          EXPECT_EQ(wrote ? CheckSide(*mem, o, s.docs.size(), side) : CheckFinal(*mem, o, s.docs.size(), side), "")
              << where;
        }
      }
    }
  }
  std::printf("holds without their record: %d cases; before the deadline the writer got kBusy in "
              "%d, the reader read the before image in %d, the sweep left the holds in %d; the "
              "record delivered in time and the commit proved and reported OK in %d; fenced and "
              "the hold undone in %d, the late record create refused in %d, the fence kept by a "
              "purging collector in %d\n",
              cases, busy, pre_image, sweep_waited, proved, fenced, refused, fence_kept);
  EXPECT_EQ(busy, cases);
  EXPECT_EQ(sweep_waited, cases);
  EXPECT_EQ(proved + fenced, cases);
  EXPECT_EQ(refused, fenced);
  EXPECT_EQ(fence_kept, fenced);
  EXPECT_GT(proved, 0);
  EXPECT_GT(fenced, 0);
}


// Three steps of one race, on a live parallel commit: the coordinator is held before each apply
// of its batch (the record staging, some document not held); past its lease a collector starts
// resolving it and is held right after each of its own writes landed (its first fences a
// document not held); the coordinator is released and runs on until it is held again before
// each of its later writes in turn (falling back to pending, applying the fenced document again,
// its flip, its finishing, its marker); then the collector is released and runs to completion
// (its resolution lost its compare-and-swap race if the coordinator moved the record: it must
// read the record again, not act on what it proved); then the coordinator. What the coordinator
// reported must match the end, and Database::Outcome, once committed or aborted, never changes.
TEST(RaceTest, CollectorResumesWhileItsCoordinatorIsHeldAgain) {
  std::mt19937_64 rng(20261131);
  std::printf("three-step race seed 20261131\n");
  int cases = 0;
  std::map<std::string, int> ends;
  for (int round = 0, rounds = Rounds(10); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = RunOracle(s);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t p = 2; p <= o.commit_write; ++p) {
      for (std::uint64_t q = p + 1;; ++q) {
        ASSERT_LE(q, kMaxWrites) << s.Describe() << ": the coordinator never finished";
        bool reached_q = false;  // the coordinator reached write q for some collector write i
        for (std::uint64_t i = 1;; ++i) {
          ASSERT_LE(i, kMaxWrites) << s.Describe() << ": the collector never finished";
          const std::string where = s.Describe() + " coordinator held before write " +
                                    std::to_string(p) + ", collector held after its write " +
                                    std::to_string(i) + ", coordinator held again before write " +
                                    std::to_string(q);
          auto clock = std::make_shared<litetx::ManualClock>();
          auto mem = std::make_shared<litetx::MemoryStore>();
          SeedStore(*mem, s, clock);
          // Both count every write of the coordinator (and of its finisher).
          auto again = std::make_shared<HoldingStore>(mem, q, Hold::kBefore);
          auto first = std::make_shared<HoldingStore>(again, p, Hold::kBefore);
          litetx::Transaction txn = BuildTxn(*mem, s);
          Code code = Code::kOk;
          std::string id;
          Runner coordinator(first, [&] {
            {
              litetx::Database db(first, TestOptions(clock));
              auto r = db.Commit(txn);
              code = r.code();
              id = r.ok() ? r->txn_id : r.status().txn_id();
            }
            again->Finished();
          });
          struct ReleaseFirst {  // destroyed before `coordinator`, whose Join needs it
            std::shared_ptr<HoldingStore> store;
            ~ReleaseFirst() { store->Release(); }
          } release_again{again};
          ASSERT_TRUE(first->WaitHeldOrFinished()) << where;
          ASSERT_EQ(ObserveRecord(*mem), RecordSeen::kStaging) << where;
          clock->Advance(kLease * 2);
          auto gc_hold = std::make_shared<HoldingStore>(mem, i, Hold::kLanded);
          litetx::Status gc_status;
          Runner collector(gc_hold, [&] {
            litetx::Collector gc(gc_hold, TestCollectorOptions(clock));
            gc_status = gc.RunOnce();
          });
          if (!gc_hold->WaitHeldOrFinished()) break;  // every collector write has been held after
          first->Release();
          if (!again->WaitHeldOrFinished()) continue;  // the coordinator ended before write q
          reached_q = true;
          ++cases;
          litetx::Database reader(mem, TestOptions(clock));
          const std::string rid = RecordId(*mem);
          collector.Join();
          EXPECT_TRUE(gc_status.ok()) << where << ": " << gc_status.ToString();
          auto mid = reader.Outcome(rid);
          again->Release();
          coordinator.Join();
          ASSERT_EQ(id, rid) << where;
          auto after = reader.Outcome(id);
          clock->Advance(kLease * 4);
          litetx::Collector healthy(mem, TestCollectorOptions(clock));
          ASSERT_TRUE(healthy.RunOnce().ok()) << where;
          auto last = reader.Outcome(id);
          ASSERT_TRUE(mid.ok() && after.ok() && last.ok()) << where;
          const std::string outcomes = std::string("reported ") + std::string(litetx::CodeName(code)) +
                                       "; Outcome once the collector ended " + OutcomeName(mid) +
                                       ", once the coordinator ended " + OutcomeName(after) +
                                       ", at the end " + OutcomeName(last);
          for (const auto& earlier : {mid, after}) {
            if (*earlier == litetx::TxnOutcome::kCommitted || *earlier == litetx::TxnOutcome::kAborted) {
              EXPECT_EQ(*last, *earlier) << where << ": the outcome changed: " << outcomes;
            }
          }
          ASSERT_TRUE(code == Code::kOk || code == Code::kAborted) << where << ": " << outcomes;
          EXPECT_EQ(*last, code == Code::kOk ? litetx::TxnOutcome::kCommitted : litetx::TxnOutcome::kAborted)
              << where << ": " << outcomes;
          EXPECT_EQ(CheckFinal(*mem, o, s.docs.size(), code == Code::kOk ? 'a' : 'b'), "")
              << where << ": " << outcomes;
          ++ends[std::string(code == Code::kOk ? "committed" : "aborted") + ", Outcome once the collector ended " +
                 OutcomeName(mid)];
        }
        if (!reached_q) break;  // nor will it reach any later write
      }
    }
  }
  std::printf("three-step race: %d cases;", cases);
  for (const auto& [k, v] : ends) std::printf(" [%s] %d", k.c_str(), v);
  std::printf("\n");
  EXPECT_GT(ends["committed, Outcome once the collector ended committed"], 0);
  EXPECT_GT(ends["aborted, Outcome once the collector ended aborted"], 0);
}

// A transaction whose coordinator died after its commit point (classic: after the flip; parallel:
// after the last apply of its batch, every document held), before its lease ran out. A collector
// (its sweep) or a writer meeting one of its holds is paused before each of its store calls in
// turn; during the pause the lease runs out, another collector finishes the transaction, the
// outcome retention passes and that collector erases the outcome marker. Then the paused party
// resumes. The transaction committed: Database::Outcome may say committed or, once the marker is
// erased, not_found, never aborted; its documents stay after.
void PausedPastTheRetention(Mode mode, Party party, std::map<std::string, int>& tally) {
  std::mt19937_64 rng(20261130);
  for (int round = 0, rounds = Rounds(6); round < rounds; ++round) {
    Scenario s = TwoOrThreeDocumentCommit(rng);
    Oracle o = OracleIn(s, mode);
    ASSERT_EQ(o.code, Code::kOk) << s.Describe();
    for (std::uint64_t p = 1;; ++p) {
      ASSERT_LE(p, kMaxCalls) << s.Describe() << ": the paused party never finished";
      const std::string where = std::string(ModeName(mode)) + " " + s.Describe() + ", " +
                                PartyName(party) + " paused before call " + std::to_string(p);
      auto clock = std::make_shared<litetx::ManualClock>();
      auto mem = std::make_shared<litetx::MemoryStore>();
      SeedStore(*mem, s, clock);
      litetx::FaultOptions f;
      f.crash_after_writes = o.commit_write;
      try {
        litetx::Database db(std::make_shared<litetx::FaultInjectingStore>(mem, f), ModeOptions(clock, mode));
        (void)db.Commit(BuildTxn(*mem, s));
      } catch (const litetx::SimulatedCrash&) {
      }
      ASSERT_EQ(ObserveRecord(*mem), RecordSeen::kCommitted) << where;
      const std::string id = RecordId(*mem);
      litetx::Database reader(mem, TestOptions(clock));
      auto step = std::make_shared<StepStore>(mem);
      litetx::Status b_status;
      step->PauseBefore(p, [&] {
        clock->Advance(kLease * 2);
        litetx::Collector b(mem, NamedCollector(clock, "gc-b"));
        b_status = b.RunOnce();  // finishes it
        clock->Advance(std::chrono::hours(2));
        if (b_status.ok()) b_status = b.RunOnce();  // erases its marker
      });
      // The writer meets document d0 (held by the transaction); the collector's sweep sees every
      // document.
      PartyRun a = RunParty(party, step, clock, "gc-a", 0);
      if (!step->paused()) break;
      ASSERT_TRUE(b_status.ok()) << where << ": " << b_status.ToString();
      auto outcome = reader.Outcome(id);
      ASSERT_TRUE(outcome.ok()) << where;
      ++tally[std::string(ModeName(mode)) + " " + PartyName(party) + ": Outcome " +
              litetx::TxnOutcomeName(*outcome)];
      EXPECT_NE(*outcome, litetx::TxnOutcome::kAborted)
          << where << ": a committed transaction's outcome reads aborted ("
          << (TheRecord(*mem) && TheRecord(*mem)->fence ? "fenced by " + TheRecord(*mem)->aborted_by : "")
          << ")";
      litetx::Collector healthy(mem, TestCollectorOptions(clock));
      ASSERT_TRUE(healthy.RunOnce().ok()) << where;
      EXPECT_EQ(party == Party::kWriter ? CheckSide(*mem, o, s.docs.size(), 'a')
                                        : CheckFinal(*mem, o, s.docs.size(), 'a'),
                "")
          << where;
    }
  }
}

// In both modes, for the collector and for the writer: the paused party read a document held by
// the transaction (the sweep's scan; the writer's AwaitFree) and is paused before it reads the
// record; when it resumes the record is gone (finished, then its marker erased, with
// outcome_retention 0). It must not fence a committed transaction's record: a classic hold is
// undone without a record write, and a parallel one is fenced only if the document is still at
// the revision read before the record was found absent (FenceAbsentRecord).
TEST(RaceTest, ResolverPausedPastTheRetentionNeverFencesACommittedTransaction) {
  std::map<std::string, int> tally;
  for (Mode mode : kModes) {
    for (Party party : {Party::kCollector, Party::kWriter}) {
      SCOPED_TRACE(std::string(ModeName(mode)) + " " + PartyName(party));
      PausedPastTheRetention(mode, party, tally);
    }
  }
  std::printf("paused past the retention:");
  for (const auto& [k, v] : tally) std::printf(" [%s] %d", k.c_str(), v);
  std::printf("\n");
}

}  // namespace
}  // namespace ptest
