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
  Action a;
  a.type = ActionType::kInsert;
  a.key = Key{std::move(collection), std::move(id)};
  a.fields = std::move(doc);
  return run_->Add(std::move(a), tag);
}

Status LargeTransaction::Update(std::string collection, std::string id, boost::json::object set,
                                std::vector<std::string> unset, std::uint64_t tag) {
  Action a;
  a.type = ActionType::kUpdate;
  a.key = Key{std::move(collection), std::move(id)};
  a.fields = std::move(set);
  a.unset = std::move(unset);
  return run_->Add(std::move(a), tag);
}

Status LargeTransaction::Adjust(std::string collection, std::string id, boost::json::object by,
                                std::uint64_t tag) {
  Action a;
  a.type = ActionType::kAdjust;
  a.key = Key{std::move(collection), std::move(id)};
  a.fields = std::move(by);
  return run_->Add(std::move(a), tag);
}

Status LargeTransaction::Delete(std::string collection, std::string id, std::uint64_t tag) {
  Action a;
  a.type = ActionType::kDelete;
  a.key = Key{std::move(collection), std::move(id)};
  return run_->Add(std::move(a), tag);
}

Status LargeTransaction::Put(std::string collection, std::string id, boost::json::object doc,
                             std::uint64_t tag) {
  Action a;
  a.type = ActionType::kInsert;
  a.key = Key{std::move(collection), std::move(id)};
  a.fields = std::move(doc);
  return run_->Add(std::move(a), tag, /*put=*/true);
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
