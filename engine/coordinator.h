// engine/coordinator.h — runs the commit protocol of seed 003 for one Database.
//
// Commit, for a transaction of N write actions:
//   0. read every document (waiting while another transaction holds one), check the
//      preconditions and compute the worklist with its reversing data;
//   1. create the ActiveTransaction document (state pending, GC timestamp now + lease);
//   2. apply each action with a compare-and-swap on the revision read in step 0, setting the
//      reference to this transaction and bumping the version (a delete only sets deleting);
//   2b. re-read every checked document (optimistic validation);
//   3. CAS the record pending -> committed: the commit point;
//   4. clear the references, turning deletes into tombstones;
//   5. replace the record by a small outcome marker (done), which Database::Outcome reads and
//      a collector erases after CollectorOptions::outcome_retention.
// Failure before 3 rolls back (record -> aborted, reverse what was applied, outcome marker).
// A single action without checks skips all of it: one CAS writes the final document.
//
// Thread safety: Commit may run on many threads at once; each call has its own state.
#pragma once

#include <mutex>
#include <random>
#include <string>

#include "engine/env.h"
#include "litetx/database.h"
#include "litetx/transaction.h"

namespace litetx::engine {

class Coordinator {
 public:
  explicit Coordinator(Env env);

  // See Database::Commit for the outcomes.
  Result<CommitInfo> Commit(const Transaction& txn);

  // A fresh transaction id: 24 random hex digits.
  std::string NewTxnId();

 private:
  Env env_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
};

}  // namespace litetx::engine
