// litetx/run.h — Database::Run: a transaction written as a callback, re-run on contention.
//
// The callback reads and writes through a TxnContext. Writes are buffered in the context
// (reads see them) and committed together when the callback returns OK. On kConflict, kBusy
// or kAborted the whole callback runs again, with jittered exponential backoff, until
// RunOptions::timeout (like MongoDB's withTransaction and Couchbase's transactions.run). An
// unknown outcome (kUnknown) is returned at once, never re-run.
//
//   auto r = db.Run([&](litetx::TxnContext& tx) -> litetx::Status {
//     auto from = tx.Get("accounts", "alice");
//     if (!from.ok()) return from.status();
//     if (from->state != litetx::DocumentState::kFound) return litetx::Status::NotFound("alice");
//     if (from->doc.at("balance").as_int64() < 5) return litetx::Status::FailedPrecondition("funds");
//     if (auto s = tx.Adjust("accounts", "alice", {{"balance", -5}}); !s.ok()) return s;
//     return tx.Adjust("accounts", "bob", {{"balance", 5}});
//   });
//
// Isolation: every read is read-committed; a document the callback read and then wrote is
// written with the version it read as expected version (no lost update), and with
// RunOptions::serializable every document read but not written is checked at commit too.
// Pessimistic locks (Lock) are held in the document's metadata with an owner, a priority and a
// lease; see docs/concurrency.md for the contention policy (wait-die by transaction age).
//
// Exceptions: an exception thrown by the callback or by before_commit is not caught: it
// propagates out of Run unchanged, after the attempt has been rolled back. Nothing it staged is
// written (writes are only buffered until commit), no transaction record is left, and the locks
// it took are released before Run exits (a release the store refuses is logged at warn and
// that lock expires with its lease). The run is not retried, and after_rollback is not called
// (there is no status to give it). An exception thrown by after_commit propagates too; the
// transaction has then committed. Code that must not throw can turn an exception into a status
// inside the callback:
//
//   db.Run([&](litetx::TxnContext& tx) -> litetx::Status {
//     try { return Work(tx); } catch (const std::exception& e) {
//       return litetx::Status::FailedPrecondition(e.what());  // rolled back, not retried
//     }
//   });
//
// Nested scopes (savepoints; Spring's NESTED propagation): TxnContext::Nested runs a step of
// the callback whose failure undoes only that step's buffered writes, and the transaction goes
// on:
//
//   db.Run([&](litetx::TxnContext& tx) -> litetx::Status {
//     if (auto s = tx.Insert("orders", "o1", {{"total", 30}}); !s.ok()) return s;
//     litetx::Status bonus = tx.Nested([&](litetx::TxnContext& in) -> litetx::Status {
//       if (auto s = in.Adjust("points", "alice", {{"points", 10}}); !s.ok()) return s;
//       return in.Insert("bonuses", "o1", {{"points", 10}});  // kConflict: both undone
//     });
//     if (!bonus.ok() && bonus.code() != litetx::Code::kConflict) return bonus;
//     return litetx::Status::Ok();  // the order commits, with its bonus or without it
//   });
//
// Ownership: a TxnContext lives only during one run of the callback and refers to its
// Database; do not keep it. Thread safety: a TxnContext is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/document.h"
#include "litetx/options.h"
#include "litetx/status.h"
#include "litetx/transaction.h"

namespace litetx {

class Database;
class TxnContext;
struct CommitInfo;

// Pessimistic lock modes (Doctrine MongoDB ODM's PESSIMISTIC_READ / PESSIMISTIC_WRITE). A read
// lock is shared: it keeps other transactions from writing the document or write-locking it. A
// write lock is exclusive: it also keeps them from read-locking it. Plain reads are never
// blocked.
enum class LockMode : std::uint8_t { kRead, kWrite };

// Lifecycle hooks of a run. after_commit and after_rollback fire once per logical transaction,
// however many attempts it takes (as Doctrine does). before_commit is part of each attempt.
struct TransactionHooks {
  // Called on every attempt whose callback returned OK, right before that attempt's commit,
  // with the attempt's context. Its reads and writes belong to the attempt exactly as the
  // callback's do: when the attempt is run again the hook runs again, reads the documents
  // afresh and computes its writes from what it read then. A non-OK status is handled as if
  // the callback had returned it: the attempt writes nothing, and kConflict, kBusy or kAborted
  // run it again while any other status ends the run. Like the callback it may run several
  // times, so side effects outside the store belong in after_commit.
  std::function<Status(TxnContext&)> before_commit;
  // Called once, after the transaction committed.
  std::function<void(const CommitInfo&)> after_commit;
  // Called once, when the run ends without committing: with the final status (the last
  // attempt was rolled back, or the callback or before_commit failed). Not called for
  // kUnknown, whose outcome is not known.
  std::function<void(const Status&)> after_rollback;
};

struct RunOptions {
  // How long to keep re-running on kConflict, kBusy and kAborted, counted from the start of
  // the first attempt on monotonic time (a step of the wall clock does not move it); then the
  // last attempt's status is returned.
  std::chrono::milliseconds timeout{10'000};
  // Most attempts in all; 0: limited by `timeout` only.
  int max_attempts = 0;
  // Pause between attempts: random in [0, d] (full jitter), d doubling from `initial` to `max`.
  BackoffOptions backoff{std::chrono::milliseconds{1}, std::chrono::milliseconds{100}};
  // Check at commit that every document the callback read (Get) and did not write is still
  // at the version read (a Check action), so that the transaction is serializable over the
  // documents it read. Reads that found nothing are not checked (no phantom protection).
  bool serializable = false;
  // Lease of the pessimistic locks this transaction takes: a lock whose owner died expires
  // this long after it was taken or last renewed. While the run is alive, the Database renews
  // its locks in the background every lock_lease/4 (Options::renew_leases); with renewal off
  // it must exceed the callback's longest run.
  std::chrono::milliseconds lock_lease{5'000};
  // before_commit on every attempt, after_commit and after_rollback once; see TransactionHooks.
  TransactionHooks hooks;
};

// The transaction object a Run callback works through. Every method validates its names and
// fields at once (kInvalidArgument) and never writes a document except Lock, which writes the
// lock into the document's metadata. All writes take effect at commit, all or nothing.
class TxnContext {
 public:
  TxnContext(const TxnContext&) = delete;
  TxnContext& operator=(const TxnContext&) = delete;
  // Releases the locks still held (the owning scope ended).
  ~TxnContext();

  // Reads a document, with this transaction's own writes applied. The version is the
  // committed version read (own writes do not change it inside the transaction). Never waits
  // (a document another transaction holds reads as its committed image). Returns the
  // ReadResult, or kInvalidArgument, kUnavailable, kCorruption.
  Result<ReadResult> Get(std::string_view collection, std::string_view id);
  // Get with optimistic locking (Doctrine's find(..., OPTIMISTIC, version)): kConflict with
  // current_version() if the document is not at `expected_version` (or is not live), and the
  // version is checked again at commit.
  Result<ReadResult> Get(std::string_view collection, std::string_view id,
                         std::uint64_t expected_version);

  // Buffered writes; same rules and outcomes as the Transaction builder's actions, evaluated
  // against the document as this transaction sees it: kNotFound, kDeleted, kConflict (an
  // expected version, or an insert over a live document), kFailedPrecondition (adjust),
  // kInvalidArgument, or a read error. A failed call changes nothing in the context. A
  // document may be written any number of times: the commit writes the combined result.
  Status Insert(std::string_view collection, std::string_view id, boost::json::object doc,
                std::optional<std::uint32_t> schema_version = std::nullopt);
  Status Update(std::string_view collection, std::string_view id, boost::json::object set,
                std::vector<std::string> unset = {},
                std::optional<std::uint64_t> expected_version = std::nullopt);
  Status Adjust(std::string_view collection, std::string_view id, boost::json::object by,
                std::optional<std::uint64_t> expected_version = std::nullopt);
  Status Delete(std::string_view collection, std::string_view id,
                std::optional<std::uint64_t> expected_version = std::nullopt);

  // Optimistic lock (Doctrine's lock(document, OPTIMISTIC, version)): kConflict with
  // current_version() now if the document is not at `expected_version`, and checked again at
  // commit (kConflict then if it changed meanwhile).
  Status LockOptimistic(std::string_view collection, std::string_view id,
                        std::uint64_t expected_version);

  // Pessimistic lock, held until this attempt commits or rolls back (or the context is
  // destroyed). Waits while another transaction holds the document or a conflicting lock,
  // under the wait-die policy: an older transaction waits (up to Options::busy_timeout), a
  // younger one fails at once. Returns OK (also if already held in this mode or stronger; a
  // read lock is upgraded to write when no other reader holds one), kBusy (retry the
  // transaction), kNotFound / kDeleted (nothing to lock), kInvalidArgument, kUnavailable,
  // kCorruption. A kUnavailable after the store lost the reply of the lock write may leave
  // the lock stored: it is then released with the attempt's other locks all the same.
  Status Lock(std::string_view collection, std::string_view id, LockMode mode);

  // Runs `fn` as a nested scope of this transaction (a savepoint; Spring's NESTED propagation)
  // and returns fn's status. If fn returns OK, its writes stay buffered in this transaction
  // and commit with it (or are rolled back with it). If fn returns a non-OK status, every
  // write it buffered (Insert, Update, Adjust, Delete), every version it pinned (Get with
  // expected_version, LockOptimistic) and every read it recorded for the serializable check
  // is undone, and that status is returned: the transaction goes on as if fn had not run (a
  // document it read is read afresh by a later Get). If fn throws, the same undo happens and
  // the exception propagates. Scopes nest to any depth; an inner scope that succeeded is
  // undone with its enclosing scope.
  //
  // A kConflict that fn met on its own (a version it pinned did not match, an insert over a
  // live document) does not keep Run from re-running the attempt once the scope is undone,
  // unless the callback returns that same status: then, as without a scope, the run ends
  // with it instead of re-running.
  //
  // Pessimistic locks (Lock) taken inside the scope are NOT released when it is undone: like
  // every lock they are held until the attempt commits or rolls back.
  Status Nested(const std::function<Status(TxnContext&)>& fn);

  // This attempt's transaction id (also its lock owner id), and its 1-based attempt number.
  const std::string& txn_id() const;
  int attempt() const;

  struct Impl;

 private:
  friend class Database;
  explicit TxnContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace litetx
