#include "engine/doc_cache.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

namespace litetx::engine {

DocCache::DocCache(std::size_t max_bytes)
    : shard_budget_(std::max<std::size_t>(1, max_bytes / kShards)), shards_(kShards) {}

std::size_t DocCache::KeyHash::operator()(const Key& k) const noexcept {
  const std::size_t h = std::hash<std::string>{}(k.collection);
  return h ^ (std::hash<std::string>{}(k.id) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

DocCache::Shard& DocCache::ShardOf(const Key& key) {
  return shards_[KeyHash{}(key) % kShards];
}

void DocCache::MakeRoom(Shard& s, std::size_t more, std::vector<StoredDocument>& dropped) {
  while (s.bytes + more > shard_budget_ && !s.lru.empty()) {
    auto old = s.map.find(s.lru.back());
    s.bytes -= old->second.bytes;
    if (old->second.doc.has_value()) dropped.push_back(std::move(*old->second.doc));
    s.map.erase(old);
    s.lru.pop_back();
  }
}

DocCache::Taken DocCache::Take(const Key& key) {
  Shard& s = ShardOf(key);
  Taken out;
  std::vector<StoredDocument> dropped;  // freed after the lock
  std::lock_guard<std::mutex> lock(s.mu);
  out.ticket = ++s.next_ticket;
  auto it = s.map.find(key);
  if (it == s.map.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t key_bytes = KeyBytes(key);
    MakeRoom(s, key_bytes, dropped);
    s.lru.push_front(key);
    Entry& e = s.map[key];
    e.ticket = out.ticket;
    e.bytes = key_bytes;
    e.pos = s.lru.begin();
    s.bytes += key_bytes;
    return out;
  }
  Entry& e = it->second;
  if (e.doc.has_value()) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    out.doc = std::move(e.doc);
    e.doc.reset();
    const std::size_t key_bytes = KeyBytes(key);
    s.bytes -= e.bytes - key_bytes;
    e.bytes = key_bytes;
  } else {
    misses_.fetch_add(1, std::memory_order_relaxed);
  }
  e.ticket = out.ticket;
  s.lru.splice(s.lru.begin(), s.lru, e.pos);
  return out;
}

void DocCache::Put(const Key& key, boost::json::object value, Revision revision,
                   std::size_t bytes, std::uint64_t ticket) {
  Shard& s = ShardOf(key);
  std::vector<StoredDocument> dropped;  // freed after the lock
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key);
  // No entry: the key's tickets were dropped for room, so which Take is the latest is unknown.
  if (it == s.map.end() || it->second.ticket > ticket) return;
  Entry& e = it->second;
  bytes += KeyBytes(key);
  if (bytes > shard_budget_) return;
  if (e.doc.has_value()) dropped.push_back(std::move(*e.doc));
  e.doc.emplace(StoredDocument{std::move(value), revision});
  e.ticket = ticket;
  s.bytes = s.bytes - e.bytes + bytes;
  e.bytes = bytes;
  s.lru.splice(s.lru.begin(), s.lru, e.pos);
  // The entry is the most recent and fits the budget alone: it is not dropped itself.
  MakeRoom(s, 0, dropped);
}

std::size_t DocCache::size() const {
  std::size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [key, e] : s.map) n += e.doc.has_value() ? 1 : 0;
  }
  return n;
}

}  // namespace litetx::engine
