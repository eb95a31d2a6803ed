// engine/tombstones.cpp — the tombstone index (engine/tombstones.h).
#include "engine/tombstones.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <boost/json/array.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include "engine/meta.h"
#include "litetx/document.h"

namespace litetx::engine {

namespace json = boost::json;

namespace {

constexpr std::size_t kTimeDigits = 12;
constexpr char kHex[] = "0123456789abcdef";

std::string TimePrefix(std::int64_t ms) {
  constexpr std::uint64_t kMax = (std::uint64_t{1} << (4 * kTimeDigits)) - 1;
  std::uint64_t v = ms < 0 ? 0 : std::min<std::uint64_t>(static_cast<std::uint64_t>(ms), kMax);
  std::string s(kTimeDigits, '0');
  for (std::size_t i = kTimeDigits; i-- > 0;) {
    s[i] = kHex[v & 0xf];
    v >>= 4;
  }
  return s;
}

// FNV-1a, 64 bits, over the collection, a NUL and the id.
std::uint64_t KeyHash(const Key& key) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (char c : key.collection) mix(static_cast<unsigned char>(c));
  mix(0);
  for (char c : key.id) mix(static_cast<unsigned char>(c));
  return h;
}

Key IndexKey(std::string id) { return Key{std::string(kTombstoneIndexCollection), std::move(id)}; }

// The keys an entry names; kCorruption if it is not well formed.
Result<std::vector<Key>> DecodeEntry(const json::object& stored) {
  const json::value* k = stored.if_contains("k");
  if (k == nullptr || !k->is_array()) return Status::Corruption("has no key list");
  std::vector<Key> keys;
  keys.reserve(k->get_array().size());
  for (const json::value& e : k->get_array()) {
    const json::array* pair = e.if_array();
    if (pair == nullptr || pair->size() != 2 || !(*pair)[0].is_string() ||
        !(*pair)[1].is_string()) {
      return Status::Corruption("names a malformed key");
    }
    keys.push_back(
        Key{std::string((*pair)[0].get_string()), std::string((*pair)[1].get_string())});
  }
  // A key named twice is looked at once (a batch never names one key twice).
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.collection, a.id) < std::tie(b.collection, b.id);
  });
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const Key& a, const Key& b) {
                           return a.collection == b.collection && a.id == b.id;
                         }),
             keys.end());
  return keys;
}

// Creates an index entry; one already there is success.
Status CreateEntry(const Env& env, const Key& entry, const json::object& value) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto c = env.store.Create(entry, value);
    // kConflict: the key exists (the same entry, written before); kUnknown: resent, and if the
    // first landed the second finds it.
    if (c.ok() || c.code() == Code::kConflict) return Status::Ok();
    if (Transient(c.code()) && retry.Next()) continue;
    return Status::Unavailable("writing tombstone index entry " + entry.id + ": " +
                               c.status().ToString());
  }
}

}  // namespace

Key TombEntryForTxn(std::int64_t done_at_ms, std::string_view txn_id) {
  std::string id = TimePrefix(done_at_ms);
  id.append(txn_id);
  return IndexKey(std::move(id));
}

Key TombEntryForDoc(std::int64_t at_ms, const Key& key) {
  std::string id = TimePrefix(at_ms);
  id.push_back('~');
  std::uint64_t h = KeyHash(key);
  std::string hex(16, '0');
  for (std::size_t i = 16; i-- > 0;) {
    hex[i] = kHex[h & 0xf];
    h >>= 4;
  }
  id += hex;
  return IndexKey(std::move(id));
}

json::object TombEntryValue(const std::vector<Key>& keys) {
  json::array k;
  k.reserve(keys.size());
  for (const Key& key : keys) {
    k.emplace_back(json::array{json::string(key.collection), json::string(key.id)});
  }
  json::object o;
  o.emplace("k", std::move(k));
  return o;
}

std::optional<std::int64_t> TombEntryTime(std::string_view entry_id) {
  if (entry_id.size() < kTimeDigits) return std::nullopt;
  std::int64_t v = 0;
  for (std::size_t i = 0; i < kTimeDigits; ++i) {
    const char c = entry_id[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = v * 16 + d;
  }
  return v;
}

Status IndexMarkerTombstones(const Env& env, std::string_view txn_id, const TxnRecord& marker) {
  if (marker.tomb_keys.empty()) return Status::Ok();
  return CreateEntry(env, TombEntryForTxn(marker.done_at_ms, txn_id),
                     TombEntryValue(marker.tomb_keys));
}

Status IndexDocTombstone(const Env& env, const Key& key, const json::object& image) {
  auto meta = DecodeMeta(image);
  if (!meta.ok() || meta->live() || meta->at_ms == 0) return Status::Ok();
  return CreateEntry(env, TombEntryForDoc(meta->at_ms, key), TombEntryValue({key}));
}

void PurgeTombstoneIndex(const Env& env, std::int64_t retention_ms, std::size_t budget,
                         std::size_t scan_batch, const std::atomic<bool>* stopping,
                         const std::string& who, std::string* cursor, TombPurge* out) {
  auto fail = [&](const Status& s) {
    ++out->failed;
    if (out->first.ok()) out->first = s;
  };
  if (retention_ms <= 0) return;  // tombstones are kept for ever: so are the entries
  const std::int64_t now = env.clock.NowMillis();
  // Entries are listed one at first (usually the first is not due: nothing to do), then twice
  // as many per Scan while they keep being due, up to scan_batch: a Scan returns whole
  // documents, so listing far past the first entry not due would read for nothing.
  const std::size_t most = std::max<std::size_t>(1, scan_batch);
  std::size_t limit = 1;
  // Stopped by the budget: the next purge goes on after the last entry dealt with. Anything
  // else (the end of what is due, a failure, a stop): the next one starts from the start.
  std::string last;
  auto stop_at_budget = [&] {
    out->complete = false;
    if (!last.empty()) *cursor = last;
  };
  const std::string from = *cursor;
  cursor->clear();
  std::string scan_from = from;
  for (;;) {
    if (stopping != nullptr && stopping->load()) return;
    if (budget != 0 && out->read >= budget) return stop_at_budget();
    auto page = env.store.Scan(kTombstoneIndexCollection, scan_from, limit);
    if (!page.ok()) {
      env.log.warn("gc {}: cannot list the tombstone index: {}", who, page.status().ToString());
      fail(page.status());
      return;
    }
    for (const auto& [entry_id, entry] : page->documents) {
      if (budget != 0 && out->read >= budget) return stop_at_budget();
      const Key entry_key = IndexKey(entry_id);
      auto at = TombEntryTime(entry_id);
      if (!at) {
        ++out->read;
        last = entry_id;
        env.log.error("gc {}: tombstone index entry {} skipped: its id has no time", who, entry_id);
        fail(Status::Corruption("tombstone index entry " + entry_id + ": its id has no time"));
        continue;
      }
      // Entries sort by time: the first one not due ends the purge.
      if (MillisSince(now, *at) < retention_ms) {
        ++out->read;
        return;
      }
      auto keys = DecodeEntry(entry.value);
      if (!keys.ok()) {
        ++out->read;
        last = entry_id;
        env.log.error("gc {}: tombstone index entry {} skipped: {}", who, entry_id,
                      keys.status().message());
        fail(Status::Corruption("tombstone index entry " + entry_id + ": " +
                                std::string(keys.status().message())));
        continue;
      }
      // An entry is dealt with whole: one that would overrun the budget waits for the next
      // purge, unless it is this purge's first.
      if (budget != 0 && out->read > 0 && out->read + 1 + keys->size() > budget) {
        return stop_at_budget();
      }
      ++out->read;
      last = entry_id;
      bool keep = false;  // something of the entry is left for the next purge
      if (!keys->empty()) {
        std::vector<BatchOp> gets;
        gets.reserve(keys->size());
        for (const Key& k : *keys) gets.push_back(BatchOp::Get(k));
        std::vector<BatchResult> got = env.store.Batch(gets);
        out->read += keys->size();
        std::vector<BatchOp> erases;
        for (std::size_t i = 0; i < keys->size(); ++i) {
          const Key& k = (*keys)[i];
          if (i >= got.size() || !got[i].status.ok()) {
            fail(i < got.size() ? got[i].status : Status::Unavailable("short batch"));
            keep = true;
            continue;
          }
          if (!got[i].document) continue;  // absent: purged already, or never written
          const StoredDocument& doc = *got[i].document;
          auto meta = DecodeMeta(doc.value);
          if (!meta.ok()) {
            // The sweep reports it too; the index has nothing to purge there.
            env.log.error("gc {}: {}: {}", who, Where(k), meta.status().message());
            fail(Status::Corruption(Where(k) + ": " + std::string(meta.status().message())));
            continue;
          }
          // Live, held by a transaction (which indexes whatever it leaves), or of unknown age:
          // nothing for the index to do (the sweep's rules are the same).
          if (!meta->txn.empty() || meta->live() || meta->at_ms == 0) continue;
          if (MillisSince(now, meta->at_ms) < retention_ms) {
            // Made again after this entry's time: give it an entry at its own time (never this
            // very entry: then it is kept).
            const Key own = TombEntryForDoc(meta->at_ms, k);
            if (own.id == entry_id) {
              keep = true;
              continue;
            }
            Status c = CreateEntry(env, own, TombEntryValue({k}));
            if (!c.ok()) {
              fail(c);
              keep = true;
            }
            continue;
          }
          ++out->due;
          erases.push_back(BatchOp::Erase(k, doc.revision));
        }
        if (!erases.empty()) {
          std::vector<BatchResult> done = env.store.Batch(erases);
          for (std::size_t j = 0; j < erases.size(); ++j) {
            if (j < done.size() && done[j].status.ok()) {
              ++out->done;
              continue;
            }
            // A conflict: changed since read (written, or purged by another collector); any
            // other error: not known to be erased. Either way the next purge looks again.
            keep = true;
            Status s = j < done.size() ? done[j].status : Status::Unavailable("short batch");
            if (s.code() != Code::kConflict) fail(s);
          }
        }
      }
      if (keep) continue;
      Status e = env.store.Erase(entry_key, entry.revision);
      if (e.ok()) {
        ++out->entries;
      } else if (e.code() != Code::kConflict) {  // conflict: another purger erased it
        fail(e);
      }
    }
    scan_from = std::move(page->next_cursor);
    if (scan_from.empty()) return;
    limit = std::min(most, limit * 2);
  }
}

}  // namespace litetx::engine
