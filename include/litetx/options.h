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
  // Where the engine logs: warnings and errors for stuck, repaired or unreleasable state (work
  // left for the collector, a lock left to expire, a record that cannot be repaired), info on
  // repairs, debug traces. Shared with the host. Null: warnings and errors go to stderr (one
  // logger per process named "litetx", at warn level, not registered with spdlog; spdlog's
  // own default logger and levels are left alone). To route them elsewhere pass a logger, e.g.
  // spdlog::default_logger(); to silence them pass one that drops everything:
  //   o.logger = std::make_shared<spdlog::logger>(
  //       "quiet", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::shared_ptr<spdlog::logger> logger;
  // Wall time (leases, expiries, ages), monotonic time (every timeout and wait) and sleeping;
  // null means SystemClock(). Tests pass a ManualClock. Wall time also gives an inserted id
  // with no stored version its first version (milliseconds x 1000), so it must not run far
  // behind the clocks of other processes on the store (docs/protocol.md §7).
  std::shared_ptr<Clock> clock;
  // How long a transaction's record stays safe from collectors without being renewed (its GC
  // timestamp is now + lease). A live coordinator renews it in the background (see
  // renew_leases), so a crashed process frees its documents about one lease after it died,
  // while a slow but live one keeps them. Clock skew between processes must stay under half
  // of it. Every Database sharing a store should use the same lease.
  std::chrono::milliseconds lease{5'000};
  // Renew the leases of running transactions from a background thread (one per Database,
  // started on first use): every lease/4 each record whose lease is a quarter gone is pushed
  // to now + lease. Off: a transaction extends its lease only itself, before each apply once
  // half of it has gone, so a commit that stalls longer than the lease can be rolled back.
  bool renew_leases = true;
  // How long to wait for a document held by another transaction before failing kBusy, on
  // monotonic time. Zero fails at once.
  std::chrono::milliseconds busy_timeout{2'000};
  // Backoff between looks at a busy document.
  BackoffOptions busy_backoff{std::chrono::milliseconds{1}, std::chrono::milliseconds{50}};
  // Backoff for retrying store errors (as in the MongoDB import protocol: 100 ms doubling to 30 s).
  BackoffOptions retry_backoff{};
  // Attempts at one store call that fails transiently or with a lost reply. Before the commit
  // point the transaction then rolls back and reports kUnavailable. At the commit point it
  // reports kUnavailable if the flip surely did not land (every attempt failed transiently)
  // and kUnknown if a lost reply leaves it open (settle with Database::Outcome). After the
  // commit point the rest is left to the GC and the commit still reports kOk.
  int max_attempts = 4;
  // How long active rollback keeps retrying transient store errors, on monotonic time. Zero
  // means never give up (as in the MongoDB import protocol); otherwise what is left is
  // reported in the log and left to the GC.
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
  // Parallel commit for transactions of two or more writes and no checks: the transaction
  // record is written in a "staging" state in the same round as the document writes, and the
  // transaction counts as committed once the record and every write have landed, so Commit
  // returns after two store rounds (the reads, then the record and the writes together); the
  // record is marked committed afterwards. A transaction whose writes do not all land at once
  // falls back to the classic path. Off: the record is written first, and committed by a
  // separate write after the documents (one round more on the caller's path). Same store
  // writes either way; see docs/protocol.md §2.3.
  bool parallel_commit = true;
  // Finish committed transactions in the background. Commit returns as soon as the commit
  // point has landed; clearing the transaction's reference from its documents and writing its
  // outcome marker happen afterwards on the Database's finisher threads, which the destructor
  // and Database::Flush wait for. Nothing a reader sees changes: a reader resolves a
  // still-held document through the committed record. Off: Commit does that work itself
  // before returning (2N+3 store writes in sequence, as before).
  bool finish_in_background = true;
  // Threads finishing transactions in the background (started on first use; values below 1
  // act as 1, above 64 as 64).
  int finisher_threads = 2;
  // Committed transactions waiting to be finished at most; beyond it the committing thread
  // finishes its own transaction before returning, so memory stays bounded under any load.
  // 0: every committing thread finishes its own transaction (as with finish_in_background off).
  std::size_t finisher_queue = 4096;
  // How long a finisher thread that found fewer than 32 transactions queued waits for more
  // before finishing them together (their flips, their documents and their outcome markers go
  // to the store as one batch each). Longer: fewer store writes per transaction under load;
  // documents carry a committed transaction's reference that much longer (readers resolve it
  // through the record; a transaction that meets such a document finishes it at once). 0: no
  // wait.
  std::chrono::microseconds finisher_linger{200};
  // Bytes of documents this Database keeps as it last wrote them, each with the store revision
  // that write left (least recently written dropped first). A later transaction that writes
  // such a document evaluates its action on the kept image and sends its compare-and-swap at
  // that revision, without reading the document first: one store round fewer. Store revisions
  // are never reused, so a write that lands proves the image was the stored one; if someone
  // else wrote the document meanwhile, the compare-and-swap fails, nothing is written, and
  // the document is read and the action evaluated again, so outcomes are as without the cache,
  // and a stale image costs one failed write. Version checks (Transaction::Check) and reads
  // never use it. Sized by the documents' JSON text (an image held in memory takes more than
  // its text); an image larger than 1/16 of this is not kept. 0: no cache.
  std::size_t written_cache_bytes = std::size_t{4} << 20;
  // Index the tombstone a one-write delete makes (a transaction with one action): an entry in
  // the tombstone index (collection "__litetx.tomb", docs/protocol.md §5.4) is written in the
  // same store round as the delete, one write more, so that a collector purges the tombstone
  // once its retention has passed without sweeping the collection. Tombstones of larger
  // transactions are indexed from their outcome markers by the collector, at no cost to the
  // transaction. Off: such tombstones are purged only by a collector's sweep of the collection.
  bool index_tombstones = true;
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
