// gc/collector.cpp — the collector of include/litetx/collector.h.
#include "litetx/collector.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>

#include <spdlog/logger.h>

#include "engine/env.h"
#include "engine/meta.h"
#include "engine/record.h"
#include "engine/repair.h"
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

Status Collector::RunOnce() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  engine::Env env{*store_, options_.engine, *options_.engine.clock, *options_.engine.logger};
  Status first;
  auto note = [&](const Status& s) {
    if (first.ok() && !s.ok()) first = s;
  };

  // 1. ActiveTransaction documents.
  std::string cursor;
  do {
    if (stopping_.load()) break;
    auto page = store_->Scan(kTransactionsCollection, cursor, options_.scan_batch);
    if (!page.ok()) {
      env.log.warn("gc {}: cannot list transactions: {}", options_.name, page.status().ToString());
      failed_.fetch_add(1);
      note(page.status());
      break;
    }
    for (auto& [id, doc] : page->documents) {
      if (stopping_.load()) break;
      engine::RepairPolicy policy{options_.name, env.clock.NowMillis(),
                                  options_.older_than.count(), options_.outcome_retention.count(),
                                  options_.tombstone_retention.count()};
      auto r = engine::RepairTransaction(env, id, std::move(doc), policy);
      if (!r.ok()) {
        env.log.error("gc {}: transaction {} not repaired: {}", options_.name, id,
                      r.status().ToString());
        failed_.fetch_add(1);
        note(r.status());
        continue;
      }
      switch (*r) {
        case engine::RepairOutcome::kFinished: finished_.fetch_add(1); break;
        case engine::RepairOutcome::kReversed: reversed_.fetch_add(1); break;
        case engine::RepairOutcome::kPurged: purged_.fetch_add(1); break;
        case engine::RepairOutcome::kNotStale:
        case engine::RepairOutcome::kGone: break;
      }
    }
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());

  // 2. A bounded slice of the user collections: dangling holds, old tombstones.
  note(Sweep());
  runs_.fetch_add(1);
  return first;
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
          auto rg = engine::GetWithRetry(env, record_key);
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
      Status e = store_->Erase(Key{collection, id}, doc.revision);
      if (e.ok()) {
        purged_.fetch_add(1);
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
          purged_.load(), undone_.load(),   swept_.load()};
}

}  // namespace litetx
