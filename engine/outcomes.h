// engine/outcomes.h — outcome pages: many finished transactions' outcomes in one document.
//
// A finished transaction leaves an outcome marker at its record key (engine/record.h, "done"),
// so that Database::Outcome can answer for the outcome retention. A marker is a document of its
// own, and a service keeps millions of them; a collector pass that lists the record collection
// would read every one. So the collector folds markers into outcome pages, in collection
// kOutcomesCollection, and erases them from the record collection:
//
//   page id  = the transaction id's first kOutcomePageIdChars characters: its partition digit
//              and the top 10 hex digits of its millisecond (engine/txn_id.h), one page per
//              partition and 256 ms of id time, so pages sort by partition, then by age;
//   page     = {"e": entries, "at": the latest done_at_ms of its entries}
//   entries  = one kOutcomeEntryChars-character entry per transaction, in the order folded:
//              the rest of its id (17 characters) and 'c' (committed) or 'a' (aborted).
//
// Order of writes, for each marker folded: the page (with the entry) first, then the marker is
// erased (compare-and-swap on its revision). Whoever finds a record key absent and needs the
// outcome reads the page next: the page cannot lose an entry before the page's retention has
// passed, and an entry is on its page before its marker can disappear. A crash between the two
// writes leaves the marker, which the next pass folds again (an entry already there is not
// added twice).
//
// A record key found holding a fence (engine/repair.h FenceAbsentRecord) also checks the page:
// a fence created after its transaction's marker was folded (a hold met past its deadline, with
// the record already gone) is not the transaction's outcome — the page, written before the
// marker was erased, is. Every reader that reports an outcome applies that rule (LookupOutcome).
//
// Only markers of current-format ids are folded; fences, large transactions' markers (they keep
// chunk stubs) and markers of earlier releases' ids stay in the record collection.
//
// A page is erased once its "at" is older than the outcome retention. Pages are purged from the
// start of each partition, oldest first, stopping at the first page whose 256 ms began less than
// the retention ago (its "at" cannot be older): the cost is the number of pages due, plus pages
// that received a late entry, plus one read per partition.
//
// Thread safety: free functions; any number of folders, purgers and readers may run at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/env.h"
#include "engine/record.h"
#include "litetx/status.h"
#include "litetx/store.h"

namespace litetx::engine {

inline constexpr std::size_t kOutcomePageIdChars = 11;
inline constexpr std::size_t kOutcomeEntryChars = 18;

// The page `txn_id`'s outcome is folded into, or std::nullopt if the id is not of the current
// format (such markers are never folded).
std::optional<std::string> OutcomePageId(std::string_view txn_id);

// A folded outcome, as read from its page.
struct FoldedOutcome {
  TxnState state = TxnState::kCommitted;  // kCommitted or kAborted
  std::int64_t page_at_ms = 0;            // the page's "at": no earlier than the entry's done_at
};

// Looks `txn_id` up in its outcome page: the outcome, std::nullopt if not folded (or the id
// cannot be), kUnavailable / kCorruption (the page is not well formed).
Result<std::optional<FoldedOutcome>> FindFolded(const Env& env, std::string_view txn_id);

// The record of `txn_id` as whoever needs the transaction's outcome must see it: the document
// at its record key; or, when there is none or it is a fence, and the outcome was folded into
// its page, an outcome marker made from the page entry (done, the page's state, done_at = the
// page's "at", no actions) at the fence's revision, or at revision 0 when the key is absent
// (a compare-and-swap with it fails). std::nullopt: no record and no entry.
// kUnavailable / kCorruption (an outcome page that is not well formed).
Result<std::optional<StoredDocument>> GetRecordDoc(const Env& env, const std::string& txn_id);

// One marker to fold: the transaction, its outcome and the marker as read.
struct MarkerToFold {
  std::string txn_id;
  bool committed = false;
  std::int64_t done_at_ms = 0;
  Revision revision = 0;  // the marker's revision: it is erased only if still at it
  // The marker's tombstone keys ("tk") to copy into the tombstone index before the marker is
  // erased (engine/tombstones.h); empty: none.
  std::vector<Key> tomb_keys;
};

// Result of FoldMarkers.
struct FoldResult {
  std::size_t folded = 0;  // markers whose page entry is written and whose marker was erased
  std::size_t kept = 0;    // markers changed or erased meanwhile, or whose erase failed
};

// Folds `markers`, all of one page (OutcomePageId of each is `page_id`): writes their entries
// on the page (compare-and-swap, re-read on conflict), then the tombstone index entries of
// those with tomb_keys (one batch of creates; a marker whose entry is not known to be written
// is kept), then erases each marker still at its revision. Returns the counts, or kUnavailable
// when the page could not be written (nothing erased), kCorruption when the page is not well
// formed (nothing written).
// REQUIRES: every marker's OutcomePageId is page_id.
Result<FoldResult> FoldMarkers(const Env& env, const std::string& page_id,
                               const std::vector<MarkerToFold>& markers);

// Erases outcome pages whose "at" is at least `retention_ms` before `now_ms`, oldest first in
// each partition, at most `budget` erases (0: no limit). Returns the number erased;
// kUnavailable if listing failed (what was erased stays erased). `*pages_read` (if given) is
// increased by the number of pages read.
Result<std::size_t> PurgeOutcomePages(const Env& env, std::int64_t now_ms,
                                      std::int64_t retention_ms, std::size_t budget,
                                      std::uint64_t* pages_read = nullptr);

}  // namespace litetx::engine
