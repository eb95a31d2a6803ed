#include "engine/env.h"

#include "engine/meta.h"

namespace litetx::engine {

Result<std::optional<StoredDocument>> GetWithRetry(const Env& env, const Key& key) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto r = env.store.Get(key);
    if (r.ok() || r.code() != Code::kUnavailable || !retry.Next()) return r;
  }
}

Result<std::optional<StoredDocument>> ReadSettled(const Env& env, const Key& key,
                                                  std::string_view self) {
  Backoff backoff(env.clock, env.options.busy_backoff);
  for (;;) {
    auto r = GetWithRetry(env, key);
    if (!r.ok() || !r->has_value()) return r;
    auto meta = DecodeMeta((*r)->value);
    if (!meta.ok()) {
      return Status::Corruption(key.collection + "/" + key.id + ": " + meta.status().message());
    }
    if (meta->txn.empty() || meta->txn == self) return r;
    if (backoff.ElapsedMillis() >= env.options.busy_timeout.count()) {
      return Status::Busy(key.collection + "/" + key.id + " is held by transaction " + meta->txn);
    }
    env.log.debug("{}/{} is held by {}; waiting", key.collection, key.id, meta->txn);
    backoff.Wait();
  }
}

}  // namespace litetx::engine
