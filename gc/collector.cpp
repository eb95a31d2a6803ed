// gc/collector.cpp — the collector of include/litetx/collector.h.
#include "litetx/collector.h"

#include <cstdio>
#include <random>

#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "engine/env.h"
#include "engine/meta.h"
#include "engine/repair.h"
#include "litetx/document.h"

namespace litetx {

namespace {

CollectorOptions WithDefaults(CollectorOptions o) {
  if (!o.engine.clock) o.engine.clock = SystemClock();
  if (!o.engine.logger) {
    o.engine.logger = std::make_shared<spdlog::logger>(
        "litetx-gc", std::make_shared<spdlog::sinks::null_sink_mt>());
  }
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
                                  options_.older_than.count(), options_.outcome_retention.count()};
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

  // 2. Tombstones and placeholders past their retention.
  const std::int64_t retention = options_.tombstone_retention.count();
  for (const std::string& collection : options_.purge_collections) {
    if (retention <= 0) break;
    cursor.clear();
    do {
      if (stopping_.load()) break;
      auto page = store_->Scan(collection, cursor, options_.scan_batch);
      if (!page.ok()) {
        env.log.warn("gc {}: cannot list {}: {}", options_.name, collection,
                     page.status().ToString());
        failed_.fetch_add(1);
        note(page.status());
        break;
      }
      const std::int64_t now = env.clock.NowMillis();
      for (const auto& [id, doc] : page->documents) {
        auto meta = engine::DecodeMeta(doc.value);
        if (!meta.ok()) {
          env.log.error("gc {}: {}/{} skipped: {}", options_.name, collection, id,
                        meta.status().message());
          failed_.fetch_add(1);
          note(Status::Corruption(collection + "/" + id + ": " + meta.status().message()));
          continue;
        }
        if (!meta->txn.empty() || meta->live() || meta->at_ms == 0) continue;
        if (engine::MillisSince(now, meta->at_ms) < retention) continue;
        Status e = store_->Erase(Key{collection, id}, doc.revision);
        if (e.ok()) {
          purged_.fetch_add(1);
        } else if (e.code() != Code::kConflict) {  // conflict: changed meanwhile, keep it
          failed_.fetch_add(1);
          note(e);
        }
      }
      cursor = std::move(page->next_cursor);
    } while (!cursor.empty());
  }
  runs_.fetch_add(1);
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
  return {runs_.load(), finished_.load(), reversed_.load(), failed_.load(), purged_.load()};
}

}  // namespace litetx
