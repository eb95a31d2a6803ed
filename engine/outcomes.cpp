// engine/outcomes.cpp — outcome pages (engine/outcomes.h).
#include "engine/outcomes.h"

#include <algorithm>
#include <utility>

#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include "engine/tombstones.h"
#include "engine/txn_id.h"
#include "litetx/document.h"

namespace litetx::engine {

namespace json = boost::json;

namespace {

constexpr std::size_t kSuffixChars = kOutcomeEntryChars - 1;
static_assert(kOutcomePageIdChars + kSuffixChars == kTxnIdDigits);

Key PageKey(std::string_view page_id) {
  return Key{std::string(kOutcomesCollection), std::string(page_id)};
}

// A page as stored: its entries and its "at".
struct Page {
  std::string entries;
  std::int64_t at_ms = 0;
};

Result<Page> DecodePage(const std::string& page_id, const json::object& stored) {
  Page p;
  const json::value* e = stored.if_contains("e");
  const json::value* at = stored.if_contains("at");
  if (e == nullptr || !e->is_string() || at == nullptr || !at->is_int64()) {
    return Status::Corruption("outcome page " + page_id + " is not well formed");
  }
  p.entries.assign(e->get_string().data(), e->get_string().size());
  if (p.entries.size() % kOutcomeEntryChars != 0) {
    return Status::Corruption("outcome page " + page_id + " has a torn entry");
  }
  p.at_ms = at->get_int64();
  return p;
}

json::object EncodePage(const Page& p) {
  json::object o;
  o.reserve(2);
  o.emplace("e", json::string(p.entries));
  o.emplace("at", p.at_ms);
  return o;
}

// The index of the entry for `suffix` in `entries`, or npos.
std::size_t FindEntry(const std::string& entries, std::string_view suffix) {
  for (std::size_t i = 0; i + kOutcomeEntryChars <= entries.size(); i += kOutcomeEntryChars) {
    if (std::string_view(entries).substr(i, kSuffixChars) == suffix) return i;
  }
  return std::string::npos;
}

// The first millisecond of the page's 256 ms (0 for an id not made by OutcomePageId).
std::int64_t PageStartMillis(std::string_view page_id) {
  if (page_id.size() != kOutcomePageIdChars) return 0;
  std::int64_t ms = 0;
  for (std::size_t i = 1; i < page_id.size(); ++i) {
    const char c = page_id[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return 0;
    ms = ms * 16 + v;
  }
  return ms << 8;
}

}  // namespace

std::optional<std::string> OutcomePageId(std::string_view txn_id) {
  if (!TxnIdMillis(txn_id)) return std::nullopt;  // not a current-format id
  return std::string(txn_id.substr(0, kOutcomePageIdChars));
}

Result<std::optional<FoldedOutcome>> FindFolded(const Env& env, std::string_view txn_id) {
  auto page_id = OutcomePageId(txn_id);
  if (!page_id) return std::optional<FoldedOutcome>{};
  auto g = GetWithRetry(env, PageKey(*page_id));
  if (!g.ok()) return g.status();
  if (!g->has_value()) return std::optional<FoldedOutcome>{};
  auto page = DecodePage(*page_id, (**g).value);
  if (!page.ok()) return page.status();
  const std::size_t i = FindEntry(page->entries, txn_id.substr(kOutcomePageIdChars));
  if (i == std::string::npos) return std::optional<FoldedOutcome>{};
  const char letter = page->entries[i + kSuffixChars];
  if (letter != 'c' && letter != 'a') {
    return Status::Corruption("outcome page " + *page_id + ": the entry of " +
                              std::string(txn_id) + " has no outcome ('" +
                              std::string(1, letter) + "')");
  }
  FoldedOutcome out;
  out.state = letter == 'c' ? TxnState::kCommitted : TxnState::kAborted;
  out.page_at_ms = page->at_ms;
  return std::optional<FoldedOutcome>(out);
}

Result<std::optional<StoredDocument>> GetRecordDoc(const Env& env, const std::string& txn_id) {
  auto g = GetWithRetry(env, Key{std::string(kTransactionsCollection), txn_id});
  if (!g.ok()) return g;
  if (g->has_value()) {
    const json::value* fence = (**g).value.if_contains("fence");
    if (fence == nullptr || !fence->is_bool() || !fence->get_bool()) return g;
  }
  auto folded = FindFolded(env, txn_id);
  if (!folded.ok()) return folded.status();
  if (!folded->has_value()) return g;
  TxnRecord marker;
  marker.state = (**folded).state;
  marker.created_ms = marker.gc_at_ms = marker.priority_ms = (**folded).page_at_ms;
  marker.done = true;
  marker.done_at_ms = (**folded).page_at_ms;
  const Revision rev = g->has_value() ? (**g).revision : 0;
  return std::optional<StoredDocument>(StoredDocument{EncodeRecord(marker), rev});
}

Result<FoldResult> FoldMarkers(const Env& env, const std::string& page_id,
                               const std::vector<MarkerToFold>& markers) {
  FoldResult result;
  if (markers.empty()) return result;
  const Key key = PageKey(page_id);
  Retry retry(env, std::max(env.options.max_attempts, 8));
  // 1. The page, with every entry.
  for (;;) {
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    Page page;
    Revision rev = 0;
    if (g->has_value()) {
      auto decoded = DecodePage(page_id, (**g).value);
      if (!decoded.ok()) return decoded.status();
      page = std::move(decoded).value();
      rev = (**g).revision;
    }
    bool added = false;
    for (const MarkerToFold& m : markers) {
      const std::string_view suffix = std::string_view(m.txn_id).substr(kOutcomePageIdChars);
      if (FindEntry(page.entries, suffix) != std::string::npos) continue;
      page.entries.append(suffix);
      page.entries.push_back(m.committed ? 'c' : 'a');
      page.at_ms = std::max(page.at_ms, m.done_at_ms);
      added = true;
    }
    if (!added) break;  // every entry is there already (an earlier fold, or another folder's)
    const json::object value = EncodePage(page);
    Result<Revision> w = g->has_value() ? env.store.Replace(key, rev, value)
                                        : env.store.Create(key, value);
    if (w.ok()) break;
    // Conflict: another folder (or a purge) moved the page; Unknown: ours may have landed.
    // Either way the page is read again and the entries still missing are added.
    if (w.code() != Code::kConflict && !Transient(w.code())) return w.status();
    if (!retry.Next()) {
      return Status::Unavailable("outcome page " + page_id + " could not be written: " +
                                 w.status().ToString());
    }
  }
  // 2. The tombstone index entries, in one batch: a marker is erased only once its entry is
  // known to be there (created now, or found there: kConflict).
  std::vector<bool> indexed(markers.size(), true);
  {
    std::vector<BatchOp> creates;
    std::vector<json::object> values;
    std::vector<std::size_t> of;
    values.reserve(markers.size());
    for (std::size_t i = 0; i < markers.size(); ++i) {
      if (markers[i].tomb_keys.empty()) continue;
      values.push_back(TombEntryValue(markers[i].tomb_keys));
      of.push_back(i);
    }
    for (std::size_t j = 0; j < of.size(); ++j) {
      const MarkerToFold& m = markers[of[j]];
      creates.push_back(BatchOp::Create(TombEntryForTxn(m.done_at_ms, m.txn_id), values[j]));
    }
    if (!creates.empty()) {
      const std::vector<BatchResult> made = env.store.Batch(creates);
      for (std::size_t j = 0; j < of.size(); ++j) {
        const bool ok = j < made.size() &&
                        (made[j].status.ok() || made[j].status.code() == Code::kConflict);
        if (!ok) indexed[of[j]] = false;
      }
    }
  }
  // 3. The markers, in one batch (independent erases: one store transaction on LMDB, one
  // round trip on Redis): each only if still the marker that was folded.
  std::vector<BatchOp> erases;
  std::vector<std::size_t> erased_of;
  erases.reserve(markers.size());
  for (std::size_t i = 0; i < markers.size(); ++i) {
    if (!indexed[i]) {
      ++result.kept;  // the next pass folds it again (its page entry is there already)
      continue;
    }
    erases.push_back(BatchOp::Erase(Key{std::string(kTransactionsCollection), markers[i].txn_id},
                                    markers[i].revision));
    erased_of.push_back(i);
  }
  const std::vector<BatchResult> erased =
      erases.empty() ? std::vector<BatchResult>{} : env.store.Batch(erases);
  for (std::size_t i = 0; i < erases.size(); ++i) {
    if (i < erased.size() && erased[i].status.ok()) {
      ++result.folded;
    } else {
      // Conflict: erased or changed by someone else; Unknown/Unavailable: the next pass
      // finds it again (or not) and folds it again: its entry is already on the page.
      ++result.kept;
    }
  }
  return result;
}

Result<std::size_t> PurgeOutcomePages(const Env& env, std::int64_t now_ms,
                                      std::int64_t retention_ms, std::size_t budget,
                                      std::uint64_t* pages_read) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t erased = 0;
  // One scan in id order. Within a partition pages sort by time: at the first page that is
  // recent, the rest of the partition is skipped (the scan jumps to the next partition's first
  // page id). Pages are read one at a time after a jump, more while pages keep being due.
  std::string cursor;
  std::size_t limit = 1;
  for (;;) {
    if (budget != 0 && erased >= budget) return erased;
    auto page = env.store.Scan(kOutcomesCollection, cursor, limit);
    if (!page.ok()) return page.status();
    if (pages_read != nullptr) *pages_read += page->documents.size();
    std::string jump;  // set when the rest of a partition is skipped
    for (const auto& [id, doc] : page->documents) {
      cursor = id;
      auto decoded = DecodePage(id, doc.value);
      if (!decoded.ok()) {
        // Not ours to judge: left as it is (FindFolded reports it to whoever reads it).
        env.log.error("outcome page {}: {}", id, decoded.status().message());
        continue;
      }
      if (MillisSince(now_ms, decoded->at_ms) < retention_ms) {
        // Not due. An old page that is not due got a late entry (a transaction settled long
        // after it began): the pages after it are looked at. A recent page ends its partition.
        if (MillisSince(now_ms, PageStartMillis(id)) >= retention_ms) continue;
        const int p = TxnIdPartition(id);
        if (p < 0 || p + 1 >= kTxnIdPartitions) return erased;  // the last partition: done
        jump.assign(1, kHex[p + 1]);  // every page id of the next partition sorts after it
        break;
      }
      Status e = env.store.Erase(PageKey(id), doc.revision);
      if (e.ok()) ++erased;  // conflict: a late fold added to it; it is kept for now
      if (budget != 0 && erased >= budget) return erased;
    }
    if (!jump.empty()) {
      cursor = std::move(jump);
      limit = 1;
      continue;
    }
    if (page->next_cursor.empty()) return erased;
    limit = std::min<std::size_t>(limit * 2, 256);
  }
}

}  // namespace litetx::engine
