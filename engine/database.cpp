#include "litetx/database.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <optional>

#include "engine/coordinator.h"
#include "engine/doc_cache.h"
#include "engine/env.h"
#include "engine/finisher.h"
#include "engine/lease_keeper.h"
#include "engine/reads.h"
#include "engine/outcomes.h"
#include "engine/record.h"
#include "engine/repair.h"

namespace litetx {

namespace {

Options WithDefaults(Options o) {
  if (!o.clock) o.clock = SystemClock();
  if (!o.logger) o.logger = engine::DefaultLogger();
  if (o.max_attempts < 1) o.max_attempts = 1;
  return o;
}

}  // namespace

Database::Database(std::shared_ptr<Store> store, Options options)
    : store_(std::move(store)), options_(WithDefaults(std::move(options))) {
  assert(store_ != nullptr);
  if (options_.renew_leases) {
    auto period = std::max(options_.lease / 4, std::chrono::milliseconds{1});
    leases_ = std::make_unique<engine::LeaseKeeper>(period, *options_.logger);
  }
  if (options_.written_cache_bytes > 0) {
    cache_ = std::make_unique<engine::DocCache>(options_.written_cache_bytes);
  }
  engine::Env env{*store_, options_, *options_.clock, *options_.logger, leases_.get()};
  env.cache = cache_.get();
  if (options_.finish_in_background) {
    engine::Env finishing{*store_, options_, *options_.clock, *options_.logger};
    finishing.cache = cache_.get();
    finisher_ = std::make_unique<engine::Finisher>(finishing, options_.finisher_threads,
                                                   options_.finisher_queue,
                                                   options_.finisher_linger);
    env.finisher = finisher_.get();
  }
  coordinator_ = std::make_unique<engine::Coordinator>(env);
}

Database::~Database() = default;

void Database::Flush() {
  if (finisher_) finisher_->Drain();
}

Result<CommitInfo> Database::Commit(const Transaction& txn) { return coordinator_->Commit(txn); }

Result<ReadResult> Database::Read(std::string_view collection, std::string_view id,
                                  const ReadOptions& options) {
  if (Status s = ValidateCollection(collection); !s.ok()) return s;
  if (Status s = ValidateId(id); !s.ok()) return s;
  engine::Env env{*store_, options_, *options_.clock, *options_.logger};
  return engine::ReadDocument(env, Key{std::string(collection), std::string(id)},
                              options.isolation);
}

const char* TxnOutcomeName(TxnOutcome outcome) {
  switch (outcome) {
    case TxnOutcome::kPending: return "pending";
    case TxnOutcome::kCommitted: return "committed";
    case TxnOutcome::kAborted: return "aborted";
    case TxnOutcome::kNotFound: return "not_found";
  }
  return "?";
}

Result<TxnOutcome> Database::Outcome(std::string_view txn_id) {
  if (Status s = ValidateId(txn_id); !s.ok()) return s;
  engine::Env env{*store_, options_, *options_.clock, *options_.logger};
  const Key key{std::string(kTransactionsCollection), std::string(txn_id)};
  // A proof that wrote nothing either met a document not held (pending) or lost to a write of
  // the record meanwhile (its flip, a fallback, another resolver): the record, read again,
  // tells which. Still staging at the revision the proof started from: pending.
  std::optional<Revision> unproved;
  constexpr int kRounds = 8;
  for (int round = 1;; ++round) {
    auto g = engine::GetWithRetry(env, key);
    if (!g.ok()) return g.status();
    std::optional<Result<engine::TxnRecord>> rec;
    if (g->has_value()) {
      rec = engine::DecodeRecord((*g)->value);
      if (!rec->ok()) {
        return Status::Corruption("record of " + std::string(txn_id) + ": " +
                                  rec->status().message());
      }
    }
    if (!rec || (**rec).fence) {
      // No record: its marker may have been folded into an outcome page. A fence: it may have
      // been made after the fold, and then the page (written before the marker went) decides.
      auto folded = engine::FindFolded(env, txn_id);
      if (!folded.ok()) return folded.status();
      if (folded->has_value()) {
        return (**folded).state == engine::TxnState::kCommitted ? TxnOutcome::kCommitted
                                                                : TxnOutcome::kAborted;
      }
      if (!rec) return TxnOutcome::kNotFound;
    }
    switch ((**rec).state) {
      case engine::TxnState::kPending: return TxnOutcome::kPending;
      case engine::TxnState::kCommitted: return TxnOutcome::kCommitted;
      case engine::TxnState::kAborted: return TxnOutcome::kAborted;
      case engine::TxnState::kStaging: break;
    }
    if (unproved == (*g)->revision || round == kRounds) return TxnOutcome::kPending;
    // Committed if every document it lists is held by it: proven and recorded here.
    auto proved = engine::ResolveStaging(env, std::string(txn_id), **rec, (*g)->revision,
                                         /*fence=*/false, "outcome", env.clock.NowMillis());
    if (!proved.ok()) return proved.status();
    if (proved->has_value()) {
      auto now = engine::DecodeRecord((**proved).value);
      if (!now.ok()) return now.status();
      return now->state == engine::TxnState::kCommitted ? TxnOutcome::kCommitted
                                                        : TxnOutcome::kPending;
    }
    unproved = (*g)->revision;
  }
}

Result<std::vector<TxnSummary>> Database::ListTransactions() {
  constexpr std::size_t kPage = 256;
  engine::Env env{*store_, options_, *options_.clock, *options_.logger};
  std::vector<TxnSummary> out;
  std::string cursor;
  do {
    engine::Retry retry(env, options_.max_attempts);
    Result<ScanPage> page = Status::Unavailable("");
    for (;;) {
      page = store_->Scan(kTransactionsCollection, cursor, kPage);
      if (page.ok() || page.code() != Code::kUnavailable || !retry.Next()) break;
    }
    if (!page.ok()) return page.status();
    for (const auto& [id, doc] : page->documents) {
      TxnSummary t;
      t.id = id;
      auto rec = engine::DecodeRecord(doc.value);
      if (!rec.ok()) {
        t.corrupt = true;
        t.error = rec.status().message();
        out.push_back(std::move(t));
        continue;
      }
      switch (rec->state) {
        case engine::TxnState::kPending:
        case engine::TxnState::kStaging: t.state = TxnOutcome::kPending; break;
        case engine::TxnState::kCommitted: t.state = TxnOutcome::kCommitted; break;
        case engine::TxnState::kAborted: t.state = TxnOutcome::kAborted; break;
      }
      t.done = rec->done;
      t.created_ms = rec->created_ms;
      t.gc_at_ms = rec->gc_at_ms;
      t.done_at_ms = rec->done_at_ms;
      t.aborted_by = rec->aborted_by;
      t.actions = rec->actions.size();
      out.push_back(std::move(t));
    }
    cursor = std::move(page->next_cursor);
  } while (!cursor.empty());
  return out;
}

}  // namespace litetx
