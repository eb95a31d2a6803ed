// engine/repair.h — finishing or reversing a transaction from its ActiveTransaction record.
//
// Used by the collector (gc/) for stale transactions, and by anything else that must settle a
// transaction it did not run. Every step is a single-document CAS and idempotent, so several
// repairers (and the transaction's own, slow coordinator) may work on one transaction at once:
//   - a pending record is first claimed (pending -> aborted, "by" = the claimer); the
//     coordinator's commit flip then fails its CAS and it reports kAborted;
//   - a staging record (the parallel commit) is resolved: committed if every listed document is
//     held by the transaction, else aborted once a document not held has been fenced;
//   - committed: every document still referencing the transaction is finished (reference
//     cleared, a pending delete turned into a tombstone);
//   - aborted: every document still referencing it is reversed from the worklist's reversing
//     data, and every document still at the revision the coordinator read before it started
//     is fenced (rewritten unchanged, or an absent one created as a "gone" placeholder), so
//     a late apply write of a paused coordinator fails instead of landing;
//   - then the record is replaced by an outcome marker (done, no actions), which is erased
//     once the outcome retention has passed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/env.h"
#include "engine/record.h"

namespace litetx::engine {

struct RepairPolicy {
  std::string claimer;                // stored as "by" when claiming a pending record
  std::int64_t now_ms = 0;            // the repairer's clock
  std::int64_t older_than_ms = 0;     // > 0: also stale once created this long ago
  std::int64_t outcome_retention_ms = 3'600'000;  // then an outcome marker is erased
  // A rolled-back large transaction's chunk stubs fence late chunk writes of a paused
  // coordinator: its marker (and the stubs) are kept at least this long too (0: not longer).
  std::int64_t tombstone_retention_ms = 86'400'000;
};

enum class RepairOutcome : std::uint8_t {
  kNotStale,   // not yet stale (or a marker still within retention): left alone
  kFinished,   // a committed transaction was finished
  kReversed,   // an uncommitted transaction was rolled back
  kPurged,     // an outcome marker past its retention was erased
  kGone,       // the record vanished meanwhile (someone else completed it)
};

// Settles the transaction whose record is `record` (as read; std::nullopt: read it first).
// Returns the outcome, or kUnavailable (the store kept failing; the rest is left for the next
// attempt), kCorruption (the record or a document cannot be decoded; nothing further is done).
// `*marker` (if given) is set to the revision of the outcome marker this call wrote (kFinished,
// kReversed of a transaction that is not large), so the caller can fold it at once; left alone
// otherwise.
struct WrittenMarker {
  Revision revision = 0;
  std::int64_t done_at_ms = 0;
  bool committed = false;
  std::vector<Key> tomb_keys;  // the marker's "tk" (engine/tombstones.h)
};
Result<RepairOutcome> RepairTransaction(const Env& env, const std::string& txn_id,
                                        std::optional<StoredDocument> record,
                                        const RepairPolicy& policy,
                                        std::optional<WrittenMarker>* marker = nullptr);

// Clears `txn_id`'s reference from the document at `key` (a pending delete becomes a
// tombstone stamped `now_ms`). OK if it does not (or no longer) reference the transaction.
Status FinishDocument(const Env& env, const Key& key, const std::string& txn_id,
                      std::int64_t now_ms);

// Reverses `work` on the document at `key` if it still references `txn_id`, else fences it
// (see above). OK when done; kUnavailable / kCorruption otherwise.
// undo_from_document: a held document is reversed from its own undo data (UndoOf) instead of
// `work`'s, which then only gives the key and the fence (existed, read_revision): a large
// transaction's chunk entries carry no reversing data.
Status ReverseDocument(const Env& env, const WorkAction& work, const std::string& txn_id,
                       std::int64_t now_ms, bool undo_from_document = false);

// Undoes a dangling hold: `txn_id` still holds the document at `key`, but its record is already
// an outcome marker, and that was seen by a record read made AFTER a read of the document that
// showed the hold. A transaction's own holds all end before its record becomes a marker, so a
// hold seen after that is a write that landed after its transaction was over (or one whose
// record was fenced by FenceAbsentRecord): it was never part of any committed outcome, and is
// undone from the document's own undo data (UndoOf in engine/worklist.h). A record found ABSENT
// does not prove this (a parallel commit's record may still be landing): FenceAbsentRecord
// first. OK when done, or when the document no longer references `txn_id`; kCorruption if it
// has no undo data; kUnavailable.
// `*undone` (if given) is set when one of its own writes was seen to land, and left alone when
// the hold had already ended (undone by a writer, or finished by its own coordinator).
Status UndoDanglingHold(const Env& env, const Key& key, const std::string& txn_id,
                        std::int64_t now_ms, bool* undone = nullptr);

// What FenceAbsentRecord did.
enum class AbsentRecord : std::uint8_t {
  kWait,      // the hold's deadline has not passed: its coordinator may still be writing it
  kDangling,  // the hold may be undone (UndoDanglingHold): its record can never land now
  kAppeared,  // the document or the record changed meanwhile: look again
};

// For a hold of `txn_id` on the document at `key`, read as `held` at `revision`, whose record
// was read afterwards and found absent.
//  - A classic hold (no deadline, HoldDeadline) comes after its record, so an absent record is
//    one that was settled and erased: the hold is a late write, kDangling, nothing written.
//  - A parallel commit's hold may come before its record, which may still land. Before the
//    hold's deadline: kWait. After it, the document is read again: unless it is still at
//    `revision` (the hold has stood since before the record was found absent, so the record
//    was not settled meanwhile: settling ends every hold), kAppeared. Then the record is
//    created as a fence (an aborted outcome marker by `claimer`, never erased), which makes the
//    coordinator's own record create fail: kDangling; a record already there: kAppeared.
// kUnavailable if the store kept failing.
Result<AbsentRecord> FenceAbsentRecord(const Env& env, const std::string& txn_id, const Key& key,
                                       const boost::json::object& held, Revision revision,
                                       const std::string& claimer, std::int64_t now_ms);

// Looks at the document `work` names for the parallel commit of `txn_id`: if the transaction
// holds it, returns its revision; if not, first makes sure the transaction's apply on it can
// never land (ProveStaging's fence) and returns std::nullopt. `first`: a read of it made just
// before, if any. kUnavailable / kCorruption otherwise.
Result<std::optional<Revision>> HeldOrFence(
    const Env& env, const std::string& txn_id, const WorkAction& work, std::int64_t now_ms,
    std::optional<Result<std::optional<StoredDocument>>> first = std::nullopt);

// What a look at the documents of a staging record found.
enum class StagingProof : std::uint8_t {
  kAllHeld,  // every listed document is held by the transaction
  kNotHeld,  // some is not (fence = false: nothing was written)
  kFenced,   // some is not, and the transaction's apply on it can no longer land (fence = true)
};

// Reads every document listed by `record` (a staging record of `txn_id`) in one batch. With
// `fence`, a document not held by the transaction is made unwritable for the transaction's apply
// (ReverseDocument's fence: rewritten unchanged while at the revision the coordinator read, or
// an absent key taken by a "gone" placeholder); a fence that loses its race to the apply finds
// the document held and goes on. kUnavailable / kCorruption otherwise.
Result<StagingProof> ProveStaging(const Env& env, const std::string& txn_id,
                                  const TxnRecord& record, bool fence, std::int64_t now_ms);

// Resolves the staging record `record` of `txn_id` read at `rev`: proves it (every document
// held: compare-and-swap to committed) or, with `fence`, fences and compare-and-swaps it to
// aborted by `claimer`. Returns the record as written, or std::nullopt when nothing was written
// (the record moved on meanwhile, or without `fence` a document was not held): the caller reads
// it again. kUnavailable / kCorruption otherwise.
Result<std::optional<StoredDocument>> ResolveStaging(const Env& env, const std::string& txn_id,
                                                     const TxnRecord& record, Revision rev,
                                                     bool fence, const std::string& claimer,
                                                     std::int64_t now_ms);

// The outcome marker replacing `record` once every document is settled.
TxnRecord OutcomeMarker(const TxnRecord& record, std::int64_t now_ms);

}  // namespace litetx::engine
