// examples/guide_store.h — the custom Store of docs/guide.md ("Writing a custom store"): a
// std::map behind one mutex. tests/docs/guide_store_contract_test.cpp runs the Store contract
// suite on it, and examples/guide_snippets.cpp runs transactions and a collector on it.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json.hpp>

#include "litetx/document.h"

#include "litetx/store.h"

namespace guide {

// True if `doc` holds objects or arrays nested deeper than `limit` levels (the document itself
// is level 1). Counted with an explicit stack: a hostile value must not exhaust the C++ stack.
inline bool NestsDeeperThan(const boost::json::object& doc, std::size_t limit) {
  std::vector<std::pair<const boost::json::value*, std::size_t>> todo;
  for (const auto& field : doc) todo.emplace_back(&field.value(), 2);
  while (!todo.empty()) {
    auto [v, level] = todo.back();
    todo.pop_back();
    if (!v->is_object() && !v->is_array()) continue;
    if (level > limit) return true;
    if (v->is_object()) {
      for (const auto& field : v->get_object()) todo.emplace_back(&field.value(), level + 1);
    } else {
      for (const auto& item : v->get_array()) todo.emplace_back(&item, level + 1);
    }
  }
  return false;
}

class MapStore final : public litetx::Store {
 public:
  litetx::Result<std::optional<litetx::StoredDocument>> Get(const litetx::Key& key) override {
    std::lock_guard lock(mu_);
    auto it = docs_.find(key);
    if (it == docs_.end()) return std::optional<litetx::StoredDocument>();
    return std::optional<litetx::StoredDocument>(it->second);
  }

  litetx::Result<litetx::Revision> Create(const litetx::Key& key,
                                          const boost::json::object& value) override {
    if (NestsDeeperThan(value, litetx::kMaxStoredNestingDepth)) {
      return litetx::Status::InvalidArgument("value nests deeper than kMaxStoredNestingDepth");
    }
    std::lock_guard lock(mu_);
    if (docs_.contains(key)) return litetx::Status::Conflict("exists");
    litetx::Revision rev = ++last_revision_;  // never reused, not even after an erase
    docs_[key] = litetx::StoredDocument{value, rev};
    return rev;
  }

  litetx::Result<litetx::Revision> Replace(const litetx::Key& key, litetx::Revision expected,
                                           const boost::json::object& value) override {
    if (NestsDeeperThan(value, litetx::kMaxStoredNestingDepth)) {
      return litetx::Status::InvalidArgument("value nests deeper than kMaxStoredNestingDepth");
    }
    std::lock_guard lock(mu_);
    auto it = docs_.find(key);
    if (it == docs_.end() || it->second.revision != expected) {
      return litetx::Status::Conflict("absent or another revision");
    }
    it->second = litetx::StoredDocument{value, ++last_revision_};
    return it->second.revision;
  }

  litetx::Status Erase(const litetx::Key& key, litetx::Revision expected) override {
    std::lock_guard lock(mu_);
    auto it = docs_.find(key);
    if (it == docs_.end() || it->second.revision != expected) {
      return litetx::Status::Conflict("absent or another revision");
    }
    docs_.erase(it);
    return litetx::Status::Ok();
  }

  litetx::Result<litetx::ScanPage> Scan(std::string_view collection, std::string_view cursor,
                                        std::size_t limit) override {
    std::lock_guard lock(mu_);
    litetx::ScanPage page;
    // Keys sort by (collection, id), so one collection is a contiguous range.
    auto it = docs_.upper_bound(litetx::Key{std::string(collection), std::string(cursor)});
    for (; it != docs_.end() && it->first.collection == collection; ++it) {
      if (page.documents.size() == limit) {
        page.next_cursor = page.documents.back().first;
        break;
      }
      page.documents.emplace_back(it->first.id, it->second);
    }
    return page;
  }

  litetx::Result<litetx::CollectionPage> ListCollections(std::string_view cursor,
                                                         std::size_t limit) override {
    if (limit == 0) return litetx::Status::InvalidArgument("limit must be positive");
    std::lock_guard lock(mu_);
    litetx::CollectionPage page;
    // From one collection, jump to the first key of the next: {name + '\0', ""} is the least
    // key of any greater collection.
    auto it = docs_.upper_bound(litetx::Key{std::string(cursor), std::string()});
    while (it != docs_.end()) {
      const std::string name = it->first.collection;
      if (!name.empty() && name > cursor) {
        if (page.names.size() == limit) {
          page.next_cursor = page.names.back();
          break;
        }
        page.names.push_back(name);
      }
      it = docs_.lower_bound(litetx::Key{name + '\0', std::string()});
    }
    return page;
  }

 private:
  std::mutex mu_;
  std::map<litetx::Key, litetx::StoredDocument> docs_;
  litetx::Revision last_revision_ = 0;
};

}  // namespace guide
