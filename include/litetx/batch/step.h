// litetx/batch/step.h — a chunk-oriented step: read, process and write items, a transaction
// per chunk, with retry, skip and recover, restartable exactly once.
//
// In the notation of Spring Batch (docs/batch.md maps every pattern to this API):
//
//   REPEAT(until=exhausted) {              RunStep reads until the reader is exhausted
//     TX {                                 one litetx transaction per chunk (Database::Run)
//       REPEAT(size=commit_interval) {     StepOptions::commit_interval / complete_chunk
//         RETRY(stateful) { input }        StepOptions::retry, counted per Item::key
//         PROCESS { output }               StepFunctions::process, then ::write
//         SKIP and RECOVER { notify }      StepOptions::skip, StepFunctions::recover
//       } } }
//
//   litetx::batch::StepFunctions fns;
//   fns.process = [](litetx::TxnContext&, const litetx::batch::Item& item)
//       -> litetx::Result<std::optional<boost::json::value>> { return item.value; };
//   fns.write = [](litetx::TxnContext& tx, const std::vector<litetx::batch::Output>& out) {
//     for (const auto& o : out) {
//       if (auto s = tx.Insert("orders", o.item->key, o.value.as_object()); !s.ok()) return s;
//     }
//     return litetx::Status::Ok();
//   };
//   litetx::batch::StepOptions options;
//   options.job = "orders-2026-11-24";
//   auto report = litetx::batch::RunStep(db, reader, fns, options);
//
// Exactly once. Each chunk's transaction also writes the step's execution context: a chunk
// document (its input positions, the reader's checkpoint after it, its counts) and, when
// chunks run one at a time, the step document's running totals — in the collection
// StepOptions::state_collection. Outputs and progress commit together or not at all, so after
// a crash at any point RunStep with the same job and step resumes after the last committed
// chunk, and every input item's output exists exactly once. The reader must return the same
// items in the same order on every run. The options may change between runs: chunks formed
// on a restart never reach into chunks committed earlier, and items an earlier run had begun
// to write one by one are written one by one again, each checked against its item document.
//
// Concurrency. With StepOptions::concurrency > 1 chunks are processed by that many threads
// (A.4); the reader is still called from the calling thread only. With
// StepOptions::transaction_per_item, each item is its own transaction and a chunk's items run
// concurrently (A.5). Listener callbacks are serialised (never two at once), but may come
// from worker threads.
//
// One execution at a time. A RunStep takes the step over: an execution still running on
// another thread or process fails its next commit (kFailedPrecondition "taken over") and
// stops. Only a commit it already had in flight at the moment of the take-over may still
// land; each chunk's document can be written once, so its chunk is then not written again.
//
// Exceptions thrown by your functions propagate out of RunStep after the chunk in progress is
// rolled back and the worker threads are joined; committed chunks stay, and a later RunStep
// resumes after them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "litetx/batch/item.h"
#include "litetx/batch/policy.h"
#include "litetx/database.h"
#include "litetx/run.h"
#include "litetx/status.h"

namespace litetx::batch {

// A processed item on its way to the writer.
struct Output {
  const Item* item = nullptr;  // the input item (valid during the write call)
  boost::json::value value;    // what the processor returned (the item's value without one)
};

// Where a failure happened.
enum class Phase : std::uint8_t { kRead, kProcess, kWrite };
const char* PhaseName(Phase phase);  // "read", "process", "write"

struct StepFunctions {
  // Turns an item into its output, inside the chunk's transaction (it may read, and write
  // through `tx`; its writes are undone if it fails: it runs as a nested scope). Return
  // std::nullopt to filter the item out (counted, not written). Empty: the item's value is
  // the output. A failure is retried, skipped or recovered per the step's policies.
  std::function<Result<std::optional<boost::json::value>>(TxnContext& tx, const Item& item)>
      process;
  // Writes a chunk's outputs through `tx` (required). Called once per chunk attempt with every
  // output of the chunk, or with one output when the step isolates a failing item (see
  // StepOptions::skip). Non-OK: the attempt is rolled back and the failure is retried,
  // skipped or fails the step.
  std::function<Status(TxnContext& tx, const std::vector<Output>& outputs)> write;
  // The RECOVER path: called for an item whose retries are used up, instead of skipping it,
  // inside the same transaction as the rest of its chunk (e.g. write it to a dead-letter
  // collection through `tx`). OK: the item counts as recovered; non-OK: the item is skipped
  // if the skip policy allows, else the step fails. Empty: no recovery, only skipping.
  std::function<Status(TxnContext& tx, const Item& item, const Status& failure)> recover;
};

// What a step counted: committed work. rollbacks and retries count the attempts rolled back
// and made again before each commit (StepReport::this_run also counts those of a chunk that
// never committed in that run).
struct Counts {
  std::uint64_t read = 0;           // items read (read failures not included)
  std::uint64_t written = 0;        // outputs handed to a write that committed
  std::uint64_t filtered = 0;       // items the processor filtered out
  std::uint64_t read_skips = 0;     // read failures skipped
  std::uint64_t process_skips = 0;  // items skipped after failing in process
  std::uint64_t write_skips = 0;    // items skipped after failing in write
  std::uint64_t recovered = 0;      // items handed to StepFunctions::recover
  std::uint64_t commits = 0;        // transactions committed (chunks, or items)
  std::uint64_t rollbacks = 0;      // attempts rolled back
  std::uint64_t retries = 0;        // attempts made again after a retryable failure

  std::uint64_t skips() const { return read_skips + process_skips + write_skips; }
  Counts& operator+=(const Counts& o);
  boost::json::object ToJson() const;
  // Fields missing from `o` count 0; kCorruption for a field that is not an unsigned number.
  static Result<Counts> FromJson(const boost::json::object& o);
};

// A skip or a recovery, as the on_skip listener and the skip record see it.
struct SkipEvent {
  Phase phase = Phase::kRead;
  std::uint64_t position = 0;
  std::string key;     // the item's key (empty for a read failure)
  Status failure;      // why
  bool recovered = false;  // handed to StepFunctions::recover (else skipped)
};

// A failure that will be retried.
struct RetryEvent {
  Phase phase = Phase::kProcess;
  std::uint64_t chunk = 0;
  std::string key;   // the failing item's key (empty for a whole chunk's write or commit)
  int attempt = 0;   // the attempt that failed (1-based)
  Status failure;
};

struct StepListener {
  // Before each chunk's first attempt, with its number (0-based, over the whole step).
  std::function<void(std::uint64_t chunk)> before_chunk;
  // After a chunk committed, with its counts.
  std::function<void(std::uint64_t chunk, const Counts& counts)> after_chunk;
  // After a chunk attempt (or, per item, an item attempt) was rolled back.
  std::function<void(std::uint64_t chunk, const Status& failure)> on_chunk_error;
  // For each skipped or recovered item, once the transaction recording it committed.
  std::function<void(const SkipEvent& skip)> on_skip;
  // Before a retry.
  std::function<void(const RetryEvent& retry)> on_retry;
  // When the step fails, with the failure (not for kUnknown's later outcome).
  std::function<void(const Status& failure)> on_error;
};

struct StepOptions {
  // The job instance: names this run's state, so that a restart finds it. Required; at most
  // 128 bytes, no '/', no control characters. Reuse the name to restart, choose a new one
  // (e.g. with the input's date) for a new run.
  std::string job;
  // The step within the job (same rules).
  std::string step = "step";
  // Where the execution context lives: step documents, chunk documents and skip records.
  std::string state_collection = "litetx_batch";
  // Items per chunk: the chunk ends after this many input positions (read failures count).
  std::size_t commit_interval = 100;
  // A further completion policy: called after each item with the chunk's items so far; true
  // ends the chunk early (e.g. on the items' total size).
  std::function<bool(const std::vector<Item>& chunk)> complete_chunk;
  // Stateful retry of process failures (the chunk is rolled back and the failing item comes
  // back in the next attempt; its failures are counted under Item::key) and of write and
  // commit failures (the whole chunk again). max_attempts is per item and per chunk.
  RetryPolicy retry;
  // The wait between a rolled-back attempt and the next.
  BackoffPolicy backoff;
  // Skipping. When a chunk's write or commit still fails after the chunk's retries (and
  // recover is set or skip_limit > 0; not for kCorruption), the step writes that chunk again
  // one item per transaction, to find the failing item(s) and skip or recover only them.
  SkipPolicy skip;
  // Chunks processed at once (A.4); 1: one after another.
  std::size_t concurrency = 1;
  // A transaction per item instead of per chunk, the items of a chunk running concurrently on
  // `concurrency` threads (A.5). Items are still grouped in chunks for the checkpoint.
  bool transaction_per_item = false;
  // After a commit whose outcome is unknown (kUnknown), how long to keep asking the store
  // before the step fails with kUnknown (a later RunStep then finds the chunk's fate).
  std::chrono::milliseconds unknown_timeout{30'000};
  // Callbacks; see StepListener.
  StepListener listener;
  // RunOptions::serializable of every chunk's transaction: the documents the functions read
  // and do not write are checked at commit too. (Each transaction runs once per attempt: the
  // step's retry and backoff policies decide what happens after a failure.)
  bool serializable = false;
};

struct StepReport {
  // OK: every item was read and committed (or skipped, filtered, recovered). Otherwise the
  // failure that stopped the step; what committed before it stays, and a later RunStep
  // resumes after it. kUnknown: a chunk's commit outcome could not be learned in time.
  Status status;
  // The step was already complete when RunStep was called: nothing was read.
  bool already_complete = false;
  // 1 for the step's first execution, +1 for each restart.
  std::uint64_t execution = 0;
  // Over every execution (committed work).
  Counts total;
  // This execution only (includes its rollbacks and retries).
  Counts this_run;
  // Chunks committed in all.
  std::uint64_t chunks = 0;
  // Every item skipped or recovered by this execution, in position order.
  std::vector<SkipEvent> skipped;
};

// Runs the step to completion (or failure). Returns the report, or an error before anything
// ran: kInvalidArgument (bad options, or missing write), kFailedPrecondition (the stored state
// cannot be used: another step shape, an unreadable checkpoint), kConflict (another execution
// took the step over at the same moment), kUnavailable / kCorruption from the store.
// Thread safety: may be called from several threads for different steps.
Result<StepReport> RunStep(Database& db, ItemReader& reader, const StepFunctions& functions,
                           const StepOptions& options);

// The stored execution context of a step: its status ("running", "completed", "failed"), the
// execution number, committed totals and chunk count; kNotFound if it never ran. For
// monitoring (litetx batch --status) and tests.
struct StepStatus {
  std::string status;
  std::uint64_t execution = 0;
  Counts total;
  std::uint64_t chunks = 0;
  std::string last_error;
};
Result<StepStatus> ReadStepStatus(Database& db, const StepOptions& options);

}  // namespace litetx::batch
