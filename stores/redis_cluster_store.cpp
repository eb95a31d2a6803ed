#include "litetx/redis_cluster_store.h"

namespace litetx {

struct RedisClusterStore::Impl {
  RedisClusterOptions options;
};

Result<std::shared_ptr<RedisClusterStore>> RedisClusterStore::Open(RedisClusterOptions) {
  return Status::Unavailable("redis-cluster: not built yet");
}
RedisClusterStore::RedisClusterStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisClusterStore::~RedisClusterStore() = default;
Result<std::optional<StoredDocument>> RedisClusterStore::Get(const Key&) { return Status::Unavailable("x"); }
Result<Revision> RedisClusterStore::Create(const Key&, const boost::json::object&) { return Status::Unavailable("x"); }
Result<Revision> RedisClusterStore::Replace(const Key&, Revision, const boost::json::object&) { return Status::Unavailable("x"); }
Status RedisClusterStore::Erase(const Key&, Revision) { return Status::Unavailable("x"); }
Result<ScanPage> RedisClusterStore::Scan(std::string_view, std::string_view, std::size_t) { return Status::Unavailable("x"); }
int RedisClusterStore::SlotOf(std::string_view) { return 0; }
RedisClusterStore::Stats RedisClusterStore::stats() const { return {}; }
const RedisClusterOptions& RedisClusterStore::options() const { return impl_->options; }

}  // namespace litetx
