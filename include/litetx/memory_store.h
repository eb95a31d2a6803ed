// litetx/memory_store.h — an in-memory Store.
//
// For tests, benchmarks and embedding where durability is not needed. Data lives as long as
// the MemoryStore object. Revisions come from one process-wide counter per store, so they are
// never reused for a key, even after an erase.
//
// Thread safety: all methods may be called concurrently. Keys are spread over 16 shards with a
// mutex each; reads copy the document out under the shard's lock.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <mutex>

#include "litetx/store.h"

namespace litetx {

class MemoryStore final : public Store {
 public:
  MemoryStore() = default;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  Result<std::optional<StoredDocument>> Get(const Key& key) override;
  // Create and Replace refuse a value nested deeper than kMaxStoredNestingDepth
  // (litetx/document.h) with kInvalidArgument and write nothing: copying it would recurse
  // that deep. Numbers are kept exactly as given (no text conversion).
  Result<Revision> Create(const Key& key, const boost::json::object& value) override;
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override;
  Status Erase(const Key& key, Revision expected) override;
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override;
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override;

  // Number of documents held (all collections). For tests.
  std::size_t Size() const;

 private:
  struct Shard {
    mutable std::mutex mu;
    std::map<Key, StoredDocument> docs;
  };
  Shard& ShardFor(const Key& key);

  std::array<Shard, 16> shards_;
  std::atomic<Revision> next_revision_{1};
};

}  // namespace litetx
