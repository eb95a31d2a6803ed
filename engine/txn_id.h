// engine/txn_id.h — transaction ids.
//
// A transaction id names a transaction's ActiveTransaction document and owns its document
// references and pessimistic locks, so two transactions must never share one: not between
// threads, not between processes on one store, and not between a process and a child it
// fork()ed.
//
// Thread safety: NewTxnId may be called from any number of threads at once.
#pragma once

#include <string>

namespace litetx::engine {

// A fresh transaction id: 24 random hex digits (96 bits).
std::string NewTxnId();

}  // namespace litetx::engine
