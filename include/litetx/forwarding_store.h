// litetx/forwarding_store.h — a Store that forwards every call to another Store.
//
// Derive from it to change one operation (a test that fails Replace once, a wrapper that
// counts or logs) and inherit the rest. It does not own the target unless given a shared_ptr
// that it keeps alive.
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

  Store& target() { return *target_; }

 private:
  std::shared_ptr<Store> target_;
};

}  // namespace litetx
