// engine/worklist.h — pure document transforms of the litesoft model (no I/O).
//
// Prepare evaluates one action against the document as read before the transaction starts
// and produces the worklist entry (with reversing data) and the document as the apply step
// writes it. Finished, Reversed and PreImage turn a document that a transaction holds into
// its committed form, its rolled-back form, and the image a read-committed reader sees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/json/object.hpp>

#include "engine/meta.h"
#include "engine/record.h"
#include "litetx/document.h"
#include "litetx/store.h"
#include "litetx/transaction.h"

namespace litetx::engine {

struct Prepared {
  WorkAction work;             // the worklist entry (write actions only)
  boost::json::object held;    // the document as written by the apply step, held by `txn`
  boost::json::object final;   // final_only: the document after the commit (reference
                               // cleared, deletes as tombstones), written by the one-write
                               // path. Otherwise empty: Finished(held, meta) makes it.
  Meta meta;                   // not final_only: `held`'s metadata (without the undo data)
  std::uint64_t final_version = 0;
};

// The version an insert starts at when the id has no version to continue from: it is absent
// from the store (never written, or its tombstone or placeholder was purged), or it is a
// placeholder at version 0 (a collector's fence on an absent key). It is `now_ms` (the
// inserting Database's clock) in microseconds, at least 1: it stays below 2^53 (exact in a
// double) until the year 2255. A purged id was deleted at least the tombstone retention
// earlier, so every version of its earlier life is below this, as long as that life averaged
// fewer than 1000 writes per millisecond and the clocks of the processes differ by less than
// the retention (docs/protocol.md §1.1, §7). Versions of an id therefore never repeat.
std::uint64_t FirstVersion(std::int64_t now_ms);

// Evaluates `action` against `current` (std::nullopt: absent) for transaction `txn`.
// first_version: FirstVersion(now) — the version of an insert when `current` is absent or at
// version 0; every other write adds 1 to the current version.
// REQUIRES: `action` passed validation; `current`, if any, is not held by another txn.
// Returns the prepared entry, or kNotFound / kDeleted / kConflict (expected version, or an
// insert over a live document) / kFailedPrecondition (adjust of a missing or non-numeric
// field, overflow) / kCorruption (undecodable metadata). kCheck actions only validate.
// final_only: build only `final` (and final_version), not `held` or the reversing data: the
// one-write path, which writes the final document directly.
Result<Prepared> Prepare(const Action& action, const std::optional<StoredDocument>& current,
                         const std::string& txn, std::uint32_t default_schema,
                         std::uint64_t first_version, bool final_only = false);
// The same, taking `current` over (its value is moved from): no copy of the document's body.
Result<Prepared> Prepare(const Action& action, std::optional<StoredDocument>&& current,
                         const std::string& txn, std::uint32_t default_schema,
                         std::uint64_t first_version, bool final_only = false);

// The committed form of a document held by its transaction: reference cleared; a pending
// delete becomes a tombstone (body cleared, version + 1).
boost::json::object Finished(const boost::json::object& held, const Meta& meta);
// The same, taking `held` over (moved from): its body is not copied.
boost::json::object Finished(boost::json::object&& held, const Meta& meta);

// The rolled-back form of a document still held by the transaction of `work`: the touched
// fields restored, the deleting flag cleared, an insert turned back into a placeholder or
// tombstone; always with version + 1 and no reference.
boost::json::object Reversed(const boost::json::object& held, const Meta& meta,
                             const WorkAction& work);
// The same, taking `held` over (moved from): its body is not copied.
boost::json::object Reversed(boost::json::object&& held, const Meta& meta,
                             const WorkAction& work);

// The reversing data of one document's hold, rebuilt from the document alone: the held image
// carries it in "_ltx.u" ({"p": prior, "pv", "psv", "r": restore, "m": remove}), so that a hold
// whose transaction is already over (a write that landed after its record was settled, see
// docs/protocol.md §6.4) can still be undone or read through. The entry's type is kInsert when
// the prior state was not live, else kUpdate (a delete or adjust reverses the same way).
// kCorruption if the document has no (or malformed) undo data.
Result<WorkAction> UndoOf(const Key& key, const boost::json::object& held);

// The deadline a hold written by the parallel commit carries in its undo data ("_ltx.u.x", ms
// since epoch: its record's first GC timestamp), or 0 if it has none (a hold of the classic
// path, whose record is always written before it). While the deadline has not passed, a hold
// whose record is not (yet) there belongs to a coordinator whose batch may still be landing.
std::int64_t HoldDeadline(const boost::json::object& held);
// Stores `deadline_ms` as the hold's deadline. REQUIRES: `held` carries undo data (Prepare).
void SetHoldDeadline(boost::json::object& held, std::int64_t deadline_ms);

// What a read-committed reader sees of a document held by an uncommitted transaction.
ReadResult PreImage(const boost::json::object& held, const WorkAction& work);

// What a reader sees of a document not held by any transaction (or held by a committed one:
// a pending delete then reads as deleted).
ReadResult CommittedImage(const boost::json::object& stored, const Meta& meta);

}  // namespace litetx::engine
