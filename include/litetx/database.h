// litetx/database.h — the entry point: multi-document transactions over a Store.
//
// A Database runs transactions (the litesoft model) and reads documents. It owns
// no data: everything lives in the Store, so any number of Database objects, in one process
// or several, may share one store. (It keeps copies of the documents it wrote last, bounded by
// Options::written_cache_bytes, only to write them again without a read; a copy that another
// writer made stale costs one failed compare-and-swap, never a wrong outcome.)
//
// Ownership: keeps the store (shared_ptr) and the Options' logger and clock alive. Owns its
// background threads (lease renewal, the finisher); the destructor finishes the committed
// transactions still queued and joins them. A child process after fork() must not use or
// destroy a Database of its parent (those threads do not exist in the child).
// Thread safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "litetx/document.h"
#include "litetx/large_transaction.h"
#include "litetx/options.h"
#include "litetx/run.h"
#include "litetx/status.h"
#include "litetx/store.h"
#include "litetx/transaction.h"

namespace litetx {

namespace engine {
class Coordinator;
class DocCache;
class Finisher;
class LeaseKeeper;
}

struct CommitInfo {
  // The transaction's id (also the id of its ActiveTransaction document while it exists).
  std::string txn_id;
  // For each action, in order, the document's version after the commit (a delete's tombstone
  // version; a check's unchanged version).
  std::vector<std::uint64_t> versions;
  // Database::Run: how many times the callback ran (1 if it committed at the first try).
  int attempts = 1;
};

// What became of a transaction, as its ActiveTransaction document (or outcome marker) says.
enum class TxnOutcome : std::uint8_t {
  kPending,    // still running, or abandoned and not yet settled by a collector
  kCommitted,  // committed (documents may still be being finished)
  kAborted,    // rolled back, or being rolled back
  kNotFound,   // no record: never written (e.g. a one-action commit, which needs none),
               // or its outcome marker was purged after CollectorOptions::outcome_retention.
               // Not final for a parallel commit whose record write was still on its way
               // (Commit said kUnknown): if it lands later, the transaction may still commit.
               // Ask again after the lease, or look at its documents: one still held by the
               // transaction means it is not over.
};
const char* TxnOutcomeName(TxnOutcome outcome);

// One ActiveTransaction document (or outcome marker), as Database::ListTransactions sees it.
struct TxnSummary {
  // The transaction's id (the document's id in kTransactionsCollection).
  std::string id;
  // True if the document could not be decoded as a record; `error` says why and the fields
  // below are left at their defaults.
  bool corrupt = false;
  std::string error;
  // kPending, kCommitted or kAborted (never kNotFound).
  TxnOutcome state = TxnOutcome::kPending;
  // An outcome marker: the transaction is over and every document is settled; kept for
  // CollectorOptions::outcome_retention so that Outcome() can answer.
  bool done = false;
  // Times in ms since the epoch, by the writers' clocks: start, GC timestamp (start + lease,
  // extended while the coordinator works; a collector may settle it after this), and when it
  // became an outcome marker (0 unless done).
  std::int64_t created_ms = 0;
  std::int64_t gc_at_ms = 0;
  std::int64_t done_at_ms = 0;
  // Who rolled it back: "coordinator" or a collector's name; empty if nobody did.
  std::string aborted_by;
  // Write actions in its worklist (0 for an outcome marker).
  std::size_t actions = 0;
};

class Database {
 public:
  // REQUIRES: store != nullptr.
  explicit Database(std::shared_ptr<Store> store, Options options = {});
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs `txn` all-or-nothing. Outcomes:
  //   OK                  committed; CommitInfo has the new versions. With
  //                       Options::finish_in_background (the default) it returns at the
  //                       commit point: reads already see the new images, while the
  //                       documents' references are cleared afterwards (see Flush). With
  //                       Options::parallel_commit (the default) and two or more writes and
  //                       no checks, the commit point is the landing of the record and every
  //                       write, in one store round after the reads; the record is marked
  //                       committed afterwards (readers prove it meanwhile).
  //   kInvalidArgument    bad input (names, reserved fields, sizes, a document named twice,
  //                       wrong types, empty transaction); nothing was written.
  //   kConflict           an expected version did not match (current_version() says the
  //                       actual one), an insert met a live document, or a document changed
  //                       while the transaction ran; rolled back.
  //   kNotFound           an update, adjust, delete or check named a missing document.
  //   kDeleted            ... named a tombstone.
  //   kFailedPrecondition an adjust named a field that is missing or not a number, or would
  //                       overflow.
  //   kBusy               another transaction held a document past Options::busy_timeout.
  //   kAborted            a collector rolled the transaction back (it ran past its lease), or
  //                       another transaction fenced its record (a parallel commit whose
  //                       writes were found without their record past their deadline).
  //   kUnavailable        the store failed before the commit point; rolled back.
  //   kUnknown            the store failed at the commit point and the outcome could not be
  //                       learned; it is decided in the store (read the documents later).
  //   kCorruption         a stored document could not be decoded; nothing was committed.
  Result<CommitInfo> Commit(const Transaction& txn);

  // Runs `fn` as one transaction, re-running it on kConflict, kBusy and kAborted with backoff
  // until options.timeout (see litetx/run.h). Returns the CommitInfo (attempts says how many
  // runs it took; versions are those of the committed actions, one per written or checked
  // document), or the status that ended it: the callback's own non-OK status (nothing is
  // written), the last retryable status once the timeout or max_attempts is reached, or any
  // other outcome of Commit (kUnknown is returned at once, never re-run).
  // REQUIRES: fn is callable; it may run several times (and so may a before_commit hook) and
  // must not have side effects outside the context that it cannot repeat (use after_commit
  // and after_rollback for those).
  Result<CommitInfo> Run(const std::function<Status(TxnContext&)>& fn,
                         const RunOptions& options = {});

  // Starts a transaction of any size, built as a stream of actions (litetx/large_transaction.h):
  // writes its ActiveTransaction document (state pending) and returns the handle. Returns it,
  // or kUnavailable (the record could not be written; nothing was), kUnknown (the record
  // write's reply was lost: nothing of the transaction's documents was written; the
  // collector settles the record after the lease).
  Result<std::unique_ptr<LargeTransaction>> BeginLarge(LargeTransactionOptions options = {});
  // Reads one document. Returns a ReadResult whose state tells found, not found and deleted;
  // kInvalidArgument for a bad name; kUnavailable (retry) or kCorruption. A document held by
  // another transaction never blocks a read: its committed image is rebuilt from the record.
  // A read that meets a parallel commit's staging record proves it (reads every document it
  // lists) and, if every one is held, marks the record committed: the one write a read makes.
  Result<ReadResult> Read(std::string_view collection, std::string_view id,
                          const ReadOptions& options = {});

  // The outcome of the transaction `txn_id` (CommitInfo::txn_id, or Status::txn_id() of a
  // failed commit — the way to settle a kUnknown). Returns it, or kInvalidArgument (bad id),
  // kUnavailable, kCorruption (the record, or the outcome page it was folded into, cannot be
  // decoded). Reads the record; where the collector has folded a finished transaction's
  // outcome into its outcome page (CollectorOptions::fold_outcomes), reads the page: the answer
  // is the same, for at least CollectorOptions::outcome_retention after it was settled.
  Result<TxnOutcome> Outcome(std::string_view txn_id);

  // Lists every ActiveTransaction document and outcome marker still in the record collection
  // (not the outcomes folded into outcome pages), in id order, for inspection
  // (the `litetx txns` command). Not a snapshot: records written or settled meanwhile may or
  // may not appear. A document that cannot be decoded is listed with `corrupt` set instead of
  // failing the listing. Returns the list, or kUnavailable (the store kept failing after
  // Options::max_attempts per page), kCorruption (the store itself could not decode a page).
  Result<std::vector<TxnSummary>> ListTransactions();

  // Waits until every transaction this Database has committed so far is finished: its
  // documents cleared and its outcome marker written, or, where the store kept failing, left
  // to the collector (logged). Only useful with Options::finish_in_background (otherwise
  // Commit returns finished); the destructor does the same. Safe from any thread.
  void Flush();

  Store& store() { return *store_; }
  const Options& options() const { return options_; }

 private:
  std::shared_ptr<Store> store_;
  Options options_;
  std::unique_ptr<engine::LeaseKeeper> leases_;  // null unless Options::renew_leases
  std::unique_ptr<engine::DocCache> cache_;  // null if Options::written_cache_bytes is 0
  std::unique_ptr<engine::Coordinator> coordinator_;
  // Declared last, so destroyed first: it finishes what is queued while the rest still lives.
  std::unique_ptr<engine::Finisher> finisher_;  // null unless Options::finish_in_background
};

}  // namespace litetx
