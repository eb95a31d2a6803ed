// engine/coordinator.h — runs the commit protocol (the litesoft model) for one Database.
//
// Commit, for a transaction of N write actions:
//   0. read every document in one Store::Batch (waiting while another transaction holds
//      one), check the preconditions and compute the worklist with its reversing data;
//   1. create the ActiveTransaction document (state pending, GC timestamp now + lease);
//   2. apply every action in one batch, each a compare-and-swap on the revision read in step
//      0, setting the reference to this transaction and bumping the version (a delete only
//      sets deleting); each apply that did not land is then handled on its own;
//   2b. re-read every checked document in one batch (optimistic validation);
//   3. CAS the record pending -> committed: the commit point;
//   4. clear the references, turning deletes into tombstones (one batch);
//   5. replace the record by a small outcome marker (done), which Database::Outcome reads and
//      a collector erases after CollectorOptions::outcome_retention.
// With a Finisher in the Env (Options::finish_in_background), Commit returns after 3 and the
// finisher does 4 and 5 (engine/finisher.h).
// Failure before 3 rolls back (record -> aborted, reverse what was applied, outcome marker).
// A single action without checks skips all of it: one CAS writes the final document.
//
// Contention (engine/contention.h): a document found changed, held or locked at apply time is waited for under wait-die, evaluated again and its new
// reversing data recorded (one more record write) before it is written.
//
// Thread safety: Commit may run on many threads at once; each call has its own state.
#pragma once

#include <cstdint>
#include <string>

#include "engine/env.h"
#include "engine/txn_id.h"
#include "litetx/database.h"
#include "litetx/transaction.h"

namespace litetx::engine {

// Who a commit runs as. Database::Commit uses a fresh id and the current time; Database::Run
// passes the attempt's id (which owns its locks) and the start of its first attempt.
struct CommitRequest {
  std::string id;                // the transaction id; empty: a fresh one
  std::int64_t priority_ms = 0;  // wait-die age; 0: now
  bool holding_locks = false;    // the transaction already holds pessimistic locks
};

class Coordinator {
 public:
  explicit Coordinator(Env env);

  // See Database::Commit for the outcomes.
  Result<CommitInfo> Commit(const Transaction& txn, CommitRequest request = {});

  // A fresh transaction id (engine/txn_id.h).
  static std::string NewTxnId() { return engine::NewTxnId(); }

 private:
  Env env_;
};

}  // namespace litetx::engine
