#include "engine/large.h"

#include <algorithm>
#include <set>
#include <utility>

#include <boost/json.hpp>

#include "engine/contention.h"
#include "engine/json_text.h"
#include "engine/meta.h"
#include "engine/repair.h"
#include "engine/txn_id.h"
#include "engine/validate.h"
#include "engine/worklist.h"
#include "litetx/document.h"

namespace litetx::engine {
namespace json = boost::json;

namespace {

// How often one document may be found changed under a chunk before the transaction gives up.
constexpr int kMaxRaces = 8;

Key RecordKey(const std::string& txn_id) {
  return Key{std::string(kTransactionsCollection), txn_id};
}

json::object Stub(const std::string& txn_id, std::uint64_t k) {
  Chunk c;
  c.txn = txn_id;
  c.k = k;
  c.fence = true;
  return EncodeChunk(c);
}

// The single-document fallback of SettleEntries for entry `e`.
Status SettleOne(const Env& env, const std::string& txn_id, const ChunkEntry& e, bool committed,
                 std::int64_t now_ms) {
  if (committed) return FinishDocument(env, e.key, txn_id, now_ms);
  WorkAction fence;
  fence.key = e.key;
  fence.existed = e.existed;
  fence.read_revision = e.rev;
  return ReverseDocument(env, fence, txn_id, now_ms, /*undo_from_document=*/true);
}

// Finishes (committed) or reverses and fences (aborted) every document `chunk` lists: one batch
// of reads, one batch of writes; a write that does not land is settled on its own
// (FinishDocument / ReverseDocument, which read again).
Status SettleEntries(const Env& env, const std::string& txn_id, const Chunk& chunk,
                     bool committed, std::int64_t now_ms) {
  std::vector<BatchOp> reads;
  reads.reserve(chunk.entries.size());
  for (const ChunkEntry& e : chunk.entries) reads.push_back(BatchOp::Get(e.key));
  std::vector<BatchResult> got = env.store.Batch(reads);

  std::vector<json::object> values;  // the writes' values (BatchOp does not own them)
  values.reserve(chunk.entries.size());
  std::vector<BatchOp> writes;
  std::vector<std::size_t> which;  // entry of each write
  std::vector<std::size_t> single;  // entries settled on their own
  for (std::size_t i = 0; i < chunk.entries.size(); ++i) {
    const ChunkEntry& e = chunk.entries[i];
    if (i >= got.size() || !got[i].status.ok()) {
      single.push_back(i);
      continue;
    }
    std::optional<StoredDocument>& doc = got[i].document;
    if (!doc) {
      if (committed || e.existed) continue;  // nothing to finish; a Replace cannot land on nothing
      single.push_back(i);                   // the "gone" fence: ReverseDocument creates it
      continue;
    }
    auto meta = DecodeMeta(doc->value);
    if (!meta.ok()) return Status::Corruption(Where(e.key) + ": " + meta.status().message());
    if (meta->txn == txn_id) {
      json::object next;
      // The read image is not needed any more: its body is taken over, not copied.
      if (committed) {
        next = Finished(std::move(doc->value), *meta);
      } else {
        auto undo = UndoOf(e.key, doc->value);
        if (!undo.ok()) return undo.status();
        next = Reversed(std::move(doc->value), *meta, *undo);
      }
      StampTombstoneTime(next, now_ms);
      values.push_back(std::move(next));
      writes.push_back(BatchOp::Replace(e.key, doc->revision, values.back()));
      which.push_back(i);
    } else if (!committed && e.existed && doc->revision == e.rev) {
      // Still as the coordinator read it: rewrite it unchanged so that a late apply fails.
      values.push_back(doc->value);
      writes.push_back(BatchOp::Replace(e.key, doc->revision, values.back()));
      which.push_back(i);
    }
  }
  if (!writes.empty()) {
    std::vector<BatchResult> wrote = env.store.Batch(writes);
    for (std::size_t j = 0; j < which.size(); ++j) {
      // Landed: done (a fence is done once its rewrite landed: the revision moved on). Anything
      // else is looked at again on its own.
      if (j < wrote.size() && wrote[j].status.ok()) continue;
      single.push_back(which[j]);
    }
  }
  for (std::size_t i : single) {
    if (Status s = SettleOne(env, txn_id, chunk.entries[i], committed, now_ms); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Key ChunkKey(const std::string& txn_id, std::uint64_t k) {
  return Key{std::string(kChunksCollection), txn_id + "." + std::to_string(k)};
}

json::object EncodeChunk(const Chunk& chunk) {
  json::object o;
  o["txn"] = chunk.txn;
  o["k"] = chunk.k;
  if (chunk.fence) {
    o["fence"] = true;
    return o;
  }
  json::array a;
  a.reserve(chunk.entries.size());
  for (const ChunkEntry& e : chunk.entries) {
    json::object x;
    x["c"] = e.key.collection;
    x["id"] = e.key.id;
    if (e.existed) x["rev"] = e.rev;
    a.emplace_back(std::move(x));
  }
  o["a"] = std::move(a);
  return o;
}

Result<Chunk> DecodeChunk(const json::object& o) {
  auto bad = [](const char* why) { return Status::Corruption(std::string("chunk document ") + why); };
  Chunk c;
  const json::value* txn = o.if_contains("txn");
  const json::value* k = o.if_contains("k");
  if (txn == nullptr || !txn->is_string() || k == nullptr) return bad("lacks txn or k");
  auto kn = json::try_value_to<std::uint64_t>(*k);
  if (!kn) return bad("has a bad k");
  c.txn = std::string(txn->get_string());
  c.k = *kn;
  if (const json::value* f = o.if_contains("fence")) {
    if (!f->is_bool()) return bad("has a bad fence flag");
    c.fence = f->get_bool();
  }
  if (c.fence) return c;
  const json::value* a = o.if_contains("a");
  if (a == nullptr || !a->is_array()) return bad("has no entries");
  c.entries.reserve(a->get_array().size());
  for (const json::value& v : a->get_array()) {
    if (!v.is_object()) return bad("has an entry that is not an object");
    const json::object& x = v.get_object();
    const json::value* col = x.if_contains("c");
    const json::value* id = x.if_contains("id");
    if (col == nullptr || !col->is_string() || id == nullptr || !id->is_string()) {
      return bad("has an entry without c or id");
    }
    ChunkEntry e;
    e.key = Key{std::string(col->get_string()), std::string(id->get_string())};
    // Chunks only ever name user documents: a damaged one must not make a repairer write into
    // litetx's own collections.
    if (!ValidateCollection(e.key.collection).ok() || !ValidateId(e.key.id).ok()) {
      return bad("names an invalid or reserved collection or id");
    }
    if (const json::value* rev = x.if_contains("rev")) {
      auto r = json::try_value_to<std::uint64_t>(*rev);
      if (!r) return bad("has a bad rev");
      e.existed = true;
      e.rev = *r;
    }
    c.entries.push_back(std::move(e));
  }
  return c;
}

Result<LargeSettle> SettleLarge(const Env& env, const std::string& txn_id,
                                const TxnRecord& record, Revision rev, std::uint64_t start,
                                std::int64_t now_ms) {
  const bool committed = record.state == TxnState::kCommitted;
  const Key record_key = RecordKey(txn_id);
  const std::uint64_t n = record.chunks;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t k = n == 0 ? 0 : (start + i) % n;
    // Every chunk step acts on the outcome read: if the record moved on (another repairer
    // wrote the marker), stop.
    auto now = GetWithRetry(env, record_key);
    if (!now.ok()) return now.status();
    if (!now->has_value() || (*now)->revision != rev) return LargeSettle::kMoved;
    const Key chunk_key = ChunkKey(txn_id, k);
    Retry retry(env, env.options.max_attempts);
    for (;;) {
      auto g = GetWithRetry(env, chunk_key);
      if (!g.ok()) return g.status();
      Status w;
      if (!g->has_value()) {
        if (committed) break;  // finished and erased
        // Never written (or its create still on its way): a stub takes the key first.
        auto c = env.store.Create(chunk_key, Stub(txn_id, k));
        w = c.status();
      } else {
        auto chunk = DecodeChunk((*g)->value);
        if (!chunk.ok()) return Status::Corruption(Where(chunk_key) + ": " + chunk.status().message());
        if (chunk->txn != txn_id || chunk->k != k) {
          return Status::Corruption(Where(chunk_key) + ": belongs to another transaction");
        }
        if (chunk->fence) {
          if (committed) {
            return Status::Corruption(Where(chunk_key) + ": a stub under a committed transaction");
          }
          break;  // settled already
        }
        if (Status s = SettleEntries(env, txn_id, *chunk, committed, now_ms); !s.ok()) return s;
        if (committed) {
          w = env.store.Erase(chunk_key, (*g)->revision);
        } else {
          w = env.store.Replace(chunk_key, (*g)->revision, Stub(txn_id, k)).status();
        }
      }
      if (w.ok()) break;
      // Conflict: the chunk changed meanwhile (its coordinator rewrote an entry, or another
      // repairer got there first): look at it again.
      if (w.code() == Code::kConflict) continue;
      if (Transient(w.code()) && retry.Next()) continue;
      return Status::Unavailable("settling " + Where(chunk_key) + ": " + w.ToString());
    }
  }
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto m = env.store.Replace(record_key, rev, EncodeRecord(OutcomeMarker(record, now_ms)));
    if (m.ok()) return LargeSettle::kDone;
    if (m.code() == Code::kConflict) return LargeSettle::kMoved;
    if (m.code() == Code::kUnknown) {
      auto g = GetWithRetry(env, record_key);
      if (!g.ok()) return g.status();
      if (!g->has_value() || (*g)->revision != rev) return LargeSettle::kMoved;
    }
    if (Transient(m.code()) && retry.Next()) continue;
    return Status::Unavailable("writing the outcome marker of " + txn_id + ": " + m.status().ToString());
  }
}

Status EraseChunkStubs(const Env& env, const std::string& txn_id, const TxnRecord& record) {
  if (record.state != TxnState::kAborted) return Status::Ok();  // committed: erased as settled
  for (std::uint64_t k = 0; k < record.chunks; ++k) {
    const Key key = ChunkKey(txn_id, k);
    Retry retry(env, env.options.max_attempts);
    for (;;) {
      auto g = GetWithRetry(env, key);
      if (!g.ok()) return g.status();
      if (!g->has_value()) break;
      Status e = env.store.Erase(key, (*g)->revision);
      if (e.ok() || e.code() == Code::kConflict) continue;  // look again
      if (Transient(e.code()) && retry.Next()) continue;
      return Status::Unavailable("erasing " + Where(key) + ": " + e.ToString());
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// LargeRun

struct LargeRun::Slot {
  Item* item = nullptr;
  std::size_t entry = 0;  // its entry in the chunk
  bool existed = false;
  Revision rev = 0;
  json::object held;
  bool landed = false;
  bool skipped = false;
};

LargeRun::LargeRun(const Env& env, LargeTransactionOptions options)
    : env_(env), options_(std::move(options)), id_(NewTxnId()), record_key_(RecordKey(id_)) {
  options_.chunk_actions = std::clamp<std::size_t>(options_.chunk_actions, 1, 10'000);
  env_.finisher = nullptr;
  buffer_.reserve(options_.chunk_actions);
}

Result<std::unique_ptr<LargeRun>> LargeRun::Begin(const Env& env,
                                                  LargeTransactionOptions options) {
  std::unique_ptr<LargeRun> run(new LargeRun(env, std::move(options)));
  // Not open (nothing to roll back on destruction) until the record is known to be written.
  run->phase_ = Phase::kFailed;
  if (Status s = run->WriteRecord(); !s.ok()) {
    run->error_ = s;
    return std::move(s).WithTxnId(run->id_);
  }
  run->phase_ = Phase::kOpen;
  return run;
}

LargeRun::~LargeRun() {
  renewal_.Reset();
  if (phase_ != Phase::kOpen) return;
  // A destructor must not throw: a store that throws (a test's simulated crash) while this runs
  // during unwinding would end the process. What is not rolled back is the collector's.
  try {
    Status s = Rollback();
    if (!s.ok()) {
      env_.log.warn("large txn {}: rollback on destruction left to the collector: {}", id_,
                    s.ToString());
    }
  } catch (const std::exception& e) {
    env_.log.warn("large txn {}: rollback on destruction failed, left to the collector: {}", id_,
                  e.what());
  }
}

Status LargeRun::WriteRecord() {
  const std::int64_t now = env_.clock.NowMillis();
  priority_ms_ = now;
  record_.state = TxnState::kPending;
  record_.created_ms = now;
  record_.priority_ms = now;
  record_.gc_at_ms = now + env_.options.lease.count();
  record_.large = true;
  record_.chunks = 0;
  const json::object value = EncodeRecord(record_);
  Retry retry(env_, env_.options.max_attempts);
  bool unknown = false;
  for (;;) {
    auto r = env_.store.Create(record_key_, value);
    if (r.ok()) {
      record_revision_ = *r;
      break;
    }
    if (r.code() == Code::kConflict) {
      auto g = GetWithRetry(env_, record_key_);
      if (!g.ok()) return Status::Unknown("the record write's reply was lost: " + g.status().ToString());
      if (g->has_value() && (*g)->value == value) {  // our write whose reply was lost
        record_revision_ = (*g)->revision;
        break;
      }
      return Status::Aborted("the transaction's record was fenced before it was written");
    }
    if (!Transient(r.code())) return r.status();
    unknown = unknown || r.code() == Code::kUnknown;
    if (!retry.Next()) {
      return unknown ? Status::Unknown("the record write's reply was lost: " + r.status().ToString())
                     : Status::Unavailable("could not write the record: " + r.status().ToString());
    }
  }
  if (env_.leases != nullptr) renewal_ = env_.leases->Register([this] { Renew(); });
  return Status::Ok();
}

void LargeRun::Renew() {
  const std::int64_t lease = env_.options.lease.count();
  {
    std::lock_guard<std::mutex> lock(record_mu_);
    if (!lease_lost_.ok() || env_.clock.NowMillis() + lease * 3 / 4 < record_.gc_at_ms) return;
  }
  Status s = UpdateRecord([&](TxnRecord& r) {
    const std::int64_t now = env_.clock.NowMillis();
    if (r.state != TxnState::kPending || now + lease * 3 / 4 < r.gc_at_ms) return false;
    r.gc_at_ms = now + lease;
    return true;
  });
  if (!s.ok() && s.code() != Code::kAborted) {
    env_.log.debug("large txn {}: lease renewal failed ({}); retried next period", id_, s.ToString());
  }
}

Status LargeRun::UpdateRecord(const std::function<bool(TxnRecord&)>& change, bool* unknown) {
  std::lock_guard<std::mutex> lock(record_mu_);
  if (!lease_lost_.ok()) return lease_lost_;
  Retry retry(env_, env_.options.max_attempts);
  std::vector<json::object>& in_doubt = record_in_doubt_;
  for (;;) {
    TxnRecord updated = record_;
    if (!change(updated)) return Status::Ok();
    json::object value = EncodeRecord(updated);
    auto r = env_.store.Replace(record_key_, record_revision_, value);
    if (r.ok()) {
      record_revision_ = *r;
      record_ = std::move(updated);
      in_doubt.clear();  // a lost write landing later would fail its CAS now
      return Status::Ok();
    }
    if (!Transient(r.code()) && r.code() != Code::kConflict) return r.status();
    if (r.code() == Code::kUnknown) {
      in_doubt.push_back(value);
      if (unknown != nullptr) *unknown = true;
    }
    auto g = GetWithRetry(env_, record_key_);
    if (!g.ok()) return Status::Unavailable("reading the record back: " + g.status().ToString());
    if (!g->has_value()) {
      lease_lost_ = Status::Aborted("transaction " + id_ + " was rolled back by a collector");
      return lease_lost_;
    }
    const bool ours = std::find(in_doubt.begin(), in_doubt.end(), (*g)->value) != in_doubt.end();
    if (ours) {
      // A write of ours landed after all: take it as the record and apply the change again.
      auto rec = DecodeRecord((*g)->value);
      if (!rec.ok()) return rec.status();
      record_ = std::move(rec).value();
      record_revision_ = (*g)->revision;
      in_doubt.clear();
      if (unknown != nullptr) *unknown = false;
      continue;  // the change, computed again from it
    }
    if ((*g)->revision != record_revision_) {
      // Someone else wrote it: only a claim or an outcome marker can, and neither is taken back.
      auto rec = DecodeRecord((*g)->value);
      std::string by = rec.ok() && !rec->aborted_by.empty() ? rec->aborted_by : "a collector";
      lease_lost_ = Status::Aborted("transaction " + id_ + " was rolled back by " + by);
      return lease_lost_;
    }
    if (!retry.Next()) return Status::Unavailable("could not update the transaction record");
  }
}

bool LargeRun::ActionFailure(Code c) {
  return c == Code::kConflict || c == Code::kNotFound || c == Code::kDeleted ||
         c == Code::kFailedPrecondition || c == Code::kInvalidArgument;
}

Status LargeRun::OnActionFailure(const Item& item, const Status& why) {
  Status tagged(why.code(), "action " + std::to_string(item.tag) + " (" +
                                ActionTypeName(item.action.type) + " " + Where(item.action.key) +
                                "): " + why.message());
  if (!options_.skip_failed_actions) return tagged;
  ++skipped_;
  if (options_.on_skip) {
    // The chunk's actions are in flight: an exception must not unwind past them and leave them
    // unwritten while the transaction goes on. It fails the transaction instead.
    try {
      options_.on_skip(item.tag, tagged);
    } catch (const std::exception& e) {
      return Status::FailedPrecondition("on_skip threw for action " + std::to_string(item.tag) +
                                        ": " + e.what());
    } catch (...) {
      return Status::FailedPrecondition("on_skip threw for action " + std::to_string(item.tag));
    }
  }
  return Status::Ok();
}

Status LargeRun::PrepareItem(Item& item, const std::optional<StoredDocument>& current,
                             Slot& slot) {
  const Action* action = &item.action;
  Action put;  // a put over a live document: an update setting every field of the row and
               // removing the rest
  if (action->type == ActionType::kInsert && item.put && current) {
    auto meta = DecodeMeta(current->value);
    if (!meta.ok()) return Status::Corruption(Where(action->key) + ": " + meta.status().message());
    if (meta->live()) {
      put = item.action;
      put.type = ActionType::kUpdate;
      for (const auto& kv : current->value) {
        if (kv.key() != kMetaField && !put.fields.contains(kv.key())) {
          put.unset.emplace_back(kv.key());
        }
      }
      put.schema_version.reset();
      action = &put;
    }
  }
  auto p = Prepare(*action, current, id_, env_.options.default_schema_version,
                   FirstVersion(env_.clock.NowMillis()));
  if (!p.ok()) return p.status();
  const std::size_t bytes = SerializedSize(p->held);
  if (bytes > env_.options.max_document_bytes) {
    return Status::InvalidArgument("the document would take " + std::to_string(bytes) +
                                   " bytes, over the limit of " +
                                   std::to_string(env_.options.max_document_bytes));
  }
  slot.item = &item;
  slot.existed = current.has_value();
  slot.rev = current ? current->revision : 0;
  slot.held = std::move(p->held);
  return Status::Ok();
}

Status LargeRun::NotOpen() const {
  switch (phase_) {
    case Phase::kOpen: return Status::Ok();
    case Phase::kFailed:
    case Phase::kUnknown: return error_;
    case Phase::kCommitted: return Status::FailedPrecondition("the transaction is committed");
    case Phase::kRolledBack: return Status::FailedPrecondition("the transaction was rolled back");
  }
  return Status::Ok();
}

Status LargeRun::Add(Action action, std::uint64_t tag, bool put) {
  if (Status s = NotOpen(); !s.ok()) return s;
  if (action.type == ActionType::kCheck) {
    return Status::InvalidArgument("action " + std::to_string(tag) +
                                   ": a large transaction takes no checks");
  }
  if (Status s = ValidateAction(action, env_.options); !s.ok()) {
    return Status::InvalidArgument("action " + std::to_string(tag) + " (" +
                                   ActionTypeName(action.type) + " " + Where(action.key) +
                                   "): " + s.message());
  }
  ++added_;
  buffer_.push_back(Item{std::move(action), tag, put});
  if (buffer_.size() < options_.chunk_actions) return Status::Ok();
  if (Status s = FlushChunk(); !s.ok()) return Fail(std::move(s));
  return Status::Ok();
}

Status LargeRun::FlushChunk() {
  if (buffer_.empty()) return Status::Ok();
  std::vector<Item> items = std::move(buffer_);
  buffer_.clear();
  buffer_.reserve(options_.chunk_actions);

  // Read every document in one batch (a key named twice is read once, and refused below).
  std::set<Key> seen;
  std::vector<bool> twice(items.size(), false);
  std::vector<BatchOp> reads;
  std::vector<std::size_t> read_of(items.size(), SIZE_MAX);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!seen.insert(items[i].action.key).second) {
      twice[i] = true;
      continue;
    }
    read_of[i] = reads.size();
    reads.push_back(BatchOp::Get(items[i].action.key));
  }
  std::vector<BatchResult> got = env_.store.Batch(reads);

  Chunk chunk;
  chunk.txn = id_;
  chunk.k = chunks_;
  std::vector<Slot> slots;
  slots.reserve(items.size());
  const Waiter waiter{id_, priority_ms_, /*holding=*/true};
  for (std::size_t i = 0; i < items.size(); ++i) {
    Item& item = items[i];
    const Key& key = item.action.key;
    if (twice[i]) {
      Status s = OnActionFailure(item, Status::InvalidArgument("the document is named twice"));
      if (!s.ok()) return s;
      continue;
    }
    Prefetched first;
    const std::size_t r = read_of[i];
    if (r < got.size() && got[r].status.ok()) {
      first = std::move(got[r].document);
    } else {
      auto g = GetWithRetry(env_, key);
      if (!g.ok()) return g.status();
      first = std::move(*g);
    }
    if (first->has_value()) {
      auto meta = DecodeMeta((**first).value);
      if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
      if (meta->txn == id_) {  // written by an earlier chunk of this transaction
        Status s = OnActionFailure(item, Status::InvalidArgument("the document is named twice"));
        if (!s.ok()) return s;
        continue;
      }
    }
    auto cur = AwaitFree(env_, key, waiter, Need::kWrite, std::move(first));
    if (!cur.ok()) return cur.status();
    Slot slot;
    Status p = PrepareItem(item, *cur, slot);
    if (!p.ok()) {
      if (!ActionFailure(p.code())) return p;
      if (Status s = OnActionFailure(item, p); !s.ok()) return s;
      continue;
    }
    slot.entry = chunk.entries.size();
    chunk.entries.push_back(ChunkEntry{key, slot.existed, slot.rev});
    slots.push_back(std::move(slot));
  }
  if (slots.empty()) return Status::Ok();

  // The record first (it counts the chunk and pushes the lease out; it fails once claimed), then
  // the chunk document, then the documents.
  const std::int64_t lease = env_.options.lease.count();
  const std::uint64_t k = chunk.k;
  Status u = UpdateRecord([&](TxnRecord& r) {
    r.chunks = k + 1;
    r.gc_at_ms = std::max(r.gc_at_ms, env_.clock.NowMillis() + lease);
    return true;
  });
  if (!u.ok()) return u;
  chunks_ = k + 1;
  if (Status c = CreateChunk(EncodeChunk(chunk)); !c.ok()) return c;

  std::vector<BatchOp> writes;
  writes.reserve(slots.size());
  for (Slot& s : slots) {
    writes.push_back(s.existed ? BatchOp::Replace(s.item->action.key, s.rev, s.held)
                               : BatchOp::Create(s.item->action.key, s.held));
  }
  std::vector<BatchResult> wrote = env_.store.Batch(writes);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    Status first = i < wrote.size() ? wrote[i].status : Status::Unavailable("no reply");
    if (first.ok()) {
      slots[i].landed = true;
    } else if (Status s = ApplyOne(slots[i], chunk, slots[i].entry, std::move(first)); !s.ok()) {
      return s;
    }
    if (slots[i].landed) ++written_;
  }
  return Status::Ok();
}

Status LargeRun::CreateChunk(const json::object& value) {
  const Key key = ChunkKey(id_, chunks_ - 1);
  Retry retry(env_, env_.options.max_attempts);
  for (;;) {
    auto r = env_.store.Create(key, value);
    if (r.ok()) {
      chunk_revision_ = *r;
      return Status::Ok();
    }
    if (r.code() == Code::kConflict) {
      auto g = GetWithRetry(env_, key);
      if (!g.ok()) return g.status();
      if (g->has_value() && (*g)->value == value) {  // ours, whose reply was lost
        chunk_revision_ = (*g)->revision;
        return Status::Ok();
      }
      if (g->has_value()) {
        return Status::Aborted("transaction " + id_ + " was rolled back by a collector (" +
                               Where(key) + " was fenced)");
      }
    } else if (!Transient(r.code())) {
      return r.status();
    }
    if (!retry.Next()) return Status::Unavailable("could not write " + Where(key));
  }
}

Status LargeRun::ReplaceChunk(const json::object& value) {
  const Key key = ChunkKey(id_, chunks_ - 1);
  Retry retry(env_, env_.options.max_attempts);
  for (;;) {
    auto r = env_.store.Replace(key, chunk_revision_, value);
    if (r.ok()) {
      chunk_revision_ = *r;
      return Status::Ok();
    }
    if (r.code() == Code::kConflict || r.code() == Code::kUnknown) {
      auto g = GetWithRetry(env_, key);
      if (!g.ok()) return g.status();
      if (g->has_value() && (*g)->value == value) {
        chunk_revision_ = (*g)->revision;
        return Status::Ok();
      }
      if (!g->has_value() || (*g)->revision != chunk_revision_) {
        return Status::Aborted("transaction " + id_ + " was rolled back by a collector (" +
                               Where(key) + " was settled)");
      }
    } else if (!Transient(r.code())) {
      return r.status();
    }
    if (!retry.Next()) return Status::Unavailable("could not rewrite " + Where(key));
  }
}

Status LargeRun::ApplyOne(Slot& slot, Chunk& chunk, std::size_t index, Status first) {
  const Key& key = slot.item->action.key;
  Retry retry(env_, env_.options.max_attempts);
  int races = 0;
  bool have_first = true;
  const Waiter waiter{id_, priority_ms_, /*holding=*/true};
  for (;;) {
    Status w;
    if (have_first) {
      w = std::move(first);
      have_first = false;
    } else {
      w = slot.existed ? env_.store.Replace(key, slot.rev, slot.held).status()
                       : env_.store.Create(key, slot.held).status();
    }
    if (w.ok()) {
      slot.landed = true;
      return Status::Ok();
    }
    bool reacquire = w.code() == Code::kConflict;
    if (w.code() == Code::kUnavailable) {
      if (!retry.Next()) return Status::Unavailable(Where(key) + ": " + w.message());
      continue;
    }
    if (!reacquire && w.code() != Code::kUnknown) return w;
    // Look: ours (a write whose reply was lost landed), unchanged (send again: the CAS tells),
    // or changed by someone else (read it again).
    auto g = GetWithRetry(env_, key);
    if (!g.ok()) return Status::Unavailable(Where(key) + ": write reply lost and unresolved");
    std::optional<Meta> meta;
    if (g->has_value()) {
      auto m = DecodeMeta((*g)->value);
      if (!m.ok()) return Status::Corruption(Where(key) + ": " + m.status().message());
      if (m->txn == id_) {
        slot.landed = true;
        return Status::Ok();
      }
    }
    const bool unchanged = g->has_value() ? (slot.existed && (*g)->revision == slot.rev)
                                          : !slot.existed;
    if (unchanged) {
      if (!retry.Next()) return Status::Unavailable(Where(key) + ": write reply lost");
      continue;
    }
    if (++races > kMaxRaces) {
      return Status::Conflict(Where(key) + " kept changing while the transaction ran");
    }
    auto cur = AwaitFree(env_, key, waiter, Need::kWrite, std::move(*g));
    if (!cur.ok()) return cur.status();
    Slot again;
    Status p = PrepareItem(*slot.item, *cur, again);
    if (!p.ok()) {
      if (!ActionFailure(p.code())) return p;
      slot.skipped = true;  // its chunk entry stays: a fence on it is harmless
      return OnActionFailure(*slot.item, p);
    }
    slot.existed = again.existed;
    slot.rev = again.rev;
    slot.held = std::move(again.held);
    // The chunk names the revision now read before the document is written at it.
    chunk.entries[index] = ChunkEntry{key, slot.existed, slot.rev};
    if (Status c = ReplaceChunk(EncodeChunk(chunk)); !c.ok()) return c;
  }
}

Status LargeRun::Fail(Status why) {
  if (why.code() == Code::kUnknown) {
    // Undecided: the record is left as it is for the collector, so its lease must run out.
    renewal_.Reset();
    phase_ = Phase::kUnknown;
  } else {
    phase_ = Phase::kFailed;
    Status r = SettleAs(TxnState::kAborted);
    if (!r.ok()) {
      env_.log.warn("large txn {}: rollback incomplete, left to the collector: {}", id_,
                    r.ToString());
    }
  }
  error_ = Status(why.code(), why.message()).WithTxnId(id_);
  return error_;
}

Status LargeRun::SettleAs(TxnState state) {
  if (state == TxnState::kAborted) {
    Retry retry(env_, 0, env_.options.rollback_timeout);
    for (;;) {
      Status s = UpdateRecord([](TxnRecord& r) {
        if (r.state != TxnState::kPending) return false;
        r.state = TxnState::kAborted;
        r.aborted_by = "coordinator";
        return true;
      });
      if (s.ok() || s.code() == Code::kAborted) break;  // aborted by us, or claimed
      if (!Transient(s.code()) || !retry.Next()) {
        renewal_.Reset();  // left to the collector once the lease has run out
        return s;
      }
    }
  }
  renewal_.Reset();
  Retry retry(env_, state == TxnState::kAborted ? 0 : env_.options.max_attempts,
              state == TxnState::kAborted ? env_.options.rollback_timeout
                                          : std::chrono::milliseconds{0});
  for (;;) {
    auto g = GetWithRetry(env_, record_key_);
    Status failed;
    if (g.ok()) {
      if (!g->has_value()) return Status::Ok();  // settled and purged by someone else
      auto rec = DecodeRecord((*g)->value);
      if (!rec.ok()) return Status::Corruption("record of " + id_ + ": " + rec.status().message());
      if (rec->done) return Status::Ok();
      if (rec->state != state) {
        return Status::Corruption("record of " + id_ + " is " + TxnStateName(rec->state) +
                                  ", not " + TxnStateName(state));
      }
      auto s = SettleLarge(env_, id_, *rec, (*g)->revision, 0, env_.clock.NowMillis());
      if (s.ok()) continue;  // done (the next look sees the marker) or moved: look again
      if (s.code() != Code::kUnavailable) return s.status();
      failed = s.status();
    } else {
      failed = g.status();
    }
    if (!retry.Next()) return failed;
  }
}

Result<LargeCommitInfo> LargeRun::Commit() {
  if (Status s = NotOpen(); !s.ok()) return s;
  if (Status s = FlushChunk(); !s.ok()) return Fail(std::move(s));
  bool unknown = false;
  Status flip = UpdateRecord(
      [](TxnRecord& r) {
        if (r.state == TxnState::kCommitted) return false;
        r.state = TxnState::kCommitted;
        return true;
      },
      &unknown);
  bool done = false;  // found settled by someone else already
  if (!flip.ok() && unknown) {
    // A flip whose reply was lost may have landed, and only this coordinator ever commits its
    // record: the record as it is now tells. Committed (or a committed outcome marker: a
    // collector finished it meanwhile) → it landed; aborted → it never did (a claim can only
    // follow a pending record); gone or unreadable → unknown.
    auto g = GetWithRetry(env_, record_key_);
    Result<TxnRecord> now = Status::NotFound("");
    if (g.ok() && g->has_value()) now = DecodeRecord((*g)->value);
    if (now.ok() && now->state == TxnState::kCommitted) {
      flip = Status::Ok();
      done = now->done;
    } else if (!now.ok() || now->state != TxnState::kAborted) {
      return Fail(Status::Unknown("the commit flip's reply was lost: " + flip.message()));
    } else {
      flip = Status::Aborted("transaction " + id_ + " was rolled back by " +
                             (now->aborted_by.empty() ? std::string("a collector") : now->aborted_by));
    }
  }
  if (!flip.ok()) return Fail(std::move(flip));
  phase_ = Phase::kCommitted;
  renewal_.Reset();
  settled_ = done;
  if (options_.on_commit_point) {
    try {
      options_.on_commit_point();
    } catch (const std::exception& e) {  // the commit stands whatever the callback does
      env_.log.warn("large txn {}: on_commit_point threw: {}", id_, e.what());
    } catch (...) {
      env_.log.warn("large txn {}: on_commit_point threw", id_);
    }
  }
  LargeCommitInfo info;
  info.txn_id = id_;
  info.written = written_;
  info.skipped = skipped_;
  info.chunks = chunks_;
  info.settled = settled_;
  if (options_.settle && !settled_) {
    Status s = Settle();
    if (!s.ok()) env_.log.warn("large txn {}: finishing left to the collector: {}", id_, s.ToString());
    info.settled = s.ok();
  }
  return info;
}

Status LargeRun::Settle() {
  if (phase_ != Phase::kCommitted) {
    return Status::FailedPrecondition("only a committed transaction is settled");
  }
  if (settled_) return Status::Ok();
  Status s = SettleAs(TxnState::kCommitted);
  settled_ = s.ok();
  return s;
}

Status LargeRun::Rollback() {
  switch (phase_) {
    case Phase::kCommitted: return Status::FailedPrecondition("the transaction is committed");
    case Phase::kUnknown: return error_;
    case Phase::kRolledBack: return Status::Ok();
    case Phase::kOpen:
    case Phase::kFailed: break;
  }
  if (phase_ == Phase::kOpen) {
    phase_ = Phase::kFailed;
    error_ = Status::Aborted("the transaction was rolled back").WithTxnId(id_);
  }
  buffer_.clear();
  Status s = SettleAs(TxnState::kAborted);
  if (s.ok()) phase_ = Phase::kRolledBack;
  return s;
}

}  // namespace litetx::engine
