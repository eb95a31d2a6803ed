#include "engine/locks.h"

#include <algorithm>

#include "engine/meta.h"

namespace litetx::engine {

namespace {

// Drops expired entries and those of `owner`.
void Prune(Meta& meta, std::string_view owner, std::int64_t now) {
  std::erase_if(meta.locks, [&](const LockEntry& e) {
    return e.owner == owner || e.expires_ms <= now;
  });
}

}  // namespace

// Bound on compare-and-swap races lost in a row (each is followed by a fresh look).
constexpr int kMaxRaces = 64;

Status AcquireLock(const Env& env, const Key& key, const Waiter& owner, bool write,
                   std::int64_t lease_ms, bool* maybe_taken) {
  Retry retry(env, env.options.max_attempts);
  for (int races = 0;; ++races) {
    if (races > kMaxRaces) return Status::Busy("lock of " + Where(key) + ": it keeps changing");
    auto cur = AwaitFree(env, key, owner, write ? Need::kWriteLock : Need::kReadLock);
    if (!cur.ok()) return cur.status();
    if (!cur->has_value()) return Status::NotFound("lock of " + Where(key) + ": no such document");
    auto meta = DecodeMeta((**cur).value);
    if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
    if (meta->gone) return Status::NotFound("lock of " + Where(key) + ": no such document");
    if (meta->deleted) return Status::Deleted("lock of " + Where(key) + ": the document is deleted");
    const std::int64_t now = env.clock.NowMillis();
    for (const LockEntry& e : meta->locks) {
      if (e.owner == owner.id && e.expires_ms > now && (e.write || !write)) return Status::Ok();
    }
    Prune(*meta, owner.id, now);
    LockEntry mine{std::string(owner.id), write, now + lease_ms, owner.priority_ms};
    meta->locks.push_back(mine);
    boost::json::object value = (**cur).value;
    EncodeMeta(value, *meta);
    auto r = env.store.Replace(key, (**cur).revision, value);
    if (r.ok() || r.code() == Code::kConflict) {
      if (r.ok()) return Status::Ok();
      continue;  // changed meanwhile: look again
    }
    if (r.code() == Code::kUnknown && maybe_taken != nullptr) *maybe_taken = true;
    if (Transient(r.code()) && retry.Next()) continue;  // a lost reply is checked by the re-read
    return Status::Unavailable("lock of " + Where(key) + ": " + r.status().ToString());
  }
}

Status RenewLock(const Env& env, const Key& key, std::string_view owner, std::int64_t lease_ms) {
  Retry retry(env, env.options.max_attempts);
  for (int races = 0;; ++races) {
    if (races > kMaxRaces) return Status::Unavailable("renewal of " + Where(key) + ": it keeps changing");
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    if (!g->has_value()) return Status::Ok();
    auto meta = DecodeMeta((**g).value);
    if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
    const std::int64_t now = env.clock.NowMillis();
    auto mine = std::find_if(meta->locks.begin(), meta->locks.end(), [&](const LockEntry& e) {
      return e.owner == owner && e.expires_ms > now;
    });
    if (mine == meta->locks.end()) return Status::Ok();
    if (mine->expires_ms - now > lease_ms * 3 / 4) return Status::Ok();  // not due yet
    mine->expires_ms = now + lease_ms;
    boost::json::object value = (**g).value;
    EncodeMeta(value, *meta);
    auto r = env.store.Replace(key, (**g).revision, value);
    if (r.ok()) return Status::Ok();
    if (r.code() == Code::kConflict) continue;  // look again
    if (Transient(r.code()) && retry.Next()) continue;
    return Status::Unavailable("renewal of " + Where(key) + ": " + r.status().ToString());
  }
}

Status ReleaseLock(const Env& env, const Key& key, std::string_view owner) {
  Retry retry(env, env.options.max_attempts);
  for (int races = 0;; ++races) {
    if (races > kMaxRaces) return Status::Unavailable("unlock of " + Where(key) + ": it keeps changing");
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    if (!g->has_value()) return Status::Ok();
    auto meta = DecodeMeta((**g).value);
    if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
    bool mine = std::any_of(meta->locks.begin(), meta->locks.end(),
                            [&](const LockEntry& e) { return e.owner == owner; });
    if (!mine) return Status::Ok();
    Prune(*meta, owner, env.clock.NowMillis());
    boost::json::object value = (**g).value;
    EncodeMeta(value, *meta);
    auto r = env.store.Replace(key, (**g).revision, value);
    if (r.ok() || r.code() == Code::kConflict) continue;  // look again
    if (Transient(r.code()) && retry.Next()) continue;
    return Status::Unavailable("unlock of " + Where(key) + ": " + r.status().ToString());
  }
}

}  // namespace litetx::engine
