// litetx/counting_store.h — a ForwardingStore that counts operations.
//
// Tests and benchmarks wrap any store in it to count store writes per transaction. Every call
// is counted when it is made, whatever its outcome (a failed CAS is still a round trip).
//
// Thread safety: counters are atomics; safe from many threads.
#pragma once

#include <atomic>
#include <cstdint>

#include "litetx/forwarding_store.h"

namespace litetx {

struct StoreCounts {
  std::uint64_t gets = 0;
  std::uint64_t creates = 0;
  std::uint64_t replaces = 0;
  std::uint64_t erases = 0;
  std::uint64_t scans = 0;
  std::uint64_t list_collections = 0;
  // creates + replaces + erases.
  std::uint64_t writes() const { return creates + replaces + erases; }
};

class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  Result<std::optional<StoredDocument>> Get(const Key& key) override {
    gets_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Get(key);
  }
  Result<Revision> Create(const Key& key, const boost::json::object& value) override {
    creates_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Create(key, value);
  }
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override {
    replaces_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Replace(key, expected, value);
  }
  Status Erase(const Key& key, Revision expected) override {
    erases_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Erase(key, expected);
  }
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override {
    scans_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Scan(collection, cursor, limit);
  }
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override {
    list_collections_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::ListCollections(cursor, limit);
  }

  // A snapshot of the counters (each read atomically; not one atomic snapshot of all).
  StoreCounts counts() const {
    return {gets_.load(),    creates_.load(), replaces_.load(),
            erases_.load(),  scans_.load(),   list_collections_.load()};
  }
  void Reset() {
    gets_ = 0;
    creates_ = 0;
    replaces_ = 0;
    erases_ = 0;
    scans_ = 0;
    list_collections_ = 0;
  }

 private:
  std::atomic<std::uint64_t> gets_{0}, creates_{0}, replaces_{0}, erases_{0}, scans_{0},
      list_collections_{0};
};

}  // namespace litetx
