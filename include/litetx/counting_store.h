// litetx/counting_store.h — a ForwardingStore that counts operations.
//
// Tests and benchmarks wrap any store in it to count store writes per transaction. Every call
// is counted when it is made, whatever its outcome (a failed CAS is still a round trip). Each
// operation of a Batch is counted under its own kind (a batch of 3 gets adds 3 to `gets`), and
// the batch as one round trip.
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
  // Batch calls with at least one operation.
  std::uint64_t batches = 0;
  // Calls that reach the store: every single call, and every non-empty Batch once, whatever
  // its size. On a networked store each costs one network round trip.
  std::uint64_t round_trips = 0;
  // creates + replaces + erases.
  std::uint64_t writes() const { return creates + replaces + erases; }
};

class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  Result<std::optional<StoredDocument>> Get(const Key& key) override {
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    gets_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Get(key);
  }
  Result<Revision> Create(const Key& key, const boost::json::object& value) override {
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    creates_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Create(key, value);
  }
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override {
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    replaces_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Replace(key, expected, value);
  }
  Status Erase(const Key& key, Revision expected) override {
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    erases_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Erase(key, expected);
  }
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override {
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    scans_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::Scan(collection, cursor, limit);
  }
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override {
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    list_collections_.fetch_add(1, std::memory_order_relaxed);
    return ForwardingStore::ListCollections(cursor, limit);
  }

  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    if (!ops.empty()) {
      round_trips_.fetch_add(1, std::memory_order_relaxed);
      batches_.fetch_add(1, std::memory_order_relaxed);
    }
    for (const BatchOp& op : ops) {
      switch (op.type) {
        case BatchOp::Type::kGet: gets_.fetch_add(1, std::memory_order_relaxed); break;
        case BatchOp::Type::kCreate: creates_.fetch_add(1, std::memory_order_relaxed); break;
        case BatchOp::Type::kReplace: replaces_.fetch_add(1, std::memory_order_relaxed); break;
        case BatchOp::Type::kErase: erases_.fetch_add(1, std::memory_order_relaxed); break;
      }
    }
    return ForwardBatch(ops);
  }

  // A snapshot of the counters (each read atomically; not one atomic snapshot of all).
  StoreCounts counts() const {
    return {gets_.load(),  creates_.load(),          replaces_.load(), erases_.load(),
            scans_.load(), list_collections_.load(), batches_.load(),  round_trips_.load()};
  }
  void Reset() {
    gets_ = 0;
    creates_ = 0;
    replaces_ = 0;
    erases_ = 0;
    scans_ = 0;
    list_collections_ = 0;
    batches_ = 0;
    round_trips_ = 0;
  }

 private:
  std::atomic<std::uint64_t> gets_{0}, creates_{0}, replaces_{0}, erases_{0}, scans_{0},
      list_collections_{0}, batches_{0}, round_trips_{0};
};

}  // namespace litetx
