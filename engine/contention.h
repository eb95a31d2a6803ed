// engine/contention.h — what a transaction does when it meets a document that another
// transaction holds (its "_ltx.tx" reference) or has locked (a pessimistic lock).
//
// The policy (docs/concurrency.md):
//   1. A holder that is no longer running is settled on the spot, exactly as the collector
//      would: committed -> its reference is cleared on this document; rolled back -> this
//      document is reversed; pending past its GC timestamp -> the whole transaction is
//      claimed and rolled back (RepairTransaction). Then the document is looked at again.
//   2. A live blocker (holder or conflicting lock) is waited for with Options::busy_backoff,
//      up to Options::busy_timeout, then kBusy.
//   3. Wait-die by age: when the waiter itself holds documents or locks (so waiting could close
//      a cycle), it waits only for a younger blocker; a blocker older than itself makes it fail
//      at once with kBusy (it rolls back and is re-run by Database::Run with its original age,
//      so it grows older and eventually wins). Waits therefore always go from older to
//      younger: no deadlock, and the oldest transaction is never made to give way: no livelock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/env.h"
#include "engine/meta.h"

namespace litetx::engine {

// The transaction that is looking.
struct Waiter {
  std::string_view id;           // its transaction (and lock owner) id; empty: a plain reader
  std::int64_t priority_ms = 0;  // its age: the start of its first attempt
  bool holding = false;          // it holds documents or locks: wait-die applies
};

// What the waiter wants to do with the document.
enum class Need : std::uint8_t {
  kCheck,      // validate its version: blocked by holders only
  kWrite,      // write it: blocked by holders and by any live lock of another owner
  kReadLock,   // share-lock it: blocked by holders and live write locks of others
  kWriteLock,  // lock it exclusively: blocked by holders and any live lock of others
};

// True if `a` is older than `b` (smaller priority; ties broken by id).
bool Older(std::int64_t a_priority, std::string_view a_id, std::int64_t b_priority,
           std::string_view b_id);

// A read of the document made just before (in a batch with others): AwaitFree takes it as its
// first look instead of reading again.
using Prefetched = std::optional<std::optional<StoredDocument>>;

// Reads `key` until it is free for `need` by `waiter`, applying the policy above. `first`, if
// set, is taken as the first read. Returns the document (std::nullopt if absent), or kBusy
// (timeout, or wait-die), kUnavailable, kCorruption. `*waited` (if given) is set when the
// document was not free at the first look (the result comes from a later read).
Result<std::optional<StoredDocument>> AwaitFree(const Env& env, const Key& key,
                                                const Waiter& waiter, Need need,
                                                Prefetched first = std::nullopt,
                                                bool* waited = nullptr);

}  // namespace litetx::engine
