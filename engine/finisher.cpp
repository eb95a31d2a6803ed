#include "engine/finisher.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <span>
#include <system_error>
#include <unordered_set>
#include <utility>

#include "engine/doc_cache.h"
#include "engine/meta.h"
#include "engine/outcomes.h"
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
        doc.final = Finished(std::move((*g)->value), *m);
        StampTombstoneTime(doc.final, env.clock.NowMillis());
        rev = (*g)->revision;
      }
    } else if (last.code() != Code::kUnavailable) {
      env.log.error("txn {}: finishing {}: {}", id, Where(doc.key), last.ToString());
      return false;
    }
    if (!retry.Next()) return false;
    auto r = env.store.Replace(doc.key, rev, doc.final);
    if (r.ok()) {
      if (env.cache != nullptr) {
        env.cache->Put(doc.key, std::move(doc.final), *r, doc.bytes, doc.ticket);
      }
      return true;
    }
    last = r.status();
  }
}

}  // namespace

namespace {

// The flip of a parallel commit's staging record (FinishJob::flip_first). True once the record
// says committed (job.record_revision then its revision, or job.record_settled if it is already
// the outcome marker); false if it could not be written (left for a resolver, which proves it).
// `first`: the result of the flip already sent (in a batch), if any.
bool FlipStaging(const Env& env, FinishJob& job, std::optional<Result<Revision>> first) {
  Retry retry(env, env.options.max_attempts);
  for (;;) {
    Result<Revision> r = first.has_value()
                             ? std::move(*first)
                             : env.store.Replace(job.record_key, job.record_revision,
                                                 job.committed_value);
    first.reset();
    if (r.ok()) {
      job.record_revision = *r;
      return true;
    }
    if (r.code() == Code::kConflict || r.code() == Code::kUnknown) {
      auto g = GetRecordDoc(env, job.txn_id);
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

namespace {

// The result of op `i` of a batch (a missing reply is a lost one).
Result<Revision> ResultOf(std::vector<BatchResult>& results, std::size_t i) {
  if (i >= results.size()) return Status::Unknown("no reply for this batch operation");
  if (!results[i].status.ok()) return std::move(results[i].status);
  return results[i].revision;
}

// One write per job through the store: a single call for one, a batch for more.
std::vector<BatchResult> Send(const Env& env, const std::vector<BatchOp>& ops) {
  if (ops.size() != 1) return env.store.Batch(ops);
  std::vector<BatchResult> out(1);
  auto r = env.store.Replace(ops[0].key, ops[0].expected, *ops[0].value);
  if (r.ok()) {
    out[0].revision = *r;
  } else {
    out[0].status = r.status();
  }
  return out;
}

}  // namespace

std::vector<bool> FinishTransactions(const Env& env, std::span<FinishJob* const> jobs) {
  std::vector<bool> ok(jobs.size(), true);
  std::vector<BatchOp> ops;
  std::vector<std::size_t> at;

  // 1. The flips of parallel commits, one write each; no document of a job is finished
  //    before its record says committed.
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    FinishJob& job = *jobs[i];
    if (!job.flip_first || job.record_settled) continue;
    ops.push_back(BatchOp::Replace(job.record_key, job.record_revision, job.committed_value));
    at.push_back(i);
  }
  if (!ops.empty()) {
    std::vector<BatchResult> results = Send(env, ops);
    for (std::size_t j = 0; j < at.size(); ++j) {
      FinishJob& job = *jobs[at[j]];
      Result<Revision> r = ResultOf(results, j);
      if (r.ok()) {
        job.record_revision = *r;
      } else {
        ok[at[j]] = FlipStaging(env, job, std::move(r));
      }
    }
  }

  // 2. Every document of every job whose record is committed: one batch of compare-and-swaps
  //    from the held image to the final one; a failed one is retried on its own after a re-read.
  const std::int64_t now = env.clock.NowMillis();
  ops.clear();
  at.clear();
  std::vector<FinishJob::Doc*> docs;
  // A batch names each key once. Two queued transactions can name one document only if the
  // later one settled the earlier one's hold itself (the earlier one's compare-and-swap then
  // fails anyway): the second of the two is looked at on its own, after the batch.
  std::unordered_set<std::string> keys;
  std::vector<std::pair<std::size_t, FinishJob::Doc*>> later;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!ok[i]) continue;
    for (FinishJob::Doc& d : jobs[i]->docs) {
      StampTombstoneTime(d.final, now);
      if (!keys.insert(d.key.collection + '\0' + d.key.id).second) {
        later.emplace_back(i, &d);
        continue;
      }
      ops.push_back(BatchOp::Replace(d.key, d.held_revision, d.final));
      at.push_back(i);
      docs.push_back(&d);
    }
  }
  std::vector<bool> all(jobs.size(), true);
  if (!ops.empty()) {
    std::vector<BatchResult> results = env.store.Batch(ops);
    for (std::size_t j = 0; j < ops.size(); ++j) {
      Result<Revision> r = ResultOf(results, j);
      if (r.ok()) {
        // The batch is over: its op no longer refers to the image, which the cache takes.
        FinishJob::Doc& d = *docs[j];
        if (env.cache != nullptr) {
          env.cache->Put(d.key, std::move(d.final), *r, d.bytes, d.ticket);
        }
        continue;
      }
      all[at[j]] = FinishOne(env, jobs[at[j]]->txn_id, *docs[j], r.status()) && all[at[j]];
    }
  }
  for (auto& [i, d] : later) {
    // Not sent: FinishOne's re-read decides (finished by someone else, or still ours).
    all[i] = FinishOne(env, jobs[i]->txn_id, *d, Status::Conflict("not sent: key twice in a batch")) &&
             all[i];
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (ok[i] && !all[i]) {
      env.log.warn("txn {}: committed, but some documents still carry its reference; left for "
                   "the collector", jobs[i]->txn_id);
      ok[i] = false;
    }
  }

  // 3. The outcome markers of the jobs fully finished (a collector may have written one).
  ops.clear();
  at.clear();
  std::vector<json::object> markers;
  markers.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!ok[i] || jobs[i]->record_settled) continue;
    TxnRecord settled = jobs[i]->record;
    settled.state = TxnState::kCommitted;
    markers.push_back(EncodeRecord(OutcomeMarker(settled, env.clock.NowMillis())));
    at.push_back(i);
  }
  for (std::size_t j = 0; j < at.size(); ++j) {
    const FinishJob& job = *jobs[at[j]];
    ops.push_back(BatchOp::Replace(job.record_key, job.record_revision, markers[j]));
  }
  if (!ops.empty()) {
    std::vector<BatchResult> results = Send(env, ops);
    for (std::size_t j = 0; j < at.size(); ++j) {
      Result<Revision> r = ResultOf(results, j);
      if (r.ok()) continue;
      const FinishJob& job = *jobs[at[j]];
      Retry retry(env, env.options.max_attempts);
      WriteOutcomeMarker(env, job.txn_id, job.record_key, job.record_revision, job.record,
                         TxnState::kCommitted, retry, r.status());
    }
  }
  return ok;
}

bool FinishTransaction(const Env& env, FinishJob& job) {
  FinishJob* one = &job;
  return FinishTransactions(env, std::span<FinishJob* const>(&one, 1))[0];
}

void WriteOutcomeMarker(const Env& env, const std::string& txn_id, const Key& record_key,
                        Revision record_revision, const TxnRecord& record, TxnState state,
                        Retry& retry, std::optional<Status> first) {
  TxnRecord settled = record;
  settled.state = state;
  json::object value = EncodeRecord(OutcomeMarker(settled, env.clock.NowMillis()));
  for (;;) {
    Status s = Status::Ok();
    if (first.has_value()) {
      s = std::move(*first);  // the marker was sent already (in a batch) and failed so
      first.reset();
    } else {
      auto r = env.store.Replace(record_key, record_revision, value);
      if (r.ok()) return;
      s = r.status();
    }
    if (s.code() == Code::kConflict || s.code() == Code::kUnknown) {
      auto g = GetRecordDoc(env, txn_id);
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

Finisher::Finisher(Env env, int threads, std::size_t queue_limit,
                   std::chrono::microseconds linger)
    : env_(env),
      threads_(std::clamp(threads, 1, kMaxThreads)),
      queue_limit_(queue_limit),
      linger_(std::max(linger, std::chrono::microseconds{0})) {}

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
    // A lingering worker takes this job with the others when its wait ends: wake it (or
    // another) only once there is a full batch.
    if (lingering_ > 0 && queue_.size() < kMaxJobsAtOnce) return true;
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
  ++draining_;
  work_cv_.notify_all();  // a lingering worker goes at once
  idle_cv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  --draining_;
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
  std::vector<FinishJob> jobs;
  std::vector<FinishJob*> ptrs;
  for (;;) {
    // Stopping still runs what is queued: every job is finished or given up before the
    // destructor returns.
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    if (linger_.count() > 0 && !stop_ && queue_.size() < kMaxJobsAtOnce) {
      // Wait a little for more (Options::finisher_linger); Drain and stopping do not wait.
      ++lingering_;
      work_cv_.wait_for(lock, linger_, [this] {
        return stop_ || draining_ > 0 || queue_.size() >= kMaxJobsAtOnce;
      });
      --lingering_;
      if (queue_.empty()) continue;  // taken meanwhile by transactions that met the documents
    }
    // Everything queued (up to a bound) goes at once: the committing threads outrun one
    // finishing at a time, and a batch of k flips, k documents' finishes or k markers costs a
    // store about what one does. What is left over goes to another worker.
    jobs.clear();
    while (!queue_.empty() && jobs.size() < kMaxJobsAtOnce) {
      jobs.push_back(std::move(queue_.front()));
      queue_.pop_front();
      queued_.erase(jobs.back().txn_id);
      running_ids_.insert(jobs.back().txn_id);
      ++running_;
    }
    const bool more = !queue_.empty();
    lock.unlock();
    if (more) work_cv_.notify_one();
    ptrs.clear();
    for (FinishJob& j : jobs) ptrs.push_back(&j);
    std::vector<bool> done(jobs.size(), false);
    try {
      done = FinishTransactions(env_, ptrs);
    } catch (const std::exception& e) {
      // A store that throws (a test's simulated crash) leaves the rest to the collector.
      env_.log.error("txn {}{}: finishing stopped: {}; left for the collector", jobs[0].txn_id,
                     jobs.size() > 1 ? fmt::format(" and {} more", jobs.size() - 1) : "",
                     e.what());
    }
    lock.lock();
    for (std::size_t i = 0; i < jobs.size(); ++i) EndJob(jobs[i].txn_id, done[i]);
  }
}

}  // namespace litetx::engine
