// property-tests/crash_props.h — the bodies of two crash properties of crash_props.cpp, so that
// they can run on other raw stores than MemoryStore (redis_crash_props.cpp runs them on
// RedisStore and RedisClusterStore). Each is one RapidCheck case: call it inside a property
// (rc::detail::checkGTest and the like); a broken invariant fails the case through RC_ASSERT.
#pragma once

#include "harness.h"

namespace ptest {

// A coordinator crash at any write before or after the commit point, or none, then a first
// collector that crashes at any of its writes (counted in a run without that crash), or
// completes, or no first collector, then a healthy collector: after if the commit point
// landed, else before; clean, versions never down. Every run of the case is on a fresh store
// from `store` (empty: a MemoryStore); the coordinator's writes, the commit point and the
// outcome must also match the oracle's fault-free run on a MemoryStore.
void CrashAtAnyWriteProperty(const StoreFactory& store);

// Counts of the lost-reply property's cases that end kUnknown, by how Outcome settled them.
struct UnknownShares {
  int cases = 0;
  int unknown_committed = 0;  // settled by Outcome: committed
  int unknown_by_writer = 0;  // Outcome not found (a one-action commit): settled by last writer
  int write_lost = 0;         // a write of the coordinator was lost on the way (LossyLink)
  int write_late = 0;         // ...and arrived late
};

// Transient errors, lost replies and writes lost on the way on the coordinator's calls; the
// answer it gives must agree with the commit point, a kUnknown settled through
// Database::Outcome must agree with it too, and the end state must be the oracle's exact before
// or after. On a fresh store from `store` (empty: a MemoryStore). Adds the case to `shares`.
void LostRepliesProperty(UnknownShares& shares, const StoreFactory& store);

}  // namespace ptest
