// engine/record.h — the ActiveTransaction document and its DetailedTransactionWorklist.
//
// Stored in collection kTransactionsCollection under the transaction's id:
//   {"state": "staging" | "pending" | "committed" | "aborted",
//    "created": ms since epoch, "prio": ms since epoch (the age for wait-die: when the logical
//    transaction's first attempt started; absent: = created), "gc_at": ms since epoch (created + lease, extended while the
//    coordinator works), "by": who aborted it, "done": true + "done_at": ms (outcome marker),
//    "fence": true (a fence marker, never purged), "tk": [[collection, id]...] (a marker's
//    tombstone keys: the documents its transaction may have left as tombstones or placeholders,
//    engine/tombstones.h), "actions": [WorkAction...] (a parallel
//    commit's flip writes them without fields/unset/restore/remove: DropReversingData),
//    "large": true, "chunks": n (a large transaction: no actions; its worklist is in chunk
//    documents, engine/large.h)}
// Each WorkAction is one write action with its reversing data:
//   {"op": "insert"|"update"|"adjust"|"delete", "c": collection, "id": id,
//    "prior": "absent"|"gone"|"deleted"|"live",   state before the transaction
//    "pv": prior version, "psv": prior schema version,
//    "fields": {...}   insert: the document; update: fields set; adjust: deltas
//    "unset": [...]    update: fields removed
//    "sv": n           insert / update: schema version written (absent: unchanged)
//    "restore": {...}  update / adjust: prior values of every touched field that existed
//    "remove": [...]   update: touched fields that did not exist before
//    "rev": n}         store revision read before the transaction (absent: no document)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/status.h"
#include "litetx/store.h"
#include "litetx/transaction.h"

namespace litetx::engine {

enum class Prior : std::uint8_t { kAbsent, kGone, kDeleted, kLive };
// "absent", "gone", "deleted", "live": the stored spelling (worklists and undo data).
const char* PriorName(Prior p);
std::optional<Prior> ParsePrior(std::string_view s);

struct WorkAction {
  ActionType type = ActionType::kUpdate;
  Key key;
  Prior prior = Prior::kAbsent;
  std::uint64_t prior_version = 0;
  std::uint32_t prior_schema = 0;
  boost::json::object fields;
  std::vector<std::string> unset;
  std::optional<std::uint32_t> schema_version;
  boost::json::object restore;
  std::vector<std::string> remove;
  // The store revision the coordinator read before the transaction ("rev"; absent if the
  // document did not exist). A collector reversing the transaction fences a document still at
  // this revision so that a late apply write of a paused coordinator fails its CAS.
  bool existed = false;
  Revision read_revision = 0;
};

// kStaging: written together with the applies (the parallel commit, docs/protocol.md §2.3); the
// transaction is committed once every listed document is held by it while the record is still
// staging at one revision. Only the coordinator moves it to pending (falling back to the classic
// path); a resolver moves it to committed (every document proven held) or aborted (a document
// fenced). kPending: written before any apply; committed only by its coordinator's flip.
enum class TxnState : std::uint8_t { kPending, kCommitted, kAborted, kStaging };
const char* TxnStateName(TxnState state);

struct TxnRecord {
  TxnState state = TxnState::kPending;
  std::int64_t created_ms = 0;
  std::int64_t gc_at_ms = 0;
  // Wait-die age: the start of the logical transaction's first attempt (older = smaller).
  std::int64_t priority_ms = 0;
  // Who moved a pending record to aborted: "coordinator" or a collector's name.
  std::string aborted_by;
  // An outcome marker: the transaction is over (every document finished or reversed); kept
  // for the outcome retention so Database::Outcome can answer, with no actions.
  bool done = false;
  std::int64_t done_at_ms = 0;
  // A fence ("fence": true, always an aborted outcome marker): created where no record was, so
  // that the transaction's own record create, possibly still on its way, can never land
  // (engine/repair.h FenceAbsentRecord). Never purged: once erased, a late create could land.
  bool fence = false;
  // An outcome marker's tombstone keys ("tk"): the documents the transaction may have left as
  // tombstones or placeholders (its deletes if committed, its inserts if aborted). The
  // collector copies them into the tombstone index before it folds or erases the marker.
  std::vector<Key> tomb_keys;
  std::vector<WorkAction> actions;
  // A large transaction (engine/large.h): `actions` is empty and the documents are listed in
  // `chunks` chunk documents, numbered 0 .. chunks-1. Kept by its outcome marker.
  bool large = false;
  std::uint64_t chunks = 0;

  // The action on `key`, or nullptr (always nullptr for a large transaction).
  const WorkAction* Find(const Key& key) const;
};

boost::json::object EncodeRecord(const TxnRecord& record);
// Drops from an encoded record's actions what only a rollback needs ("fields", "unset",
// "restore", "remove"), keeping what names each document and its prior state: the form of a
// record once it is committed, when nothing will be reversed and finishing a document needs
// only its key. It still decodes (DecodeRecord), with those parts empty.
void DropReversingData(boost::json::object& encoded);
// kCorruption if `stored` is not a well-formed record.
Result<TxnRecord> DecodeRecord(const boost::json::object& stored);

}  // namespace litetx::engine
