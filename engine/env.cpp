#include "engine/env.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace litetx::engine {

std::shared_ptr<spdlog::logger> DefaultLogger() {
  // stderr, not spdlog's default logger: that one writes to stdout (where a program's own
  // output goes) at info level, and changing its level would change the host's logging.
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "litetx", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return logger;
}

Result<std::optional<StoredDocument>> GetWithRetry(const Env& env, const Key& key) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto r = env.store.Get(key);
    if (r.ok() || r.code() != Code::kUnavailable || !retry.Next()) return r;
  }
}

}  // namespace litetx::engine
