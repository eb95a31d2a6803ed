// engine/txn_id.h — transaction ids.
//
// A transaction id names a transaction's ActiveTransaction document and owns its document
// references and pessimistic locks, so two transactions must never share one: not between
// threads, not between processes on one store, and not between a process and a child it
// fork()ed. Ids are 96 bits from a per-thread generator seeded from the kernel's random
// source; a child process reseeds before its first id (engine/txn_id.cpp).
//
// Thread safety: NewTxnId may be called from any number of threads at once; it takes no lock.
#pragma once

#include <string>

namespace litetx::engine {

// A fresh transaction id: 24 random lowercase hex digits. Never fails.
std::string NewTxnId();

}  // namespace litetx::engine
