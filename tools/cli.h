// tools/cli.h — shared plumbing of the `litetx` command-line tool: global flags, opening the
// store named by --store (with LITETX_FAULTS applied), JSON output and exit codes.
//
// Each subcommand lives in its own cmd_*.cpp and registers itself with an Add* function that
// sets Context::run; main() parses the command line and calls it. Output: JSON on stdout, one
// line per error on stderr ("litetx: <message>"), the exit code below.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "litetx/litetx.h"
#include "litetx/fault_injecting_store.h"
#include "litetx/lmdb_store.h"
#include "litetx/redis_cluster_store.h"
#include "litetx/redis_store.h"

namespace litetx::cli {

// Exit codes (documented in docs/cli.md). Transaction outcomes of `apply` have one each.
enum Exit : int {
  kExitOk = 0,             // committed / the command did what it was asked
  kExitFailed = 1,         // a check the command makes failed (demo verification, gc errors)
  kExitUsage = 2,          // bad command line, or bad input: malformed JSON, wrong types,
                           // unknown op, missing fields, reserved fields, bad names
  kExitStore = 3,          // the store cannot be opened or read (path, permissions, corrupt)
  kExitConflict = 10,      // outcome conflict
  kExitBusy = 11,          // outcome busy
  kExitDeleted = 12,       // outcome deleted
  kExitNotFound = 13,      // outcome not_found
  kExitAborted = 14,       // outcome aborted
  kExitUnknown = 15,       // outcome unknown (settle with the txn id later)
  kExitUnavailable = 16,   // outcome unavailable (the store failed; nothing committed)
  kExitPrecondition = 17,  // outcome failed_precondition (adjust of a non-number...)
  kExitCorruption = 18,    // outcome corruption (a stored document cannot be decoded)
};

// Every exit code and what it means, for the manual page (docs/cli.md has the same table).
struct ExitCodeInfo {
  int code;
  const char* meaning;
};
inline constexpr ExitCodeInfo kExitCodes[] = {
    {kExitOk, "Committed, or the command did what it was asked."},
    {kExitFailed, "A check the command makes failed: demo verification, a gc pass that met an "
                  "error."},
    {kExitUsage, "Bad command line or bad input: malformed JSON, wrong types, unknown op, "
                 "missing or reserved fields, bad names, a bad store URI or LITETX_FAULTS."},
    {kExitStore, "The store cannot be opened or read (path, permissions, damaged file, "
                 "unreachable server, other bucket count)."},
    {kExitConflict, "conflict: a version did not match; retry the transaction."},
    {kExitBusy, "busy: another transaction held a document past the busy timeout; retry."},
    {kExitDeleted, "deleted: the transaction named a tombstone."},
    {kExitNotFound, "not_found: the transaction named a missing document."},
    {kExitAborted, "aborted: a collector rolled the transaction back; retry."},
    {kExitUnknown, "unknown: the outcome could not be learned; ask again with the txn id, do "
                   "not retry blindly."},
    {kExitUnavailable, "unavailable: the store failed before the commit point; nothing "
                       "committed; retry."},
    {kExitPrecondition, "failed_precondition: an adjust named a missing or non-numeric field, "
                        "or would overflow."},
    {kExitCorruption, "corruption: a stored document or record cannot be decoded."},
    {86, "The process was killed on purpose by LITETX_FAULTS=crash-after-writes:K."},
    {130, "Stopped by SIGINT (after finishing its current step)."},
    {143, "Stopped by SIGTERM (after finishing its current step)."},
};

// State shared by main() and the subcommands.
struct Context {
  // --store URI: "lmdb:PATH", "memory:", "redis://..." or "redis-cluster://..." (see
  // ParseRedisUri). Default "lmdb:" + kDefaultLmdbPath.
  std::string store_uri;
  // --log-level: off, error, warn, info, debug.
  std::string log_level = "warn";
  // --sync: LMDB durability for this process: durable, nometasync, nosync.
  std::string lmdb_sync = "durable";
  // LmdbOptions::max_mapped_bytes for the store OpenStore opens: set by commands that go
  // through a large database once (import), 0 otherwise.
  std::size_t lmdb_max_mapped_bytes = 0;
  // Set by the chosen subcommand's callback; returns the exit code.
  std::function<int()> run;
};

inline constexpr const char* kDefaultLmdbPath = "./litetx-data";

// The --store schemes, for help texts and errors.
inline constexpr const char* kStoreSchemes =
    "lmdb:PATH, memory:, redis://HOST:PORT[/DB][?OPTIONS] or "
    "redis-cluster://HOST:PORT[,HOST:PORT...][?OPTIONS]";

// Parses a redis:// URI into `out` (logger left unset):
//   redis://NODE[/DB][?KEY=VALUE[&KEY=VALUE...]]
//   NODE  = HOST:PORT, HOST a name or IPv4 address (letters, digits, '.', '-', '_') or an IPv6
//           address in brackets ([::1]:6379); PORT 1..65535, nothing after it.
//   DB    = a database number (SELECT), 0 when absent or empty.
//   KEY   = prefix (text, %XX escapes decoded, no '{' or '}'; may be empty), buckets (1..10^6),
//           pool (1..1024), timeout, connect_timeout, wait_timeout (milliseconds as a bare
//           number or a duration: 2000, 2s), wait (replicas, 0..1000; with wait > 0,
//           wait_timeout must be shorter than timeout). Each key at most once.
// Unset keys keep RedisOptions' defaults. kInvalidArgument "bad --store 'URI': WHY" otherwise.
Status ParseRedisUri(const std::string& uri, RedisOptions* out);
// The same for redis-cluster://NODE[,NODE...][?KEY=VALUE...] (seed nodes; no DB; unset keys
// keep RedisClusterOptions' defaults, so buckets defaults to 64 here and 16 for redis://).
Status ParseRedisClusterUri(const std::string& uri, RedisClusterOptions* out);

// A logger writing to stderr at ctx.log_level (one per process; named "litetx").
std::shared_ptr<spdlog::logger> Logger(const Context& ctx);

// Engine options for the CLI: the logger above, default lease and timeouts.
Options EngineOptions(const Context& ctx);

// Opens ctx.store_uri. If LITETX_FAULTS is set (see ParseFaults) the store is wrapped in a
// FaultInjectingStore in CrashMode::kExit. On error prints one line and returns nullptr with
// *exit_code set: kExitUsage for a malformed URI (or a Redis URI in a build without Redis)
// or LITETX_FAULTS; kExitStore when the store cannot be opened (for Redis: the server cannot
// be reached, refuses the setup, is not a cluster node...), with the store's message.
// OpenStore creates a missing LMDB directory; OpenExistingStore, for the commands that only
// read or repair, fails instead, so that a mistyped path is an error and not a new empty store.
std::shared_ptr<Store> OpenStore(const Context& ctx, int* exit_code);
std::shared_ptr<Store> OpenExistingStore(const Context& ctx, int* exit_code);

// Parses LITETX_FAULTS: comma-separated items crash-after-writes:K, transient:P,
// lost-reply:P, seed:N, exit-code:N, and two scripted faults (docs/cli.md):
// partition-after-writes:K (the K-th write call lands, its reply is lost, every later call
// fails with kUnavailable), stall-write:K:DURATION (sleep before the K-th write call) and
// hold-write:K:FIFO (before the K-th write call, wait until a byte is written to the FIFO;
// a line on stderr says when the wait has begun).
// Returns kInvalidArgument with a message on a bad item.
Result<FaultOptions> ParseFaults(const std::string& spec);

// Parses a duration, the one syntax of every duration flag: a whole number and a unit, one of
// ms, s, m, h ("500ms", "2s", "1m"), or a bare "0". Zero means what it means in the library's
// option of the same name (Options, CollectorOptions). Returns kInvalidArgument naming the
// text otherwise.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text);
// A CLI11 check accepting what ParseDuration accepts.
CLI::Validator DurationCheck();
// A CLI11 check accepting a whole number written in decimal digits only (no sign, no
// exponent, no spaces) from `min` to `max`. The message says which bound was broken, so that
// "-1" and "18446744073709551616" are not silently wrapped or cut.
CLI::Validator WholeNumberCheck(std::uint64_t min, std::uint64_t max);
// A CLI11 check accepting a probability: a number from 0 to 1 (NaN refused).
CLI::Validator ProbabilityCheck();

// JSON text of `v` with numbers as people write them: integers in full, doubles in their
// shortest form that reads back to the same bits (0.1, 1.5, 1e+300, -0.0), always with a '.'
// or an exponent so that they stay doubles when read again. `pretty`: indented, one member
// per line; otherwise one line.
std::string FormatJson(const boost::json::value& v, bool pretty = false);
// Prints `v` as one line of JSON on stdout (FormatJson).
void PrintJson(const boost::json::value& v);

// --format of the read commands: pretty (indented) or json (one line). Unset: pretty when
// stdout is a terminal, json otherwise.
struct OutputFormat {
  std::string name;  // "", "pretty" or "json"
  bool Pretty() const;
};
// Adds --format to `cmd`.
void AddFormatOption(CLI::App* cmd, OutputFormat* format);
// Prints `v` on stdout in `format`.
void Print(const boost::json::value& v, const OutputFormat& format);
// Prints "litetx: <message>" on stderr and returns `code`.
int Fail(int code, const std::string& message);

// The outcome name of a commit status ("committed", "conflict", ...) and its exit code.
const char* OutcomeName(const Status& s);
int OutcomeExit(const Status& s);

// Subcommands (one cmd_*.cpp each).
void AddApply(CLI::App& app, Context& ctx);    // cmd_apply.cpp
void AddInspect(CLI::App& app, Context& ctx);  // cmd_inspect.cpp: get, scan, txns
void AddGc(CLI::App& app, Context& ctx);       // cmd_gc.cpp
void AddDemo(CLI::App& app, Context& ctx);     // cmd_demo.cpp
void AddBench(CLI::App& app, Context& ctx);    // cmd_bench.cpp
void AddCollections(CLI::App& app, Context& ctx);  // cmd_collections.cpp: list, count, drop
void AddImport(CLI::App& app, Context& ctx);       // cmd_import.cpp
void AddBatch(CLI::App& app, Context& ctx);        // cmd_batch.cpp (litetx::batch)

}  // namespace litetx::cli
