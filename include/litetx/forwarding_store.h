// litetx/forwarding_store.h — a Store that forwards every call to another Store.
//
// Derive from it to change one operation (a test that fails Replace once, a wrapper that
// counts or logs) and inherit the rest; Batch goes through the single calls (see below). It
// does not own the target unless given a shared_ptr that it keeps alive.
//
// Thread safety: as thread-safe as the target and the overriding code.
#pragma once

#include <memory>
#include <utility>

#include "litetx/store.h"

namespace litetx {

class ForwardingStore : public Store {
 public:
  // REQUIRES: target != nullptr.
  explicit ForwardingStore(std::shared_ptr<Store> target) : target_(std::move(target)) {}

  Result<std::optional<StoredDocument>> Get(const Key& key) override { return target_->Get(key); }
  Result<Revision> Create(const Key& key, const boost::json::object& value) override {
    return target_->Create(key, value);
  }
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override {
    return target_->Replace(key, expected, value);
  }
  Status Erase(const Key& key, Revision expected) override { return target_->Erase(key, expected); }
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override {
    return target_->Scan(collection, cursor, limit);
  }
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override {
    return target_->ListCollections(cursor, limit);
  }

  // Runs the operations one by one through this object's single calls (Store::Batch), so that
  // a subclass overriding Get, Create, Replace or Erase sees every operation of a batch too.
  // A subclass that changes no single call can forward whole batches with ForwardBatch.
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override {
    return Store::Batch(ops);
  }

  Store& target() { return *target_; }

 protected:
  // The whole batch to the target, in one call (keeping the target's round-trip savings).
  std::vector<BatchResult> ForwardBatch(std::span<const BatchOp> ops) {
    return target_->Batch(ops);
  }

 private:
  std::shared_ptr<Store> target_;
};

}  // namespace litetx
