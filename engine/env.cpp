#include "engine/env.h"

namespace litetx::engine {

Result<std::optional<StoredDocument>> GetWithRetry(const Env& env, const Key& key) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto r = env.store.Get(key);
    if (r.ok() || r.code() != Code::kUnavailable || !retry.Next()) return r;
  }
}

}  // namespace litetx::engine
