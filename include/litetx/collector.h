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
// reads; markers older than outcome_retention are erased. Last, it sweeps a bounded slice of
// the user collections it is given: dangling holds are undone, old tombstones purged. Every step is a single-document CAS
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
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "litetx/options.h"
#include "litetx/status.h"
#include "litetx/store.h"

namespace litetx {

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
  // User collections the collector sweeps, a bounded slice per run (see sweep_budget): it
  // undoes dangling holds there (a document still referencing a transaction that is over: a
  // write that landed after its transaction was settled, never part of any outcome) and purges
  // tombstones and placeholders older than tombstone_retention. Empty: no sweep.
  std::vector<std::string> collections;
  // Older name of `collections`; both lists are swept.
  std::vector<std::string> purge_collections;
  // Most documents the sweep looks at in one run; the next run resumes where it stopped, and a
  // full pass over every collection takes ceil(documents / sweep_budget) runs. 0: no limit.
  std::size_t sweep_budget = 10'000;
  // Documents per Scan page.
  std::size_t scan_batch = 256;
  // A name for this collector, stored in records it claims (aborted_by) and logged. Empty:
  // "gc-" and a random suffix.
  std::string name;
};

struct CollectorStats {
  std::uint64_t runs = 0;      // completed RunOnce calls (background and direct)
  std::uint64_t finished = 0;  // committed transactions finished
  std::uint64_t reversed = 0;  // uncommitted transactions rolled back
  std::uint64_t failed = 0;    // repair attempts that failed (logged; retried next run)
  std::uint64_t purged = 0;    // tombstones, placeholders and outcome markers erased
  std::uint64_t undone = 0;    // dangling holds the sweep undid with its own write
  std::uint64_t swept = 0;     // documents the sweep looked at
};

class Collector {
 public:
  // REQUIRES: store != nullptr.
  explicit Collector(std::shared_ptr<Store> store, CollectorOptions options = {});
  // Stops the background thread if it runs.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // One pass over every ActiveTransaction document and the purge collections. Returns OK, or
  // the first error met (kUnavailable, kCorruption...) after going on with the rest: the
  // counters tell what was done.
  Status RunOnce();

  // Starts the background thread, which calls RunOnce every `interval`. No-op if running.
  void Start();
  // Stops the background thread promptly (wakes it from its pause) and joins it; a run in
  // progress ends at the next transaction boundary. No-op if not running.
  void Stop();
  bool running() const;

  CollectorStats stats() const;
  const std::string& name() const { return options_.name; }

 private:
  void Loop();
  // One bounded slice of the sweep of `collections` (see CollectorOptions); returns the first error.
  Status Sweep();

  std::shared_ptr<Store> store_;
  CollectorOptions options_;
  std::mutex run_mu_;  // serialises RunOnce
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> runs_{0}, finished_{0}, reversed_{0}, failed_{0}, purged_{0},
      undone_{0}, swept_{0};
  // Where the sweep resumes: an index into the swept collections and a scan cursor in it
  // (guarded by run_mu_).
  std::size_t sweep_collection_ = 0;
  std::string sweep_cursor_;
};

}  // namespace litetx
