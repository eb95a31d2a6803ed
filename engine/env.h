// engine/env.h — what every engine component needs: the store, the options, time, the log.
// A plain bundle of references; the Database owns what they refer to.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "engine/backoff.h"
#include "litetx/options.h"
#include "litetx/store.h"

namespace litetx::engine {

class LeaseKeeper;
class Finisher;
class DocCache;

struct Env {
  Store& store;
  const Options& options;  // clock and logger are non-null
  Clock& clock;
  spdlog::logger& log;
  LeaseKeeper* leases = nullptr;  // renews leases in the background; null: none (collectors)
  Finisher* finisher = nullptr;   // finishes committed transactions in the background; null:
                                  // the committing thread finishes them before returning
  DocCache* cache = nullptr;      // documents as this Database last wrote them; null: none
};

// The logger of a Database or Collector whose options name none: one per process, named
// "litetx", writing to stderr at warn level. It is not registered with spdlog, and spdlog's
// global state (default logger, levels) is left as it is.
std::shared_ptr<spdlog::logger> DefaultLogger();

// Bounded retrying: Next() waits with backoff and returns true while attempts (0: unbounded)
// and time (0: unbounded) remain.
class Retry {
 public:
  Retry(const Env& env, int max_attempts, std::chrono::milliseconds timeout = {})
      : backoff_(env.clock, env.options.retry_backoff),
        max_attempts_(max_attempts),
        timeout_(timeout) {}
  bool Next() {
    ++attempts_;
    if (max_attempts_ > 0 && attempts_ >= max_attempts_) return false;
    if (timeout_.count() > 0 && backoff_.ElapsedMillis() >= timeout_.count()) return false;
    backoff_.Wait();
    return true;
  }

 private:
  Backoff backoff_;
  int max_attempts_;
  std::chrono::milliseconds timeout_;
  int attempts_ = 0;
};

// now - then in ms, saturated at the int64 range: stored timestamps come from other processes
// (or from damaged documents) and may be anything.
inline std::int64_t MillisSince(std::int64_t now, std::int64_t then) {
  std::int64_t d;
  if (!__builtin_sub_overflow(now, then, &d)) return d;
  return then < 0 ? INT64_MAX : INT64_MIN;
}

// "collection/id", for messages.
inline std::string Where(const Key& k) { return k.collection + "/" + k.id; }

// A store write failure that may be retried: nothing written (kUnavailable) or not known
// (kUnknown; the retry's compare-and-swap, or a re-read, tells).
inline bool Transient(Code c) { return c == Code::kUnavailable || c == Code::kUnknown; }

// Store::Get retried on kUnavailable up to Options::max_attempts.
Result<std::optional<StoredDocument>> GetWithRetry(const Env& env, const Key& key);

}  // namespace litetx::engine
