// bench/redis_native.h — the "native alternative" row of `litetx bench` on redis:// and
// redis-cluster:// (on the master of the keys' slot, found by following MOVED): what
// Redis itself offers for N writes at once, with no litetx in the way. One MULTI, N HSETs of
// the document shape RedisStore writes (fields v and r) on N keys sharing one hash tag (one
// slot, as a cluster would require), EXEC; sent pipelined, one round trip per transaction, on
// one connection. It has none of litetx's guarantees across slots or of its checks (no
// revision compare, no collector): it is the lower bound on cost, not a replacement.
//
// Thread safety: each call opens and closes its own connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "bench/bench.h"

namespace litetx::bench {

struct NativeRedisRow {
  int n = 0;          // writes per MULTI/EXEC
  Measured tx;        // transactions: ops, ops/s, latency
};

// Measures MULTI + n HSET + EXEC on host:port (database db) for `duration` (after an untimed
// warm-up of a tenth of it, at most 200 ms), on keys "<key_prefix>{bench.native.<pid>}:<i>",
// deleted afterwards. kUnavailable if the server cannot be reached.
Result<NativeRedisRow> MeasureRedisMultiExec(const std::string& host, int port, int db,
                                             const std::string& key_prefix, int n,
                                             std::chrono::milliseconds duration);

}  // namespace litetx::bench
