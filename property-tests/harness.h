// property-tests/harness.h — scenarios, an oracle and invariant checks for the crash tests.
//
// A Scenario is a handful of documents in collection "p" (each absent, live, a tombstone or
// the placeholder of a rolled-back insert) and one transaction over them. The oracle runs the
// same transaction on a fault-free copy of the store: its result is the "after" state, the
// seeded state is the "before" state. A crash-tested run must end — after the collector —
// with every document at its before image or every document at its after image (content:
// state, fields, schema version), never a mix, with no reference, deleting flag or active
// record left and no version going down.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "litetx/litetx.h"

namespace ptest {

inline constexpr const char* kColl = "p";
inline constexpr std::chrono::milliseconds kLease{10'000};

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

struct Scenario {
  std::vector<DocSpec> docs;
  std::vector<ActSpec> acts;
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

// Options for test Databases: the given clock, lease kLease, fast virtual backoff.
litetx::Options TestOptions(std::shared_ptr<litetx::Clock> clock);
litetx::CollectorOptions TestCollectorOptions(std::shared_ptr<litetx::Clock> clock);

// Writes the scenario's initial documents into `store`.
void SeedStore(litetx::Store& store, const Scenario& s, std::shared_ptr<litetx::Clock> clock);
// The scenario's transaction; expected versions are taken from `store` as seeded.
litetx::Transaction BuildTxn(litetx::Store& store, const Scenario& s);

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
  std::uint64_t writes = 0;  // store writes of the fault-free commit
};
Oracle RunOracle(const Scenario& s);

// One crash case: the coordinator dies after its `crash_k`-th write (0: never), the clock
// passes the lease, then a collector that dies after its `gc_crash_j`-th write (0: never),
// then a healthy collector. Returns "" if every invariant held, else a description.
// `coordinator_crashed` (optional) tells whether the crash point was reached.
std::string RunCrashCase(const Scenario& s, const Oracle& o, std::uint64_t crash_k,
                         std::uint64_t gc_crash_j, bool* coordinator_crashed = nullptr);

// Compares `final` with the oracle: "" if it is entirely before or entirely after (with the
// oracle's exact versions when after; a document the transaction inserted where none was
// stored gets a clock-derived first version, at or after the oracle's) and no version went
// down. `must` forces one side: 'b', 'a' or 0 for either.
std::string CheckFinal(litetx::Store& store, const Oracle& o, std::size_t n, char must);

}  // namespace ptest
