// property-tests/harness.h — scenarios, an oracle and invariant checks for the crash tests.
//
// A Scenario is a handful of documents in collection "p" (each absent, live, a tombstone or
// the placeholder of a rolled-back insert) and one transaction over them, optionally with an
// Interference: another writer that changes one document behind the coordinator's back, just
// before the coordinator's first write of a given document, so that the transaction fails
// only after it has written. The oracle runs the same transaction on a fault-free copy of the
// store: its result is the "after" state; the seeded state (changed by the interference, if
// any) is the "before" state. A crash-tested run must end — after the collector — with every
// document at its before image or every document at its after image (content: state,
// fields, schema version), never a mix, with no reference, deleting flag or active record
// left and no version going down. Which of the two is decided by the commit point: once the
// commit flip (or the one write of a one-action transaction) has landed in the store, the run
// must end after; if it never landed, before.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "litetx/litetx.h"
#include "litetx/fault_injecting_store.h"

namespace ptest {

inline constexpr const char* kColl = "p";
inline constexpr std::chrono::milliseconds kLease{10'000};
// The last writer of documents written by SeedStore and by an Interference.
inline constexpr const char* kSeedWriter = "seed";
inline constexpr const char* kIntruder = "intruder";

enum class Init : std::uint8_t { kAbsent, kLive, kDeleted, kGone };
enum class VersionMode : std::uint8_t { kNone, kRight, kWrong };

struct DocSpec {
  Init init = Init::kLive;
  std::int64_t n = 10;  // initial value of the numeric field "n" (live documents)
};

struct ActSpec {
  litetx::ActionType type = litetx::ActionType::kUpdate;
  int doc = 0;             // index into Scenario::docs
  std::int64_t value = 1;  // field value / delta
  VersionMode version = VersionMode::kNone;
};

// A write by someone else, made right before the coordinator's first write (create or
// replace) of document `trigger` reaches the store, to document `target`:
//   kLive:      `target` becomes a live document {"n": 99, "s": "other"} (an insert then fails);
//   kTombstone: `target` becomes a tombstone (an update, adjust or delete then fails);
//   kBump:      `target` keeps its content at version + 1 (an expected version or a check
//               then fails).
// If the coordinator never makes that write (it crashed first), the change is made once the
// coordinator has stopped, before any collector runs: either way the transaction cannot commit.
struct Interference {
  enum class Kind : std::uint8_t { kLive, kTombstone, kBump };
  int trigger = 0;
  int target = 0;
  Kind kind = Kind::kBump;
};

struct Scenario {
  std::vector<DocSpec> docs;
  std::vector<ActSpec> acts;
  std::optional<Interference> interference;
  std::string Describe() const;
};

std::string Id(int doc);

// What a read-committed reader sees, without the version (rollbacks bump versions).
struct Content {
  litetx::DocumentState state = litetx::DocumentState::kNotFound;
  std::uint32_t schema_version = 0;
  boost::json::object doc;
  friend bool operator==(const Content&, const Content&) = default;
};
using Contents = std::vector<Content>;

// Makes the raw store of one run: a fresh store that holds no key of any other run. The crash
// tests run on a new MemoryStore each unless given another factory (e.g. a Redis store on a
// fresh key prefix).
using StoreFactory = std::function<std::shared_ptr<litetx::Store>()>;
std::shared_ptr<litetx::Store> NewMemoryStore();

// Options for test Databases: the given clock, lease kLease, fast virtual backoff.
litetx::Options TestOptions(std::shared_ptr<litetx::Clock> clock);
litetx::CollectorOptions TestCollectorOptions(std::shared_ptr<litetx::Clock> clock);

// Writes the scenario's initial documents into `store`.
void SeedStore(litetx::Store& store, const Scenario& s, std::shared_ptr<litetx::Clock> clock);
// Makes the scenario's interference (if any) directly in `store`.
void Interfere(litetx::Store& store, const Scenario& s, litetx::Clock& clock);
// The scenario's transaction; expected versions are taken from `store` as seeded.
litetx::Transaction BuildTxn(litetx::Store& store, const Scenario& s);

// A store wrapper for a coordinator: makes the scenario's interference directly in `raw`
// right before the first create or replace of the trigger document passes through it.
// Without an interference it only forwards.
class InterferingStore final : public litetx::ForwardingStore {
 public:
  // Forwards to `target`; makes the interference in `raw` (beneath `target`, so that it is
  // not counted or watched as the coordinator's). `s` must outlive the wrapper.
  InterferingStore(std::shared_ptr<litetx::Store> target, std::shared_ptr<litetx::Store> raw,
                   const Scenario& s, std::shared_ptr<litetx::Clock> clock);
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override;
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override;
  // Makes the interference now if the scenario has one and it has not happened yet.
  // Returns true if it happened here.
  bool InterfereNow();
  bool interfered() const { return done_; }

 private:
  void Before(const litetx::Key& k);
  std::shared_ptr<litetx::Store> raw_;
  const Scenario& s_;
  std::shared_ptr<litetx::Clock> clock_;
  bool done_ = false;
};

// A store wrapper that watches the writes that land in the store beneath it and tells when
// a transaction reached its commit point: a record write with state "committed" landed, or
// (no record ever created) a scenario document was written without a transaction reference
// — the one write of a one-action commit. Put it directly over the raw store, under any
// fault injection, so that writes whose replies were lost count too.
class CommitWatch final : public litetx::ForwardingStore {
 public:
  explicit CommitWatch(std::shared_ptr<litetx::Store> raw) : ForwardingStore(std::move(raw)) {}
  litetx::Result<litetx::Revision> Create(const litetx::Key& k, const boost::json::object& v) override;
  litetx::Result<litetx::Revision> Replace(const litetx::Key& k, litetx::Revision e,
                                           const boost::json::object& v) override;
  bool committed() const { return committed_; }
  bool record_created() const { return record_created_; }
  // Writes that landed through this wrapper, and the index (from 1) of the one that reached
  // the commit point (0: none).
  std::uint64_t writes() const { return writes_; }
  std::uint64_t commit_write() const { return commit_write_; }

 private:
  void Landed(const litetx::Key& k, const boost::json::object& v);
  bool committed_ = false;
  bool record_created_ = false;
  // A staging record as last written: its transaction, the documents it lists, and which of
  // them the transaction holds now (a parallel commit is committed once it holds them all).
  std::string staging_id_;
  std::set<std::string> listed_;
  std::map<std::string, std::string> holder_;  // document id -> its holder as last written
  std::uint64_t writes_ = 0;
  std::uint64_t commit_write_ = 0;
};

// What the store holds for the (single) transaction record of a test store.
// A staging record (parallel commit) reads as kCommitted when every document it lists is held by
// it (the transaction is committed, its flip not yet written), else as kStaging.
enum class RecordSeen : std::uint8_t { kNone, kPending, kAborted, kCommitted, kMany, kStaging };
const char* RecordSeenName(RecordSeen r);
RecordSeen ObserveRecord(litetx::Store& store);

// Every transaction record of `store` as Database::Outcome sees them, by id: the documents of
// the record collection, and the outcomes folded into outcome pages (as done markers without
// actions; a page entry takes the place of a fence of the same id, as in engine/outcomes.h).
// Throws std::runtime_error if a scan fails or a page is not well formed.
std::map<std::string, litetx::StoredDocument> AllRecords(litetx::Store& store);

// Read-committed contents of every scenario document; nullopt (and `error` set) on a read error.
std::optional<Contents> ReadContents(litetx::Store& store, std::size_t n, std::string* error);
// Stored versions ("_ltx".v; 0 if absent) of every scenario document.
std::vector<std::uint64_t> RawVersions(litetx::Store& store, std::size_t n);
// "" if no document of "p" carries a reference or deleting flag and no active record exists;
// otherwise what is wrong.
std::string CheckClean(litetx::Store& store);
// True if any scenario document was last written by `txn_id`.
bool LastWrittenBy(litetx::Store& store, std::size_t n, const std::string& txn_id);
std::string Show(const Contents& c);

// The oracle: the before contents, and the outcome and after contents of a fault-free run.
struct Oracle {
  Contents before;
  std::vector<std::uint64_t> before_versions;
  litetx::Code code = litetx::Code::kOk;
  Contents after;
  std::vector<std::uint64_t> after_versions;
  std::uint64_t writes = 0;  // store writes of the fault-free run (commit, or forward + rollback)
  // Index (from 1) of the write that reached the commit point (the flip, or the one write of
  // a one-action commit); 0 if the run never reached it.
  std::uint64_t commit_write = 0;
  bool interfered = false;  // the scenario's interference happened during the run
};
Oracle RunOracle(const Scenario& s);

// One crash case: the coordinator (its calls faulted by `rule` if set) dies after its
// `crash_k`-th write (0: never); the clock passes the lease; then, if gc_crash_j > 0, a first
// collector that dies after its gc_crash_j-th write (0: no first collector); then a healthy
// collector. The case runs on a store made by `store` (empty: a new MemoryStore); the oracle
// always runs on MemoryStores.
struct CrashCase {
  std::uint64_t crash_k = 0;
  std::uint64_t gc_crash_j = 0;
  std::function<litetx::Fault(litetx::StoreOp, const litetx::Key&, std::uint64_t)> rule;
  StoreFactory store;
};

// What happened in a crash case, as observed.
struct CrashReport {
  std::string failure;  // "" if every invariant held, else a description
  bool coordinator_crashed = false;
  litetx::Code code = litetx::Code::kOk;  // the coordinator's result if it did not crash
  std::uint64_t coordinator_writes = 0;   // its writes that landed (the crash write included)
  bool commit_point = false;  // the commit flip (or one-action write) landed in the store
  RecordSeen record = RecordSeen::kNone;  // the record once the coordinator stopped
  bool gc_ran = false;          // a first collector ran (gc_crash_j > 0)
  bool gc_crashed = false;      // ...and its crash fired
  std::uint64_t gc_writes = 0;  // ...and this many of its writes landed
  std::uint64_t healthy_gc_writes = 0;  // writes of the healthy collector
  char side = 0;  // the side required at the end: 'a' after, 'b' before
};

// Runs one case and checks the end state: after if the commit point was reached, else before.
// The record, once the coordinator stopped, must be committed exactly when the commit point
// was reached. If the coordinator did not crash, its result must agree (OK exactly when the
// commit point was reached, unless the transaction writes nothing), equal the oracle's
// (without a rule), and it must have left nothing held and no record unsettled.
CrashReport RunCrashCase(const Scenario& s, const Oracle& o, const CrashCase& c);

// Compares `final` with the oracle: "" if it is entirely before or entirely after (with the
// oracle's exact versions when after; a document the transaction inserted where none was
// stored gets a clock-derived first version, at or after the oracle's) and no version went
// down. `must` forces one side: 'b', 'a' or 0 for either.
std::string CheckFinal(litetx::Store& store, const Oracle& o, std::size_t n, char must);

}  // namespace ptest
