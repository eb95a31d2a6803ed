// stores/redis_common.h — what RedisStore and RedisClusterStore share: the stored format (key
// layout, write scripts, document codec), the connection pool of one node, pipelined
// exchanges that tell "not sent" from "sent, reply lost", and the reading of error replies.
// Internal to the library; not installed.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "litetx/status.h"
#include "litetx/store.h"

namespace spdlog {
class logger;
}

namespace litetx::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct Command {
  std::vector<std::string> args;
};

std::string_view ReplyText(const redisReply* r);
std::string Quoted(std::string_view s);
std::string Describe(const Key& key);
std::string ContextError(const redisContext* c);

// ---------------------------------------------------------------------------------------------
// Stored format

enum ScriptId { kCreate = 0, kReplace = 1, kErase = 2, kScripts = 3 };
const char* ScriptName(ScriptId id);

// The three write scripts and their SHA1s (as SCRIPT LOAD returned them).
struct Scripts {
  std::string text[kScripts];
  std::string sha[kScripts];
};
Scripts MakeScripts();  // texts only

struct Keys {
  std::string doc, index, counter;
};
std::size_t BucketOf(std::string_view id, std::size_t buckets);
// "<prefix>{<collection>:<b>}"
std::string BucketTag(std::string_view prefix, std::string_view collection, std::size_t b);
Keys KeysOf(std::string_view prefix, std::size_t buckets, const Key& key);
// The key recording the format (and bucket count) of the data under `prefix`.
std::string FormatKey(std::string_view prefix);
std::string FormatValue(std::size_t buckets);

// Why a collection name cannot be stored, or empty.
std::string CollectionProblem(std::string_view collection);
bool ParseRevision(std::string_view text, Revision* out);
// Decodes an HMGET v r reply: nullopt if both are nil; kCorruption otherwise when malformed.
Result<std::optional<StoredDocument>> DecodeHmget(const redisReply* r, const std::string& where);
// The revision a write script answered with.
Result<Revision> RevisionOf(const redisReply* r, const Key& key);

// Scan, on the replies of one ZRANGEBYLEX ... LIMIT 0 per_bucket per bucket: the ids of the
// page (merged in byte order, at most `limit`), and whether more may follow.
Result<std::vector<std::string>> MergeIndexReplies(const std::vector<Reply>& replies,
                                                   std::size_t per_bucket, std::size_t limit,
                                                   const std::string& what, bool* more);
// Scan, on the replies of one HMGET per id: the page's documents (an id whose document was
// erased since the index was read is skipped).
Status AddScannedDocuments(const std::vector<Reply>& replies, const std::vector<std::string>& ids,
                           std::string_view collection, const std::string& what, ScanPage* page);

// ListCollections: the collection named by `key` if it is a bucket index key under `prefix`
// ("<prefix>{<collection>:<b>}i" with b < buckets and a non-empty collection), else nullopt.
std::optional<std::string> IndexKeyCollection(std::string_view key, std::string_view prefix,
                                              std::size_t buckets);
// The SCAN pattern matching every bucket index key under `prefix` (glob characters escaped).
std::string IndexKeyPattern(std::string_view prefix);
// ListCollections: sorts `names` and drops repeats (SCAN may return a key twice, and every
// bucket and master names its collection again), then returns the page after `cursor`.
CollectionPage PageOfNames(std::vector<std::string> names, std::string_view cursor,
                           std::size_t limit);

// ---------------------------------------------------------------------------------------------
// Error replies

enum class ErrorKind {
  kNoScript,     // the node lacks the script: nothing ran
  kMoved,        // the slot is served elsewhere: nothing ran
  kAsk,          // the key is being moved: ask the named node (after ASKING); nothing ran
  kTryAgain,     // a multi-key command in a half-moved slot: nothing ran
  kClusterDown,  // the cluster cannot serve the slot now: nothing ran
  kRefused,      // refused before running (OOM, LOADING, READONLY, ...): nothing ran
  kConflict,     // our script's CONFLICT: nothing written
  kCorrupt,      // our script's CORRUPT, or WRONGTYPE: nothing written
  kOther,        // anything else: a write may or may not have run
};
struct ErrorReply {
  ErrorKind kind = ErrorKind::kOther;
  std::string text;
  std::string host;  // MOVED / ASK: the node named
  int port = 0;
};
ErrorReply ClassifyError(std::string_view err);

// ---------------------------------------------------------------------------------------------
// Connections

struct NodeConfig {
  std::string host;
  int port = 0;
  int db = 0;
  std::size_t pool_size = 8;
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{2000};
  std::shared_ptr<spdlog::logger> logger;
};

// The connections to one node: at most pool_size open, opened on demand, callers wait for a
// free one. A connection that saw an error is closed, never reused. Thread-safe.
class NodePool {
 public:
  explicit NodePool(NodeConfig config);
  ~NodePool();
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  // A new connection (SELECT done), not counted in the pool; kUnavailable if none can be made.
  Result<redisContext*> Connect() const;
  Result<redisContext*> Acquire();
  void Release(redisContext* c, bool broken);
  // Adds a connection made by Connect() to the idle ones (counted from now on).
  void Adopt(redisContext* c);

  const NodeConfig& config() const { return config_; }
  const std::string& name() const { return name_; }  // "host:port"
  void Warn(const std::string& msg) const;

 private:
  NodeConfig config_;
  std::string name_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<redisContext*> idle_;  // guarded by mu_
  std::size_t open_ = 0;             // guarded by mu_: idle + in use
};

// One pooled connection for the duration of a call.
class Conn {
 public:
  explicit Conn(NodePool* pool) : pool_(pool) {}
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();
  Status Open();
  redisContext* get() const { return c_; }
  NodePool* pool() const { return pool_; }
  void MarkBroken() { broken_ = true; }

 private:
  NodePool* pool_;
  redisContext* c_ = nullptr;
  bool broken_ = false;
};

// Appends `commands` and writes them all out. false if not every byte was handed to the
// kernel: the last command was then not received whole and cannot have run (`*error` set,
// the connection marked broken).
bool Send(Conn& conn, const std::vector<Command>& commands, std::string* error);
// Appends `commands` and writes them all out, like Send, and returns how many of them were
// handed to the kernel whole (commands.size() on success). On a failure the commands after
// that count were not received whole and cannot have run; those before it may have run.
std::size_t SendCounted(Conn& conn, const std::vector<Command>& commands, std::string* error);
// Reads `n` replies; false on an I/O error (timeout, dropped connection; marked broken).
bool Receive(Conn& conn, std::size_t n, std::vector<Reply>* out, std::string* error);

// Where an exchange failed.
enum class Stage { kOk, kBeforeSent, kAfterSent };
// Send, then Receive of one reply per command.
std::vector<Reply> Exchange(Conn& conn, const std::vector<Command>& commands, Stage* stage,
                            std::string* error);

// Why these timeouts cannot be used, or empty: every timeout must be positive (hiredis takes
// 0 as "none" and WAIT takes 0 as "forever"), and WAIT's shorter than the command's.
std::string TimeoutProblem(std::chrono::milliseconds connect_timeout,
                           std::chrono::milliseconds command_timeout, int wait_replicas,
                           std::chrono::milliseconds wait_timeout);
// Checks the server's maxmemory-policy (CONFIG GET): an allkeys-* policy may evict a bucket's
// revision counter or a document, which would reuse revisions and lose data, so it is
// kInvalidArgument. A server that refuses CONFIG (renamed, ACL) is let through with a warning
// to `pool`'s logger.
Status CheckEvictionPolicy(redisContext* c, const NodePool& pool);
// SCRIPT LOAD of every script on `c`; fills scripts->sha. kUnavailable on failure.
Status LoadScripts(redisContext* c, Scripts* scripts);
// Checks the format marker on `c` (GET): absent → SET NX it; present → must equal
// FormatValue(buckets). kInvalidArgument if it differs or is not a string. `*moved` receives
// a MOVED/ASK reply (cluster) instead of an answer.
// `asking`: precede each command with ASKING (the marker's slot is being moved to this node).
Status CheckFormat(redisContext* c, std::string_view prefix, std::size_t buckets,
                   ErrorReply* redirect, bool asking = false);

// The one-round-trip write: [ASKING] EVALSHA (or EVAL after NOSCRIPT) of `id` on `conn`, then
// (if wait_replicas > 0) WAIT in a second send so that a failure to send it cannot be taken
// for the script not having been sent. Returns the script's reply, or a Status for I/O
// failures (kUnavailable before the script was sent whole, kUnknown after) and for a WAIT that
// counted too few replicas (kUnknown). Error replies are returned as replies (the caller
// classifies them); `*sent` tells whether the script may have run.
struct WriteCall {
  ScriptId id;
  const Keys* keys;
  const std::vector<std::string>* argv;
  bool eval = false;    // EVAL the text instead of EVALSHA
  bool asking = false;  // precede with ASKING
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{0};
};
Result<Reply> RunWrite(Conn& conn, const Scripts& scripts, const WriteCall& call,
                       const std::string& what);

// The write script command for `call` (EVALSHA or EVAL, without ASKING or WAIT).
Command ScriptCommand(const Scripts& scripts, const WriteCall& call);

// Maps a write script's final error reply (not NOSCRIPT/MOVED/ASK/TRYAGAIN) to a Status.
Status WriteErrorStatus(ScriptId id, const ErrorReply& e, const std::string& what);

timeval ToTimeval(std::chrono::milliseconds ms);

// ---------------------------------------------------------------------------------------------
// Batches (Store::Batch): each operation is the command its single call would send.

// One operation of a batch ready to send: its HMGET or its write script (EVALSHA).
struct BatchCommand {
  std::size_t op = 0;  // index in the batch
  bool write = false;
  ScriptId id = kCreate;  // writes only
  Keys keys;
  std::vector<std::string> argv;  // writes only: the script's ARGV
  std::string what;               // "<store>: <operation> <key>", for messages
  std::string where;              // Describe(key)
};

// Builds the command of `op` (`store` names the store in messages: "redis", "redis-cluster"),
// or, for an operation its single call answers without the server (a refused key or value, a
// missing value pointer, a key that cannot exist), sets `*result` and returns false.
bool PrepareBatchOp(const BatchOp& op, std::size_t index, std::string_view store,
                    std::string_view prefix, std::size_t buckets, BatchCommand* cmd,
                    BatchResult* result);
// PrepareBatchOp for every operation of `ops`: the commands to send, in order; `out` (one
// result per operation) gets the results of the operations answered without the server.
std::vector<BatchCommand> PrepareBatch(std::span<const BatchOp> ops, std::string_view store,
                                       std::string_view prefix, std::size_t buckets,
                                       std::vector<BatchResult>& out);
// The command to send for `cmd` (HMGET, or EVALSHA / EVAL of its script).
Command CommandOf(const Scripts& scripts, const BatchCommand& cmd, bool eval);
// The result of `cmd` from its reply, as its single call would answer. REQUIRES: the reply is
// not a redirect, TRYAGAIN, CLUSTERDOWN or (for a write) NOSCRIPT; the caller retries those.
BatchResult BatchReplyResult(const BatchCommand& cmd, const redisReply* reply);
// The result of `cmd` when its reply never came (the connection failed after it was sent):
// kUnknown for a write (it may have run), kUnavailable for a read.
BatchResult BatchLostResult(const BatchCommand& cmd, const std::string& error);
// Whether a reply means "nothing ran, send it again": a redirect, TRYAGAIN, CLUSTERDOWN, or a
// write's NOSCRIPT.
bool BatchRetryable(const BatchCommand& cmd, const redisReply* reply);
// After the scripts of a pipeline and a WAIT sent behind them (`wait_sent`; else
// `send_error` says why not): reads WAIT's reply and returns why the writes that ran are not
// known to be on `replicas` replicas (then they are kUnknown), or empty.
std::string WaitProblem(Conn& conn, bool wait_sent, const std::string& send_error, int replicas,
                        std::chrono::milliseconds timeout);

// ListCollections on one node: runs SCAN 0 MATCH IndexKeyPattern(prefix) COUNT 1000 until the
// cursor comes back to 0 on `conn`, adding each index key's collection to `names` (unsorted,
// possibly repeated). kUnavailable on an I/O failure or an error reply.
Status ScanCollectionNames(Conn& conn, std::string_view prefix, std::size_t buckets,
                           const std::string& what, std::vector<std::string>* names);

}  // namespace litetx::redis
