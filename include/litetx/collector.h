// litetx/collector.h — the garbage collector: repairs what crashed or stalled coordinators
// left behind, keeps transaction outcomes answerable for a while, and purges old tombstones.
//
// RunOnce() scans the ActiveTransaction documents and, for each whose GC timestamp has passed:
//   committed (success set)  -> finishes it: clears references, turns deletes into tombstones;
//   pending (success unset)  -> claims it with a CAS (pending -> aborted) so that a slow
//                               coordinator's later commit flip fails, then reverses every
//                               action still referencing the transaction and fences the
//                               documents the coordinator had not written yet (so a late write
//                               of that coordinator fails its CAS instead of landing);
//   aborted                  -> finishes the reversal the same way.
// Then it replaces the record by a small outcome marker ("done"), which Database::Outcome
// reads. Markers are then folded into outcome pages (collection kOutcomesCollection: one
// document per partition and 256 ms of transaction ids, 18 bytes per outcome), so that the
// record collection keeps only transactions in flight and a pass reads little more than what it
// has to do; pages and unfolded markers older than outcome_retention are erased. Then it purges
// the tombstones and placeholders whose tombstone_retention has passed, in every collection,
// found through the tombstone index (collection "__litetx.tomb": entries by time, written from
// outcome markers and by one-write deletes; docs/protocol.md §5.4). Last, once per
// sweep_interval, it sweeps a bounded slice of the user collections it is given: dangling holds
// are undone, old tombstones the index does not name purged. Every step is a single-document CAS
// and idempotent: a crash or store error anywhere leaves work the next run finishes. A record
// that cannot be repaired (corrupt, or the store keeps failing) is logged, counted in
// `failed`, and skipped; RunOnce never throws and never stops at the first failure.
//
// Any number of collectors — in one process or several — may run at once on one store: each
// step is a CAS, so two collectors on the same transaction only duplicate harmless work.
//
// Ownership: keeps the store and the logger/clock of its options alive.
// Thread safety: RunOnce, Start, Stop and stats may be called from any thread; RunOnce calls
// from several threads on one Collector are serialised.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "litetx/options.h"
#include "litetx/status.h"
#include "litetx/store.h"

namespace litetx {

namespace engine {
struct Env;
}  // namespace engine

struct CollectorOptions {
  // Engine options: logger, clock, retry backoff, attempts. The lease is not used: staleness
  // comes from each record's own GC timestamp (written by its coordinator).
  Options engine;
  // Pause between two runs of the background thread.
  std::chrono::milliseconds interval{1'000};
  // Treat a pending transaction as stale once it is older than this, even if its GC timestamp
  // (start + lease) has not passed. Zero: only the GC timestamp counts (the CLI's
  // `gc --older-than 0` means the same; `--older-than 1ms` treats everything as stale, for use
  // after a crash test when no coordinator is alive).
  // DANGER: a value below the longest commit lets the collector roll back live transactions
  // (they then report kAborted; nothing is corrupted).
  std::chrono::milliseconds older_than{0};
  // How long the outcome of a finished transaction stays answerable (Database::Outcome).
  // A rolled-back large transaction's outcome (with its chunk stubs, which fence late writes of
  // a paused coordinator) is kept for the longer of this and tombstone_retention.
  std::chrono::milliseconds outcome_retention{std::chrono::hours(1)};
  // How long a tombstone (and the placeholder of a rolled-back insert) is kept before it is
  // purged; until then a read of a deleted id says deleted (a placeholder reads not found). Must exceed the longest pause of a
  // coordinator (it fences late writes). Once purged, a new insert of the id starts from the
  // clock, above the versions the id had (docs/protocol.md §1.1). Zero never purges.
  std::chrono::milliseconds tombstone_retention{std::chrono::hours(24)};
  // User collections the collector sweeps, a bounded slice per sweep (see sweep_budget and
  // sweep_interval): it undoes dangling holds there (a document still referencing a
  // transaction that is over: a write that landed after its transaction was settled, never
  // part of any outcome) and purges
  // tombstones and placeholders older than tombstone_retention that the tombstone index does
  // not name (made by earlier releases or large transactions, or whose entry was lost).
  // Empty: no sweep (the tombstone index is purged all the same).
  std::vector<std::string> collections;
  // Older name of `collections`; both lists are swept.
  std::vector<std::string> purge_collections;
  // Most documents the sweep looks at in one run; the next run resumes where it stopped, and a
  // full pass over every collection takes ceil(documents / sweep_budget) runs. 0: no limit.
  std::size_t sweep_budget = 10'000;
  // The sweep runs (one slice of sweep_budget documents) in the first pass and then in a pass
  // only once this long has gone since the last slice. Tombstones are found through the
  // tombstone index (below) in every pass, so the sweep is only a backstop: for dangling holds
  // (which readers and writers also settle when they meet them) and for tombstones the index
  // does not name. 0: a slice in every pass.
  std::chrono::milliseconds sweep_interval{std::chrono::minutes(1)};
  // Most index entries and documents one pass reads from the tombstone index (collection
  // "__litetx.tomb", docs/protocol.md §5.4), whose due entries name the tombstones and
  // placeholders past tombstone_retention in every collection, listed in `collections` or not.
  // The next pass resumes with what is left. 0: no limit.
  std::size_t tombstone_purge_budget = 10'000;
  // Documents per Scan page.
  std::size_t scan_batch = 256;
  // A name for this collector, stored in records it claims (aborted_by) and logged. Empty:
  // "gc-" and a random suffix.
  std::string name;
  // Fold outcome markers into outcome pages (see above). false: markers stay in the record
  // collection until outcome_retention has passed, as in releases before outcome pages; pages
  // already written are still read and purged.
  bool fold_outcomes = true;
  // Most documents of the record collection one pass reads; the next pass resumes where it
  // stopped, so a backlog (a store upgraded with millions of unfolded markers, or a long
  // outage) is worked off in steps. 0: no limit, every pass reads the whole collection.
  std::size_t record_budget = 0;
  // Most outcome pages one pass erases (they are erased oldest first). 0: no limit.
  std::size_t page_purge_budget = 10'000;
  // Share the record collection with the other collectors that set this, in any process. The
  // collection is split into 16 partitions (by the first hex digit of transaction ids); a pass
  // takes free partitions one at a time through a claim document in collection "__litetx.gc"
  // (a compare-and-swap), sweeps it, and releases it. It skips a partition another collector
  // holds, and one swept completely since this pass began; a claim whose holder died expires
  // after claim_lease. With record_budget, an unfinished partition's place is kept in its
  // claim, so whoever takes it next resumes there. Claims only share the work: correctness
  // never depends on them (every repair step is a compare-and-swap), and a collector paused
  // past its claim only repeats harmless work. Off: every pass reads the whole collection.
  // Cost: one batch of 16 reads per partition taken, and two writes (take, release) per
  // partition per pass, also when there is nothing to do.
  bool share_partitions = false;
  // How long a partition claim holds without renewal; renewed before each scan page once half
  // of it has gone. Must exceed the time one scan page of records takes to repair.
  std::chrono::milliseconds claim_lease{30'000};
};

// What one pass met and did, per kind of work: `due` counts what needed work when the pass
// looked, `done` what the pass finished (a due item left undone — the store failed, or another
// collector got there first — is the next pass's).
struct CollectorWork {
  std::uint64_t due = 0;
  std::uint64_t done = 0;
};

// The report of the last completed pass (Collector::last_pass). What an operator watches:
// `oldest_abandoned_ms` (a transaction waiting long for its settling means the collector cannot
// repair it, or runs too seldom) and `backlog`.
struct CollectorPass {
  std::int64_t started_ms = 0;   // the collector clock when the pass began
  std::int64_t duration_ms = 0;  // how long it took
  std::uint64_t records_read = 0;   // documents of the record collection read
  std::uint64_t pages_read = 0;     // outcome pages read while purging
  std::uint64_t index_read = 0;     // tombstone index entries and the documents they name, read
  CollectorWork abandoned;   // stale uncommitted transactions (pending, staging, aborted): reversed
  CollectorWork unfinished;  // stale committed transactions not yet finished: finished
  CollectorWork markers;     // outcome markers to fold into pages: folded
  CollectorWork expired;     // unfoldable markers and outcome pages past outcome_retention: erased
  CollectorWork tombstones;  // tombstones and placeholders past tombstone_retention (from the
                             // tombstone index and the sweep): purged
  // Due and not done by this pass, over every kind (the next pass's work), plus, when
  // record_budget or tombstone_purge_budget cut the pass short, 1 for "not read to its end".
  std::uint64_t backlog = 0;
  bool complete = true;  // false: a budget (record_budget, tombstone_purge_budget) stopped it early
  // Of the abandoned and unfinished transactions found due, the age of the oldest: now minus
  // its GC timestamp (how long it has been waiting for a collector). 0: none was due.
  std::int64_t oldest_abandoned_ms = 0;
  std::uint64_t failed = 0;  // failures in this pass (logged)
};

struct CollectorStats {
  std::uint64_t runs = 0;      // completed RunOnce calls (background and direct)
  std::uint64_t finished = 0;  // committed transactions finished
  std::uint64_t reversed = 0;  // uncommitted transactions rolled back
  std::uint64_t failed = 0;    // repair attempts that failed (logged; retried next run)
  std::uint64_t purged = 0;    // tombstones, placeholders and outcome markers erased
  std::uint64_t undone = 0;    // dangling holds the sweep undid with its own write
  std::uint64_t swept = 0;     // documents the sweep looked at
  std::uint64_t folded = 0;    // outcome markers folded into outcome pages
  std::uint64_t pages_purged = 0;  // outcome pages erased past outcome_retention
  std::uint64_t claims = 0;        // partitions taken (share_partitions)
};

class Collector {
 public:
  // REQUIRES: store != nullptr.
  explicit Collector(std::shared_ptr<Store> store, CollectorOptions options = {});
  // Stops the background thread if it runs.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // One pass: the ActiveTransaction documents (all of them, or record_budget of them from where
  // the last pass stopped), the outcome pages due, the tombstone index entries due, and (once
  // per sweep_interval) a slice of the swept collections. Returns
  // OK, or the first error met (kUnavailable, kCorruption...) after going on with the rest: the
  // counters and last_pass() tell what was done.
  Status RunOnce();

  // Starts the background thread, which calls RunOnce every `interval`. No-op if running.
  void Start();
  // Stops the background thread promptly (wakes it from its pause) and joins it; a run in
  // progress ends at the next transaction boundary. No-op if not running.
  void Stop();
  bool running() const;

  CollectorStats stats() const;
  // The report of the last completed pass (all zero before the first).
  CollectorPass last_pass() const;
  const std::string& name() const { return options_.name; }

 private:
  void Loop();
  // One bounded slice of the sweep of `collections` (see CollectorOptions); returns the first error.
  Status Sweep();
  // Reads records from *cursor up to `end` (empty: the collection's end) and settles, folds or
  // purges each, at most *left of them (decremented); `renew` (if set) is asked before each
  // scan page and stops the scan when it returns false. Returns true when `end` was reached
  // (*cursor cleared), false when stopped early (*cursor: where to resume). REQUIRES: run_mu_.
  bool ScanRecords(const engine::Env& env, const std::string& end, std::string* cursor,
                   std::size_t* left, const std::function<bool()>& renew);
  // The record pass with share_partitions. REQUIRES: run_mu_.
  void SharedRecordPass(const engine::Env& env);
  // Counts a failure of the pass in progress and keeps the first error. REQUIRES: run_mu_.
  void Failure(const Status& s);

  std::shared_ptr<Store> store_;
  CollectorOptions options_;
  std::mutex run_mu_;  // serialises RunOnce
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> runs_{0}, finished_{0}, reversed_{0}, failed_{0}, purged_{0},
      undone_{0}, swept_{0}, folded_{0}, pages_purged_{0}, claims_taken_{0};
  Status first_error_;  // of the pass in progress (guarded by run_mu_)
  // Where the next pass resumes reading the record collection (record_budget; guarded by
  // run_mu_), and the last pass's report (guarded by mu_).
  std::string record_cursor_;
  CollectorPass last_pass_;
  CollectorPass* pass_ = nullptr;  // the pass in progress (guarded by run_mu_)
  // Where the sweep resumes: an index into the swept collections and a scan cursor in it
  // (guarded by run_mu_).
  std::size_t sweep_collection_ = 0;
  std::string sweep_cursor_;
  // Where the next purge of the tombstone index resumes (after one its budget stopped; guarded
  // by run_mu_).
  std::string tomb_cursor_;
  // When the last sweep slice ran (collector clock; guarded by run_mu_).
  bool swept_once_ = false;
  std::int64_t last_sweep_ms_ = 0;
};

}  // namespace litetx
