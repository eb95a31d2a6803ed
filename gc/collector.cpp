// gc/collector.cpp — the collector of include/litetx/collector.h.
#include "litetx/collector.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <functional>
#include <random>

#include <spdlog/logger.h>

#include "engine/env.h"
#include "engine/meta.h"
#include "engine/outcomes.h"
#include "engine/record.h"
#include "engine/repair.h"
#include "engine/tombstones.h"
#include "engine/txn_id.h"
#include "litetx/document.h"

namespace litetx {

namespace {

CollectorOptions WithDefaults(CollectorOptions o) {
  if (!o.engine.clock) o.engine.clock = SystemClock();
  if (!o.engine.logger) o.engine.logger = engine::DefaultLogger();
  if (o.engine.max_attempts < 1) o.engine.max_attempts = 1;
  if (o.scan_batch == 0) o.scan_batch = 256;
  if (o.name.empty()) {
    std::random_device rd;
    char buf[16];
    std::snprintf(buf, sizeof buf, "gc-%08x", rd());
    o.name = buf;
  }
  return o;
}

}  // namespace

Collector::Collector(std::shared_ptr<Store> store, CollectorOptions options)
    : store_(std::move(store)), options_(WithDefaults(std::move(options))) {
  assert(store_ != nullptr);
}

Collector::~Collector() { Stop(); }

namespace {

// The claim document of a partition (CollectorOptions::share_partitions), in collection
// kClaimsCollection under "p" and the partition's hex digit:
//   {"by": holder or "", "until": ms the claim holds to (0: released), "swept": ms the last
//    complete sweep of the partition began, "cursor": where an unfinished sweep resumes}
struct Claim {
  std::string by;
  std::int64_t until = 0;
  std::int64_t swept = 0;
  std::string cursor;
};

constexpr std::string_view kClaimsCollection = "__litetx.gc";
constexpr char kHexDigits[] = "0123456789abcdef";

Claim DecodeClaim(const boost::json::object& o) {
  Claim c;
  if (auto* v = o.if_contains("by"); v && v->is_string()) c.by = v->get_string();
  if (auto* v = o.if_contains("until"); v && v->is_int64()) c.until = v->get_int64();
  if (auto* v = o.if_contains("swept"); v && v->is_int64()) c.swept = v->get_int64();
  if (auto* v = o.if_contains("cursor"); v && v->is_string()) c.cursor = v->get_string();
  return c;
}

boost::json::object EncodeClaim(const Claim& c) {
  boost::json::object o;
  o["by"] = c.by;
  o["until"] = c.until;
  o["swept"] = c.swept;
  o["cursor"] = c.cursor;
  return o;
}

// The ids of partition p are those in [PartitionStart(p), PartitionStart(p + 1)) in byte order
// (partition 0 from the start, partition 15 to the end): every string falls in one of them.
std::string PartitionStart(int p) { return p <= 0 ? std::string() : std::string(1, kHexDigits[p]); }

}  // namespace

Status Collector::RunOnce() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  engine::Env env{*store_, options_.engine, *options_.engine.clock, *options_.engine.logger};
  CollectorPass pass;
  pass_ = &pass;
  // pass_ never outlives the pass, even when a store call throws out of RunOnce.
  struct PassScope {
    CollectorPass*& p;
    ~PassScope() { p = nullptr; }
  } scope{pass_};
  pass.started_ms = env.clock.NowMillis();
  first_error_ = Status::Ok();

  // 1. ActiveTransaction documents (and outcome markers not yet folded).
  if (options_.share_partitions) {
    SharedRecordPass(env);
  } else {
    const std::size_t budget = options_.record_budget;
    if (budget == 0) record_cursor_.clear();
    std::size_t left = budget == 0 ? SIZE_MAX : budget;
    // record_cursor_ resumes where a budgeted pass stopped; empty at the end: starts over.
    pass.complete = ScanRecords(env, "", &record_cursor_, &left, nullptr);
  }

  // 2. Outcome pages past their retention, oldest first.
  if (!stopping_.load()) {
    auto purged = engine::PurgeOutcomePages(env, env.clock.NowMillis(),
                                            options_.outcome_retention.count(),
                                            options_.page_purge_budget, &pass.pages_read);
    if (purged.ok()) {
      pages_purged_.fetch_add(*purged);
      pass.expired.due += *purged;
      pass.expired.done += *purged;
    } else {
      env.log.warn("gc {}: outcome pages not purged: {}", options_.name, purged.status().ToString());
      Failure(purged.status());
    }
  }

  // 3. Tombstones and placeholders past their retention, through the tombstone index.
  if (!stopping_.load()) {
    engine::TombPurge tp;
    engine::PurgeTombstoneIndex(env, options_.tombstone_retention.count(),
                                options_.tombstone_purge_budget, options_.scan_batch, &stopping_,
                                options_.name, &tomb_cursor_, &tp);
    purged_.fetch_add(tp.done);
    pass.tombstones.due += tp.due;
    pass.tombstones.done += tp.done;
    pass.index_read += tp.read;
    if (!tp.complete) pass.complete = false;
    for (std::uint64_t i = 0; i < tp.failed; ++i) Failure(i == 0 ? tp.first : Status::Ok());
  }

  // 4. A bounded slice of the user collections, at most once per sweep_interval: dangling
  // holds, and tombstones the index does not name (of earlier releases, large transactions,
  // or a one-write delete whose entry was lost).
  {
    const std::int64_t now = env.clock.NowMillis();
    const std::int64_t interval = options_.sweep_interval.count();
    if (!swept_once_ || interval <= 0 || engine::MillisSince(now, last_sweep_ms_) >= interval) {
      swept_once_ = true;
      last_sweep_ms_ = now;
      if (Status s = Sweep(); first_error_.ok() && !s.ok()) first_error_ = s;
    }
  }
  runs_.fetch_add(1);
  pass.duration_ms = std::max<std::int64_t>(0, engine::MillisSince(env.clock.NowMillis(),
                                                                   pass.started_ms));
  for (const CollectorWork* w : {&pass.abandoned, &pass.unfinished, &pass.markers, &pass.expired,
                                 &pass.tombstones}) {
    if (w->due > w->done) pass.backlog += w->due - w->done;
  }
  if (!pass.complete) ++pass.backlog;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_pass_ = pass;
  }
  return first_error_;
}

void Collector::Failure(const Status& s) {
  // REQUIRES: run_mu_ held.
  failed_.fetch_add(1);
  if (pass_ != nullptr) ++pass_->failed;
  if (first_error_.ok() && !s.ok()) first_error_ = s;
}

bool Collector::ScanRecords(const engine::Env& env, const std::string& end, std::string* cursor,
                            std::size_t* left, const std::function<bool()>& renew) {
  // REQUIRES: run_mu_ held, pass_ set.
  CollectorPass& pass = *pass_;
  std::map<std::string, std::vector<engine::MarkerToFold>> to_fold;  // page id -> markers
  auto fold = [&] {
    for (auto& [page_id, markers] : to_fold) {
      auto f = engine::FoldMarkers(env, page_id, markers);
      if (!f.ok()) {
        env.log.warn("gc {}: outcome page {} not written: {}", options_.name, page_id,
                     f.status().ToString());
        Failure(f.status());
        continue;
      }
      folded_.fetch_add(f->folded);
      pass.markers.done += f->folded;
    }
    to_fold.clear();
  };
  bool complete = false;
  for (;;) {
    if (stopping_.load()) break;
    if (*left == 0) break;  // the budget is spent: the next pass resumes at *cursor
    if (renew && !renew()) break;  // the claim was lost: whoever took it resumes
    const std::size_t limit = std::min(options_.scan_batch, *left);
    auto page = store_->Scan(kTransactionsCollection, *cursor, limit);
    if (!page.ok()) {
      env.log.warn("gc {}: cannot list transactions: {}", options_.name, page.status().ToString());
      Failure(page.status());
      break;
    }
    bool at_end = page->next_cursor.empty();
    std::string last;
    for (auto& [id, doc] : page->documents) {
      if (!end.empty() && id >= end) {  // the next partition's: this one is done
        at_end = true;
        break;
      }
      if (stopping_.load()) break;
      last = id;
      ++pass.records_read;
      --*left;
      const std::int64_t now = env.clock.NowMillis();
      auto rec = engine::DecodeRecord(doc.value);
      if (rec.ok() && rec->done && options_.fold_outcomes && !rec->fence && !rec->large &&
          engine::MillisSince(now, rec->done_at_ms) < options_.outcome_retention.count()) {
        if (auto page_id = engine::OutcomePageId(id)) {
          ++pass.markers.due;
          // Its tombstone keys are indexed before the marker goes (FoldMarkers).
          to_fold[*page_id].push_back(engine::MarkerToFold{
              id, rec->state == engine::TxnState::kCommitted, rec->done_at_ms, doc.revision,
              std::move(rec->tomb_keys)});
          continue;
        }
      }
      if (rec.ok() && rec->fence) {
        // A fence whose transaction is on its outcome page was made after the fold (the page
        // decides the outcome): erased, so that it cannot outlive the page and then read as
        // an abort. Its transaction's record create landed long ago, so the fence blocks
        // nothing.
        auto late = engine::FindFolded(env, id);
        if (!late.ok()) {
          Failure(late.status());
          continue;
        }
        if (late->has_value()) {
          ++pass.expired.due;
          Status e = store_->Erase(Key{std::string(kTransactionsCollection), id}, doc.revision);
          if (e.ok()) {
            ++pass.expired.done;
            purged_.fetch_add(1);
          } else if (e.code() != Code::kConflict) {
            Failure(e);
          }
        }
        continue;
      }
      const bool committed = rec.ok() && rec->state == engine::TxnState::kCommitted;
      const bool done = rec.ok() && rec->done;
      engine::RepairPolicy policy{options_.name, now, options_.older_than.count(),
                                  options_.outcome_retention.count(),
                                  options_.tombstone_retention.count()};
      std::optional<engine::WrittenMarker> marker;
      auto r = engine::RepairTransaction(env, id, std::move(doc), policy, &marker);
      CollectorWork& kind = done ? pass.expired : committed ? pass.unfinished : pass.abandoned;
      if (!r.ok()) {
        env.log.error("gc {}: transaction {} not repaired: {}", options_.name, id,
                      r.status().ToString());
        ++kind.due;
        Failure(r.status());
        continue;
      }
      if (*r == engine::RepairOutcome::kNotStale) continue;
      ++kind.due;
      if (!done && rec.ok()) {
        pass.oldest_abandoned_ms =
            std::max(pass.oldest_abandoned_ms,
                     std::max<std::int64_t>(0, engine::MillisSince(now, rec->gc_at_ms)));
      }
      switch (*r) {
        case engine::RepairOutcome::kFinished: finished_.fetch_add(1); ++kind.done; break;
        case engine::RepairOutcome::kReversed: reversed_.fetch_add(1); ++kind.done; break;
        case engine::RepairOutcome::kPurged: purged_.fetch_add(1); ++kind.done; break;
        case engine::RepairOutcome::kNotStale:
        case engine::RepairOutcome::kGone: break;
      }
      if (marker && options_.fold_outcomes &&  // settled here: its marker is folded at once
          engine::MillisSince(env.clock.NowMillis(), marker->done_at_ms) <
              options_.outcome_retention.count()) {
        if (auto page_id = engine::OutcomePageId(id)) {
          ++pass.markers.due;
          to_fold[*page_id].push_back(engine::MarkerToFold{
              id, marker->committed, marker->done_at_ms, marker->revision,
              std::move(marker->tomb_keys)});
        }
      }
    }
    fold();
    if (stopping_.load()) break;  // resumes from the same page: its repairs are idempotent
    if (at_end) {
      complete = true;
      cursor->clear();
      break;
    }
    *cursor = last.empty() ? std::move(page->next_cursor) : std::move(last);
  }
  fold();
  return complete;
}

void Collector::SharedRecordPass(const engine::Env& env) {
  // REQUIRES: run_mu_ held, pass_ set.
  CollectorPass& pass = *pass_;
  const std::int64_t started = pass.started_ms;
  const std::int64_t lease = std::max<std::int64_t>(options_.claim_lease.count(), 1);
  std::size_t left = options_.record_budget == 0 ? SIZE_MAX : options_.record_budget;
  std::vector<bool> done(engine::kTxnIdPartitions, false);
  for (int rounds = 0; rounds < 4 * engine::kTxnIdPartitions && !stopping_.load(); ++rounds) {
    // The claims as they are now (one batch of 16 reads): a partition to take is free (no
    // claim, released, or expired) and not swept completely since this pass began.
    std::vector<BatchOp> reads;
    reads.reserve(engine::kTxnIdPartitions);
    for (int p = 0; p < engine::kTxnIdPartitions; ++p) {
      reads.push_back(BatchOp::Get(Key{std::string(kClaimsCollection), std::string("p") + kHexDigits[p]}));
    }
    std::vector<BatchResult> got = store_->Batch(reads);
    std::vector<std::optional<StoredDocument>> claims(engine::kTxnIdPartitions);
    bool read_all = got.size() == reads.size();
    for (std::size_t p = 0; read_all && p < got.size(); ++p) {
      if (!got[p].status.ok()) {
        env.log.warn("gc {}: cannot read partition claims: {}", options_.name,
                     got[p].status.ToString());
        Failure(got[p].status);
        read_all = false;
        break;
      }
      claims[p] = std::move(got[p].document);
    }
    if (!read_all) {
      if (got.size() != reads.size()) Failure(Status::Unavailable("partition claims: short batch"));
      pass.complete = false;
      return;
    }
    const std::int64_t now = env.clock.NowMillis();
    int pick = -1;
    Claim claim;
    for (int p = 0; p < engine::kTxnIdPartitions && pick < 0; ++p) {
      if (done[p]) continue;
      Claim c = claims[p] ? DecodeClaim(claims[p]->value) : Claim{};
      if (!c.by.empty() && c.by != options_.name && c.until > now) continue;  // another's
      if (c.cursor.empty() && c.swept >= started) {
        done[p] = true;  // swept by someone since this pass began
        continue;
      }
      pick = p;
      claim = c;
    }
    if (pick < 0) return;  // every partition swept, or held by another collector
    const Key key{std::string(kClaimsCollection), std::string("p") + kHexDigits[pick]};
    Claim mine = claim;
    mine.by = options_.name;
    mine.until = now + lease;
    const std::int64_t began = now;
    auto w = claims[pick] ? store_->Replace(key, claims[pick]->revision, EncodeClaim(mine))
                          : store_->Create(key, EncodeClaim(mine));
    if (!w.ok()) {
      // Conflict: taken (or moved) meanwhile; anything else: the next look decides.
      if (w.code() != Code::kConflict) Failure(w.status());
      continue;
    }
    Revision rev = *w;
    claims_taken_.fetch_add(1);
    // Renew the claim before each page once half its lease has gone.
    auto renew = [&]() -> bool {
      const std::int64_t t = env.clock.NowMillis();
      if (t < mine.until - lease / 2) return true;
      Claim again = mine;
      again.until = t + lease;
      auto r = store_->Replace(key, rev, EncodeClaim(again));
      if (!r.ok()) return false;  // expired and taken, or unknown: stop here
      rev = *r;
      mine = again;
      return true;
    };
    std::string cursor = claim.cursor.empty() ? PartitionStart(pick) : claim.cursor;
    const std::string end = pick + 1 < engine::kTxnIdPartitions ? PartitionStart(pick + 1) : "";
    const bool complete = ScanRecords(env, end, &cursor, &left, renew);
    // Release: swept (or where to resume), free for anyone.
    Claim released = mine;
    released.by.clear();
    released.until = 0;
    if (complete) {
      released.swept = began;
      released.cursor.clear();
    } else {
      released.cursor = cursor;
      pass.complete = false;
    }
    auto r = store_->Replace(key, rev, EncodeClaim(released));
    // Conflict: taken over; unknown: it may have landed, and otherwise the claim expires.
    if (!r.ok() && r.code() != Code::kConflict && r.code() != Code::kUnknown) Failure(r.status());
    done[pick] = true;
    if (left == 0) {
      pass.complete = false;
      return;
    }
  }
  pass.complete = false;  // the rounds ran out (claims kept changing under this collector)
}

Status Collector::Sweep() {
  // REQUIRES: run_mu_ held (RunOnce).
  std::vector<std::string> collections = options_.collections;
  for (const auto& c : options_.purge_collections) {
    if (std::find(collections.begin(), collections.end(), c) == collections.end()) {
      collections.push_back(c);
    }
  }
  if (collections.empty()) return Status::Ok();
  engine::Env env{*store_, options_.engine, *options_.engine.clock, *options_.engine.logger};
  const std::int64_t retention = options_.tombstone_retention.count();
  const std::size_t budget = options_.sweep_budget == 0 ? SIZE_MAX : options_.sweep_budget;
  Status first;
  auto fail = [&](const Status& s) {
    failed_.fetch_add(1);
    if (pass_ != nullptr) ++pass_->failed;
    if (first.ok()) first = s;
  };
  std::size_t looked = 0;
  std::size_t completed = 0;  // collections finished in this run: at most one full lap
  while (looked < budget && completed < collections.size()) {
    if (stopping_.load()) break;
    if (sweep_collection_ >= collections.size()) {
      sweep_collection_ = 0;
      sweep_cursor_.clear();
    }
    const std::string& collection = collections[sweep_collection_];
    std::size_t limit = std::min(options_.scan_batch, budget - looked);
    auto page = store_->Scan(collection, sweep_cursor_, limit);
    if (!page.ok()) {
      env.log.warn("gc {}: cannot list {}: {}", options_.name, collection, page.status().ToString());
      fail(page.status());
      break;  // the next run retries from the same place
    }
    // Records looked up on this page: holders are usually shared by neighbouring documents.
    enum Holder { kLive, kOver, kAbsent };
    std::map<std::string, int> over;  // holder -> what its record was found to be
    for (const auto& [id, doc] : page->documents) {
      ++looked;
      swept_.fetch_add(1);
      auto meta = engine::DecodeMeta(doc.value);
      if (!meta.ok()) {
        env.log.error("gc {}: {}/{} skipped: {}", options_.name, collection, id,
                      meta.status().message());
        fail(Status::Corruption(collection + "/" + id + ": " + meta.status().message()));
        continue;
      }
      const std::int64_t now = env.clock.NowMillis();
      if (!meta->txn.empty()) {
        // Held. The record is read after the document was (the scan), so a record that is
        // already a marker proves the hold dangling (engine/repair.h UndoDanglingHold). A record
        // that is absent proves it for a classic hold; a parallel commit's hold may precede its
        // record, which is fenced first once the hold's deadline has passed (FenceAbsentRecord).
        auto it = over.find(meta->txn);
        if (it == over.end()) {
          const Key record_key{std::string(kTransactionsCollection), meta->txn};
          auto rg = engine::GetRecordDoc(env, meta->txn);
          if (!rg.ok()) {
            fail(rg.status());
            continue;
          }
          int holder = rg->has_value() ? kLive : kAbsent;
          if (holder == kLive) {
            auto rec = engine::DecodeRecord((*rg)->value);
            if (rec.ok() && rec->done) holder = kOver;  // undecodable: the record scan's to report
          }
          it = over.emplace(meta->txn, holder).first;
        }
        if (it->second == kLive) continue;  // a live or unsettled transaction: the record scan's work
        if (it->second == kAbsent) {
          auto f = engine::FenceAbsentRecord(env, meta->txn, Key{collection, id}, doc.value,
                                             doc.revision, options_.name, now);
          if (!f.ok()) {
            fail(f.status());
            continue;
          }
          if (*f != engine::AbsentRecord::kDangling) continue;  // not yet due, or changed
          // The record can never land now (fenced, or a classic hold's erased record): every
          // hold of it on this page, read before, is dangling.
          it->second = kOver;
        }
        bool undid = false;  // false if the hold ended meanwhile by another hand
        Status u = engine::UndoDanglingHold(env, Key{collection, id}, meta->txn, now, &undid);
        if (u.ok()) {
          if (undid) undone_.fetch_add(1);
        } else {
          env.log.error("gc {}: {}/{}: {}", options_.name, collection, id, u.ToString());
          fail(u);
        }
        continue;
      }
      if (retention <= 0 || meta->live() || meta->at_ms == 0) continue;
      if (engine::MillisSince(now, meta->at_ms) < retention) continue;
      if (pass_ != nullptr) ++pass_->tombstones.due;
      Status e = store_->Erase(Key{collection, id}, doc.revision);
      if (e.ok()) {
        purged_.fetch_add(1);
        if (pass_ != nullptr) ++pass_->tombstones.done;
      } else if (e.code() != Code::kConflict) {  // conflict: changed meanwhile, keep it
        fail(e);
      }
    }
    sweep_cursor_ = std::move(page->next_cursor);
    if (sweep_cursor_.empty()) {  // this collection is done: the next one
      ++sweep_collection_;
      ++completed;
    }
  }
  return first;
}

void Collector::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Collector::Stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stop_ = true;
    stopping_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  t.join();
  stopping_ = false;
}

bool Collector::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return thread_.joinable();
}

void Collector::Loop() {
  for (;;) {
    try {
      (void)RunOnce();  // failures are logged and counted
    } catch (const std::exception& e) {
      // The collector never dies: a run that threw is logged and the next one starts over.
      options_.engine.logger->error("gc {}: run failed: {}", options_.name, e.what());
      failed_.fetch_add(1);
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, options_.interval, [this] { return stop_; })) return;
  }
}

CollectorStats Collector::stats() const {
  return {runs_.load(),   finished_.load(), reversed_.load(), failed_.load(),
          purged_.load(), undone_.load(),   swept_.load(),    folded_.load(),
          pages_purged_.load(), claims_taken_.load()};
}

CollectorPass Collector::last_pass() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_pass_;
}

}  // namespace litetx
