#include "litetx/memory_store.h"

#include <algorithm>
#include <functional>
#include <string>

#include "engine/json_text.h"
#include "litetx/document.h"

namespace litetx {

namespace {

// kInvalidArgument if `value` nests deeper than kMaxStoredNestingDepth: copying it in and out
// would recurse that deep. Not recursive itself.
Status CheckDepth(const char* op, const boost::json::object& value) {
  if (engine::CheckJson(value, kMaxStoredNestingDepth, /*finite_only=*/false) ==
      engine::JsonProblem::kNone) {
    return Status::Ok();
  }
  return Status::InvalidArgument(std::string("memory store: ") + op +
                                 ": value nests objects and arrays deeper than " +
                                 std::to_string(kMaxStoredNestingDepth) + " levels");
}

}  // namespace

MemoryStore::Shard& MemoryStore::ShardFor(const Key& key) {
  std::size_t h = std::hash<std::string>{}(key.collection) * 31 + std::hash<std::string>{}(key.id);
  return shards_[h % shards_.size()];
}

Result<std::optional<StoredDocument>> MemoryStore::Get(const Key& key) {
  Shard& s = ShardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.docs.find(key);
  if (it == s.docs.end()) return std::optional<StoredDocument>{};
  return std::optional<StoredDocument>{it->second};
}

Result<Revision> MemoryStore::Create(const Key& key, const boost::json::object& value) {
  if (Status st = CheckDepth("create", value); !st.ok()) return st;
  Shard& s = ShardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  auto [it, inserted] = s.docs.try_emplace(key);
  if (!inserted) return Status::Conflict("create: the key exists");
  it->second.value = value;
  it->second.revision = next_revision_.fetch_add(1);
  return it->second.revision;
}

Result<Revision> MemoryStore::Replace(const Key& key, Revision expected,
                                      const boost::json::object& value) {
  if (Status st = CheckDepth("replace", value); !st.ok()) return st;
  Shard& s = ShardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.docs.find(key);
  if (it == s.docs.end()) return Status::Conflict("replace: the key is absent");
  if (it->second.revision != expected) return Status::Conflict("replace: revision changed");
  it->second.value = value;
  it->second.revision = next_revision_.fetch_add(1);
  return it->second.revision;
}

Status MemoryStore::Erase(const Key& key, Revision expected) {
  Shard& s = ShardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.docs.find(key);
  if (it == s.docs.end()) return Status::Conflict("erase: the key is absent");
  if (it->second.revision != expected) return Status::Conflict("erase: revision changed");
  s.docs.erase(it);
  return Status::Ok();
}

Result<ScanPage> MemoryStore::Scan(std::string_view collection, std::string_view cursor,
                                   std::size_t limit) {
  assert(limit > 0);
  // Each shard contributes up to limit + 1 entries, so "more remain" is seen exactly.
  std::vector<std::pair<std::string, StoredDocument>> all;
  Key from{std::string(collection), std::string(cursor)};
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = cursor.empty() ? s.docs.lower_bound(from) : s.docs.upper_bound(from);
    for (std::size_t n = 0; it != s.docs.end() && it->first.collection == collection && n <= limit;
         ++it, ++n) {
      all.emplace_back(it->first.id, it->second);
    }
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ScanPage page;
  if (all.size() > limit) {
    all.resize(limit);
    page.next_cursor = all.back().first;
  }
  page.documents = std::move(all);
  return page;
}

Result<CollectionPage> MemoryStore::ListCollections(std::string_view cursor, std::size_t limit) {
  if (limit == 0) {
    return Status::InvalidArgument("memory store: list collections: limit must be positive");
  }
  // Each shard contributes its first limit + 1 names after the cursor, so "more remain" is
  // seen exactly. Within a shard, keys are ordered by collection: after one name, jump to the
  // first key of the next collection.
  std::vector<std::string> all;
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.docs.upper_bound(Key{std::string(cursor), std::string()});
    std::size_t n = 0;
    while (it != s.docs.end() && n <= limit) {
      const std::string& name = it->first.collection;
      if (!name.empty() && name > cursor) {
        all.push_back(name);
        ++n;
      }
      // The first key of a greater collection: {name + '\0', ""} is the least such key.
      it = s.docs.lower_bound(Key{name + '\0', std::string()});
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  CollectionPage page;
  if (all.size() > limit) {
    all.resize(limit);
    page.next_cursor = all.back();
  }
  page.names = std::move(all);
  return page;
}

std::size_t MemoryStore::Size() const {
  std::size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.docs.size();
  }
  return n;
}

}  // namespace litetx
