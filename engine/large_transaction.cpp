// The public LargeTransaction handle (litetx/large_transaction.h) over engine::LargeRun.
#include "litetx/large_transaction.h"

#include <utility>

#include "engine/large.h"
#include "litetx/database.h"

namespace litetx {

LargeTransaction::LargeTransaction(std::unique_ptr<engine::LargeRun> run) : run_(std::move(run)) {}

LargeTransaction::~LargeTransaction() = default;  // LargeRun's destructor rolls back if open

const std::string& LargeTransaction::id() const { return run_->id(); }

Status LargeTransaction::Add(Action action, std::uint64_t tag) {
  return run_->Add(std::move(action), tag);
}

Status LargeTransaction::Insert(std::string collection, std::string id, boost::json::object doc,
                                std::uint64_t tag) {
  return run_->Add(Action{ActionType::kInsert, {std::move(collection), std::move(id)},
                          std::move(doc), {}, std::nullopt, std::nullopt},
                   tag);
}

Status LargeTransaction::Update(std::string collection, std::string id, boost::json::object set,
                                std::vector<std::string> unset, std::uint64_t tag) {
  return run_->Add(Action{ActionType::kUpdate, {std::move(collection), std::move(id)},
                          std::move(set), std::move(unset), std::nullopt, std::nullopt},
                   tag);
}

Status LargeTransaction::Adjust(std::string collection, std::string id, boost::json::object by,
                                std::uint64_t tag) {
  return run_->Add(Action{ActionType::kAdjust, {std::move(collection), std::move(id)},
                          std::move(by), {}, std::nullopt, std::nullopt},
                   tag);
}

Status LargeTransaction::Delete(std::string collection, std::string id, std::uint64_t tag) {
  return run_->Add(Action{ActionType::kDelete, {std::move(collection), std::move(id)}, {}, {},
                          std::nullopt, std::nullopt},
                   tag);
}

Status LargeTransaction::Put(std::string collection, std::string id, boost::json::object doc,
                             std::uint64_t tag) {
  return run_->Add(Action{ActionType::kInsert, {std::move(collection), std::move(id)},
                          std::move(doc), {}, std::nullopt, std::nullopt},
                   tag, /*put=*/true);
}

Result<LargeCommitInfo> LargeTransaction::Commit() { return run_->Commit(); }

Status LargeTransaction::Settle() { return run_->Settle(); }

Status LargeTransaction::Rollback() { return run_->Rollback(); }

std::uint64_t LargeTransaction::added() const { return run_->added(); }

Result<std::unique_ptr<LargeTransaction>> Database::BeginLarge(LargeTransactionOptions options) {
  engine::Env env{*store_, options_, *options_.clock, *options_.logger, leases_.get()};
  auto run = engine::LargeRun::Begin(env, std::move(options));
  if (!run.ok()) return run.status();
  return std::unique_ptr<LargeTransaction>(new LargeTransaction(std::move(run).value()));
}

}  // namespace litetx
