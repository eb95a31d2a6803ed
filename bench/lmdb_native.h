// bench/lmdb_native.h — the "native alternative" of `litetx bench` on lmdb: what LMDB itself
// offers for N documents at once, with no litetx in the way: one LMDB write transaction that
// reads each of N documents, adds 1 to its "balance" and writes it back (mdb_get, JSON parse,
// JSON serialise, mdb_put), then commits, with the durability of the litetx store it is
// compared with. LMDB makes the N writes atomic itself, but only inside one LMDB environment
// on one machine: it is the lower bound on cost, not a replacement.
//
// It runs in an environment of its own, in a fresh directory (LMDB allows one environment per
// directory and process, and the litetx store holds the benchmark's one), on the same
// filesystem when the directory is put beside the store's. bench::Run measures it in slices
// alternating with the litetx rows (Config::native), so that both see the same disk.
//
// Thread safety: Transact from one thread at a time (the benchmark measures it on one).
#pragma once

#include <memory>
#include <string>

#include "litetx/lmdb_store.h"
#include "litetx/status.h"

namespace litetx::bench {

class NativeLmdb {
 public:
  // Creates `dir` (it must not exist), opens an LMDB environment there with the flags
  // LmdbStore uses for `durability` (MDB_NOTLS, plus MDB_NOMETASYNC or MDB_NOSYNC) and inserts
  // `max_n` documents shaped like the benchmark's ({"balance":0,"owner":"d<i>"}).
  // kUnavailable if the directory or the environment cannot be set up (`dir` is then removed
  // if it was created).
  static Result<std::unique_ptr<NativeLmdb>> Open(const std::string& dir,
                                                  LmdbDurability durability, int max_n);
  // Closes the environment and removes the directory.
  ~NativeLmdb();
  NativeLmdb(const NativeLmdb&) = delete;
  NativeLmdb& operator=(const NativeLmdb&) = delete;

  // One write transaction of read-modify-writes of documents d0..d(n-1), committed.
  // REQUIRES: 1 <= n <= max_n.
  Status Transact(int n);

  const std::string& dir() const { return dir_; }

 private:
  struct Env;
  NativeLmdb(std::string dir, std::unique_ptr<Env> env);
  std::string dir_;
  std::unique_ptr<Env> env_;
  std::string text_;  // the serialised document, reused
};

}  // namespace litetx::bench
