// bench/lmdb_native.h — the "native alternative" rows of `litetx bench` on lmdb: what LMDB
// itself offers for N documents at once, with no litetx in the way: one LMDB write
// transaction that reads each of N documents, adds 1 to its "balance" and writes it back
// (mdb_get, JSON parse, JSON serialise, mdb_put), then commits, with the durability of the
// litetx store it is compared with. LMDB makes the N writes atomic itself, but only inside
// one LMDB environment on one machine: it is the lower bound on cost, not a replacement.
//
// It runs in an environment of its own, in a fresh directory (LMDB allows one environment per
// directory and process, and the litetx store holds the benchmark's one), on the same
// filesystem; the directory is removed afterwards.
//
// Thread safety: one call at a time per directory; each call opens and closes its environment.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "litetx/lmdb_store.h"

namespace litetx::bench {

struct NativeLmdbRow {
  int n = 0;    // documents per LMDB write transaction
  Measured tx;  // transactions: ops, ops/s, latency (1 thread)
};

// Creates `dir` (it must not exist), opens an LMDB environment there with the flags LmdbStore
// uses for `durability` (MDB_NOTLS, plus MDB_NOMETASYNC or MDB_NOSYNC), inserts max(sizes)
// documents shaped like the benchmark's ({"balance":0,"owner":"d<i>"}), and measures, for each
// n in `sizes`, read-modify-write transactions of n of them on one thread for `duration`
// (after an untimed warm-up of a tenth of it, at most 200 ms). `stop` (may be null) is polled
// between transactions; when it returns true the rows measured so far are returned. Removes
// `dir` in every case. kUnavailable if the directory or the environment cannot be set up.
Result<std::vector<NativeLmdbRow>> MeasureLmdbNative(const std::string& dir,
                                                     LmdbDurability durability,
                                                     const std::vector<int>& sizes,
                                                     std::chrono::milliseconds duration,
                                                     const std::function<bool()>& stop);

}  // namespace litetx::bench
