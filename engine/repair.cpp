#include "engine/repair.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/large.h"
#include "engine/meta.h"
#include "engine/outcomes.h"
#include "engine/tombstones.h"
#include "engine/worklist.h"
#include "litetx/document.h"

namespace litetx::engine {
namespace json = boost::json;

namespace {

bool Stale(const TxnRecord& r, const RepairPolicy& p) {
  if (p.now_ms >= r.gc_at_ms) return true;
  return p.older_than_ms > 0 && MillisSince(p.now_ms, r.created_ms) >= p.older_than_ms;
}

}  // namespace

TxnRecord OutcomeMarker(const TxnRecord& record, std::int64_t now_ms) {
  TxnRecord m;
  m.state = record.state;
  m.created_ms = record.created_ms;
  m.gc_at_ms = record.gc_at_ms;
  m.priority_ms = record.priority_ms;
  m.aborted_by = record.aborted_by;
  m.done = true;
  m.done_at_ms = now_ms;
  m.large = record.large;
  m.chunks = record.chunks;
  // What may be left a tombstone or placeholder: committed deletes, reversed inserts (an
  // insert's key may also carry the "gone" fence of a collector).
  // A record whose worklist was dropped (the finisher's copy) brings them in tomb_keys.
  m.tomb_keys = record.tomb_keys;
  const ActionType kind =
      record.state == TxnState::kCommitted ? ActionType::kDelete : ActionType::kInsert;
  for (const WorkAction& a : record.actions) {
    if (a.type == kind) m.tomb_keys.push_back(a.key);
  }
  return m;
}

namespace {

// Rewrites the document at `key` while `txn_id` holds it, to what `settle` makes of it (stamped
// as a tombstone or placeholder at `now_ms` if it is one), re-reading after every conflict.
// OK once the document is absent or no longer held by `txn_id`; `what` names the step in errors.
// `*wrote` (if given) is set once one of its writes is seen to land.
Status SettleHeld(const Env& env, const Key& key, const std::string& txn_id, std::int64_t now_ms,
                  const char* what,
                  const std::function<Result<json::object>(const json::object&, const Meta&)>& settle,
                  bool* wrote = nullptr, bool index_tombstone = false) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    if (!g->has_value()) return Status::Ok();
    auto meta = DecodeMeta((*g)->value);
    if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
    if (meta->txn != txn_id) return Status::Ok();
    auto next = settle((*g)->value, *meta);
    if (!next.ok()) return next.status();
    StampTombstoneTime(*next, now_ms);
    if (index_tombstone) {
      // No outcome marker names what this leaves: its tombstone index entry comes first.
      if (Status st = IndexDocTombstone(env, key, *next); !st.ok()) return st;
    }
    auto r = env.store.Replace(key, (*g)->revision, *next);
    if (r.ok()) {
      // The image written holds no reference to the transaction: settled, no second look.
      if (wrote != nullptr) *wrote = true;
      return Status::Ok();
    }
    if (r.code() == Code::kConflict) continue;  // changed: look again
    if (Transient(r.code()) && retry.Next()) continue;
    return Status::Unavailable(std::string(what) + " " + Where(key) + ": " + r.status().ToString());
  }
}

}  // namespace

Status FinishDocument(const Env& env, const Key& key, const std::string& txn_id,
                      std::int64_t now_ms) {
  return SettleHeld(env, key, txn_id, now_ms, "finishing",
                    [](const json::object& held, const Meta& meta) -> Result<json::object> {
                      return Finished(held, meta);
                    });
}

Status ReverseDocument(const Env& env, const WorkAction& work, const std::string& txn_id,
                       std::int64_t now_ms, bool undo_from_document) {
  const Key& key = work.key;
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto g = GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    Result<Revision> r = Revision{0};
    if (!g->has_value()) {
      if (work.existed) return Status::Ok();  // a late Replace cannot land on nothing
      // The coordinator would Create it: take the key first with a "gone" placeholder.
      Meta m;
      m.gone = true;
      m.version = work.prior_version;
      m.schema_version = work.prior_schema;
      m.at_ms = now_ms;
      r = env.store.Create(key, MakeStored(json::object{}, m));
    } else {
      auto meta = DecodeMeta((*g)->value);
      if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
      if (meta->txn == txn_id) {
        WorkAction own;
        if (undo_from_document) {
          auto u = UndoOf(key, (*g)->value);
          if (!u.ok()) return u.status();
          own = std::move(u).value();
        }
        json::object reversed = Reversed((*g)->value, *meta, undo_from_document ? own : work);
        StampTombstoneTime(reversed, now_ms);
        r = env.store.Replace(key, (*g)->revision, reversed);
      } else if (work.existed && (*g)->revision == work.read_revision) {
        // Still as the coordinator read it: rewrite it unchanged so its revision moves on.
        r = env.store.Replace(key, (*g)->revision, (*g)->value);
      } else {
        return Status::Ok();  // reversed already, or never written and already fenced
      }
    }
    // Landed: reversed, or fenced (the placeholder taken, or the revision moved on): a
    // compare-and-swap that succeeded needs no second look. A conflict or a lost reply: look
    // again, and decide from what is there now.
    if (r.ok()) return Status::Ok();
    if (r.code() == Code::kConflict) continue;
    if (Transient(r.code()) && retry.Next()) continue;
    return Status::Unavailable("reversing " + Where(key) + ": " + r.status().ToString());
  }
}

Status UndoDanglingHold(const Env& env, const Key& key, const std::string& txn_id,
                        std::int64_t now_ms, bool* undone) {
  return SettleHeld(
      env, key, txn_id, now_ms, "undoing",
      [&](const json::object& held, const Meta& meta) -> Result<json::object> {
        auto undo = UndoOf(key, held);
        if (!undo.ok()) {
          return Status::Corruption(Where(key) + " is held by transaction " + txn_id +
                                    ", which is over, and cannot be undone: " +
                                    undo.status().message());
        }
        env.log.warn("{}: undoing a write of transaction {} that landed after the transaction "
                     "was over", Where(key), txn_id);
        return Reversed(held, meta, *undo);
      },
      undone, /*index_tombstone=*/true);
}

Result<AbsentRecord> FenceAbsentRecord(const Env& env, const std::string& txn_id, const Key& key,
                                       const json::object& held, Revision revision,
                                       const std::string& claimer, std::int64_t now_ms) {
  const std::int64_t deadline = HoldDeadline(held);
  if (deadline == 0) return AbsentRecord::kDangling;  // a classic hold: its record was erased
  if (now_ms < deadline) return AbsentRecord::kWait;
  auto again = GetWithRetry(env, key);
  if (!again.ok()) return again.status();
  if (!again->has_value() || (**again).revision != revision) return AbsentRecord::kAppeared;
  // A record folded into its outcome page is over: it cannot land again, and its holds all
  // ended before its marker was written, so this one is dangling. (A fold that lands after this
  // look, before the create below, makes the fence a late one: the page decides the outcome,
  // engine/outcomes.h.)
  auto folded = FindFolded(env, txn_id);
  if (!folded.ok()) return folded.status();
  if (folded->has_value()) return AbsentRecord::kDangling;
  const Key record_key{std::string(kTransactionsCollection), txn_id};
  TxnRecord fence;
  fence.state = TxnState::kAborted;
  fence.created_ms = now_ms;
  fence.gc_at_ms = now_ms;
  fence.priority_ms = now_ms;
  fence.aborted_by = claimer;
  fence.done = true;
  fence.done_at_ms = now_ms;
  fence.fence = true;
  const json::object value = EncodeRecord(fence);
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto c = env.store.Create(record_key, value);
    if (c.ok()) {
      // The transaction may have landed, been settled and folded between the look at its page
      // above and this create: then the fence is a late one. The page decides the outcome
      // (engine/outcomes.h), and the fence must not outlive the page, after which it would
      // read as aborted: it is taken back (a crash before that leaves it to the collector,
      // which erases fences whose transaction is on its page).
      auto late = FindFolded(env, txn_id);
      if (late.ok() && late->has_value()) {
        (void)env.store.Erase(record_key, *c);
        env.log.info("txn {}: a fence made after its outcome was folded was taken back", txn_id);
        return AbsentRecord::kDangling;
      }
      env.log.info("txn {}: holds past their deadline with no record; record fenced by {}",
                   txn_id, claimer);
      return AbsentRecord::kDangling;
    }
    if (c.code() == Code::kConflict) return AbsentRecord::kAppeared;
    if (c.code() == Code::kUnknown) {
      auto g = GetWithRetry(env, record_key);
      if (!g.ok()) return g.status();
      if (g->has_value()) {
        return (*g)->value == value ? AbsentRecord::kDangling : AbsentRecord::kAppeared;
      }
    } else if (c.code() != Code::kUnavailable) {
      return c.status();
    }
    if (!retry.Next()) {
      return Status::Unavailable("fencing the record of transaction " + txn_id + ": " +
                                 c.status().ToString());
    }
  }
}

Result<std::optional<Revision>> HeldOrFence(
    const Env& env, const std::string& txn_id, const WorkAction& work, std::int64_t now_ms,
    std::optional<Result<std::optional<StoredDocument>>> first) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    Result<std::optional<StoredDocument>> cur = Status::Unavailable("");
    if (first) {
      cur = std::move(*first);
      first.reset();
    } else {
      cur = GetWithRetry(env, work.key);
    }
    if (!cur.ok()) return cur.status();
    if (cur->has_value()) {
      auto meta = DecodeMeta((**cur).value);
      if (!meta.ok()) return Status::Corruption(Where(work.key) + ": " + meta.status().message());
      if (meta->txn == txn_id) return std::optional<Revision>((**cur).revision);
    }
    // Not held by the transaction: make sure its apply can no longer land.
    Result<Revision> w = Revision{0};
    if (!cur->has_value()) {
      if (work.existed) return std::optional<Revision>{};  // a Replace cannot land on nothing
      // Its Create would land: take the key first with a "gone" placeholder.
      Meta m;
      m.gone = true;
      m.version = work.prior_version;
      m.schema_version = work.prior_schema;
      m.at_ms = now_ms;
      w = env.store.Create(work.key, MakeStored(json::object{}, m));
    } else if (work.existed && (**cur).revision == work.read_revision) {
      // Still as the coordinator read it: rewrite it unchanged so its revision moves on.
      w = env.store.Replace(work.key, (**cur).revision, (**cur).value);
    } else {
      return std::optional<Revision>{};  // its compare-and-swap can no longer match
    }
    if (w.ok()) return std::optional<Revision>{};
    if (w.code() == Code::kConflict) continue;  // the apply may have landed: look again
    if (Transient(w.code()) && retry.Next()) continue;
    return Status::Unavailable("fencing " + Where(work.key) + ": " + w.status().ToString());
  }
}

Result<StagingProof> ProveStaging(const Env& env, const std::string& txn_id,
                                  const TxnRecord& record, bool fence, std::int64_t now_ms) {
  std::vector<BatchOp> ops;
  ops.reserve(record.actions.size());
  for (const WorkAction& w : record.actions) ops.push_back(BatchOp::Get(w.key));
  std::vector<BatchResult> reads = env.store.Batch(ops);
  for (std::size_t i = 0; i < record.actions.size(); ++i) {
    const WorkAction& work = record.actions[i];
    std::optional<Result<std::optional<StoredDocument>>> first;
    if (i < reads.size() && reads[i].status.ok()) first = std::move(reads[i].document);
    if (!fence) {
      Result<std::optional<StoredDocument>> cur =
          first ? std::move(*first) : GetWithRetry(env, work.key);
      if (!cur.ok()) return cur.status();
      if (!cur->has_value()) return StagingProof::kNotHeld;
      auto meta = DecodeMeta((**cur).value);
      if (!meta.ok()) return Status::Corruption(Where(work.key) + ": " + meta.status().message());
      if (meta->txn != txn_id) return StagingProof::kNotHeld;
      continue;
    }
    auto held = HeldOrFence(env, txn_id, work, now_ms, std::move(first));
    if (!held.ok()) return held.status();
    if (!held->has_value()) return StagingProof::kFenced;  // one fenced document decides it
  }
  return StagingProof::kAllHeld;
}

Result<std::optional<StoredDocument>> ResolveStaging(const Env& env, const std::string& txn_id,
                                                     const TxnRecord& record, Revision rev,
                                                     bool fence, const std::string& claimer,
                                                     std::int64_t now_ms) {
  auto proof = ProveStaging(env, txn_id, record, fence, now_ms);
  if (!proof.ok()) return proof.status();
  if (*proof == StagingProof::kNotHeld) return std::optional<StoredDocument>{};
  TxnRecord next = record;
  if (*proof == StagingProof::kAllHeld) {
    next.state = TxnState::kCommitted;
  } else {
    next.state = TxnState::kAborted;
    next.aborted_by = claimer;
  }
  json::object value = EncodeRecord(next);
  const Key record_key{std::string(kTransactionsCollection), txn_id};
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto r = env.store.Replace(record_key, rev, value);
    if (r.ok()) {
      env.log.info("txn {}: staging record resolved to {} by {}", txn_id,
                   TxnStateName(next.state), claimer);
      return std::optional<StoredDocument>(StoredDocument{std::move(value), *r});
    }
    if (r.code() == Code::kConflict) return std::optional<StoredDocument>{};
    if (r.code() == Code::kUnknown) {
      auto g = GetWithRetry(env, record_key);
      if (!g.ok()) return g.status();
      if (g->has_value() && (**g).value == value) {
        return std::optional<StoredDocument>(std::move(**g));
      }
      if (!g->has_value() || (**g).revision != rev) return std::optional<StoredDocument>{};
    } else if (r.code() != Code::kUnavailable) {
      return r.status();
    }
    if (!retry.Next()) {
      return Status::Unavailable("resolving the record of transaction " + txn_id + ": " +
                                 r.status().ToString());
    }
  }
}

Result<RepairOutcome> RepairTransaction(const Env& env, const std::string& txn_id,
                                        std::optional<StoredDocument> stored,
                                        const RepairPolicy& policy,
                                        std::optional<WrittenMarker>* marker) {
  const Key record_key{std::string(kTransactionsCollection), txn_id};
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    if (!stored) {
      auto g = GetWithRetry(env, record_key);
      if (!g.ok()) return g.status();
      if (!g->has_value()) return RepairOutcome::kGone;
      stored = std::move(*g);
    }
    auto rec = DecodeRecord(stored->value);
    if (!rec.ok()) {
      return Status::Corruption("record of transaction " + txn_id + ": " + rec.status().message());
    }
    TxnRecord& record = *rec;
    const Revision rev = stored->revision;
    stored.reset();  // from here on, any CAS failure re-reads the record

    if (record.done) {
      // A fence is kept: its transaction's record create may still be on its way.
      std::int64_t keep = policy.outcome_retention_ms;
      if (record.large && record.state == TxnState::kAborted) {
        keep = std::max(keep, policy.tombstone_retention_ms);
      }
      if (record.fence || MillisSince(policy.now_ms, record.done_at_ms) < keep) {
        return RepairOutcome::kNotStale;
      }
      if (record.large) {
        if (Status st = EraseChunkStubs(env, txn_id, record); !st.ok()) return st;
      }
      // The tombstones it may have left are indexed before the marker naming them goes.
      if (Status st = IndexMarkerTombstones(env, txn_id, record); !st.ok()) return st;
      Status e = env.store.Erase(record_key, rev);
      if (e.ok()) return RepairOutcome::kPurged;
      if (e.code() == Code::kConflict || (Transient(e.code()) && retry.Next())) continue;
      return e;
    }
    if (!Stale(record, policy)) return RepairOutcome::kNotStale;

    if (record.state == TxnState::kStaging) {
      // Prove it or fence it (see ProveStaging); the record as resolved is settled below.
      auto r = ResolveStaging(env, txn_id, record, rev, /*fence=*/true, policy.claimer,
                              policy.now_ms);
      if (!r.ok()) return r.status();
      if (r->has_value()) {
        stored = std::move(**r);
      } else if (!retry.Next()) {
        return Status::Unavailable("record of transaction " + txn_id + " kept changing");
      }
      continue;
    }
    if (record.state == TxnState::kPending) {
      TxnRecord claimed = record;
      claimed.state = TxnState::kAborted;
      claimed.aborted_by = policy.claimer;
      auto c = env.store.Replace(record_key, rev, EncodeRecord(claimed));
      if (c.ok()) {
        env.log.info("txn {}: claimed by {} (stale since {} ms); rolling it back", txn_id,
                     policy.claimer, MillisSince(policy.now_ms, record.gc_at_ms));
        stored = StoredDocument{EncodeRecord(claimed), *c};
        continue;
      }
      if (c.code() == Code::kConflict || (Transient(c.code()) && retry.Next())) continue;
      return c.status();
    }

    if (record.large) {
      // Chunk by chunk; repairers start at different chunks to share the work.
      auto settled = SettleLarge(env, txn_id, record, rev, std::hash<std::string>{}(policy.claimer),
                                 policy.now_ms);
      if (!settled.ok()) return settled.status();
      if (*settled == LargeSettle::kDone) {
        return record.state == TxnState::kCommitted ? RepairOutcome::kFinished
                                                    : RepairOutcome::kReversed;
      }
      if (!retry.Next()) return Status::Unavailable("record of transaction " + txn_id + " kept changing");
      continue;
    }
    // Each document step acts on the outcome read above, so the record is read again before
    // every one of them: if it is no longer at that revision (another repairer wrote the
    // marker, or anything else moved it), the pass starts over from what it says now.
    bool moved = false;
    for (const WorkAction& work : record.actions) {
      auto now = GetWithRetry(env, record_key);
      if (!now.ok()) return now.status();
      if (!now->has_value() || (*now)->revision != rev) {
        if (!now->has_value()) return RepairOutcome::kGone;
        stored = std::move(*now);
        moved = true;
        break;
      }
      Status s = record.state == TxnState::kCommitted
                     ? FinishDocument(env, work.key, txn_id, policy.now_ms)
                     : ReverseDocument(env, work, txn_id, policy.now_ms);
      if (!s.ok()) return s;
    }
    if (moved) {
      if (!retry.Next()) return Status::Unavailable("record of transaction " + txn_id + " kept changing");
      continue;
    }
    TxnRecord settled = OutcomeMarker(record, policy.now_ms);
    auto m = env.store.Replace(record_key, rev, EncodeRecord(settled));
    if (m.ok()) {
      if (marker != nullptr) {
        *marker = WrittenMarker{*m, policy.now_ms, record.state == TxnState::kCommitted,
                                std::move(settled.tomb_keys)};
      }
      return record.state == TxnState::kCommitted ? RepairOutcome::kFinished
                                                  : RepairOutcome::kReversed;
    }
    if (m.code() == Code::kConflict || (Transient(m.code()) && retry.Next())) continue;
    return m.status();
  }
}

}  // namespace litetx::engine
