// engine/large.h — large transactions: a worklist of any size, in chunk documents.
//
// The record of a large transaction ("large": true) lists no actions; it counts its chunk
// documents ("chunks": n). Chunk k is stored in kChunksCollection under "<txn id>.<k>":
//   {"txn": id, "k": k, "a": [{"c": collection, "id": id, "rev": n}, ...]}
// one entry per document of the chunk, with the store revision read before it was touched
// ("rev" absent: the document did not exist). Reversing data is not in the chunk: every held
// document carries its own ("_ltx.u", engine/worklist.h UndoOf).
//
// The coordinator (LargeRun) writes, for each chunk, in this order:
//   1. reads the chunk's documents (one batch) and prepares them;
//   2. CAS of the record: chunks = k + 1 and the lease pushed out (fails once claimed);
//   3. creates chunk document k;
//   4. applies the chunk's documents (one batch of CAS on the revisions read).
// then the commit flip (pending -> committed), then the finishing pass, chunk by chunk, and the
// outcome marker. A document changed between 1 and 4 is read again and its chunk entry
// rewritten (CAS on the chunk document) before it is applied again.
//
// Settling (SettleLarge), by the coordinator itself or any repairer, for each chunk k < chunks:
//   committed: every listed document still held is finished; then the chunk document is erased
//              (absent: already done);
//   aborted:   every listed document still held is reversed from its own undo data, and every
//              one still at the revision read is fenced (as ReverseDocument); then the chunk
//              document is replaced by a stub {"txn", "k", "fence": true}. An absent chunk
//              document is created as such a stub, so that a late create of a paused
//              coordinator fails (it then learns it was rolled back), and it never applies a
//              document the stub's chunk would have listed.
// Each chunk step ends with a CAS on the chunk document as read, so a coordinator that
// rewrote an entry meanwhile makes the repairer look at the chunk again. Then the outcome
// marker; the stubs are erased with the marker when the outcome retention has passed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "engine/env.h"
#include "engine/lease_keeper.h"
#include "engine/record.h"
#include "litetx/large_transaction.h"
#include "litetx/status.h"
#include "litetx/store.h"

namespace litetx::engine {

inline constexpr std::string_view kChunksCollection = "__litetx.chunk";

// The key of chunk `k` of transaction `txn_id`.
Key ChunkKey(const std::string& txn_id, std::uint64_t k);

struct ChunkEntry {
  Key key;
  bool existed = false;  // the document existed when read (rev is its revision)
  Revision rev = 0;
};

struct Chunk {
  std::string txn;
  std::uint64_t k = 0;
  bool fence = false;  // a stub: settled (aborted), or fenced before its coordinator wrote it
  std::vector<ChunkEntry> entries;
};

boost::json::object EncodeChunk(const Chunk& chunk);
// kCorruption if `stored` is not a well-formed chunk document.
Result<Chunk> DecodeChunk(const boost::json::object& stored);

// What SettleLarge did.
enum class LargeSettle : std::uint8_t {
  kDone,   // every chunk settled and the outcome marker written
  kMoved,  // the record is no longer at `rev` (someone else settled it, or wrote the marker)
};

// Settles the committed or aborted large transaction `txn_id` whose record is `record` at
// `rev` (see above), starting at chunk `start` % chunks and wrapping around (repairers start at
// different chunks to share the work), then writes the outcome marker. OK with what it did,
// or kUnavailable (the store kept failing: the rest is left for the next attempt; every step
// done stays done), kCorruption (a chunk document or a document cannot be decoded).
// REQUIRES: record.large, record.state is kCommitted or kAborted, !record.done.
Result<LargeSettle> SettleLarge(const Env& env, const std::string& txn_id,
                                const TxnRecord& record, Revision rev, std::uint64_t start,
                                std::int64_t now_ms);

// Erases the stubs left by settling the aborted large transaction `record` (an outcome marker
// being purged). OK, or kUnavailable.
Status EraseChunkStubs(const Env& env, const std::string& txn_id, const TxnRecord& record);

// The coordinator of one LargeTransaction (litetx/large_transaction.h has the contract).
class LargeRun {
 public:
  // Writes the record (pending, large) and returns the run; kUnavailable / kUnknown.
  static Result<std::unique_ptr<LargeRun>> Begin(const Env& env,
                                                 LargeTransactionOptions options);
  ~LargeRun();
  LargeRun(const LargeRun&) = delete;
  LargeRun& operator=(const LargeRun&) = delete;

  const std::string& id() const { return id_; }
  // put: an insert that replaces a live document instead (LargeTransaction::Put).
  Status Add(Action action, std::uint64_t tag, bool put = false);
  Result<LargeCommitInfo> Commit();
  Status Settle();
  Status Rollback();
  std::uint64_t added() const { return added_; }

 private:
  enum class Phase : std::uint8_t { kOpen, kFailed, kCommitted, kRolledBack, kUnknown };
  struct Item {
    Action action;
    std::uint64_t tag = 0;
    bool put = false;
  };
  struct Slot;

  LargeRun(const Env& env, LargeTransactionOptions options);

  Status WriteRecord();
  // OK while open; otherwise what every call returns: the failure, or kFailedPrecondition.
  Status NotOpen() const;
  Status FlushChunk();
  // Prepares one item against `current` (its document as read, free for writing). OK and the
  // slot filled, or the item's own failure (to skip or to fail the transaction), or a
  // transaction failure (kCorruption).
  Status PrepareItem(Item& item, const std::optional<StoredDocument>& current, Slot& slot);
  // True if `s` is a failure of one action on its document (skippable).
  static bool ActionFailure(Code c);
  // An action failure: skipped (OK) or the transaction's failure.
  Status OnActionFailure(const Item& item, const Status& why);
  // Create / rewrite of the current chunk document (chunks_ - 1); kAborted once a repairer
  // fenced or settled it.
  Status CreateChunk(const boost::json::object& value);
  Status ReplaceChunk(const boost::json::object& value);
  // Applies one slot after its batch write failed with `first`.
  Status ApplyOne(Slot& slot, Chunk& chunk, std::size_t index, Status first);
  // The transaction failed with `why`: rolls back (if anything may have been written) and
  // remembers `why` for every later call.
  Status Fail(Status why);
  Status SettleAs(TxnState state);
  // CAS of the record to `change` applied to it; kAborted once someone else wrote it.
  Status UpdateRecord(const std::function<bool(TxnRecord&)>& change, bool* unknown = nullptr);
  void Renew();

  Env env_;
  LargeTransactionOptions options_;
  std::string id_;
  Key record_key_;
  std::int64_t priority_ms_ = 0;

  std::mutex record_mu_;  // guards record_, record_revision_, lease_lost_ (the lease keeper)
  TxnRecord record_;
  Revision record_revision_ = 0;
  Status lease_lost_;
  // Record values whose write's reply was lost: found in the store later, they are ours.
  std::vector<boost::json::object> record_in_doubt_;

  std::vector<Item> buffer_;
  std::uint64_t chunks_ = 0;     // chunks counted in the record (this thread's copy)
  Revision chunk_revision_ = 0;  // of the chunk being applied
  Phase phase_ = Phase::kOpen;
  Status error_;
  std::uint64_t added_ = 0;
  std::uint64_t written_ = 0;
  std::uint64_t skipped_ = 0;
  bool settled_ = false;
  LeaseKeeper::Handle renewal_;  // last: it ends first
};

}  // namespace litetx::engine
