// engine/finisher.h — finishing committed transactions off the caller's critical path.
//
// Once a transaction's commit flip has landed, it is committed whatever happens next; what is
// left (clearing its reference from every document it wrote, turning pending deletes into
// tombstones, then replacing its record by the outcome marker) changes nothing a reader sees,
// because a read-committed reader already resolves a held document through the committed record
// (docs/protocol.md §3). So Database::Commit returns right after the flip and hands that work to
// the Database's Finisher: a small pool of threads working off a bounded queue. When the queue
// is full, the committing thread finishes its own transaction before returning (back-pressure
// instead of unbounded memory). A crash with work queued leaves committed records that still
// hold documents: the collector finishes them after their GC timestamp, and any transaction
// that meets such a document finishes it on the spot, as for a coordinator that crashed right
// after its flip.
//
// Ownership: owned by the Database; the Env it is given must outlive it. The destructor runs
// every queued job to its end (as far as the store lets it), then joins the threads.
// Thread safety: Submit, Drain and the counters may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/json/object.hpp>

#include "engine/env.h"
#include "engine/record.h"

namespace litetx::engine {

// What finishing one committed transaction needs; it owns copies of everything, so that it
// outlives the Commit call that made it.
struct FinishJob {
  std::string txn_id;
  Key record_key;
  Revision record_revision = 0;  // the record's revision after the flip (or still staging)
  TxnRecord record;              // the committed record (its worklist may be left empty)
  bool record_settled = false;   // someone already replaced it by the outcome marker
  // A parallel commit: the record is still staging at record_revision, and the flip to
  // committed (this value, compare-and-swapped at record_revision) comes first. No document is
  // finished before the record says committed: a hold ended while the record is staging would
  // let a resolver find that document not held and abort a committed transaction.
  bool flip_first = false;
  boost::json::object committed_value;
  struct Doc {
    Key key;
    Revision held_revision = 0;  // the revision its apply left
    boost::json::object final;   // the image without the reference (a tombstone for a delete)
    std::size_t bytes = 0;       // its JSON text's length, about (for Env::cache)
    std::uint64_t ticket = 0;    // Env::cache's ticket taken when the transaction read it
  };
  std::vector<Doc> docs;
};

// Finishes `job` now, on the calling thread: the flip first if `job.flip_first` (a record found
// already committed is finished from the revision read; found done, only the documents are
// left to look at; found aborted: nothing is done, logged as an error, since only a fence of a
// document not held can abort a staging record), then one batch of compare-and-swaps from each
// held image to its final image, a per-document retry (after a re-read) for those that failed, then
// the outcome marker. Returns true if every document was finished (by this call or by someone
// else) and the marker written or found; false if something is left for the collector (logged).
bool FinishTransaction(const Env& env, FinishJob& job);

// FinishTransaction for several jobs at once, in three rounds that serve all of them: the flips
// (of the jobs that need one), then one batch of every document of every job whose record is
// committed, then the outcome markers of those fully finished. A write that fails is settled
// for its own job as FinishTransaction settles it; a job whose flip fails is left (logged) and
// never holds up the others. Returns, per job, what FinishTransaction would return. On a store
// that runs a batch as one write (LMDB), k queued transactions cost 3 writes instead of 3k.
std::vector<bool> FinishTransactions(const Env& env, std::span<FinishJob* const> jobs);

// Replaces the record by the outcome marker of `state` at `record_revision`, re-reading after a
// conflict or a lost reply: a marker already there (or the record gone) ends it, a record with
// another outcome is never marked (logged), and the same outcome is marked at the revision read.
// Gives up (logged) when `retry` says so; the collector then writes it. `first`: the failure
// of the marker's write already sent (in a batch), which is settled before anything is sent.
void WriteOutcomeMarker(const Env& env, const std::string& txn_id, const Key& record_key,
                        Revision record_revision, const TxnRecord& record, TxnState state,
                        Retry& retry, std::optional<Status> first = std::nullopt);

class Finisher {
 public:
  // Most worker threads (a larger Options::finisher_threads acts as this).
  static constexpr int kMaxThreads = 64;

  // threads: jobs run at once (clamped to 1..kMaxThreads). queue_limit: jobs waiting at most;
  // 0 queues nothing (every committing thread finishes its own transaction).
  // linger: how long a worker waits for more jobs before finishing fewer than kMaxJobsAtOnce.
  Finisher(Env env, int threads, std::size_t queue_limit,
           std::chrono::microseconds linger = std::chrono::microseconds{0});
  ~Finisher();
  Finisher(const Finisher&) = delete;
  Finisher& operator=(const Finisher&) = delete;

  // Queues `job` (moved from) and returns true, or returns false and leaves `job` untouched
  // when queue_limit jobs are already waiting or the threads cannot be started. The threads
  // start on the first call.
  bool Submit(FinishJob& job);

  // Waits until no job is queued or running.
  void Drain();

  // For a transaction that meets a document held by `txn_id`: if that transaction is waiting
  // in this finisher's queue, takes it out and finishes it on the calling thread; if a worker
  // is finishing it, waits (at most `max_wait`) for that to end. Returns true if either
  // happened (look at the document again), false if this finisher has no such job or its
  // worker is still at it after max_wait (real time): then settle the document as for any
  // other holder. So a
  // Database's next transaction on the same documents pays for the finish it needs, instead of
  // racing the finisher for it.
  bool HelpFinish(const std::string& txn_id, std::chrono::milliseconds max_wait);

  // Jobs completed so far: every document finished and the marker written (`finished`), or
  // something left to the collector (`left`), including jobs cut short by an exception.
  std::uint64_t finished() const;
  std::uint64_t left() const;

 private:
  // A worker: takes up to kMaxJobsAtOnce queued jobs at a time and finishes them together.
  void Work();
  static constexpr std::size_t kMaxJobsAtOnce = 32;
  // Bookkeeping once a job ended. REQUIRES: mu_ held.
  void EndJob(const std::string& txn_id, bool done);

  Env env_;
  const int threads_;
  const std::size_t queue_limit_;
  const std::chrono::microseconds linger_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // wakes the workers: a job, or stop
  std::condition_variable idle_cv_;  // wakes Drain: the queue emptied and nothing runs
  std::list<FinishJob> queue_;
  std::unordered_map<std::string, std::list<FinishJob>::iterator> queued_;  // by txn id
  std::unordered_set<std::string> running_ids_;  // jobs being finished (by a worker or a helper)
  std::condition_variable done_cv_;              // wakes HelpFinish: a job ended
  int running_ = 0;
  int draining_ = 0;   // Drain calls waiting: workers do not linger meanwhile
  int lingering_ = 0;  // workers waiting for more jobs (Submit need not wake anyone)
  bool stop_ = false;
  std::uint64_t finished_ = 0;
  std::uint64_t left_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace litetx::engine
