#include "engine/finisher.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <utility>

#include "engine/meta.h"
#include "engine/repair.h"
#include "engine/worklist.h"

namespace litetx::engine {
namespace json = boost::json;

namespace {

// Finishes one document whose batched compare-and-swap failed with `failed`: re-reads it and,
// while it still carries the transaction's reference, writes its final image at the revision
// read. Returns true once it no longer carries the reference.
bool FinishOne(const Env& env, const std::string& id, FinishJob::Doc& doc, Status failed) {
  Retry retry(env, env.options.max_attempts);
  Revision rev = doc.held_revision;
  Status last = std::move(failed);
  for (;;) {
    if (last.code() == Code::kConflict || last.code() == Code::kUnknown) {
      auto g = GetWithRetry(env, doc.key);
      if (g.ok()) {
        if (!g->has_value()) return true;
        auto m = DecodeMeta((*g)->value);
        if (!m.ok()) {
          env.log.error("txn {}: {}: {}", id, Where(doc.key), m.status().message());
          return false;
        }
        if (m->txn != id) return true;  // finished (by us or by someone else)
        doc.final = Finished((*g)->value, *m);
        StampTombstoneTime(doc.final, env.clock.NowMillis());
        rev = (*g)->revision;
      }
    } else if (last.code() != Code::kUnavailable) {
      env.log.error("txn {}: finishing {}: {}", id, Where(doc.key), last.ToString());
      return false;
    }
    if (!retry.Next()) return false;
    auto r = env.store.Replace(doc.key, rev, doc.final);
    if (r.ok()) return true;
    last = r.status();
  }
}

}  // namespace

namespace {

// The flip of a parallel commit's staging record (FinishJob::flip_first). True once the record
// says committed (job.record_revision then its revision, or job.record_settled if it is already
// the outcome marker); false if it could not be written (left for a resolver, which proves it).
bool FlipStaging(const Env& env, FinishJob& job) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    auto r = env.store.Replace(job.record_key, job.record_revision, job.committed_value);
    if (r.ok()) {
      job.record_revision = *r;
      return true;
    }
    if (r.code() == Code::kConflict || r.code() == Code::kUnknown) {
      auto g = GetWithRetry(env, job.record_key);
      if (g.ok()) {
        if (!g->has_value()) {
          // Settled and purged: a committed transaction's record goes only after its documents.
          job.record_settled = true;
          return true;
        }
        auto rec = DecodeRecord((*g)->value);
        if (!rec.ok()) {
          env.log.error("txn {}: record unreadable at its flip: {}", job.txn_id,
                        rec.status().message());
          return false;
        }
        if (rec->state == TxnState::kCommitted) {  // ours (lost reply), or a resolver's proof
          job.record_revision = (*g)->revision;
          job.record_settled = rec->done;
          return true;
        }
        if (rec->state == TxnState::kAborted) {
          env.log.error("txn {}: acknowledged as committed, but its staging record was found "
                        "aborted by {}", job.txn_id, rec->aborted_by);
          return false;
        }
        if ((*g)->revision != job.record_revision) {
          env.log.error("txn {}: its staging record was rewritten by another writer", job.txn_id);
          return false;
        }
      }
    } else if (r.code() != Code::kUnavailable) {
      env.log.error("txn {}: flip: {}", job.txn_id, r.status().ToString());
      return false;
    }
    if (!retry.Next()) {
      env.log.warn("txn {}: committed (every document held), but the flip could not be written; "
                   "left for the collector", job.txn_id);
      return false;
    }
  }
}

}  // namespace

bool FinishTransaction(const Env& env, FinishJob& job) {
  if (job.flip_first && !job.record_settled && !FlipStaging(env, job)) return false;
  const std::int64_t now = env.clock.NowMillis();
  std::vector<BatchOp> ops;
  ops.reserve(job.docs.size());
  for (FinishJob::Doc& d : job.docs) {
    StampTombstoneTime(d.final, now);
    ops.push_back(BatchOp::Replace(d.key, d.held_revision, d.final));
  }
  std::vector<BatchResult> results = env.store.Batch(ops);
  bool all = true;
  for (std::size_t i = 0; i < job.docs.size(); ++i) {
    Status st = i < results.size() ? std::move(results[i].status)
                                   : Status::Unknown("no reply for this batch operation");
    if (!st.ok()) all = FinishOne(env, job.txn_id, job.docs[i], std::move(st)) && all;
  }
  if (!all) {
    env.log.warn("txn {}: committed, but some documents still carry its reference; left for "
                 "the collector", job.txn_id);
    return false;
  }
  if (job.record_settled) return true;  // a collector already wrote the marker
  Retry retry(env, env.options.max_attempts);
  WriteOutcomeMarker(env, job.txn_id, job.record_key, job.record_revision, job.record,
                     TxnState::kCommitted, retry);
  return true;
}

void WriteOutcomeMarker(const Env& env, const std::string& txn_id, const Key& record_key,
                        Revision record_revision, const TxnRecord& record, TxnState state,
                        Retry& retry) {
  TxnRecord settled = record;
  settled.state = state;
  json::object value = EncodeRecord(OutcomeMarker(settled, env.clock.NowMillis()));
  for (;;) {
    auto r = env.store.Replace(record_key, record_revision, value);
    if (r.ok()) return;
    Status s = r.status();
    if (s.code() == Code::kConflict || s.code() == Code::kUnknown) {
      auto g = GetWithRetry(env, record_key);
      if (g.ok() && !g->has_value()) return;  // purged already
      if (g.ok()) {
        auto rec = DecodeRecord((*g)->value);
        if (!rec.ok()) {
          env.log.error("txn {}: record unreadable while marking it done: {}", txn_id,
                        rec.status().message());
          return;
        }
        if (rec->done) return;  // marked: by us (lost reply) or by a collector
        if (rec->state != state) {
          // Never write the marker of another outcome than the one the record holds.
          env.log.error("txn {}: record is {}, not {}; not marking it done", txn_id,
                        TxnStateName(rec->state), TxnStateName(state));
          return;
        }
        // Committed or aborted is final, and a marker of that same outcome may be written over
        // it by anyone; built from the record as stored, so it keeps who aborted it.
        record_revision = (*g)->revision;
        value = EncodeRecord(OutcomeMarker(*rec, env.clock.NowMillis()));
      }
    }
    if (!retry.Next()) {
      env.log.warn("txn {}: could not mark its record done ({}); left for the collector", txn_id,
                   s.ToString());
      return;
    }
  }
}

Finisher::Finisher(Env env, int threads, std::size_t queue_limit)
    : env_(env),
      threads_(std::clamp(threads, 1, kMaxThreads)),
      queue_limit_(queue_limit) {}

Finisher::~Finisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool Finisher::Submit(FinishJob& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= queue_limit_) return false;
    if (workers_.empty()) {
      try {
        for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Work(); });
      } catch (const std::system_error& e) {
        // The transaction is committed already: never let this surface as an exception.
        // Without any worker the committing thread finishes it; with some, they suffice.
        env_.log.warn("finisher: could not start its threads ({}); {}", e.what(),
                      workers_.empty() ? "finishing on the committing threads" : "going on");
        if (workers_.empty()) return false;
      }
    }
    queue_.push_back(std::move(job));
    queued_.emplace(queue_.back().txn_id, std::prev(queue_.end()));
  }
  work_cv_.notify_one();
  return true;
}

bool Finisher::HelpFinish(const std::string& txn_id, std::chrono::milliseconds max_wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto it = queued_.find(txn_id); it != queued_.end()) {
    FinishJob job = std::move(*it->second);
    queue_.erase(it->second);
    queued_.erase(it);
    running_ids_.insert(txn_id);
    ++running_;
    lock.unlock();
    bool done = false;
    try {
      done = FinishTransaction(env_, job);
    } catch (...) {
      lock.lock();
      EndJob(txn_id, false);
      throw;  // the caller's own store call failed the same way
    }
    lock.lock();
    EndJob(txn_id, done);
    return true;
  }
  if (running_ids_.count(txn_id) == 0) return false;
  // A worker is finishing it: wait for that, but no longer than the caller would wait for any
  // holder. A worker stuck in a slow store call then leaves the caller to settle the document
  // itself, with a compare-and-swap, as it would settle a holder of another process.
  return done_cv_.wait_for(lock, max_wait, [&] { return running_ids_.count(txn_id) == 0; });
}

void Finisher::EndJob(const std::string& txn_id, bool done) {
  running_ids_.erase(txn_id);
  --running_;
  ++(done ? finished_ : left_);
  done_cv_.notify_all();
  if (queue_.empty() && running_ == 0) idle_cv_.notify_all();
}

void Finisher::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

std::uint64_t Finisher::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

std::uint64_t Finisher::left() const {
  std::lock_guard<std::mutex> lock(mu_);
  return left_;
}

void Finisher::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Stopping still runs what is queued: every job is finished or given up before the
    // destructor returns.
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    FinishJob job = std::move(queue_.front());
    queue_.pop_front();
    queued_.erase(job.txn_id);
    running_ids_.insert(job.txn_id);
    ++running_;
    lock.unlock();
    bool done = false;
    try {
      done = FinishTransaction(env_, job);
    } catch (const std::exception& e) {
      // A store that throws (a test's simulated crash) leaves the rest to the collector.
      env_.log.error("txn {}: finishing stopped: {}; left for the collector", job.txn_id,
                     e.what());
    }
    lock.lock();
    EndJob(job.txn_id, done);
  }
}

}  // namespace litetx::engine
