// litetx/litetx.h — the core public API in one include: the engine (Database, Transaction,
// Run), the collector, the Store interface and the stores that need no other library
// (MemoryStore, ForwardingStore, CountingStore). Link litetx::litetx.
//
// Not included here, each with its own header:
//   litetx/lmdb_store.h           LmdbStore; link litetx::lmdb (needs LMDB)
//   litetx/redis_store.h          RedisStore; link litetx::redis (needs hiredis)
//   litetx/redis_cluster_store.h  RedisClusterStore; link litetx::redis
//   litetx/fault_injecting_store.h  FaultInjectingStore, a Store wrapper for crash testing
//   litetx/importer.h             Import, bulk import; link litetx::import
//   litetx/batch.h                RunStep, batch processing; link litetx::batch
#pragma once

#include "litetx/clock.h"
#include "litetx/collector.h"
#include "litetx/counting_store.h"
#include "litetx/database.h"
#include "litetx/document.h"
#include "litetx/forwarding_store.h"
#include "litetx/memory_store.h"
#include "litetx/options.h"
#include "litetx/run.h"
#include "litetx/status.h"
#include "litetx/store.h"
#include "litetx/transaction.h"
#include "litetx/version.h"
