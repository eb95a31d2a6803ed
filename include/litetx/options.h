// litetx/options.h — configuration of a Database.
//
// Plain structs with defaults; copy and modify. Every Database sharing a store (in one process
// or several) should use the same lease and size limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "litetx/clock.h"

namespace spdlog {
class logger;
}

namespace litetx {

// Exponential backoff: first wait `initial`, then double each time up to `max`.
struct BackoffOptions {
  std::chrono::milliseconds initial{100};  // first wait
  std::chrono::milliseconds max{30'000};   // cap; waits stay here once reached
};

struct Options {
  // Where the engine logs (warnings for stuck or repaired state, debug traces). The host
  // owns the logger; null means log nothing.
  std::shared_ptr<spdlog::logger> logger;
  // Wall clock and sleeping; null means SystemClock(). Tests pass a ManualClock.
  std::shared_ptr<Clock> clock;
  // How long after a transaction starts a garbage collector may treat it as abandoned (the
  // ActiveTransaction document's GC timestamp is now + lease). Seed 003 suggests minutes.
  // Must exceed the longest commit plus the worst clock skew between processes.
  std::chrono::milliseconds lease{120'000};
  // How long to wait for a document held by another transaction before failing kBusy.
  // Zero fails at once.
  std::chrono::milliseconds busy_timeout{2'000};
  // Backoff between looks at a busy document.
  BackoffOptions busy_backoff{std::chrono::milliseconds{1}, std::chrono::milliseconds{50}};
  // Backoff for retrying store errors (seed 000: 100 ms doubling to 30 s).
  BackoffOptions retry_backoff{};
  // Attempts at one store call that fails transiently or with a lost reply. Before the commit
  // point the transaction then rolls back and reports kUnavailable. At the commit point it
  // reports kUnavailable if the flip surely did not land (every attempt failed transiently)
  // and kUnknown if a lost reply leaves it open (settle with Database::Outcome). After the
  // commit point the rest is left to the GC and the commit still reports kOk.
  int max_attempts = 4;
  // How long active rollback keeps retrying transient store errors. Zero means never give up
  // (seed 000); otherwise what is left is reported in the log and left to the GC.
  std::chrono::milliseconds rollback_timeout{0};
  // Largest accepted document, as serialised JSON including engine metadata.
  std::size_t max_document_bytes = 1 << 20;
  // Largest accepted ActiveTransaction document (the worklist) as serialised JSON.
  std::size_t max_record_bytes = 8 << 20;
  // Most actions in one transaction.
  std::size_t max_actions = 1000;
  // Deepest nesting of objects and arrays accepted in a document (the document is level 1, an
  // object or array in it level 2, ...); deeper input, and NaN or infinite numbers, are
  // refused with kInvalidArgument before anything is written. Copying, comparing and encoding
  // a document take stack and memory that grow with its depth; this bounds them. Values above
  // kMaxNestingDepth (litetx/document.h) act as kMaxNestingDepth.
  std::size_t max_nesting_depth = 64;
  // Schema version given to inserted documents that do not name one.
  std::uint32_t default_schema_version = 1;
};

// What a read returns for a document that another transaction is changing.
enum class Isolation : std::uint8_t {
  // The last committed image: the pre-image while that transaction is uncommitted, the new
  // image once it has committed. The default.
  kReadCommitted,
  // The raw stored document, with the holding transaction's id and flags.
  kReadUncommitted,
};

struct ReadOptions {
  Isolation isolation = Isolation::kReadCommitted;  // see Isolation
};

}  // namespace litetx
