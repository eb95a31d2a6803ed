#include "engine/reads.h"

#include "engine/outcomes.h"
#include "engine/repair.h"

#include "engine/meta.h"
#include "engine/record.h"
#include "engine/repair.h"
#include "engine/worklist.h"

namespace litetx::engine {

namespace {

ReadResult RawImage(const boost::json::object& stored, const Meta& meta) {
  ReadResult r;
  r.txn = meta.txn;
  r.deleting = meta.deleting;
  r.last_writer = meta.last_writer;
  if (meta.gone) return r;
  r.version = meta.version;
  if (meta.deleted) {
    r.state = DocumentState::kDeleted;
    return r;
  }
  r.state = DocumentState::kFound;
  r.schema_version = meta.schema_version;
  r.doc = UserFields(stored);
  return r;
}

}  // namespace

Result<ReadResult> ReadDocument(const Env& env, const Key& key, Isolation isolation) {
  std::string where = key.collection + "/" + key.id;
  // A holder may finish between our two reads (document, then record): an outcome marker or a
  // record gone (purged after the outcome retention) makes us read the document again. A
  // committed holder gone by then was committed while it held the document: its image is the
  // value. If the same holder is still there, the record read in between came after a read
  // that showed the hold: the hold is dangling (a write that landed after its transaction was
  // over, never part of any outcome), and the document reads as it was before that write, from
  // the hold's own undo data.
  constexpr int kRounds = 8;
  std::string over;  // a holder whose record was found gone or aborted and over after the document read
  for (int round = 0; round < kRounds; ++round) {
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    if (!g->has_value()) return ReadResult{};
    const StoredDocument& doc = **g;
    auto meta = DecodeMeta(doc.value);
    if (!meta.ok()) return Status::Corruption(where + ": " + meta.status().message());
    if (isolation == Isolation::kReadUncommitted) return RawImage(doc.value, *meta);
    if (meta->txn.empty()) return CommittedImage(doc.value, *meta);
    if (meta->txn == over) {
      auto undo = UndoOf(key, doc.value);
      if (!undo.ok()) {
        return Status::Corruption(where + " is held by transaction " + over +
                                  ", which is over, and cannot be read through: " +
                                  undo.status().message());
      }
      return PreImage(doc.value, *undo);
    }

    Key record_key{std::string(kTransactionsCollection), meta->txn};
    auto rg = GetRecordDoc(env, meta->txn);
    if (!rg.ok()) return rg.status();
    if (!rg->has_value()) {
      over = meta->txn;
      continue;
    }
    auto record = DecodeRecord((*rg)->value);
    if (!record.ok()) {
      return Status::Corruption("record of transaction " + meta->txn + ": " +
                                record.status().message());
    }
    if (record->done && record->state == TxnState::kCommitted) {
      // A committed outcome marker: the holder finished between our two reads, or its hold is
      // a dangling one (a late write that landed after the finishing). Read the document again:
      // still held by it, the hold is dangling (below); otherwise the holder was committed by
      // the record read and still held the document at the document read, so its image was
      // the committed value at some instant between the two reads.
      auto again = GetWithRetry(env, key);
      if (!again.ok()) return again.status();
      if (!again->has_value()) return CommittedImage(doc.value, *meta);
      auto m = DecodeMeta((**again).value);
      if (!m.ok()) return Status::Corruption(where + ": " + m.status().message());
      if (m->txn != meta->txn) return CommittedImage(doc.value, *meta);
      auto undo = UndoOf(key, (**again).value);
      if (!undo.ok()) {
        return Status::Corruption(where + " is held by transaction " + meta->txn +
                                  ", which is over, and cannot be read through: " +
                                  undo.status().message());
      }
      return PreImage((**again).value, *undo);
    }
    if (record->done) {
      // Aborted (or a fence): reversed since, or a dangling hold. Read the document again: a
      // reversed document has its own, newer version.
      over = meta->txn;
      continue;
    }
    if (record->state == TxnState::kCommitted) return CommittedImage(doc.value, *meta);
    if (record->large) {
      // Pending or aborted: not committed when the record was read, and the document was held
      // before that. Its own undo data gives the image before the transaction.
      auto undo = UndoOf(key, doc.value);
      if (!undo.ok()) return Status::Corruption(where + ": " + undo.status().message());
      return PreImage(doc.value, *undo);
    }
    const WorkAction* work = record->Find(key);
    if (work == nullptr) {
      return Status::Corruption(where + " is held by transaction " + meta->txn +
                                " whose worklist does not name it");
    }
    if (record->state == TxnState::kStaging) {
      // Committed once every listed document is held while the record stays staging: prove it
      // (and record it: compare-and-swap to committed), then read it again as committed.
      auto proved = ResolveStaging(env, meta->txn, *record, (*rg)->revision, /*fence=*/false,
                                   "reader", env.clock.NowMillis());
      if (!proved.ok()) return proved.status();
      // Proved and recorded committed: committed no earlier than the document read showed it
      // held, and nobody else can write it before the hold is cleared — its image is the value.
      if (proved->has_value()) return CommittedImage(doc.value, *meta);
      // A document was not held. If the record is still staging at the revision read, no hold
      // could have ended in between: the transaction was not committed when that document was
      // read, and this read is ordered before it. Otherwise look again.
      auto again = GetRecordDoc(env, meta->txn);
      if (!again.ok()) return again.status();
      if (!again->has_value() || (*again)->revision != (*rg)->revision) continue;
    }
    return PreImage(doc.value, *work);
  }
  return Status::Unavailable(where + " kept changing hands while being read");
}

}  // namespace litetx::engine
