// engine/tombstones.h — the tombstone index: where the tombstones and placeholders are, by time.
//
// A tombstone (a deleted document) and a placeholder (a rolled-back insert, or a collector's
// "gone" fence) are kept for the tombstone retention, then purged. Without an index a collector
// would have to read every document of every collection to find them. The index is collection
// kTombstoneIndexCollection; each entry names documents that became tombstones or placeholders
// no later than the time its id starts with:
//
//   entry id = 12 hex digits of a millisecond time (times past 2^48 - 1 are written as that),
//              then either a transaction id (the entry
//              made from that transaction's outcome marker) or '~' and 16 hex digits of a hash
//              of one document's key (a one-write delete, or a tombstone found younger than
//              its entry and moved to its own time);
//   entry    = {"k": [[collection, id], ...]}
//
// Entries sort by time, so the due ones are a prefix of the collection: a purge reads them from
// the start and stops at the first entry whose time is less than the retention ago. For each
// due entry it reads the documents named and erases (compare-and-swap at the revision read)
// those that are still, untouched by any transaction, a tombstone or placeholder whose own time
// ("_ltx.at") is past the retention — the rule the sweep of a collection applies, so an entry
// can make a purge look at a document, never purge it early. A document found a tombstone
// younger than the entry (made again later) gets an entry at its own time. Then the entry is
// erased.
//
// Who writes entries, and in what order:
//  - a transaction of several actions: nothing more. Its record lists its actions; its outcome
//    marker (written after every document is settled) lists, in "tk", the keys that may have
//    become tombstones or placeholders (deletes if committed, inserts if aborted). The collector
//    creates the entry (id: the marker's done_at and the transaction id) before it folds or
//    erases the marker, so a crash anywhere leaves either the record or the marker to do it
//    again, and the entry's time is no earlier than any of its documents' times;
//  - a one-write delete (Options::index_tombstones): its entry in the same Batch as the delete;
//    Batch promises no order, so a crash (or a failed entry write) can leave a tombstone
//    without an entry. Such a tombstone, those of earlier releases and those of large
//    transactions are found by the collector's sweep (CollectorOptions::collections).
//
// Thread safety: free functions; any number of writers and purgers may run at once (every
// erase is a compare-and-swap, every entry create is idempotent).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "engine/env.h"
#include "engine/record.h"
#include "litetx/status.h"
#include "litetx/store.h"

namespace litetx::engine {

// The entry made from the outcome marker of `txn_id` finished at `done_at_ms`.
Key TombEntryForTxn(std::int64_t done_at_ms, std::string_view txn_id);
// The entry of the single document `key`, which became a tombstone or placeholder at `at_ms`.
Key TombEntryForDoc(std::int64_t at_ms, const Key& key);
// An entry's value: {"k": [[collection, id], ...]}.
boost::json::object TombEntryValue(const std::vector<Key>& keys);
// The time an entry id starts with, or std::nullopt if it does not start with 12 hex digits.
std::optional<std::int64_t> TombEntryTime(std::string_view entry_id);

// Creates the entry of an outcome marker whose "tk" is not empty (nothing to do otherwise).
// An entry already there (written before a crash, or by another collector) is success.
// kUnavailable after the engine's retries.
Status IndexMarkerTombstones(const Env& env, std::string_view txn_id, const TxnRecord& marker);

// Creates the entry of the single document `key` if `image` (about to be written there) is a
// tombstone or a placeholder, at its "_ltx.at" time; nothing to do otherwise. For the few paths
// that leave one where no outcome marker will name it (a coordinator reversing its holds after
// its record was fenced, a dangling hold undone). An entry already there is success.
// kUnavailable after the engine's retries.
Status IndexDocTombstone(const Env& env, const Key& key, const boost::json::object& image);

// What one purge of the index did.
struct TombPurge {
  std::uint64_t due = 0;      // tombstones and placeholders past the retention met
  std::uint64_t done = 0;     // of those, erased by this purge
  std::uint64_t read = 0;     // index entries and documents read
  std::uint64_t entries = 0;  // index entries erased
  std::uint64_t failed = 0;   // failures (logged; what failed is kept for the next purge)
  bool complete = true;       // false: the budget stopped it before the last due entry
  Status first;               // the first failure
};

// Purges the due part of the index as described above: entries older than `retention_ms`
// (0 or less: nothing is purged and nothing read; the entries are kept, for a collector that
// does purge), reading entries with Scans of 1, 2, 4... up to `scan_batch` entries, from the
// entry after `*cursor` (empty:
// the start). At most `budget` entries and documents are read (0: no limit; an entry is read
// whole, so the first entry of a purge may take more); a purge the budget stops sets `*cursor`
// to the last entry it dealt with, so the next one goes on from there and entries kept at the
// head (malformed, or whose documents keep failing) cannot starve the rest; otherwise `*cursor`
// is cleared. Stops early when `*stopping` becomes true. `who` names the purger in the log.
// Never throws; a malformed entry or document is logged, counted and skipped (a malformed
// entry is kept: an operator may repair it).
void PurgeTombstoneIndex(const Env& env, std::int64_t retention_ms, std::size_t budget,
                         std::size_t scan_batch, const std::atomic<bool>* stopping,
                         const std::string& who, std::string* cursor, TombPurge* out);

}  // namespace litetx::engine
