#include "engine/contention.h"

#include "engine/finisher.h"
#include "engine/record.h"
#include "engine/outcomes.h"
#include "engine/repair.h"
#include "litetx/document.h"

namespace litetx::engine {

namespace {

// What blocks the waiter on one look at the document.
struct Blocker {
  bool settled = false;       // a finished holder was settled on the spot: look again now
  bool blocked = false;       // someone live blocks it
  bool older = false;         // ...and at least one of them is older than the waiter
  std::string who;            // for messages
};

// Looks at the holder `holder` of `key`: settles it if it is no longer running, else reports
// it as a live blocker with its age.
Result<Blocker> LookAtHolder(const Env& env, const Key& key, const std::string& holder,
                             const Waiter& waiter, const boost::json::object& held,
                             Revision held_revision) {
  Blocker b;
  b.who = "transaction " + holder;
  if (env.finisher != nullptr && env.finisher->HelpFinish(holder, env.options.busy_timeout)) {
    // Committed here and still being finished by this Database: done now, look again.
    b.settled = true;
    return b;
  }
  const Key record_key{std::string(kTransactionsCollection), holder};
  auto rg = GetRecordDoc(env, holder);
  if (!rg.ok()) return rg.status();
  const std::int64_t now = env.clock.NowMillis();
  Result<TxnRecord> rec = Status::NotFound("");
  if (rg->has_value()) {
    rec = DecodeRecord((*rg)->value);
    if (!rec.ok()) {
      return Status::Corruption("record of transaction " + holder + ": " + rec.status().message());
    }
  }
  const std::string claimer =
      waiter.id.empty() ? std::string("reader") : "txn " + std::string(waiter.id);
  Status s;
  if (!rg->has_value()) {
    // No record (read after the document): a parallel commit's record may still be landing.
    auto f = FenceAbsentRecord(env, holder, key, held, held_revision, claimer, now);
    if (!f.ok()) return f.status();
    if (*f == AbsentRecord::kWait) {
      b.blocked = true;  // a coordinator between its writes: waits for nothing, never older
      return b;
    }
    if (*f == AbsentRecord::kDangling) {
      if (Status u = UndoDanglingHold(env, key, holder, now); !u.ok()) return u;
    }
    b.settled = true;  // undone, or changed meanwhile: look again
    return b;
  }
  if (rec->done) {
    // The holder is over (its record was read after the document): a dangling hold.
    s = UndoDanglingHold(env, key, holder, now);
  } else if (rec->state == TxnState::kCommitted) {
    s = FinishDocument(env, key, holder, now);
  } else if (rec->state == TxnState::kAborted && rec->large) {
    // A large transaction's chunks carry no reversing data: the document's own undo data does.
    // existed with no revision: reversed if held, never fenced (it was held, so it existed).
    WorkAction held_only;
    held_only.key = key;
    held_only.existed = true;
    s = ReverseDocument(env, held_only, holder, now, /*undo_from_document=*/true);
  } else if (rec->state == TxnState::kPending && rec->large && now >= rec->gc_at_ms) {
    // A stale large transaction: claimed here, its documents left to the collector but for
    // this one (reversed on the next look). Settling all of it could take long.
    TxnRecord claimed = *rec;
    claimed.state = TxnState::kAborted;
    claimed.aborted_by = claimer;
    auto c = env.store.Replace(record_key, (*rg)->revision, EncodeRecord(claimed));
    if (c.ok()) {
      env.log.info("txn {}: claimed stale large transaction {}", waiter.id, holder);
    } else if (c.code() != Code::kConflict && !Transient(c.code())) {
      return c.status();
    }
    b.settled = true;  // look again
    return b;
  } else if (rec->state == TxnState::kAborted) {
    const WorkAction* work = rec->Find(key);
    if (work == nullptr) {
      return Status::Corruption(Where(key) + " is held by transaction " + holder +
                                " whose worklist does not name it");
    }
    s = ReverseDocument(env, *work, holder, now);
  } else if (rec->state == TxnState::kStaging && now < rec->gc_at_ms) {
    // Committed if every document it lists is held by it (its commit returned, or is about to):
    // prove it and record it, then settle this document as committed. Otherwise it is still
    // writing: a live holder.
    auto proved = ResolveStaging(env, holder, *rec, (*rg)->revision, /*fence=*/false, claimer, now);
    if (!proved.ok()) return proved.status();
    if (!proved->has_value()) {
      b.blocked = true;
      b.older = Older(rec->priority_ms, holder, waiter.priority_ms, waiter.id);
      return b;
    }
    b.settled = true;  // look again: the record now says committed
    return b;
  } else if (now >= rec->gc_at_ms) {
    RepairPolicy policy;
    policy.claimer = claimer;
    policy.now_ms = now;
    auto r = RepairTransaction(env, holder, std::move(*rg), policy);
    s = r.status();
    if (r.ok()) env.log.info("txn {}: settled stale transaction {} on the spot", waiter.id, holder);
  } else {
    b.blocked = true;
    b.older = Older(rec->priority_ms, holder, waiter.priority_ms, waiter.id);
    return b;
  }
  if (!s.ok()) return s;
  b.settled = true;
  return b;
}

void LookAtLocks(const Meta& meta, const Waiter& waiter, Need need, std::int64_t now,
                 Blocker& b) {
  if (need == Need::kCheck) return;
  for (const LockEntry& e : meta.locks) {
    if (e.owner == waiter.id || e.expires_ms <= now) continue;
    if (need == Need::kReadLock && !e.write) continue;  // shared with other readers
    b.blocked = true;
    b.older = b.older || Older(e.priority_ms, e.owner, waiter.priority_ms, waiter.id);
    b.who = std::string(e.write ? "a write" : "a read") + " lock of " + e.owner;
  }
}

}  // namespace

bool Older(std::int64_t a_priority, std::string_view a_id, std::int64_t b_priority,
           std::string_view b_id) {
  return a_priority != b_priority ? a_priority < b_priority : a_id < b_id;
}

Result<std::optional<StoredDocument>> AwaitFree(const Env& env, const Key& key,
                                                const Waiter& waiter, Need need,
                                                Prefetched first, bool* waited) {
  Backoff backoff(env.clock, env.options.busy_backoff);
  for (bool look = false;; look = true) {
    if (look && waited != nullptr) *waited = true;
    Result<std::optional<StoredDocument>> r = Status::Unavailable("");
    if (first.has_value()) {
      r = std::move(*first);
      first.reset();
    } else {
      r = GetWithRetry(env, key);
    }
    if (!r.ok() || !r->has_value()) return r;
    auto meta = DecodeMeta((*r)->value);
    if (!meta.ok()) return Status::Corruption(Where(key) + ": " + meta.status().message());
    Blocker b;
    if (!meta->txn.empty() && meta->txn != waiter.id) {
      auto h = LookAtHolder(env, key, meta->txn, waiter, (*r)->value, (*r)->revision);
      if (!h.ok()) return h.status();
      b = std::move(h).value();
      if (b.settled) continue;
    } else {
      LookAtLocks(*meta, waiter, need, env.clock.NowMillis(), b);
    }
    if (!b.blocked) return r;
    if (waiter.holding && b.older) {
      return Status::Busy(Where(key) + " is held by " + b.who +
                          ", an older transaction (wait-die: the younger gives way)");
    }
    if (backoff.ElapsedMillis() >= env.options.busy_timeout.count()) {
      return Status::Busy(Where(key) + " is held by " + b.who);
    }
    env.log.debug("{} is held by {}; waiting", Where(key), b.who);
    backoff.Wait();
  }
}

}  // namespace litetx::engine
