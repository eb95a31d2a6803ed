// engine/repair.h — finishing or reversing a transaction from its ActiveTransaction record.
//
// Used by the collector (gc/) for stale transactions, and by anything else that must settle a
// transaction it did not run. Every step is a single-document CAS and idempotent, so several
// repairers (and the transaction's own, slow coordinator) may work on one transaction at once:
//   - a pending record is first claimed (pending -> aborted, "by" = the claimer); the
//     coordinator's commit flip then fails its CAS and it reports kAborted;
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
Result<RepairOutcome> RepairTransaction(const Env& env, const std::string& txn_id,
                                        std::optional<StoredDocument> record,
                                        const RepairPolicy& policy);

// Clears `txn_id`'s reference from the document at `key` (a pending delete becomes a
// tombstone stamped `now_ms`). OK if it does not (or no longer) reference the transaction.
Status FinishDocument(const Env& env, const Key& key, const std::string& txn_id,
                      std::int64_t now_ms);

// Reverses `work` on the document at `key` if it still references `txn_id`, else fences it
// (see above). OK when done; kUnavailable / kCorruption otherwise.
Status ReverseDocument(const Env& env, const WorkAction& work, const std::string& txn_id,
                       std::int64_t now_ms);

// Undoes a dangling hold: `txn_id` still holds the document at `key`, but its record is gone or
// already an outcome marker, and that was seen by a record read made AFTER a read of the
// document that showed the hold. A transaction's own holds all end before its record becomes a
// marker (and a record is erased only as a marker), so a hold seen after that is a write that
// landed after its transaction was over: it was never part of any outcome, and is undone from
// the document's own undo data (UndoOf in engine/worklist.h). OK when done, or when the document
// no longer references `txn_id`; kCorruption if it has no undo data; kUnavailable.
// `*undone` (if given) is set when one of its own writes was seen to land, and left alone when
// the hold had already ended (undone by a writer, or finished by its own coordinator).
Status UndoDanglingHold(const Env& env, const Key& key, const std::string& txn_id,
                        std::int64_t now_ms, bool* undone = nullptr);

// The outcome marker replacing `record` once every document is settled.
TxnRecord OutcomeMarker(const TxnRecord& record, std::int64_t now_ms);

}  // namespace litetx::engine
