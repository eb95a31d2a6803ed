// Fails to compile if litetx/litetx.h declares a class that belongs in a separate header:
// each alias below would then redeclare that class's name as a different kind of entity.
// The test store (FaultInjectingStore) and the backends with their own dependency (LmdbStore,
// RedisStore, RedisClusterStore) are not part of the core umbrella header.
#include "litetx/litetx.h"

namespace litetx {
using FaultInjectingStore = int;
using LmdbStore = int;
using RedisStore = int;
using RedisClusterStore = int;
}  // namespace litetx

int UmbrellaCheck() { return litetx::FaultInjectingStore{0} + litetx::LmdbStore{0}; }
