#include "litetx/database.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>

#include "engine/coordinator.h"
#include "engine/reads.h"

namespace litetx {

namespace {

Options WithDefaults(Options o) {
  if (!o.clock) o.clock = SystemClock();
  if (!o.logger) {
    o.logger = std::make_shared<spdlog::logger>("litetx", std::make_shared<spdlog::sinks::null_sink_mt>());
  }
  if (o.max_attempts < 1) o.max_attempts = 1;
  return o;
}

}  // namespace

Database::Database(std::shared_ptr<Store> store, Options options)
    : store_(std::move(store)), options_(WithDefaults(std::move(options))) {
  assert(store_ != nullptr);
  coordinator_ = std::make_unique<engine::Coordinator>(
      engine::Env{*store_, options_, *options_.clock, *options_.logger});
}

Database::~Database() = default;

Result<CommitInfo> Database::Commit(const Transaction& txn) { return coordinator_->Commit(txn); }

Result<ReadResult> Database::Read(std::string_view collection, std::string_view id,
                                  const ReadOptions& options) {
  if (Status s = ValidateCollection(collection); !s.ok()) return s;
  if (Status s = ValidateId(id); !s.ok()) return s;
  engine::Env env{*store_, options_, *options_.clock, *options_.logger};
  return engine::ReadDocument(env, Key{std::string(collection), std::string(id)},
                              options.isolation);
}

}  // namespace litetx
