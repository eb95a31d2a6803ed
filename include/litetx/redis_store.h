// litetx/redis_store.h — a Store on one Redis server, through hiredis. Needs Redis 4.0 or later
// (HSET with several fields); tested with Redis 7.0 and hiredis 0.14.
//
// What it is for: running litetx against a Redis server shared by many processes and
// machines. Every write is one Lua script (one round trip) that checks and changes one
// document, so Redis's single-script atomicity is all litetx relies on.
//
// Stored format (shared with RedisClusterStore, litetx/redis_cluster_store.h: every key of one
// bucket carries the same hash tag, so that a cluster keeps them in one slot):
//   bucket b   = FNV-1a 64 of the id's bytes, modulo RedisOptions::buckets
//   document   <prefix>{<collection>:<b>}d:<id>   a hash: field v = the JSON text
//              (boost::json::serialize's), field r = the revision in decimal
//   id index   <prefix>{<collection>:<b>}i        a sorted set, every score 0, members = ids
//              (so ZRANGEBYLEX lists them in byte order)
//   counter    <prefix>{<collection>:<b>}r        the bucket's last revision (INCR); never
//              reset, so no revision is reused for any key of the bucket, not even after an
//              erase and a new create
//   marker     <prefix>format                      "litetx-redis 1 buckets=<B>", written by the
//              first Open, checked by every later one
// The bucket count is part of the format: Open refuses `buckets` other than the marker's. Ids may hold any bytes; collections
// must not contain '}' (it would end the hash tag): writes refuse such a collection
// (kInvalidArgument) and reads treat it as empty.
//
// Errors:
//   kUnavailable  the server could not be reached, or a command failed before it was sent
//                 completely (it cannot have run), or a read failed for any I/O reason, or
//                 the server refused the command before running it (OOM, LOADING, BUSY, ...).
//   kUnknown      a write was sent and then its reply was lost (timeout, dropped connection):
//                 it may or may not have landed; or, with wait_replicas, WAIT counted fewer
//                 replicas (the write ran on the server). Writes are never retried by the store.
//   kConflict     the script found the key present (create) or absent / at another revision
//                 (replace, erase). Nothing was written.
//   kCorruption   a reply of an unexpected type, a document without both fields, a stored
//                 revision that is not a decimal, JSON text that does not decode to an
//                 object, or a key of the layout holding another Redis type.
//   kInvalidArgument  a collection containing '}', a value nested deeper than
//                 kMaxStoredNestingDepth or holding a NaN or an infinity.
//
// Batch: one pipeline on one connection: every operation's command (HMGET, or the write's
// script) is written out in one go, then every reply is read (one round trip; with
// wait_replicas, one WAIT after all the scripts covers them all). Each operation answers as its
// single call would. If the connection fails midway, the operations whose commands reached the
// server whole but whose replies did not come back are kUnknown (writes) or kUnavailable
// (reads), and the ones not sent whole are kUnavailable; a write whose script the server lost
// (NOSCRIPT) is sent again on its own, as a single call would.
//
// Ownership: RedisStore::Open returns a shared_ptr; the store owns its connections and closes
// them when destroyed. No operation may be running on the store when it is destroyed.
//
// Thread safety: every method may be called from any number of threads at once. Each call
// takes one connection from a pool (at most `pool_size`, opened on demand; callers wait for a
// free one) and returns it afterwards; a connection that saw an I/O error or a protocol error
// is closed, never reused.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "litetx/store.h"

namespace spdlog {
class logger;
}

namespace litetx {

struct RedisOptions {
  // Server address (IPv4/IPv6 literal or host name) and TCP port.
  std::string host = "127.0.0.1";
  int port = 6379;
  // Logical database number (SELECT), 0 by default.
  int db = 0;
  // Prepended to every key the store uses, so several stores can share one database. Must not
  // contain '{' or '}'.
  std::string prefix = "ltx:";
  // Buckets per collection (see the stored format above); 1 or more. Fixed for the data's
  // lifetime.
  std::size_t buckets = 16;
  // Most connections open at once; calls beyond that wait for a free one. 1 or more.
  std::size_t pool_size = 8;
  // Bound on establishing one TCP connection; positive.
  std::chrono::milliseconds connect_timeout{1000};
  // Bound on each send and each wait for a reply; positive. A write whose reply does not come
  // in time fails with kUnknown.
  std::chrono::milliseconds command_timeout{2000};
  // Replicas that must acknowledge each write (WAIT) before it is reported done; 0: none.
  // A write that fewer replicas acknowledged within wait_timeout fails with kUnknown.
  int wait_replicas = 0;
  // How long WAIT waits for those replicas: positive and shorter than command_timeout.
  std::chrono::milliseconds wait_timeout{500};
  // Receives warnings (connections discarded, scripts reloaded); null means log nothing.
  std::shared_ptr<spdlog::logger> logger;
};

class RedisStore final : public Store {
 public:
  // Connects once (SELECT db, SCRIPT LOAD of the write scripts), checks the format marker
  // (writing it if absent, the only write) and returns the store. kUnavailable if the server
  // cannot be reached or refuses the setup commands; kInvalidArgument for bad options, a
  // cluster-mode server, a maxmemory-policy of allkeys-* (it would evict litetx's keys), or a
  // marker of another bucket count or not litetx's (then nothing is written).
  static Result<std::shared_ptr<RedisStore>> Open(RedisOptions options = {});

  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // HMGET v r: the document, std::nullopt if absent; kUnavailable, kCorruption.
  Result<std::optional<StoredDocument>> Get(const Key& key) override;
  // The create script: kConflict if the document exists; otherwise the bucket counter's next
  // value is the new revision.
  Result<Revision> Create(const Key& key, const boost::json::object& value) override;
  // The replace script: kConflict unless the stored revision is `expected`.
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override;
  // The erase script: kConflict unless the stored revision is `expected`; removes the
  // document and its index entry.
  Status Erase(const Key& key, Revision expected) override;
  // One pipelined round trip of ZRANGEBYLEX over every bucket's index, merged in byte order,
  // then one pipelined round trip of HMGETs for the page's ids (an id whose document vanished
  // in between is skipped). Not a snapshot; each document is read atomically.
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override;
  // SCAN ... MATCH over the whole database for the bucket index keys under the prefix (a
  // collection exists while one of its buckets' indexes does), then sorted and paged here.
  // O(keys in the database) per call whatever `limit` is: an administrative operation.
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override;
  // One pipeline, one round trip (see the comment at the top).
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override;

  // The bucket of `id` with `buckets` buckets (FNV-1a 64 modulo buckets). Part of the format.
  static std::size_t BucketOf(std::string_view id, std::size_t buckets);

  const RedisOptions& options() const;

  // Implementation detail: the connection pool and scripts; defined in redis_store.cpp.
  struct Impl;

 private:
  explicit RedisStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace litetx
