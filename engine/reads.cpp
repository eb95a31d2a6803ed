#include "engine/reads.h"

#include "engine/meta.h"
#include "engine/record.h"
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
  // A holder may finish between our two reads (document, then record); then read again.
  constexpr int kRounds = 4;
  std::string vanished;
  for (int round = 0; round < kRounds; ++round) {
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    if (!g->has_value()) return ReadResult{};
    const StoredDocument& doc = **g;
    auto meta = DecodeMeta(doc.value);
    if (!meta.ok()) return Status::Corruption(where + ": " + meta.status().message());
    if (isolation == Isolation::kReadUncommitted) return RawImage(doc.value, *meta);
    if (meta->txn.empty()) return CommittedImage(doc.value, *meta);

    Key record_key{std::string(kTransactionsCollection), meta->txn};
    auto rg = GetWithRetry(env, record_key);
    if (!rg.ok()) return rg.status();
    if (!rg->has_value()) {
      if (vanished == meta->txn) break;  // still referenced, record still gone
      vanished = meta->txn;
      continue;
    }
    auto record = DecodeRecord((*rg)->value);
    if (!record.ok()) {
      return Status::Corruption("record of transaction " + meta->txn + ": " +
                                record.status().message());
    }
    if (record->done) {
      // The holder finished (or was rolled back) between our two reads: the record is an
      // outcome marker now, so the document was settled meanwhile. Read it again.
      if (vanished == meta->txn) break;
      vanished = meta->txn;
      continue;
    }
    if (record->state == TxnState::kCommitted) return CommittedImage(doc.value, *meta);
    const WorkAction* work = record->Find(key);
    if (work == nullptr) {
      return Status::Corruption(where + " is held by transaction " + meta->txn +
                                " whose worklist does not name it");
    }
    return PreImage(doc.value, *work);
  }
  return Status::Corruption(where + " is held by transaction " + vanished +
                            " whose record is gone or already settled");
}

}  // namespace litetx::engine
