// litetx/redis_cluster_store.h — a Store on a Redis Cluster, through hiredis (which has no
// cluster support of its own: slot routing, redirects and the topology are done here). Needs
// Redis 7.0 or later in cluster mode; tested with Redis 7.0 and hiredis 0.14.
//
// What it is for: one litetx database spread over the masters of a Redis Cluster. Redis runs a
// script atomically only when all of its keys are in one hash slot; every litetx write touches
// one document (its hash, its bucket's id index and revision counter, which share a hash
// tag), so each Create/Replace/Erase is still one script call, one round trip.
//
// Stored format: the same keys as RedisStore (litetx/redis_store.h), with hash tag
// {<collection>:<bucket>}. The slot of a document is CRC16 of "<collection>:<bucket>" modulo
// 16384, so the `buckets` buckets of one collection land in as many slots, spread over the
// masters. Scan lists every bucket's index (pipelined to each master, all masters at once) and
// merges them in id order. The bucket count is recorded in the marker key <prefix>format and
// checked by Open.
//
// Routing: the store reads the slot map with CLUSTER SLOTS from the seed nodes at Open and
// again whenever a node answers MOVED, cannot be reached, or says CLUSTERDOWN. A MOVED or ASK
// reply means the command did not run, so it is sent again to the named node (ASK: preceded by
// ASKING), at most `max_redirects` times. A TRYAGAIN (a slot half moved) is retried after a
// short pause while the command timeout allows.
//
// Batch: the operations are grouped by the master that owns their slot (as the store's map
// has it), and each group is pipelined to its master on one connection; every pipeline is
// written out before any reply is read, so the masters work in parallel (one round trip).
// An operation answered with MOVED, ASK, TRYAGAIN, CLUSTERDOWN or NOSCRIPT did not run: it is
// sent again on its own and routed exactly as its single call would be. A pipeline that could
// not be sent (node unreachable) is run operation by operation the same way. If a connection
// fails after its commands were sent, its writes without a reply are kUnknown and its reads
// kUnavailable. With wait_replicas, one WAIT follows each master's scripts.
//
// Replication is asynchronous in Redis. With wait_replicas = N > 0, every write is followed, in
// the same round trip, by WAIT N wait_timeout; a write that fewer than N replicas acknowledged
// in time fails with kUnknown (it did run on the master, and may survive or be lost if that
// master fails). With N = 0 a write is acknowledged when the master has run it: a failover
// can then lose acknowledged writes and hand out a revision again, which breaks litetx's
// guarantees. See docs/redis.md for what is and is not safe on failover.
//
// Errors (as RedisStore's):
//   kUnavailable  no node could be reached, the slot map could not be read or does not cover
//                 a slot, a command failed before it was sent completely, a read failed for
//                 any I/O reason, redirects exceeded `max_redirects`, or a node refused the
//                 command before running it (CLUSTERDOWN, TRYAGAIN past the timeout, OOM, ...).
//   kUnknown      a write was sent and its reply was lost (timeout, dropped connection), or the
//                 WAIT that followed it counted fewer than wait_replicas replicas.
//   kConflict     the script found the key present (create) or absent / at another revision.
//   kCorruption   a reply of an unexpected type, a damaged document, a key of the layout
//                 holding another Redis type.
//   kInvalidArgument  bad options, a collection containing '}', a value nested too deep or
//                 holding a NaN or an infinity; at Open, a server that is not in cluster mode,
//                 or a format marker that does not match `buckets`.
//
// Ownership: RedisClusterStore::Open returns a shared_ptr; the store owns its connections. No
// operation may be running on the store when it is destroyed.
//
// Thread safety: every method may be called from any number of threads at once. Each node has
// its own pool of at most `pool_size` connections; the slot map is read under a shared lock and
// replaced under an exclusive one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "litetx/redis_store.h"
#include "litetx/store.h"

namespace spdlog {
class logger;
}

namespace litetx {

// A node address.
struct RedisNode {
  std::string host;
  int port = 0;
};

struct RedisClusterOptions {
  // Nodes to ask for the slot map at Open (any master or replica of the cluster); 1 or more.
  std::vector<RedisNode> seeds{{"127.0.0.1", 7000}};
  // Prepended to every key; must not contain '{' or '}'.
  std::string prefix = "ltx:";
  // Buckets per collection: the number of slots one collection spreads over. Fixed for the
  // data's lifetime (recorded in <prefix>format).
  std::size_t buckets = 64;
  // Most connections open at once to each node. 1 or more.
  std::size_t pool_size = 8;
  // Bound on establishing one TCP connection; positive.
  std::chrono::milliseconds connect_timeout{1000};
  // Bound on each send and each wait for a reply; positive. A write whose reply does not come
  // in time fails with kUnknown.
  std::chrono::milliseconds command_timeout{2000};
  // Replicas that must acknowledge each write (WAIT) before it is reported done; 0: none.
  int wait_replicas = 0;
  // How long WAIT waits for those replicas: positive and shorter than command_timeout.
  std::chrono::milliseconds wait_timeout{500};
  // Redirects (MOVED, ASK) and TRYAGAIN retries followed for one command before kUnavailable.
  int max_redirects = 16;
  // Receives warnings (redirects, topology changes, connections discarded); null: silent.
  std::shared_ptr<spdlog::logger> logger;
};

class RedisClusterStore final : public Store {
 public:
  // Reads the slot map from the first seed that answers, loads the write scripts on every
  // master, and checks or writes the format marker. kUnavailable if no seed answers or the
  // map does not cover every slot; kInvalidArgument for bad options, a node that is not in
  // cluster mode, a master whose maxmemory-policy is allkeys-*, or a marker with another
  // bucket count or not litetx's (then nothing is written).
  static Result<std::shared_ptr<RedisClusterStore>> Open(RedisClusterOptions options = {});

  ~RedisClusterStore() override;
  RedisClusterStore(const RedisClusterStore&) = delete;
  RedisClusterStore& operator=(const RedisClusterStore&) = delete;

  Result<std::optional<StoredDocument>> Get(const Key& key) override;
  Result<Revision> Create(const Key& key, const boost::json::object& value) override;
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override;
  Status Erase(const Key& key, Revision expected) override;
  // All masters' bucket indexes at once (one pipelined round trip per master, overlapped),
  // merged in id order, then the page's documents the same way. Not a snapshot.
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override;
  // RedisStore's SCAN on every master of the current slot map, the names merged, deduplicated
  // and sorted. O(keys in the cluster) per call: an administrative operation. kUnavailable if
  // a master cannot be read.
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override;
  // The operations grouped by the master of their slot, one pipeline per master, all masters
  // at once (see the comment at the top).
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override;

  // CRC16 (XMODEM) of the key's hash tag (or the whole key) modulo 16384, as Redis computes it.
  static int SlotOf(std::string_view key);

  // Counters since Open, for tests and monitoring.
  struct Stats {
    std::uint64_t moved = 0;          // MOVED replies followed
    std::uint64_t ask = 0;            // ASK replies followed
    std::uint64_t tryagain = 0;       // TRYAGAIN replies waited out
    std::uint64_t topology_refreshes = 0;  // slot maps read (Open's included)
  };
  Stats stats() const;

  const RedisClusterOptions& options() const;

  // Implementation detail; defined in redis_cluster_store.cpp.
  struct Impl;

 private:
  explicit RedisClusterStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace litetx
