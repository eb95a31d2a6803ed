#include "engine/coordinator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <boost/json.hpp>

#include "engine/contention.h"
#include "engine/doc_cache.h"
#include "engine/finisher.h"
#include "engine/json_text.h"
#include "engine/lease_keeper.h"
#include "engine/meta.h"
#include "engine/outcomes.h"
#include "engine/record.h"
#include "engine/repair.h"
#include "engine/tombstones.h"
#include "engine/validate.h"
#include "engine/worklist.h"
#include "litetx/document.h"

namespace litetx::engine {
namespace json = boost::json;

namespace {

// Most times one document may be found changed at its write (a lost compare-and-swap race)
// before the transaction gives up with kConflict. Each race is followed by a fresh look
// (waiting if the document is held), not by a store-error backoff.
constexpr int kMaxRaces = 16;

// One action of a commit in progress.
struct Slot {
  const Action* action = nullptr;
  Prepared prep;
  bool existed = false;       // a stored document existed at the pre-read
  Revision read_revision = 0;  // its revision then
  std::size_t record_index = 0;  // its entry in the record's worklist (write actions)
  bool sent = false;          // an apply write was sent (it may have landed)
  bool landed = false;        // the apply write is known to have landed...
  Revision held_revision = 0;  // ...giving this revision
  bool cached = false;        // prepared on Env::cache's image, not on a read of the store
  std::size_t bytes = 0;      // the JSON text length of its largest image (CheckSize)
  std::uint64_t ticket = 0;   // Env::cache's ticket for this document (FromCache)
  bool is_write() const { return action->type != ActionType::kCheck; }
};

// Who a record found not as its coordinator wrote it says moved it on ("a collector" if unsaid).
std::string Claimer(const json::object& stored) {
  auto rec = DecodeRecord(stored);
  if (!rec.ok() || rec->aborted_by.empty()) return "a collector";
  return rec->aborted_by;
}

Result<Revision> WriteAt(Store& store, const Key& key, bool existed, Revision rev,
                         const json::object& value) {
  return existed ? store.Replace(key, rev, value) : store.Create(key, value);
}

// WriteAt for the one-write path: a delete (tomb_at_ms >= 0, its tombstone's time) sends its
// tombstone index entry in the same batch (engine/tombstones.h). An entry that did not land
// while the delete may have is tried once more on its own; if that fails too, the tombstone is
// left to the collector's sweep. Returns the document write's result.
Result<Revision> WriteIndexed(const Env& env, const Key& key, bool existed, Revision rev,
                              const json::object& value, std::int64_t tomb_at_ms) {
  if (tomb_at_ms < 0) return WriteAt(env.store, key, existed, rev, value);
  const Key entry = TombEntryForDoc(tomb_at_ms, key);
  const json::object entry_value = TombEntryValue({key});
  const BatchOp ops[2] = {
      BatchOp::Create(entry, entry_value),
      existed ? BatchOp::Replace(key, rev, value) : BatchOp::Create(key, value)};
  std::vector<BatchResult> r = env.store.Batch(ops);
  if (r.size() != 2) {
    return Status::Unknown("store batch returned " + std::to_string(r.size()) +
                           " results for 2 operations");
  }
  Result<Revision> doc =
      r[1].status.ok() ? Result<Revision>(r[1].revision) : Result<Revision>(r[1].status);
  const bool entry_ok = r[0].status.ok() || r[0].status.code() == Code::kConflict;
  if (!entry_ok && (doc.ok() || doc.code() == Code::kUnknown)) {
    auto again = env.store.Create(entry, entry_value);
    if (!again.ok() && again.code() != Code::kConflict) {
      env.log.warn("tombstone of {} not indexed ({}); the collector's sweep purges it",
                   Where(key), again.status().ToString());
    }
  }
  return doc;
}

// One call of Coordinator::Commit.
class CommitRun {
 public:
  CommitRun(const Env& env, const CommitRequest& request)
      : env_(env),
        id_(request.id),
        priority_ms_(request.priority_ms),
        holding_locks_(request.holding_locks),
        record_key_{std::string(kTransactionsCollection), id_} {}

  Result<CommitInfo> Execute(const Transaction& txn);

 private:
  // Reads the document (under the contention policy) and evaluates the action on it.
  // one_write: the one-write path, which needs only the final image.
  // first: a read of the document made just before (see AwaitFree); *waited is set if the
  // document was not free at that look.
  // slot.cached: `first` is Env::cache's image, and a failure on it is followed by a read.
  Status PrepareSlot(Slot& slot, bool one_write = false, Prefetched first = std::nullopt,
                     bool* waited = nullptr);
  Status PrepareOn(Slot& slot, bool one_write, Prefetched first, bool* waited);
  // Env::cache's image of a write slot's document (taken out of the cache; slot.cached set),
  // or nothing.
  Prefetched FromCache(Slot& slot);
  // Reads every document in one batch, then prepares each slot in action order.
  Status PrepareAll();
  // Reads the documents of `slots` (indexes into slots_) in one batch.
  std::vector<Prefetched> ReadBatch(const std::vector<std::size_t>& slots);
  // Also records the size in slot.bytes.
  Status CheckSize(Slot& slot) const;
  Result<CommitInfo> OnePhase(Slot& slot);
  // Fills record_ (times, priority, the worklist) in `state` and returns its encoding;
  // kInvalidArgument if it exceeds Options::max_record_bytes.
  Result<json::object> BuildRecord(TxnState state);
  Status WriteRecord();
  // The parallel commit (docs/protocol.md §2.3): the staging record and every apply in one
  // batch; committed once all of them landed; otherwise the classic path takes over.
  Result<CommitInfo> ParallelCommit();
  // Settles the staging record's create, whose first result is `first`: OK once it is known to
  // be ours (record_revision_; record_.state committed if a resolver already proved it);
  // kAborted if someone fenced it; kUnavailable if it never landed (with record_settled_ set
  // if we fenced it ourselves after a lost reply); kUnknown otherwise.
  Status SettleStagingRecord(Result<Revision> first, json::object value);
  // True once the staging record's lease is close enough to its end (half a lease, the margin
  // against clock skew) that a resolver may already have acted on it: before that, nobody but
  // this coordinator and proofs (which only commit) can have written the record or fenced a
  // document of it.
  bool LateForTheRecord() const {
    return env_.clock.NowMillis() + env_.options.lease.count() / 2 >= record_.gc_at_ms;
  }
  // Moves the staging record to pending (the classic path from here on). OK; or kAborted with
  // record_ aborted; or OK with record_.state committed (a resolver proved it meanwhile).
  Status FallBackToPending();
  // The classic path once the record is pending and some applies are sent: the rest applied,
  // checks revalidated, the flip, the finishing.
  Result<CommitInfo> CompleteClassic(std::vector<std::pair<Slot*, Status>> failed);
  // Reverses the holds this transaction is known to have or may have (every sent apply) after
  // its record was found aborted or fenced. REQUIRES: the record is aborted or a marker.
  void ReverseSent();
  // CAS of the record to `change` applied to it (still pending); kAborted if someone claimed
  // it. check_size: kInvalidArgument if it would exceed Options::max_record_bytes.
  // REQUIRES: record_mu_ held (UpdateRecord).
  Status ReplaceRecord(const std::function<bool(TxnRecord&)>& change, bool check_size);
  // Sends every apply in one batch, then settles each one that did not land (ApplyOne).
  Status ApplyAll();
  // The apply of `slot` (its held image, at the revision read, or a create where it was
  // absent) as a batch operation; marks the slot sent. The operation refers to the slot's data.
  static BatchOp SendApply(Slot& slot) {
    slot.sent = true;
    const Key& key = slot.action->key;
    return slot.existed ? BatchOp::Replace(key, slot.read_revision, slot.prep.held)
                        : BatchOp::Create(key, slot.prep.held);
  }
  // Applies one document; `first` is the failure of its apply in the batch, if any (the
  // write was sent: it is not sent again before being looked at).
  Status ApplyOne(Slot& slot, Status first = Status::Ok());
  Status Reacquire(Slot& slot);
  Status RevalidateChecks();
  Status CommitPoint();
  Status FlipToCommitted();
  // Hands the finishing (references cleared, tombstones, outcome marker) to the Database's
  // finisher, or does it here if there is none or its queue is full.
  void Finish();
  Status KeepLease();
  void Renew();  // the lease keeper's renewal (its own thread)
  // True if the record's GC timestamp is more than `more_than_ms` away and no claim was seen.
  bool LeaseLeft(std::int64_t more_than_ms);
  void StopRenewing() { renewal_.Reset(); }  // REQUIRES: record_mu_ not held
  // ReplaceRecord of the record as it is now, changed by `change` (which returns false if
  // there is nothing to write), under record_mu_. kAborted is remembered in lease_lost_.
  Status UpdateRecord(const std::function<bool(TxnRecord&)>& change, bool check_size = false);
  // If `stored` is exactly the record write whose reply was lost (in_doubt_), adopts it as
  // the record as we know it (it landed after all) and returns true.
  bool AdoptInDoubt(const StoredDocument& stored);
  Status Rollback(Status reason);
  bool MarkAborted(Retry& retry);
  bool ReverseOne(Slot& slot, Retry& retry);
  CommitInfo Info() const;
  Retry ForwardRetry() const { return Retry(env_, env_.options.max_attempts); }

  const Env& env_;
  std::string id_;
  std::int64_t priority_ms_;
  bool holding_locks_;
  Key record_key_;
  std::vector<Slot> slots_;
  TxnRecord record_;
  json::object record_value_;  // record_ as last written (EncodeRecord), patched for the flip
  Revision record_revision_ = 0;
  // Record values whose writes had their replies lost, all sent at record_revision_ and not
  // known to have landed (or not): a later re-read that finds exactly one of them adopts it
  // as our own. Cleared once the record moves on from that revision by a write of ours.
  std::vector<json::object> in_doubt_;
  std::string claimed_by_;  // set if someone else moved the record to aborted
  bool record_settled_ = false;  // the record is already an outcome marker (or purged)
  // ReverseOne writes the tombstone index entry of each placeholder it leaves (ReverseSent:
  // no outcome marker with the transaction's keys will follow).
  bool index_reversals_ = false;
  bool found_committed_ = false;  // a rollback found the record committed
  // Guards record_, record_value_, record_revision_, in_doubt_ and lease_lost_ while the lease
  // keeper may renew the record (from WriteRecord until StopRenewing).
  std::mutex record_mu_;
  Status lease_lost_;  // kAborted once any record update found the record claimed
  // The background renewal of this record's lease; declared last so that it ends first.
  LeaseKeeper::Handle renewal_;
};

Status CommitRun::PrepareSlot(Slot& slot, bool one_write, Prefetched first, bool* waited) {
  // An image from the cache is only a guess at the stored document: what is decided on it
  // other than a write that then lands (an error of the action) is decided again on a read.
  if (slot.cached) {
    if (Status st = PrepareOn(slot, one_write, std::move(first), waited); st.ok()) return st;
    slot.cached = false;
    return PrepareOn(slot, one_write, std::nullopt, waited);
  }
  return PrepareOn(slot, one_write, std::move(first), waited);
}

Status CommitRun::PrepareOn(Slot& slot, bool one_write, Prefetched first, bool* waited) {
  Waiter waiter{id_, priority_ms_, holding_locks_};
  auto cur = AwaitFree(env_, slot.action->key, waiter,
                       slot.is_write() ? Need::kWrite : Need::kCheck, std::move(first), waited);
  if (!cur.ok()) return cur.status();
  const bool existed = cur->has_value();
  const Revision read_revision = existed ? (*cur)->revision : 0;
  auto p = Prepare(*slot.action, std::move(*cur), id_, env_.options.default_schema_version,
                   FirstVersion(env_.clock.NowMillis()), one_write);
  if (!p.ok()) return p.status();
  slot.prep = std::move(p).value();
  slot.existed = existed;
  slot.read_revision = read_revision;
  return slot.is_write() ? CheckSize(slot) : Status::Ok();
}

Prefetched CommitRun::FromCache(Slot& slot) {
  slot.cached = false;
  if (env_.cache == nullptr || !slot.is_write()) return std::nullopt;
  DocCache::Taken taken = env_.cache->Take(slot.action->key);
  slot.ticket = taken.ticket;
  if (!taken.doc.has_value()) return std::nullopt;
  slot.cached = true;
  return Prefetched(std::move(taken.doc));
}

std::vector<Prefetched> CommitRun::ReadBatch(const std::vector<std::size_t>& which) {
  std::vector<BatchOp> ops;
  ops.reserve(which.size());
  for (std::size_t i : which) ops.push_back(BatchOp::Get(slots_[i].action->key));
  std::vector<BatchResult> results = env_.store.Batch(ops);
  std::vector<Prefetched> out(which.size());
  for (std::size_t i = 0; i < which.size() && i < results.size(); ++i) {
    // A failed read is simply not used: that document is read again on its own.
    if (results[i].status.ok()) out[i] = std::move(results[i].document);
  }
  return out;
}

Status CommitRun::PrepareAll() {
  // Documents whose image the cache keeps are not read (their applies' compare-and-swaps
  // tell whether the image was still current); the others are read in one batch.
  std::vector<Prefetched> first(slots_.size());
  std::vector<std::size_t> to_read;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    first[i] = FromCache(slots_[i]);
    if (!first[i].has_value()) to_read.push_back(i);
  }
  if (!to_read.empty()) {
    std::vector<Prefetched> reads = ReadBatch(to_read);
    for (std::size_t j = 0; j < to_read.size(); ++j) first[to_read[j]] = std::move(reads[j]);
  }
  // Once one document had to be waited for, the batch's later reads are old: those documents
  // are read again, so that their applies do not meet changes made during the wait.
  bool fresh = true;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    bool waited = false;
    if (!fresh) slots_[i].cached = false;
    Status st = PrepareSlot(slots_[i], /*one_write=*/false,
                            fresh ? std::move(first[i]) : Prefetched{}, &waited);
    if (!st.ok()) {
      // An earlier action evaluated on a cached image may fail on the stored document: the
      // failure reported is the first in action order, as without the cache.
      for (std::size_t j = 0; j < i; ++j) {
        if (!slots_[j].cached) continue;
        slots_[j].cached = false;
        if (Status earlier = PrepareSlot(slots_[j]); !earlier.ok()) return earlier;
      }
      return st;
    }
    fresh = fresh && !waited;
  }
  return Status::Ok();
}

Status CommitRun::CheckSize(Slot& slot) const {
  // The held image is the larger of the two the full path writes (the final one drops the
  // reference; a delete's tombstone drops the body); the one-write path builds only `final`.
  const json::object& largest = slot.prep.held.empty() ? slot.prep.final : slot.prep.held;
  // The parallel commit adds the hold's deadline to the held image: room for it is kept.
  constexpr std::size_t kHoldDeadlineBytes = 32;
  std::size_t bytes = SerializedSize(largest);
  if (!slot.prep.held.empty()) bytes += kHoldDeadlineBytes;
  slot.bytes = bytes;
  if (bytes > env_.options.max_document_bytes) {
    return Status::InvalidArgument(Where(slot.action->key) + ": the document would be " +
                                   std::to_string(bytes) + " bytes, over the limit of " +
                                   std::to_string(env_.options.max_document_bytes));
  }
  return Status::Ok();
}

CommitInfo CommitRun::Info() const {
  CommitInfo info;
  info.txn_id = id_;
  for (const Slot& s : slots_) info.versions.push_back(s.prep.final_version);
  return info;
}

Result<CommitInfo> CommitRun::Execute(const Transaction& txn) {
  slots_.reserve(txn.size());
  for (const Action& a : txn.actions()) {
    slots_.emplace_back();
    slots_.back().action = &a;
  }
  std::size_t writes = 0;
  for (const Slot& s : slots_) writes += s.is_write() ? 1 : 0;
  if (slots_.size() == 1 && writes == 1) return OnePhase(slots_[0]);

  if (Status st = PrepareAll(); !st.ok()) return st;
  if (writes == 0) return Info();  // only checks: validated, nothing to write
  if (env_.options.parallel_commit && writes == slots_.size()) return ParallelCommit();

  if (Status st = WriteRecord(); !st.ok()) return st;
  if (env_.leases != nullptr) renewal_ = env_.leases->Register([this] { Renew(); });
  if (Status st = ApplyAll(); !st.ok()) return Rollback(std::move(st));
  return CompleteClassic({});
}

Result<CommitInfo> CommitRun::CompleteClassic(std::vector<std::pair<Slot*, Status>> failed) {
  if (!failed.empty()) {
    if (env_.leases != nullptr) renewal_ = env_.leases->Register([this] { Renew(); });
    for (auto& [slot, status] : failed) {
      if (Status st = ApplyOne(*slot, std::move(status)); !st.ok()) return Rollback(std::move(st));
    }
  }
  std::size_t writes = 0;
  for (const Slot& s : slots_) writes += s.is_write() ? 1 : 0;
  if (writes != slots_.size()) {
    if (Status st = RevalidateChecks(); !st.ok()) return Rollback(std::move(st));
  }
  StopRenewing();  // the flip needs no lease: a claim would fail against it, and vice versa
  Status point = CommitPoint();
  if (point.code() == Code::kUnknown) {
    env_.log.warn("txn {}: {}; left for the collector", id_, point.message());
    return point;
  }
  if (!point.ok()) return Rollback(std::move(point));
  CommitInfo info = Info();
  Finish();
  return info;
}

Result<CommitInfo> CommitRun::OnePhase(Slot& slot) {
  Retry retry = ForwardRetry();
  const Key& key = slot.action->key;
  int races = 0;
  // Once a write's reply was lost, that write may still land (late, even after a resend), so
  // the action is never evaluated again: only the very same write is sent again, at the same
  // revision (at most one of the copies can land), and a conflict then means either that one
  // of ours landed (the document's last writer is this transaction) or that the document
  // changed under it, after or instead of ours: kUnknown.
  bool maybe_landed = false;
  bool evaluate = true;
  bool use_cache = true;  // until an image from the cache has been found stale
  json::object final;
  std::int64_t tomb_at = -1;  // a delete: its tombstone's time, for the index entry
  for (;;) {
    if (evaluate) {
      Prefetched first = use_cache ? FromCache(slot) : Prefetched{};
      if (!use_cache) slot.cached = false;
      if (Status st = PrepareSlot(slot, /*one_write=*/true, std::move(first)); !st.ok()) {
        return st;
      }
      final = std::move(slot.prep.final);
      const std::int64_t now = env_.clock.NowMillis();
      StampTombstoneTime(final, now);
      const bool indexed = slot.action->type == ActionType::kDelete && env_.options.index_tombstones;
      tomb_at = indexed ? now : -1;
      evaluate = false;
    }
    auto w = WriteIndexed(env_, key, slot.existed, slot.read_revision, final, tomb_at);
    if (w.ok()) {
      if (env_.cache != nullptr) {
        env_.cache->Put(key, std::move(final), *w, slot.bytes, slot.ticket);
      }
      return Info();
    }
    switch (w.code()) {
      case Code::kConflict:
        if (maybe_landed) break;  // resolved below
        if (slot.cached) {  // the cache's image was stale: read the document (not a race)
          use_cache = false;
          evaluate = true;
          continue;
        }
        // Changed since the read: read again (preconditions re-checked).
        if (++races >= kMaxRaces) {
          return Status::Conflict(Where(key) + " kept changing under the transaction");
        }
        evaluate = true;
        continue;
      case Code::kUnavailable:
        if (!retry.Next()) {
          return maybe_landed
                     ? Status::Unknown(Where(key) + ": write reply lost and unresolved")
                     : Status::Unavailable(Where(key) + ": " + w.status().message());
        }
        evaluate = !maybe_landed;
        continue;
      case Code::kUnknown:
        maybe_landed = true;
        break;
      default:
        return maybe_landed ? Status::Unknown(Where(key) + ": write reply lost; then " +
                                              w.status().ToString())
                            : w.status();
    }
    // A write of ours may have landed: look.
    auto g = GetWithRetry(env_, key);
    if (!g.ok()) return Status::Unknown(Where(key) + ": write reply lost and unresolved");
    if (g->has_value()) {
      auto m = DecodeMeta((*g)->value);
      if (m.ok() && m->last_writer == id_) return Info();
    }
    bool unchanged = g->has_value() ? (slot.existed && (*g)->revision == slot.read_revision)
                                    : !slot.existed;
    if (!unchanged) {
      return Status::Unknown(Where(key) + ": write reply lost and the document has changed since");
    }
    if (!retry.Next()) return Status::Unknown(Where(key) + ": write reply lost and unresolved");
  }
}

Result<json::object> CommitRun::BuildRecord(TxnState state) {
  record_.state = state;
  record_.created_ms = env_.clock.NowMillis();
  record_.gc_at_ms = record_.created_ms + env_.options.lease.count();
  record_.priority_ms = priority_ms_ != 0 ? priority_ms_ : record_.created_ms;
  for (Slot& s : slots_) {
    if (!s.is_write()) continue;
    s.record_index = record_.actions.size();
    record_.actions.push_back(s.prep.work);
    record_.actions.back().existed = s.existed;
    record_.actions.back().read_revision = s.read_revision;
  }
  json::object value = EncodeRecord(record_);
  std::size_t bytes = SerializedSize(value);
  if (bytes > env_.options.max_record_bytes) {
    return Status::InvalidArgument("the transaction's worklist would be " + std::to_string(bytes) +
                                   " bytes, over the limit of " +
                                   std::to_string(env_.options.max_record_bytes));
  }
  return value;
}

Status CommitRun::WriteRecord() {
  auto built = BuildRecord(TxnState::kPending);
  if (!built.ok()) return built.status();
  json::object value = std::move(built).value();
  Retry retry = ForwardRetry();
  for (;;) {
    auto r = env_.store.Create(record_key_, value);
    if (r.ok()) {
      record_revision_ = *r;
      record_value_ = std::move(value);
      return Status::Ok();
    }
    if (r.code() == Code::kUnavailable && retry.Next()) continue;
    if (r.code() == Code::kConflict) return Status::Unavailable("transaction id collision");
    if (r.code() != Code::kUnknown) return r.status();
    // The create may have landed. Adopt the record only if it is byte for byte the pending
    // record written here: in the meantime a collector may have claimed it (or settled and
    // even purged it), and a record someone else has written is never taken back.
    auto g = GetRecordDoc(env_, id_);
    if (!g.ok()) {
      return Status::Unavailable("could not write the transaction record: reply lost");
    }
    if (!g->has_value()) {
      // Not there: it never landed, or it landed and was settled and purged meanwhile. The
      // two cannot be told apart, so it is not created again; nothing was applied.
      return Status::Unavailable("could not write the transaction record: reply lost");
    }
    if ((*g)->value == value) {
      record_revision_ = (*g)->revision;
      record_value_ = std::move(value);
      return Status::Ok();
    }
    return Status::Aborted("transaction " + id_ + " was rolled back by " +
                           Claimer((*g)->value) + " before its coordinator learned that its "
                           "record was written");
  }
}

Result<CommitInfo> CommitRun::ParallelCommit() {
  auto built = BuildRecord(TxnState::kStaging);
  if (!built.ok()) return built.status();
  json::object value = std::move(built).value();
  // One batch, the record first: a store that runs a batch in order (LMDB, Redis, memory)
  // then never holds a document without its record, even if the coordinator dies mid-batch;
  // one that does not (a cluster: each shard on its own) may, and such holds are settled by
  // the first writer that meets them after their deadline, or by the collector's sweep.
  std::vector<BatchOp> ops;
  std::vector<Slot*> sent;  // sent[i]: the slot of ops[i] (nullptr: the record)
  ops.reserve(slots_.size() + 1);
  ops.push_back(BatchOp::Create(record_key_, value));
  sent.push_back(nullptr);
  for (Slot& s : slots_) {
    SetHoldDeadline(s.prep.held, record_.gc_at_ms);
    ops.push_back(SendApply(s));
    sent.push_back(&s);
  }
  std::vector<BatchResult> results = env_.store.Batch(ops);
  Result<Revision> record_result = Status::Unknown("no reply for the record's create");
  std::vector<std::pair<Slot*, Status>> failed;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    Status st = i < results.size() ? std::move(results[i].status)
                                   : Status::Unknown("no reply for this batch operation");
    if (sent[i] == nullptr) {
      if (st.ok()) {
        record_result = results[i].revision;
      } else {
        record_result = std::move(st);
      }
    } else if (st.ok()) {
      sent[i]->landed = true;
      sent[i]->held_revision = results[i].revision;
    } else {
      failed.emplace_back(sent[i], std::move(st));
    }
  }
  if (Status st = SettleStagingRecord(std::move(record_result), std::move(value)); !st.ok()) {
    // Fenced (by us or by a writer that met a hold of ours without its record): it can never
    // commit, and what landed is reversed. Otherwise the record is unknown: left as it is.
    if (record_settled_ || st.code() == Code::kAborted) ReverseSent();
    return st;
  }
  // Every reply OK: the record and every hold were there together. A hold is undone only after
  // its record has moved on or, absent, been fenced; and a fence is never erased, so a record
  // create that lands has met no fence: no hold of ours can have been undone before it landed.
  if (record_.state == TxnState::kStaging && !failed.empty()) {
    // An apply whose reply was lost may have landed, or may still land. Either it is held now,
    // or it is fenced so that it never lands: the record may leave staging only once some
    // document is known never to be held while it is staging (else moving it to pending could
    // undo a commit that had already happened: every document held while staging).
    std::vector<std::pair<Slot*, Status>> still;
    for (auto& [slot, status] : failed) {
      if (status.code() != Code::kUnknown) {
        still.emplace_back(slot, std::move(status));
        continue;
      }
      auto held = HeldOrFence(env_, id_, record_.actions[slot->record_index],
                              env_.clock.NowMillis());
      if (!held.ok()) {
        // Neither known held nor fenced: the record stays staging, and a resolver decides
        // after its lease (every document held: committed).
        return Status::Unknown(Where(slot->action->key) + ": write reply lost and unresolved (" +
                               held.status().ToString() + ")");
      }
      if (held->has_value()) {
        slot->landed = true;
        slot->held_revision = **held;
      } else {
        still.emplace_back(slot, Status::Conflict("fenced after a lost reply"));
      }
    }
    failed = std::move(still);
  }
  if (record_.state == TxnState::kStaging && failed.empty() && LateForTheRecord()) {
    // The replies came back late: a resolver may have fenced a document and aborted the record
    // while the batch was landing, and a fence placeholder is erased after the tombstone
    // retention, after which a late apply could land on it. The record tells: still staging at
    // the revision its create left means nobody resolved it, so every reply stands.
    auto g = GetRecordDoc(env_, id_);
    if (!g.ok()) return Status::Unknown("the transaction record could not be read after a late "
                                        "batch: " + g.status().ToString());
    if (!g->has_value() || (**g).revision != record_revision_) {
      failed.emplace_back(nullptr, Status::Unknown("the record moved on during a late batch"));
    }
  }
  if (record_.state == TxnState::kStaging && failed.empty()) {
    // The record and every hold landed: committed. The flip and the rest come after.
    CommitInfo info = Info();
    Finish();
    return info;
  }
  if (record_.state == TxnState::kStaging) {
    if (Status st = FallBackToPending(); !st.ok()) {
      if (st.code() == Code::kAborted) return Rollback(std::move(st));
      return st;
    }
  }
  if (record_.state == TxnState::kCommitted) {  // a resolver found every document held
    CommitInfo info = Info();
    Finish();
    return info;
  }
  // (An entry without a slot only stopped the acknowledgement above; the fallback found the
  // record where it left it, so every apply is as its reply said.)
  std::erase_if(failed, [](const auto& f) { return f.first == nullptr; });
  return CompleteClassic(std::move(failed));
}

Status CommitRun::SettleStagingRecord(Result<Revision> first, json::object value) {
  Retry retry = ForwardRetry();
  bool maybe_landed = false;
  bool self_fenced = false;  // a fence of ours was sent (it may have landed)
  Result<Revision> r = std::move(first);
  for (;;) {
    if (r.ok()) {
      record_revision_ = *r;
      record_value_ = std::move(value);
      return Status::Ok();
    }
    if (r.code() == Code::kUnavailable) {
      if (retry.Next()) {
        r = env_.store.Create(record_key_, value);
        continue;
      }
      if (maybe_landed) return Status::Unknown("transaction record write reply lost and unresolved");
      // Never landed. Fence it, so that what landed of ours can be reversed now; if even that
      // fails, the holds carry their deadline, past which whoever meets one fences the record.
      TxnRecord fence = OutcomeMarker(record_, env_.clock.NowMillis());
      fence.state = TxnState::kAborted;
      fence.aborted_by = "coordinator";
      fence.fence = true;
      if (env_.store.Create(record_key_, EncodeRecord(fence)).ok()) {
        record_ = fence;
        record_settled_ = true;
      }
      return Status::Unavailable("could not write the transaction record: " + r.status().message());
    }
    if (r.code() != Code::kConflict && r.code() != Code::kUnknown) {
      return maybe_landed ? Status::Unknown("transaction record write reply lost; then " +
                                            r.status().ToString())
                          : r.status();
    }
    maybe_landed = maybe_landed || r.code() == Code::kUnknown;
    auto g = GetRecordDoc(env_, id_);
    if (!g.ok()) {
      return maybe_landed ? Status::Unknown("transaction record write reply lost and unresolved")
                          : Status::Unavailable("could not read the transaction record");
    }
    if (!g->has_value()) {
      if (maybe_landed && LateForTheRecord()) {
        // Past its lease it may have landed, been resolved and settled, and (much later) been
        // purged: that cannot be told from never having landed.
        return Status::Unknown("transaction record write reply lost, and the record is gone");
      }
      // Not there: ours never landed, and it must never land late. Fence it ourselves.
      TxnRecord fence = OutcomeMarker(record_, env_.clock.NowMillis());
      fence.state = TxnState::kAborted;
      fence.aborted_by = "coordinator";
      fence.fence = true;
      r = env_.store.Create(record_key_, EncodeRecord(fence));
      self_fenced = true;
      if (r.ok() && LateForTheRecord()) {
        // Our create may have landed after the read, been resolved past its lease, settled
        // and erased before the fence landed: committed or not cannot be told.
        record_ = fence;
        record_settled_ = false;  // nothing reversed: those holds may be a commit's
        return Status::Unknown("transaction record write reply lost; the record was found "
                               "absent only after its lease had run");
      }
      if (r.ok()) {
        record_ = fence;
        record_settled_ = true;
        // Reported like the classic path's lost record write: nothing is committed, and
        // ParallelCommit reverses what landed.
        return Status::Unavailable("could not write the transaction record: reply lost (the "
                                   "record is now fenced; nothing was committed)");
      }
      if (!retry.Next()) return Status::Unknown("transaction record write reply lost and unresolved");
      if (r.code() == Code::kUnavailable) r = Status::Unknown("retry");  // read again first
      continue;
    }
    if ((*g)->value == value) {  // ours (lost reply)
      r = (*g)->revision;
      continue;
    }
    auto rec = DecodeRecord((*g)->value);
    if (!rec.ok()) {
      return Status::Corruption("record of transaction " + id_ + ": " + rec.status().message());
    }
    if (rec->state == TxnState::kCommitted && maybe_landed) {
      // Ours, proven by a reader or resolver before we looked (a fence is always aborted).
      record_revision_ = (*g)->revision;
      record_value_ = (*g)->value;
      record_.state = TxnState::kCommitted;
      record_settled_ = rec->done;
      return Status::Ok();
    }
    if (rec->state == TxnState::kAborted && rec->fence && self_fenced) {
      // Our own fence, whose reply was lost: as if it had replied.
      record_ = std::move(rec).value();
      record_settled_ = true;
      return Status::Unavailable("could not write the transaction record: reply lost (the "
                                 "record is now fenced; nothing was committed)");
    }
    if (rec->state == TxnState::kAborted) {
      record_revision_ = (*g)->revision;
      record_value_ = (*g)->value;
      record_.state = TxnState::kAborted;
      record_settled_ = rec->done;
      claimed_by_ = rec->aborted_by.empty() ? "a collector" : rec->aborted_by;
      return Status::Aborted("transaction " + id_ + " was rolled back by " + claimed_by_ +
                             " (its documents were found without its record, or not all held)");
    }
    env_.log.error("txn {}: another transaction's record has this id", id_);
    return maybe_landed ? Status::Unknown("transaction record write reply lost; the id is taken")
                        : Status::Unavailable("transaction id collision");
  }
}

Status CommitRun::FallBackToPending() {
  json::object pending = record_value_;
  pending["state"] = TxnStateName(TxnState::kPending);
  Retry retry = ForwardRetry();
  for (;;) {
    auto r = env_.store.Replace(record_key_, record_revision_, pending);
    if (r.ok()) {
      record_revision_ = *r;
      record_value_ = std::move(pending);
      record_.state = TxnState::kPending;
      return Status::Ok();
    }
    if (r.code() != Code::kConflict && r.code() != Code::kUnknown &&
        r.code() != Code::kUnavailable) {
      return r.status();
    }
    if (r.code() != Code::kUnavailable) {
      auto g = GetRecordDoc(env_, id_);
      if (!g.ok()) return g.status();
      if (!g->has_value()) {
        // Resolved (committed or aborted: a resolver proves it or fences it), settled and
        // erased since: which of the two cannot be told any more.
        return Status::Unknown("the staging record was settled by a collector and is gone; "
                               "the transaction's outcome cannot be told");
      }
      if ((*g)->value == pending) {  // ours (lost reply)
        r = (*g)->revision;
        record_revision_ = *r;
        record_value_ = std::move(pending);
        record_.state = TxnState::kPending;
        return Status::Ok();
      }
      auto rec = DecodeRecord((*g)->value);
      if (!rec.ok()) return Status::Corruption("record of transaction " + id_ + ": " + rec.status().message());
      if ((*g)->revision != record_revision_) {
        if (rec->state == TxnState::kCommitted) {  // proven: every document held
          record_revision_ = (*g)->revision;
          record_value_ = (*g)->value;
          record_settled_ = rec->done;
          record_.state = TxnState::kCommitted;
          return Status::Ok();
        }
        // Aborted by a resolver that fenced a document (Rollback reads it again and reverses).
        return Status::Aborted("transaction " + id_ + " was rolled back by " + Claimer((*g)->value));
      }
    }
    if (!retry.Next()) {
      // Still staging: a resolver decides it after its lease (every document held: committed).
      return Status::Unknown("could not move the staging record on; the transaction commits only "
                             "if every document it wrote is found held by it");
    }
  }
}

void CommitRun::ReverseSent() {
  index_reversals_ = true;  // the record is a fence (or unknown): no marker will list them
  Retry retry(env_, 0, env_.options.rollback_timeout);
  bool all = true;
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) {
    if (it->is_write() && it->sent) all = ReverseOne(*it, retry) && all;
  }
  if (!all) env_.log.warn("txn {}: rollback incomplete; left for the collector", id_);
}

bool CommitRun::LeaseLeft(std::int64_t more_than_ms) {
  std::lock_guard<std::mutex> lock(record_mu_);
  return lease_lost_.ok() && env_.clock.NowMillis() + more_than_ms < record_.gc_at_ms;
}

Status CommitRun::KeepLease() {
  const std::int64_t lease = env_.options.lease.count();
  if (LeaseLeft(lease / 2)) return Status::Ok();  // the common case: no copy of the record
  return UpdateRecord([&](TxnRecord& r) {
    // Past half the lease: push the GC timestamp out so no collector takes a live transaction.
    const std::int64_t now = env_.clock.NowMillis();
    if (now + lease / 2 < r.gc_at_ms) return false;
    r.gc_at_ms = now + lease;
    return true;
  });
}

void CommitRun::Renew() {
  const std::int64_t lease = env_.options.lease.count();
  if (LeaseLeft(lease * 3 / 4)) return;
  Status s = UpdateRecord([&](TxnRecord& r) {
    // A quarter of the lease has gone since the last extension: extend.
    const std::int64_t now = env_.clock.NowMillis();
    if (now + lease * 3 / 4 < r.gc_at_ms) return false;
    r.gc_at_ms = now + lease;
    return true;
  });
  if (!s.ok() && s.code() != Code::kAborted) {
    env_.log.debug("txn {}: lease renewal failed ({}); retried next period", id_, s.ToString());
  }
}

Status CommitRun::UpdateRecord(const std::function<bool(TxnRecord&)>& change, bool check_size) {
  std::lock_guard<std::mutex> lock(record_mu_);
  if (!lease_lost_.ok()) return lease_lost_;
  Status s = ReplaceRecord(change, check_size);
  // Someone else wrote the record (a claim, a marker): that is final, whoever learns it first.
  if (s.code() == Code::kAborted) lease_lost_ = s;
  return s;
}

Status CommitRun::ReplaceRecord(const std::function<bool(TxnRecord&)>& change, bool check_size) {
  Retry retry = ForwardRetry();
  for (;;) {
    // The update, computed from the record as we know it (again, if it turned out to be a
    // write of ours whose reply was lost).
    TxnRecord updated = record_;
    if (!change(updated)) return Status::Ok();
    json::object value = EncodeRecord(updated);
    if (check_size && SerializedSize(value) > env_.options.max_record_bytes) {
      return Status::InvalidArgument("the transaction's worklist grew over the limit of " +
                                     std::to_string(env_.options.max_record_bytes) + " bytes");
    }
    for (;;) {
      auto r = env_.store.Replace(record_key_, record_revision_, value);
      if (r.ok()) {
        record_revision_ = *r;
        record_ = std::move(updated);
        record_value_ = std::move(value);
        in_doubt_.clear();
        return Status::Ok();
      }
      if (r.code() != Code::kUnavailable && r.code() != Code::kConflict &&
          r.code() != Code::kUnknown) {
        return r.status();
      }
      if (r.code() == Code::kUnknown) in_doubt_.push_back(value);
      auto g = GetRecordDoc(env_, id_);
      if (!g.ok()) return g.status();
      if (!g->has_value()) {
        return Status::Aborted("transaction " + id_ + " was rolled back by a collector");
      }
      if ((*g)->value == value) {  // our lost-reply write landed
        record_revision_ = (*g)->revision;
        record_ = std::move(updated);
        record_value_ = std::move(value);
        in_doubt_.clear();
        return Status::Ok();
      }
      const bool rebase = AdoptInDoubt(**g);  // an earlier write of ours landed after all
      if (!rebase && (*g)->revision != record_revision_) {
        // Someone else wrote the record: only a claim or an outcome marker can (the
        // coordinator is the only writer of its pending record), and neither is taken back.
        return Status::Aborted("transaction " + id_ + " was rolled back by " +
                               Claimer((*g)->value));
      }
      if (!retry.Next()) return Status::Unavailable("could not update the transaction record");
      if (rebase) break;  // recompute the update from the record as it now is
    }
  }
}

Status CommitRun::Reacquire(Slot& slot) {
  const Key& key = slot.action->key;
  // Once this transaction holds a document or a lock, it waits only for younger blockers
  // (wait-die); holding nothing yet, waiting cannot close a cycle.
  bool holds = holding_locks_;
  for (const Slot& s : slots_) holds = holds || (&s != &slot && s.sent);
  auto cur = AwaitFree(env_, key, Waiter{id_, priority_ms_, holds}, Need::kWrite);
  if (!cur.ok()) return cur.status();
  if (cur->has_value()) {
    auto m = DecodeMeta((**cur).value);
    if (m.ok() && m->txn == id_) {  // an earlier write of ours landed after all
      slot.landed = true;
      slot.held_revision = (**cur).revision;
      return Status::Ok();
    }
  }
  auto p = Prepare(*slot.action, *cur, id_, env_.options.default_schema_version,
                   FirstVersion(env_.clock.NowMillis()));
  if (!p.ok()) return p.status();
  Slot next = slot;
  next.prep = std::move(p).value();
  next.existed = cur->has_value();
  next.read_revision = next.existed ? (**cur).revision : 0;
  if (Status size = CheckSize(next); !size.ok()) return size;
  // Record the new reversing data (and the revision a collector would fence) before writing.
  Status st = UpdateRecord(
      [&](TxnRecord& updated) {
        WorkAction& work = updated.actions[slot.record_index];
        work = next.prep.work;
        work.existed = next.existed;
        work.read_revision = next.read_revision;
        return true;
      },
      /*check_size=*/true);
  if (!st.ok()) return st;
  slot = std::move(next);
  return Status::Ok();
}

Status CommitRun::ApplyAll() {
  if (Status s = KeepLease(); !s.ok()) return s;
  std::vector<BatchOp> ops;
  std::vector<Slot*> sent;
  for (Slot& s : slots_) {
    if (!s.is_write()) continue;
    ops.push_back(SendApply(s));
    sent.push_back(&s);
  }
  std::vector<BatchResult> results = env_.store.Batch(ops);
  std::vector<std::pair<Slot*, Status>> failed;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    if (i < results.size() && results[i].status.ok()) {
      sent[i]->landed = true;
      sent[i]->held_revision = results[i].revision;
    } else {
      failed.emplace_back(sent[i], i < results.size() ? std::move(results[i].status)
                                                      : Status::Unknown("no reply"));
    }
  }
  // In action order, as the pre-reads waited: a document that changed is waited for and
  // evaluated again, a lost reply looked at, a transient failure sent again.
  for (auto& [slot, status] : failed) {
    if (Status st = ApplyOne(*slot, std::move(status)); !st.ok()) return st;
  }
  return Status::Ok();
}

Status CommitRun::ApplyOne(Slot& slot, Status first) {
  const Key& key = slot.action->key;
  Retry retry = ForwardRetry();
  int reacquired = 0;
  bool have_first = !first.ok();
  for (;;) {
    Result<Revision> w = Status::Unavailable("");
    if (have_first) {
      w = std::move(first);
      have_first = false;
    } else {
      if (Status s = KeepLease(); !s.ok()) return s;
      slot.sent = true;
      w = WriteAt(env_.store, key, slot.existed, slot.read_revision, slot.prep.held);
    }
    if (w.ok()) {
      slot.landed = true;
      slot.held_revision = *w;
      return Status::Ok();
    }
    switch (w.code()) {
      case Code::kConflict: {
        // Changed since it was read (written, held or locked by another transaction).
        if (++reacquired >= kMaxRaces) {
          return Status::Conflict(Where(key) + " kept changing while the transaction ran");
        }
        if (Status st = Reacquire(slot); !st.ok()) return st;
        if (slot.landed) return Status::Ok();
        continue;
      }
      case Code::kUnavailable:
        if (!retry.Next()) return Status::Unavailable(Where(key) + ": " + w.status().message());
        continue;
      case Code::kUnknown: {
        auto g = GetWithRetry(env_, key);
        if (!g.ok()) return Status::Unavailable(Where(key) + ": write reply lost and unresolved");
        if (g->has_value()) {
          auto m = DecodeMeta((*g)->value);
          if (m.ok() && m->txn == id_) {
            slot.landed = true;
            slot.held_revision = (*g)->revision;
            return Status::Ok();
          }
        }
        bool unchanged = g->has_value() ? (slot.existed && (*g)->revision == slot.read_revision)
                                        : !slot.existed;
        if (!unchanged) {
          if (++reacquired >= kMaxRaces) {
            return Status::Conflict(Where(key) + " kept changing while the transaction ran");
          }
          if (Status st = Reacquire(slot); !st.ok()) return st;
          if (slot.landed) return Status::Ok();
          continue;
        }
        if (!retry.Next()) return Status::Unavailable(Where(key) + ": write reply lost");
        continue;
      }
      default:
        return w.status();
    }
  }
}

Status CommitRun::RevalidateChecks() {
  std::vector<std::size_t> checks;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].is_write()) checks.push_back(i);
  }
  std::vector<Prefetched> reads = ReadBatch(checks);
  for (std::size_t j = 0; j < checks.size(); ++j) {
    Slot& s = slots_[checks[j]];
    auto cur = AwaitFree(env_, s.action->key, Waiter{id_, priority_ms_, true}, Need::kCheck,
                         std::move(reads[j]));
    if (!cur.ok()) return cur.status();
    auto p = Prepare(*s.action, *cur, id_, env_.options.default_schema_version,
                     FirstVersion(env_.clock.NowMillis()));
    if (!p.ok()) return p.status();
  }
  return Status::Ok();
}

Status CommitRun::CommitPoint() {
  // The record as written, with only its state changed: no second encoding of the worklist.
  record_value_["state"] = TxnStateName(TxnState::kCommitted);
  Status s = FlipToCommitted();
  if (!s.ok()) record_value_["state"] = TxnStateName(record_.state);
  return s;
}

Status CommitRun::FlipToCommitted() {
  const json::object& value = record_value_;
  Retry retry = ForwardRetry();
  bool maybe_landed = false;
  for (;;) {
    auto r = env_.store.Replace(record_key_, record_revision_, value);
    if (r.ok()) {
      record_revision_ = *r;
      return Status::Ok();
    }
    if (r.code() == Code::kUnavailable) {
      if (retry.Next()) continue;
      // A flip whose reply was lost earlier may still land: only its absence is known now.
      return maybe_landed ? Status::Unknown("commit flag write reply lost")
                          : Status::Unavailable("could not set the commit flag");
    }
    if (r.code() != Code::kConflict && r.code() != Code::kUnknown) {
      return maybe_landed ? Status::Unknown("commit flag write reply lost; then " +
                                            r.status().ToString())
                          : r.status();
    }
    maybe_landed = maybe_landed || r.code() == Code::kUnknown;
    // Learn what the record says now.
    auto g = GetRecordDoc(env_, id_);
    Result<TxnRecord> rec = Status::NotFound("");
    if (g.ok() && g->has_value()) rec = DecodeRecord((*g)->value);
    if (rec.ok() && rec->state == TxnState::kCommitted) {
      // Only this coordinator moves its record to committed: our flip landed (a collector may
      // have finished the transaction since, leaving a committed marker).
      record_revision_ = (*g)->revision;
      if (rec->done) record_settled_ = true;
      return Status::Ok();
    }
    if (rec.ok() && rec->state == TxnState::kAborted) {
      return Status::Aborted("transaction " + id_ + " was rolled back by " + Claimer((*g)->value));
    }
    if (rec.ok() && rec->state == TxnState::kPending) {
      if (AdoptInDoubt(**g)) {  // a lease extension of ours whose reply was lost: flip from it
        record_value_["state"] = TxnStateName(TxnState::kCommitted);
        if (retry.Next()) continue;
        return maybe_landed ? Status::Unknown("commit flag write reply lost")
                            : Status::Unavailable("could not set the commit flag");
      }
      if ((*g)->revision != record_revision_) {
        // A pending record we did not write: never adopted, never flipped.
        env_.log.error("txn {}: its pending record was rewritten by another writer", id_);
        return maybe_landed ? Status::Unknown("commit flag write reply lost")
                            : Status::Unavailable("the transaction record changed under its coordinator");
      }
      if (retry.Next()) continue;  // our own flip did not land
      return maybe_landed ? Status::Unknown("commit flag write reply lost")
                          : Status::Unavailable("could not set the commit flag");
    }
    // The record is unreadable or gone.
    if (maybe_landed) {
      return Status::Unknown("commit flag write reply lost and the record could not be read");
    }
    return Status::Aborted("transaction " + id_ + " was claimed by a collector");
  }
}

void CommitRun::Finish() {
  FinishJob job;
  job.txn_id = id_;
  job.record_key = record_key_;
  job.record_revision = record_revision_;
  job.record = std::move(record_);
  job.record.actions.clear();  // the marker has none, only the keys of the deletes (tk)
  for (const Slot& s : slots_) {
    if (s.action->type == ActionType::kDelete) job.record.tomb_keys.push_back(s.action->key);
  }
  job.record_settled = record_settled_;
  if (job.record.state == TxnState::kStaging) {
    job.flip_first = true;
    job.committed_value = std::move(record_value_);  // not needed here any more
    job.committed_value["state"] = TxnStateName(TxnState::kCommitted);
    // Committed whatever happens next (every document held while it was staging): the flip
    // writes the record without what a rollback would need, a smaller write.
    DropReversingData(job.committed_value);
    job.record.state = TxnState::kCommitted;
  }
  for (Slot& s : slots_) {
    if (!s.is_write()) continue;
    // Committed: the held image is not needed any more, its body becomes the final one.
    job.docs.push_back({s.action->key, s.held_revision,
                        Finished(std::move(s.prep.held), s.prep.meta), s.bytes, s.ticket});
  }
  if (env_.finisher != nullptr && env_.finisher->Submit(job)) return;
  FinishTransaction(env_, job);
}

bool CommitRun::AdoptInDoubt(const StoredDocument& stored) {
  auto it = std::find(in_doubt_.begin(), in_doubt_.end(), stored.value);
  if (it == in_doubt_.end()) return false;
  auto rec = DecodeRecord(stored.value);
  if (!rec.ok()) return false;
  record_revision_ = stored.revision;
  record_value_ = std::move(*it);
  record_ = std::move(rec).value();
  in_doubt_.clear();  // the others were sent at the old revision: they can no longer land
  return true;
}

Status CommitRun::Rollback(Status reason) {
  StopRenewing();
  env_.log.debug("txn {}: rolling back: {}", id_, reason.ToString());
  Retry retry(env_, 0, env_.options.rollback_timeout);
  if (!MarkAborted(retry)) {
    if (found_committed_) {
      // Cannot happen while every flip whose reply was lost is reported kUnknown; if it ever
      // does, the transaction is committed and no error may say otherwise.
      return Status::Unknown("transaction " + id_ + " was found committed while rolling back (" +
                             reason.ToString() + "); settle it with Database::Outcome");
    }
    return reason;
  }
  if (!claimed_by_.empty() && reason.code() != Code::kAborted) {
    // A collector claimed the transaction (it ran past its lease): that, not the symptom met
    // (a fenced document's CAS failing), is the outcome.
    reason = Status::Aborted("transaction " + id_ + " was rolled back by " + claimed_by_ + " (" +
                             reason.ToString() + ")");
  }
  bool all = true;
  for (auto it = slots_.rbegin(); it != slots_.rend(); ++it) {
    if (it->is_write() && it->sent) all = ReverseOne(*it, retry) && all;
  }
  if (!all) {
    env_.log.warn("txn {}: rollback incomplete; left for the collector", id_);
  } else if (!record_settled_) {
    // Never overwrite a marker a collector already wrote: it names who rolled us back.
    WriteOutcomeMarker(env_, id_, record_key_, record_revision_, record_, TxnState::kAborted,
                       retry);
  }
  return reason;
}

bool CommitRun::MarkAborted(Retry& retry) {
  TxnRecord aborted = record_;
  aborted.state = TxnState::kAborted;
  aborted.aborted_by = "coordinator";
  json::object value = EncodeRecord(aborted);
  for (;;) {
    auto r = env_.store.Replace(record_key_, record_revision_, value);
    if (r.ok()) {
      record_revision_ = *r;
      record_ = std::move(aborted);
      record_value_ = std::move(value);
      return true;
    }
    if (r.code() == Code::kConflict || r.code() == Code::kUnknown) {
      auto g = GetRecordDoc(env_, id_);
      if (g.ok() && !g->has_value()) {  // a collector finished the rollback
        claimed_by_ = "a collector";
        record_settled_ = true;
        return true;
      }
      if (g.ok()) {
        auto rec = DecodeRecord((*g)->value);
        if (!rec.ok()) {
          env_.log.error("txn {}: record unreadable during rollback: {}", id_,
                         rec.status().message());
          return false;
        }
        if (rec->state == TxnState::kAborted) {
          // Our own write whose reply was lost, or a collector's claim: final either way.
          if (rec->aborted_by != "coordinator") {
            claimed_by_ = rec->aborted_by.empty() ? "a collector" : rec->aborted_by;
          }
          record_revision_ = (*g)->revision;
          record_value_ = (*g)->value;
          record_ = std::move(rec).value();
          record_settled_ = record_.done;
          return true;
        }
        if (rec->state == TxnState::kCommitted) {
          found_committed_ = true;
          if (!rec->done) {
            env_.log.error("txn {}: rollback found the record committed; not reversing", id_);
          }
          return false;
        }
        // Pending. Ours only at the revision we know, or as the write whose reply was lost.
        if ((*g)->revision != record_revision_) {
          if (!AdoptInDoubt(**g)) {
            env_.log.error("txn {}: its pending record was rewritten by another writer; "
                           "left for the collector", id_);
            return false;
          }
          aborted = record_;  // our in-doubt write landed after all: abort from it
          aborted.state = TxnState::kAborted;
          aborted.aborted_by = "coordinator";
          value = EncodeRecord(aborted);
          continue;  // try again at once
        }
      }
    } else if (r.code() != Code::kUnavailable) {
      env_.log.error("txn {}: marking aborted: {}", id_, r.status().ToString());
      return false;
    }
    if (!retry.Next()) {
      env_.log.warn("txn {}: rollback gave up marking the record aborted", id_);
      return false;
    }
  }
}

bool CommitRun::ReverseOne(Slot& slot, Retry& retry) {
  const Key& key = slot.action->key;
  std::optional<StoredDocument> cur;
  if (slot.landed) cur = StoredDocument{slot.prep.held, slot.held_revision};
  for (;;) {
    if (!cur) {
      auto g = env_.store.Get(key);
      if (!g.ok()) {
        if (g.code() == Code::kUnavailable && retry.Next()) continue;
        env_.log.warn("txn {}: rollback could not read {}: {}", id_, Where(key),
                      g.status().ToString());
        return false;
      }
      if (!g->has_value()) return true;
      cur = std::move(*g);
    }
    auto m = DecodeMeta(cur->value);
    if (!m.ok()) {
      env_.log.error("txn {}: rollback: {}: {}", id_, Where(key), m.status().message());
      return false;
    }
    if (m->txn != id_) return true;  // not ours (never landed, or already reversed)
    json::object reversed = Reversed(cur->value, *m, slot.prep.work);
    StampTombstoneTime(reversed, env_.clock.NowMillis());
    if (index_reversals_) {
      // No outcome marker will name the placeholder this leaves (the record is a fence): its
      // tombstone index entry first. If that fails, the rollback goes on: a collector's sweep
      // finds the placeholder.
      if (Status st = IndexDocTombstone(env_, key, reversed); !st.ok()) {
        env_.log.warn("txn {}: placeholder of {} not indexed ({}); the collector's sweep purges it",
                      id_, Where(key), st.ToString());
      }
    }
    auto r = env_.store.Replace(key, cur->revision, reversed);
    cur.reset();
    if (r.ok()) return true;
    if (r.code() == Code::kConflict) continue;  // changed under us: look again
    if ((r.code() == Code::kUnavailable || r.code() == Code::kUnknown) && retry.Next()) continue;
    env_.log.warn("txn {}: rollback could not reverse {}: {}", id_, Where(key),
                  r.status().ToString());
    return false;
  }
}

}  // namespace

Coordinator::Coordinator(Env env) : env_(env) {}

Result<CommitInfo> Coordinator::Commit(const Transaction& txn, CommitRequest request) {
  if (Status s = ValidateTransaction(txn, env_.options); !s.ok()) return s;
  if (request.id.empty()) request.id = NewTxnId();
  if (request.priority_ms == 0) request.priority_ms = env_.clock.NowMillis();
  CommitRun run(env_, request);
  auto r = run.Execute(txn);
  if (!r.ok()) return r.status().WithTxnId(std::move(request.id));
  return r;
}

}  // namespace litetx::engine
