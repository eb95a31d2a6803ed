// engine/locks.h — pessimistic locks held in a document's metadata ("_ltx.lk", see meta.h).
//
// A lock is an entry {owner, mode, expiry, priority} written with one CAS on the document; it
// does not change the document's version. Taking one waits under the contention policy of
// engine/contention.h (wait-die by age, kBusy after Options::busy_timeout). An entry whose
// expiry has passed is ignored by everyone and dropped by the next write of the document;
// a transaction's own write of the document (apply, finish, reverse) drops every lock.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/contention.h"
#include "engine/env.h"

namespace litetx::engine {

// Takes (or upgrades to write) `owner.id`'s lock on `key`, valid for `lease_ms`. Returns OK
// (also when already held in this mode or a stronger one), kNotFound / kDeleted (no live
// document to lock), kBusy, kUnavailable, kCorruption. If `maybe_taken` is not null, it is set
// to true when the reply of a lock write was lost: on a failure the lock may then be stored
// all the same, and the caller must release it (ReleaseLock) as if it held it.
// REQUIRES: owner.id is not empty.
Status AcquireLock(const Env& env, const Key& key, const Waiter& owner, bool write,
                   std::int64_t lease_ms, bool* maybe_taken = nullptr);

// Pushes `owner`'s lock on `key` to now + lease_ms once a quarter of lease_ms has gone since it
// was taken or last renewed. OK if renewed, not due yet, or no longer held (expired, or dropped
// by a write of the document: an expired lock is never revived); kUnavailable, kCorruption.
Status RenewLock(const Env& env, const Key& key, std::string_view owner, std::int64_t lease_ms);

// Removes `owner`'s lock from `key`, with any expired entries. OK if there is none (or no
// document); kUnavailable, kCorruption.
Status ReleaseLock(const Env& env, const Key& key, std::string_view owner);

}  // namespace litetx::engine
