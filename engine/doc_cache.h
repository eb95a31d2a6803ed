// engine/doc_cache.h — documents as a Database last wrote them (Options::written_cache_bytes).
//
// Each entry is a document image that this Database's own write left in the store, free of
// any transaction's hold, with the revision that write returned. Store revisions are never
// reused for a key (litetx/store.h), so a compare-and-swap at that revision lands only if the
// document is still exactly that image: a write evaluated on an entry is as good as one
// evaluated on a fresh read once it has landed, and fails harmlessly (kConflict, nothing
// written) otherwise. Anything else decided from an entry (a failed precondition, a version
// check) is not trusted: the coordinator reads the document and decides again.
//
// Take moves an entry out, so two threads never evaluate on one image, and hands out a ticket;
// Put keeps the image of a write that landed, under the ticket its writer took before. A Put
// whose ticket is older than the key's latest Take is dropped: someone began working on the
// document after that writer did, so the image may already have been overwritten (for example
// a finisher's image arriving after the next transaction read and wrote the document). The
// least recently used keys are dropped beyond the byte budget.
//
// Ownership: owned by the Database. Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/store.h"

namespace litetx::engine {

class DocCache {
 public:
  // max_bytes: the budget, counted in JSON text bytes of the images (REQUIRES: > 0).
  explicit DocCache(std::size_t max_bytes);

  struct Taken {
    std::optional<StoredDocument> doc;  // the image of the key, taken out of the cache, or none
    std::uint64_t ticket = 0;           // pass to Put with the image the write leaves
  };
  // Takes the image of `key` out of the cache, if one is kept, and a ticket (always).
  Taken Take(const Key& key);
  // Keeps `value` at `revision` as the image of `key` (`bytes`: its size), unless a Take of the
  // key came after the one that gave `ticket`, or the image is larger than a shard's share of
  // the budget.
  void Put(const Key& key, boost::json::object value, Revision revision, std::size_t bytes,
           std::uint64_t ticket);

  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  std::size_t size() const;  // images kept

 private:
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };
  using Lru = std::list<Key>;  // most recently used first
  // A key's latest ticket, with its image if one is kept. `bytes` counts the entry as a whole:
  // KeyBytes(key), plus the image's size when one is kept.
  struct Entry {
    std::optional<StoredDocument> doc;
    std::uint64_t ticket = 0;
    std::size_t bytes = 0;
    Lru::iterator pos;
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<Key, Entry, KeyHash> map;
    Lru lru;
    std::size_t bytes = 0;
    std::uint64_t next_ticket = 0;
  };
  // What an entry costs besides its image: the key, held twice (map and list), and the nodes.
  static std::size_t KeyBytes(const Key& key) {
    return 160 + 2 * (key.collection.size() + key.id.size());
  }
  // Drops least recently used keys until `more` bytes fit. REQUIRES: s.mu held.
  void MakeRoom(Shard& s, std::size_t more, std::vector<StoredDocument>& dropped);
  static constexpr std::size_t kShards = 16;
  Shard& ShardOf(const Key& key);

  const std::size_t shard_budget_;
  std::vector<Shard> shards_;
  std::atomic<std::uint64_t> hits_{0};
  std::atomic<std::uint64_t> misses_{0};
};

}  // namespace litetx::engine
