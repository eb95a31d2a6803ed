// litetx/large_transaction.h — transactions of any size, built as a stream of actions.
//
// A Transaction (litetx/transaction.h) is held in memory and recorded in one ActiveTransaction
// document, so it is capped at Options::max_actions and Options::max_record_bytes. A
// LargeTransaction has no such cap: actions are added one at a time and written chunk by chunk
// while they are added, and memory stays flat (one chunk of actions at a time):
//
//   auto txn = db.BeginLarge();                  // writes its record (state pending)
//   if (!txn.ok()) ...;
//   for (...) {
//     Status s = (*txn)->Insert("orders", id, row);   // buffered; every chunk_actions
//     if (!s.ok()) ...;                                // actions a chunk is written
//   }
//   auto info = (*txn)->Commit();                // all or nothing
//
// Every chunk is read in one store batch, described in a chunk document (the keys, and the
// store revisions read, written before any of them is touched), then applied in one batch;
// each written document carries the transaction's reference and its own reversing data.
// Nothing of the transaction is visible to a read-committed reader before the commit point
// (one compare-and-swap of the record), and all of it is visible right after, before the
// finishing pass has visited each document. A crash at any point leaves the work to the
// collector, which finishes a committed large transaction or reverses an uncommitted one chunk
// by chunk, resumably; several collectors may do so at once. docs/protocol.md §9 has the protocol
// and its failure table.
//
// Every action kind works (insert, update, adjust, delete), plus Put (insert or replace). A
// large transaction takes the classic path (record first, applies, commit flip); it never
// uses the one-write or parallel commit.
//
// Ownership: a LargeTransaction refers to its Database, which must outlive it.
// Thread safety: one thread at a time per LargeTransaction; separate LargeTransactions (and
// other transactions) may run at once on one Database.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/status.h"
#include "litetx/transaction.h"

namespace litetx {

class Database;
namespace engine {
class LargeRun;
}

struct LargeTransactionOptions {
  // Write actions per chunk: one batch read, one chunk document and one batch apply each.
  // Larger chunks mean fewer store round trips and larger chunk documents (about 60 bytes per
  // action plus the key). Values below 1 act as 1, above 10000 as 10000.
  std::size_t chunk_actions = 500;
  // What happens to an action that fails on the document it finds (an insert over a live
  // document, an update or delete of a missing one, a failed expected version, an adjust of a
  // missing field, a document named twice): false (the default) — the transaction fails: the
  // call that found it (Add or Commit) returns the error and the transaction is rolled back;
  // true — the action is skipped (nothing written for it), reported to on_skip, and the rest
  // goes on. Store failures and kBusy always fail the transaction.
  bool skip_failed_actions = false;
  // Called for every skipped action with the tag given to Add and the reason. May be empty.
  // An exception it throws fails the transaction (kFailedPrecondition, rolled back).
  std::function<void(std::uint64_t tag, const Status& why)> on_skip;
  // Called once, right after the commit point has landed (the transaction is then committed
  // whatever happens next), before the finishing pass. May be empty. An exception it throws is
  // logged and ignored: the commit stands.
  std::function<void()> on_commit_point;
  // Clear the transaction's references from its documents before Commit returns (chunk by
  // chunk). Off: Commit returns at the commit point and the collector (or a later call to
  // Settle) finishes them; readers see the committed images either way.
  bool settle = true;
};

struct LargeCommitInfo {
  std::string txn_id;
  std::uint64_t written = 0;  // write actions applied
  std::uint64_t skipped = 0;  // actions skipped (skip_failed_actions)
  std::uint64_t chunks = 0;   // chunk documents written
  bool settled = false;       // every document finished and the outcome marker written
};

class LargeTransaction {
 public:
  ~LargeTransaction();  // rolls back (active rollback, as Rollback) unless committed
  LargeTransaction(const LargeTransaction&) = delete;
  LargeTransaction& operator=(const LargeTransaction&) = delete;

  // The transaction's id (its ActiveTransaction document's id).
  const std::string& id() const;

  // Adds one action (kInsert, kUpdate, kAdjust, kDelete; kCheck is refused). `tag` is the
  // caller's own number for it (e.g. a line number), given back in errors and to on_skip.
  // Returns OK (buffered, or its chunk written); kInvalidArgument (a bad action: nothing of it
  // is written, the transaction goes on); or, when writing its chunk failed, the error that
  // ended the transaction, which is then rolled back: kConflict / kNotFound / kDeleted /
  // kFailedPrecondition / kInvalidArgument (an action of the chunk failed on its document,
  // without skip_failed_actions; the message names its tag), kBusy, kAborted (a collector
  // rolled it back: it ran past its lease), kUnavailable, kCorruption. After an error other
  // than a bad action, every call returns that error.
  Status Add(Action action, std::uint64_t tag = 0);
  Status Insert(std::string collection, std::string id, boost::json::object doc,
                std::uint64_t tag = 0);
  Status Update(std::string collection, std::string id, boost::json::object set,
                std::vector<std::string> unset = {}, std::uint64_t tag = 0);
  Status Adjust(std::string collection, std::string id, boost::json::object by,
                std::uint64_t tag = 0);
  Status Delete(std::string collection, std::string id, std::uint64_t tag = 0);
  // Inserts the document, or replaces every field of the live document with that id (fields
  // not in `doc` are removed; the version goes up by one as for an update).
  Status Put(std::string collection, std::string id, boost::json::object doc,
             std::uint64_t tag = 0);

  // Writes the last chunk and commits. Returns the info, or the error (as Add) after which the
  // transaction was rolled back; kUnknown if the commit flip's reply was lost and could not be
  // learned (Database::Outcome settles it later); kUnavailable when the flip surely did not land
  // (rolled back). With `settle`, a store failure while finishing leaves the rest to the
  // collector and still returns OK with settled = false.
  Result<LargeCommitInfo> Commit();

  // After a Commit with settle = false: finishes the documents now. OK, or kUnavailable (the
  // rest is left to the collector). REQUIRES: Commit returned OK.
  Status Settle();

  // Rolls back everything written so far (record -> aborted, every document reversed, chunk by
  // chunk, retried with backoff up to Options::rollback_timeout). OK, or the error after which
  // the rest is left to the collector. A no-op once rolled back; kFailedPrecondition once
  // committed.
  Status Rollback();

  // Actions accepted by Add so far (including buffered ones and skipped ones).
  std::uint64_t added() const;

 private:
  friend class Database;
  explicit LargeTransaction(std::unique_ptr<engine::LargeRun> run);
  std::unique_ptr<engine::LargeRun> run_;
};

}  // namespace litetx
