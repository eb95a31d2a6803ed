// litetx/lmdb_store.h — a durable, embedded Store on LMDB (the default backend).
//
// What it is for: running litetx in one or several processes on one machine with the data in
// a local directory, without a server. Each Store operation is atomic on exactly one document
// (plus the store's revision counter); several operations may share one LMDB transaction
// (a Batch, and group commit of concurrent writers: see Batch below), but litetx never relies
// on LMDB changing several documents atomically, so everything it does here it can do on any
// single-document-atomic backend.
//
// On-disk format (one unnamed LMDB database in `path`/data.mdb, lock file `path`/lock.mdb):
//   key   = collection + '\0' + id            (collections must not contain '\0')
//   value = revision as 8 bytes little-endian, followed by the document's JSON text
//           (boost::json::serialize's, whose doubles are the shortest text that reads back
//           to the same bits; it is read back exactly, so every int64, uint64 and finite
//           double, -0.0 included, round-trips bit for bit)
//   key "\x01rev" (no '\0', so no document key can equal it) holds the last revision handed
//   out, as 8 bytes little-endian. It is incremented in the same LMDB transaction as every
//   create and replace, so revisions are never reused: not after erase + create, not across
//   reopenings, not between processes.
// Keys are limited by LMDB to 511 bytes (collection + 1 + id); longer keys are refused
// (kInvalidArgument) by Create/Replace and are absent for Get/Erase/Scan.
//
// Ownership: LmdbStore::Open returns a shared_ptr. The LMDB environment (memory map, file
// descriptors, lock-table slots) lives until the last LmdbStore on that directory in this
// process is destroyed; the destructor closes every LMDB handle. LMDB forbids opening one
// environment twice in one process (closing either copy would drop the other's POSIX locks),
// so Open on a directory that this process already has open shares the one environment
// (stores opened that way must ask for the same durability).
//
// Thread safety: every method may be called from any number of threads at once. The
// environment is opened with MDB_NOTLS; writers of this process are combined into shared
// write transactions (group commit), writers of different processes are serialised by LMDB's
// write lock, readers run in parallel. A std::shared_mutex (shared for operations, exclusive
// only while the memory map is resized) guarantees that no transaction of this process is open
// during a resize.
//
// Multi-process use: any number of processes may open the same directory at the same time;
// LMDB's lock file serialises their writers and tracks their readers, and compare-and-swap is
// exact across processes. The memory map grows on demand (doubling on MDB_MAP_FULL); a process
// whose map is smaller than what another process grew the data to adopts the new size
// (MDB_MAP_RESIZED) and retries. Local filesystems only (LMDB does not work over NFS/SMB).
// After fork(), the child must not use stores its parent opened; it opens its own (the
// parent's environment is left untouched in the child, never closed there).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "litetx/store.h"

namespace litetx {

// How hard a commit works to reach the disk before Create/Replace/Erase return. All three keep
// every committed write safe from a crash of the process itself (kill -9, abort): the data is
// in the OS page cache, which the kernel writes back. They differ on an OS crash or power loss.
enum class LmdbDurability {
  // The default. Every write is fsynced (data pages, then the meta page) before it returns:
  // once a write returned OK it survives a process crash, an OS crash and a power loss
  // (provided the disk honours flushes).
  kDurable,
  // MDB_NOMETASYNC: data pages are fsynced on every commit, the meta page that makes the
  // commit visible is not (it reaches the disk with the next commit's sync, Sync() or the
  // kernel's write-back). Survives a process crash; an OS crash or power loss may undo the
  // last committed transaction(s) not yet flushed that way, but does not corrupt the database
  // (LMDB keeps atomicity, consistency, isolation; loses durability). Half an fsync per write.
  kNoMetaSync,
  // MDB_NOSYNC: nothing is fsynced at commit; the kernel writes back when it likes (Sync()
  // forces it). Survives a process crash. An OS crash or power loss may lose recent writes
  // and, on filesystems that do not preserve write order, corrupt the database.
  kNoSync,
};

struct LmdbOptions {
  // See LmdbDurability. Fixed per environment: every store this process opens on one
  // directory at the same time must use the same value (other processes may differ; each
  // process's setting governs its own commits).
  LmdbDurability durability = LmdbDurability::kDurable;
  // Memory map (= maximum database size) to start with, rounded up to whole OS pages. Not a
  // limit: the map doubles whenever it is full, and a store reopened after growing keeps the
  // grown size. Costs address space, not memory or disk.
  std::size_t initial_map_bytes = std::size_t{64} << 20;
  // Largest stored value (8-byte revision + JSON text); larger Create/Replace calls fail with
  // kInvalidArgument and write nothing. Per LmdbStore object.
  std::size_t max_value_bytes = std::size_t{16} << 20;
  // Create `path` (and its parents) if it does not exist. When false, Open fails with
  // kInvalidArgument unless `path` already holds an LMDB database (data.mdb).
  bool create_if_missing = true;
  // LMDB reads through a memory map of the database file, so every page this process has
  // touched stays mapped and counts in its resident set (RSS) until the kernel needs the
  // memory: a process that goes through a large database once (an import, a full scan) shows
  // an RSS the size of the file, although those pages are the kernel's file cache, not memory
  // it holds. When this is non-zero, every 64 operations of this store object (a batch counts
  // its operations) look at the process's resident file-backed pages (/proc/self/statm, all
  // mapped files together) and, once they have grown by more than this many bytes since the
  // store was opened or last released them, call ReleaseMappedPages. A page used again
  // afterwards is mapped again from the file cache (a minor page fault, no disk read). The RSS
  // can exceed the limit by what one batch maps. 0: no limit (the default;
  // ReleaseMappedPages can still be called).
  std::size_t max_mapped_bytes = 0;
};

class LmdbStore final : public Store {
 public:
  // Opens (or creates) the store in directory `path`. Errors, each naming the path and, for
  // LMDB or system errors, the mdb_strerror text:
  //   kInvalidArgument  path empty, not a directory (e.g. a regular file), missing (when not
  //                     create_if_missing), not accessible (permissions, read-only
  //                     filesystem), or already open in this process with another durability;
  //   kCorruption       data.mdb exists but is not an LMDB file (MDB_INVALID) or is damaged;
  //   kFailedPrecondition  the files were written by an incompatible LMDB version;
  //   kUnavailable      anything else (out of memory, lock file busy, ...): may be retried.
  static Result<std::shared_ptr<LmdbStore>> Open(const std::string& path,
                                                 LmdbOptions options = {});

  ~LmdbStore() override;
  LmdbStore(const LmdbStore&) = delete;
  LmdbStore& operator=(const LmdbStore&) = delete;

  // Returns the document, std::nullopt if absent, kCorruption if the stored value is shorter
  // than 8 bytes, not a JSON object, or nested deeper than kMaxStoredNestingDepth
  // (litetx/document.h; this store never writes such a value), kUnavailable on an LMDB failure
  // (e.g. reader table full).
  Result<std::optional<StoredDocument>> Get(const Key& key) override;
  // Returns the new revision; kConflict if the key exists; kInvalidArgument for an oversized
  // value, a value nested deeper than kMaxStoredNestingDepth or holding a NaN or an infinity
  // (JSON text cannot hold them), a key over 511 bytes or a collection containing '\0'
  // (nothing is written); kUnavailable if nothing was written (LMDB error, disk full);
  // kUnknown if the commit failed in a way that leaves its outcome open (an I/O error while
  // syncing); kCorruption if the revision counter is damaged.
  Result<Revision> Create(const Key& key, const boost::json::object& value) override;
  // Returns the new revision if the stored revision is `expected`; kConflict if absent or
  // another revision; kCorruption if the stored value is too short to hold a revision; the
  // other errors as Create. Only the revision is checked: a document whose JSON is damaged can
  // be overwritten.
  Result<Revision> Replace(const Key& key, Revision expected,
                           const boost::json::object& value) override;
  // OK if the stored revision was `expected` and the document is gone; kConflict if absent or
  // another revision; kCorruption, kUnavailable, kUnknown as Replace.
  Status Erase(const Key& key, Revision expected) override;
  // One read transaction per page: the page is a consistent snapshot, successive pages are
  // not. Ascending id (byte-wise), strictly after `cursor`. kCorruption if any value on the
  // page cannot be decoded; kUnavailable on an LMDB failure.
  Result<ScanPage> Scan(std::string_view collection, std::string_view cursor,
                        std::size_t limit) override;
  // One read transaction; from each collection it seeks past the collection's last possible
  // key to the next one, so the cost grows with the collections listed, not their documents.
  Result<CollectionPage> ListCollections(std::string_view cursor, std::size_t limit) override;

  // A batch of reads runs in one read transaction (a consistent snapshot). A batch with writes
  // runs all its operations, in order, in one write transaction (its reads see the writes
  // before them); an operation that fails its condition or is refused fails alone. An LMDB
  // error that aborts the transaction fails every operation of it with kUnavailable and writes
  // nothing (a commit whose outcome is open: kUnknown for the writes).
  //
  // Group commit (kDurable and kNoMetaSync, where a commit syncs): writes of concurrent callers
  // (single Create/Replace/Erase calls and batches alike) are combined into one write
  // transaction with one commit (in kDurable mode, one fsync for all of them): the caller that finds no transaction under way writes at once,
  // taking along whatever arrived before it started; the callers that arrive meanwhile wait
  // for the next one. A lone caller waits for nobody. If such a shared transaction fails as a
  // whole (not a failed condition: an LMDB error), each caller's operations are run again in
  // a transaction of their own, so that one caller's failure never becomes another's. In
  // kNoSync mode a commit syncs nothing, so there is nothing to share: each caller runs its own
  // write transaction (handing results between threads would cost more than it saves).
  std::vector<BatchResult> Batch(std::span<const BatchOp> ops) override;

  // Write transactions this process has committed on this store's directory (shared by the
  // stores of this process on it). With group commit, fewer than the writes. For tests and
  // monitoring.
  std::uint64_t write_transactions() const;

  // Forces everything committed so far to disk (mdb_env_sync with force): after OK, the
  // kNoSync and kNoMetaSync modes have the guarantee of kDurable for earlier writes.
  // kUnavailable on an I/O error.
  Status Sync();

  // Unmaps from this process the pages of the database file it has mapped (madvise
  // MADV_DONTNEED on each shared mapping of data.mdb that /proc/self/maps lists: LMDB's map,
  // shared by the stores of this process on this directory):
  // they leave its resident set; the data stays in the file and in the kernel's page cache,
  // and the next access maps a page again. Safe at any time, concurrently with any operation.
  // OK, or kUnavailable if the map is gone (a failed resize) or madvise failed.
  Status ReleaseMappedPages();

  // The directory given to Open.
  const std::string& path() const;
  // This process's current memory map size in bytes (grows as the database grows). For tests
  // and monitoring.
  std::size_t map_bytes() const;

  // Implementation detail: the LMDB environment shared by the stores of this process on one
  // directory; defined in lmdb_store.cpp.
  struct Env;

 private:
  LmdbStore(std::shared_ptr<Env> env, std::string path, LmdbOptions options);

  // Counts `ops` operations towards the next look at LmdbOptions::max_mapped_bytes.
  void CountOperations(std::size_t ops);

  std::shared_ptr<Env> env_;
  std::string path_;
  LmdbOptions options_;
  std::atomic<std::uint64_t> operations_{0};    // counted for max_mapped_bytes
  std::atomic<std::uint64_t> mapped_floor_{0};  // mapped bytes after the last release
};

}  // namespace litetx
